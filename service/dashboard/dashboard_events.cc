#include "service/dashboard/dashboard_events.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/dashboard/job_summary.h"

namespace debugplane::service::dashboard {

struct DashboardEvents::Subscriber {
  std::unique_ptr<http::HttpStream> stream;
  std::string job_name;  // Empty: every job.
  auth::Principal principal;
  Reauthenticate reauthenticate;
  bool closed = false;

  bool Sees(const std::string& job) const {
    if (closed) return false;
    if (!job_name.empty() && job_name != job) return false;
    return auth::Authorize(principal, auth::Action::kWatchTrainingJob, job).ok();
  }
  void Send(const std::string& event) {
    if (!closed && !stream->Write(event)) closed = true;
  }
};

namespace {

std::string Event(absl::string_view type, const nlohmann::json& data) {
  return absl::StrCat("event: ", type, "\ndata: ", Dump(data), "\n\n");
}

}  // namespace

DashboardEvents::DashboardEvents(core::TrainingJobManager* manager, DashboardEventsOptions options)
    : manager_(manager), options_(std::move(options)) {}

DashboardEvents::~DashboardEvents() { Shutdown(); }

void DashboardEvents::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_) return;
    started_ = true;
  }
  core::TrainingJobManager::Observation observation = manager_->AddCommitObserver(
      [this](const std::string& name, std::shared_ptr<const core::JobRecord> job) {
        OnCommit(name, std::move(job));
      });
  observer_id_ = observation.id;
  {
    absl::MutexLock lock(&mu_);
    for (auto& job : observation.jobs) {
      // A change the observer already delivered is newer than the snapshot.
      jobs_.try_emplace(job->training_job_name(), job);
    }
  }
  thread_ = std::thread([this] { Loop(); });
}

void DashboardEvents::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
    wake_.Signal();
  }
  manager_->RemoveCommitObserver(observer_id_);
  if (thread_.joinable()) thread_.join();
}

void DashboardEvents::OnCommit(const std::string& job_name,
                               std::shared_ptr<const core::JobRecord> job) {
  absl::MutexLock lock(&mu_);
  if (job == nullptr) {
    jobs_.erase(job_name);
    data_.erase(job_name);
  } else {
    jobs_[job_name] = std::move(job);
  }
  changed_.insert(job_name);
  wake_.Signal();
}

void DashboardEvents::OnDataRead(const std::string& job_name, int64_t last_step) {
  const absl::Time now = options_.clock->Now();
  absl::MutexLock lock(&mu_);
  DataRead& read = data_[job_name];
  read.time = now;
  read.last_step = std::max(read.last_step, last_step);
  read.unsent = true;
  data_unsent_ = true;
  wake_.Signal();
}

void DashboardEvents::Subscribe(std::unique_ptr<http::HttpStream> stream, std::string job_name,
                                auth::Principal principal, Reauthenticate reauthenticate) {
  auto subscriber = std::make_shared<Subscriber>();
  subscriber->stream = std::move(stream);
  subscriber->job_name = std::move(job_name);
  subscriber->principal = std::move(principal);
  subscriber->reauthenticate = std::move(reauthenticate);
  absl::MutexLock lock(&mu_);
  if (stopping_ || !started_) {
    subscriber->stream->Close();
    return;
  }
  joining_.push_back(std::move(subscriber));
  wake_.Signal();
}

std::vector<JobView> DashboardEvents::Jobs() const {
  std::vector<JobView> jobs;
  {
    absl::MutexLock lock(&mu_);
    jobs.reserve(jobs_.size());
    for (const auto& [name, record] : jobs_) {
      auto data = data_.find(name);
      jobs.push_back(JobView{.record = record,
                             .last_data_time = data == data_.end()
                                                   ? std::nullopt
                                                   : std::optional<absl::Time>(data->second.time)});
    }
  }
  auto created = [](const JobView& job) {
    const auto& time = job.record->creation_time();
    return std::make_pair(time.seconds(), time.nanos());
  };
  std::sort(jobs.begin(), jobs.end(), [&](const JobView& a, const JobView& b) {
    if (created(a) != created(b)) return created(a) > created(b);
    return a.record->training_job_name() < b.record->training_job_name();
  });
  return jobs;
}

std::optional<absl::Time> DashboardEvents::LastDataTime(const std::string& job_name) const {
  absl::MutexLock lock(&mu_);
  auto it = data_.find(job_name);
  if (it == data_.end()) return std::nullopt;
  return it->second.time;
}

size_t DashboardEvents::subscribers() const {
  absl::MutexLock lock(&mu_);
  return subscriber_count_;
}

void DashboardEvents::Loop() {
  absl::Time next_keep_alive = absl::Now() + options_.keep_alive;
  while (true) {
    std::vector<std::string> changed;
    std::vector<std::shared_ptr<Subscriber>> joining;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && changed_.empty() && joining_.empty()) {
        absl::Time until = next_keep_alive;
        if (data_unsent_) {
          for (const auto& [name, read] : data_) {
            if (read.unsent) until = std::min(until, read.sent + options_.data_interval);
          }
        }
        const absl::Time now = absl::Now();
        if (until <= now) break;
        wake_.WaitWithTimeout(&mu_, until - now);
      }
      if (stopping_) break;
      changed.assign(changed_.begin(), changed_.end());
      changed_.clear();
      joining.swap(joining_);
    }
    for (auto& subscriber : joining) {
      Welcome(subscriber);
      subscribers_.push_back(std::move(subscriber));
    }
    SendJobs(changed);
    const absl::Time now = absl::Now();
    SendDataReads(now);
    if (now >= next_keep_alive) {
      SendKeepAlives();
      next_keep_alive = now + options_.keep_alive;
    }
    std::erase_if(subscribers_, [](const auto& subscriber) { return subscriber->closed; });
    absl::MutexLock lock(&mu_);
    subscriber_count_ = subscribers_.size();
  }
  for (auto& subscriber : subscribers_) subscriber->stream->Close();
  subscribers_.clear();
  absl::MutexLock lock(&mu_);
  for (auto& subscriber : joining_) subscriber->stream->Close();
  joining_.clear();
  subscriber_count_ = 0;
}

void DashboardEvents::Welcome(const std::shared_ptr<Subscriber>& subscriber) {
  // EventSource reconnects after this long if the stream breaks.
  subscriber->Send("retry: 2000\n\n");
  for (const JobView& job : Jobs()) {
    const std::string& name = job.record->training_job_name();
    if (!subscriber->Sees(name)) continue;
    subscriber->Send(Event("job", JobSummary(*job.record, job.last_data_time)));
  }
}

void DashboardEvents::SendJobs(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    std::shared_ptr<const core::JobRecord> record;
    std::optional<absl::Time> last_data;
    {
      absl::MutexLock lock(&mu_);
      if (auto it = jobs_.find(name); it != jobs_.end()) record = it->second;
      if (auto it = data_.find(name); it != data_.end()) last_data = it->second.time;
    }
    Broadcast(name, record == nullptr ? Event("deleted", {{"name", name}})
                                      : Event("job", JobSummary(*record, last_data)));
  }
}

void DashboardEvents::SendDataReads(absl::Time now) {
  std::vector<std::pair<std::string, std::string>> due;
  {
    absl::MutexLock lock(&mu_);
    if (!data_unsent_) return;
    bool still_unsent = false;
    for (auto& [name, read] : data_) {
      if (!read.unsent) continue;
      if (read.sent + options_.data_interval > now) {
        still_unsent = true;
        continue;
      }
      read.unsent = false;
      read.sent = now;
      nlohmann::json last_step = nullptr;
      if (read.last_step >= 0) last_step = read.last_step;
      due.emplace_back(name, Event("data", {{"name", name},
                                            {"lastDataTime", EpochSeconds(read.time)},
                                            {"lastStep", last_step}}));
    }
    data_unsent_ = still_unsent;
  }
  for (const auto& [name, event] : due) Broadcast(name, event);
}

void DashboardEvents::SendKeepAlives() {
  for (auto& subscriber : subscribers_) {
    if (subscriber->reauthenticate) {
      absl::StatusOr<auth::Principal> principal = subscriber->reauthenticate();
      if (!principal.ok()) {
        subscriber->Send(
            Event("signed-out", {{"error", std::string(principal.status().message())}}));
        subscriber->stream->Close();
        subscriber->closed = true;
        continue;
      }
      subscriber->principal = *std::move(principal);
    }
    subscriber->Send(": keep-alive\n\n");
  }
}

void DashboardEvents::Broadcast(const std::string& job_name, const std::string& event) {
  for (auto& subscriber : subscribers_) {
    if (subscriber->Sees(job_name)) subscriber->Send(event);
  }
}

}  // namespace debugplane::service::dashboard
