// libFuzzer target: JsonScanner (rules_engine/smdebug/json_scanner.h) on
// arbitrary bytes, differentially: it must accept exactly what
// nlohmann::json::parse accepts (the parser it replaced), give the same
// strings, and say where it failed within the text. Also reads the bytes
// with the from_chars number grammar (the system metrics reader's).
//
// Build and run (see tfrecord_fuzzer.cc for the cmake line):
//   ninja -C /work/main/build-fuzz -j2 json_scanner_fuzzer
//   /work/main/build-fuzz/json_scanner_fuzzer -max_total_time=60 -max_len=4096

#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "rules_engine/smdebug/json_scanner.h"

using debugplane::rules_engine::JsonKind;
using debugplane::rules_engine::JsonNumbers;
using debugplane::rules_engine::JsonScanner;

namespace {

// Reads any value, checking each string and number against nlohmann's
// reading of the same bytes.
bool ReadChecked(JsonScanner& s, absl::string_view text) {
  if (s.NextKind() == JsonKind::kString) {
    const size_t start = s.offset();
    absl::string_view value;
    std::string scratch;
    if (!s.String(&value, &scratch)) return false;
    const absl::string_view token = text.substr(start, s.offset() - start);
    const nlohmann::json reference = nlohmann::json::parse(token.begin(), token.end(), nullptr,
                                                           /*allow_exceptions=*/false);
    if (!reference.is_string() || reference.get<std::string>() != value) abort();
    return true;
  }
  if (s.NextKind() == JsonKind::kObject) {
    return s.Object([&](absl::string_view) { return ReadChecked(s, text); });
  }
  if (s.NextKind() == JsonKind::kArray) return s.Array([&] { return ReadChecked(s, text); });
  return s.SkipValue();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  const bool reference =
      !nlohmann::json::parse(text.begin(), text.end(), nullptr, false).is_discarded();
  JsonScanner s(text);
  const bool scanned = ReadChecked(s, text) && s.AtEnd();
  // nlohmann has no depth limit; the scanner refuses deeper nesting.
  const bool too_deep =
      !scanned && absl::string_view(s.error_cause()).find("nesting") != absl::string_view::npos;
  if (scanned != reference && !too_deep) abort();
  if (!scanned && (s.error_offset() > size || s.DescribeError().empty())) abort();
  JsonScanner lenient(text, JsonNumbers::kFromChars);
  // A superset of JSON: what the strict grammar accepts, it accepts too.
  if (!(lenient.SkipValue() && lenient.AtEnd()) && scanned) abort();
  return 0;
}
