// Detection latency: from the moment a step file holding a NaN is complete on
// disk to the IssuesFound change on a WatchTrainingJob stream (issue 3).
//
//   detection_latency_bench [--samples 200] [--concurrency 1,4] [--healthy-steps 3]
//                           [--step-interval-ms 10] [--rule-workers 2]
//                           [--timeout-ms 10000] [--server PATH] [--gdb-on-timeout]
//                           [--tensorboard]
//
// It runs the real debugplane-server binary as a child process (loopback,
// port 0, its own data directory and --data-root), as production runs it:
// the same SQLite commit (fsync) before the change is pushed, the same
// inotify scheduler and rule-worker pool, the same gRPC transport.
//
// For each sample: create a job with an ExplodingTensor rule whose trial
// directory does not exist yet (training has not started), open
// WatchTrainingJob, write healthy steps, then a step whose loss is NaN. Each
// file is written as a temporary and renamed into place, the event file
// first and the index file last (as smdebug does): the step is complete on
// disk when the index rename returns, which is when the clock starts. It
// stops when the watch stream delivers the rule's IssuesFound.
//
// With --tensorboard the job gives TensorBoardOutputConfig instead of a
// DebugHookConfig, and each step is one simple_value record ("train/loss")
// appended to one event file, as torch's SummaryWriter writes it. A
// TensorBoard step is complete once a later step is written (its values may
// come in several records), so the NaN step is followed by one more healthy
// step, and the clock starts when that append returns.
//
// With --concurrency N, N jobs run samples at the same time, so their
// evaluations share the server's rule-worker pool and committer.
//
// Ceilings, measured in the same run: the inotify wake-up alone (a thread of
// this process blocked on inotify, woken by the same rename, no server), a
// Describe round trip (gRPC, no disk) and a Create round trip (gRPC plus one
// fsynced commit, which IssuesFound also pays before it is pushed).
//
// Every wait has a timeout; a sample that times out is reported with its
// phase, and with --gdb-on-timeout the server's threads are dumped with gdb.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
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
using Clock = std::chrono::steady_clock;

double MicrosSince(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::micro>(end - start).count();
}

// --- Files -------------------------------------------------------------------

// Writes `data` to `path` through a temporary in the same directory and a
// rename, so the file appears complete or not at all.
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

// A one-worker smdebug trial with one scalar loss tensor per step, in the
// on-disk format of docs/smdebug-format.md.
class Trial {
 public:
  explicit Trial(fs::path dir, bool tensorboard = false)
      : dir_(std::move(dir)), tensorboard_(tensorboard) {}

  // TensorBoard: appends one simple_value record of `loss` at `step`.
  absl::Status AppendTensorBoardStep(int64_t step, float loss) {
    std::error_code error;
    fs::create_directories(dir_, error);
    smdebug::Event event;
    event.set_wall_time(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
    event.set_step(step);
    smdebug::Summary::Value* value = event.mutable_summary()->add_value();
    value->set_tag("train/loss");
    value->set_simple_value(loss);
    const std::string record = rules_engine::EncodeTfRecord(event.SerializeAsString());
    const std::string path = (dir_ / "events.out.tfevents.1700000000.bench.1.0").string();
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", path));
    const bool whole =
        write(fd, record.data(), record.size()) == static_cast<ssize_t>(record.size());
    close(fd);
    return whole ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot append to ", path));
  }

  // Writes step `step` (TRAIN mode): event file, then index file. The
  // collections file comes with the first step, as the hook writes it.
  absl::Status WriteStep(int64_t step, float loss) {
    if (tensorboard_) return AppendTensorBoardStep(step, loss);
    std::error_code error;
    if (!collections_written_) {
      fs::create_directories(dir_ / "collections/000000000", error);
      fs::create_directories(dir_ / "index/000000000", error);
      const std::string collections =
          R"({"collections": {"losses": {"name": "losses", "include_regex": )"
          R"(["[Ll]oss_(?!input).*output"], "tensor_names": [], )"
          R"("reduction_config": {"save_raw_tensor": true}}, "default": {"name": "default", )"
          R"("include_regex": [], "tensor_names": [], "reduction_config": {}}}, )"
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
    value->set_tag("CrossEntropyLoss_output_0");
    smdebug::TensorProto* tensor = value->mutable_tensor();
    tensor->set_dtype(smdebug::DT_FLOAT);
    tensor->set_tensor_content(std::string(reinterpret_cast<const char*>(&loss), sizeof(loss)));
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
        R"("}, "tensor_payload": [{"tensorname": "CrossEntropyLoss_output_0", )",
        R"("start_idx": 0, "length": )", record.size(), R"(}], "shape_payload": []})");
    return WriteAtomically(dir_ / absl::StrFormat("index/000000000/%012d_worker_0.json", step),
                           index);
  }

 private:
  fs::path dir_;
  bool tensorboard_ = false;
  bool collections_written_ = false;
};

// --- The server ----------------------------------------------------------------

// --- The inotify ceiling -----------------------------------------------------------

// A thread blocked on inotify for one directory, as the server's watch thread
// is: measures how long the kernel takes from a rename returning to the
// blocked reader running.
class InotifyProbe {
 public:
  explicit InotifyProbe(fs::path dir) : dir_(std::move(dir)) {
    std::error_code error;
    fs::create_directories(dir_, error);
    fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd_ >= 0) inotify_add_watch(fd_, dir_.c_str(), IN_MOVED_TO);
    thread_ = std::thread([this] { Loop(); });
  }
  ~InotifyProbe() {
    stop_ = true;
    thread_.join();
    if (fd_ >= 0) close(fd_);
  }

  // One file written and renamed into the directory; microseconds from the
  // write starting to the reader being awake, or -1 if no wake-up came
  // within `timeout`.
  double Measure(int i, absl::Duration timeout) {
    {
      absl::MutexLock lock(&mu_);
      woken_ = false;
    }
    // From before the write: the reader often runs (on the other core)
    // before rename() has returned to the writer.
    const Clock::time_point start = Clock::now();
    if (!WriteAtomically(dir_ / absl::StrCat("probe-", i % 8), "x").ok()) return -1;
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout(absl::Condition(&woken_), timeout)) return -1;
    return MicrosSince(start, woken_at_);
  }

 private:
  void Loop() {
    alignas(inotify_event) char buffer[4096];
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const Clock::time_point now = Clock::now();
      bool moved = false;
      ssize_t length;
      while ((length = read(fd_, buffer, sizeof(buffer))) > 0) {
        for (ssize_t offset = 0; offset < length;) {
          const auto* event = reinterpret_cast<const inotify_event*>(buffer + offset);
          offset += sizeof(inotify_event) + event->len;
          moved = moved || (event->mask & IN_MOVED_TO) != 0;
        }
      }
      if (!moved) continue;
      absl::MutexLock lock(&mu_);
      woken_at_ = now;
      woken_ = true;
    }
  }

  fs::path dir_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  Clock::time_point woken_at_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// --- Samples -----------------------------------------------------------------------

struct Settings {
  fs::path data_root;
  int healthy_steps = 3;
  absl::Duration step_interval = absl::Milliseconds(10);
  absl::Duration timeout = absl::Seconds(10);
  bool tensorboard = false;  // TensorBoardOutputConfig and appended event records.
};

struct SampleResult {
  bool ok = false;
  std::string failure;  // Which phase timed out or failed, and how.
  double detection_us = 0;
  double create_us = 0;
  double describe_us = 0;
};

v1::CreateTrainingJobRequest JobRequest(const std::string& name, const fs::path& trial,
                                        bool tensorboard) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Bench");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  if (tensorboard) {
    request.mutable_tensor_board_output_config()->set_s3_output_path("file://" + trial.string());
  } else {
    request.mutable_debug_hook_config()->set_s3_output_path("file://" + trial.string());
  }
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name("ExplodingTensor");
  rule->set_rule_evaluator_image(
      "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ExplodingTensor";
  return request;
}

SampleResult RunSample(v1::TrainingJobService::Stub& stub, const Settings& settings,
                       const std::string& name) {
  SampleResult result;
  auto fail = [&](const std::string& phase, const std::string& why) {
    result.failure = absl::StrCat(name, ": ", phase, ": ", why);
    return result;
  };
  const fs::path trial_dir = settings.data_root / name;

  // The trial directory does not exist yet: the job is created before
  // training starts, as an orchestrator does.
  v1::CreateTrainingJobResponse created;
  Clock::time_point start = Clock::now();
  grpc::Status status =
      stub.CreateTrainingJob(ContextWithin(settings.timeout).get(),
                             JobRequest(name, trial_dir, settings.tensorboard), &created);
  result.create_us = MicrosSince(start, Clock::now());
  if (!status.ok()) return fail("create", status.error_message());

  v1::WatchTrainingJobRequest watch_request;
  watch_request.set_training_job_name(name);
  // The stream's deadline bounds every read below: a lost event ends the
  // read with DEADLINE_EXCEEDED instead of blocking.
  auto watch_context = ContextWithin(settings.timeout);
  auto stream = stub.WatchTrainingJob(watch_context.get(), watch_request);
  v1::WatchTrainingJobResponse event;
  auto end_stream = [&] {
    watch_context->TryCancel();
    (void)stream->Finish();
  };
  if (!stream->Read(&event)) {
    const grpc::Status ended = stream->Finish();
    return fail("watch initial state", ended.error_message());
  }

  Trial trial(trial_dir, settings.tensorboard);
  for (int step = 0; step < settings.healthy_steps; ++step) {
    if (absl::Status s = trial.WriteStep(step, 0.7f - 0.01f * step); !s.ok()) {
      end_stream();
      return fail(absl::StrCat("write healthy step ", step), s.ToString());
    }
    absl::SleepFor(settings.step_interval);
  }

  v1::DescribeTrainingJobRequest describe;
  describe.set_training_job_name(name);
  v1::DescribeTrainingJobResponse described;
  start = Clock::now();
  status = stub.DescribeTrainingJob(ContextWithin(settings.timeout).get(), describe, &described);
  result.describe_us = MicrosSince(start, Clock::now());
  if (!status.ok()) {
    end_stream();
    return fail("describe", status.error_message());
  }

  absl::Status written =
      trial.WriteStep(settings.healthy_steps, std::numeric_limits<float>::quiet_NaN());
  if (written.ok() && settings.tensorboard)
    written = trial.WriteStep(settings.healthy_steps + 1, 0.5f);
  const Clock::time_point complete = Clock::now();
  if (!written.ok()) {
    end_stream();
    return fail("write NaN step", written.ToString());
  }
  std::string last_seen = "no event after the initial state";
  while (stream->Read(&event)) {
    const Clock::time_point now = Clock::now();
    if (event.debug_rule_evaluation_statuses_size() == 0) continue;
    const auto& rule = event.debug_rule_evaluation_statuses(0);
    last_seen = absl::StrCat("last rule status ",
                             v1::RuleEvaluationStatus::Value_Name(rule.rule_evaluation_status()),
                             " (", rule.status_details(), ")");
    if (rule.rule_evaluation_status() == v1::RuleEvaluationStatus::IssuesFound) {
      result.detection_us = MicrosSince(complete, now);
      result.ok = true;
      break;
    }
  }
  if (!result.ok) {
    const grpc::Status ended = stream->Finish();
    return fail(
        "await IssuesFound",
        absl::StrCat("stream ended (", ended.error_message(), ") ",
                     absl::FormatDuration(absl::Microseconds(MicrosSince(complete, Clock::now()))),
                     " after the NaN step was complete; ", last_seen));
  }
  end_stream();

  // The job's training is over: stop it, as an orchestrator would, so the
  // server does not accumulate running jobs over thousands of samples.
  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name(name);
  v1::StopTrainingJobResponse stopped;
  status = stub.StopTrainingJob(ContextWithin(settings.timeout).get(), stop, &stopped);
  if (!status.ok()) return fail("stop", status.error_message());
  return result;
}

void PrintRow(const std::string& what, int jobs, const Percentiles& p, size_t failures) {
  std::printf("%-34s %5d %8zu | %9.0f %9.0f %9.0f %9.0f | %8zu\n", what.c_str(), jobs, p.n, p.p50,
              p.p90, p.p99, p.max, failures);
}

void DumpServerThreads(pid_t pid, const fs::path& file) {
  const std::string command = absl::StrCat(
      "timeout 60 gdb -p ", pid, " -batch -ex 'thread apply all bt' > ", file.string(), " 2>&1");
  if (std::system(command.c_str()) == 0) {
    std::fprintf(stderr, "server threads written to %s\n", file.c_str());
  } else {
    std::fprintf(stderr, "could not run gdb on the server (%s)\n", command.c_str());
  }
}

int Main(int argc, char** argv) {
  CLI::App app{"Detection latency: NaN step complete on disk to IssuesFound on a watch stream"};
  int samples = 200;
  std::vector<int> concurrency = {1, 4};
  int healthy_steps = 3;
  int step_interval_ms = 10;
  int rule_workers = 2;
  int timeout_ms = 10000;
  std::string server_binary = NextToSelf("debugplane-server");
  std::string data_dir;
  bool gdb_on_timeout = false;
  bool keep = false;
  app.add_option("--samples", samples, "Samples per concurrency level")->capture_default_str();
  app.add_option("--concurrency", concurrency, "Jobs sampled at the same time (list)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--healthy-steps", healthy_steps, "Healthy steps before the NaN step")
      ->capture_default_str();
  app.add_option("--step-interval-ms", step_interval_ms, "Pause after each healthy step")
      ->capture_default_str();
  app.add_option("--rule-workers", rule_workers, "The server's --rule-workers")
      ->capture_default_str();
  app.add_option("--timeout-ms", timeout_ms, "Bound of every wait (RPC, watch stream)")
      ->capture_default_str();
  app.add_option("--server", server_binary, "debugplane-server binary")->capture_default_str();
  app.add_option("--data-dir", data_dir, "Server data directory (default: a new temporary one)");
  app.add_flag("--gdb-on-timeout", gdb_on_timeout,
               "On a timed-out sample, dump the server's threads with gdb");
  app.add_flag("--keep", keep, "Keep the data directory");
  bool tensorboard = false;
  app.add_flag("--tensorboard", tensorboard,
               "TensorBoardOutputConfig and appended event records instead of an smdebug trial");
  CLI11_PARSE(app, argc, argv);

  if (data_dir.empty()) {
    data_dir = (fs::temp_directory_path() / absl::StrCat("dp-latency-", getpid())).string();
  }
  std::error_code error;
  fs::remove_all(data_dir, error);
  const fs::path root = fs::path(data_dir) / "trials";
  fs::create_directories(root, error);
  if (error) {
    std::fprintf(stderr, "cannot create %s: %s\n", root.c_str(), error.message().c_str());
    return 2;
  }
  Settings settings;
  settings.data_root = fs::canonical(root);
  settings.healthy_steps = healthy_steps;
  settings.step_interval = absl::Milliseconds(step_interval_ms);
  settings.timeout = absl::Milliseconds(timeout_ms);
  settings.tensorboard = tensorboard;

  ServerChild server;
  const fs::path log_file = fs::path(data_dir) / "server.log";
  if (absl::Status started =
          server.Start(server_binary,
                       {"--data-dir", (fs::path(data_dir) / "db").string(), "--data-root",
                        settings.data_root.string(), "--rule-workers", absl::StrCat(rule_workers),
                        "--log-level", "warn"},
                       log_file, absl::Seconds(30));
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
  InotifyProbe probe(fs::path(data_dir) / "probe");

  std::printf(
      "detection_latency_bench: %d samples per level, %d healthy steps %d ms apart, server pid %d "
      "(--rule-workers %d), data dir %s\n",
      samples, healthy_steps, step_interval_ms, server.pid(), rule_workers, data_dir.c_str());
  std::printf("%-34s %5s %8s | %9s %9s %9s %9s | %8s\n", "microseconds", "jobs", "samples", "p50",
              "p90", "p99", "max", "failed");

  // Warm-up: the first job pays for connection setup, first SQLite pages,
  // first inotify watches; it is not a sample.
  {
    SampleResult warm = RunSample(*stub, settings, "warmup");
    if (!warm.ok) std::fprintf(stderr, "warm-up failed: %s\n", warm.failure.c_str());
  }

  size_t total_failures = 0;
  std::atomic<bool> dumped{false};
  std::vector<double> inotify_us;
  std::vector<double> describe_us;
  std::vector<double> create_us;
  for (int jobs : concurrency) {
    jobs = std::max(1, jobs);
    std::vector<SampleResult> results(samples);
    std::atomic<int> next{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < jobs; ++t) {
      threads.emplace_back([&, jobs] {
        for (int i; (i = next.fetch_add(1)) < samples;) {
          results[i] = RunSample(*stub, settings, absl::StrCat("c", jobs, "-s", i));
          // The kernel's part alone, on the same machine at the same time.
          if (jobs == 1) {
            const double us = probe.Measure(i, settings.timeout);
            if (us >= 0) inotify_us.push_back(us);
          }
          if (!results[i].ok) {
            std::fprintf(stderr, "FAILED sample %d (jobs %d): %s\n", i, jobs,
                         results[i].failure.c_str());
            // While the server is still in the state that lost the event.
            if (gdb_on_timeout && !dumped.exchange(true)) {
              DumpServerThreads(server.pid(), fs::path(data_dir) / "gdb-threads.txt");
            }
          }
        }
      });
    }
    for (auto& thread : threads) thread.join();
    std::vector<double> detection;
    size_t failures = 0;
    for (const SampleResult& r : results) {
      if (!r.ok) {
        ++failures;
        continue;
      }
      detection.push_back(r.detection_us);
      if (jobs == 1) {
        describe_us.push_back(r.describe_us);
        create_us.push_back(r.create_us);
      }
    }
    total_failures += failures;
    PrintRow("NaN step on disk -> IssuesFound", jobs, Summarize(detection), failures);
    std::fflush(stdout);
  }
  // The ceilings come from the one-job level, where nothing else competes.
  if (!describe_us.empty()) {
    PrintRow("ceiling: inotify wake-up alone", 1, Summarize(inotify_us), 0);
    PrintRow("ceiling: Describe round trip", 1, Summarize(describe_us), 0);
    PrintRow("ceiling: Create round trip (fsync)", 1, Summarize(create_us), 0);
  } else {
    std::printf("(ceilings are measured at the one-job level: add 1 to --concurrency)\n");
  }

  const bool clean = server.Stop(absl::Seconds(15));
  if (!clean) std::fprintf(stderr, "the server did not exit within 15 s of SIGTERM: killed\n");
  if (!keep && total_failures == 0 && clean) fs::remove_all(data_dir, error);
  return total_failures == 0 && clean ? 0 : 1;
}

}  // namespace
}  // namespace debugplane::bench

int main(int argc, char** argv) { return debugplane::bench::Main(argc, argv); }
