// A stand-in for an smdebug-instrumented training script, for the agent's
// end-to-end tests (no Python, no smdebug): it reads debughookconfig.json
// once and profilerconfig.json at every step, as smdebug does, writes one
// step of tensors per iteration into the hook's LocalPath in the smdebug
// format, and logs every profiler configuration it sees. At the end it
// writes training_job_end.ts, as every smdebug worker does when it exits.
//
//   fake_training [--steps N] [--step-ms MS] [--exit-code C] [--nan-at STEP]
//                 [--log FILE] [--ignore-term]
//                 [--rank R --num-workers N] [--wait-for-end-before STEP]
//                 [--exit-delay-ms MS] [--pid-file FILE] [--until-file FILE]
//
// Several workers of one job (torch.distributed, include_workers "all"):
// start one process per rank with --rank and --num-workers; each writes as
// worker_<rank> and announces num_workers in its collections file.
// --wait-for-end-before STEP makes this worker wait, before writing STEP,
// until another worker has ended (training_job_end.ts is there), then one
// more --step-ms: its later steps land after another worker's end.
// --exit-delay-ms holds the process after its last step, before it ends.
// --pid-file writes the process id to FILE (atomically) when it starts.
// --until-file keeps stepping after --steps until FILE exists (a test ends
// the training when it has seen what it waits for, whatever the load).
// With --log, the time the --nan-at step's index file was written is logged
// ("nan step N written at unix us T").

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
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
  int rank = 0, num_workers = 1, wait_for_end_before = -1, exit_delay_ms = 0;
  const std::map<std::string, int*> int_flags = {
      {"--steps", &steps},
      {"--step-ms", &step_ms},
      {"--exit-code", &exit_code},
      {"--nan-at", &nan_at},
      {"--rank", &rank},
      {"--num-workers", &num_workers},
      {"--wait-for-end-before", &wait_for_end_before},
      {"--exit-delay-ms", &exit_delay_ms},
  };
  std::string log_path;
  std::string until_file;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (auto it = int_flags.find(flag); it != int_flags.end() && i + 1 < argc) {
      (void)absl::SimpleAtoi(argv[++i], it->second);
    } else if (flag == "--log" && i + 1 < argc) {
      log_path = argv[++i];
    } else if (flag == "--pid-file" && i + 1 < argc) {
      const std::string pid_file = argv[++i];
      std::ofstream(pid_file + ".tmp") << getpid() << std::endl;
      std::filesystem::rename(pid_file + ".tmp", pid_file);
    } else if (flag == "--until-file" && i + 1 < argc) {
      until_file = argv[++i];
    } else if (flag == "--ignore-term") {
      signal(SIGTERM, SIG_IGN);
    }
  }
  auto hook = nlohmann::json::parse(ReadFile(std::getenv("SMDEBUG_CONFIG_FILE_PATH")), nullptr,
                                    /*allow_exceptions=*/false);
  if (hook.is_discarded() || !hook.contains("LocalPath")) {
    std::cerr << "fake_training: no usable SMDEBUG_CONFIG_FILE_PATH\n";
    return 90;
  }
  const std::string trial = hook["LocalPath"].get<std::string>();
  debugplane::rules_engine::testing::TrialWriter writer(trial, "worker_" + std::to_string(rank),
                                                        num_workers);
  std::ofstream log;
  if (!log_path.empty()) log.open(log_path, std::ios::app);
  std::string seen;
  const auto more_steps = [&](int step) {
    std::error_code error;
    return step < steps || (!until_file.empty() && !std::filesystem::exists(until_file, error));
  };
  for (int step = 0; more_steps(step); ++step) {
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
    if (step == wait_for_end_before) {
      std::error_code error;
      while (!std::filesystem::exists(trial + "/training_job_end.ts", error)) {
        absl::SleepFor(absl::Milliseconds(5));
      }
      absl::SleepFor(absl::Milliseconds(step_ms));
    }
    const double loss =
        step == nan_at ? std::numeric_limits<double>::quiet_NaN() : 1.0 / (1 + step);
    writer.AddStep(step, debugplane::rules_engine::Mode::kTrain, step,
                   {{"CrossEntropyLoss_output_0", {}, {loss}}});
    // When the NaN step's last file (its index) was written, for the
    // detection latency bench (bench/object_storage_bench.py).
    if (step == nan_at && log.is_open()) {
      log << "nan step " << step << " written at unix us " << absl::ToUnixMicros(absl::Now())
          << std::endl;
    }
    absl::SleepFor(absl::Milliseconds(step_ms));
  }
  absl::SleepFor(absl::Milliseconds(exit_delay_ms));
  writer.EndTraining();
  return exit_code;
}
