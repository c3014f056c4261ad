// A stand-in for an smdebug-instrumented training script, for the agent's
// end-to-end tests (no Python, no smdebug): it reads debughookconfig.json
// once and profilerconfig.json at every step, as smdebug does, writes one
// step of tensors per iteration into the hook's LocalPath in the smdebug
// format, and logs every profiler configuration it sees.
//
//   fake_training [--steps N] [--step-ms MS] [--exit-code C] [--nan-at STEP]
//                 [--log FILE] [--ignore-term]

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "tests/rules_engine/trial_writer.h"

namespace {

std::string ReadFile(const char* path) {
  if (path == nullptr) return "";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 100, step_ms = 20, exit_code = 0, nan_at = -1;
  std::string log_path;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : "";
    if (flag == "--steps") (void)absl::SimpleAtoi(value, &steps), ++i;
    else if (flag == "--step-ms") (void)absl::SimpleAtoi(value, &step_ms), ++i;
    else if (flag == "--exit-code") (void)absl::SimpleAtoi(value, &exit_code), ++i;
    else if (flag == "--nan-at") (void)absl::SimpleAtoi(value, &nan_at), ++i;
    else if (flag == "--log") log_path = value, ++i;
    else if (flag == "--ignore-term") signal(SIGTERM, SIG_IGN);
  }
  auto hook = nlohmann::json::parse(ReadFile(std::getenv("SMDEBUG_CONFIG_FILE_PATH")), nullptr,
                                    /*allow_exceptions=*/false);
  if (hook.is_discarded() || !hook.contains("LocalPath")) {
    std::cerr << "fake_training: no usable SMDEBUG_CONFIG_FILE_PATH\n";
    return 90;
  }
  debugplane::rules_engine::testing::TrialWriter writer(hook["LocalPath"].get<std::string>());
  std::ofstream log;
  if (!log_path.empty()) log.open(log_path, std::ios::app);
  std::string seen;
  for (int step = 0; step < steps; ++step) {
    // As smdebug: the profiler configuration is read again at every step.
    const std::string profiler = ReadFile(std::getenv("SMPROFILER_CONFIG_PATH"));
    if (profiler != seen) {
      seen = profiler;
      auto parsed = nlohmann::json::parse(profiler, nullptr, false);
      if (log.is_open()) {
        log << "step " << step << " "
            << (parsed.is_discarded() ? std::string("<unparsable>")
                                      : parsed["ProfilingParameters"].dump())
            << std::endl;
      }
    }
    const double loss =
        step == nan_at ? std::numeric_limits<double>::quiet_NaN() : 1.0 / (1 + step);
    writer.AddStep(step, debugplane::rules_engine::Mode::kTrain, step,
                   {{"CrossEntropyLoss_output_0", {}, {loss}}});
    absl::SleepFor(absl::Milliseconds(step_ms));
  }
  writer.EndTraining();
  return exit_code;
}
