#include "rules_engine/actions/notification_sink.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"

namespace debugplane::rules_engine {
namespace {

// `time` in UTC with strftime's `format`. gmtime_r rather than absl's time
// zones: absl loads zones lazily behind a lock that Debian's abseil hides
// from TSan, and notifications are formatted on several threads.
std::string FormatUtc(absl::Time time, const char* format) {
  const time_t seconds = absl::ToTimeT(time);
  struct tm utc;
  gmtime_r(&seconds, &utc);
  char buffer[64];
  const size_t length = strftime(buffer, sizeof(buffer), format, &utc);
  return std::string(buffer, length);
}

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct CurlHandle {
  CURL* curl = curl_easy_init();
  curl_slist* headers = nullptr;
  char error[CURL_ERROR_SIZE] = {};
  ~CurlHandle() {
    curl_slist_free_all(headers);
    if (curl != nullptr) curl_easy_cleanup(curl);
  }
};

// Drops the response body; keeps its first bytes for error messages.
size_t KeepPrefix(char* data, size_t size, size_t count, void* user) {
  auto* out = static_cast<std::string*>(user);
  const size_t bytes = size * count;
  if (out->size() < 200) out->append(data, std::min(bytes, 200 - out->size()));
  return bytes;
}

// The URL without user information, for messages.
std::string Redact(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t at = url.find('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme) return url;
  return url.substr(0, scheme + 3) + url.substr(at + 1);
}

absl::Status TransportError(const std::string& sink, CURLcode code, const char* detail) {
  const std::string message =
      absl::StrCat(sink, ": ", detail[0] != '\0' ? detail : curl_easy_strerror(code));
  return code == CURLE_OPERATION_TIMEDOUT ? absl::DeadlineExceededError(message)
                                          : absl::UnavailableError(message);
}

class WebhookSink final : public NotificationSink {
 public:
  explicit WebhookSink(WebhookSinkOptions options) : options_(std::move(options)) {
    InitCurlOnce();
  }

  std::string Describe() const override { return absl::StrCat("webhook ", Redact(options_.url)); }

  bool Handles(core::RuleActionType channel) const override {
    return channel == core::RuleActionType::kEmail ||
           (channel == core::RuleActionType::kSms && options_.handle_sms);
  }

  absl::Status Deliver(const Notification& notification) override {
    CurlHandle handle;
    if (handle.curl == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
    const std::string body = notification.ToJson();
    std::string answer;
    handle.headers = curl_slist_append(handle.headers, "Content-Type: application/json");
    handle.headers = curl_slist_append(
        handle.headers, absl::StrCat("Idempotency-Key: ", notification.action_id).c_str());
    CURL* curl = handle.curl;
    curl_easy_setopt(curl, CURLOPT_URL, options_.url.c_str());
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, handle.headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(absl::ToInt64Milliseconds(options_.timeout)));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, KeepPrefix);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, handle.error);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "debugplane");
    const CURLcode code = curl_easy_perform(curl);
    if (code != CURLE_OK) return TransportError(Describe(), code, handle.error);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300) return absl::OkStatus();
    const std::string message =
        absl::StrCat(Describe(), " answered HTTP ", status, answer.empty() ? "" : ": ", answer);
    // 408 and 429 ask to come back later, 5xx may pass; other 4xx will not.
    if (status == 408 || status == 429 || status >= 500) return absl::UnavailableError(message);
    return absl::FailedPreconditionError(message);
  }

 private:
  const WebhookSinkOptions options_;
};

struct UploadSource {
  const std::string* data;
  size_t offset = 0;
};

size_t ReadUpload(char* buffer, size_t size, size_t count, void* user) {
  auto* source = static_cast<UploadSource*>(user);
  const size_t n = std::min(size * count, source->data->size() - source->offset);
  std::memcpy(buffer, source->data->data() + source->offset, n);
  source->offset += n;
  return n;
}

class SmtpSink final : public NotificationSink {
 public:
  explicit SmtpSink(SmtpSinkOptions options) : options_(std::move(options)) { InitCurlOnce(); }

  std::string Describe() const override { return absl::StrCat("smtp ", Redact(options_.url)); }

  bool Handles(core::RuleActionType channel) const override {
    return channel == core::RuleActionType::kEmail;
  }

  absl::Status Deliver(const Notification& notification) override {
    CurlHandle handle;
    if (handle.curl == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
    const std::string message = Message(notification);
    UploadSource source{&message};
    handle.headers = curl_slist_append(handle.headers, notification.endpoint.c_str());
    CURL* curl = handle.curl;
    curl_easy_setopt(curl, CURLOPT_URL, options_.url.c_str());
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
    curl_easy_setopt(curl, CURLOPT_MAIL_FROM, absl::StrCat("<", options_.from, ">").c_str());
    curl_easy_setopt(curl, CURLOPT_MAIL_RCPT, handle.headers);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, ReadUpload);
    curl_easy_setopt(curl, CURLOPT_READDATA, &source);
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_USE_SSL, static_cast<long>(CURLUSESSL_TRY));
    if (!options_.username.empty()) {
      curl_easy_setopt(curl, CURLOPT_USERNAME, options_.username.c_str());
      curl_easy_setopt(curl, CURLOPT_PASSWORD, options_.password.c_str());
    }
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(absl::ToInt64Milliseconds(options_.timeout)));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, handle.error);
    const CURLcode code = curl_easy_perform(curl);
    if (code == CURLE_OK) return absl::OkStatus();
    long reply = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply);
    if (reply >= 500) {
      // 5xx: the server refuses for good (unknown recipient, relay denied).
      return absl::FailedPreconditionError(
          absl::StrCat(Describe(), " refused the email to ", notification.endpoint, " (", reply,
                       "): ", handle.error[0] != '\0' ? handle.error : curl_easy_strerror(code)));
    }
    return TransportError(Describe(), code, handle.error);
  }

 private:
  std::string Message(const Notification& notification) const {
    // Lines of an SMTP message end in CRLF; a lone "." line would end it.
    std::string body = absl::StrReplaceAll(notification.Body(), {{"\r", ""}});
    body = absl::StrReplaceAll(body, {{"\n.", "\n.."}, {"\n", "\r\n"}});
    return absl::StrCat(
        "From: ", options_.from, "\r\nTo: ", notification.endpoint,
        "\r\nSubject: ", notification.Subject(),
        "\r\nDate: ", FormatUtc(notification.time, "%a, %d %b %Y %H:%M:%S +0000"),
        "\r\nMessage-ID: <", absl::StrReplaceAll(notification.action_id, {{"/", "."}}),
        "@debugplane>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n", body, "\r\n");
  }

  const SmtpSinkOptions options_;
};

}  // namespace

std::string Notification::Subject() const {
  return absl::StrCat("debugplane: rule ", rule_configuration_name,
                      " found issues in training job ", training_job_name);
}

std::string Notification::Body() const {
  return absl::StrCat(
      Subject(), "\n\n", status_details.empty() ? rule_evaluation_status : status_details,
      "\n\nTraining job: ", training_job_arn, "\nRule: ", rule_configuration_name, " (",
      rule_evaluation_status, ")\nAt: ", FormatUtc(time, "%Y-%m-%dT%H:%M:%SZ"),
      "\nAction: ", action_id, "\n");
}

std::string Notification::ToJson() const {
  nlohmann::json json = {
      {"ActionId", action_id},
      {"Action", std::string(core::RuleActionTypeName(channel))},
      {"Endpoint", endpoint},
      {"TrainingJobName", training_job_name},
      {"TrainingJobArn", training_job_arn},
      {"RuleConfigurationName", rule_configuration_name},
      {"RuleEvaluationStatus", rule_evaluation_status},
      {"StatusDetails", status_details},
      {"Subject", Subject()},
      {"Message", Body()},
      {"Time", FormatUtc(time, "%Y-%m-%dT%H:%M:%SZ")},
  };
  // Replace invalid UTF-8 rather than throw: details may quote tensor names.
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::unique_ptr<NotificationSink> MakeWebhookSink(WebhookSinkOptions options) {
  return std::make_unique<WebhookSink>(std::move(options));
}

std::unique_ptr<NotificationSink> MakeSmtpSink(SmtpSinkOptions options) {
  return std::make_unique<SmtpSink>(std::move(options));
}

}  // namespace debugplane::rules_engine
