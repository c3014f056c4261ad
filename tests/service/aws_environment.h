// AwsEnvironment: the AWS settings a test's server (or agent) inherits, set
// as a user sets them for the AWS tools, and restored afterwards.

#ifndef DEBUGPLANE_TESTS_SERVICE_AWS_ENVIRONMENT_H_
#define DEBUGPLANE_TESTS_SERVICE_AWS_ENVIRONMENT_H_

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace debugplane::testing {

// Sets the AWS environment the server inherits, as a user would: the
// endpoint, the region and a key; no shared files (a developer's ~/.aws
// must not leak in). Restores the previous environment when destroyed.
class AwsEnvironment {
 public:
  AwsEnvironment(const std::filesystem::path& dir, const std::string& endpoint,
                 const std::string& key_id, const std::string& secret) {
    Set("AWS_ENDPOINT_URL_S3", endpoint);
    Set("AWS_REGION", "us-east-1");
    Set("AWS_ACCESS_KEY_ID", key_id);
    Set("AWS_SECRET_ACCESS_KEY", secret);
    Set("AWS_SHARED_CREDENTIALS_FILE", (dir / "no-credentials").string());
    Set("AWS_CONFIG_FILE", (dir / "no-config").string());
    Unset("AWS_SESSION_TOKEN");
    Unset("AWS_PROFILE");
    Unset("AWS_ENDPOINT_URL");
    Unset("AWS_CA_BUNDLE");
  }
  ~AwsEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value.has_value()) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

 private:
  void Save(const std::string& name) {
    if (saved_.count(name) > 0) return;
    const char* value = getenv(name.c_str());
    saved_[name] = value == nullptr ? std::nullopt : std::optional<std::string>(value);
  }
  void Set(const std::string& name, const std::string& value) {
    Save(name);
    setenv(name.c_str(), value.c_str(), 1);
  }
  void Unset(const std::string& name) {
    Save(name);
    unsetenv(name.c_str());
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SERVICE_AWS_ENVIRONMENT_H_
