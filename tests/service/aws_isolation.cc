// The service tests start real servers and agents, which read the AWS
// settings of the environment (objectstore/aws_config.h). A developer's own
// ~/.aws/credentials or AWS_* variables must not send a test's s3:// paths to
// real AWS: every test of this binary starts without them, and the tests
// that use object storage set the variables of their own S3 server.

#include <cstdlib>

#include "gtest/gtest.h"

namespace debugplane::testing {
namespace {

class NoAwsSettingsEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    for (const char* name : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION",
                             "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                             "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CA_BUNDLE"}) {
      unsetenv(name);
    }
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/debugplane-tests/aws-credentials", 1);
    setenv("AWS_CONFIG_FILE", "/nonexistent/debugplane-tests/aws-config", 1);
  }
};

const ::testing::Environment* const kNoAwsSettings =
    ::testing::AddGlobalTestEnvironment(new NoAwsSettingsEnvironment);

}  // namespace
}  // namespace debugplane::testing
