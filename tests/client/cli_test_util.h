// Helpers for tests that drive RunCli as a user would.

#ifndef DEBUGPLANE_TESTS_CLIENT_CLI_TEST_UTIL_H_
#define DEBUGPLANE_TESTS_CLIENT_CLI_TEST_UTIL_H_

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "client/cli.h"

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

// The first fenced block of the SageMaker page that starts with '{': the
// complete create-training-job template, // comments included.
inline std::string SageMakerCliTemplate() {
  std::ifstream in(std::string(DP_SHARED_DIR) +
                   "/reference/sagemaker-docs/debugger-built-in-rules-api.CLI.md");
  std::stringstream page;
  page << in.rdbuf();
  const std::string text = page.str();
  const size_t start = text.find("```\n{");
  if (start == std::string::npos) return "";
  const size_t end = text.find("\n```", start + 4);
  return text.substr(start + 4, end - (start + 4)) + "\n";
}

}  // namespace debugplane::client::testing

#endif  // DEBUGPLANE_TESTS_CLIENT_CLI_TEST_UTIL_H_
