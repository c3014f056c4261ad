// A writer of synthetic PyTorch profiler traces (torch.profiler's Chrome
// trace JSON, both forms) for the trace reader's tests and bench: steps with
// a data loader span, forward operators (with a nested one), backward
// (evaluate_function with an operator under it), an optimizer step and GPU
// kernels, shaped as Kineto and torch 1.13 write them.

#ifndef DEBUGPLANE_TESTS_RULES_ENGINE_PYTORCH_TRACE_WRITER_H_
#define DEBUGPLANE_TESTS_RULES_ENGINE_PYTORCH_TRACE_WRITER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace debugplane::rules_engine::testing {

struct SyntheticStep {
  int64_t number = 0;
  int64_t data_us = 1000, forward_us = 2000, backward_us = 3000, optimizer_us = 500;
  int64_t kernels = 2;  // GPU kernels of 100 us each (Kineto form only).
};

struct SyntheticTraceOptions {
  bool kineto = true;  // Object form with baseTimeNanoseconds, else array.
  int64_t base_time_ns = 1795819707000000000;
  int64_t pid = 4242;
  int64_t first_ts = 1000;  // ts of the first step (relative).
  int64_t gap_us = 50;      // Between steps.
  // Extra operators nested in each forward operator (to make huge files).
  int64_t padding_ops = 0;
};

// Steps of `durations` (forward time of each; data 1000, backward 3000,
// optimizer 500) numbered from `first`.
inline std::vector<SyntheticStep> StepsOf(int64_t first, const std::vector<int64_t>& forward_us) {
  std::vector<SyntheticStep> steps;
  for (size_t i = 0; i < forward_us.size(); ++i) {
    SyntheticStep s;
    s.number = first + static_cast<int64_t>(i);
    s.forward_us = forward_us[i];
    steps.push_back(s);
  }
  return steps;
}

// Calls `out` with the trace's text in pieces (one event at a time), so a
// bench can write hundreds of MB without holding them.
inline void WriteSyntheticTrace(const SyntheticTraceOptions& o,
                                const std::vector<SyntheticStep>& steps,
                                const std::function<void(const std::string&)>& out) {
  const std::string pid = o.kineto ? absl::StrCat(o.pid) : "\"CPU functions\"";
  const std::string main_tid = o.kineto ? absl::StrCat(o.pid) : "1";
  const std::string autograd_tid = o.kineto ? absl::StrCat(o.pid + 25) : "2";
  bool first = true;
  auto event = [&](const std::string& cat, const std::string& name, int64_t ts, int64_t dur,
                   const std::string& p, const std::string& tid) {
    std::string e = absl::StrCat(first ? "" : ",\n", "{\"ph\": \"X\", ");
    if (o.kineto) absl::StrAppend(&e, "\"cat\": \"", cat, "\", ");
    absl::StrAppend(&e, "\"name\": \"", name, "\", \"pid\": ", p, ", \"tid\": ", tid,
                    ", \"ts\": ", ts, ".125, \"dur\": ", dur, ", \"args\": {\"External id\": 1}}");
    first = false;
    out(e);
  };
  if (o.kineto) {
    out(
        absl::StrCat("{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"id\": 0, \"name\": "
                     "\"NVIDIA H200\"}],\n  \"baseTimeNanoseconds\": ",
                     o.base_time_ns, ",\n  \"traceEvents\": [\n"));
    out(absl::StrCat("{\"name\": \"process_name\", \"ph\": \"M\", \"ts\": 0, \"pid\": ", o.pid,
                     ", \"tid\": 0, \"args\": {\"name\": \"python3\"}}"));
    first = false;
  } else {
    out("[");
  }
  int64_t ts = o.first_ts;
  for (const SyntheticStep& s : steps) {
    const int64_t total = s.data_us + s.forward_us + s.backward_us + s.optimizer_us;
    const std::string step = absl::StrCat("ProfilerStep#", s.number);
    event("user_annotation", step, ts, total, pid, main_tid);
    int64_t t = ts;
    event("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t,
          s.data_us, pid, main_tid);
    event("cpu_op", "aten::copy_", t + 1, s.data_us / 2, pid, main_tid);  // Nested.
    t += s.data_us;
    event("cpu_op", "aten::linear", t, s.forward_us, pid, main_tid);
    event("cpu_op", "aten::addmm", t + 1, s.forward_us / 2, pid, main_tid);  // Nested.
    for (int64_t k = 0; k < o.padding_ops; ++k) {
      event("cpu_op", "aten::empty", t + 2 + k % 100, 0, pid, main_tid);
    }
    t += s.forward_us;
    event("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", t, s.backward_us, pid,
          autograd_tid);
    event("cpu_op", "aten::mm", t + 1, s.backward_us / 2, pid, autograd_tid);  // Nested.
    t += s.backward_us;
    event("user_annotation", "Optimizer.step#SGD.step", t, s.optimizer_us, pid, main_tid);
    if (o.kineto) {
      event("gpu_user_annotation", step, ts + 10, total, "0", "7");  // The GPU mirror.
      for (int64_t k = 0; k < s.kernels; ++k) {
        event("kernel", "sm90_gemm", ts + s.data_us + 200 * k, 100, "0", "7");
      }
    }
    ts += total + o.gap_us;
  }
  out(o.kineto ? "\n  ],\n  \"traceName\": \"synthetic\"\n}\n" : "]");
}

inline std::string SyntheticTrace(const SyntheticTraceOptions& o,
                                  const std::vector<SyntheticStep>& steps) {
  std::string text;
  WriteSyntheticTrace(o, steps, [&text](const std::string& piece) { text += piece; });
  return text;
}

}  // namespace debugplane::rules_engine::testing

#endif  // DEBUGPLANE_TESTS_RULES_ENGINE_PYTORCH_TRACE_WRITER_H_
