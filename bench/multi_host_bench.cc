// Multi-host jobs (issue 26): how long the job's final status takes once
// the hosts are done, with 1, 4 and 16 simulated hosts.
//
//   multi_host_bench [--samples 30] [--hosts 1,4,16] [--data-dir DIR]
//
// In one process: the real job manager over SQLite (every change fsynced,
// group commit as in the server) and the agents' handler
// (TrainingAgentManager), with N simulated hosts, each one agent
// connection (ConnectAgent) that reports as the agent does. No gRPC hop:
// what is measured is the server's part.
//   - end: every host started; hosts 1..N-1 completed; the clock starts
//     when host N reports EVENT_COMPLETED and stops when that report is
//     acknowledged with the job Completed (durable).
//   - stop: every host started; the clock starts at StopTrainingJob and
//     stops when the job is Stopped: each host, on its stop directive,
//     reports EVENT_STOPPED at once (the reports sent concurrently from a
//     reporter thread, as agents whose commands exit immediately).

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "bench/bench_stats.h"
#include "core/handlers/training_agent_handler.h"
#include "core/manager/training_job_manager.h"
#include "persistence/sqlite/sqlite_storage.h"

namespace debugplane::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Event = v1::ReportTrainingStatusRequest;

// Hands the stop directives to the reporter thread (sinks must not block).
class StopQueue {
 public:
  void Push(std::string host) {
    absl::MutexLock lock(&mu_);
    hosts_.push_back(std::move(host));
  }
  std::vector<std::string> Take() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](std::vector<std::string>* hosts) { return !hosts->empty(); }, &hosts_));
    return std::exchange(hosts_, {});
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> hosts_ ABSL_GUARDED_BY(mu_);
};

class SimulatedHost final : public core::AgentDirectiveSink {
 public:
  SimulatedHost(std::string name, StopQueue* stops) : name_(std::move(name)), stops_(stops) {}
  void OnDirective(std::shared_ptr<const v1::ConnectAgentResponse> directive) override {
    if (directive->stop() && !stopped_) {
      stopped_ = true;  // Directives of one stream are serialized.
      stops_->Push(name_);
    }
  }
  void OnEnd(absl::Status) override {}
  const std::string& name() const { return name_; }

 private:
  const std::string name_;
  StopQueue* const stops_;
  bool stopped_ = false;
};

class Bench {
 public:
  explicit Bench(const fs::path& dir) {
    auto storage = persistence::SqliteStorage::Open((dir / "jobs.db").string());
    if (!storage.ok()) Die(storage.status());
    core::TrainingJobManagerOptions options;
    options.validation.data_roots.push_back(dir);
    auto manager = core::TrainingJobManager::Create(*std::move(storage), options);
    if (!manager.ok()) Die(manager.status());
    manager_ = *std::move(manager);
    agents_ = std::make_unique<core::TrainingAgentManager>(manager_.get());
  }

  // Seconds from the last host's end report to its acknowledgement.
  double EndSample(const std::string& job, int hosts) {
    StopQueue unused;
    auto fleet = StartJob(job, hosts, &unused);
    for (int i = 0; i + 1 < hosts; ++i) Report(job, fleet.hosts[i]->name(), Event::EVENT_COMPLETED);
    const auto start = Clock::now();
    const v1::TrainingJobStatus::Value status =
        Report(job, fleet.hosts.back()->name(), Event::EVENT_COMPLETED);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (status != v1::TrainingJobStatus::Completed) Die(absl::InternalError("not Completed"));
    return seconds;
  }

  // Seconds from StopTrainingJob to the job Stopped.
  double StopSample(const std::string& job, int hosts) {
    StopQueue stops;
    auto fleet = StartJob(job, hosts, &stops);
    const auto start = Clock::now();
    Stop(job);
    // The hosts report concurrently, as agents on their own machines do.
    Pending pending(hosts);
    for (int taken = 0; taken < hosts;) {
      for (const std::string& host : stops.Take()) {
        ReportAsync(job, host, Event::EVENT_STOPPED, pending);
        ++taken;
      }
    }
    pending.Wait();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!pending.stopped()) Die(absl::InternalError("not Stopped"));
    return seconds;
  }

 private:
  struct Fleet {
    std::vector<std::unique_ptr<SimulatedHost>> hosts;
    std::vector<std::unique_ptr<core::WatchRegistration>> connections;
  };

  Fleet StartJob(const std::string& job, int hosts, StopQueue* stops) {
    v1::CreateTrainingJobRequest create;
    create.set_training_job_name(job);
    create.set_role_arn("arn:aws:iam::111122223333:role/service-role/Bench");
    create.mutable_output_data_config()->set_s3_output_path("s3://bench/output");
    create.mutable_resource_config()->set_instance_count(hosts);
    v1::CreateTrainingJobResponse created;
    Wait([&](core::DoneCallback done) {
      manager_->CreateTrainingJob(create, &created, std::move(done));
    });
    Fleet fleet;
    for (int i = 1; i <= hosts; ++i) {
      fleet.hosts.push_back(std::make_unique<SimulatedHost>(absl::StrCat("algo-", i), stops));
      v1::ConnectAgentRequest connect;
      connect.set_training_job_name(job);
      connect.set_host(fleet.hosts.back()->name());
      connect.set_agent(absl::StrCat("bench:", i));
      auto connection = agents_->ConnectAgent(connect, fleet.hosts.back().get());
      if (!connection.ok()) Die(connection.status());
      fleet.connections.push_back(*std::move(connection));
    }
    for (const auto& host : fleet.hosts) Report(job, host->name(), Event::EVENT_STARTED);
    return fleet;
  }

  // Reports in flight; whether one answered Stopped.
  class Pending {
   public:
    explicit Pending(int count) : left_(count) {}
    void Done(const absl::Status& status, v1::TrainingJobStatus::Value job_status) {
      if (!status.ok()) Die(status);
      absl::MutexLock lock(&mu_);
      stopped_ |= job_status == v1::TrainingJobStatus::Stopped;
      --left_;
    }
    void Wait() {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(+[](int* left) { return *left == 0; }, &left_));
    }
    bool stopped() {
      absl::MutexLock lock(&mu_);
      return stopped_;
    }

   private:
    absl::Mutex mu_;
    int left_ ABSL_GUARDED_BY(mu_);
    bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  };

  void ReportAsync(const std::string& job, const std::string& host, Event::Event event,
                   Pending& pending) {
    Event request;
    request.set_training_job_name(job);
    request.set_host(host);
    request.set_event(event);
    auto response = std::make_shared<v1::ReportTrainingStatusResponse>();
    agents_->ReportTrainingStatus(request, response.get(),
                                  [response, &pending](const absl::Status& status) {
                                    pending.Done(status, response->training_job_status());
                                  });
  }

  v1::TrainingJobStatus::Value Report(const std::string& job, const std::string& host,
                                      Event::Event event) {
    Event request;
    request.set_training_job_name(job);
    request.set_host(host);
    request.set_event(event);
    v1::ReportTrainingStatusResponse response;
    Wait([&](core::DoneCallback done) {
      agents_->ReportTrainingStatus(request, &response, std::move(done));
    });
    return response.training_job_status();
  }

  void Stop(const std::string& job) {
    v1::StopTrainingJobRequest request;
    request.set_training_job_name(job);
    v1::StopTrainingJobResponse response;
    Wait([&](core::DoneCallback done) {
      manager_->StopTrainingJob(request, &response, std::move(done));
    });
  }

  template <typename Call>
  static void Wait(Call call) {
    absl::Notification done;
    absl::Status result;
    call([&](absl::Status status) {
      result = std::move(status);
      done.Notify();
    });
    done.WaitForNotification();
    if (!result.ok()) Die(result);
  }

  [[noreturn]] static void Die(const absl::Status& status) {
    std::fprintf(stderr, "multi_host_bench: %s\n", status.ToString().c_str());
    std::exit(1);
  }

  std::unique_ptr<core::TrainingJobManager> manager_;
  std::unique_ptr<core::TrainingAgentManager> agents_;
};

void PrintRow(const char* what, int hosts, const std::vector<double>& seconds) {
  std::vector<double> ms;
  for (double s : seconds) ms.push_back(s * 1000.0);
  const Percentiles p = Summarize(ms);
  std::printf("%-5s hosts=%-3d n=%zu p50=%.2f ms p90=%.2f ms p99=%.2f ms max=%.2f ms\n", what,
              hosts, p.n, p.p50, p.p90, p.p99, p.max);
}

}  // namespace
}  // namespace debugplane::bench

int main(int argc, char** argv) {
  using namespace debugplane::bench;  // NOLINT
  int samples = 30;
  std::string host_list = "1,4,16";
  std::string data_dir;
  CLI::App app{"multi_host_bench: a multi-host job's final status after its hosts"};
  app.add_option("--samples", samples, "Samples per host count and measure")->capture_default_str();
  app.add_option("--hosts", host_list, "Host counts, comma-separated")->capture_default_str();
  app.add_option("--data-dir", data_dir, "Where the SQLite database goes (default: a temp dir)");
  CLI11_PARSE(app, argc, argv);
  const fs::path dir = data_dir.empty()
                           ? fs::temp_directory_path() / absl::StrCat("multi_host_bench_", getpid())
                           : fs::path(data_dir);
  fs::create_directories(dir);
  {
    Bench bench(dir);
    for (absl::string_view text : absl::StrSplit(host_list, ',')) {
      int hosts = 0;
      if (!absl::SimpleAtoi(text, &hosts) || hosts < 1) {
        std::fprintf(stderr, "multi_host_bench: bad host count '%s'\n", std::string(text).c_str());
        return 2;
      }
      std::vector<double> end, stop;
      for (int i = 0; i < samples; ++i) {
        end.push_back(bench.EndSample(absl::StrCat("end-", hosts, "-", i), hosts));
        stop.push_back(bench.StopSample(absl::StrCat("stop-", hosts, "-", i), hosts));
      }
      PrintRow("end", hosts, end);
      PrintRow("stop", hosts, stop);
    }
  }
  if (data_dir.empty()) fs::remove_all(dir);
  return 0;
}
