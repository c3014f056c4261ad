// CLI input nested absurdly deep (issue 16): refused naming the source,
// never a crash (dump() and the unknown-field walk recurse per level).

#include <string>

#include "absl/strings/str_cat.h"
#include "client/cli/json_input.h"
#include "debugplane/v1/training_job.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::client {
namespace {

using ::testing::HasSubstr;

std::string Nested(int levels, absl::string_view inner = "1") {
  return absl::StrCat(std::string(levels, '['), inner, std::string(levels, ']'));
}

TEST(HostileJsonInputTest, DeepNestingIsRefusedNamingTheSource) {
  // 100,000 levels in a member protobuf never sees: before the limit, the
  // re-serialization overflowed the stack.
  const std::string deep =
      absl::StrCat(R"({"TrainingJobName": "j", "Tags": )", Nested(100000), "}");
  v1::CreateTrainingJobRequest request;
  absl::Status status = ParseJsonMessage(deep, "job.json", &request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "job.json: arrays and objects nested more than 100 levels deep");
  absl::StatusOr<std::string> stripped = StripJsonComments(Nested(100000), "<stdin>");
  EXPECT_EQ(stripped.status().message(),
            "<stdin>: arrays and objects nested more than 100 levels deep");
}

TEST(HostileJsonInputTest, TheLimitCountsWhatTheParserSeesNotCommentsOrStrings) {
  // 100 levels are fine; brackets in comments and strings do not count.
  EXPECT_TRUE(StripJsonComments(Nested(100), "f").ok());
  EXPECT_FALSE(StripJsonComments(Nested(101), "f").ok());
  const std::string decoys =
      absl::StrCat("// ", std::string(500, '['), "\n/* ", std::string(500, '{'), " */ [\"",
                   std::string(500, '['), "\"]");
  absl::StatusOr<std::string> stripped = StripJsonComments(decoys, "f");
  ASSERT_TRUE(stripped.ok()) << stripped.status();
  // A quote inside a comment does not hide what follows.
  const std::string hidden = absl::StrCat("[ // \"\n", Nested(200), "]");
  EXPECT_THAT(StripJsonComments(hidden, "f").status().message(),
              HasSubstr("nested more than 100 levels deep"));
}

}  // namespace
}  // namespace debugplane::client
