// The verdict -> status mapping and the status details text.

#include "rules_engine/scheduling/rule_verdicts.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;

// Whether `text` is well-formed UTF-8 (no sequence cut short).
bool IsValidUtf8(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : 4;
    if (i + length > text.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

TEST(RuleVerdictsTest, StatusOfEveryVerdictKind) {
  EXPECT_EQ(StatusOf(RuleVerdict::Kind::kIssuesFound), v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_EQ(StatusOf(RuleVerdict::Kind::kNoIssuesFound), v1::RuleEvaluationStatus::NoIssuesFound);
  EXPECT_EQ(StatusOf(RuleVerdict::Kind::kError), v1::RuleEvaluationStatus::Error);
}

TEST(RuleVerdictsTest, ShortDetailsAreKept) {
  const std::string text = "loss is NaN at step 3 (\xE2\x82\xAC)";
  EXPECT_EQ(SanitizeStatusDetails(text), text);
  const std::string exact(kMaxStatusDetailsBytes, 'x');
  EXPECT_EQ(SanitizeStatusDetails(exact), exact);
}

TEST(RuleVerdictsTest, LongDetailsAreCutOnACharacterBoundary) {
  // A three-byte character (the euro sign) straddles every possible cut:
  // the old cut at byte 1021 left half of one.
  for (size_t offset = 0; offset < 3; ++offset) {
    std::string text(offset, 'a');
    while (text.size() < 2 * kMaxStatusDetailsBytes) text += "\xE2\x82\xAC";
    const std::string cut = SanitizeStatusDetails(text);
    EXPECT_LE(cut.size(), kMaxStatusDetailsBytes) << offset;
    EXPECT_GE(cut.size(), kMaxStatusDetailsBytes - 3 - 2) << offset;
    EXPECT_THAT(cut, EndsWith("...")) << offset;
    EXPECT_TRUE(IsValidUtf8(cut)) << "offset " << offset;
  }
}

TrialSummary SummaryWithTensors(std::vector<std::string> names) {
  TrialSummary summary;
  summary.path = "/data/trial";
  summary.exists = true;
  summary.has_collections = true;
  summary.steps_seen = 12;
  summary.last_global_step = 11;
  summary.tensor_names_seen = std::move(names);
  return summary;
}

TEST(RuleVerdictsTest, TrialDescriptionAddsTheTensorsTheErrorDoesNotName) {
  const std::string details = ErrorWithTrialDescription(
      "no tensor matched 'gradient/.*'", SummaryWithTensors({"loss_output_0", "relu_input_0"}));
  EXPECT_EQ(details,
            "no tensor matched 'gradient/.*'. Read: /data/trial has 12 steps (last global step "
            "11) with tensors [loss_output_0, relu_input_0]");
}

TEST(RuleVerdictsTest, TrialDescriptionDoesNotRepeatTensorsTheErrorNames) {
  const std::string error =
      "loss_output_0 and relu_input_0 were saved without values; read 12 TRAIN steps";
  const std::string details =
      ErrorWithTrialDescription(error, SummaryWithTensors({"loss_output_0", "relu_input_0"}));
  EXPECT_THAT(details, Not(HasSubstr("tensors [")));
  EXPECT_EQ(details, error + ". Read: /data/trial has 12 steps (last global step 11)");
}

TEST(RuleVerdictsTest, TrialDescriptionIsNotAppendedTwice) {
  const TrialSummary summary = SummaryWithTensors({"loss_output_0"});
  const std::string error = "nothing usable: " + DescribeTrial(summary);
  EXPECT_EQ(ErrorWithTrialDescription(error, summary), error);
}

TEST(RuleVerdictsTest, MissingTrialIsDescribed) {
  TrialSummary summary;
  summary.path = "/data/none";
  EXPECT_THAT(ErrorWithTrialDescription("no data", summary),
              HasSubstr("no data. Read: the directory /data/none does not exist"));
}

}  // namespace
}  // namespace debugplane::rules_engine
