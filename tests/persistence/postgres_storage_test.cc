// PostgresStorage against a real PostgreSQL (PostgresTestServer): schema and
// migrations, errors for what a user gets wrong, and a database that goes
// away and comes back. The Storage contract itself is storage_engines_test.cc.

#include "persistence/postgres/postgres_storage.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/postgres/postgres_connection.h"
#include "persistence/postgres/postgres_migrations.h"
#include "spdlog/spdlog.h"
#include "tests/persistence/persistence_test_util.h"
#include "tests/persistence/postgres_test_server.h"
#include "tests/support/wait_until.h"

namespace debugplane::persistence {
namespace {

using ::debugplane::persistence::testing::MakeRow;
using ::debugplane::persistence::testing::ReadAll;
using ::debugplane::testing::PostgresTestServer;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// A loopback port nothing listens on (bound, then closed).
int UnusedLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

class PostgresStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = PostgresTestServer::Start();
    // A PostgreSQL that cannot start fails the test: it never skips.
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto database = server_->CreateDatabase();
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = *database;
  }

  std::string Query(const std::string& sql) {
    auto value = server_->Query(database_, sql);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? *value : "";
  }

  std::unique_ptr<PostgresStorage> OpenOrDie() {
    auto storage = PostgresStorage::Open(server_->Uri(database_));
    EXPECT_TRUE(storage.ok()) << storage.status();
    return storage.ok() ? *std::move(storage) : nullptr;
  }

  std::unique_ptr<PostgresTestServer> server_;
  std::string database_;
};

TEST_F(PostgresStorageTest, OpenCreatesTheSchemaAtTheCurrentVersion) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  EXPECT_EQ(storage->schema_version(), 4);
  EXPECT_EQ(storage->schema_version(), kPostgresSchemaVersion);
  EXPECT_EQ(Query("SELECT version FROM schema_version"), "4");
  EXPECT_EQ(Query("SELECT count(*) FROM schema_version"), "1");
  // Bytewise names whatever the database's collation, as in SQLite.
  EXPECT_EQ(Query("SELECT collation_name FROM information_schema.columns WHERE "
                  "table_name = 'training_jobs' AND column_name = 'name'"),
            "C");
  EXPECT_EQ(Query("SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes "
                  "WHERE tablename = 'training_jobs'"),
            "training_jobs_by_creation_time,training_jobs_by_status,training_jobs_pkey");
  EXPECT_EQ(storage->Describe(),
            absl::StrCat("postgresql://debugplane@", server_->address(), "/", database_));
}

TEST_F(PostgresStorageTest, MigrationStepsAreContiguousAndEndAtTheCurrentVersion) {
  const auto steps = PostgresMigrations();
  ASSERT_FALSE(steps.empty());
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].to_version, static_cast<int>(i) + 1);
  }
  EXPECT_EQ(steps.back().to_version, kPostgresSchemaVersion);
}

TEST_F(PostgresStorageTest, SessionsCommitSynchronously) {
  // Even where the server's default is off, debugplane's sessions wait for
  // the WAL flush.
  Query(absl::StrCat("ALTER DATABASE ", database_, " SET synchronous_commit = off"));
  auto connection = PostgresConnection::Connect(*ParsePostgresTarget(server_->Uri(database_)), {});
  ASSERT_TRUE(connection.ok()) << connection.status();
  auto setting = (*connection)->Exec("SHOW synchronous_commit", "reading the setting");
  ASSERT_TRUE(setting.ok()) << setting.status();
  EXPECT_STREQ(PQgetvalue(setting->get(), 0, 0), "on");
}

TEST_F(PostgresStorageTest, ConcurrentOpensOfAFreshDatabaseAllSucceedWithOneSchema) {
  constexpr int kServers = 8;
  std::vector<absl::StatusOr<std::unique_ptr<PostgresStorage>>> opened(kServers);
  std::vector<std::thread> threads;
  std::atomic<bool> go = false;
  // spdlog's registry is built at the process's first log call, inside
  // libspdlog, which is not TSan-instrumented: TSan takes the threads'
  // concurrent first logs for a race on it. The server logs before it
  // starts threads, and so does this test.
  spdlog::default_logger_raw();
  for (int i = 0; i < kServers; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      opened[i] = PostgresStorage::Open(server_->Uri(database_));
    });
  }
  go = true;
  for (std::thread& thread : threads) thread.join();
  for (const auto& storage : opened) {
    ASSERT_TRUE(storage.ok()) << storage.status();
    EXPECT_EQ((*storage)->schema_version(), kPostgresSchemaVersion);
  }
  EXPECT_EQ(Query("SELECT count(*) FROM schema_version"), "1");
  EXPECT_EQ(Query("SELECT version FROM schema_version"), absl::StrCat(kPostgresSchemaVersion));
  EXPECT_EQ(Query("SELECT count(*) FROM pg_tables WHERE tablename = 'training_jobs'"), "1");
  // Every one of them works on the one table.
  for (int i = 0; i < kServers; ++i) {
    WriteBatch batch;
    batch.Put(MakeRow(absl::StrCat("from-", i), i));
    ASSERT_TRUE((*opened[i])->Write(batch).ok());
  }
  EXPECT_EQ(Query("SELECT count(*) FROM training_jobs"), absl::StrCat(kServers));
}

TEST_F(PostgresStorageTest, ADatabaseOfANewerSchemaIsRefusedNamingBothVersions) {
  Query(
      "CREATE TABLE schema_version (singleton boolean PRIMARY KEY DEFAULT true, "
      "version integer NOT NULL); INSERT INTO schema_version (version) VALUES (99)");
  auto storage = PostgresStorage::Open(server_->Uri(database_));
  ASSERT_EQ(storage.status().code(), absl::StatusCode::kFailedPrecondition) << storage.status();
  EXPECT_THAT(
      storage.status().message(),
      AllOf(HasSubstr(database_), HasSubstr(server_->address()), HasSubstr("schema version 99"),
            HasSubstr(absl::StrCat("schema version ", kPostgresSchemaVersion, " "))));
  EXPECT_EQ(Query("SELECT count(*) FROM pg_tables WHERE tablename = 'training_jobs'"), "0");
  EXPECT_EQ(Query("SELECT version FROM schema_version"), "99");
}

TEST_F(PostgresStorageTest, AWrongPasswordIsPermissionDeniedNamingUserAndDatabaseNotPassword) {
  const std::string wrong = "wrong-secret-4711";
  const std::string uri =
      absl::StrCat("postgresql://debugplane:", wrong, "@", server_->address(), "/", database_);
  auto storage = PostgresStorage::Open(uri);
  ASSERT_EQ(storage.status().code(), absl::StatusCode::kPermissionDenied) << storage.status();
  EXPECT_THAT(storage.status().message(),
              AllOf(HasSubstr("user 'debugplane'"), HasSubstr(absl::StrCat("'", database_, "'")),
                    HasSubstr(server_->address()), HasSubstr("password authentication failed"),
                    Not(HasSubstr(wrong)), Not(HasSubstr(server_->password()))));
}

TEST_F(PostgresStorageTest, AMissingDatabaseIsNotFoundSayingSo) {
  auto storage = PostgresStorage::Open(server_->Uri("no_such_database"));
  ASSERT_EQ(storage.status().code(), absl::StatusCode::kNotFound) << storage.status();
  EXPECT_THAT(storage.status().message(),
              AllOf(HasSubstr("no database 'no_such_database'"), HasSubstr(server_->address()),
                    Not(HasSubstr(server_->password()))));
}

TEST_F(PostgresStorageTest, AnUnreachablePortIsUnavailableNamingTheAddress) {
  const std::string address = absl::StrCat("127.0.0.1:", UnusedLoopbackPort());
  const std::string uri =
      absl::StrCat("postgresql://debugplane:", server_->password(), "@", address, "/", database_);
  auto storage = PostgresStorage::Open(uri, {.pool_size = 1, .connect_timeout = absl::Seconds(2)});
  ASSERT_EQ(storage.status().code(), absl::StatusCode::kUnavailable) << storage.status();
  EXPECT_THAT(storage.status().message(), AllOf(HasSubstr(address), HasSubstr("Connection refused"),
                                                Not(HasSubstr(server_->password()))));
}

TEST_F(PostgresStorageTest, AnInvalidConnectionStringIsInvalidArgumentWithoutThePassword) {
  auto storage = PostgresStorage::Open("postgresql://debugplane:hunter2secret@[::1/db");
  ASSERT_EQ(storage.status().code(), absl::StatusCode::kInvalidArgument) << storage.status();
  EXPECT_THAT(storage.status().message(), Not(HasSubstr("hunter2secret")));
  auto key_value = PostgresStorage::Open("host=x password='hunter2 secret' port=");
  EXPECT_FALSE(key_value.ok());
  EXPECT_THAT(key_value.status().message(), Not(HasSubstr("hunter2")));
}

TEST(PostgresConnectionStringTest, PasswordsAreRedacted) {
  EXPECT_EQ(RedactConnectionString("postgresql://u:s3cr%40t@db:5432/x?sslmode=require"),
            "postgresql://u:***@db:5432/x?sslmode=require");
  EXPECT_EQ(RedactConnectionString("postgres://u@db/x?password=s3cret&sslmode=verify-full"),
            "postgres://u@db/x?password=***&sslmode=verify-full");
  EXPECT_EQ(RedactConnectionString("host=db password = 'a b c' user=u"),
            "host=db password = *** user=u");
  EXPECT_EQ(RedactConnectionString("host=db user=u"), "host=db user=u");
}

TEST(PostgresConnectionStringTest, TheTargetNamesAddressUserAndDatabase) {
  auto target =
      ParsePostgresTarget("postgresql://alice:pw@db.example:6543/jobs?sslmode=verify-full");
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->address, "db.example:6543");
  EXPECT_EQ(target->user, "alice");
  EXPECT_EQ(target->database, "jobs");
  EXPECT_EQ(target->Describe(), "postgresql://alice@db.example:6543/jobs");
  EXPECT_EQ(target->Redact("password pw was refused"), "password *** was refused");
  auto key_value = ParsePostgresTarget("host=10.0.0.5 port=5433 user=bob dbname=dp");
  ASSERT_TRUE(key_value.ok()) << key_value.status();
  EXPECT_EQ(key_value->Describe(), "postgresql://bob@10.0.0.5:5433/dp");
}

// A writer that writes one new row per batch until told to stop, keeping
// what was acknowledged and every error.
class Writer {
 public:
  explicit Writer(Storage& storage) : thread_([this, &storage] { Run(storage); }) {}
  ~Writer() { Finish(); }

  void Finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int acknowledged_count() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(acknowledged_.size());
  }
  // Blocks until `count` more writes than now were acknowledged (each
  // signals; no polling); false after `timeout`.
  bool WaitForMoreAcknowledged(int count, absl::Duration timeout) {
    const size_t target = acknowledged_count() + count;
    const absl::Time until = absl::Now() + timeout;
    absl::MutexLock lock(&mu_);
    while (acknowledged_.size() < target) {
      if (changed_.WaitWithTimeout(&mu_, until - absl::Now())) {
        return acknowledged_.size() >= target;
      }
    }
    return true;
  }
  std::set<std::string> acknowledged() {
    absl::MutexLock lock(&mu_);
    return acknowledged_;
  }
  std::vector<absl::Status> errors() {
    absl::MutexLock lock(&mu_);
    return errors_;
  }

 private:
  void Run(Storage& storage) {
    for (int i = 0; !stop_.load(); ++i) {
      const std::string name = absl::StrCat("job-", i);
      WriteBatch batch;
      batch.Put(MakeRow(name, i));
      absl::Status written = storage.Write(batch);
      {
        absl::MutexLock lock(&mu_);
        if (written.ok()) {
          acknowledged_.insert(name);
          changed_.SignalAll();
        } else {
          errors_.push_back(written);
        }
      }
      if (!written.ok()) absl::SleepFor(absl::Milliseconds(20));  // The outage: do not spin.
    }
  }

  std::atomic<bool> stop_ = false;
  absl::Mutex mu_;
  absl::CondVar changed_;  // An acknowledgement was added.
  std::set<std::string> acknowledged_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> errors_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

class PostgresRestartTest : public PostgresStorageTest,
                            public ::testing::WithParamInterface<PostgresTestServer::StopMode> {};

INSTANTIATE_TEST_SUITE_P(StopModes, PostgresRestartTest,
                         ::testing::Values(PostgresTestServer::StopMode::kFast,
                                           PostgresTestServer::StopMode::kImmediate),
                         [](const auto& info) {
                           return info.param == PostgresTestServer::StopMode::kFast ? "Fast"
                                                                                    : "Immediate";
                         });

TEST_P(PostgresRestartTest, WritesFailUnavailableDuringARestartAndEveryAcknowledgedOneSurvives) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  Writer writer(*storage);
  ASSERT_TRUE(writer.WaitForMoreAcknowledged(20, absl::Seconds(30)));

  ASSERT_TRUE(server_->Stop(GetParam()).ok());
  const int before_outage = writer.acknowledged_count();
  // A few writes tried (and refused) during the outage.
  ::debugplane::testing::WaitUntil([&] { return writer.errors().size() >= 5; }, absl::Seconds(1));
  // Nothing can be acknowledged while the server is down.
  EXPECT_LE(writer.acknowledged_count(), before_outage + 1);  // One may have been in COMMIT.
  EXPECT_FALSE(writer.errors().empty());
  ASSERT_TRUE(server_->StartAgain().ok());

  // Recovery needs no reopening: the next calls connect anew.
  EXPECT_TRUE(writer.WaitForMoreAcknowledged(20, absl::Seconds(30)));
  writer.Finish();

  for (const absl::Status& error : writer.errors()) {
    EXPECT_EQ(error.code(), absl::StatusCode::kUnavailable) << error;
    EXPECT_THAT(error.message(),
                AllOf(HasSubstr(server_->address()), Not(HasSubstr(server_->password()))));
  }
  // Every acknowledged write is there, read through a new storage.
  storage.reset();
  storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  auto rows = ReadAll(*storage);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::set<std::string> stored;
  for (const JobRow& row : *rows) stored.insert(row.name);
  for (const std::string& name : writer.acknowledged()) {
    EXPECT_TRUE(stored.contains(name)) << name << " was acknowledged but is missing";
  }
}

TEST_F(PostgresStorageTest, AReadAfterARestartReconnects) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  WriteBatch batch;
  batch.Put(MakeRow("a", 1));
  ASSERT_TRUE(storage->Write(batch).ok());
  ASSERT_TRUE(server_->Stop().ok());
  auto down = ReadAll(*storage);
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
  EXPECT_THAT(down.status().message(), HasSubstr(server_->address()));
  ASSERT_TRUE(server_->StartAgain().ok());
  auto rows = ReadAll(*storage);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].name, "a");
}

// Wakes counted, and waited for.
class WakeCounter {
 public:
  void Wake() {
    absl::MutexLock lock(&mu_);
    ++wakes_;
  }
  // Waits until more than `seen` wakes came; false after 10 s.
  bool WaitForMoreThan(int seen) {
    return ::debugplane::testing::WaitUntil([&] { return wakes() > seen; }, absl::Seconds(10));
  }
  int wakes() {
    absl::MutexLock lock(&mu_);
    return wakes_;
  }

 private:
  absl::Mutex mu_;
  int wakes_ ABSL_GUARDED_BY(mu_) = 0;
};

// LISTEN/NOTIFY: a commit by another server (another storage) wakes the
// subscriber; after a restart of the database the listener reconnects and
// wakes it again, as notifications sent meanwhile are lost.
TEST_F(PostgresStorageTest, ASubscriberIsWokenByCommitsAndAgainAfterItsListenerReconnects) {
  auto follower = OpenOrDie();
  auto writer = OpenOrDie();
  ASSERT_NE(follower, nullptr);
  ASSERT_NE(writer, nullptr);
  WakeCounter counter;
  auto subscription = follower->SubscribeToChanges([&counter] { counter.Wake(); });
  ASSERT_NE(subscription, nullptr);
  // The first (re)connection wakes it once.
  ASSERT_TRUE(counter.WaitForMoreThan(0));
  const int connected = counter.wakes();
  WriteBatch batch;
  batch.Put(MakeRow("a", 1));
  ASSERT_TRUE(writer->Write(batch).ok());
  EXPECT_TRUE(counter.WaitForMoreThan(connected)) << "no NOTIFY reached the listener";

  // A rolled-back batch (a version conflict) notifies nobody.
  const int before_conflict = counter.wakes();
  WriteBatch conflict;
  conflict.Put(MakeRow("a", 2), 7);
  ASSERT_EQ(writer->Write(conflict).code(), absl::StatusCode::kAborted);
  // Real time, on purpose: a wake that must not come leaves nothing to wait
  // on, so the test gives it 300 ms to come.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(counter.wakes(), before_conflict);

  // Counted before the stop: the listener may be back (and have woken)
  // before StartAgain returns. Nothing commits meanwhile.
  const int before_restart = counter.wakes();
  ASSERT_TRUE(server_->Stop(PostgresTestServer::StopMode::kImmediate).ok());
  WriteBatch during;
  during.Put(MakeRow("b", 1));
  EXPECT_EQ(writer->Write(during).code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(server_->StartAgain().ok());
  // The reconnection wakes it (a catch-up read), without any commit.
  EXPECT_TRUE(counter.WaitForMoreThan(before_restart)) << "no wake after the reconnection";
  auto changes = follower->ReadChangesAfter(0, 100);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_EQ(changes->size(), 1u);
  // And commits reach it again.
  const int after_restart = counter.wakes();
  ASSERT_TRUE(writer->Write(during).ok());
  EXPECT_TRUE(counter.WaitForMoreThan(after_restart));
}

}  // namespace
}  // namespace debugplane::persistence
