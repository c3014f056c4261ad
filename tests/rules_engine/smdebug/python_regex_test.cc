// smdebug's regular expressions with RE2 only (rules_engine/smdebug/python_regex.h):
// Python's match/search semantics, the one negative lookahead smdebug's
// default collections use, hostile patterns refused, and the bounded cache.

#include "rules_engine/smdebug/python_regex.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rules_engine/smdebug/step.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::shared_ptr<const PythonRegex> MustCompile(absl::string_view pattern) {
  absl::StatusOr<std::unique_ptr<const PythonRegex>> compiled = PythonRegex::Compile(pattern);
  EXPECT_TRUE(compiled.ok()) << pattern << ": " << compiled.status();
  return compiled.ok() ? std::shared_ptr<const PythonRegex>(*std::move(compiled)) : nullptr;
}

std::string ErrorOf(absl::string_view pattern) {
  absl::StatusOr<std::unique_ptr<const PythonRegex>> compiled = PythonRegex::Compile(pattern);
  if (compiled.ok()) return "";
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(compiled.status().message());
}

// "(((a)))" with `levels` groups, inside `prefix` ... ")" when given.
std::string NestedGroups(int levels, absl::string_view prefix = "") {
  std::string pattern(prefix);
  pattern += std::string(levels, '(') + "a" + std::string(levels, ')');
  if (!prefix.empty()) pattern += ")";
  return pattern;
}

TEST(PythonRegexTest, MatchIsAnchoredAtTheStartSearchIsNot) {
  auto loss = MustCompile("[Ll]oss");
  EXPECT_TRUE(loss->Search("train/Loss_0"));
  EXPECT_FALSE(loss->MatchPrefix("train/Loss_0"));
  EXPECT_TRUE(loss->MatchPrefix("loss"));
  auto gradient = MustCompile("^gradient");
  EXPECT_TRUE(gradient->Search("gradient/fc1.weight"));
  EXPECT_FALSE(gradient->Search("fc1/gradient"));
}

TEST(PythonRegexTest, LeadingNegativeLookaheadOfSmdebugsDefaultCollections) {
  auto weights = MustCompile("^(?!gradient).*weight");
  EXPECT_TRUE(weights->Search("Sequential_fc1.weight"));
  EXPECT_TRUE(weights->MatchPrefix("Sequential_fc1.weight"));
  EXPECT_FALSE(weights->Search("gradient/Sequential_fc1.weight"));
  EXPECT_FALSE(weights->Search("Sequential_fc1.bias"));
  // Alternatives, groups, escapes and classes inside the lookahead.
  auto either = MustCompile("^(?!grad|(lo(ss)))x");
  EXPECT_TRUE(either->Search("x1"));
  EXPECT_FALSE(either->MatchPrefix("gradx"));
  auto escaped = MustCompile(R"(^(?!\)|[)(])x?)");
  EXPECT_FALSE(escaped->MatchPrefix(")x"));
  EXPECT_FALSE(escaped->MatchPrefix("(x"));
  EXPECT_TRUE(escaped->MatchPrefix("x"));
  // "^(?!A)" alone: any text that does not start with A.
  auto not_gradient = MustCompile("^(?!gradient)");
  EXPECT_TRUE(not_gradient->Search("fc1"));
  EXPECT_FALSE(not_gradient->Search("gradient/fc1"));
}

TEST(PythonRegexTest, NegativeLookaheadAfterAPrefixAsInSmdebugsPyTorchLosses) {
  auto losses = MustCompile("[Ll]oss_(?!input).*output");
  EXPECT_TRUE(losses->Search("CrossEntropyLoss_output_0"));
  EXPECT_FALSE(losses->Search("CrossEntropyLoss_input_0"));
  EXPECT_FALSE(losses->Search("CrossEntropyLoss_input_0_output"));
  EXPECT_FALSE(losses->MatchPrefix("CrossEntropyLoss_output_0"));  // re.match: from the start.
  EXPECT_TRUE(losses->MatchPrefix("loss_output"));
  // A later occurrence of the prefix can satisfy the lookahead (Python
  // backtracks to it).
  EXPECT_TRUE(losses->Search("Loss_input/Loss_output"));
}

// What Python 3's re.search and re.match answer (computed with CPython 3.11)
// for patterns with one negative lookahead outside groups.
TEST(PythonRegexTest, NegativeLookaheadAgreesWithPython) {
  struct Case {
    const char* pattern;
    const char* text;
    bool search;
    bool match;
  };
  const Case cases[] = {
      {"[Ll]oss_(?!input).*output", "CrossEntropyLoss_output_0", true, false},
      {"[Ll]oss_(?!input).*output", "CrossEntropyLoss_input_0", false, false},
      {"[Ll]oss_(?!input).*output", "Loss_input/Loss_output", true, false},
      {"[Ll]oss_(?!input).*output", "loss_output", true, true},
      {"[Ll]oss_(?!input).*output", "Loss_inputoutput", false, false},
      {"^(?!gradient).*weight", "fc.weight", true, true},
      {"^(?!gradient).*weight", "gradient/fc.weight", false, false},
      {"^(?!gradient).*weight", "fc.bias", false, false},
      {"^(?!gradient).*weight", "", false, false},
      {"a+(?!b)c*$", "xaaac", true, false},
      {"a+(?!b)c*$", "aab", false, false},
      {"a+(?!b)c*$", "aa", true, true},
      {"(?!x)", "", true, true},
      {"(?!x)", "x", true, false},
      {"(?!x)", "ax", true, true},
      {"x(?!y)", "xy", false, false},
      {"x(?!y)", "xz", true, true},
      {"x(?!y)", "x", true, true},
      {"x(?!y)", "axyx", true, false},
      {"^(?!a|b)c.*", "cat", true, true},
      {"^(?!a|b)c.*", "acat", false, false},
      {"^(?!a|b)c.*", "bc", false, false},
      {"\\w+_(?!in)\\w*_0$", "relu_in_0", false, false},
      {"\\w+_(?!in)\\w*_0$", "relu_out_0", true, true},
      {"\\w+_(?!in)\\w*_0$", "relu_in_out_0", true, true},
      {"^(?!\\))x", ")x", false, false},
      {"^(?!\\))x", "x", true, true},
      {"^(?![)(])x?", "(x", false, false},
      {"^(?![)(])x?", ")x", false, false},
      {"^(?![)(])x?", "x", true, true},
      {"(?!é)\\w", "é", false, false},
      {"(?!é)\\w", "éa", true, false},
  };
  for (const Case& c : cases) {
    auto regex = MustCompile(c.pattern);
    ASSERT_NE(regex, nullptr) << c.pattern;
    EXPECT_EQ(regex->Search(c.text), c.search) << c.pattern << " search " << c.text;
    EXPECT_EQ(regex->MatchPrefix(c.text), c.match) << c.pattern << " match " << c.text;
  }
}

TEST(PythonRegexTest, OtherLookaroundsAndBackreferencesAreRefusedWithRe2sReason) {
  for (const char* pattern :
       {"(?<=x)y", "(?=a)b", "(a(?!b))", "^(?!a)b|c", "x|a(?!b)", "(a)\\1", "a(?!b)(?!c)"}) {
    EXPECT_NE(ErrorOf(pattern), "") << pattern;
  }
  EXPECT_THAT(ErrorOf("(?<=x)y"), AllOf(HasSubstr("invalid perl operator: (?<"),
                                        HasSubstr("only one negative lookahead outside groups")));
  // "^(?!A)x|y" means "(^(?!A)x)|y" in Python: not the supported shape.
  EXPECT_THAT(ErrorOf("^(?!a)b|c"), HasSubstr("invalid perl operator: (?!"));
  EXPECT_THAT(ErrorOf("^(?!a"), HasSubstr("(?!"));
  EXPECT_THAT(ErrorOf("^(?!a)(b"), HasSubstr("invalid perl operator: (?!"));
  // The supported shape with a part RE2 refuses: that part's error.
  EXPECT_THAT(ErrorOf("^(?!a)b["), HasSubstr("missing ]: ["));
}

TEST(PythonRegexTest, HostilePatternsAreRefusedWithinBounds) {
  // A lookahead around 1,500 nested groups (std::regex recursed per group).
  EXPECT_THAT(ErrorOf(NestedGroups(1500, "(?=")), HasSubstr("invalid perl operator: (?="));
  // Longer than kMaxRegexPatternBytes: refused before RE2 sees it.
  EXPECT_EQ(ErrorOf(NestedGroups(10000, "(?=")), "is 20005 bytes long; at most 4096 are allowed");
  // Within the length, RE2's memory budget (kRegexMaxMemBytes): each
  // [a-z]{1000} is a thousand instructions.
  std::string big;
  for (int i = 0; i < 100; ++i) big += "[a-z]{1000}";
  EXPECT_THAT(ErrorOf(big), HasSubstr("pattern too large"));
  // The supported lookahead around deep groups is fine for RE2.
  auto deep = MustCompile(absl::StrCat("^(?!", NestedGroups(1000), ")b"));
  EXPECT_TRUE(deep->MatchPrefix("b"));
  EXPECT_FALSE(deep->MatchPrefix("ab"));
  // RE2's error quotes the rest of the pattern: the message keeps an excerpt.
  const std::string unclosed = ErrorOf(absl::StrCat("(", std::string(4000, 'a')));
  EXPECT_THAT(unclosed, HasSubstr("missing ): (aaa"));
  EXPECT_LT(unclosed.size(), 400u);
  // Invalid UTF-8 is refused, and the message is valid UTF-8.
  EXPECT_THAT(ErrorOf("\xff\xfe"), HasSubstr("invalid UTF-8"));
}

TEST(RegexCacheTest, BoundsEntriesEvictingTheLeastRecentlyUsed) {
  RegexCache cache({.max_entries = 4, .max_pattern_bytes = 1 << 20});
  std::vector<std::shared_ptr<const PythonRegex>> first;
  for (int i = 0; i < 4; ++i) first.push_back(*cache.Get(absl::StrCat("p", i, ".*")));
  EXPECT_EQ(cache.entries(), 4u);
  EXPECT_EQ(*cache.Get("p0.*"), first[0]);  // A hit; p0 is now the most recent.
  ASSERT_TRUE(cache.Get("p4.*").ok());      // Evicts p1, the least recently used.
  EXPECT_EQ(cache.entries(), 4u);
  EXPECT_EQ(*cache.Get("p0.*"), first[0]);
  EXPECT_EQ(*cache.Get("p2.*"), first[2]);
  EXPECT_NE(*cache.Get("p1.*"), first[1]);  // Compiled again.
  // An evicted pattern a caller holds stays usable.
  EXPECT_TRUE(first[1]->MatchPrefix("p1x"));
}

TEST(RegexCacheTest, BoundsPatternBytes) {
  RegexCache cache({.max_entries = 1000, .max_pattern_bytes = 1000});
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(cache.Get(absl::StrCat(i, std::string(296, 'x'))).ok());
    EXPECT_LE(cache.pattern_bytes(), 1000u);
  }
  EXPECT_EQ(cache.entries(), 3u);
  EXPECT_EQ(cache.pattern_bytes(), 3 * 298u);
  // A pattern larger than the whole budget is compiled but not kept.
  RegexCache tiny({.max_entries = 10, .max_pattern_bytes = 10});
  auto large = tiny.Get(std::string(100, 'y'));
  ASSERT_TRUE(large.ok());
  EXPECT_TRUE((*large)->MatchPrefix(std::string(100, 'y')));
  EXPECT_EQ(tiny.entries(), 0u);
}

TEST(RegexCacheTest, RefusedPatternsAreNeverCached) {
  RegexCache cache({.max_entries = 100, .max_pattern_bytes = 1 << 20});
  for (int i = 0; i < 1000; ++i) {
    EXPECT_FALSE(cache.Get(absl::StrCat("(?<=", i, ")x")).ok());
    EXPECT_FALSE(cache.Get(absl::StrCat(i, std::string(20000, '('))).ok());
  }
  EXPECT_EQ(cache.entries(), 0u);
  EXPECT_EQ(cache.pattern_bytes(), 0u);
}

TEST(RegexCacheTest, SharedCacheStaysWithinItsDefaultBounds) {
  RegexCache& shared = RegexCache::Shared();
  // 2,000 distinct valid 1 KB patterns (the shared cache's default budget is
  // 256 entries and 256 KiB of patterns).
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(shared.Get(absl::StrCat(i, "-", std::string(1000, 'z'))).ok());
  }
  EXPECT_LE(shared.entries(), 256u);
  EXPECT_LE(shared.pattern_bytes(), 256u << 10);
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(shared.Get(absl::StrCat("short-", i)).ok());
  EXPECT_LE(shared.entries(), 256u);
}

TEST(RegexCacheTest, ConcurrentGetsAgree) {
  RegexCache cache({.max_entries = 8, .max_pattern_bytes = 1 << 20});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 500; ++i) {
        const int n = (i * 7 + t) % 16;
        auto regex = cache.Get(absl::StrCat("^(?!skip)n", n, "$"));
        ASSERT_TRUE(regex.ok());
        EXPECT_TRUE((*regex)->MatchPrefix(absl::StrCat("n", n)));
        EXPECT_FALSE((*regex)->MatchPrefix(absl::StrCat("skipn", n)));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(cache.entries(), 8u);
}

TEST(TrialInfoTest, CollectionsMatchWithPythonSearchAndTheirListedNames) {
  TrialInfo info;
  info.collections["weights"] = {"weights", {"^(?!gradient).*weight"}, {}};
  info.collections["losses"] = {"losses", {"[Ll]oss"}, {}};
  EXPECT_TRUE(info.InCollection("weights", "Sequential_fc1.weight"));
  EXPECT_FALSE(info.InCollection("weights", "gradient/Sequential_fc1.weight"));
  EXPECT_TRUE(info.InCollection("losses", "train/Loss_0"));
  EXPECT_FALSE(info.InCollection("losses", "fc1.weight"));
  EXPECT_THAT(info.CollectionPatternErrors(), IsEmpty());
}

TEST(TrialInfoTest, AnUnusablePatternInACollectionsFileMatchesNothingAndIsReported) {
  TrialInfo info;
  info.collections["odd"] = {"odd", {"(?<=x)y", "^z"}, {"listed"}};
  EXPECT_FALSE(info.InCollection("odd", "xy"));
  EXPECT_TRUE(info.InCollection("odd", "listed"));  // tensor_names still count,
  EXPECT_TRUE(info.InCollection("odd", "z1"));      // and the other patterns.
  EXPECT_THAT(info.CollectionPatternErrors(),
              ElementsAre(AllOf(HasSubstr("collection 'odd': include_regex '(?<=x)y' cannot be "
                                          "used (it matches nothing)"),
                                HasSubstr("invalid perl operator: (?<"))));
}

}  // namespace
}  // namespace debugplane::rules_engine
