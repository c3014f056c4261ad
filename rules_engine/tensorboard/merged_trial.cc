#include "rules_engine/tensorboard/merged_trial.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace debugplane::rules_engine::tensorboard {

MergedTrial::MergedTrial(std::unique_ptr<TensorTrial> first, std::unique_ptr<TensorTrial> second)
    : trials_{std::move(first), std::move(second)} {
  AddUpSummaries();
}

bool MergedTrial::stopped_at_budget() const {
  return more_ || trials_[0]->stopped_at_budget() || trials_[1]->stopped_at_budget();
}

void MergedTrial::SetTrainingEnded() {
  for (auto& trial : trials_) trial->SetTrainingEnded();
}

bool MergedTrial::finished() const {
  return trials_[0]->finished() && trials_[1]->finished() && queued_[0].empty() &&
         queued_[1].empty();
}

int64_t MergedTrial::newest_step_seen() const {
  return std::max(trials_[0]->newest_step_seen(), trials_[1]->newest_step_seen());
}

bool MergedTrial::Blocks(int i) const {
  // An empty queue of a trial that may still return steps holds the other
  // back, unless that trial has no data at all.
  const TensorTrial& trial = *trials_[i];
  return !trial.finished() && trial.newest_step_seen() >= 0;
}

absl::StatusOr<std::vector<Step>> MergedTrial::ReadNewSteps(const TensorFilter& wanted,
                                                            const ReadBudget& budget) {
  for (int i = 0; i < 2; ++i) {
    // A trial with steps queued is not read again until they are returned
    // (bounds the queue); a stopped-at-budget one goes on.
    if (!queued_[i].empty() && !trials_[i]->stopped_at_budget()) continue;
    absl::StatusOr<std::vector<Step>> steps = trials_[i]->ReadNewSteps(wanted, budget);
    if (!steps.ok()) return steps.status();
    for (Step& step : *steps) queued_[i].push_back(std::move(step));
  }
  UniteInfo();
  std::vector<Step> out;
  more_ = false;
  while (true) {
    int next = -1;
    if (!queued_[0].empty() && !queued_[1].empty()) {
      next = queued_[1].front().global_step < queued_[0].front().global_step ? 1 : 0;
    } else if (!queued_[0].empty() && !Blocks(1)) {
      next = 0;
    } else if (!queued_[1].empty() && !Blocks(0)) {
      next = 1;
    }
    if (next < 0) break;
    if (out.size() >= budget.max_steps) {
      more_ = true;
      break;
    }
    out.push_back(std::move(queued_[next].front()));
    queued_[next].pop_front();
  }
  AddUpSummaries();
  return out;
}

void MergedTrial::UniteInfo() {
  size_t key = 0;
  for (const auto& trial : trials_) {
    const TrialInfo& info = trial->info();
    key += info.workers.size() * 1000003 + info.collections.size() * 1009;
    for (const auto& [name, c] : info.collections)
      key += c.tensor_names.size() + c.include_regex.size();
  }
  if (key == info_key_) return;
  info_key_ = key;
  TrialInfo united;  // A new instance: caches of answers about the old one are dropped.
  std::set<std::string> workers;
  united.num_workers = 0;
  for (const auto& trial : trials_) {
    const TrialInfo& info = trial->info();
    united.num_workers = std::max(united.num_workers, info.num_workers);
    workers.insert(info.workers.begin(), info.workers.end());
    for (const auto& [name, c] : info.collections) {
      Collection& u = united.collections[name];
      u.name = name;
      u.include_regex.insert(u.include_regex.end(), c.include_regex.begin(), c.include_regex.end());
      u.tensor_names.insert(u.tensor_names.end(), c.tensor_names.begin(), c.tensor_names.end());
    }
  }
  united.workers.assign(workers.begin(), workers.end());
  info_ = std::move(united);
}

void MergedTrial::AddUpSummaries() {
  const TrialSummary& a = trials_[0]->summary();
  const TrialSummary& b = trials_[1]->summary();
  TrialSummary s;
  s.path = absl::StrCat(a.path, " and ", b.path);
  s.exists = a.exists || b.exists;
  s.has_collections = a.has_collections || b.has_collections;
  s.steps_seen = a.steps_seen + b.steps_seen;
  s.last_global_step = std::max(a.last_global_step, b.last_global_step);
  std::set<std::string> names(a.tensor_names_seen.begin(), a.tensor_names_seen.end());
  names.insert(b.tensor_names_seen.begin(), b.tensor_names_seen.end());
  s.tensor_names_seen.assign(names.begin(), names.end());
  if (s.tensor_names_seen.size() > 200) s.tensor_names_seen.resize(200);
  s.records_skipped = a.records_skipped + b.records_skipped;
  s.end_marker_seen = a.end_marker_seen || b.end_marker_seen;
  s.training_ended = a.training_ended && b.training_ended;
  s.read = a.read;
  s.read += b.read;
  summary_ = std::move(s);
}

}  // namespace debugplane::rules_engine::tensorboard
