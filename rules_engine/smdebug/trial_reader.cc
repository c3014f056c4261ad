#include "rules_engine/smdebug/trial_reader.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "base/message_text.h"
#include "rules_engine/smdebug/smdebug_json.h"
#include "rules_engine/smdebug/tensor_decode.h"
#include "rules_engine/smdebug/tfrecord.h"

namespace debugplane::rules_engine {
namespace {

constexpr size_t kMaxTensorNamesSeen = 200;
// smdebug puts at most this many steps' index files in one index/<prefix>/.
constexpr int64_t kStepsPerIndexDir = 1000;
// Index file names start with the step in this many digits.
constexpr int kStepDigits = 12;
constexpr int64_t kMaxFixedWidthStep = 999999999999;

// A tensor name from an index file or a record, as errors show it.
std::string ShownTensor(absl::string_view name) { return base::QuoteForMessage(name, 40); }

// Lists the "directory" `prefix` (ending in '/') one level deep, every page.
absl::StatusOr<objectstore::ListResult> ListDirectory(const objectstore::ObjectStore& store,
                                                      std::string prefix,
                                                      std::string start_after = "") {
  return store.ListAll(objectstore::ListOptions{
      .prefix = std::move(prefix), .start_after = std::move(start_after), .delimiter = "/"});
}

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "<step:012d>_<worker>.json" -> (step, worker).
std::optional<std::pair<int64_t, std::string>> ParseIndexFileName(absl::string_view name) {
  if (!absl::ConsumeSuffix(&name, ".json")) return std::nullopt;
  const size_t underscore = name.find('_');
  if (underscore == absl::string_view::npos || underscore + 1 >= name.size()) return std::nullopt;
  const absl::string_view digits = name.substr(0, underscore);
  int64_t step;
  if (!AllDigits(digits) || !absl::SimpleAtoi(digits, &step)) return std::nullopt;
  const absl::string_view worker = name.substr(underscore + 1);
  // The worker becomes part of a key and of messages: a plain file name
  // component of printable ASCII (smdebug's "worker_0", "algo-1_3").
  if (worker == "." || worker == "..") return std::nullopt;
  for (const char c : worker) {
    if (c < 0x20 || c > 0x7e || c == '/') return std::nullopt;
  }
  return std::make_pair(step, std::string(worker));
}

}  // namespace

// A worker's files of a pending step.
struct TrialReader::PendingWorker {
  std::string index_key;
  // The index file's modification time as listed (InfinitePast when the
  // store does not say): when the worker's step arrived.
  absl::Time index_modified = absl::InfinitePast();
  std::optional<StepIndex> index;  // Once it parsed.
  absl::Status index_error;        // Last parse failure (maybe still being written).
  bool event_exists = false;
  // Some bytes were fetched (for the tally's distinct objects).
  bool index_fetched = false;
  bool event_fetched = false;
};

// The event files one listing found (ListEventFilesFrom), and which keys
// it looked at: those after `listed_after` up to `listed_through` (all
// after `listed_after` when `complete`). Other keys are not covered.
struct TrialReader::EventListing {
  bool listed = false;
  std::string listed_after;
  bool complete = false;
  std::string listed_through;
  std::set<std::string> keys;

  bool Covers(const std::string& key) const {
    return listed && key > listed_after && (complete || key <= listed_through);
  }
};

struct TrialReader::State {
  TrialInfo info;
  TrialSummary summary;
  bool collections_loaded = false;
  bool ended_by_job = false;  // SetTrainingEnded was called.
  bool list_saved_tensors = false;
  bool finished = false;
  int64_t last_returned = -1;  // Highest global step returned (or given up on).
  int64_t last_full = -1;      // Highest step seen with every worker's files.
  // As of the last listing (ListTrial): training had ended, last_full
  // before it, and whether the job had said it ended.
  bool ended = false;
  int64_t superseded_below = -1;
  bool listed_ended_by_job = false;
  // The last call stopped at its budget: the next one goes on with what is
  // pending before listing again.
  bool resume = false;

  using Worker = PendingWorker;
  // Steps seen in index/ and not returned yet, by global step; then worker.
  std::map<int64_t, std::map<std::string, Worker>> pending;
  std::set<std::string> tensor_names_seen;
  std::set<std::string> workers_seen;
  std::set<std::string> collections_fetched;  // Keys; one per worker at most.
  // Where Stat is a request: the last listing of event files, kept from the
  // trial's listing (ListTrial clears it) through the calls that resume it.
  EventListing events_listed;

  std::string EventFile(int64_t step, const std::string& worker) const {
    return absl::StrFormat("events/%012d/%012d_%s.tfevents", step, step, worker);
  }
};

TrialReader::TrialReader(objectstore::StoreLocation trial)
    : trial_(std::move(trial)), state_(std::make_shared<State>()) {
  state_->summary.path = trial_.Describe();
}

absl::Status TrialReader::LoadCollections(bool must_parse) {
  State& st = *state_;
  const std::string dir = trial_.DirectoryPrefix("collections/000000000");
  absl::StatusOr<objectstore::ListResult> listed = ListDirectory(*trial_.store, dir);
  if (absl::IsNotFound(listed.status())) return absl::OkStatus();
  if (!listed.ok()) return listed.status();
  // Every worker writes its own file with the same content: the first one
  // that parses will do (another may still be being written).
  absl::Status first_error;
  for (const objectstore::ObjectEntry& object : listed->objects) {
    if (!absl::EndsWith(object.key, "_collections.json")) continue;
    absl::StatusOr<std::string> text = trial_.store->ReadAtMost(object.key, kCollectionsFileLimit);
    if (!text.ok()) return text.status();
    st.summary.read.Add(text->size(), st.collections_fetched.insert(object.key).second);
    // Named relative to the trial directory in errors.
    const std::string file = absl::StrCat("collections/000000000/", object.key.substr(dir.size()));
    absl::StatusOr<CollectionsFile> parsed = ParseCollectionsJson(*text, file);
    if (!parsed.ok()) {
      if (first_error.ok()) first_error = parsed.status();
      continue;
    }
    st.info.collections = std::move(parsed->collections);
    st.info.num_workers = parsed->num_workers;
    st.collections_loaded = true;
    st.summary.has_collections = true;
    return absl::OkStatus();
  }
  // None parses: probably still being written, unless nothing will be written any more.
  return must_parse ? first_error : absl::OkStatus();
}

bool TrialReader::finished() const { return state_->finished; }
void TrialReader::SetTrainingEnded() { state_->ended_by_job = true; }
void TrialReader::StartAt(int64_t first_step) {
  state_->last_returned = std::max<int64_t>(state_->last_returned, first_step - 1);
}
void TrialReader::ListSavedTensors() { state_->list_saved_tensors = true; }
int64_t TrialReader::newest_step_seen() const {
  const State& st = *state_;
  return st.pending.empty() ? st.last_returned
                            : std::max(st.last_returned, st.pending.rbegin()->first);
}

const TrialInfo& TrialReader::info() const { return state_->info; }
const TrialSummary& TrialReader::summary() const { return state_->summary; }

namespace {

// Where the record `e` names ends, saturating (an index may say anything).
uint64_t EndOfRecord(const IndexEntry& e) {
  return e.start_idx > std::numeric_limits<uint64_t>::max() - e.length
             ? std::numeric_limits<uint64_t>::max()
             : e.start_idx + e.length;
}

// Outcome of reading one step's records.
enum class StepRead { kDone, kWait };

}  // namespace

absl::StatusOr<std::vector<Step>> TrialReader::ReadNewSteps(const TensorFilter& wanted) {
  return ReadNewSteps(wanted, ReadBudget{});
}

absl::StatusOr<std::vector<Step>> TrialReader::ReadNewSteps(const TensorFilter& wanted,
                                                            size_t max_steps) {
  return ReadNewSteps(wanted, ReadBudget{.max_steps = max_steps});
}

bool TrialReader::stopped_at_budget() const { return state_->resume; }

absl::StatusOr<bool> TrialReader::ListTrial() {
  State& st = *state_;
  st.events_listed = EventListing{};  // Listed again, after the index files.
  // The trial's top level: whether it is there, and training_job_end.ts.
  // Listed before anything else: if the marker is there (and means the
  // end), the listings below see every file training wrote.
  const std::string top_prefix = trial_.DirectoryPrefix();
  absl::StatusOr<objectstore::ListResult> top = ListDirectory(*trial_.store, top_prefix);
  if (!top.ok() && !absl::IsNotFound(top.status())) return top.status();
  st.summary.exists = top.ok();
  if (!st.summary.exists) {
    // Training may not have started; if it has ended, nothing will come.
    st.summary.training_ended = st.ended_by_job;
    st.finished = st.ended_by_job;
    return false;
  }
  const std::string marker_key = trial_.Key("training_job_end.ts");
  bool marker = false;
  for (const objectstore::ObjectEntry& object : top->objects) marker |= object.key == marker_key;
  st.summary.end_marker_seen = marker;

  // Collections: read once, when first parsable. smdebug writes it before
  // the first step; without it num_workers is unknown, so wait for it
  // unless training has ended.
  if (!st.collections_loaded) {
    absl::Status loaded = LoadCollections(/*must_parse=*/st.ended_by_job || marker);
    if (!loaded.ok()) return loaded;
    if (!st.collections_loaded && !st.ended_by_job && !marker) return false;
  }
  // With several workers the marker says only that one of them ended.
  st.ended = st.ended_by_job || (marker && st.info.num_workers <= 1);
  st.listed_ended_by_job = st.ended_by_job;
  st.summary.training_ended = st.ended;
  // A step is "superseded" when a later step was fully present before this
  // listing: a worker that skipped it will not come back to it, as smdebug
  // writes each worker's steps in order. Not one found fully present after
  // it: a listing that runs while files are created may show a worker's
  // step 5 and miss its step 4 created just before; a listing that starts
  // after step 5 was seen shows step 4 too.
  st.superseded_below = st.last_full;

  absl::Status indexes = ListNewIndexFiles();
  if (!indexes.ok()) return indexes;
  return true;
}

absl::Status TrialReader::ListNewIndexFiles() {
  State& st = *state_;
  // Discover new index files. Only index/<prefix>/ directories that can hold
  // steps after the last returned one are listed, and in them only the names
  // after that step's (index file names start with the step, zero-padded).
  const std::string index_prefix = trial_.DirectoryPrefix("index");
  absl::StatusOr<objectstore::ListResult> prefixes = ListDirectory(*trial_.store, index_prefix);
  if (!prefixes.ok() && !absl::IsNotFound(prefixes.status())) return prefixes.status();
  const int64_t min_prefix = std::max<int64_t>(0, st.last_returned) / kStepsPerIndexDir;
  const std::vector<std::string> no_prefixes;
  for (const std::string& dir : prefixes.ok() ? prefixes->common_prefixes : no_prefixes) {
    const absl::string_view prefix =
        absl::string_view(dir).substr(index_prefix.size(), dir.size() - index_prefix.size() - 1);
    int64_t p;
    if (!AllDigits(prefix) || !absl::SimpleAtoi(prefix, &p) || p < min_prefix) continue;
    // "<dir><next step, 12 digits>" sorts before every name of that step
    // and after every name of the steps before it.
    std::string start_after;
    if (st.last_returned >= 0 && st.last_returned < kMaxFixedWidthStep) {
      start_after = absl::StrCat(dir, absl::StrFormat("%0*d", kStepDigits, st.last_returned + 1));
    }
    absl::StatusOr<objectstore::ListResult> files =
        ListDirectory(*trial_.store, dir, std::move(start_after));
    if (!files.ok()) {
      if (absl::IsNotFound(files.status())) continue;
      return files.status();
    }
    for (objectstore::ObjectEntry& object : files->objects) {
      auto parsed = ParseIndexFileName(absl::string_view(object.key).substr(dir.size()));
      if (!parsed || parsed->first <= st.last_returned) continue;
      auto& workers = st.pending[parsed->first];
      if (workers.count(parsed->second)) continue;
      PendingWorker& worker = workers[parsed->second];
      worker.index_key = std::move(object.key);
      worker.index_modified = object.modified;
    }
  }
  return absl::OkStatus();
}

// One ReadNewSteps call: its filter and budget, the units of work done so
// far (see ReadBudget: the budget is checked before each one, once one is
// done), and the buffers its files are read into (their allocations reused
// from file to file, and freed when the call returns: an idle reader keeps
// no file's worth of memory). Event data is read into shared buffers that
// the decoded tensors point into (TensorValues): a buffer a tensor still
// holds is left to it and the next read gets a new one.
struct TrialReader::ReadPass {
  const TensorFilter& wanted;
  const ReadBudget& budget;
  const bool ended;
  const std::string top_prefix;
  size_t units = 0;
  std::string text;
  std::shared_ptr<std::string> whole, ranged;

  // `slot`'s buffer when no tensor holds it any more, else a new one.
  static std::string* Fresh(std::shared_ptr<std::string>& slot) {
    if (slot == nullptr || slot.use_count() > 1) slot = std::make_shared<std::string>();
    return slot.get();
  }

  bool Spent() const {
    return units > 0 && budget.deadline != absl::InfiniteFuture() &&
           budget.now() >= budget.deadline;
  }
};

// A step being assembled from its workers' records.
struct TrialReader::StepAssembly {
  Step result;
  // The index entry of each tensor of `result`, in order: the names are
  // moved from the entries once the step is whole (the entries go with it;
  // until then a step that must wait is read again from them).
  std::vector<IndexEntry*> named;
  bool have_mode = false;

  void TakeMode(const std::optional<Mode>& mode, const std::optional<int64_t>& mode_step) {
    if (have_mode || !mode) return;
    result.mode = *mode;
    result.mode_step = mode_step.value_or(0);
    have_mode = true;
  }
};

absl::StatusOr<std::vector<Step>> TrialReader::ReadNewSteps(const TensorFilter& wanted,
                                                            const ReadBudget& budget) {
  State& st = *state_;
  std::vector<Step> out;
  // Continue where the last call stopped at its budget, without listing
  // again: what it found is still pending. Unless the job's end became
  // known since: then the last complete read lists everything.
  const bool resume = st.resume && st.listed_ended_by_job == st.ended_by_job;
  st.resume = false;
  if (st.finished) return out;
  if (!resume) {
    absl::StatusOr<bool> listed = ListTrial();
    if (!listed.ok()) return listed.status();
    if (!*listed) return out;
  }
  ReadPass pass{.wanted = wanted,
                .budget = budget,
                .ended = st.ended,
                .top_prefix = trial_.DirectoryPrefix()};
  absl::StatusOr<int64_t> unparsed_from = ParsePendingIndexes(pass);
  if (!unparsed_from.ok()) return unparsed_from.status();
  bool stopped_at_budget = *unparsed_from != std::numeric_limits<int64_t>::max();
  st.summary.tensor_names_seen.assign(st.tensor_names_seen.begin(), st.tensor_names_seen.end());
  for (const auto& [step, workers] : st.pending) {
    if (FullyPresent(workers)) st.last_full = std::max(st.last_full, step);
  }
  absl::Status error = ReturnReadySteps(pass, *unparsed_from, out, stopped_at_budget);
  // Kept only for a call that resumes this one: an idle reader keeps no
  // listing.
  if (!error.ok() || !stopped_at_budget) st.events_listed = EventListing{};
  if (!error.ok()) {
    // Steps read before the error are returned now (each step is returned
    // once); the error recurs on the next call since the step stays pending.
    if (out.empty()) return error;
    return out;
  }
  st.resume = stopped_at_budget;
  st.finished = pass.ended && st.pending.empty();
  return out;
}

absl::StatusOr<int64_t> TrialReader::ParsePendingIndexes(ReadPass& pass) {
  // Parse index files not parsed yet and look for event files, in step
  // order. A pass cut by the budget leaves the steps from the returned one
  // on (some index file of theirs not tried by this call) to the next call.
  State& st = *state_;
  for (auto& [step, workers] : st.pending) {
    for (auto& [worker, w] : workers) {
      if (!w.index) {
        if (pass.Spent()) return step;
        ++pass.units;
        if (absl::Status parsed = ParseIndex(pass, worker, w); !parsed.ok()) return parsed;
      }
      if (!w.event_exists) {
        absl::StatusOr<bool> exists = EventFileExists(pass, step, worker);
        if (!exists.ok()) return exists.status();
        w.event_exists = *exists;
      }
    }
  }
  return std::numeric_limits<int64_t>::max();
}

absl::StatusOr<bool> TrialReader::EventFileExists(const ReadPass& pass, int64_t step,
                                                  const std::string& worker) {
  State& st = *state_;
  const std::string key = trial_.Key(st.EventFile(step, worker));
  if (trial_.store->StatIsARoundTrip()) {
    if (!st.events_listed.Covers(key)) {
      if (absl::Status listed = ListEventFilesFrom(step); !listed.ok()) return listed;
    }
    // A file the listing lacks is waited for; before the step is read
    // without it (settled: training ended, or a later step is whole), a
    // Stat confirms it is not there (a store whose listings lag its writes
    // would otherwise lose the worker's records).
    const bool settled = pass.ended || step < st.superseded_below;
    if (st.events_listed.Covers(key)) {
      const bool listed = st.events_listed.keys.count(key) > 0;
      if (listed || !settled) return listed;
    }
  }
  absl::StatusOr<objectstore::ObjectEntry> event = trial_.store->Stat(key);
  if (!event.ok() && !absl::IsNotFound(event.status())) return event.status();
  return event.ok();
}

absl::Status TrialReader::ListEventFilesFrom(int64_t first) {
  State& st = *state_;
  st.events_listed = EventListing{};
  // As many files as are looked for from `first` on (at most a page's
  // worth), and a few more: files of steps found already, or written since.
  constexpr size_t kPageKeys = 1000;
  constexpr size_t kSlackKeys = 16;
  size_t missing = 0;
  for (auto it = st.pending.lower_bound(first); it != st.pending.end() && missing < kPageKeys;
       ++it) {
    for (const auto& [worker, w] : it->second) missing += w.event_exists ? 0 : 1;
  }
  missing = std::clamp<size_t>(missing, 1, kPageKeys);
  // "events/<first, 12 digits>" sorts before every file of that step and
  // after those of the steps before it (a step of more digits may sort
  // before it: its files are then not covered, and Stat'ed).
  const std::string after = trial_.Key(absl::StrFormat("events/%0*d", kStepDigits, first));
  absl::StatusOr<objectstore::ListResult> files = trial_.store->ListAll(
      objectstore::ListOptions{.prefix = trial_.DirectoryPrefix("events"),
                               .start_after = after,
                               .max_keys = std::min(kPageKeys, missing + kSlackKeys)},
      missing);
  // NOT_FOUND: no events/ "directory" (a store that has them), so no file
  // in it yet.
  if (!files.ok() && !absl::IsNotFound(files.status())) return files.status();
  st.events_listed.listed = true;
  st.events_listed.listed_after = after;
  if (!files.ok()) {
    st.events_listed.complete = true;
    return absl::OkStatus();
  }
  st.events_listed.complete = !files->truncated;
  st.events_listed.listed_through = std::move(files->next_start_after);
  for (objectstore::ObjectEntry& object : files->objects) {
    st.events_listed.keys.insert(std::move(object.key));
  }
  return absl::OkStatus();
}

absl::Status TrialReader::ParseIndex(ReadPass& pass, const std::string& worker, PendingWorker& w) {
  State& st = *state_;
  if (absl::Status read = trial_.store->ReadAtMostInto(w.index_key, kIndexFileLimit, &pass.text);
      !read.ok()) {
    return read;
  }
  st.summary.read.Add(pass.text.size(), !std::exchange(w.index_fetched, true));
  // Named relative to the trial directory in errors.
  absl::StatusOr<StepIndex> index =
      ParseIndexJson(pass.text, absl::string_view(w.index_key).substr(pass.top_prefix.size()));
  if (!index.ok()) {
    w.index_error = index.status();  // Reported when the step is due.
    return absl::OkStatus();
  }
  w.index = std::move(*index);
  w.index_error = absl::OkStatus();
  for (const IndexEntry& e : w.index->tensors) {
    // A name already there is left as it is; a full set takes no more.
    if (st.tensor_names_seen.size() < kMaxTensorNamesSeen) {
      st.tensor_names_seen.insert(e.tensor_name);
    }
  }
  if (st.workers_seen.insert(worker).second) {
    st.info.workers.assign(st.workers_seen.begin(), st.workers_seen.end());
  }
  return absl::OkStatus();
}

bool TrialReader::FullyPresent(const std::map<std::string, PendingWorker>& workers) const {
  if (static_cast<int>(workers.size()) < state_->info.num_workers) return false;
  for (const auto& [name, w] : workers) {
    if (!w.index || !w.event_exists) return false;
  }
  return true;
}

absl::Status TrialReader::ReturnReadySteps(ReadPass& pass, int64_t unparsed_from,
                                           std::vector<Step>& out, bool& stopped_at_budget) {
  State& st = *state_;
  // See ListTrial for why a step is superseded only by one seen before the
  // last listing.
  const int64_t superseded_below = st.superseded_below;
  while (!st.pending.empty()) {
    auto it = st.pending.begin();
    const int64_t step = it->first;
    if (step >= unparsed_from) break;
    const bool settled = pass.ended || step < superseded_below;
    if (!FullyPresent(it->second) && !settled) break;
    if (out.size() >= pass.budget.max_steps || pass.Spent()) {
      stopped_at_budget = true;
      break;
    }
    ++pass.units;
    StepAssembly assembly;
    assembly.result.global_step = step;
    absl::StatusOr<bool> whole = AssembleStep(pass, step, it->second, assembly);
    if (!whole.ok()) return whole.status();
    if (!*whole) break;  // A record is still being written: wait for it.
    out.push_back(FinishStep(std::move(assembly)));
    st.last_returned = step;
    ++st.summary.steps_seen;
    st.summary.last_global_step = step;
    st.pending.erase(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> TrialReader::AssembleStep(ReadPass& pass, int64_t step,
                                               std::map<std::string, PendingWorker>& workers,
                                               StepAssembly& assembly) {
  for (auto& [worker, w] : workers) {
    if (!w.index) {
      // Unparsable index of a step that will not change any more.
      if (!w.index_error.ok()) return w.index_error;
      return true;
    }
    assembly.result.written = std::max(assembly.result.written, w.index_modified);
    assembly.TakeMode(w.index->mode, w.index->mode_step);
    absl::StatusOr<bool> whole = ReadWorkerRecords(pass, step, worker, w, assembly);
    if (!whole.ok() || !*whole) return whole;
  }
  return true;
}

absl::StatusOr<std::vector<IndexEntry*>> TrialReader::WantedRecords(ReadPass& pass,
                                                                    const std::string& event_file,
                                                                    PendingWorker& w,
                                                                    Step& result) {
  State& st = *state_;
  std::vector<IndexEntry*> entries;
  for (IndexEntry& e : w.index->tensors) {
    if (st.list_saved_tensors) result.saved_tensors.push_back(e.tensor_name);
    if (!pass.wanted(e.tensor_name, st.info)) continue;
    // The index's lengths are data: checked before anything is sized from
    // them (and their sums cannot overflow).
    if (e.length > kEventRecordLimit.max_bytes) {
      return objectstore::OverReadLimitError(
          absl::StrCat(trial_.store->Describe(event_file), " record at offset ", e.start_idx,
                       " (tensor ", ShownTensor(e.tensor_name), ")"),
          e.length, kEventRecordLimit);
    }
    entries.push_back(&e);
  }
  if (!entries.empty() && !w.event_exists) {
    st.summary.records_skipped += entries.size();  // settled: the file will never come.
    entries.clear();
  }
  return entries;
}

absl::StatusOr<bool> TrialReader::ReadWorkerRecords(ReadPass& pass, int64_t step,
                                                    const std::string& worker, PendingWorker& w,
                                                    StepAssembly& assembly) {
  State& st = *state_;
  const std::string event_rel = st.EventFile(step, worker);
  const std::string event_file = trial_.Key(event_rel);
  // The wanted records, and whether to read the event file whole: one read
  // instead of one per tensor, unless only a small part is wanted.
  absl::StatusOr<std::vector<IndexEntry*>> entries =
      WantedRecords(pass, event_file, w, assembly.result);
  if (!entries.ok()) return entries.status();
  uint64_t wanted_bytes = 0;
  uint64_t file_end = 0;
  for (const IndexEntry* e : *entries) {
    file_end = std::max(file_end, EndOfRecord(*e));
    wanted_bytes += e->length;
  }
  assembly.result.tensors.reserve(assembly.result.tensors.size() + entries->size());
  // Whole: the records up to the last wanted one, in one read, when they
  // are most of that span and the span is not large.
  const bool read_whole =
      !entries->empty() && file_end <= kMaxEventFileReadBytes && wanted_bytes * 4 >= file_end;
  if (read_whole) {
    if (absl::Status read =
            trial_.store->ReadRangeInto(event_file, 0, file_end, ReadPass::Fresh(pass.whole));
        !read.ok()) {
      return read;
    }
    st.summary.read.Add(pass.whole->size(), !std::exchange(w.event_fetched, true));
  }
  SharedBytes buffer;
  for (IndexEntry* entry : *entries) {
    const IndexEntry& e = *entry;
    absl::string_view bytes;
    if (read_whole) {
      buffer = pass.whole;
      bytes = e.start_idx < buffer->size() ? absl::string_view(*buffer).substr(e.start_idx, e.length)
                                           : absl::string_view();
    } else {
      if (absl::Status read =
              trial_.store->ReadRangeInto(event_file, e.start_idx, e.length,
                                          ReadPass::Fresh(pass.ranged));
          !read.ok()) {
        return read;
      }
      st.summary.read.Add(pass.ranged->size(), !std::exchange(w.event_fetched, true));
      buffer = pass.ranged;
      bytes = *buffer;
    }
    absl::StatusOr<bool> decoded =
        DecodeRecord(pass, bytes, buffer, event_rel, worker, *entry, assembly);
    if (!decoded.ok() || !*decoded) return decoded;
  }
  return true;
}

absl::StatusOr<bool> TrialReader::DecodeRecord(ReadPass& pass, absl::string_view bytes,
                                               const SharedBytes& buffer,
                                               const std::string& event_rel,
                                               const std::string& worker, IndexEntry& entry,
                                               StepAssembly& assembly) {
  const IndexEntry& e = entry;
  TfRecordParse record = ParseTfRecordAt(bytes, event_rel, e.start_idx, e.length);
  if (record.kind == TfRecordParse::Kind::kIncomplete) {
    if (!pass.ended) return false;
    ++state_->summary.records_skipped;  // Cut short when training stopped.
    return true;
  }
  if (record.kind == TfRecordParse::Kind::kCorrupt) {
    return absl::DataLossError(
        absl::StrCat(record.error, " (tensor ", ShownTensor(e.tensor_name), ")"));
  }
  // Built only for an error message: most records have none.
  const auto where = [&event_rel, &e] {
    return absl::StrCat(event_rel, " offset ", e.start_idx, " (tensor ", ShownTensor(e.tensor_name),
                        ")");
  };
  // smdebug writes one value per event; the one the index names is
  // preferred. Decoded straight into its place in the step.
  Tensor& t = assembly.result.tensors.emplace_back();
  ValueMetadata metadata;
  absl::Status decoded = DecodeEventTensor(record.payload, buffer, e.tensor_name, where, &t, &metadata);
  if (!decoded.ok()) {
    assembly.result.tensors.pop_back();
    return decoded;
  }
  assembly.TakeMode(metadata.mode, metadata.mode_step);
  t.worker = worker;
  assembly.named.push_back(&entry);
  return true;
}

Step TrialReader::FinishStep(StepAssembly assembly) {
  Step& result = assembly.result;
  for (size_t i = 0; i < assembly.named.size(); ++i) {
    result.tensors[i].name = std::move(assembly.named[i]->tensor_name);
  }
  std::sort(result.tensors.begin(), result.tensors.end(), [](const Tensor& a, const Tensor& b) {
    return std::tie(a.name, a.worker) < std::tie(b.name, b.worker);
  });
  if (!result.saved_tensors.empty()) {
    std::sort(result.saved_tensors.begin(), result.saved_tensors.end());
    result.saved_tensors.erase(
        std::unique(result.saved_tensors.begin(), result.saved_tensors.end()),
        result.saved_tensors.end());
  }
  return std::move(result);
}

}  // namespace debugplane::rules_engine
