#include "rules_engine/insights/job_insights.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "rules_engine/profiler/framework_phase.h"

namespace debugplane::rules_engine::insights {

namespace {

constexpr std::array<absl::string_view, kMetricCount> kMetricNames = {
    "cpu", "gpu", "gpu_memory", "cpu_memory", "io_wait", "network_rx", "network_tx"};
constexpr std::array<absl::string_view, kPhaseCount> kPhaseNames = {"step", "forward", "backward",
                                                                    "dataloader", "other"};

// "cpu2" < "cpu10": letters compare as text, digit runs as numbers.
bool NaturalLess(absl::string_view a, absl::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (absl::ascii_isdigit(a[i]) && absl::ascii_isdigit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && absl::ascii_isdigit(a[ie])) ++ie;
      while (je < b.size() && absl::ascii_isdigit(b[je])) ++je;
      absl::string_view da = a.substr(i, ie - i), db = b.substr(j, je - j);
      while (da.size() > 1 && da[0] == '0') da.remove_prefix(1);
      while (db.size() > 1 && db[0] == '0') db.remove_prefix(1);
      if (da.size() != db.size()) return da.size() < db.size();
      if (da != db) return da < db;
      i = ie;
      j = je;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

// The dashboard's phase of a framework event's phase (others: kOther).
constexpr std::pair<FrameworkPhase, Phase> kPhaseOfFrameworkPhase[] = {
    {FrameworkPhase::kForward, Phase::kForward},
    {FrameworkPhase::kBackward, Phase::kBackward},
    {FrameworkPhase::kData, Phase::kDataloader},
};

// The dashboard's metric of each drawn dimension.
constexpr std::pair<MetricDimension, Metric> kMetricOfDimension[] = {
    {MetricDimension::kCpuUtilization, Metric::kCpu},
    {MetricDimension::kGpuUtilization, Metric::kGpu},
    {MetricDimension::kGpuMemoryUtilization, Metric::kGpuMemory},
    {MetricDimension::kMemoryUsedPercent, Metric::kCpuMemory},
    {MetricDimension::kIoWaitPercentage, Metric::kIoWait},
};

// The value `table` pairs with `key`, if any.
template <typename Key, typename Value, size_t N>
std::optional<Value> Lookup(const std::pair<Key, Value> (&table)[N], Key key) {
  for (const auto& [known, value] : table) {
    if (known == key) return value;
  }
  return std::nullopt;
}

Phase PhaseOf(FrameworkPhase phase) {
  return Lookup(kPhaseOfFrameworkPhase, phase).value_or(Phase::kOther);
}

constexpr double kMicros = 1e6;

// Whether `t` (epoch seconds) is a time the pyramids and queries take.
bool Representable(double t) { return std::isfinite(t) && t >= 0 && t <= kLatestTime; }

int ClampWidth(int width) { return std::clamp(width, 1, kMaxBuckets); }

}  // namespace

absl::string_view MetricName(Metric metric) { return kMetricNames[static_cast<int>(metric)]; }

std::optional<Metric> ParseMetric(absl::string_view name) {
  for (int i = 0; i < kMetricCount; ++i) {
    if (kMetricNames[i] == name) return static_cast<Metric>(i);
  }
  return std::nullopt;
}

std::optional<Metric> MetricOfDimension(absl::string_view dimension) {
  if (auto metric = Lookup(kMetricOfDimension, ParseMetricDimension(dimension))) return metric;
  // The agent's network series (client/agent/system_metrics.h: Type
  // network, ReceiveBytesPerSecond / TransmitBytesPerSecond) name no
  // "Network": a byte rate that receives or transmits is one.
  if (!absl::StrContains(dimension, "Network") && !absl::EndsWith(dimension, "BytesPerSecond")) {
    return std::nullopt;
  }
  for (const char* rx : {"Rx", "Receive", "Recv"}) {
    if (absl::StrContains(dimension, rx)) return Metric::kNetworkRx;
  }
  for (const char* tx : {"Tx", "Transmit", "Sent"}) {
    if (absl::StrContains(dimension, tx)) return Metric::kNetworkTx;
  }
  return std::nullopt;
}

bool IsPerDevice(Metric metric) {
  return metric == Metric::kCpu || metric == Metric::kGpu || metric == Metric::kGpuMemory;
}

bool IsPercent(Metric metric) {
  return metric != Metric::kNetworkRx && metric != Metric::kNetworkTx;
}

absl::string_view PhaseName(Phase phase) { return kPhaseNames[static_cast<int>(phase)]; }

bool SeriesKey::operator<(const SeriesKey& o) const {
  if (node != o.node) return NaturalLess(node, o.node);
  if (metric != o.metric) return metric < o.metric;
  if (device == o.device) return false;
  if (device == kTotalDevice) return true;
  if (o.device == kTotalDevice) return false;
  return NaturalLess(device, o.device);
}

JobInsights::JobInsights(int level_capacity) : level_capacity_(level_capacity) {
  for (auto& busy : busy_) busy = std::make_unique<BusyPyramid>(level_capacity);
}

// --- System metrics ---------------------------------------------------------

JobInsights::Series* JobInsights::SeriesOf(SeriesKey key) {
  auto it = series_.find(key);
  if (it != series_.end()) return it->second.get();
  if (series_.size() >= kMaxSeries) return nullptr;
  return series_.emplace(std::move(key), std::make_unique<Series>(level_capacity_))
      .first->second.get();
}

JobInsights::Route* JobInsights::RouteOf(const SystemMetricPoint& p) {
  PointKey key{p.node_id, p.name, p.dimension};
  auto it = routes_.find(key);
  if (it != routes_.end()) return &it->second;
  Route route;
  if (std::optional<Metric> metric = MetricOfDimension(p.dimension)) {
    const std::string node = p.node_id.str();
    if (IsPerDevice(*metric)) route.device = SeriesOf({node, *metric, p.name.str()});
    route.total = SeriesOf({node, *metric, std::string(kTotalDevice)});
    route.node = &node_metrics_[{node, *metric}];
  }
  return &routes_.emplace(std::move(key), route).first->second;
}

void JobInsights::AddMetrics(absl::Span<const SystemMetricPoint> points) {
  // Points cycle through a node's devices: a one-entry cache before the map.
  const SystemMetricPoint* last = nullptr;
  Route* route = nullptr;
  for (const SystemMetricPoint& p : points) {
    if (!Representable(p.timestamp) || !std::isfinite(p.value)) continue;
    if (last == nullptr || p.node_id != last->node_id || p.name != last->name ||
        p.dimension != last->dimension) {
      route = RouteOf(p);
    }
    last = &p;
    if (route->total == nullptr) continue;
    if (metric_points_ == 0) metrics_first_ = metrics_last_ = p.timestamp;
    metrics_first_ = std::min(metrics_first_, p.timestamp);
    metrics_last_ = std::max(metrics_last_, p.timestamp);
    ++metric_points_;
    if (route->device != nullptr) route->device->pyramid.Add(p.timestamp, p.value);
    route->total->pyramid.Add(p.timestamp, p.value);
    route->node->percent.Add(p.value);
    route->node->extremes.Add(p.value);
  }
}

void JobInsights::ResolveRange(const TimeRange& range, bool has_data, double data_start,
                               double data_end, double* start, double* end) {
  auto given = [](const std::optional<double>& t) {
    return t.has_value() && !std::isnan(*t) ? std::optional<double>(*t) : std::nullopt;
  };
  const std::optional<double> asked_start = given(range.start), asked_end = given(range.end);
  *start = std::clamp(asked_start.value_or(data_start), 0.0, kLatestTime);
  *end = std::clamp(asked_end.value_or(std::max(data_end, *start)), 0.0, kLatestTime);
  if (*end < *start) *end = *start;  // Only one side given, beyond the data; or reversed.
  // Narrowed to the data where the range overlaps it and reaches past it.
  if (has_data && *start <= data_end && *end >= data_start) {
    *start = std::max(*start, data_start);
    *end = std::min(*end, data_end);
  }
}

SystemSeries JobInsights::QuerySystem(const SystemQuery& query) const {
  SystemSeries out;
  int width = ClampWidth(query.width);
  ResolveRange(query.range, metric_points_ > 0, metrics_first_, metrics_last_, &out.start,
               &out.end);
  std::vector<const std::pair<const SeriesKey, std::unique_ptr<Series>>*> chosen;
  std::string last_node;
  for (const auto& entry : series_) {
    const SeriesKey& key = entry.first;
    if (out.nodes.empty() || out.nodes.back() != key.node) out.nodes.push_back(key.node);
    if (!query.node.empty() && key.node != query.node) continue;
    if (query.metric.has_value() && key.metric != *query.metric) continue;
    if (!query.devices.empty() &&
        std::find(query.devices.begin(), query.devices.end(), key.device) == query.devices.end()) {
      continue;
    }
    chosen.push_back(&entry);
  }
  if (!chosen.empty()) {
    const int64_t budget = kMaxCells / static_cast<int64_t>(chosen.size());
    width = static_cast<int>(std::clamp<int64_t>(budget, 1, width));
  }
  // One level for every series (they share the buckets): the coarsest any
  // of them needs to still hold the range.
  LevelChoice choice;
  bool first = true;
  for (const auto* entry : chosen) {
    const SamplePyramid& p = entry->second->pyramid;
    LevelChoice c = ChooseLevel(out.start, out.end, width, p.first_time(), p.levels(),
                                [&p](int level) { return p.complete_from(level); });
    if (first || c.level > choice.level) choice = c;
    first = false;
  }
  if (first) {
    choice = ChooseLevel(out.start, out.end, width, out.start, 1, [](int) { return kNoEviction; });
  }
  out.buckets = choice;
  out.series.reserve(chosen.size());
  for (const auto* entry : chosen) {
    ReducedSeries series{entry->first, {}};
    entry->second->pyramid.Read(choice, &series.cells);
    out.series.push_back(std::move(series));
  }
  return out;
}

std::vector<Utilization> JobInsights::UtilizationSummary() const {
  std::vector<std::pair<std::string, Metric>> keys;
  for (const auto& [key, value] : node_metrics_) keys.push_back(key);
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return NaturalLess(a.first, b.first);
    return a.second < b.second;
  });
  std::vector<Utilization> out;
  for (const auto& key : keys) {
    const NodeMetric& m = node_metrics_.at(key);
    if (m.extremes.count == 0) continue;
    Utilization u{key.first, key.second};
    // Exact extremes (the cell keeps floats; the histogram doubles).
    u.min = m.percent.min();
    u.max = m.percent.max();
    if (IsPercent(key.second)) {
      u.p99 = m.percent.Quantile(0.99);
      u.p90 = m.percent.Quantile(0.90);
      u.p50 = m.percent.Quantile(0.50);
    }
    out.push_back(std::move(u));
  }
  return out;
}

// --- Framework events ---------------------------------------------------------

void JobInsights::AddStep(const FrameworkEvent& e, const std::string& mode) {
  StepRecord r{e.step, static_cast<double>(e.start_us) / kMicros,
               static_cast<double>(e.start_us + e.duration_us) / kMicros, e.node_id, mode};
  first_step_start_ = std::min(first_step_start_.value_or(r.start), r.start);
  last_step_end_ = std::max(last_step_end_.value_or(r.end), r.end);
  busy_[static_cast<int>(Phase::kStep)]->AddInterval(r.start, r.end);
  steps_.push_back(std::move(r));
  if (steps_.size() > kMaxSteps) steps_.pop_front();
}

void JobInsights::AddFrameworkEvents(absl::Span<const FrameworkEvent> events) {
  for (const FrameworkEvent& e : events) {
    if (e.duration_us < 0 || e.start_us <= 0) continue;
    const double start = static_cast<double>(e.start_us) / kMicros;
    // In doubles first: start_us + duration_us could overflow.
    if (!Representable(start + static_cast<double>(e.duration_us) / kMicros)) continue;
    const double end = static_cast<double>(e.start_us + e.duration_us) / kMicros;
    if (framework_events_ == 0) events_first_ = start, events_last_end_ = end;
    events_first_ = std::min(events_first_, start);
    events_last_end_ = std::max(events_last_end_, end);
    ++framework_events_;
    if (e.timeline_start_us >= 0) {
      const double t = static_cast<double>(e.timeline_start_us) / kMicros;
      if (Representable(t)) timeline_start_ = std::min(timeline_start_.value_or(t), t);
    }
    const std::string mode = StepEventMode(e.name);
    if (!mode.empty()) {
      AddStep(e, mode);
      continue;
    }
    const absl::string_view category = e.category.empty() ? e.name : e.category;
    const Phase phase = PhaseOf(PhaseOfEvent(e));
    // Events nested in their phase's own events would count twice.
    if (phase != Phase::kOther || !absl::StrContains(category, "SubModuleInternal")) {
      busy_[static_cast<int>(phase)]->AddInterval(start, end);
    }
    auto it = operations_.find(e.name);
    if (it == operations_.end()) {
      if (operations_.size() >= kMaxOperations) continue;
      it = operations_.emplace(e.name, OperationTotal{phase, 0, 0}).first;
    }
    it->second.total_us += e.duration_us;
    ++it->second.count;
  }
}

void JobInsights::ResetFramework() {
  for (auto& busy : busy_) busy = std::make_unique<BusyPyramid>(level_capacity_);
  steps_.clear();
  operations_.clear();
  framework_events_ = 0;
  events_first_ = 0;
  events_last_end_ = 0;
  timeline_start_.reset();
  first_step_start_.reset();
  last_step_end_.reset();
}

FrameworkSeries JobInsights::QueryFramework(const TimeRange& range, int width) const {
  FrameworkSeries out;
  double data_start = 0, data_end = 0;
  if (framework_events_ > 0) {
    data_start = events_first_;
    data_end = events_last_end_;
  }
  ResolveRange(range, framework_events_ > 0, data_start, data_end, &out.start, &out.end);
  width = ClampWidth(width);
  LevelChoice choice;
  bool first = true;
  for (const auto& busy : busy_) {
    if (busy->empty()) continue;
    LevelChoice c = ChooseLevel(out.start, out.end, width, busy->first_time(), busy->levels(),
                                [&busy](int level) { return busy->complete_from(level); });
    if (first || c.level > choice.level) choice = c;
    first = false;
  }
  if (first) {
    choice = ChooseLevel(out.start, out.end, width, out.start, 1, [](int) { return kNoEviction; });
  }
  out.buckets = choice;
  for (int i = 0; i < kPhaseCount; ++i) busy_[i]->Read(choice, &out.busy[i]);
  for (auto it = steps_.rbegin(); it != steps_.rend() && out.steps.size() < kStepsShown; ++it) {
    if (it->end >= out.start && it->start <= out.end) out.steps.push_back(*it);
  }
  std::stable_sort(out.steps.begin(), out.steps.end(),
                   [](const StepRecord& a, const StepRecord& b) { return a.start < b.start; });
  return out;
}

TrainingSummary JobInsights::Summary(bool ended) const {
  TrainingSummary s;
  std::optional<double> start, last;
  auto earliest = [&start](double t) { start = std::min(start.value_or(t), t); };
  auto latest = [&last](double t) { last = std::max(last.value_or(t), t); };
  if (metric_points_ > 0) earliest(metrics_first_), latest(metrics_last_);
  if (framework_events_ > 0) earliest(events_first_), latest(events_last_end_);
  if (timeline_start_.has_value()) earliest(*timeline_start_);
  if (!start.has_value()) return s;
  s.start = start;
  s.latest = *last;
  if (ended) s.end = last;
  if (!first_step_start_.has_value()) return s;
  s.phases.push_back({"initialization", *start, *first_step_start_});
  s.phases.push_back({"training_loop", *first_step_start_, *last_step_end_});
  if (ended)
    s.phases.push_back({"finalization", *last_step_end_, std::max(*last, *last_step_end_)});
  return s;
}

std::vector<Operation> JobInsights::TopOperations() const {
  double total_us = 0;
  for (const auto& [name, op] : operations_) total_us += static_cast<double>(op.total_us);
  std::vector<Operation> out;
  for (const auto& [name, op] : operations_) {
    out.push_back({name, op.phase, static_cast<double>(op.total_us) / kMicros, op.count,
                   total_us > 0 ? static_cast<double>(op.total_us) / total_us : 0});
  }
  std::stable_sort(out.begin(), out.end(), [](const Operation& a, const Operation& b) {
    return a.total_seconds > b.total_seconds;
  });
  if (out.size() > kTopOperations) out.resize(kTopOperations);
  return out;
}

size_t JobInsights::memory_bytes() const {
  size_t bytes = sizeof(*this) + steps_.size() * sizeof(StepRecord);
  for (const auto& [key, series] : series_) bytes += series->pyramid.memory_bytes() + 64;
  for (const auto& busy : busy_) bytes += busy->memory_bytes();
  for (const auto& [name, op] : operations_) bytes += name.size() + 64;
  bytes += node_metrics_.size() * (sizeof(NodeMetric) + 1001 * 4);
  return bytes;
}

}  // namespace debugplane::rules_engine::insights
