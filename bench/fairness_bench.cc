// Fairness (issue 10): one job replaying a large trial must not delay the
// others. NaN step complete on disk -> IssuesFound on a WatchTrainingJob
// stream, for --jobs jobs sampling at once, first without the replay (the
// ceiling), then while a job evaluates a --replay-gb trial written before it
// was created (every step pending at once, as after a restart or for a rule
// added late).
//
//   fairness_bench [--replay-gb 1] [--step-mb 4] [--jobs 16] [--samples 10]
//                  [--rounds 3] [--rule-workers 2] [--timeout-ms 20000]
//                  [--server PATH] [--keep]
//
// The two phases alternate for --rounds rounds in one server run (each
// round's replay is a new job over the same trial, stopped after its phase),
// so that other load on a shared machine weighs on both alike; the rows
// pool the rounds, and each round's p99 is printed too.
//
// The real debugplane-server runs as a child process (loopback, port 0, its
// own data directory and --data-root). The replay job's ExplodingTensor rule
// reads every tensor (tensor_regex ".*"): each step holds one --step-mb MB
// FLOAT tensor, all finite, so its rule never concludes and every byte is
// decoded and checked. Each sample of the other jobs creates a job whose
// trial does not exist yet, opens WatchTrainingJob, writes one healthy step
// and then a NaN step (event file, then index file, each renamed into
// place); the clock starts when the index rename returns and stops when the
// stream delivers IssuesFound. The replay's progress (LastEvaluatedStep) is
// printed after the phase, to show it was still running throughout.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_processes.h"
#include "bench/bench_stats.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "rules_engine/smdebug/smdebug_event.pb.h"
#include "rules_engine/smdebug/tfrecord.h"

namespace debugplane::bench {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

double MicrosSince(SteadyClock::time_point start, SteadyClock::time_point end) {
  return std::chrono::duration<double, std::micro>(end - start).count();
}

// Writes `data` to `path` through a temporary and a rename.
absl::Status WriteAtomically(const fs::path& path, const std::string& data) {
  const fs::path temp = path.string() + ".tmp";
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot create ", temp.string()));
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = write(fd, data.data() + written, data.size() - written);
    if (n <= 0) {
      close(fd);
      return absl::InternalError(absl::StrCat("cannot write ", temp.string()));
    }
    written += static_cast<size_t>(n);
  }
  close(fd);
  if (rename(temp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", temp.string()));
  }
  return absl::OkStatus();
}

// A one-worker smdebug trial (docs/smdebug-format.md): each step one FLOAT
// tensor of any size, event file first, index file last.
class Trial {
 public:
  explicit Trial(fs::path dir) : dir_(std::move(dir)) {}

  absl::Status WriteStep(int64_t step, const std::string& tensor,
                         const std::vector<float>& values) {
    std::error_code error;
    if (!collections_written_) {
      fs::create_directories(dir_ / "collections/000000000", error);
      fs::create_directories(dir_ / "index/000000000", error);
      const std::string collections =
          R"({"collections": {"losses": {"name": "losses", "include_regex": )"
          R"(["[Ll]oss_(?!input).*output"], "tensor_names": [], )"
          R"("reduction_config": {"save_raw_tensor": true}}, "default": {"name": "default", )"
          R"("include_regex": [".*"], "tensor_names": [], "reduction_config": {}}}, )"
          R"("_meta": {"num_workers": 1}})";
      if (absl::Status s = WriteAtomically(dir_ / "collections/000000000/worker_0_collections.json",
                                           collections);
          !s.ok()) {
        return s;
      }
      collections_written_ = true;
    }
    const std::string event_rel =
        absl::StrFormat("events/%012d/%012d_worker_0.tfevents", step, step);
    fs::create_directories((dir_ / event_rel).parent_path(), error);
    smdebug::Event event;
    event.set_wall_time(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
    event.set_step(step);
    smdebug::Summary::Value* value = event.mutable_summary()->add_value();
    value->set_tag(tensor);
    smdebug::TensorProto* proto = value->mutable_tensor();
    proto->set_dtype(smdebug::DT_FLOAT);
    if (values.size() > 1) proto->mutable_tensor_shape()->add_dim()->set_size(values.size());
    proto->set_tensor_content(
        std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    auto* mode = value->mutable_metadata()->add_plugin_data();
    mode->set_plugin_name("mode");
    mode->set_content("1");  // TRAIN
    auto* mode_step = value->mutable_metadata()->add_plugin_data();
    mode_step->set_plugin_name("mode_step");
    mode_step->set_content(absl::StrCat(step));
    const std::string record = rules_engine::EncodeTfRecord(event.SerializeAsString());
    if (absl::Status s = WriteAtomically(dir_ / event_rel, record); !s.ok()) return s;
    const std::string index = absl::StrCat(
        R"({"meta": {"mode": "TRAIN", "mode_step": )", step, R"(, "event_file_name": ")", event_rel,
        R"("}, "tensor_payload": [{"tensorname": ")", tensor, R"(", "start_idx": 0, "length": )",
        record.size(), R"(}], "shape_payload": []})");
    return WriteAtomically(dir_ / absl::StrFormat("index/000000000/%012d_worker_0.json", step),
                           index);
  }

 private:
  fs::path dir_;
  bool collections_written_ = false;
};

v1::CreateTrainingJobRequest JobRequest(const std::string& name, const fs::path& trial,
                                        const std::string& tensor_regex) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Bench");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  request.mutable_debug_hook_config()->set_s3_output_path("file://" + trial.string());
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name("ExplodingTensor");
  rule->set_rule_evaluator_image(
      "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ExplodingTensor";
  (*rule->mutable_rule_parameters())["tensor_regex"] = tensor_regex;
  return request;
}

struct Sample {
  bool ok = false;
  double detection_us = 0;
  std::string failure;
};

// One job: create, watch, a healthy step, a NaN step, IssuesFound, stop.
Sample RunSample(v1::TrainingJobService::Stub& stub, const fs::path& root, const std::string& name,
                 absl::Duration timeout) {
  Sample sample;
  const fs::path trial_dir = root / name;
  v1::CreateTrainingJobResponse created;
  grpc::Status status = stub.CreateTrainingJob(
      ContextWithin(timeout).get(), JobRequest(name, trial_dir, "CrossEntropyLoss.*"), &created);
  if (!status.ok()) {
    sample.failure = absl::StrCat(name, ": create: ", status.error_message());
    return sample;
  }
  v1::WatchTrainingJobRequest watch_request;
  watch_request.set_training_job_name(name);
  auto watch_context = ContextWithin(timeout);
  auto stream = stub.WatchTrainingJob(watch_context.get(), watch_request);
  v1::WatchTrainingJobResponse event;
  if (!stream->Read(&event)) {
    sample.failure = absl::StrCat(name, ": watch: ", stream->Finish().error_message());
    return sample;
  }
  Trial trial(trial_dir);
  absl::Status written = trial.WriteStep(0, "CrossEntropyLoss_output_0", {0.7f});
  absl::SleepFor(absl::Milliseconds(5));
  SteadyClock::time_point complete;
  if (written.ok()) {
    written =
        trial.WriteStep(1, "CrossEntropyLoss_output_0", {std::numeric_limits<float>::quiet_NaN()});
    complete = SteadyClock::now();
  }
  if (!written.ok()) {
    watch_context->TryCancel();
    (void)stream->Finish();
    sample.failure = absl::StrCat(name, ": write: ", written.ToString());
    return sample;
  }
  while (stream->Read(&event)) {
    if (event.debug_rule_evaluation_statuses_size() == 0) continue;
    if (event.debug_rule_evaluation_statuses(0).rule_evaluation_status() ==
        v1::RuleEvaluationStatus::IssuesFound) {
      sample.detection_us = MicrosSince(complete, SteadyClock::now());
      sample.ok = true;
      break;
    }
  }
  watch_context->TryCancel();
  (void)stream->Finish();
  if (!sample.ok) sample.failure = absl::StrCat(name, ": no IssuesFound within the timeout");
  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name(name);
  v1::StopTrainingJobResponse stopped;
  (void)stub.StopTrainingJob(ContextWithin(timeout).get(), stop, &stopped);
  return sample;
}

struct Phase {
  std::vector<double> detection_us;
  std::vector<std::string> failures;

  void Add(const Phase& other) {
    detection_us.insert(detection_us.end(), other.detection_us.begin(), other.detection_us.end());
    failures.insert(failures.end(), other.failures.begin(), other.failures.end());
  }
};

// `jobs` threads, each running `samples` samples one after the other.
Phase RunPhase(v1::TrainingJobService::Stub& stub, const fs::path& root, const std::string& tag,
               int jobs, int samples, absl::Duration timeout) {
  Phase phase;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int j = 0; j < jobs; ++j) {
    threads.emplace_back([&, j] {
      for (int s = 0; s < samples; ++s) {
        Sample sample = RunSample(stub, root, absl::StrCat(tag, "-", j, "-", s), timeout);
        std::lock_guard<std::mutex> lock(mu);
        if (sample.ok) {
          phase.detection_us.push_back(sample.detection_us);
        } else {
          phase.failures.push_back(sample.failure);
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return phase;
}

// The replay rule's LastEvaluatedStep and status, as Describe shows them.
std::string ReplayState(v1::TrainingJobService::Stub& stub, const std::string& name,
                        absl::Duration timeout) {
  v1::DescribeTrainingJobRequest request;
  request.set_training_job_name(name);
  v1::DescribeTrainingJobResponse response;
  grpc::Status status = stub.DescribeTrainingJob(ContextWithin(timeout).get(), request, &response);
  if (!status.ok() || response.debug_rule_evaluation_statuses_size() == 0) {
    return absl::StrCat("unknown (", status.error_message(), ")");
  }
  const auto& rule = response.debug_rule_evaluation_statuses(0);
  return absl::StrCat(v1::RuleEvaluationStatus::Value_Name(rule.rule_evaluation_status()),
                      ", LastEvaluatedStep ",
                      rule.has_last_evaluated_step() ? rule.last_evaluated_step() : -1);
}

void PrintRow(const std::string& what, const Phase& phase) {
  const Percentiles p = Summarize(phase.detection_us);
  std::printf("%-40s %8zu | %9.0f %9.0f %9.0f %9.0f | %6zu\n", what.c_str(), p.n, p.p50, p.p90,
              p.p99, p.max, phase.failures.size());
  for (size_t i = 0; i < std::min<size_t>(3, phase.failures.size()); ++i) {
    std::printf("  failed: %s\n", phase.failures[i].c_str());
  }
}

int Main(int argc, char** argv) {
  CLI::App app{"Fairness: NaN -> IssuesFound for many jobs while one job replays a large trial"};
  double replay_gb = 1.0;
  double step_mb = 4.0;
  int jobs = 16;
  int samples = 10;
  int rule_workers = 2;
  int rounds = 3;
  int timeout_ms = 20000;
  std::string server_binary = NextToSelf("debugplane-server");
  bool keep = false;
  app.add_option("--replay-gb", replay_gb, "Size of the replayed trial (GB, 1e9 bytes)")
      ->capture_default_str();
  app.add_option("--step-mb", step_mb, "Size of each replayed step's tensor (MB)")
      ->capture_default_str();
  app.add_option("--jobs", jobs, "Other jobs sampling at once")->capture_default_str();
  app.add_option("--samples", samples, "Samples per job and phase")->capture_default_str();
  app.add_option("--rounds", rounds, "Rounds of the two phases, alternating")
      ->capture_default_str();
  app.add_option("--rule-workers", rule_workers, "The server's --rule-workers")
      ->capture_default_str();
  app.add_option("--timeout-ms", timeout_ms, "Bound of every wait")->capture_default_str();
  app.add_option("--server", server_binary, "debugplane-server binary")->capture_default_str();
  app.add_flag("--keep", keep, "Keep the data directory");
  CLI11_PARSE(app, argc, argv);
  const absl::Duration timeout = absl::Milliseconds(timeout_ms);

  const fs::path data_dir = fs::temp_directory_path() / absl::StrCat("dp-fairness-", getpid());
  std::error_code error;
  fs::remove_all(data_dir, error);
  fs::create_directories(data_dir / "trials", error);
  if (error) {
    std::fprintf(stderr, "cannot create %s: %s\n", data_dir.c_str(), error.message().c_str());
    return 2;
  }
  const fs::path root = fs::canonical(data_dir / "trials");

  // The replayed trial, written before its job exists.
  const size_t floats_per_step = static_cast<size_t>(step_mb * 1e6 / sizeof(float));
  const int64_t replay_steps =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(replay_gb * 1e9 / (step_mb * 1e6))));
  {
    std::vector<float> values(floats_per_step);
    for (size_t i = 0; i < values.size(); ++i) values[i] = 0.001f * static_cast<float>(i % 997);
    Trial replay(root / "replay");
    const SteadyClock::time_point start = SteadyClock::now();
    for (int64_t step = 0; step < replay_steps; ++step) {
      values[0] = static_cast<float>(step);
      if (absl::Status s = replay.WriteStep(step, "fc1/weights", values); !s.ok()) {
        std::fprintf(stderr, "writing the replay trial: %s\n", s.ToString().c_str());
        return 1;
      }
    }
    std::printf("replay trial: %lld steps of %.1f MB (%.2f GB) written in %.1f s\n",
                static_cast<long long>(replay_steps), step_mb,
                static_cast<double>(replay_steps) * step_mb / 1e3,
                MicrosSince(start, SteadyClock::now()) / 1e6);
  }

  ServerChild server;
  if (absl::Status started =
          server.Start(server_binary,
                       {"--data-dir", (data_dir / "db").string(), "--data-root", root.string(),
                        "--rule-workers", absl::StrCat(rule_workers), "--log-level", "warn"},
                       data_dir / "server.log", absl::Seconds(30));
      !started.ok()) {
    std::fprintf(stderr, "%s\n", started.ToString().c_str());
    return 1;
  }
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(10)))) {
    std::fprintf(stderr, "cannot connect to the server at %s\n", server.address().c_str());
    return 1;
  }
  auto stub = v1::TrainingJobService::NewStub(channel);
  std::printf("fairness_bench: %d jobs x %d samples per phase, --rule-workers %d, server pid %d\n",
              jobs, samples, rule_workers, server.pid());
  std::printf("%-40s %8s | %9s %9s %9s %9s | %6s\n", "NaN -> IssuesFound, microseconds", "samples",
              "p50", "p90", "p99", "max", "failed");

  (void)RunSample(*stub, root, "warmup", timeout);
  Phase ceiling;
  Phase replaying;
  for (int round = 0; round < rounds; ++round) {
    const Phase round_ceiling =
        RunPhase(*stub, root, absl::StrCat("ceiling", round), jobs, samples, timeout);
    PrintRow(absl::StrCat("round ", round, ": no replay"), round_ceiling);
    ceiling.Add(round_ceiling);

    // A new job over the same trial: it reads every step from the start.
    const std::string replay_job = absl::StrCat("replay", round);
    v1::CreateTrainingJobResponse created;
    grpc::Status status = stub->CreateTrainingJob(
        ContextWithin(timeout).get(), JobRequest(replay_job, root / "replay", ".*"), &created);
    if (!status.ok()) {
      std::fprintf(stderr, "creating the replay job: %s\n", status.error_message().c_str());
      return 1;
    }
    const SteadyClock::time_point replay_start = SteadyClock::now();
    const Phase round_replaying =
        RunPhase(*stub, root, absl::StrCat("replaying", round), jobs, samples, timeout);
    const double phase_s = MicrosSince(replay_start, SteadyClock::now()) / 1e6;
    PrintRow(absl::StrCat("round ", round, ": one job replaying"), round_replaying);
    std::printf("  replay after the phase (%.1f s): %s of %lld steps\n", phase_s,
                ReplayState(*stub, replay_job, timeout).c_str(),
                static_cast<long long>(replay_steps - 1));
    replaying.Add(round_replaying);
    v1::StopTrainingJobRequest stop;
    stop.set_training_job_name(replay_job);
    v1::StopTrainingJobResponse stopped;
    (void)stub->StopTrainingJob(ContextWithin(timeout).get(), stop, &stopped);
  }
  PrintRow(absl::StrCat(jobs, " jobs, no replay (ceiling)"), ceiling);
  PrintRow(absl::StrCat(jobs, " jobs, one job replaying"), replaying);
  const double ceiling_p99 = Summarize(ceiling.detection_us).p99;
  if (ceiling_p99 > 0) {
    std::printf("p99 with / without the replay: %.2f\n",
                Summarize(replaying.detection_us).p99 / ceiling_p99);
  }

  server.Stop(absl::Seconds(15));
  if (!keep) fs::remove_all(data_dir, error);
  return ceiling.failures.empty() && replaying.failures.empty() ? 0 : 1;
}

}  // namespace
}  // namespace debugplane::bench

int main(int argc, char** argv) { return debugplane::bench::Main(argc, argv); }
