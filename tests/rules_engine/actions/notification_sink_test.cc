// The notification sinks against real loopback receivers, fed names with
// line breaks directly (as a record stored by a version that did not refuse
// them would feed them): no header, mail header or SMTP command can be
// injected; URLs are shown without path or credentials; receivers' answers
// are echoed bounded and escaped; credentials go over TLS only.

#include "rules_engine/actions/notification_sink.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/rules_engine/actions/fake_receivers.h"

namespace debugplane::rules_engine {
namespace {

using ::debugplane::testing::FakeHttpReceiver;
using ::debugplane::testing::FakeSmtpReceiver;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kHostileRule[] = "Loss\r\nBcc: evil@example.com\r\n\r\nForged body";

Notification HostileNotification() {
  Notification notification;
  notification.action_id = "job-a/Loss\r\nX-Injected: yes/0";
  notification.channel = core::RuleActionType::kEmail;
  notification.endpoint = "ml@example.com";
  notification.training_job_name = "job-a";
  notification.training_job_arn = "arn:aws:sagemaker:local:000000000000:training-job/job-a";
  notification.rule_configuration_name = kHostileRule;
  notification.rule_evaluation_status = "IssuesFound";
  notification.status_details = "loss is NaN\nat step 3\r\n.\r\nQUIT";
  notification.time = absl::FromUnixSeconds(1750000000);
  return notification;
}

// The header lines of a mail's data (up to the first empty line), and the
// body's lines.
struct MailParts {
  std::vector<std::string> headers;
  std::vector<std::string> body;
};
MailParts Split(const std::string& data) {
  MailParts parts;
  bool in_body = false;
  for (absl::string_view line : absl::StrSplit(data, "\r\n")) {
    if (!in_body && line.empty()) {
      in_body = true;
    } else {
      (in_body ? parts.body : parts.headers).emplace_back(line);
    }
  }
  return parts;
}

bool HasControlCharacter(absl::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  }
  return false;
}

TEST(WebhookSinkTest, ALineBreakInTheActionIdAddsNoHeader) {
  FakeHttpReceiver receiver;
  auto sink = MakeWebhookSink({.url = receiver.url()});
  const Notification notification = HostileNotification();
  ASSERT_TRUE(sink->Deliver(notification).ok());
  auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 1u);
  for (const std::string& header : requests[0].headers) {
    EXPECT_THAT(header, Not(StartsWith("X-Injected"))) << header;
  }
  EXPECT_THAT(requests[0].headers, Contains("Idempotency-Key: job-a/Loss%0D%0AX-Injected: yes/0"));
  // The JSON document carries the names as they are, JSON-escaped.
  auto json = nlohmann::json::parse(requests[0].body);
  EXPECT_EQ(json["ActionId"], notification.action_id);
  EXPECT_EQ(json["RuleConfigurationName"], kHostileRule);
  EXPECT_FALSE(HasControlCharacter(json["Subject"].get<std::string>()));
}

TEST(WebhookSinkTest, DescriptionsAndErrorsShowSchemeHostAndPortOnly) {
  EXPECT_EQ(UrlForDisplay("https://user:pw@hooks.example.com:8443/services/T/B/SECRET?k=v#f"),
            "https://hooks.example.com:8443");
  EXPECT_EQ(UrlForDisplay("http://hooks.example.com/SECRET"), "http://hooks.example.com");
  EXPECT_EQ(UrlForDisplay("http://[::1]:8080?token=SECRET"), "http://[::1]:8080");
  EXPECT_EQ(UrlForDisplay("smtp://u:p@mail.example.com:587"), "smtp://mail.example.com:587");
  EXPECT_EQ(UrlForDisplay("no-scheme/SECRET"), "(not a URL)");

  FakeHttpReceiver receiver;
  receiver.Script({400});
  // A long answer with line breaks, controls and invalid UTF-8.
  std::string answer = "bad request\r\nX-Forged: 1\x01\xff";
  answer += std::string(5000, 'a');
  receiver.SetAnswerBody(answer);
  auto sink = MakeWebhookSink({.url = receiver.url() + "/services/T/B/SECRET"});
  const std::string host = absl::StrCat("http://127.0.0.1:", receiver.port());
  EXPECT_EQ(sink->Describe(), "webhook " + host);
  const absl::Status refused = sink->Deliver(HostileNotification());
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(refused.message());
  EXPECT_THAT(message, StartsWith(absl::StrCat("webhook ", host, " answered HTTP 400: ")));
  EXPECT_THAT(message, Not(HasSubstr("SECRET")));
  EXPECT_THAT(message, Not(HasSubstr("/hook")));
  EXPECT_THAT(message, HasSubstr("bad request\\r\\nX-Forged: 1\\x01\\xff"));
  EXPECT_FALSE(HasControlCharacter(message)) << message;
  EXPECT_LT(message.size(), 400u) << message;
}

TEST(SmtpSinkTest, ALineBreakInANameAddsNoMailHeaderAndForgesNoBody) {
  FakeSmtpReceiver smtp;
  auto sink = MakeSmtpSink({.url = smtp.url(), .from = "debugplane@example.com"});
  ASSERT_TRUE(sink->Deliver(HostileNotification()).ok());
  auto mails = smtp.mails();
  ASSERT_EQ(mails.size(), 1u);
  EXPECT_THAT(mails[0].recipients, ElementsAre("<ml@example.com>"));
  const MailParts parts = Split(mails[0].data);
  std::vector<std::string> names;
  for (const std::string& header : parts.headers) {
    ASSERT_FALSE(header.empty());
    if (header[0] == ' ') continue;  // A folded continuation.
    names.push_back(header.substr(0, header.find(':')));
  }
  EXPECT_THAT(names, ElementsAre("From", "To", "Subject", "Date", "Message-ID", "Content-Type"));
  EXPECT_THAT(parts.headers,
              Contains("Subject: debugplane: rule Loss\\r\\nBcc: evil@example.com\\r\\n\\r\\n"
                       "Forged body found issues in training job job-a"));
  EXPECT_THAT(parts.body, Not(Contains("Forged body")));
  EXPECT_THAT(parts.body, Not(Contains(StartsWith("Bcc:"))));
  // The details keep their line feeds, a CR is escaped and a line's
  // leading "." is doubled on the wire (once, by libcurl), so the data does
  // not end early: what follows is still the mail's text, not a command.
  EXPECT_THAT(parts.body, Contains("at step 3\\r")) << mails[0].data;
  // Every line of the data ends in CRLF (no bare LF).
  EXPECT_FALSE(absl::StrContains(absl::StrReplaceAll(mails[0].data, {{"\r\n", ""}}), "\n"));
  EXPECT_THAT(parts.body, Contains("..\\r"));
  EXPECT_THAT(parts.body, Contains("QUIT"));
}

TEST(SmtpSinkTest, ANonAsciiSubjectIsEncodedAsEncodedWords) {
  FakeSmtpReceiver smtp;
  auto sink = MakeSmtpSink({.url = smtp.url(), .from = "debugplane@example.com"});
  Notification notification = HostileNotification();
  notification.rule_configuration_name = "Verlust \u00fcber Zeit \u2013 " + std::string(60, 'x');
  ASSERT_TRUE(sink->Deliver(notification).ok());
  auto mails = smtp.mails();
  ASSERT_EQ(mails.size(), 1u);
  std::string decoded;
  bool in_subject = false;
  for (const std::string& header : Split(mails[0].data).headers) {
    absl::string_view value = header;
    if (absl::ConsumePrefix(&value, "Subject: ")) {
      in_subject = true;
    } else if (!in_subject || !absl::ConsumePrefix(&value, " ")) {
      in_subject = false;
      continue;
    }
    EXPECT_LE(value.size(), 75u) << value;
    ASSERT_TRUE(absl::ConsumePrefix(&value, "=?UTF-8?B?")) << value;
    ASSERT_TRUE(absl::ConsumeSuffix(&value, "?=")) << value;
    std::string word;
    ASSERT_TRUE(absl::Base64Unescape(value, &word));
    decoded += word;
  }
  EXPECT_EQ(decoded, notification.Subject());
}

TEST(SmtpSinkTest, AnAddressWithALineBreakIsRefusedBeforeAnyCommand) {
  FakeSmtpReceiver smtp;
  auto sink = MakeSmtpSink({.url = smtp.url(), .from = "debugplane@example.com"});
  Notification notification = HostileNotification();
  notification.endpoint = "ml@example.com>\r\nRCPT TO:<evil@example.com";
  const absl::Status refused = sink->Deliver(notification);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("control character"));
  EXPECT_FALSE(HasControlCharacter(refused.message()));
  EXPECT_THAT(smtp.mails(), IsEmpty());
}

// The fake server offers no STARTTLS: with credentials nothing is sent,
// saying why; without, the mail goes as before.
TEST(SmtpSinkTest, CredentialsAreSentOnlyOverTls) {
  FakeSmtpReceiver smtp;
  auto with_user = MakeSmtpSink({.url = smtp.url(),
                                 .from = "debugplane@example.com",
                                 .username = "debugplane",
                                 .password = "smtp-secret"});
  const absl::Status refused = with_user->Deliver(HostileNotification());
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("does not offer STARTTLS"));
  EXPECT_THAT(refused.message(), HasSubstr("--smtp-user"));
  EXPECT_THAT(refused.message(), Not(HasSubstr("smtp-secret")));
  EXPECT_THAT(smtp.mails(), IsEmpty());

  auto without_user = MakeSmtpSink({.url = smtp.url(), .from = "debugplane@example.com"});
  EXPECT_TRUE(without_user->Deliver(HostileNotification()).ok());
  EXPECT_EQ(smtp.mails().size(), 1u);
}

}  // namespace
}  // namespace debugplane::rules_engine
