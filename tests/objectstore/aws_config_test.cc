// LoadS3Config (objectstore/aws_config.h): the AWS tools' order of
// settings, the shared credentials and config files, and the messages when
// credentials are missing. The environment is a map; files are temporary.

#include "objectstore/aws_config.h"

#include <fstream>
#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::objectstore {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

class AwsConfigTest : public ::testing::Test {
 protected:
  // An environment whose HOME is the temporary directory (no AWS files yet).
  std::map<std::string, std::string> Environment() const {
    return {{"HOME", home_.path().string()}};
  }
  void WriteAwsFile(const std::string& name, const std::string& content) {
    std::filesystem::create_directories(home_.path() / ".aws");
    std::ofstream(home_.path() / ".aws" / name) << content;
  }
  absl::StatusOr<S3Config> Load(std::map<std::string, std::string> environment,
                                const S3ConfigOverrides& overrides = {}) {
    return LoadS3Config(overrides, MapEnvironment(std::move(environment)));
  }

  debugplane::testing::ScopedTempDir home_;
};

TEST_F(AwsConfigTest, EnvironmentVariablesGiveEndpointRegionAndCredentials) {
  auto environment = Environment();
  environment["AWS_ENDPOINT_URL"] = "http://generic:1";
  environment["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:9000/";
  environment["AWS_DEFAULT_REGION"] = "eu-west-3";
  environment["AWS_REGION"] = "eu-central-1";
  environment["AWS_ACCESS_KEY_ID"] = "AKIAENV";
  environment["AWS_SECRET_ACCESS_KEY"] = "env-secret";
  environment["AWS_SESSION_TOKEN"] = "env-token";
  absl::StatusOr<S3Config> config = Load(environment);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->endpoint, "http://127.0.0.1:9000");
  EXPECT_FALSE(config->aws_endpoint);
  EXPECT_TRUE(config->path_style);  // A custom endpoint: path-style.
  EXPECT_EQ(config->region, "eu-central-1");
  EXPECT_EQ(config->access_key_id, "AKIAENV");
  EXPECT_EQ(config->secret_access_key, "env-secret");
  EXPECT_EQ(config->session_token, "env-token");
  EXPECT_EQ(config->credentials_source, "AWS_ACCESS_KEY_ID");

  environment.erase("AWS_ENDPOINT_URL_S3");
  environment.erase("AWS_REGION");
  config = Load(environment);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->endpoint, "http://generic:1");
  EXPECT_EQ(config->region, "eu-west-3");
}

TEST_F(AwsConfigTest, WithoutAnEndpointItIsAwsVirtualHosted) {
  auto environment = Environment();
  environment["AWS_REGION"] = "ap-south-1";
  environment["AWS_ACCESS_KEY_ID"] = "AKIA";
  environment["AWS_SECRET_ACCESS_KEY"] = "secret";
  absl::StatusOr<S3Config> config = Load(environment);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->endpoint, "https://s3.ap-south-1.amazonaws.com");
  EXPECT_TRUE(config->aws_endpoint);
  EXPECT_FALSE(config->path_style);
}

TEST_F(AwsConfigTest, ExplicitValuesOverrideTheEnvironment) {
  auto environment = Environment();
  environment["AWS_ENDPOINT_URL_S3"] = "http://env:1";
  environment["AWS_REGION"] = "eu-central-1";
  environment["AWS_ACCESS_KEY_ID"] = "AKIAENV";
  environment["AWS_SECRET_ACCESS_KEY"] = "env-secret";
  environment["AWS_CA_BUNDLE"] = "/env/ca.pem";
  S3ConfigOverrides overrides;
  overrides.endpoint = "https://minio.example:9000";
  overrides.region = "us-west-2";
  overrides.access_key_id = "AKIAFLAG";
  overrides.secret_access_key = "flag-secret";
  overrides.ca_file = "/flag/ca.pem";
  overrides.path_style = false;
  absl::StatusOr<S3Config> config = Load(environment, overrides);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->endpoint, "https://minio.example:9000");
  EXPECT_EQ(config->region, "us-west-2");
  EXPECT_EQ(config->access_key_id, "AKIAFLAG");
  EXPECT_EQ(config->secret_access_key, "flag-secret");
  EXPECT_EQ(config->ca_file, "/flag/ca.pem");
  EXPECT_FALSE(config->path_style);

  overrides = {};
  overrides.access_key_id = "AKIAFLAG";
  absl::Status half = Load(environment, overrides).status();
  EXPECT_EQ(half.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Load(environment).value().ca_file, "/env/ca.pem");
}

TEST_F(AwsConfigTest, ProfilesComeFromTheSharedFiles) {
  WriteAwsFile("credentials",
               "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = d-secret\n"
               "# a comment\n[dev]\naws_access_key_id=AKIADEV\naws_secret_access_key=dev-secret\n"
               "aws_session_token = dev-token\n");
  WriteAwsFile("config",
               "[default]\nregion = us-east-2\n[profile dev]\nregion = eu-north-1\n"
               "s3 =\n  addressing_style = path\n");
  auto environment = Environment();
  absl::StatusOr<S3Config> config = Load(environment);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->access_key_id, "AKIADEFAULT");
  EXPECT_EQ(config->region, "us-east-2");
  EXPECT_THAT(config->credentials_source, HasSubstr("profile 'default'"));

  environment["AWS_PROFILE"] = "dev";
  config = Load(environment);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->access_key_id, "AKIADEV");
  EXPECT_EQ(config->secret_access_key, "dev-secret");
  EXPECT_EQ(config->session_token, "dev-token");
  EXPECT_EQ(config->region, "eu-north-1");
  EXPECT_THAT(config->credentials_source,
              AllOf(HasSubstr("profile 'dev'"), HasSubstr(".aws/credentials")));

  // AWS_ACCESS_KEY_ID wins over AWS_PROFILE (the SDKs' order); an explicit
  // profile wins over both.
  environment["AWS_ACCESS_KEY_ID"] = "AKIAENV";
  environment["AWS_SECRET_ACCESS_KEY"] = "env-secret";
  EXPECT_EQ(Load(environment).value().access_key_id, "AKIAENV");
  S3ConfigOverrides overrides;
  overrides.profile = "dev";
  EXPECT_EQ(Load(environment, overrides).value().access_key_id, "AKIADEV");
}

TEST_F(AwsConfigTest, FileLocationsComeFromTheEnvironment) {
  const std::string credentials = (home_.path() / "elsewhere-credentials").string();
  std::ofstream(credentials) << "[ci]\naws_access_key_id = AKIACI\naws_secret_access_key = s\n";
  const std::string config_path = (home_.path() / "elsewhere-config").string();
  std::ofstream(config_path) << "[profile ci]\nregion = sa-east-1\n";
  auto environment = Environment();
  environment["AWS_SHARED_CREDENTIALS_FILE"] = credentials;
  environment["AWS_CONFIG_FILE"] = config_path;
  environment["AWS_PROFILE"] = "ci";
  absl::StatusOr<S3Config> config = Load(environment);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->access_key_id, "AKIACI");
  EXPECT_EQ(config->region, "sa-east-1");
}

TEST_F(AwsConfigTest, MissingCredentialsSayWhatWasLookedAt) {
  absl::Status status = Load(Environment()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("AWS_ACCESS_KEY_ID"), HasSubstr("AWS_SECRET_ACCESS_KEY"),
                    HasSubstr("profile 'default'"), HasSubstr(".aws/credentials (no such file)"),
                    HasSubstr(".aws/config (no such file)")));

  auto environment = Environment();
  environment["AWS_ACCESS_KEY_ID"] = "AKIAHALF";
  status = Load(environment).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(status.message(), HasSubstr("AWS_SECRET_ACCESS_KEY is not"));

  WriteAwsFile("credentials", "[default]\naws_secret_access_key = only-the-secret\n");
  status = Load(Environment()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("profile 'default'"), HasSubstr("but not aws_access_key_id"),
                    Not(HasSubstr("only-the-secret"))));
}

TEST_F(AwsConfigTest, NamedProfileThatDoesNotExistIsNotFound) {
  WriteAwsFile("credentials", "[default]\naws_access_key_id = A\naws_secret_access_key = s\n");
  auto environment = Environment();
  environment["AWS_PROFILE"] = "prod";
  absl::Status status = Load(environment).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("'prod'"), HasSubstr(".aws/credentials")));
}

TEST_F(AwsConfigTest, BadEndpointsAreRefusedNamingTheVariable) {
  for (const char* endpoint : {"s3.example.com", "ftp://x", "http://", "http://host/path",
                               "http://user@host", "http://host?x=1"}) {
    auto environment = Environment();
    environment["AWS_ENDPOINT_URL_S3"] = endpoint;
    environment["AWS_ACCESS_KEY_ID"] = "A";
    environment["AWS_SECRET_ACCESS_KEY"] = "s";
    absl::Status status = Load(environment).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << endpoint;
    EXPECT_THAT(status.message(), HasSubstr("AWS_ENDPOINT_URL_S3")) << endpoint;
  }
}

}  // namespace
}  // namespace debugplane::objectstore
