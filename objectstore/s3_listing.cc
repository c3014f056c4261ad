// S3ObjectStore's listing: ListObjectsV2 pages, merged and followed until
// the caller's count (s3_object_store.h).

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/message_text.h"
#include "objectstore/s3_object_store.h"

namespace debugplane::objectstore {
namespace {

// A listing that goes on with this many empty pages in a row (IsTruncated
// with no keys) is refused: S3 may send a few, a broken server forever.
constexpr int kMaxEmptyPagesInARow = 100;
// S3's cap on keys per ListObjectsV2 page.
constexpr size_t kMaxKeysPerPage = 1000;

}  // namespace

absl::StatusOr<ListObjectsV2Page> S3ObjectStore::ListPage(const ListOptions& options,
                                                          const std::string& continuation_token,
                                                          size_t max_keys) const {
  // Parameters in canonical (byte) order, so that the URL is what SigV4
  // signs.
  std::vector<std::string> query;
  if (!continuation_token.empty()) {
    query.push_back(absl::StrCat("continuation-token=", S3UriEncode(continuation_token, false)));
  }
  if (!options.delimiter.empty()) {
    query.push_back(absl::StrCat("delimiter=", S3UriEncode(options.delimiter, false)));
  }
  // Keys come URL-encoded: XML 1.0 cannot carry every byte a key may hold.
  query.push_back("encoding-type=url");
  query.push_back("list-type=2");
  query.push_back(absl::StrCat("max-keys=", max_keys));
  query.push_back(absl::StrCat("prefix=", S3UriEncode(options.prefix, false)));
  if (continuation_token.empty() && !options.start_after.empty()) {
    query.push_back(absl::StrCat("start-after=", S3UriEncode(options.start_after, false)));
  }
  S3Request request;
  request.query = absl::StrJoin(query, "&");
  const S3Response response = transport_.Send(request);
  const std::string what = absl::StrCat("the listing of ", Describe(options.prefix));
  if (!response.success()) return ErrorStatus(response, what, request);
  absl::StatusOr<ListObjectsV2Page> page = ParseListObjectsV2(response.body);
  if (!page.ok()) {
    return absl::DataLossError(
        absl::StrCat(what, " at ", config_.endpoint, ": ", page.status().message()));
  }
  return page;
}

absl::StatusOr<ListResult> S3ObjectStore::List(const ListOptions& options) const {
  if (absl::Status status = ValidatePrefix(options.prefix); !status.ok()) return status;
  if (!options.delimiter.empty() && options.delimiter != "/") {
    return absl::InvalidArgumentError(
        absl::StrCat("list delimiter ", base::SingleQuoteForMessage(options.delimiter, 20),
                     ": only '/' (or none) is supported"));
  }
  ListResult result;
  const size_t wanted = std::max<size_t>(1, options.max_keys);
  size_t gathered = 0;
  std::string token;
  int empty_pages_in_a_row = 0;
  while (true) {
    // A common prefix equal to start_after comes back (S3 rolls the keys
    // after it up into it) and is dropped below: ask for one more.
    const size_t ask = std::min(kMaxKeysPerPage, wanted - gathered + 1);
    absl::StatusOr<ListObjectsV2Page> page = ListPage(options, token, ask);
    if (!page.ok()) return page.status();
    // Objects and common prefixes merged in key order, both after
    // start_after, until `wanted` of them are taken.
    size_t object = 0, common = 0;
    const auto& objects = page->objects;
    const auto& prefixes = page->common_prefixes;
    while (object < objects.size() || common < prefixes.size()) {
      const bool take_object = common >= prefixes.size() ||
                               (object < objects.size() && objects[object].key < prefixes[common]);
      const std::string& name = take_object ? objects[object].key : prefixes[common];
      if (!options.start_after.empty() && name <= options.start_after) {
        take_object ? ++object : ++common;
        continue;
      }
      if (gathered == wanted) {
        result.truncated = true;
        return result;
      }
      if (take_object) {
        result.objects.push_back(objects[object++]);
      } else {
        result.common_prefixes.push_back(prefixes[common++]);
      }
      result.next_start_after = name;
      ++gathered;
    }
    if (!page->truncated) return result;
    if (gathered == wanted) {
      result.truncated = true;
      return result;
    }
    empty_pages_in_a_row = objects.empty() && prefixes.empty() ? empty_pages_in_a_row + 1 : 0;
    if (absl::Status progress = CheckListingProgress(options, *page, token, empty_pages_in_a_row);
        !progress.ok()) {
      return progress;
    }
    token = page->next_continuation_token;
  }
}

absl::Status S3ObjectStore::CheckListingProgress(const ListOptions& options,
                                                 const ListObjectsV2Page& page,
                                                 const std::string& token,
                                                 int empty_pages_in_a_row) const {
  // A truncated page must say where the next one starts, somewhere new;
  // else the listing would be followed forever.
  std::string wrong;
  if (page.next_continuation_token.empty()) {
    wrong = "says IsTruncated without a NextContinuationToken";
  } else if (page.next_continuation_token == token) {
    wrong = "says IsTruncated and gives back the continuation token it was asked with";
  } else if (empty_pages_in_a_row > kMaxEmptyPagesInARow) {
    wrong = absl::StrCat("gave ", empty_pages_in_a_row,
                         " pages in a row without keys, each saying IsTruncated");
  }
  if (wrong.empty()) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("the listing of ", Describe(options.prefix), " at ",
                                          config_.endpoint, " ", wrong, "; it would never end"));
}

}  // namespace debugplane::objectstore
