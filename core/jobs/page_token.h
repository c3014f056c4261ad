// The opaque NextToken of ListTrainingJobs.
//
// A token is the sort key of the last job returned (keyset pagination), so a
// page boundary stays correct while jobs are created or deleted: no job is
// returned twice and none that existed when listing started is skipped. It
// also carries a fingerprint of the query, so a token replayed with other
// filters is refused instead of silently returning the wrong page.

#ifndef DEBUGPLANE_CORE_JOBS_PAGE_TOKEN_H_
#define DEBUGPLANE_CORE_JOBS_PAGE_TOKEN_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "debugplane/v1/training_job.pb.h"

namespace debugplane::core {

struct PageToken {
  uint32_t query_fingerprint = 0;
  int64_t last_creation_time_us = 0;
  std::string last_status;  // e.g. "InProgress".
  std::string last_name;
};

// A fingerprint of the filters and sort of `request` (not of NextToken or
// MaxResults), stable across processes and restarts.
uint32_t QueryFingerprint(const v1::ListTrainingJobsRequest& request);

// URL-safe base64 text of `token`.
std::string EncodePageToken(const PageToken& token);

// Parses a token made by EncodePageToken. INVALID_ARGUMENT (field NextToken)
// if it is not one.
absl::StatusOr<PageToken> DecodePageToken(absl::string_view text);

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_JOBS_PAGE_TOKEN_H_
