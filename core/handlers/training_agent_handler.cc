#include "core/handlers/training_agent_handler.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/jobs/field_violations.h"
#include "core/jobs/job_hosts.h"
#include "core/jobs/job_record.h"

namespace debugplane::core {
namespace {

bool StopOrdered(const JobRecord& job) {
  return job.training_job_status() == v1::TrainingJobStatus::Stopping ||
         job.training_job_status() == v1::TrainingJobStatus::Stopped;
}

// The most characters of a host name and of an agent's identity.
constexpr size_t kMaxHostNameChars = 128;
constexpr size_t kMaxAgentChars = 300;

absl::Status ValidateConnect(const v1::ConnectAgentRequest& request) {
  if (request.host().size() > kMaxHostNameChars) {
    return InvalidField("Host", absl::StrCat("has ", request.host().size(),
                                             " characters; a host name has at most ",
                                             kMaxHostNameChars));
  }
  if (request.agent().size() > kMaxAgentChars) {
    return InvalidField("Agent", absl::StrCat("has ", request.agent().size(),
                                              " characters; at most ", kMaxAgentChars));
  }
  return absl::OkStatus();
}

// Turns the committed records of a watch into directives, sending one only
// when what an agent acts on changed. Callbacks are serialized by the
// manager (one watch), so the state needs no lock.
class DirectiveWatcher final : public JobWatcher {
 public:
  explicit DirectiveWatcher(AgentDirectiveSink* sink) : sink_(sink) {}

  void OnRecord(std::shared_ptr<const JobRecord> job) override {
    if (ended_) return;
    const Key key{job->config_version(), job->training_job_status()};
    if (!sent_ || key != last_) {
      sent_ = true;
      last_ = key;
      sink_->OnDirective(
          std::make_shared<const v1::ConnectAgentResponse>(MakeAgentDirective(*job)));
    }
    if (IsTerminal(job->training_job_status())) {
      ended_ = true;
      sink_->OnEnd(absl::OkStatus());
    }
  }
  void OnEvent(std::shared_ptr<const v1::WatchTrainingJobResponse>) override {}
  void OnEnd(absl::Status status) override {
    if (ended_) return;
    ended_ = true;
    sink_->OnEnd(std::move(status));
  }

 private:
  using Key = std::pair<int64_t, v1::TrainingJobStatus::Value>;
  AgentDirectiveSink* const sink_;
  bool sent_ = false;
  bool ended_ = false;
  Key last_{};
};

// Owns the watcher; unregisters before destroying it.
class AgentRegistration final : public WatchRegistration {
 public:
  AgentRegistration(std::unique_ptr<DirectiveWatcher> watcher,
                    std::unique_ptr<WatchRegistration> watch)
      : watcher_(std::move(watcher)), watch_(std::move(watch)) {}
  ~AgentRegistration() override { watch_.reset(); }

 private:
  std::unique_ptr<DirectiveWatcher> watcher_;
  std::unique_ptr<WatchRegistration> watch_;
};

}  // namespace

v1::ConnectAgentResponse MakeAgentDirective(const JobRecord& job) {
  v1::ConnectAgentResponse directive;
  directive.set_config_version(job.config_version());
  *directive.mutable_debug_hook_config() = job.debug_hook_config();
  *directive.mutable_profiler_config() = job.profiler_config();
  if (job.has_tensor_board_output_config()) {
    *directive.mutable_tensor_board_output_config() = job.tensor_board_output_config();
  }
  directive.set_profiling_status(job.profiling_status());
  directive.set_training_job_status(job.training_job_status());
  if (OtherHostsMustStop(job)) {
    // A multi-host job failed: its other hosts end, as SageMaker ends a
    // failed job's instances.
    directive.set_stop(true);
    directive.set_stop_reason(absl::StrCat("the training job failed: ", job.failure_reason()));
  } else if (StopOrdered(job)) {
    directive.set_stop(true);
    for (auto it = job.secondary_status_transitions().rbegin();
         it != job.secondary_status_transitions().rend(); ++it) {
      if (it->status() == v1::SecondaryStatus::Stopping) {
        directive.set_stop_reason(it->status_message());
        break;
      }
    }
  }
  return directive;
}

absl::StatusOr<std::unique_ptr<WatchRegistration>> TrainingAgentManager::ConnectAgent(
    const v1::ConnectAgentRequest& request, AgentDirectiveSink* sink) {
  if (absl::Status valid = ValidateConnect(request); !valid.ok()) return valid;
  auto watcher = std::make_unique<DirectiveWatcher>(sink);
  absl::StatusOr<std::unique_ptr<WatchRegistration>> registration = jobs_->WatchAsAgent(
      request.training_job_name(), HostAgent{.host = request.host(), .agent = request.agent()},
      watcher.get());
  if (!registration.ok()) return registration.status();
  return std::make_unique<AgentRegistration>(std::move(watcher), *std::move(registration));
}

}  // namespace debugplane::core
