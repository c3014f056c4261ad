// Helpers for tests that drive RunCli as a user would.

#ifndef DEBUGPLANE_TESTS_CLIENT_CLI_TEST_UTIL_H_
#define DEBUGPLANE_TESTS_CLIENT_CLI_TEST_UTIL_H_

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "client/cli/cli.h"

namespace debugplane::client::testing {

struct CliResult {
  int exit_code;
  std::string out;
  std::string err;
};

// Runs `debugplane <args...>`; `stdin_text` is what `--file -` reads.
inline CliResult RunDebugplane(const std::vector<std::string>& args,
                               const std::string& stdin_text = "") {
  std::vector<const char*> argv = {"debugplane"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  std::istringstream in(stdin_text);
  std::streambuf* saved = std::cin.rdbuf(in.rdbuf());
  std::ostringstream out, err;
  const int code = RunCli(static_cast<int>(argv.size()), argv.data(), out, err);
  std::cin.rdbuf(saved);
  return {code, out.str(), err.str()};
}

// The complete create-training-job template of the SageMaker Debugger guide,
// `//` comments included, as a user pastes it (tests/data/README.md).
inline std::string SageMakerCliTemplate() {
  std::ifstream in(std::string(DP_TEST_DATA_DIR) + "/sagemaker/create-training-job-template.jsonc");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace debugplane::client::testing

#endif  // DEBUGPLANE_TESTS_CLIENT_CLI_TEST_UTIL_H_
