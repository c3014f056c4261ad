// Notification sinks: where the Email and SMS rule actions are delivered.
//
// debugplane has no SNS; a notification is handed to the sinks the server is
// configured with: a webhook (an HTTP POST of a JSON document, for chat
// bots, paging services or an SMS gateway) and SMTP (an email to the
// action's address). Delivery is at least once: the dispatcher retries until
// a sink accepts, and a crash between a sink's acceptance and the durable
// record of it repeats the delivery, so every notification carries a stable
// `ActionId` (also as the `Idempotency-Key` header and the email's
// Message-ID) by which a receiver can drop repeats.
//
// Names in a notification come from requests (rule and job names); those
// stored by an older version may hold control characters. Nothing of them
// can add a header or a line: the Idempotency-Key percent-encodes every
// byte outside printable ASCII (and '%'); the mail's headers escape
// controls and encode non-ASCII as RFC 2047 encoded-words; the subject and
// the body's names escape controls C style (\r, \n, \xNN).
// Messages and details name a sink by its URL's scheme, host and port only
// (UrlForDisplay): a webhook URL's path often carries its secret.

#ifndef DEBUGPLANE_RULES_ENGINE_ACTIONS_NOTIFICATION_SINK_H_
#define DEBUGPLANE_RULES_ENGINE_ACTIONS_NOTIFICATION_SINK_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/jobs/rule_actions.h"

namespace debugplane::rules_engine {

// One notification of one rule action.
struct Notification {
  std::string action_id;  // Stable across retries and restarts.
  core::RuleActionType channel = core::RuleActionType::kEmail;  // kEmail or kSms.
  std::string endpoint;                                         // Email address or phone number.
  std::string training_job_name;
  std::string training_job_arn;
  std::string rule_configuration_name;
  std::string rule_evaluation_status;  // "IssuesFound".
  std::string status_details;          // What the rule found.
  absl::Time time;                     // When the rule found it.

  // A one-line summary, used as the email subject.
  std::string Subject() const;
  // The human-readable text: subject, details, job ARN.
  std::string Body() const;
  // The JSON document a webhook receives:
  // {"ActionId", "Action": "Email"|"SMS", "Endpoint", "TrainingJobName",
  //  "TrainingJobArn", "RuleConfigurationName", "RuleEvaluationStatus",
  //  "StatusDetails", "Subject", "Message", "Time" (RFC 3339)}.
  std::string ToJson() const;
};

// A receiver of notifications. Implementations are thread-safe.
class NotificationSink {
 public:
  virtual ~NotificationSink() = default;
  // Names the sink in action details and logs, e.g. "webhook
  // http://127.0.0.1:8080": UrlForDisplay of its URL, no path or
  // credentials.
  virtual std::string Describe() const = 0;
  // Whether this sink delivers notifications of `channel`.
  virtual bool Handles(core::RuleActionType channel) const = 0;
  // Delivers `notification`; blocks (the dispatcher calls it on its own
  // threads) for at most the sink's timeout.
  // Returns OK once the receiver accepted it; UNAVAILABLE (or
  // DEADLINE_EXCEEDED) for failures worth retrying (connection refused,
  // timeout, HTTP 5xx or 429, SMTP 4xx); FAILED_PRECONDITION for permanent
  // ones (HTTP 4xx, SMTP 5xx such as an unknown recipient). Messages name the
  // sink and the receiver's answer: its first 256 bytes, escaped (controls
  // and invalid UTF-8 as \xNN), since every reader of the job sees them.
  virtual absl::Status Deliver(const Notification& notification) = 0;
};

struct WebhookSinkOptions {
  std::string url;  // http:// or https://.
  absl::Duration timeout = absl::Seconds(10);
  // Also deliver SMS notifications (an SMS gateway behind the webhook).
  bool handle_sms = true;
};
// POSTs Notification::ToJson() with Content-Type application/json and an
// Idempotency-Key header; any 2xx answer is acceptance.
std::unique_ptr<NotificationSink> MakeWebhookSink(WebhookSinkOptions options);

struct SmtpSinkOptions {
  // smtps://host:port, or smtp://host:port: STARTTLS when offered, and
  // required (no mail without it) when `username` is set.
  std::string url;
  std::string from;      // Envelope and header sender address.
  std::string username;  // Optional AUTH credentials, sent only over TLS.
  std::string password;
  absl::Duration timeout = absl::Seconds(30);
};
// Sends Email notifications as a plain-text email to the action's address.
// With credentials, a server that does not offer STARTTLS fails the delivery
// (FAILED_PRECONDITION saying so) rather than receive them in the clear. An
// address with a space or a control character is refused (FAILED_PRECONDITION).
std::unique_ptr<NotificationSink> MakeSmtpSink(SmtpSinkOptions options);

// `url` as messages, details and logs show it: scheme, host and port only
// ("https://hooks.example.com"), without user information, path, query or
// fragment, which may carry secrets; controls escaped. "(not a URL)"
// without "://".
std::string UrlForDisplay(absl::string_view url);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_ACTIONS_NOTIFICATION_SINK_H_
