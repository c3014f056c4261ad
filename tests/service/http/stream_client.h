// A client of a streamed HTTP reply (server-sent events) for tests: libcurl
// on a thread of its own, the body collected as it arrives, so a test can
// wait for what it expects while the stream stays open.

#ifndef DEBUGPLANE_TESTS_SERVICE_HTTP_STREAM_CLIENT_H_
#define DEBUGPLANE_TESTS_SERVICE_HTTP_STREAM_CLIENT_H_

#include <curl/curl.h>

#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "re2/re2.h"

namespace debugplane::testing {

class StreamClient {
 public:
  // Starts `GET url` with `headers` ("Name: value") at once.
  explicit StreamClient(std::string url, std::vector<std::string> headers = {})
      : url_(std::move(url)), headers_(std::move(headers)) {
    thread_ = std::thread([this] { Run(); });
  }

  // Disconnects (if still connected) and waits for the transfer to end.
  ~StreamClient() {
    Disconnect();
    thread_.join();
  }

  StreamClient(const StreamClient&) = delete;
  StreamClient& operator=(const StreamClient&) = delete;

  // Aborts the transfer (the connection is closed).
  void Disconnect() { abort_ = true; }

  // Waits until the body contains `text`; true if it did within `timeout`.
  bool WaitFor(const std::string& text, absl::Duration timeout = absl::Seconds(5)) {
    absl::MutexLock lock(&mu_);
    auto has = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return absl::StrContains(body_, text) || done_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&has), timeout);
    return absl::StrContains(body_, text);
  }

  // Waits until some line of the body fully matches `pattern` (RE2); true
  // if one did within `timeout`.
  bool WaitForLine(const std::string& pattern, absl::Duration timeout = absl::Seconds(5)) {
    const RE2 re(pattern);
    absl::MutexLock lock(&mu_);
    auto has = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      for (absl::string_view line : absl::StrSplit(body_, '\n')) {
        if (RE2::FullMatch(std::string(line), re)) return true;
      }
      return done_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&has), timeout);
    for (absl::string_view line : absl::StrSplit(body_, '\n')) {
      if (RE2::FullMatch(std::string(line), re)) return true;
    }
    return false;
  }

  // Waits until the transfer ended; true if it did within `timeout`.
  bool WaitForEnd(absl::Duration timeout = absl::Seconds(5)) {
    absl::MutexLock lock(&mu_);
    auto ended = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return done_; };
    return mu_.AwaitWithTimeout(absl::Condition(&ended), timeout);
  }

  std::string body() const {
    absl::MutexLock lock(&mu_);
    return body_;
  }
  // The response headers (raw lines), once received.
  std::string header_text() const {
    absl::MutexLock lock(&mu_);
    return header_text_;
  }
  // curl's result once ended (CURLE_OK: the server ended the body cleanly).
  CURLcode result() const {
    absl::MutexLock lock(&mu_);
    return result_;
  }
  long status() const {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  static size_t OnBody(char* data, size_t size, size_t count, void* self) {
    auto* client = static_cast<StreamClient*>(self);
    absl::MutexLock lock(&client->mu_);
    client->body_.append(data, size * count);
    return size * count;
  }
  static size_t OnHeader(char* data, size_t size, size_t count, void* self) {
    auto* client = static_cast<StreamClient*>(self);
    absl::MutexLock lock(&client->mu_);
    client->header_text_.append(data, size * count);
    return size * count;
  }
  static int OnProgress(void* self, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return static_cast<StreamClient*>(self)->abort_ ? 1 : 0;
  }

  void Run() {
    CURL* curl = curl_easy_init();
    curl_slist* list = nullptr;
    for (const std::string& header : headers_) list = curl_slist_append(list, header.c_str());
    curl_easy_setopt(curl, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &OnBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, this);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &OnHeader);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, this);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &OnProgress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, this);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
    const CURLcode code = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(list);
    curl_easy_cleanup(curl);
    absl::MutexLock lock(&mu_);
    result_ = code;
    status_ = status;
    done_ = true;
  }

  const std::string url_;
  const std::vector<std::string> headers_;
  std::atomic<bool> abort_{false};
  mutable absl::Mutex mu_;
  std::string body_ ABSL_GUARDED_BY(mu_);
  std::string header_text_ ABSL_GUARDED_BY(mu_);
  CURLcode result_ ABSL_GUARDED_BY(mu_) = CURLE_OK;
  long status_ ABSL_GUARDED_BY(mu_) = 0;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SERVICE_HTTP_STREAM_CLIENT_H_
