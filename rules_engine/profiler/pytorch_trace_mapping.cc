// PyTorchTraceParser::Finish: the records of a trace mapped onto
// FrameworkEvents (the mapping in pytorch_trace.h's file comment).

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rules_engine/profiler/pytorch_trace.h"

namespace debugplane::rules_engine {
namespace {

constexpr char kStepName[] = "Step:ModeKeys.TRAIN";
// ts values above this are microseconds since the epoch already (Kineto
// before baseTimeNanoseconds, 2020): 10^15 us is 2001.
constexpr double kAbsoluteTs = 1e15;

struct Step {
  double start = 0, end = 0;
  int64_t number = -1;
  double first_backward = std::numeric_limits<double>::infinity();
};

// One process's steps, sorted by start, and the step an instant is in.
class Steps {
 public:
  void Add(const TraceRecord& r) { steps_.push_back({r.ts, r.ts + r.dur, r.step}); }
  void Sort() {
    std::sort(steps_.begin(), steps_.end(),
              [](const Step& a, const Step& b) { return a.start < b.start; });
  }
  // The step that started last at or before `ts` and has not ended
  // (`within`), or just started last (kernels run after their step's CPU
  // part); nullptr when none.
  Step* At(double ts, bool within) {
    auto it = std::upper_bound(steps_.begin(), steps_.end(), ts,
                               [](double t, const Step& s) { return t < s.start; });
    if (it == steps_.begin()) return nullptr;
    --it;
    if (within && ts > it->end) return nullptr;
    return &*it;
  }
  bool empty() const { return steps_.empty(); }

 private:
  std::vector<Step> steps_;
};

// The mapping of one file's records, step by step.
class TraceMapper {
 public:
  TraceMapper(const std::vector<TraceRecord>& records, const std::vector<std::string>& names,
              const TraceFileInfo& info, PyTorchTraceFile& out)
      : records_(records), names_(names), info_(info), out_(out) {}

  // The wall-clock anchor (ts + anchor is microseconds since the epoch);
  // false when there is none.
  bool FindAnchor(int64_t base_time_ns) {
    double max_end = 0, max_ts = 0;
    for (const TraceRecord& r : records_) {
      max_end = std::max(max_end, r.ts + r.dur);
      max_ts = std::max(max_ts, std::fabs(r.ts));
    }
    if (base_time_ns >= 0) {
      anchor_us_ = base_time_ns / 1000;
    } else if (max_ts >= kAbsoluteTs) {
      anchor_us_ = 0;
    } else if (info_.file_time_us >= 0) {
      anchor_us_ = info_.file_time_us - static_cast<int64_t>(std::llround(max_end));
    } else {
      return records_.empty();
    }
    return true;
  }

  // Steps per process, and the first backward event of each.
  void IndexSteps() {
    for (const TraceRecord& r : records_) {
      if (r.kind == TraceKind::kStep) steps_[ProcessOf(r)].Add(r);
    }
    for (auto& [pid, s] : steps_) s.Sort();
    for (const TraceRecord& r : records_) {
      if (r.kind != TraceKind::kBackward) continue;
      if (Step* s = StepAt(r, true)) s->first_backward = std::min(s->first_backward, r.ts);
    }
  }

  // Record indices: CPU events per process and thread in time order (the
  // enclosing ones first), then kernels per device and stream.
  std::vector<uint32_t> Order() const {
    std::vector<uint32_t> order(records_.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      const TraceRecord& x = records_[a];
      const TraceRecord& y = records_[b];
      const bool xk = x.kind == TraceKind::kKernel, yk = y.kind == TraceKind::kKernel;
      if (xk != yk) return yk;
      const int64_t xp = xk ? x.pid : ProcessOf(x), yp = yk ? y.pid : ProcessOf(y);
      if (xp != yp) return xp < yp;
      if (x.tid != y.tid) return x.tid < y.tid;
      if (x.ts != y.ts) return x.ts < y.ts;
      return x.dur > y.dur;
    });
    return order;
  }

  // The CPU events (the outermost of their thread; steps enclose, never
  // nest) from order[0]; returns where the kernels start.
  size_t MapCpu(const std::vector<uint32_t>& order) {
    bool have_thread = false;
    int64_t thread_pid = 0, thread_tid = 0;
    double outer_end = -std::numeric_limits<double>::infinity();
    size_t i = 0;
    for (; i < order.size(); ++i) {
      const TraceRecord& r = records_[order[i]];
      if (r.kind == TraceKind::kKernel) break;
      if (r.kind == TraceKind::kStep) {
        Emit(r, kStepName, kStepName, r.step, r.ts, r.dur);
        ++out_.steps;
        continue;
      }
      if (!have_thread || ProcessOf(r) != thread_pid || r.tid != thread_tid) {
        have_thread = true;
        thread_pid = ProcessOf(r);
        thread_tid = r.tid;
        outer_end = -std::numeric_limits<double>::infinity();
      }
      if (r.ts < outer_end) continue;  // Inside an outer event.
      outer_end = r.ts + r.dur;
      const Step* step = StepAt(r, true);
      Emit(r, OperatorName(names_[r.name]), CategoryOf(r, step), step != nullptr ? step->number : -1,
           r.ts, r.dur);
    }
    return i;
  }

  // GPU kernels from order[i] on, per stream, merged where they touch or
  // overlap.
  void MapKernels(const std::vector<uint32_t>& order, size_t i) {
    while (i < order.size()) {
      const TraceRecord& first = records_[order[i]];
      double end = first.ts + first.dur;
      size_t j = i + 1;
      for (; j < order.size(); ++j) {
        const TraceRecord& r = records_[order[j]];
        if (r.pid != first.pid || r.tid != first.tid || r.ts > end) break;
        end = std::max(end, r.ts + r.dur);
      }
      const Step* step = StepAt(first, false);
      std::string stream = absl::StrCat("GPU stream ", first.tid);
      Emit(first, stream, stream, step != nullptr ? step->number : -1, first.ts, end - first.ts);
      i = j;
    }
  }

 private:
  int64_t ProcessOf(const TraceRecord& r) const {
    return r.pid_is_text ? std::max<int64_t>(info_.file_pid, 0) : r.pid;
  }

  // The step `r` is in (see Steps::At); kernels (pid: the device) go to
  // the steps of the file's only process.
  Step* StepAt(const TraceRecord& r, bool within) {
    auto it = steps_.find(ProcessOf(r));
    if (it == steps_.end()) {
      if (within || steps_.size() != 1) return nullptr;
      it = steps_.begin();
    }
    return it->second.At(r.ts, within);
  }

  // Only ProfilerStep#N spans are steps: an operator a trace names like the
  // step event (a hostile or odd trace) is told apart, so that no consumer
  // takes it for a step.
  static std::string OperatorName(const std::string& name) {
    return name == kStepName ? absl::StrCat(name, " (operator)") : name;
  }

  static const char* CategoryOf(const TraceRecord& r, const Step* step) {
    switch (r.kind) {
      case TraceKind::kData:
        return "DataLoader";
      case TraceKind::kBackward:
        return "Backward";
      case TraceKind::kOptimizer:
        return "Optimizer";
      default:
        return step != nullptr && r.ts < step->first_backward ? "Forward" : "CPU";
    }
  }

  void Emit(const TraceRecord& r, std::string name, std::string category, int64_t step, double ts,
            double dur) {
    FrameworkEvent e;
    e.name = std::move(name);
    e.category = std::move(category);
    e.start_us = anchor_us_ + static_cast<int64_t>(std::llround(ts));
    e.duration_us = static_cast<int64_t>(std::llround(dur));
    e.step = step;
    e.track = r.tid;
    e.process = r.kind == TraceKind::kKernel ? r.pid : ProcessOf(r);
    e.node_id = info_.node_id;
    out_.events.push_back(std::move(e));
  }

  const std::vector<TraceRecord>& records_;
  const std::vector<std::string>& names_;
  const TraceFileInfo& info_;
  PyTorchTraceFile& out_;
  int64_t anchor_us_ = 0;
  std::map<int64_t, Steps> steps_;
};

}  // namespace

PyTorchTraceFile PyTorchTraceParser::Finish(const TraceFileInfo& info) {
  PyTorchTraceFile out;
  out.complete = top_closed_ && !failed_;
  out.malformed_events = malformed_;
  out.operators_dropped = dropped_;
  out.has_base_time = base_time_ns_ >= 0;
  TraceMapper mapper(records_, names_, info, out);
  if (!mapper.FindAnchor(base_time_ns_)) {
    AddError(absl::StrCat(shown_,
                          ": no wall-clock time (no baseTimeNanoseconds, and no time in the file "
                          "name <worker>.<time>.pt.trace.json): its events are not read"));
  } else {
    mapper.IndexSteps();
    const std::vector<uint32_t> order = mapper.Order();
    mapper.MapKernels(order, mapper.MapCpu(order));
    std::stable_sort(
        out.events.begin(), out.events.end(),
        [](const FrameworkEvent& a, const FrameworkEvent& b) { return a.start_us < b.start_us; });
  }
  out.errors = std::move(errors_);
  records_.clear();
  records_.shrink_to_fit();
  return out;
}

PyTorchTraceFile ParsePyTorchTrace(absl::string_view data, absl::string_view file_name,
                                   size_t record_budget) {
  PyTorchTraceParser parser{std::string(file_name), record_budget};
  parser.Feed(data);
  return parser.Finish(TraceFileInfoFromName(file_name));
}

}  // namespace debugplane::rules_engine
