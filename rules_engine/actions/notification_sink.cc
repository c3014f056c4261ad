#include "rules_engine/actions/notification_sink.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <mutex>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "base/message_text.h"
#include "base/utc_time.h"
#include "core/jobs/validation_text.h"
#include "nlohmann/json.hpp"

namespace debugplane::rules_engine {
namespace {

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

// How much of a receiver's answer is kept for the action's details (which
// every reader of the job sees): its first bytes, escaped.
constexpr size_t kMaxEchoedAnswerBytes = 256;

// Drops the response body; keeps its first bytes for error messages (one
// more than echoed, so that the echo shows it was cut).
size_t KeepPrefix(char* data, size_t size, size_t count, void* user) {
  auto* out = static_cast<std::string*>(user);
  const size_t bytes = size * count;
  const size_t limit = kMaxEchoedAnswerBytes + 1;
  if (out->size() < limit) out->append(data, std::min(bytes, limit - out->size()));
  return bytes;
}

// An HTTP header value made of `text`: every byte that is not printable
// ASCII or a space, and '%' itself, percent-encoded (%XX), so no byte of it
// can end the header line or start another, and distinct texts stay
// distinct.
std::string HttpHeaderValue(absl::string_view text) {
  std::string out;
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f || c == '%') {
      absl::StrAppendFormat(&out, "%%%02X", c);
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

// A mail header's value (RFC 5322/2047) made of `text`: controls escaped
// (EscapeControls), then, if anything is not ASCII, encoded as UTF-8
// "B" encoded-words of at most 75 characters, folded onto continuation
// lines; a header can neither end early nor carry another.
std::string MailHeaderValue(absl::string_view text) {
  const std::string one_line = base::EscapeControlCharacters(text);
  if (std::all_of(one_line.begin(), one_line.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
    return one_line;
  }
  // 45 bytes encode to 60 characters; with "=?UTF-8?B?" and "?=", 72.
  constexpr size_t kChunk = 45;
  std::string out;
  size_t start = 0;
  while (start < one_line.size()) {
    size_t end = std::min(one_line.size(), start + kChunk);
    // Not in the middle of a character: each encoded-word must decode alone.
    while (end < one_line.size() && end > start + 1 &&
           (static_cast<unsigned char>(one_line[end]) & 0xC0) == 0x80) {
      --end;
    }
    if (!out.empty()) out += "\r\n ";
    absl::StrAppend(&out, "=?UTF-8?B?", absl::Base64Escape(one_line.substr(start, end - start)),
                    "?=");
    start = end;
  }
  return out;
}

// The receiver's answer as the action's details show it: at most
// kMaxEchoedAnswerBytes, escaped, valid UTF-8 on one line.
std::string EchoedAnswer(absl::string_view answer) {
  return core::EscapeForMessage(answer, kMaxEchoedAnswerBytes);
}

absl::Status TransportError(const std::string& sink, CURLcode code, const char* detail) {
  const std::string message =
      absl::StrCat(sink, ": ", detail[0] != '\0' ? EchoedAnswer(detail) : curl_easy_strerror(code));
  return code == CURLE_OPERATION_TIMEDOUT ? absl::DeadlineExceededError(message)
                                          : absl::UnavailableError(message);
}

class WebhookSink final : public NotificationSink {
 public:
  explicit WebhookSink(WebhookSinkOptions options) : options_(std::move(options)) {
    InitCurlOnce();
  }

  std::string Describe() const override {
    return absl::StrCat("webhook ", UrlForDisplay(options_.url));
  }

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
        handle.headers,
        absl::StrCat("Idempotency-Key: ", HttpHeaderValue(notification.action_id)).c_str());
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
        absl::StrCat(Describe(), " answered HTTP ", status, answer.empty() ? "" : ": ",
                     answer.empty() ? "" : EchoedAnswer(answer));
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

  std::string Describe() const override {
    return absl::StrCat("smtp ", UrlForDisplay(options_.url));
  }

  bool Handles(core::RuleActionType channel) const override {
    return channel == core::RuleActionType::kEmail;
  }

  absl::Status Deliver(const Notification& notification) override {
    // A line break in the address would add SMTP commands to RCPT TO.
    if (!IsSafeAddress(notification.endpoint)) {
      return absl::FailedPreconditionError(
          absl::StrCat(Describe(), ": the address ", core::QuoteForMessage(notification.endpoint),
                       " contains a space or a control character; no email was sent"));
    }
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
    // Credentials travel only encrypted: with a user, TLS is required
    // (smtps://, or STARTTLS on smtp://); without, STARTTLS is used when
    // offered.
    const bool sends_credentials = !options_.username.empty();
    curl_easy_setopt(curl, CURLOPT_USE_SSL,
                     static_cast<long>(sends_credentials ? CURLUSESSL_ALL : CURLUSESSL_TRY));
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
    if (code == CURLE_USE_SSL_FAILED) {
      return absl::FailedPreconditionError(absl::StrCat(
          Describe(),
          " does not offer STARTTLS, and --smtp-user credentials are sent only over TLS; use "
          "smtps:// or a server that offers STARTTLS (no email was sent)"));
    }
    long reply = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply);
    if (reply >= 500) {
      // 5xx: the server refuses for good (unknown recipient, relay denied).
      return absl::FailedPreconditionError(absl::StrCat(
          Describe(), " refused the email to ", notification.endpoint, " (", reply,
          "): ", handle.error[0] != '\0' ? EchoedAnswer(handle.error) : curl_easy_strerror(code)));
    }
    return TransportError(Describe(), code, handle.error);
  }

 private:
  static bool IsSafeAddress(absl::string_view address) {
    return !address.empty() && std::none_of(address.begin(), address.end(), [](char c) {
      return absl::ascii_iscntrl(static_cast<unsigned char>(c)) || c == ' ';
    });
  }

  // The Message-ID's left part: the ActionId with '/' as '.' and any byte
  // that a Message-ID may not hold percent-encoded.
  static std::string MessageIdOf(absl::string_view action_id) {
    std::string out;
    for (const char c : action_id) {
      if (c == '/') {
        out.push_back('.');
      } else if (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                 c == '_') {
        out.push_back(c);
      } else {
        absl::StrAppendFormat(&out, "%%%02X", static_cast<unsigned char>(c));
      }
    }
    return out;
  }

  std::string Message(const Notification& notification) const {
    // Lines of an SMTP message end in CRLF. libcurl doubles a line's
    // leading "." on the wire itself (so a lone "." cannot end the data);
    // doing it here too made it "..." at the reader.
    std::string body = absl::StrReplaceAll(notification.Body(), {{"\r", ""}});
    body = absl::StrReplaceAll(body, {{"\n", "\r\n"}});
    return absl::StrCat(
        "From: ", MailHeaderValue(options_.from),
        "\r\nTo: ", MailHeaderValue(notification.endpoint),
        "\r\nSubject: ", MailHeaderValue(notification.Subject()),
        "\r\nDate: ", base::FormatUtc(notification.time, "%a, %d %b %Y %H:%M:%S +0000"),
        "\r\nMessage-ID: <", MessageIdOf(notification.action_id),
        "@debugplane>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n", body, "\r\n");
  }

  const SmtpSinkOptions options_;
};

}  // namespace

std::string UrlForDisplay(absl::string_view url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == absl::string_view::npos) return "(not a URL)";
  absl::string_view authority = url.substr(scheme_end + 3);
  authority = authority.substr(0, authority.find_first_of("/?#"));
  // User information ends at the authority's last '@'.
  if (const size_t at = authority.rfind('@'); at != absl::string_view::npos) {
    authority.remove_prefix(at + 1);
  }
  return base::EscapeControlCharacters(absl::StrCat(url.substr(0, scheme_end), "://", authority));
}

std::string Notification::Subject() const {
  return absl::StrCat("debugplane: rule ", base::EscapeControlCharacters(rule_configuration_name),
                      " found issues in training job ",
                      base::EscapeControlCharacters(training_job_name));
}

std::string Notification::Body() const {
  return absl::StrCat(Subject(), "\n\n",
                      base::EscapeControlCharacters(
                          status_details.empty() ? rule_evaluation_status : status_details,
                          /*keep_line_feeds=*/true),
                      "\n\nTraining job: ", base::EscapeControlCharacters(training_job_arn),
                      "\nRule: ", base::EscapeControlCharacters(rule_configuration_name), " (",
                      base::EscapeControlCharacters(rule_evaluation_status),
                      ")\nAt: ", base::FormatUtc(time, "%Y-%m-%dT%H:%M:%SZ"),
                      "\nAction: ", base::EscapeControlCharacters(action_id), "\n");
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
      {"Time", base::FormatUtc(time, "%Y-%m-%dT%H:%M:%SZ")},
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
