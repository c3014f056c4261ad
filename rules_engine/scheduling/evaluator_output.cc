#include "rules_engine/scheduling/evaluator_output.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/utf8.h"

namespace debugplane::rules_engine {
namespace {

bool IsBlankByte(char c) { return c == ' ' || c == '\t'; }

bool IsBlank(absl::string_view text) { return std::all_of(text.begin(), text.end(), IsBlankByte); }

// What OutputTail keeps of the raw line `segment` (without its '\n'): a
// trailing '\r' belongs to a CRLF line end; an earlier one starts the line
// over.
absl::string_view VisiblePart(absl::string_view segment) {
  if (!segment.empty() && segment.back() == '\r') segment.remove_suffix(1);
  const size_t cr = segment.rfind('\r');
  if (cr != absl::string_view::npos) segment.remove_prefix(cr + 1);
  return segment;
}

// The longest prefix of valid UTF-8 `text` of at most `max` bytes that does
// not end inside a character.
absl::string_view CutUtf8(absl::string_view text, size_t max) {
  if (text.size() <= max) return text;
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

// `raw` without a trailing incomplete UTF-8 sequence (left by cutting a line
// at a byte limit): better dropped than shown as '?'.
absl::string_view DropIncompleteTail(absl::string_view raw) {
  for (size_t back = 1; back <= 4 && back <= raw.size(); ++back) {
    const unsigned char c = static_cast<unsigned char>(raw[raw.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // Continuation byte: look further back.
    const size_t length = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (length > back) raw.remove_suffix(back);
    break;
  }
  return raw;
}

std::string TrimTrailingBlanks(std::string text) {
  while (!text.empty() && IsBlankByte(text.back())) text.pop_back();
  return text;
}

}  // namespace

namespace internal {

std::string SanitizeUtf8(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      const bool control = (c < 0x20 && c != '\t' && c != '\n') || c == 0x7F;
      out.push_back(control ? '?' : static_cast<char>(c));
      ++i;
      continue;
    }
    const size_t length = base::Utf8MultibyteSequenceLength(text.substr(i));
    if (length > 0) {
      out.append(text.data() + i, length);
      i += length;
    } else {
      out.push_back('?');
      ++i;
    }
  }
  return out;
}

std::string ComposeDetails(absl::string_view head, const std::vector<std::string>& lines) {
  std::string text = SanitizeUtf8(head);
  if (lines.empty()) {
    if (text.size() > kEvaluatorMaxDetails) {
      text = absl::StrCat(CutUtf8(text, kEvaluatorMaxDetails - 3), "...");
    }
    return text;
  }
  // The head is short in practice; leave the output at least half.
  constexpr size_t kMaxHead = kEvaluatorMaxDetails / 2;
  if (text.size() > kMaxHead) text = absl::StrCat(CutUtf8(text, kMaxHead - 3), "...");
  if (!text.empty()) text += ":\n";
  constexpr absl::string_view kOmitted = "...\n";
  const size_t budget = kEvaluatorMaxDetails - text.size();

  std::vector<std::string> clean;
  clean.reserve(lines.size());
  for (const std::string& line : lines) clean.push_back(SanitizeUtf8(line));
  // Newest first, while they fit (keeping room for kOmitted while older
  // lines remain).
  size_t first = clean.size();
  size_t used = 0;
  while (first > 0) {
    const size_t need = clean[first - 1].size() + (used > 0 ? 1 : 0);
    const size_t marker = first - 1 > 0 ? kOmitted.size() : 0;
    if (used + need + marker > budget) break;
    used += need;
    --first;
  }
  if (first == clean.size()) {
    // Not even the newest line fits whole: cut it.
    const size_t marker = clean.size() > 1 ? kOmitted.size() : 0;
    if (marker > 0) absl::StrAppend(&text, kOmitted);
    return absl::StrCat(text, CutUtf8(clean.back(), budget - marker - 3), "...");
  }
  if (first > 0) absl::StrAppend(&text, kOmitted);
  absl::StrAppend(&text, absl::StrJoin(clean.begin() + first, clean.end(), "\n"));
  return text;
}

OutputTail::OutputTail(int max_lines) : max_lines_(static_cast<size_t>(std::max(max_lines, 0))) {}

void OutputTail::Append(absl::string_view data) {
  bytes_seen_ += data.size();
  if (max_lines_ == 0) return;
  // Only the last max_lines_ non-blank complete lines of `data` can survive
  // it: skip everything before them without looking at it (an evaluator
  // printing gigabytes costs one backward scan per chunk, no allocations).
  const size_t last_newline = data.rfind('\n');
  if (last_newline != absl::string_view::npos) {
    size_t count = 0;
    size_t end = last_newline;  // The segment is [start, end).
    while (true) {
      const size_t previous = end == 0 ? absl::string_view::npos : data.rfind('\n', end - 1);
      const size_t start = previous == absl::string_view::npos ? 0 : previous + 1;
      if (!IsBlank(VisiblePart(data.substr(start, end - start))) && ++count == max_lines_) {
        if (start > 0) {
          // The lines kept so far and the current one end before `start`.
          lines_.clear();
          ResetLine();
          data.remove_prefix(start);
        }
        break;
      }
      if (previous == absl::string_view::npos) break;
      end = previous;
    }
  }
  size_t pos = 0;
  while (pos < data.size()) {
    if (pending_cr_) {
      pending_cr_ = false;
      if (data[pos] != '\n') ResetLine();  // A lone '\r': the line starts over.
    }
    const size_t hit = data.find_first_of("\r\n", pos);
    const size_t end = hit == absl::string_view::npos ? data.size() : hit;
    AppendToLine(data.substr(pos, end - pos));
    if (hit == absl::string_view::npos) break;
    if (data[hit] == '\n') {
      CompleteLine();
    } else {
      pending_cr_ = true;
    }
    pos = hit + 1;
  }
}

void OutputTail::AppendToLine(absl::string_view text) {
  if (partial_.empty()) {
    // Leading blanks are dropped as they come, so that a long run of them
    // cannot fill the line before its text.
    while (!text.empty() && IsBlankByte(text.front())) text.remove_prefix(1);
  }
  if (text.empty()) return;
  const size_t room = kMaxLineBytes - partial_.size();
  if (text.size() > room) {
    partial_.append(text.data(), room);
    partial_cut_ = true;
  } else {
    partial_.append(text.data(), text.size());
  }
}

namespace {
std::string MakeLine(const std::string& raw, bool cut) {
  std::string line =
      TrimTrailingBlanks(SanitizeUtf8(cut ? DropIncompleteTail(raw) : absl::string_view(raw)));
  if (cut) line += "...";
  return line;
}
}  // namespace

void OutputTail::CompleteLine() {
  if (!partial_.empty()) {
    lines_.push_back(MakeLine(partial_, partial_cut_));
    if (lines_.size() > max_lines_) lines_.pop_front();
  }
  ResetLine();
}

void OutputTail::ResetLine() {
  partial_.clear();
  partial_cut_ = false;
  pending_cr_ = false;
}

std::vector<std::string> OutputTail::Lines() const {
  std::vector<std::string> lines(lines_.begin(), lines_.end());
  if (!partial_.empty()) {
    lines.push_back(MakeLine(partial_, partial_cut_));
    if (lines.size() > max_lines_) lines.erase(lines.begin());
  }
  return lines;
}

}  // namespace internal

}  // namespace debugplane::rules_engine
