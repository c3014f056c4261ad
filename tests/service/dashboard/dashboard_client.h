// Plain HTTP calls to the dashboard's API for tests (libcurl), with the
// reply's status, headers and body.

#ifndef DEBUGPLANE_TESTS_SERVICE_DASHBOARD_DASHBOARD_CLIENT_H_
#define DEBUGPLANE_TESTS_SERVICE_DASHBOARD_DASHBOARD_CLIENT_H_

#include <curl/curl.h>

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace debugplane::testing {

struct DashboardReply {
  long status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string error;  // curl's, if the transfer failed.

  // The first header `name` (any case), or "".
  std::string Header(absl::string_view name) const {
    for (const auto& [key, value] : headers) {
      if (absl::EqualsIgnoreCase(key, name)) return value;
    }
    return "";
  }
  nlohmann::json Json() const {
    return nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  }
};

inline size_t AppendReplyBody(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

inline size_t CollectReplyHeader(char* data, size_t size, size_t count, void* out) {
  const absl::string_view line(data, size * count);
  const size_t colon = line.find(':');
  if (colon != absl::string_view::npos) {
    static_cast<DashboardReply*>(out)->headers.emplace_back(
        std::string(absl::StripAsciiWhitespace(line.substr(0, colon))),
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
  }
  return size * count;
}

// `method url` with `headers` ("Name: value") and `body`.
inline DashboardReply CallDashboard(const std::string& method, const std::string& url,
                                    const std::vector<std::string>& headers = {},
                                    const std::string& body = "") {
  DashboardReply reply;
  CURL* curl = curl_easy_init();
  curl_slist* list = nullptr;
  for (const std::string& header : headers) list = curl_slist_append(list, header.c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (!body.empty() || method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AppendReplyBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &CollectReplyHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &reply);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 20L);
  const CURLcode code = curl_easy_perform(curl);
  if (code != CURLE_OK) reply.error = curl_easy_strerror(code);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.status);
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  return reply;
}

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SERVICE_DASHBOARD_DASHBOARD_CLIENT_H_
