// debugplane_profiler as the agent carries it: the embedded text is the
// module, written where asked, and the training command's environment gets
// its directory first on PYTHONPATH (an existing PYTHONPATH kept after it)
// with the trace directory and the node.

#include "client/agent/profiler_module.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::client {
namespace {

using ::debugplane::testing::ScopedTempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ProfilerModuleTest, WritesTheEmbeddedModule) {
  EXPECT_THAT(std::string(ProfilerModuleText()), HasSubstr("def profile(config_path=None"));
  ScopedTempDir dir;
  ASSERT_TRUE(WriteProfilerModule(dir.path().string()).ok());
  std::ifstream in(dir.path() / "debugplane_profiler.py");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), std::string(ProfilerModuleText()));
  EXPECT_FALSE(WriteProfilerModule("/proc/no/such/dir").ok());
}

TEST(ProfilerModuleTest, EnvironmentPutsTheModuleFirstOnPythonPath) {
  std::vector<std::string> env = {"HOME=/home/x", "PYTHONPATH=/opt/lib",
                                  "DEBUGPLANE_NODE_ID=stale"};
  AddProfilerModuleEnvironment(env, "/c", ProfilerTraceDir("/p", "algo-2"), "algo-2");
  EXPECT_THAT(env, ElementsAre("HOME=/home/x", "PYTHONPATH=/c:/opt/lib",
                               "DEBUGPLANE_TRACE_DIR=/p/framework/pytorch/algo-2",
                               "DEBUGPLANE_NODE_ID=algo-2"));
  std::vector<std::string> bare = {"PYTHONPATH="};
  AddProfilerModuleEnvironment(bare, "/c", "/t", "algo-1");
  EXPECT_EQ(bare[0], "PYTHONPATH=/c");
}

}  // namespace
}  // namespace debugplane::client
