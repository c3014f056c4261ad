#include "rules_engine/tensorboard/tensorboard_reader.h"

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "rules_engine/smdebug/tfrecord.h"
#include "rules_engine/tensorboard/event_decode.h"
#include "rules_engine/tensorboard/tag_naming.h"

namespace debugplane::rules_engine::tensorboard {
namespace {

constexpr size_t kMaxTensorNamesSeen = 200;
// Distinct tags, at most: each is a tensor name rules are asked about.
constexpr size_t kMaxTags = 1 << 16;
// A step's values are reserved up to this many (a hostile step of many
// values must not make every later step reserve as much).
constexpr size_t kMaxReservedValues = 64;
constexpr int64_t kNoStep = std::numeric_limits<int64_t>::min();
constexpr const char* kDefaultCollections[] = {"losses", "gradients", "weights", "default"};

uint64_t DecodeLE64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "events.out.tfevents.<time>.<host>[.<pid>.<n>][.v2]" -> "<host>".
std::string HostOfEventFile(absl::string_view base) {
  base.remove_prefix(std::min(base.size(), kEventFilePrefix.size()));
  std::vector<absl::string_view> parts = absl::StrSplit(base, '.');
  if (!parts.empty()) parts.erase(parts.begin());  // The time.
  if (!parts.empty() && parts.back() == "v2") parts.pop_back();
  for (int i = 0; i < 2 && parts.size() > 1 && AllDigits(parts.back()); ++i) parts.pop_back();
  return absl::StrJoin(parts, ".");
}

}  // namespace

struct TensorBoardReader::File {
  std::string key;
  std::string rel;  // Relative to the location, for messages.
  std::string worker;
  uint32_t worker_id = 0;  // Index into State::worker_names.
  uint64_t offset = 0;       // End of the last complete record.
  uint64_t listed_size = 0;  // As of the last listing.
  uint64_t need = 0;         // Bytes of a record longer than one piece.
  absl::Time modified = absl::InfinitePast();
  bool fetched = false;
};

struct TensorBoardReader::State {
  struct Worker {
    double first_wall = std::numeric_limits<double>::infinity();
    double last_wall = -std::numeric_limits<double>::infinity();
    int64_t newest_step = kNoStep;
  };
  struct PendingValue {
    Mode mode;
    uint32_t tag_id, worker_id;  // Their ranks order the step's tensors.
    Tensor tensor;
  };
  struct Pending {
    // The tensors (name = tag) with the mode of their tag, in the order
    // read: of two with the same tag and worker the later one counts.
    std::vector<PendingValue> values;
    bool has_training = false, has_train = false, has_eval = false;
    absl::Time written = absl::InfinitePast();
  };

  TensorBoardOptions options;
  TrialInfo info;
  TrialSummary summary;
  TensorBoardSummary tb;
  std::map<std::string, File> files;  // By key.
  std::map<std::string, Worker> workers;
  std::map<std::string, std::string> first_host;  // Directory -> its first host.
  std::map<int64_t, Pending> pending;
  struct TagState {
    std::string name;
    Mode mode = Mode::kGlobal;
    // The filter's answer, asked once per ReadNewSteps call (its filter
    // may change from call to call, as rules conclude).
    uint64_t judged_in_call = 0;
    bool wanted = false;
    uint32_t id = 0;  // Index into tag_names.
  };
  // Tag and worker names by id, and each id's rank in name order (a Step's
  // tensors are ordered by (name, worker): integers compare faster than
  // names). Ranks are recomputed when a name was added.
  std::vector<std::string> tag_names;
  std::vector<std::string> worker_names;
  std::map<std::string, uint32_t> worker_ids;
  std::vector<uint32_t> tag_rank, worker_rank;
  bool ranks_stale = false;
  size_t values_per_step = 0;  // Of the last step returned.
  std::vector<std::pair<uint64_t, uint32_t>> order;  // ReturnReady's sort, reused.

  void Rerank() {
    if (!std::exchange(ranks_stale, false)) return;
    auto rank = [](size_t n, auto name_of, std::vector<uint32_t>& ranks) {
      std::vector<uint32_t> ids(n);
      for (uint32_t i = 0; i < n; ++i) ids[i] = i;
      std::sort(ids.begin(), ids.end(),
                [&](uint32_t a, uint32_t b) { return name_of(a) < name_of(b); });
      ranks.resize(n);
      for (uint32_t r = 0; r < n; ++r) ranks[ids[r]] = r;
    };
    rank(tag_names.size(), [this](uint32_t i) -> const std::string& { return tag_names[i]; },
         tag_rank);
    rank(worker_names.size(), [this](uint32_t i) -> const std::string& { return worker_names[i]; },
         worker_rank);
  }
  absl::flat_hash_map<std::string, TagState> tags;  // Each tag seen.
  uint64_t call = 0;                // ReadNewSteps calls so far.
  DecodedEvent event;               // Reused from record to record.
  std::vector<std::pair<Mode, uint32_t>> value_tags;  // Mode and tag id of each of event.values.
  std::set<std::string> names_seen;
  int64_t last_returned = kNoStep;
  bool ended_by_job = false;
  bool listed_ended = false;  // ended_by_job as of the last listing.
  bool finished = false;
  bool resume = false;
  std::string buffer;  // Reused from piece to piece (see ReadNewSteps).

  // The state of `tag`; a new tag is put in its collections first (before
  // any rule is asked about it).
  absl::StatusOr<TagState*> RegisterTag(absl::string_view tag) {
    if (auto it = tags.find(tag); it != tags.end()) return &it->second;
    if (tags.size() >= kMaxTags) {
      return absl::ResourceExhaustedError(absl::StrCat("the TensorBoard logs have more than ",
                                                       kMaxTags, " distinct tags; at most ",
                                                       kMaxTags, " are read"));
    }
    TagState& state = tags[tag];
    state.name = std::string(tag);
    state.id = static_cast<uint32_t>(tag_names.size());
    tag_names.push_back(state.name);
    ranks_stale = true;
    state.mode = ModeOfTag(state.name);
    const std::string collection = CollectionOfTag(state.name);
    for (const std::string& c : {collection, std::string("default")}) {
      if (c.empty() || options.include_regex.count(c)) continue;
      info.collections[c].tensor_names.push_back(state.name);
    }
    if (names_seen.size() < kMaxTensorNamesSeen) names_seen.insert(state.name);
    return &state;
  }

  bool Live(const std::string& name, const Worker& w) const {
    for (const auto& [other, o] : workers) {
      if (other != name && o.newest_step != kNoStep && o.first_wall > w.last_wall) return false;
    }
    return true;
  }

  // Whether every live worker wrote a step after `step`.
  bool Ready(int64_t step, bool ended) const {
    if (ended) return true;
    bool any = false;
    for (const auto& [name, w] : workers) {
      if (w.newest_step == kNoStep || !Live(name, w)) continue;
      any = true;
      if (w.newest_step <= step) return false;
    }
    return any;
  }
};

TensorBoardReader::TensorBoardReader(objectstore::StoreLocation location,
                                     TensorBoardOptions options)
    : location_(std::move(location)), state_(std::make_unique<State>()) {
  State& st = *state_;
  st.summary.path = location_.Describe();
  st.options = std::move(options);
  for (const char* name : kDefaultCollections) st.info.collections[name].name = name;
  for (const auto& [name, patterns] : st.options.include_regex) {
    Collection& c = st.info.collections[name];
    c.name = name;
    c.include_regex = patterns;
  }
}

TensorBoardReader::~TensorBoardReader() = default;

bool TensorBoardReader::stopped_at_budget() const { return state_->resume; }
void TensorBoardReader::SetTrainingEnded() { state_->ended_by_job = true; }
bool TensorBoardReader::finished() const { return state_->finished; }
const TrialInfo& TensorBoardReader::info() const { return state_->info; }
const TrialSummary& TensorBoardReader::summary() const { return state_->summary; }
const TensorBoardSummary& TensorBoardReader::tensorboard_summary() const { return state_->tb; }

int64_t TensorBoardReader::newest_step_seen() const {
  int64_t newest = -1;
  for (const auto& [name, w] : state_->workers) newest = std::max(newest, w.newest_step);
  return newest;
}

absl::StatusOr<std::vector<Step>> TensorBoardReader::ReadNewSteps(const TensorFilter& wanted) {
  return ReadNewSteps(wanted, ReadBudget{});
}

namespace {

// One ReadNewSteps call's budget (see ReadBudget).
struct Units {
  const ReadBudget& budget;
  size_t done = 0;
  bool Spent() const {
    return done > 0 && budget.deadline != absl::InfiniteFuture() && budget.now() >= budget.deadline;
  }
};

}  // namespace

absl::StatusOr<bool> TensorBoardReader::ListEventFiles() {
  State& st = *state_;
  const std::string prefix = location_.DirectoryPrefix();
  absl::StatusOr<objectstore::ListResult> listed =
      location_.store->ListAll(objectstore::ListOptions{.prefix = prefix});
  if (absl::IsNotFound(listed.status())) return false;
  if (!listed.ok()) return listed.status();
  for (objectstore::ObjectEntry& object : listed->objects) {
    const absl::string_view rel = absl::string_view(object.key).substr(prefix.size());
    const size_t slash = rel.rfind('/');
    const absl::string_view base = slash == absl::string_view::npos ? rel : rel.substr(slash + 1);
    if (!absl::StartsWith(base, kEventFilePrefix)) continue;
    auto found = st.files.find(object.key);
    if (found == st.files.end()) {
      if (st.files.size() >= kMaxEventFiles) {
        return absl::ResourceExhaustedError(
            absl::StrCat(location_.Describe(), " holds more than ", kMaxEventFiles,
                         " TensorBoard event files; at most ", kMaxEventFiles, " are read"));
      }
      File file;
      file.key = object.key;
      file.rel = std::string(rel);
      const std::string dir =
          slash == absl::string_view::npos ? "." : std::string(rel.substr(0, slash));
      const std::string host = HostOfEventFile(base);
      const std::string& first = st.first_host.try_emplace(dir, host).first->second;
      file.worker = host == first ? dir : absl::StrCat(dir, "@", host);
      auto [id, added] = st.worker_ids.try_emplace(file.worker, st.worker_names.size());
      if (added) {
        st.worker_names.push_back(file.worker);
        st.ranks_stale = true;
      }
      file.worker_id = id->second;
      found = st.files.emplace(object.key, std::move(file)).first;
      ++st.tb.event_files;
    }
    File& file = found->second;
    if (object.size < file.offset) {
      return absl::DataLossError(absl::StrCat(file.rel, " shrank from ", file.offset, " to ",
                                              object.size, " bytes while it was read"));
    }
    file.listed_size = object.size;
    file.modified = object.modified;
  }
  return true;
}

absl::Status TensorBoardReader::TakeRecord(File& file, absl::string_view payload, uint64_t offset,
                                           const TensorFilter& wanted) {
  State& st = *state_;
  DecodedEvent& event = st.event;
  State::Pending* step = nullptr;
  absl::Status tag_error;
  st.value_tags.clear();
  // Each value's tag is registered and judged before the value is decoded:
  // a value no rule wants is skipped by its length.
  auto want = [&](absl::string_view tag, int64_t at_step) {
    if (at_step <= st.last_returned || !tag_error.ok()) return false;  // Late: counted below.
    absl::StatusOr<State::TagState*> known = st.RegisterTag(tag);
    if (!known.ok()) {
      tag_error = known.status();
      return false;
    }
    State::TagState& tag_state = **known;
    if (step == nullptr) {
      step = &st.pending[at_step];
      // Sized like the last step returned: no regrowth (and moves of
      // tensors) as its values arrive.
      if (step->values.capacity() == 0) step->values.reserve(st.values_per_step);
    }
    (tag_state.mode == Mode::kEval ? step->has_eval : step->has_training) = true;
    step->has_train |= tag_state.mode == Mode::kTrain;
    if (tag_state.judged_in_call != st.call) {
      tag_state.judged_in_call = st.call;
      tag_state.wanted = wanted(tag_state.name, st.info);
    }
    if (tag_state.wanted) st.value_tags.emplace_back(tag_state.mode, tag_state.id);
    return tag_state.wanted;
  };
  if (absl::Status s = DecodeEventInto(
          payload, [&] { return absl::StrCat(file.rel, " record at offset ", offset); }, want,
          event);
      !s.ok()) {
    return s;
  }
  if (!tag_error.ok()) return tag_error;
  ++st.tb.records;
  State::Worker& worker = st.workers[file.worker];
  worker.first_wall = std::min(worker.first_wall, event.wall_time);
  worker.last_wall = std::max(worker.last_wall, event.wall_time);
  st.tb.skipped_values += event.skipped;
  if (event.numeric == 0) return absl::OkStatus();
  worker.newest_step = std::max(worker.newest_step, event.step);
  if (event.step <= st.last_returned) {
    st.tb.late_records += event.numeric;
    return absl::OkStatus();
  }
  st.tb.values += event.numeric;
  st.tb.histograms += event.histograms;
  step->written = std::max(step->written, file.modified);
  for (size_t i = 0; i < event.values.size(); ++i) {
    Tensor& t = event.values[i];
    t.worker = file.worker;
    const auto [mode, tag_id] = st.value_tags[i];
    step->values.push_back({mode, tag_id, file.worker_id, std::move(t)});
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> TensorBoardReader::ReadPiece(File& file, const TensorFilter& wanted,
                                                  bool ended) {
  State& st = *state_;
  const uint64_t left = file.listed_size - file.offset;
  const uint64_t length = std::min(left, std::max(kReadChunkBytes, file.need));
  if (absl::Status read = location_.store->ReadRangeInto(file.key, file.offset, length, &st.buffer);
      !read.ok()) {
    return read;
  }
  st.summary.read.Add(st.buffer.size(), !std::exchange(file.fetched, true));
  const absl::string_view buf = st.buffer;
  uint64_t consumed = 0;
  file.need = 0;
  while (consumed < buf.size()) {
    const uint64_t at = file.offset + consumed;
    TfRecordParse record = ParseTfRecord(buf.substr(consumed), at);
    if (record.kind == TfRecordParse::Kind::kCorrupt) {
      return absl::DataLossError(absl::StrCat(file.rel, ": ", record.error));
    }
    if (record.kind == TfRecordParse::Kind::kIncomplete) {
      if (buf.size() - consumed >= kTfRecordHeaderSize) {
        // The length is verified (its CRC): refuse a record over the limit.
        const uint64_t record_length = DecodeLE64(buf.data() + consumed);
        if (record_length > kEventRecordLimit.max_bytes) {
          return objectstore::OverReadLimitError(
              absl::StrCat(location_.store->Describe(file.key), " record at offset ", at),
              record_length, kEventRecordLimit);
        }
        file.need = record_length + kTfRecordOverhead;
      }
      break;
    }
    if (absl::Status s = TakeRecord(file, record.payload, at, wanted); !s.ok()) return s;
    consumed += record.size;
  }
  file.offset += consumed;
  if (consumed > 0) return true;
  // Nothing whole: a record longer than the piece (read again, whole), or
  // one still being written at the end of the file.
  if (length < left && file.need > length) return true;
  if (!ended) return false;
  ++st.summary.records_skipped;  // Cut short when training stopped.
  file.offset = file.listed_size;
  file.need = 0;
  return true;
}

bool TensorBoardReader::ReturnReady(std::vector<Step>& out, const ReadBudget& budget, size_t& units,
                                    bool ended) {
  State& st = *state_;
  Units spent{budget, units};
  while (!st.pending.empty()) {
    auto it = st.pending.begin();
    const int64_t global_step = it->first;
    if (!st.Ready(global_step, ended)) break;
    State::Pending& pending = it->second;
    const size_t steps = (pending.has_training ? 1 : 0) + (pending.has_eval ? 1 : 0);
    if (!out.empty() && (out.size() + steps > budget.max_steps || spent.Spent())) {
      units = spent.done;
      return false;
    }
    ++spent.done;
    Step training, eval;
    for (Step* s : {&training, &eval}) {
      s->global_step = s->mode_step = global_step;
      s->written = pending.written;
    }
    training.mode = pending.has_train ? Mode::kTrain : Mode::kGlobal;
    eval.mode = Mode::kEval;
    // By (name, worker), the later of two equal ones (a restart's value).
    std::vector<State::PendingValue>& values = pending.values;
    st.Rerank();
    st.values_per_step = std::min<size_t>(values.size(), kMaxReservedValues);
    training.tensors.reserve(values.size());
    st.order.clear();
    for (uint32_t i = 0; i < values.size(); ++i) {
      const uint64_t key = (uint64_t{st.tag_rank[values[i].tag_id]} << 32) |
                           st.worker_rank[values[i].worker_id];
      st.order.emplace_back(key, i);
    }
    std::sort(st.order.begin(), st.order.end());
    for (size_t k = 0; k < st.order.size(); ++k) {
      if (k + 1 < st.order.size() && st.order[k + 1].first == st.order[k].first) continue;
      State::PendingValue& v = values[st.order[k].second];
      (v.mode == Mode::kEval ? eval : training).tensors.push_back(std::move(v.tensor));
    }
    if (pending.has_training) out.push_back(std::move(training));
    if (pending.has_eval) out.push_back(std::move(eval));
    st.last_returned = global_step;
    ++st.summary.steps_seen;
    st.summary.last_global_step = global_step;
    st.pending.erase(it);
  }
  units = spent.done;
  return true;
}

absl::StatusOr<std::vector<Step>> TensorBoardReader::ReadNewSteps(const TensorFilter& wanted,
                                                                  const ReadBudget& budget) {
  State& st = *state_;
  std::vector<Step> out;
  if (st.finished) return out;
  ++st.call;
  const bool ended = st.ended_by_job;
  // A call that stopped at its budget is continued without listing, unless
  // the job's end became known since: the last complete read lists again.
  if (!std::exchange(st.resume, false) || st.listed_ended != ended) {
    absl::StatusOr<bool> listed = ListEventFiles();
    if (!listed.ok()) return listed.status();
    st.summary.exists = *listed;
    st.listed_ended = ended;
  }
  Units spent{budget, 0};
  // Reading stops early once more steps are pending than the call may
  // return (the rest is read by the next calls): memory stays bounded.
  bool enough = false;
  for (auto& [key, file] : st.files) {
    while (file.offset < file.listed_size) {
      enough = st.pending.size() > budget.max_steps;
      if (enough || spent.Spent()) {
        st.resume = true;
        break;
      }
      ++spent.done;
      absl::StatusOr<bool> progressed = ReadPiece(file, wanted, ended);
      if (!progressed.ok()) {
        st.buffer = std::string();
        return progressed.status();
      }
      if (!*progressed) break;
    }
    if (st.resume) break;
  }
  // The piece buffer is kept while there is more to read at once (a call
  // that stopped at its budget), freed when the reader waits for new data.
  if (!st.resume) st.buffer = std::string();
  st.summary.tensor_names_seen.assign(st.names_seen.begin(), st.names_seen.end());
  st.info.workers.clear();
  for (const auto& [name, w] : st.workers) st.info.workers.push_back(name);
  st.info.num_workers = std::max<int>(1, static_cast<int>(st.workers.size()));
  size_t units = spent.done;
  if (!st.resume || enough) {
    // A step's values may sit in several files: steps are returned after a
    // pass over every file, or once enough are pending (a value of a file
    // not read yet at a step returned is then late, and counted).
    st.resume = !ReturnReady(out, budget, units, ended) || st.resume;
  }
  st.summary.training_ended = ended;
  st.finished = ended && !st.resume && st.pending.empty();
  return out;
}

}  // namespace debugplane::rules_engine::tensorboard
