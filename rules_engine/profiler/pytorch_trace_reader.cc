#include "rules_engine/profiler/pytorch_trace_reader.h"

#include <zlib.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/message_text.h"
#include "rules_engine/profiler/pytorch_trace.h"
#include "rules_engine/profiler/reader_summary.h"

namespace debugplane::rules_engine {
namespace {

// gzip's stream, inflated chunk by chunk into a bounded buffer.
class Gunzip {
 public:
  Gunzip() { ok_ = inflateInit2(&z_, 16 + MAX_WBITS) == Z_OK; }
  ~Gunzip() {
    if (ok_) inflateEnd(&z_);
  }
  Gunzip(const Gunzip&) = delete;
  Gunzip& operator=(const Gunzip&) = delete;

  // Inflates `in`, calling `out` with pieces of at most kTraceChunkBytes.
  // False with `*error` for a damaged stream.
  template <typename Out>
  bool Feed(absl::string_view in, std::string& buffer, Out out, std::string* error) {
    if (!ok_) {
      *error = "cannot start zlib";
      return false;
    }
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z_.avail_in = static_cast<uInt>(in.size());
    buffer.resize(kTraceChunkBytes);
    while (!ended_ && (z_.avail_in > 0)) {
      z_.next_out = reinterpret_cast<Bytef*>(buffer.data());
      z_.avail_out = static_cast<uInt>(buffer.size());
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
        *error =
            absl::StrCat("not a valid gzip stream (zlib: ", z_.msg != nullptr ? z_.msg : "?", ")");
        return false;
      }
      const size_t produced = buffer.size() - z_.avail_out;
      if (produced > 0 && !out(absl::string_view(buffer.data(), produced))) return true;
      if (rc == Z_STREAM_END) ended_ = true;
      if (rc == Z_BUF_ERROR && produced == 0) break;
    }
    return true;
  }
  bool ended() const { return ended_; }

 private:
  z_stream z_{};
  bool ok_ = false;
  bool ended_ = false;
};

}  // namespace

std::string TraceNodeId(absl::string_view key) {
  constexpr absl::string_view kMarker = "framework/pytorch/";
  const size_t at = key.rfind(kMarker);
  if (at == absl::string_view::npos || (at > 0 && key[at - 1] != '/')) return "algo-1";
  absl::string_view rest = key.substr(at + kMarker.size());
  const size_t slash = rest.find('/');
  if (slash == absl::string_view::npos || slash == 0) return "algo-1";
  return std::string(rest.substr(0, slash));
}

PyTorchTraceReader::PyTorchTraceReader(std::vector<objectstore::StoreLocation> roots)
    : roots_(std::move(roots)) {}

void PyTorchTraceReader::AddError(std::string message) {
  if (errors_.size() < kMaxErrors) errors_.push_back(std::move(message));
}

void PyTorchTraceReader::ListRoot(const objectstore::StoreLocation& root,
                                  std::vector<objectstore::ObjectEntry>& out) {
  objectstore::ListOptions options;
  options.prefix = root.DirectoryPrefix();
  absl::StatusOr<objectstore::ListResult> listed = root.store->ListAll(options, kTraceListLimit);
  if (!listed.ok()) {
    // A root that does not exist yet holds no trace yet.
    if (!absl::IsNotFound(listed.status())) {
      AddError(absl::StrCat("cannot list ", root.Describe(),
                            " for PyTorch traces: ", listed.status().message()));
    }
    return;
  }
  if (listed->truncated) {
    AddError(absl::StrCat("more than ", kTraceListLimit, " objects under ", root.Describe(),
                          ": PyTorch traces past them are not searched"));
  }
  for (objectstore::ObjectEntry& entry : listed->objects) {
    const absl::string_view relative = absl::string_view(entry.key).substr(options.prefix.size());
    // smdebug's own layout holds no traces (and most of the objects).
    if (absl::StartsWith(relative, "system/") || absl::StartsWith(relative, "framework/pevents/")) {
      continue;
    }
    if (IsPyTorchTraceName(entry.key)) out.push_back(std::move(entry));
  }
}

std::vector<FrameworkEvent> PyTorchTraceReader::ReadNew() {
  std::vector<FrameworkEvent> out;
  for (size_t r = 0; r < roots_.size(); ++r) {
    std::vector<objectstore::ObjectEntry> entries;
    ListRoot(roots_[r], entries);
    for (const objectstore::ObjectEntry& entry : entries) {
      FileState& state = files_[absl::StrCat(r, ":", entry.key)];
      if (state.done || entry.size == 0) continue;
      // Unchanged since a read that found it unfinished: once more only
      // after kTraceRetries unchanged listings (then it is cut short).
      if (state.size == entry.size && state.same_size_attempts > 0) {
        if (++state.same_size_attempts <= kTraceRetries) continue;
      }
      const bool give_up = state.size == entry.size && state.same_size_attempts > kTraceRetries;
      state.size = entry.size;
      if (ReadFile(roots_[r], entry, give_up, out) || give_up) {
        state.done = true;
      } else {
        state.same_size_attempts = 1;
      }
    }
  }
  return out;
}

bool PyTorchTraceReader::ReadFile(const objectstore::StoreLocation& root,
                                  const objectstore::ObjectEntry& entry, bool give_up,
                                  std::vector<FrameworkEvent>& out) {
  const objectstore::ObjectStore& store = *root.store;
  const std::string shown = base::EscapeForMessage(store.Describe(entry.key), 512);
  PyTorchTraceParser parser(shown);
  const bool gzipped = absl::EndsWith(entry.key, ".gz");
  Gunzip gunzip;
  uint64_t offset = 0;
  bool first = true;
  std::string error;
  while (offset < entry.size && !parser.failed() && error.empty()) {
    const absl::Status read = store.ReadRangeInto(entry.key, offset, kTraceChunkBytes, &chunk_);
    if (!read.ok()) {
      AddError(absl::StrCat(shown, ": ", read.message()));
      return false;  // Tried again at the next call (a store that is down).
    }
    read_.Add(chunk_.size(), std::exchange(first, false));
    if (chunk_.empty()) break;
    offset += chunk_.size();
    if (gzipped) {
      gunzip.Feed(
          chunk_, inflated_, [&](absl::string_view b) { return parser.Feed(b); }, &error);
    } else {
      parser.Feed(chunk_);
    }
  }
  if (!error.empty()) {
    AddError(absl::StrCat(shown, ": ", error));
    return true;  // Damaged: not read again.
  }
  const bool whole = parser.complete() && (!gzipped || gunzip.ended());
  if (!whole && !parser.failed() && !give_up) return false;
  TraceFileInfo info = TraceFileInfoFromName(entry.key);
  info.node_id = TraceNodeId(entry.key);
  PyTorchTraceFile file = parser.Finish(info);
  for (std::string& e : file.errors) AddError(std::move(e));
  if (!whole && !parser.failed()) {
    AddError(absl::StrCat(shown, ": cut short (it did not change over ", kTraceRetries + 1,
                          " reads): its ", file.events.size(), " complete events are read"));
  }
  ++files_read_;
  events_read_ += static_cast<int64_t>(file.events.size());
  steps_read_ += file.steps;
  malformed_ += file.malformed_events;
  out.insert(out.end(), std::make_move_iterator(file.events.begin()),
             std::make_move_iterator(file.events.end()));
  return true;
}

std::string PyTorchTraceReader::Summary() const {
  if (files_.empty() && errors_.empty()) return "";
  std::string s =
      absl::StrCat(files_read_, files_read_ == 1 ? " PyTorch trace, " : " PyTorch traces, ",
                   events_read_, events_read_ == 1 ? " event, " : " events, ", steps_read_,
                   steps_read_ == 1 ? " step" : " steps");
  if (static_cast<int64_t>(files_.size()) > files_read_) {
    absl::StrAppend(&s, " (", static_cast<int64_t>(files_.size()) - files_read_,
                    " not complete yet)");
  }
  AppendSkippedAndFirstError(s, malformed_, "trace event", errors_);
  return s;
}

}  // namespace debugplane::rules_engine
