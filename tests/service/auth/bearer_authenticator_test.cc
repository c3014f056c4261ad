// Bearer tokens and certificate names against the credentials in force.

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/auth/credential_authenticator.h"

namespace debugplane::service::auth {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

class BearerAuthenticatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_shared<CredentialStore>(*ParseCredentials(
        "operator OP1 op:secret/1\nagent AG1 agent-secret job-a\nreader cn:dash -\n", "t"));
    authenticator_ = NewAuthenticator(store_, {});
  }
  std::shared_ptr<CredentialStore> store_;
  std::unique_ptr<Authenticator> authenticator_;
};

TEST_F(BearerAuthenticatorTest, AKnownKeyWithItsSecretIsItsPrincipal) {
  absl::StatusOr<Principal> principal =
      authenticator_->AuthenticateBearer("Bearer OP1:op:secret/1");
  ASSERT_TRUE(principal.ok()) << principal.status();
  EXPECT_EQ(principal->role, Role::kOperator);
  EXPECT_EQ(principal->access_key_id, "OP1");
  principal = authenticator_->AuthenticateBearer("bearer   AG1:agent-secret");
  ASSERT_TRUE(principal.ok()) << principal.status();
  EXPECT_EQ(principal->job_name, "job-a");
}

TEST_F(BearerAuthenticatorTest, EachWrongTokenIsUnauthenticatedWithoutEchoingTheSecret) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "no credentials"},
      {"Basic T1AxOnNlY3JldA==", "expected 'Bearer ACCESS_KEY_ID:SECRET_ACCESS_KEY'"},
      {"Bearer OP1", "expected ACCESS_KEY_ID:SECRET_ACCESS_KEY"},
      {"Bearer OP1:", "expected ACCESS_KEY_ID:SECRET_ACCESS_KEY"},
      {"Bearer :guessedsecret", "expected ACCESS_KEY_ID:SECRET_ACCESS_KEY"},
      {"Bearer NOPE:guessedsecret", "unknown access key id 'NOPE'"},
      {"Bearer OP1:guessedsecret", "wrong secret for access key 'OP1'"},
      {"Bearer OP1:op:secret/", "wrong secret for access key 'OP1'"},
  };
  for (const auto& [header, expected] : cases) {
    absl::StatusOr<Principal> principal = authenticator_->AuthenticateBearer(header);
    ASSERT_FALSE(principal.ok()) << header;
    EXPECT_EQ(principal.status().code(), absl::StatusCode::kUnauthenticated);
    EXPECT_THAT(std::string(principal.status().message()),
                AllOf(HasSubstr(expected), Not(HasSubstr("guessedsecret"))))
        << header;
  }
}

TEST_F(BearerAuthenticatorTest, ACertificateNameMapsToItsRole) {
  absl::StatusOr<Principal> principal = authenticator_->AuthenticateCertificate("dash");
  ASSERT_TRUE(principal.ok());
  EXPECT_EQ(principal->role, Role::kReader);
  EXPECT_EQ(principal->access_key_id, "cn:dash");
  absl::Status unknown = authenticator_->AuthenticateCertificate("stranger").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("'stranger'"));
}

TEST_F(BearerAuthenticatorTest, AReplacedKeySetTakesEffectForTheNextCall) {
  store_->Replace(*ParseCredentials("admin NEW new-secret\n", "t"));
  EXPECT_FALSE(authenticator_->AuthenticateBearer("Bearer OP1:op:secret/1").ok());
  EXPECT_TRUE(authenticator_->AuthenticateBearer("Bearer NEW:new-secret").ok());
}

TEST(DisabledAuthenticatorTest, EveryCallerIsAnAnonymousAdmin) {
  auto authenticator = NewAuthenticator(nullptr, {});
  EXPECT_FALSE(authenticator->enabled());
  absl::StatusOr<Principal> principal = authenticator->AuthenticateBearer("");
  ASSERT_TRUE(principal.ok());
  EXPECT_EQ(principal->role, Role::kAdmin);
  EXPECT_TRUE(authenticator->AuthenticateCertificate("x").ok());
}

}  // namespace
}  // namespace debugplane::service::auth
