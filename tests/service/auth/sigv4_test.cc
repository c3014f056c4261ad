// AWS Signature Version 4 verification: AWS's published test vector, requests
// signed by real botocore (as boto3 sends them), and every way a request can
// be refused, with the AWS error code boto3 expects.

#include "service/auth/sigv4.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/auth/credential_authenticator.h"
#include "service/auth/signature_replay_cache.h"
#include "service/auth/signing_key_cache.h"
#include "service/server_app.h"
#include "service/server_flags.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/service/auth/auth_test_util.h"

namespace debugplane::service::auth {
namespace {

using ::debugplane::testing::ScopedTempDir;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kExampleKey[] = "AKIDEXAMPLE";
constexpr char kExampleSecret[] = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

absl::Time ParseAmzDate(const std::string& text) {
  absl::Time time;
  std::string error;
  const std::string separated = absl::StrCat(text.substr(0, 4), "-", text.substr(4, 2), "-",
                                             text.substr(6, 2), text.substr(8));
  EXPECT_TRUE(absl::ParseTime("%Y-%m-%dT%H%M%SZ", separated, absl::UTCTimeZone(), &time, &error))
      << text << ": " << error;
  return time;
}

std::shared_ptr<CredentialStore> Store(const std::string& text) {
  absl::StatusOr<CredentialSet> set = ParseCredentials(text, "test");
  EXPECT_TRUE(set.ok()) << set.status();
  return std::make_shared<CredentialStore>(*std::move(set));
}

// AWS's sigv4 test suite, get-vanilla.
SignedHttpRequest GetVanilla() {
  SignedHttpRequest request;
  request.method = "GET";
  request.path = "/";
  request.headers = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}};
  request.headers.emplace_back(
      "Authorization",
      "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
      "SignedHeaders=host;x-amz-date, "
      "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  return request;
}

TEST(SigV4Test, TheCanonicalRequestAndSignatureOfAwsGetVanilla) {
  const SignedHttpRequest request = GetVanilla();
  absl::StatusOr<std::string> canonical =
      CanonicalRequest(request, {"host", "x-amz-date"}, Sha256Hex(""));
  ASSERT_TRUE(canonical.ok());
  EXPECT_EQ(*canonical,
            "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
            "host;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string to_sign =
      StringToSign("20150830T123600Z", "20150830/us-east-1/service/aws4_request", *canonical);
  EXPECT_EQ(to_sign,
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
            "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
  EXPECT_EQ(SigV4Signature(kExampleSecret, "20150830", "us-east-1", "service", to_sign),
            "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

TEST(SigV4Test, TheAuthenticatorAcceptsGetVanillaAndRefusesItAltered) {
  // AWS's generic vector signs host and x-amz-date only.
  auto authenticator = NewAuthenticator(
      Store(absl::StrCat("reader ", kExampleKey, " ", kExampleSecret)),
      SigV4Options{
          .region = "us-east-1", .service = "service", .required_signed_headers = {"host"}});
  const absl::Time now = ParseAmzDate("20150830T123600Z");
  absl::StatusOr<Principal> principal = authenticator->AuthenticateSigV4(GetVanilla(), now);
  ASSERT_TRUE(principal.ok()) << principal.status();
  EXPECT_EQ(principal->access_key_id, kExampleKey);
  EXPECT_EQ(principal->role, Role::kReader);

  SignedHttpRequest altered = GetVanilla();
  altered.headers[0].second = "other.amazonaws.com";
  absl::Status refused = authenticator->AuthenticateSigV4(altered, now).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(AwsErrorCode(refused), "InvalidSignatureException");
  EXPECT_EQ(refused.message(),
            "The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method.");

  altered = GetVanilla();
  altered.body = "x";
  EXPECT_EQ(AwsErrorCode(authenticator->AuthenticateSigV4(altered, now).status()),
            "InvalidSignatureException");
  altered = GetVanilla();
  altered.query = "a=1";
  EXPECT_EQ(AwsErrorCode(authenticator->AuthenticateSigV4(altered, now).status()),
            "InvalidSignatureException");
}

TEST(SigV4Test, CanonicalUriAndQueryFollowAws) {
  EXPECT_EQ(CanonicalUri(""), "/");
  EXPECT_EQ(CanonicalUri("/"), "/");
  EXPECT_EQ(CanonicalUri("/foo/../bar//./baz/"), "/bar/baz/");
  EXPECT_EQ(CanonicalUri("/a%20b"), "/a%2520b");
  EXPECT_EQ(CanonicalUri("/~user/x-y_z.1"), "/~user/x-y_z.1");
  EXPECT_EQ(CanonicalQuery(""), "");
  EXPECT_EQ(CanonicalQuery("b=2&a=1%20x&a=0"), "a=0&a=1%20x&b=2");
  EXPECT_EQ(CanonicalQuery("flag&x=%7e"), "flag=&x=~");
  EXPECT_EQ(CanonicalQuery("k=a+b/c"), "k=a%2Bb%2Fc");
}

TEST(SigV4Test, MalformedAuthorizationHeadersAreIncompleteNamingWhatIsMissing) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"AWS4-HMAC-SHA1 Credential=a/20150830/r/s/aws4_request", "AWS4-HMAC-SHA256"},
      {"AWS4-HMAC-SHA256 SignedHeaders=host, Signature=" + std::string(64, 'a'),
       "requires 'Credential' parameter"},
      {"AWS4-HMAC-SHA256 Credential=a/20150830/r/s/aws4_request",
       "requires 'SignedHeaders', 'Signature' parameter"},
      {"AWS4-HMAC-SHA256 Credential=a/2015/r/s/aws4_request, SignedHeaders=host, Signature=" +
           std::string(64, 'a'),
       "Credential must be ACCESS_KEY_ID/YYYYMMDD/REGION/SERVICE/aws4_request"},
      {"AWS4-HMAC-SHA256 Credential=a/20150830/r/s/aws4_request, SignedHeaders=host, "
       "Signature=abc",
       "Signature must be 64 lower-case hex digits"},
      {"AWS4-HMAC-SHA256 Credential=a/20150830/r/s/aws4_request, SignedHeaders=Host, "
       "Signature=" +
           std::string(64, 'a'),
       "SignedHeaders must be lower-case"},
      {"AWS4-HMAC-SHA256 Credential", "NAME=VALUE"},
  };
  for (const auto& [header, expected] : cases) {
    absl::StatusOr<SigV4Authorization> parsed = ParseSigV4Authorization(header);
    ASSERT_FALSE(parsed.ok()) << header;
    EXPECT_EQ(AwsErrorCode(parsed.status()), "IncompleteSignatureException") << header;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(expected)) << header;
  }
}

// Requests signed by botocore, as boto3's SageMaker client signs them.
class BotocoreSignedTest : public ::testing::Test {
 protected:
  static constexpr char kKey[] = "AKIAOPERATOR0001";
  static constexpr char kSecret[] = "Op3rator/Secret+Key=0123456789abcdefghij";

  void SetUp() override {
    authenticator_ = NewAuthenticator(
        Store(absl::StrCat("operator ", kKey, " ", kSecret, "\nreader AKIAREADER x\n")), {});
  }

  // Signs with botocore; the request as an HTTP server receives it.
  SignedHttpRequest Sign(const std::string& url, const std::string& body,
                         const std::string& secret = kSecret,
                         const std::string& region = "us-east-1", const std::string& key = kKey) {
    const std::string body_file = (dir_.path() / "body").string();
    std::ofstream(body_file, std::ios::binary) << body;
    const std::string command =
        absl::StrCat("python3 ", DP_SOURCE_DIR, "/tests/service/auth/sign_with_botocore.py '", key,
                     "' '", secret, "' ", region, " sagemaker POST '", url, "' ", body_file);
    std::string output;
    FILE* pipe = popen(command.c_str(), "r");
    EXPECT_NE(pipe, nullptr);
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
    EXPECT_EQ(pclose(pipe), 0) << command;
    const nlohmann::json signed_request = nlohmann::json::parse(output);
    SignedHttpRequest request;
    request.method = "POST";
    std::string rest = signed_request["url"].get<std::string>();
    rest = rest.substr(rest.find('/', rest.find("//") + 2));
    const size_t question = rest.find('?');
    request.path = rest.substr(0, question);
    if (question != std::string::npos) request.query = rest.substr(question + 1);
    // The HTTP client adds Host from the URL; botocore signed it so.
    request.headers.emplace_back("Host", "localhost:8443");
    for (const auto& [name, value] : signed_request["headers"].items()) {
      request.headers.emplace_back(name, value.get<std::string>());
    }
    request.body = body;
    return request;
  }

  absl::Status Verify(const SignedHttpRequest& request, absl::Time now = absl::Now()) {
    return authenticator_->AuthenticateSigV4(request, now).status();
  }

  ScopedTempDir dir_;
  std::unique_ptr<Authenticator> authenticator_;
};

TEST_F(BotocoreSignedTest, ARequestBotocoreSignedIsAccepted) {
  const std::string body = R"({"TrainingJobName":"job-a"})";
  SignedHttpRequest request = Sign("https://localhost:8443/", body);
  absl::StatusOr<Principal> principal = authenticator_->AuthenticateSigV4(request, absl::Now());
  ASSERT_TRUE(principal.ok()) << principal.status();
  EXPECT_EQ(principal->access_key_id, kKey);
  EXPECT_EQ(principal->role, Role::kOperator);

  // A path and a query string that need encoding.
  request = Sign("https://localhost:8443/some%20dir/x?b=2&a=1%20x&a=0&empty=", body);
  EXPECT_TRUE(Verify(request).ok()) << Verify(request);
}

TEST_F(BotocoreSignedTest, TamperedBodyHeaderOrPathIsRefused) {
  const SignedHttpRequest request = Sign("https://localhost:8443/", R"({"TrainingJobName":"a"})");
  SignedHttpRequest tampered = request;
  tampered.body = R"({"TrainingJobName":"b"})";
  EXPECT_EQ(AwsErrorCode(Verify(tampered)), "InvalidSignatureException");
  tampered = request;
  for (auto& [name, value] : tampered.headers) {
    if (name == "X-Amz-Target") value = "SageMaker.DeleteTrainingJob";
  }
  EXPECT_EQ(AwsErrorCode(Verify(tampered)), "InvalidSignatureException");
  tampered = request;
  tampered.path = "/other";
  EXPECT_EQ(AwsErrorCode(Verify(tampered)), "InvalidSignatureException");
  // A payload hash header that does not match the body.
  tampered = request;
  tampered.headers.emplace_back("x-amz-content-sha256", Sha256Hex("something else"));
  absl::Status mismatch = Verify(tampered);
  EXPECT_EQ(AwsErrorCode(mismatch), "InvalidSignatureException");
  EXPECT_THAT(std::string(mismatch.message()), HasSubstr("x-amz-content-sha256"));
  tampered = request;
  tampered.headers.emplace_back("x-amz-content-sha256", Sha256Hex(request.body));
  EXPECT_TRUE(Verify(tampered).ok());
}

TEST_F(BotocoreSignedTest, AWrongSecretOrAnUnknownKeyIsRefused) {
  absl::Status wrong = Verify(Sign("https://localhost:8443/", "{}", "not-the-secret"));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(AwsErrorCode(wrong), "InvalidSignatureException");
  absl::Status unknown =
      Verify(Sign("https://localhost:8443/", "{}", kSecret, "us-east-1", "AKIAUNKNOWN"));
  EXPECT_EQ(AwsErrorCode(unknown), "UnrecognizedClientException");
  EXPECT_EQ(unknown.message(), "The security token included in the request is invalid.");
}

TEST_F(BotocoreSignedTest, AReplayOutsideTheSkewIsRefusedAsExpired) {
  const SignedHttpRequest request = Sign("https://localhost:8443/", "{}");
  std::string amz_date;
  for (const auto& [name, value] : request.headers) {
    if (name == "X-Amz-Date") amz_date = value;
  }
  const absl::Time signed_at = ParseAmzDate(amz_date);
  EXPECT_TRUE(Verify(request, signed_at + absl::Minutes(4)).ok());
  absl::Status expired = Verify(request, signed_at + absl::Minutes(6));
  EXPECT_EQ(AwsErrorCode(expired), "InvalidSignatureException");
  EXPECT_THAT(std::string(expired.message()),
              StartsWith(absl::StrCat("Signature expired: ", amz_date, " is now earlier than ")));
  EXPECT_THAT(std::string(expired.message()), HasSubstr(" - 5 min.)"));
  absl::Status early = Verify(request, signed_at - absl::Minutes(6));
  EXPECT_THAT(std::string(early.message()), StartsWith("Signature not yet current: "));
}

TEST_F(BotocoreSignedTest, TheRegionMustBeTheConfiguredOneUnlessAnyIsAllowed) {
  const SignedHttpRequest request = Sign("https://localhost:8443/", "{}", kSecret, "eu-west-1");
  absl::Status refused = Verify(request);
  EXPECT_EQ(AwsErrorCode(refused), "InvalidSignatureException");
  EXPECT_THAT(std::string(refused.message()), HasSubstr("not 'eu-west-1'"));
  auto any_region = NewAuthenticator(
      Store(absl::StrCat("operator ", kKey, " ", kSecret)),
      SigV4Options{.region = "", .service = "sagemaker", .max_skew = absl::Minutes(5)});
  EXPECT_TRUE(any_region->AuthenticateSigV4(request, absl::Now()).ok());
}

TEST_F(BotocoreSignedTest, MissingOrUnsignedRequiredHeadersAreRefused) {
  const SignedHttpRequest request = Sign("https://localhost:8443/", "{}");
  SignedHttpRequest missing = request;
  std::erase_if(missing.headers,
                [](const auto& header) { return header.first == "Authorization"; });
  absl::Status no_header = Verify(missing);
  EXPECT_EQ(AwsErrorCode(no_header), "MissingAuthenticationTokenException");
  EXPECT_EQ(no_header.code(), absl::StatusCode::kUnauthenticated);

  SignedHttpRequest no_date = request;
  std::erase_if(no_date.headers, [](const auto& header) { return header.first == "X-Amz-Date"; });
  EXPECT_EQ(AwsErrorCode(Verify(no_date)), "IncompleteSignatureException");

  // Host left out of SignedHeaders.
  SignedHttpRequest unsigned_host = request;
  for (auto& [name, value] : unsigned_host.headers) {
    if (name == "Authorization") {
      const size_t at = value.find("host;");
      ASSERT_NE(at, std::string::npos) << value;
      value.erase(at, 5);
    }
  }
  absl::Status host = Verify(unsigned_host);
  EXPECT_EQ(AwsErrorCode(host), "InvalidSignatureException");
  EXPECT_THAT(std::string(host.message()), HasSubstr("'Host' must be a 'SignedHeader'"));
}

// Requests signed here (the secret is the test's), with any SignedHeaders:
// what a client that leaves a header out of its signature sends.
class SelfSignedTest : public ::testing::Test {
 protected:
  static constexpr char kKey[] = "AKIAOPERATOR0001";
  static constexpr char kSecret[] = "Op3rator/Secret+Key=0123456789abcdefghij";

  void SetUp() override {
    store_ = Store(absl::StrCat("operator ", kKey, " ", kSecret));
    authenticator_ = NewAuthenticator(store_, {});
  }

  // A SageMaker request for `target` at `at`, signed over `signed_headers`
  // (lower-case, sorted).
  static SignedHttpRequest Signed(const std::string& target,
                                  const std::vector<std::string>& signed_headers, absl::Time at,
                                  const std::string& body = R"({"TrainingJobName":"job-a"})",
                                  const std::string& secret = kSecret) {
    const std::string amz_date = absl::FormatTime("%Y%m%dT%H%M%SZ", at, absl::UTCTimeZone());
    SignedHttpRequest request;
    request.method = "POST";
    request.path = "/";
    request.headers = {{"Host", "localhost:8443"},
                       {"Content-Type", "application/x-amz-json-1.1"},
                       {"X-Amz-Date", amz_date},
                       {"X-Amz-Target", "SageMaker." + target}};
    request.body = body;
    absl::StatusOr<std::string> canonical =
        CanonicalRequest(request, signed_headers, Sha256Hex(body));
    EXPECT_TRUE(canonical.ok()) << canonical.status();
    const std::string scope =
        absl::StrCat(amz_date.substr(0, 8), "/us-east-1/sagemaker/aws4_request");
    const std::string signature =
        SigV4Signature(secret, amz_date.substr(0, 8), "us-east-1", "sagemaker",
                       StringToSign(amz_date, scope, *canonical));
    request.headers.emplace_back(
        "Authorization", absl::StrCat("AWS4-HMAC-SHA256 Credential=", kKey, "/", scope,
                                      ", SignedHeaders=", absl::StrJoin(signed_headers, ";"),
                                      ", Signature=", signature));
    return request;
  }

  absl::Status Verify(const SignedHttpRequest& request, absl::Time now) {
    return authenticator_->AuthenticateSigV4(request, now).status();
  }

  std::shared_ptr<CredentialStore> store_;
  std::unique_ptr<Authenticator> authenticator_;
};

// A signature that leaves X-Amz-Target out could be replayed as another
// operation (a captured Describe as a Delete); one that leaves Content-Type
// or Host out is not what SageMaker's clients send either.
TEST_F(SelfSignedTest, TheTargetContentTypeAndHostMustBeSigned) {
  const absl::Time now = absl::FromUnixSeconds(1750000000);
  const SignedHttpRequest complete =
      Signed("DescribeTrainingJob", {"content-type", "host", "x-amz-date", "x-amz-target"}, now);
  EXPECT_TRUE(Verify(complete, now).ok()) << Verify(complete, now);

  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"content-type", "host", "x-amz-date"}, "'X-Amz-Target' must be a 'SignedHeader'"},
      {{"host", "x-amz-date", "x-amz-target"}, "'Content-Type' must be a 'SignedHeader'"},
      {{"content-type", "x-amz-date", "x-amz-target"}, "'Host' must be a 'SignedHeader'"},
  };
  for (const auto& [signed_headers, expected] : cases) {
    // Valid signatures over what they cover, replayed as a Delete.
    SignedHttpRequest replayed = Signed("DescribeTrainingJob", signed_headers, now);
    for (auto& [name, value] : replayed.headers) {
      if (name == "X-Amz-Target") value = "SageMaker.DeleteTrainingJob";
    }
    const absl::Status refused = Verify(replayed, now);
    EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated) << expected;
    EXPECT_EQ(AwsErrorCode(refused), "InvalidSignatureException") << refused;
    EXPECT_THAT(std::string(refused.message()), HasSubstr(expected));
  }
}

// A captured Stop or Delete is obeyed once, even within the allowed skew;
// reads may repeat; a new signature of the same operation is a new request.
TEST_F(SelfSignedTest, AStateChangingSignatureIsAcceptedOnceAReadRepeats) {
  const absl::Time signed_at = absl::FromUnixSeconds(1750000000);
  const std::vector<std::string> all = {"content-type", "host", "x-amz-date", "x-amz-target"};
  const SignedHttpRequest stop = Signed("StopTrainingJob", all, signed_at);
  EXPECT_TRUE(Verify(stop, signed_at).ok());
  const absl::Status replayed = Verify(stop, signed_at + absl::Minutes(1));
  EXPECT_EQ(replayed.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(AwsErrorCode(replayed), "InvalidSignatureException");
  EXPECT_THAT(std::string(replayed.message()),
              HasSubstr("used already for SageMaker.StopTrainingJob"));
  // Past the skew it is refused as expired, whatever the cache holds.
  EXPECT_THAT(std::string(Verify(stop, signed_at + absl::Minutes(6)).message()),
              StartsWith("Signature expired"));
  // Signed a second later: another signature, accepted.
  EXPECT_TRUE(Verify(Signed("StopTrainingJob", all, signed_at + absl::Seconds(1)),
                     signed_at + absl::Seconds(2))
                  .ok());
  for (const std::string create_or_delete :
       {"CreateTrainingJob", "DeleteTrainingJob", "UpdateTrainingJob"}) {
    const SignedHttpRequest request = Signed(create_or_delete, all, signed_at);
    EXPECT_TRUE(Verify(request, signed_at).ok()) << create_or_delete;
    EXPECT_FALSE(Verify(request, signed_at).ok()) << create_or_delete;
  }
  for (const std::string read : {"DescribeTrainingJob", "ListTrainingJobs"}) {
    const SignedHttpRequest request = Signed(read, all, signed_at);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(Verify(request, signed_at).ok()) << read;
  }
  // A refused (tampered) request does not use up the signature.
  const SignedHttpRequest deleted = Signed("DeleteTrainingJob", all, signed_at, "{}");
  SignedHttpRequest tampered = deleted;
  tampered.body = R"({"TrainingJobName":"other"})";
  EXPECT_FALSE(Verify(tampered, signed_at).ok());
  EXPECT_TRUE(Verify(deleted, signed_at).ok());
}

// The verifier keeps derived signing keys (SigningKeyCache): a key cached
// from the right secret must not make a wrong secret's signature pass, and a
// reloaded secret must take effect at the next request.
TEST_F(SelfSignedTest, CachedSigningKeysLetNoWrongOrReplacedSecretThrough) {
  const absl::Time now = absl::FromUnixSeconds(1750000000);
  const std::vector<std::string> all = {"content-type", "host", "x-amz-date", "x-amz-target"};
  const std::string body = R"({"TrainingJobName":"job-a"})";
  const SignedHttpRequest right = Signed("DescribeTrainingJob", all, now, body);
  ASSERT_TRUE(Verify(right, now).ok()) << Verify(right, now);
  ASSERT_TRUE(Verify(right, now).ok());  // From the cache this time.

  // The same request signed with a wrong secret, after the right one's key
  // was cached (and again, in case the first refusal cached anything).
  const SignedHttpRequest wrong =
      Signed("DescribeTrainingJob", all, now, body, "not-the-secret/0123456789abcdefghij");
  for (int attempt = 0; attempt < 2; ++attempt) {
    const absl::Status refused = Verify(wrong, now);
    EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(AwsErrorCode(refused), "InvalidSignatureException") << refused;
    EXPECT_THAT(std::string(refused.message()), Not(HasSubstr(kSecret)));
  }
  // The secret rotated (credentials reloaded): the old secret's signature,
  // whose key is cached, is refused; the new secret's is accepted.
  const std::string rotated = "R0tated/Secret+Key=abcdefghij0123456789";
  absl::StatusOr<CredentialSet> set =
      ParseCredentials(absl::StrCat("operator ", kKey, " ", rotated), "test");
  ASSERT_TRUE(set.ok()) << set.status();
  store_->Replace(*std::move(set));
  EXPECT_EQ(AwsErrorCode(Verify(right, now)), "InvalidSignatureException");
  EXPECT_TRUE(Verify(Signed("DescribeTrainingJob", all, now, body, rotated), now).ok());
  // Another day is another key, derived from the secret in force.
  const absl::Time tomorrow = now + absl::Hours(24);
  EXPECT_TRUE(Verify(Signed("DescribeTrainingJob", all, tomorrow, body, rotated), tomorrow).ok());
  EXPECT_FALSE(Verify(Signed("DescribeTrainingJob", all, tomorrow, body), tomorrow).ok());
}

TEST(SigningKeyCacheTest, DerivesOncePerScopeAndSecretAndGivesTheDerivedKey) {
  SigningKeyCache cache(/*capacity=*/3);
  const std::string key = SigV4SigningKey("secret-1", "20250615", "us-east-1", "sagemaker");
  EXPECT_EQ(cache.SigningKey("AKID1", "secret-1", "20250615", "us-east-1", "sagemaker"), key);
  EXPECT_EQ(cache.SigningKey("AKID1", "secret-1", "20250615", "us-east-1", "sagemaker"), key);
  EXPECT_EQ(cache.derivations(), 1);
  // Any part of the scope, or the secret, changed: derived anew.
  EXPECT_EQ(cache.SigningKey("AKID1", "secret-2", "20250615", "us-east-1", "sagemaker"),
            SigV4SigningKey("secret-2", "20250615", "us-east-1", "sagemaker"));
  EXPECT_EQ(cache.SigningKey("AKID1", "secret-2", "20250616", "us-east-1", "sagemaker"),
            SigV4SigningKey("secret-2", "20250616", "us-east-1", "sagemaker"));
  EXPECT_EQ(cache.SigningKey("AKID1", "secret-2", "20250616", "eu-west-1", "sagemaker"),
            SigV4SigningKey("secret-2", "20250616", "eu-west-1", "sagemaker"));
  EXPECT_EQ(cache.derivations(), 4);
  EXPECT_LE(cache.size(), 3u);
  // Back to the first secret: not the second's cached key.
  EXPECT_EQ(cache.SigningKey("AKID1", "secret-1", "20250615", "us-east-1", "sagemaker"), key);
  EXPECT_EQ(cache.derivations(), 5);
  // The key is the one AWS's test suite derives (get-vanilla's secret and scope).
  EXPECT_EQ(SigV4SignatureWithKey(SigV4SigningKey(kExampleSecret, "20150830", "us-east-1",
                                                  "service"),
                                  "x"),
            SigV4Signature(kExampleSecret, "20150830", "us-east-1", "service", "x"));
}

TEST(SignatureReplayCacheTest, ForgetsExpiredSignaturesAndStaysWithinItsCapacity) {
  const absl::Time t = absl::FromUnixSeconds(1000);
  SignatureReplayCache cache(2);
  EXPECT_TRUE(cache.FirstUse("a", t + absl::Seconds(10), t));
  EXPECT_FALSE(cache.FirstUse("a", t + absl::Seconds(10), t + absl::Seconds(9)));
  EXPECT_TRUE(cache.FirstUse("b", t + absl::Seconds(20), t));
  // Full: "a" (expiring first) makes room for "c".
  EXPECT_TRUE(cache.FirstUse("c", t + absl::Seconds(30), t));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(cache.FirstUse("b", t + absl::Seconds(20), t));
  // Expired entries go: "b" may be used again once it would be refused as
  // expired by the authenticator anyway.
  EXPECT_TRUE(cache.FirstUse("b", t + absl::Seconds(40), t + absl::Seconds(20)));
  EXPECT_EQ(cache.size(), 2u);
}

TEST(SigV4DisabledTest, WithoutCredentialsEveryRequestIsAnAnonymousAdmin) {
  auto authenticator = NewAuthenticator(nullptr, {});
  EXPECT_FALSE(authenticator->enabled());
  absl::StatusOr<Principal> principal =
      authenticator->AuthenticateSigV4(SignedHttpRequest{}, absl::Now());
  ASSERT_TRUE(principal.ok());
  EXPECT_EQ(principal->role, Role::kAdmin);
  EXPECT_EQ(principal->access_key_id, "anonymous");
}

// The server's --region scopes the signatures it accepts: set, a request
// signed for another region is refused; at its default ("local", no AWS
// region) any region is accepted.
TEST_F(BotocoreSignedTest, TheServersRegionFlagScopesTheSignaturesItAccepts) {
  const std::filesystem::path credentials = dir_.path() / "credentials";
  debugplane::testing::WriteCredentials(credentials,
                                        absl::StrCat("operator ", kKey, " ", kSecret, "\n"));
  const std::string body = R"({"TrainingJobName":"job-a"})";
  for (const std::string region : {"eu-west-1", ""}) {
    const std::string data_dir = (dir_.path() / ("data" + region)).string();
    std::vector<std::string> args = {"debugplane-server", "--listen", "127.0.0.1:0",
                                     "--data-dir",        data_dir,   "--credentials",
                                     credentials.string()};
    if (!region.empty()) args.insert(args.end(), {"--region", region});
    std::vector<const char*> argv;
    for (const std::string& arg : args) argv.push_back(arg.c_str());
    std::ostringstream out, err;
    ParsedServerFlags parsed =
        ParseServerFlags(static_cast<int>(argv.size()), argv.data(), out, err);
    ASSERT_TRUE(parsed.config.has_value()) << err.str();
    auto app = ServerApp::Start(*std::move(parsed.config));
    ASSERT_TRUE(app.ok()) << app.status();
    const auth::Authenticator& server = *(*app)->authenticator();
    const absl::Status us_east =
        server.AuthenticateSigV4(Sign("https://localhost:8443/", body), absl::Now()).status();
    if (region.empty()) {
      EXPECT_TRUE(us_east.ok()) << us_east;
    } else {
      EXPECT_EQ(us_east.code(), absl::StatusCode::kUnauthenticated);
      EXPECT_THAT(us_east.message(), HasSubstr("eu-west-1"));
      EXPECT_TRUE(server
                      .AuthenticateSigV4(Sign("https://localhost:8443/", body, kSecret, region),
                                         absl::Now())
                      .ok());
    }
  }
}

}  // namespace
}  // namespace debugplane::service::auth
