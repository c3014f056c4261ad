// SessionStore: random ids and CSRF tokens, idle expiry by the clock,
// sign-out, and the bound on sessions held.

#include "service/dashboard/session_store.h"

#include <memory>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "re2/re2.h"

namespace debugplane::service::dashboard {
namespace {

TEST(SessionStoreTest, IdsAndCsrfTokensAre256RandomBitsInBase64Url) {
  SessionStore store;
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    Session session = store.Create("AKID", "digest");
    EXPECT_TRUE(RE2::FullMatch(session.id, "[A-Za-z0-9_-]{43}")) << session.id;
    EXPECT_TRUE(RE2::FullMatch(session.csrf_token, "[A-Za-z0-9_-]{43}")) << session.csrf_token;
    EXPECT_NE(session.id, session.csrf_token);
    EXPECT_TRUE(seen.insert(session.id).second);
    EXPECT_TRUE(seen.insert(session.csrf_token).second);
  }
  EXPECT_EQ(store.size(), 100u);
}

TEST(SessionStoreTest, ASessionExpiresAfterTwelveHoursIdleAndUseKeepsItAlive) {
  auto clock = std::make_shared<base::FakeClock>();
  SessionStore store({.clock = clock});
  const Session session = store.Create("AKID", "digest");

  clock->Advance(absl::Hours(11) + absl::Minutes(59));
  std::optional<Session> found = store.Find(session.id);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->access_key_id, "AKID");
  EXPECT_EQ(found->csrf_token, session.csrf_token);
  EXPECT_EQ(found->last_used, clock->Now());

  // Used a moment ago: another eleven hours are fine.
  clock->Advance(absl::Hours(11));
  EXPECT_TRUE(store.Find(session.id).has_value());

  clock->Advance(absl::Hours(12) + absl::Seconds(1));
  EXPECT_FALSE(store.Find(session.id).has_value());
  EXPECT_EQ(store.size(), 0u) << "an expired session is dropped when found";
}

TEST(SessionStoreTest, SignOutRemovesOnlyThatSession) {
  SessionStore store;
  const Session a = store.Create("A", "x");
  const Session b = store.Create("B", "y");
  store.Remove(a.id);
  store.Remove("no-such-session");
  EXPECT_FALSE(store.Find(a.id).has_value());
  EXPECT_TRUE(store.Find(b.id).has_value());
  EXPECT_FALSE(store.Find("").has_value());
}

TEST(SessionStoreTest, BeyondTheLimitTheLeastRecentlyUsedSessionGoes) {
  auto clock = std::make_shared<base::FakeClock>();
  SessionStore store({.max_sessions = 3, .clock = clock});
  const Session first = store.Create("A", "x");
  clock->Advance(absl::Seconds(1));
  const Session second = store.Create("B", "x");
  clock->Advance(absl::Seconds(1));
  const Session third = store.Create("C", "x");
  clock->Advance(absl::Seconds(1));
  ASSERT_TRUE(store.Find(first.id).has_value());  // Now the most recently used.
  const Session fourth = store.Create("D", "x");
  EXPECT_EQ(store.size(), 3u);
  EXPECT_TRUE(store.Find(first.id).has_value());
  EXPECT_FALSE(store.Find(second.id).has_value());
  EXPECT_TRUE(store.Find(third.id).has_value());
  EXPECT_TRUE(store.Find(fourth.id).has_value());
}

// Signing in again and again with one valid key used to push every other
// key's sessions out once the store was full.
TEST(SessionStoreTest, OneKeySigningInAgainAndAgainEvictsOnlyItsOwnSessions) {
  auto clock = std::make_shared<base::FakeClock>();
  SessionStore store({.max_sessions = 10, .max_sessions_per_key = 3, .clock = clock});
  const Session a = store.Create("A", "x");
  const Session b = store.Create("B", "x");
  std::vector<Session> flood;
  for (int i = 0; i < 1000; ++i) {
    clock->Advance(absl::Seconds(1));
    flood.push_back(store.Create("FLOOD", "x"));
  }
  EXPECT_EQ(store.size(), 5u);
  EXPECT_TRUE(store.Find(a.id).has_value());
  EXPECT_TRUE(store.Find(b.id).has_value());
  // The key keeps its three most recent sessions.
  EXPECT_TRUE(store.Find(flood.back().id).has_value());
  EXPECT_TRUE(store.Find(flood[flood.size() - 3].id).has_value());
  EXPECT_FALSE(store.Find(flood[flood.size() - 4].id).has_value());
}

TEST(SessionStoreTest, AFullStoreTakesFromTheKeyWithTheMostSessions) {
  auto clock = std::make_shared<base::FakeClock>();
  SessionStore store({.max_sessions = 4, .max_sessions_per_key = 3, .clock = clock});
  const Session a = store.Create("A", "x");  // The least recently used of all.
  std::vector<Session> b;
  for (int i = 0; i < 3; ++i) {
    clock->Advance(absl::Seconds(1));
    b.push_back(store.Create("B", "x"));
  }
  clock->Advance(absl::Seconds(1));
  const Session c = store.Create("C", "x");
  EXPECT_EQ(store.size(), 4u);
  EXPECT_TRUE(store.Find(a.id).has_value());
  EXPECT_TRUE(store.Find(c.id).has_value());
  EXPECT_FALSE(store.Find(b[0].id).has_value());
  EXPECT_TRUE(store.Find(b[2].id).has_value());
}

}  // namespace
}  // namespace debugplane::service::dashboard
