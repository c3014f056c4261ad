#include "base/utc_time.h"

#include <ctime>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace debugplane::base {
namespace {

// Appends strftime(`format`) of `utc` (an empty piece is no output).
void AppendStrftime(const struct tm& utc, const std::string& format, std::string* out) {
  if (format.empty()) return;
  char buffer[256];
  const size_t length = strftime(buffer, sizeof(buffer), format.c_str(), &utc);
  out->append(buffer, length);
}

// Seconds ("05") and `digits` fraction digits of `nanos`: all of them for
// digits 1-9, those needed for -1 (%E*S).
std::string SecondsWithFraction(int seconds, int64_t nanos, int digits) {
  std::string out = absl::StrFormat("%02d", seconds);
  if (digits < 0) {
    if (nanos == 0) return out;
    std::string fraction = absl::StrFormat("%09d", nanos);
    fraction.erase(fraction.find_last_not_of('0') + 1);
    return absl::StrCat(out, ".", fraction);
  }
  int64_t scaled = nanos;
  for (int i = digits; i < 9; ++i) scaled /= 10;
  return absl::StrCat(out, ".", absl::StrFormat("%0*d", digits, scaled));
}

// The fraction digits of the %E<n>S / %E*S at format[i] ("%E..."), and its
// length; 0 when format[i] starts no such specifier.
size_t FractionSpecifier(absl::string_view format, size_t i, int* digits) {
  if (format.substr(i, 4) == "%E*S") {
    *digits = -1;
    return 4;
  }
  if (format.size() >= i + 4 && format.substr(i, 2) == "%E" && format[i + 2] >= '1' &&
      format[i + 2] <= '9' && format[i + 3] == 'S') {
    *digits = format[i + 2] - '0';
    return 4;
  }
  return 0;
}

}  // namespace

std::string FormatUtc(absl::Time time, absl::string_view format) {
  if (time == absl::InfiniteFuture()) return "infinite-future";
  if (time == absl::InfinitePast()) return "infinite-past";
  const int64_t whole = absl::ToUnixSeconds(time);  // Towards the infinite past.
  const int64_t nanos = absl::ToInt64Nanoseconds(time - absl::FromUnixSeconds(whole));
  const time_t seconds = static_cast<time_t>(whole);
  struct tm utc;
  if (gmtime_r(&seconds, &utc) == nullptr) return whole < 0 ? "infinite-past" : "infinite-future";
  std::string out, piece;
  for (size_t i = 0; i < format.size(); ++i) {
    int digits = 0;
    if (const size_t length = FractionSpecifier(format, i, &digits); length > 0) {
      AppendStrftime(utc, piece, &out);
      piece.clear();
      out += SecondsWithFraction(utc.tm_sec, nanos, digits);
      i += length - 1;
    } else if (format[i] == '%' && i + 1 < format.size()) {
      piece.append(format.data() + i, 2);  // "%%" stays one piece for strftime.
      ++i;
    } else {
      piece += format[i];
    }
  }
  AppendStrftime(utc, piece, &out);
  return out;
}

}  // namespace debugplane::base
