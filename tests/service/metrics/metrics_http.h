// Helpers of the GET /metrics tests: a plain HTTP GET (libcurl) and reading
// one sample of the text exposition.

#ifndef DEBUGPLANE_TESTS_SERVICE_METRICS_METRICS_HTTP_H_
#define DEBUGPLANE_TESTS_SERVICE_METRICS_METRICS_HTTP_H_

#include <curl/curl.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace debugplane::testing {

struct HttpReply {
  long status = 0;  // 0: no reply (connection failed).
  std::string body;
  std::string headers;  // The raw header block, lines as received.
};

inline size_t AppendTo(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// GET `url` with `headers` ("Name: value"), 10 s at most.
inline HttpReply HttpGet(const std::string& url, const std::vector<std::string>& headers = {}) {
  HttpReply reply;
  CURL* curl = curl_easy_init();
  curl_slist* list = nullptr;
  for (const std::string& header : headers) list = curl_slist_append(list, header.c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AppendTo);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &AppendTo);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &reply.headers);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  if (curl_easy_perform(curl) == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.status);
  }
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  return reply;
}

// The value of the sample `series` (name and labels exactly as exposed, e.g.
// `debugplane_jobs{status="InProgress"}`) in the exposition `text`; nullopt
// if it is not there.
inline std::optional<double> Sample(absl::string_view text, absl::string_view series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, series) || !absl::ConsumePrefix(&line, " ")) continue;
    double value;
    if (absl::SimpleAtod(absl::StripAsciiWhitespace(line), &value)) return value;
  }
  return std::nullopt;
}

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SERVICE_METRICS_METRICS_HTTP_H_
