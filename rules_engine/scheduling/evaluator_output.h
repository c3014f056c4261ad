// What the custom evaluator runner keeps of an evaluator's output and how it
// turns it into a verdict's details: the bounded tail of the last lines
// (OutputTail), made valid UTF-8 without control characters (SanitizeUtf8),
// and cut to the API's limit on details (ComposeDetails).

#ifndef DEBUGPLANE_RULES_ENGINE_SCHEDULING_EVALUATOR_OUTPUT_H_
#define DEBUGPLANE_RULES_ENGINE_SCHEDULING_EVALUATOR_OUTPUT_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace debugplane::rules_engine {

// Longest RuleVerdict::details the runner produces (the API's limit).
inline constexpr size_t kEvaluatorMaxDetails = 1024;

namespace internal {

// The last lines of a process's output, with bounded memory: at most
// `max_lines` non-blank lines, each cut to at most kMaxLineBytes bytes,
// whatever the amount of output. A carriage return not followed by a newline
// discards the line so far (progress bars keep only their last state).
// Exposed for tests. Not thread-safe.
class OutputTail {
 public:
  static constexpr size_t kMaxLineBytes = 1024;

  explicit OutputTail(int max_lines);

  // Adds raw output bytes (any encoding; lines may span calls).
  void Append(absl::string_view data);

  // The kept lines, oldest first, then the unterminated last line if it is
  // not blank. Each is valid UTF-8 (invalid bytes and control characters
  // but tabs become '?'), without leading or trailing blanks; a line that
  // was cut ends in "...".
  std::vector<std::string> Lines() const;

  // Bytes passed to Append in all.
  uint64_t bytes_seen() const { return bytes_seen_; }

 private:
  void AppendToLine(absl::string_view text);
  void CompleteLine();
  void ResetLine();

  const size_t max_lines_;
  std::deque<std::string> lines_;
  std::string partial_;  // The current line so far (leading blanks dropped).
  bool partial_cut_ = false;
  bool pending_cr_ = false;  // The last byte was '\r'.
  uint64_t bytes_seen_ = 0;
};

// Makes `text` valid UTF-8 without control characters (other than tab and
// newline): each offending byte becomes '?'. Exposed for tests.
std::string SanitizeUtf8(absl::string_view text);

// `head`, then (when `lines` is not empty) ":\n" and the newest lines that
// fit in kEvaluatorMaxDetails bytes joined by '\n' ("...\n" first when older
// ones were left out). Cuts on UTF-8 boundaries. Exposed for tests.
std::string ComposeDetails(absl::string_view head, const std::vector<std::string>& lines);

}  // namespace internal

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SCHEDULING_EVALUATOR_OUTPUT_H_
