// The agent's host name in a job: --node-id, else the launcher's
// environment (SageMaker, torchrun), else the machine's name.

#include "client/agent/host_identity.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::client {
namespace {

using ::testing::HasSubstr;

EnvironmentReader Environment(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const char* name) -> const char* {
    auto it = values.find(name);
    return it == values.end() ? nullptr : it->second.c_str();
  };
}

TEST(HostIdentityTest, TheFlagComesFirst) {
  auto name = ResolveHostName("trainer-7", Environment({{"SM_CURRENT_HOST", "algo-2"}}), "m");
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(*name, "trainer-7");
}

TEST(HostIdentityTest, SageMakerThenTorchrunRanksThenTheMachine) {
  EXPECT_EQ(*ResolveHostName("", Environment({{"SM_CURRENT_HOST", "algo-2"}, {"NODE_RANK", "5"}}),
                             "m"),
            "algo-2");
  EXPECT_EQ(*ResolveHostName("", Environment({{"GROUP_RANK", "0"}, {"NODE_RANK", "5"}}), "m"),
            "algo-1");
  EXPECT_EQ(*ResolveHostName("", Environment({{"NODE_RANK", "2"}}), "m"), "algo-3");
  EXPECT_EQ(*ResolveHostName("", Environment({}), "gpu-node-4"), "gpu-node-4");
}

TEST(HostIdentityTest, ABadNameOrRankSaysWhereItCameFrom) {
  auto rank = ResolveHostName("", Environment({{"NODE_RANK", "two"}}), "m");
  ASSERT_EQ(rank.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(rank.status().message(), HasSubstr("NODE_RANK='two' is not a node rank"));
  auto slash = ResolveHostName("a/b", Environment({}), "m");
  ASSERT_EQ(slash.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(slash.status().message(), HasSubstr("--node-id gives the host name 'a/b'"));
  auto machine = ResolveHostName("", Environment({}), "");
  ASSERT_FALSE(machine.ok());
  EXPECT_THAT(machine.status().message(), HasSubstr("the machine's name"));
}

}  // namespace
}  // namespace debugplane::client
