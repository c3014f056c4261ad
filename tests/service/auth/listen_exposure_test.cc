// CheckListenExposure: secure by default.

#include "service/auth/listen_exposure.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::service::auth {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ListenExposureTest, LoopbackAddressesAndUnixSocketsAreLoopback) {
  for (const char* address :
       {"127.0.0.1:7070", "127.1.2.3:0", "localhost:7070", "LOCALHOST:1", "[::1]:7070",
        "ipv4:127.0.0.1:1", "unix:/tmp/socket", "[::ffff:127.0.0.1]:80"}) {
    EXPECT_TRUE(IsLoopbackAddress(address)) << address;
  }
  for (const char* address :
       {"0.0.0.0:7070", "[::]:7070", "10.0.0.1:7070", "example.com:7070", "localhost.example.com:1",
        "128.0.0.1:1", "[2001:db8::1]:1", "127.0.0.1.example.com:1", ":7070"}) {
    EXPECT_FALSE(IsLoopbackAddress(address)) << address;
  }
}

TEST(ListenExposureTest, LoopbackNeedsNothing) {
  EXPECT_TRUE(CheckListenExposure("127.0.0.1:0", false, false, false).ok());
}

TEST(ListenExposureTest, ExposedWithoutCredentialsIsRefusedSayingWhatToAdd) {
  absl::Status status = CheckListenExposure("0.0.0.0:7070", false, true, false);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("--listen 0.0.0.0:7070"), HasSubstr("no --credentials"),
                    HasSubstr("--insecure")));
  EXPECT_THAT(
      std::string(CheckListenExposure("[::]:1", false, false, false, "--http-listen").message()),
      HasSubstr("--http-listen [::]:1"));
}

TEST(ListenExposureTest, ExposedWithCredentialsButPlaintextIsRefused) {
  absl::Status status = CheckListenExposure("host.example:7070", true, false, false);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("without TLS"), HasSubstr("--tls-cert and --tls-key")));
}

TEST(ListenExposureTest, CredentialsAndTlsOrInsecureAllowIt) {
  EXPECT_TRUE(CheckListenExposure("0.0.0.0:7070", true, true, false).ok());
  EXPECT_TRUE(CheckListenExposure("0.0.0.0:7070", false, false, true).ok());
  EXPECT_TRUE(CheckListenExposure("0.0.0.0:7070", true, false, true).ok());
}

}  // namespace
}  // namespace debugplane::service::auth
