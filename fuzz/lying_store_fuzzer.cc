// libFuzzer target: the readers of training output (TrialReader,
// SystemMetricsReader, FrameworkTimelineReader) over a store that lies
// about sizes: the fuzz input builds a trial and profiler output in memory
// (collections, index and event files of up to three steps, a metrics file
// and a timeline, mostly well-formed so that the reads get far), then gives
// each file a size in listings and Stat that disagrees with its bytes (up
// to 2^64 - 1, as a sparse file claims) and makes files grow by fuzz bytes
// at every read, and index entries give offsets and lengths no file has.
// The store says its Stat is a round trip (as S3's) or not, so that the
// reader's listing of event files (instead of a Stat each) is fuzzed too.
// The readers must read within their limits: no read may ask for more than
// objectstore::kMaxReadBytes (checked here), and no allocation may follow a
// claimed size (ASan's -malloc_limit_mb, 2 GB by default, catches one).
//
// Build and run (see tfrecord_fuzzer.cc for the cmake line):
//   ninja -C build/fuzz -j2 lying_store_fuzzer
//   build/fuzz/lying_store_fuzzer -max_total_time=60 -max_len=8192

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "objectstore/object_store.h"
#include "rules_engine/profiler/framework_timeline_reader.h"
#include "rules_engine/profiler/system_metrics_reader.h"
#include "rules_engine/smdebug/smdebug_event.pb.h"
#include "rules_engine/smdebug/tfrecord.h"
#include "rules_engine/smdebug/trial_reader.h"

namespace {

using debugplane::objectstore::ListOptions;
using debugplane::objectstore::ListResult;
using debugplane::objectstore::ObjectEntry;

// An in-memory store whose objects claim a size of the fuzzer's choosing and
// grow at every read.
class LyingStore final : public debugplane::objectstore::ObjectStore {
 public:
  struct Object {
    std::string bytes;
    uint64_t claimed_size = 0;  // What List and Stat say.
    std::string growth;         // Appended after every read of the object.
  };

  void Put(std::string key, Object object) { objects_[std::move(key)] = std::move(object); }

  absl::StatusOr<ListResult> List(const ListOptions& options) const override {
    ListResult result;
    absl::MutexLock lock(&mu_);
    for (auto it = objects_.upper_bound(options.start_after); it != objects_.end(); ++it) {
      const std::string& key = it->first;
      if (!absl::StartsWith(key, options.prefix)) continue;
      const size_t slash =
          options.delimiter.empty() ? std::string::npos : key.find('/', options.prefix.size());
      if (result.objects.size() + result.common_prefixes.size() >= options.max_keys) {
        result.truncated = true;
        break;
      }
      if (slash != std::string::npos) {
        const std::string common = key.substr(0, slash + 1);
        if (!result.common_prefixes.empty() && result.common_prefixes.back() == common) continue;
        if (common <= options.start_after) continue;
        result.common_prefixes.push_back(common);
        result.next_start_after = common;
        // Past every key under it.
        it = objects_.lower_bound(common + "\xff");
        if (it == objects_.end()) break;
        --it;
        continue;
      }
      result.objects.push_back({key, it->second.claimed_size});
      result.next_start_after = key;
    }
    return result;
  }

  absl::Status ReadRangeInto(absl::string_view key, uint64_t offset, uint64_t length,
                             std::string* out) const override {
    // The contract every reader must keep: bounded reads only.
    if (length > debugplane::objectstore::kMaxReadBytes) abort();
    out->clear();
    absl::MutexLock lock(&mu_);
    auto it = objects_.find(std::string(key));
    if (it == objects_.end()) return absl::NotFoundError(std::string(key));
    Object& object = it->second;
    if (offset < object.bytes.size()) {
      out->assign(object.bytes, offset, std::min<uint64_t>(length, object.bytes.size() - offset));
    }
    // A file being written: more bytes next time (bounded, so a run ends).
    if (object.bytes.size() < (1 << 20)) object.bytes += object.growth;
    return absl::OkStatus();
  }

  absl::StatusOr<ObjectEntry> Stat(absl::string_view key) const override {
    absl::MutexLock lock(&mu_);
    auto it = objects_.find(std::string(key));
    if (it == objects_.end()) return absl::NotFoundError(std::string(key));
    return ObjectEntry{std::string(key), it->second.claimed_size};
  }

  std::string Describe(absl::string_view key) const override { return absl::StrCat("mem://", key); }
  // As S3 (the reader lists events/ instead of a Stat per event file, so
  // the listing's lies reach it there too) or as a local store.
  bool StatIsARoundTrip() const override { return round_trip_; }
  void set_stat_is_a_round_trip(bool round_trip) { round_trip_ = round_trip; }

 private:
  bool round_trip_ = false;
  mutable absl::Mutex mu_;
  mutable std::map<std::string, Object> objects_ ABSL_GUARDED_BY(mu_);
};

// Sizes a file claims: its own, off by a little, or anything up to 2^64 - 1.
uint64_t ClaimedSize(FuzzedDataProvider& in, size_t actual) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return actual;
    case 1:
      return actual + in.ConsumeIntegralInRange<uint64_t>(0, 1 << 24);
    case 2:
      return in.ConsumeIntegralInRange<uint64_t>(0, actual);
    default:
      return in.ConsumeIntegral<uint64_t>();
  }
}

LyingStore::Object MakeObject(FuzzedDataProvider& in, std::string bytes) {
  LyingStore::Object object;
  object.claimed_size = ClaimedSize(in, bytes.size());
  object.growth = in.ConsumeBool() ? in.ConsumeRandomLengthString(64) : "";
  object.bytes = std::move(bytes);
  return object;
}

// An Event payload with one FLOAT tensor named `tag` of fuzz values.
std::string TensorEvent(FuzzedDataProvider& in, int64_t step, const std::string& tag) {
  debugplane::smdebug::Event event;
  event.set_step(step);
  auto* value = event.mutable_summary()->add_value();
  value->set_tag(tag);
  auto* tensor = value->mutable_tensor();
  tensor->set_dtype(debugplane::smdebug::DT_FLOAT);
  const int n = in.ConsumeIntegralInRange<int>(0, 8);
  tensor->mutable_tensor_shape()->add_dim()->set_size(
      in.ConsumeBool() ? n : in.ConsumeIntegral<int64_t>());
  for (int i = 0; i < n; ++i) tensor->add_float_val(in.ConsumeFloatingPoint<float>());
  return event.SerializeAsString();
}

void AddTrial(FuzzedDataProvider& in, LyingStore& store) {
  store.Put("trial/collections/000000000/worker_0_collections.json",
            MakeObject(in, in.ConsumeBool() ? R"({"meta": {"num_workers": 1}, "collections": {}})"
                                            : in.ConsumeRandomLengthString(128)));
  const int steps = in.ConsumeIntegralInRange<int>(1, 3);
  for (int step = 0; step < steps; ++step) {
    std::string events;
    std::string entries;
    const int tensors = in.ConsumeIntegralInRange<int>(1, 3);
    for (int t = 0; t < tensors; ++t) {
      const std::string name = absl::StrCat("loss_", t);
      const std::string record = debugplane::rules_engine::EncodeTfRecord(
          in.ConsumeBool() ? TensorEvent(in, step, name) : in.ConsumeRandomLengthString(64));
      // Where the index says the record is: true, or a lie.
      uint64_t start = events.size();
      uint64_t length = record.size();
      if (in.ConsumeBool()) start = in.ConsumeIntegral<uint64_t>();
      if (in.ConsumeBool()) length = in.ConsumeIntegral<uint64_t>();
      absl::StrAppend(&entries, t == 0 ? "" : ", ", "{\"tensorname\": \"", name,
                      "\", \"start_idx\": ", start, ", \"length\": ", length, "}");
      events += record;
    }
    const std::string step_name = absl::StrFormat("%012d", step);
    store.Put(absl::StrCat("trial/events/", step_name, "/", step_name, "_worker_0.tfevents"),
              MakeObject(in, std::move(events)));
    store.Put(absl::StrCat("trial/index/000000000/", step_name, "_worker_0.json"),
              MakeObject(in, absl::StrCat("{\"meta\": {\"mode\": \"TRAIN\", \"mode_step\": ", step,
                                          ", \"event_file_name\": \"x\"}, \"tensor_payload\": [",
                                          entries, "]}")));
  }
  if (in.ConsumeBool()) store.Put("trial/training_job_end.ts", MakeObject(in, ""));
}

void AddProfilerOutput(FuzzedDataProvider& in, LyingStore& store) {
  std::string metrics;
  const int lines = in.ConsumeIntegralInRange<int>(0, 4);
  for (int i = 0; i < lines; ++i) {
    absl::StrAppend(&metrics,
                    "{\"Type\": \"cpu\", \"Name\": \"cpu0\", \"Dimension\": \"CPUUtilization\", "
                    "\"Value\": ",
                    in.ConsumeIntegralInRange<int>(0, 100),
                    ", \"NodeId\": \"algo-1\", "
                    "\"Timestamp\": ",
                    1795300000 + i, "}\n");
  }
  metrics += in.ConsumeRandomLengthString(256);
  store.Put("prof/system/incremental/2026112207/1795300000.algo-1.json",
            MakeObject(in, std::move(metrics)));
  std::string timeline =
      "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
      "{\"start_time_since_epoch_in_micros\": 1795331436525518}},\n";
  const int events = in.ConsumeIntegralInRange<int>(0, 4);
  for (int i = 0; i < events; ++i) {
    absl::StrAppend(&timeline, "{\"name\": \"op\", \"pid\": 0, \"ph\": \"X\", \"ts\": ", 1000 * i,
                    ", \"dur\": 10},\n");
  }
  timeline += in.ConsumeRandomLengthString(256);
  store.Put("prof/framework/pevents/2026112207/1795331438761047_11570-vm_pythontimeline.json",
            MakeObject(in, std::move(timeline)));
}

bool All(const std::string&, const debugplane::rules_engine::TrialInfo&) { return true; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  auto store = std::make_shared<LyingStore>();
  store->set_stat_is_a_round_trip(in.ConsumeBool());
  AddTrial(in, *store);
  AddProfilerOutput(in, *store);

  using debugplane::objectstore::StoreLocation;
  debugplane::rules_engine::TrialReader trial(StoreLocation{store, "trial"});
  debugplane::rules_engine::SystemMetricsReader system(StoreLocation{store, "prof"});
  debugplane::rules_engine::FrameworkTimelineReader framework(StoreLocation{store, "prof"});
  // Several rounds, as while training writes (the files grow between them);
  // the last one after training ended.
  for (int round = 0; round < 3; ++round) {
    if (round == 2) trial.SetTrainingEnded();
    (void)trial.ReadNewSteps(All);
    (void)system.ReadNew();
    (void)system.ReadNew(in.ConsumeIntegralInRange<uint64_t>(1, 1 << 20));
    (void)framework.ReadNew();
  }
  if (system.errors().size() > static_cast<size_t>(system.kMaxErrors)) abort();
  if (framework.errors().size() > static_cast<size_t>(framework.kMaxErrors)) abort();
  return 0;
}
