// The credentials file: format, errors naming file:line, permissions.

#include "service/auth/credentials_file.h"

#include <sys/stat.h>

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::service::auth {
namespace {

using ::debugplane::testing::ScopedTempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kGoodFile[] = R"(# debugplane credentials
admin    ADMIN1   s3cr3t/with+symbols=   # trailing comment

operator OP1      op-secret
reader   READ1    read-secret
agent    AGENT-A  agent-secret  job-a
agent    AGENT    any-job-secret
reader   cn:dashboard.example -
agent    cn:worker-1 - job-a
)";

TEST(CredentialsFileTest, ParsesEveryKindOfLine) {
  absl::StatusOr<CredentialSet> set = ParseCredentials(kGoodFile, "creds");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->keys.size(), 5u);
  EXPECT_EQ(set->common_names.size(), 2u);
  const Credential& admin = set->keys.at("ADMIN1");
  EXPECT_EQ(admin.role, Role::kAdmin);
  EXPECT_EQ(admin.secret_access_key, "s3cr3t/with+symbols=");
  EXPECT_EQ(set->keys.at("AGENT-A").job_name, "job-a");
  EXPECT_EQ(set->keys.at("AGENT").job_name, "");
  EXPECT_EQ(set->common_names.at("dashboard.example").role, Role::kReader);
  EXPECT_EQ(set->common_names.at("dashboard.example").access_key_id, "cn:dashboard.example");
  EXPECT_EQ(set->common_names.at("worker-1").job_name, "job-a");
  EXPECT_EQ(set->Summary(),
            "5 credentials (admin 1, operator 1, reader 1, agent 2), 2 certificate mappings");
}

TEST(CredentialsFileTest, EmptyAndCommentOnlyFilesHaveNoCredentials) {
  absl::StatusOr<CredentialSet> set = ParseCredentials("\n# nothing\n   \n", "creds");
  ASSERT_TRUE(set.ok());
  EXPECT_TRUE(set->keys.empty());
}

// The first bad line is named as FILE:LINE with what is wrong, never the secret.
TEST(CredentialsFileTest, ABadLineIsNamedWithWhatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"admin A s\nroot B topsecret\n", "creds:2: unknown role 'root'"},
      {"admin A\n", "creds:1: missing the secret access key after the access key id"},
      {"admin\n", "creds:1: missing the access key id"},
      {"admin A topsecret\nreader A othersecret\n", "creds:2: duplicate access key id 'A'"},
      {"agent A topsecret bad_job!\n", "creds:1: bad job name 'bad_job!'"},
      {"reader A topsecret job-a\n", "creds:1: a job name binds only agent credentials"},
      {"admin A topsecret job-a extra\n", "creds:1: too many fields"},
      {"admin A:B topsecret\n", "creds:1: the access key id 'A:B' may only contain"},
      {"admin cn:x topsecret\n", "creds:1: a certificate mapping (cn:...) takes '-'"},
      {"admin cn:x\n", "creds:1: missing '-' after the certificate's common name"},
      {"admin cn: -\n", "creds:1: bad certificate common name: an empty access key id"},
      {"admin cn:x -\nreader cn:x -\n", "creds:2: duplicate certificate common name 'x'"},
  };
  for (const auto& [text, expected] : cases) {
    absl::StatusOr<CredentialSet> set = ParseCredentials(text, "creds");
    ASSERT_FALSE(set.ok()) << text;
    EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(
        std::string(set.status().message()),
        AllOf(HasSubstr(expected), Not(HasSubstr("topsecret")), Not(HasSubstr("othersecret"))))
        << text;
  }
}

class CredentialsFileOnDiskTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text, mode_t mode) {
    const std::string path = (dir_.path() / "credentials").string();
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  }
  ScopedTempDir dir_;
};

TEST_F(CredentialsFileOnDiskTest, AnOwnerOnlyFileLoads) {
  absl::StatusOr<CredentialSet> set = LoadCredentialsFile(Write(kGoodFile, 0600));
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->keys.size(), 5u);
}

TEST_F(CredentialsFileOnDiskTest, AFileOthersCanReadIsRefusedSayingChmod) {
  for (mode_t mode : {0644, 0640, 0604, 0660}) {
    const std::string path = Write(kGoodFile, mode);
    absl::StatusOr<CredentialSet> set = LoadCredentialsFile(path);
    ASSERT_FALSE(set.ok()) << std::oct << mode;
    EXPECT_EQ(set.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(std::string(set.status().message()),
                AllOf(HasSubstr(path), HasSubstr("chmod 600"), HasSubstr("group or others")));
  }
}

TEST_F(CredentialsFileOnDiskTest, AMissingFileAndABadLineNameTheFile) {
  const std::string missing = (dir_.path() / "nope").string();
  absl::StatusOr<CredentialSet> set = LoadCredentialsFile(missing);
  EXPECT_EQ(set.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(set.status().message()), HasSubstr(missing));
  const std::string path = Write("admin A secret\nboss B secret\n", 0600);
  set = LoadCredentialsFile(path);
  EXPECT_THAT(std::string(set.status().message()), HasSubstr(path + ":2: unknown role 'boss'"));
}

}  // namespace
}  // namespace debugplane::service::auth
