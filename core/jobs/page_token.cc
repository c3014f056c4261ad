#include "core/jobs/page_token.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/jobs/field_violations.h"
#include "core/jobs/job_record.h"

namespace debugplane::core {
namespace {

constexpr absl::string_view kVersion = "p1";

uint32_t Fnv1a(absl::string_view data) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 16777619u;
  }
  return hash;
}

int64_t MicrosOrZero(bool present, const google::protobuf::Timestamp& ts) {
  return present ? ToUnixMicros(ts) : 0;
}

absl::Status BadToken(absl::string_view why) {
  return InvalidField("NextToken",
                      absl::StrCat(why,
                                   "; pass the NextToken of the previous response unchanged, "
                                   "with the same filters and sort"));
}

}  // namespace

uint32_t QueryFingerprint(const v1::ListTrainingJobsRequest& request) {
  const std::string canonical = absl::StrCat(
      absl::AsciiStrToLower(request.name_contains()), "|", request.status_equals(), "|",
      request.sort_by(), "|", request.sort_order(), "|",
      MicrosOrZero(request.has_creation_time_after(), request.creation_time_after()), "|",
      MicrosOrZero(request.has_creation_time_before(), request.creation_time_before()), "|",
      MicrosOrZero(request.has_last_modified_time_after(), request.last_modified_time_after()), "|",
      MicrosOrZero(request.has_last_modified_time_before(), request.last_modified_time_before()));
  return Fnv1a(canonical);
}

std::string EncodePageToken(const PageToken& token) {
  return absl::WebSafeBase64Escape(absl::StrCat(kVersion, ":", token.query_fingerprint, ":",
                                                token.last_creation_time_us, ":", token.last_status,
                                                ":", token.last_name));
}

absl::StatusOr<PageToken> DecodePageToken(absl::string_view text) {
  std::string raw;
  if (!absl::WebSafeBase64Unescape(text, &raw)) return BadToken("NextToken is not valid");
  // Names and status names contain no ':', so the split is unambiguous.
  std::vector<absl::string_view> parts = absl::StrSplit(raw, absl::MaxSplits(':', 4));
  PageToken token;
  if (parts.size() != 5 || parts[0] != kVersion ||
      !absl::SimpleAtoi(parts[1], &token.query_fingerprint) ||
      !absl::SimpleAtoi(parts[2], &token.last_creation_time_us)) {
    return BadToken("NextToken is not valid");
  }
  token.last_status = std::string(parts[3]);
  token.last_name = std::string(parts[4]);
  return token;
}

}  // namespace debugplane::core
