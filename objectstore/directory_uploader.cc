#include "objectstore/directory_uploader.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "objectstore/open_beneath.h"

namespace debugplane::objectstore {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kWatchMask =
    IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DONT_FOLLOW | IN_ONLYDIR | IN_EXCL_UNLINK;
// The longest the upload thread sleeps without looking at the files.
constexpr absl::Duration kMaxIdleWait = absl::Seconds(1);
constexpr char kEndMarker[] = "training_job_end.ts";

bool IsTemporaryName(absl::string_view name) {
  return absl::StartsWith(name, ".") || absl::EndsWith(name, ".tmp");
}

absl::string_view BaseName(absl::string_view relative) {
  const size_t slash = relative.rfind('/');
  return slash == absl::string_view::npos ? relative : relative.substr(slash + 1);
}

// A TensorBoard event file: "events.out.tfevents.<time>.<host>...".
bool IsEventFile(absl::string_view relative) {
  return absl::StrContains(BaseName(relative), ".tfevents.");
}

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : absl::StrCat(dir, "/", name);
}

// Whether no process has `path` open for writing: a read lease is refused
// while one has. False too when no lease can be taken at all (not the
// file's owner, a file system without leases): unknown.
bool NoWriterHasItOpen(const std::string& path) {
  base::UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid() || fcntl(fd.get(), F_SETLEASE, F_RDLCK) != 0) return false;
  (void)fcntl(fd.get(), F_SETLEASE, F_UNLCK);
  return true;
}

absl::Status ErrnoError(int error, const std::string& what) {
  return absl::ErrnoToStatus(error, absl::StrCat(what, ": ", std::strerror(error)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DirectoryUploader>> DirectoryUploader::Start(Options options) {
  for (const Source& source : options.sources) {
    if (source.store == nullptr || !absl::StartsWith(source.local_dir, "/")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "upload source '", source.local_dir, "': an absolute directory and a store are needed"));
    }
  }
  if (options.max_file_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_file_bytes must be at least 1, not ", options.max_file_bytes));
  }
  if (!options.now) options.now = [] { return absl::Now(); };
  auto uploader = std::unique_ptr<DirectoryUploader>(new DirectoryUploader(std::move(options)));
  for (const Source& source : uploader->options_.sources) {
    base::UniqueFd dir(open(source.local_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir.valid()) {
      return ErrnoError(errno, absl::StrCat("cannot open ", source.local_dir, " for uploads"));
    }
    uploader->source_dirs_.push_back(std::move(dir));
  }
  uploader->inotify_fd_.reset(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!uploader->inotify_fd_.valid()) return ErrnoError(errno, "cannot start inotify");
  uploader->wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!uploader->wake_fd_.valid()) return ErrnoError(errno, "cannot make an eventfd");
  for (size_t i = 0; i < uploader->options_.sources.size(); ++i) {
    absl::Status watched = uploader->WatchTree(i, "", /*at_start=*/true);
    if (!watched.ok()) return watched;
  }
  uploader->watcher_ = std::thread([raw = uploader.get()] { raw->WatchLoop(); });
  uploader->uploader_ = std::thread([raw = uploader.get()] { raw->UploadLoop(); });
  return uploader;
}

DirectoryUploader::DirectoryUploader(Options options) : options_(std::move(options)) {}

DirectoryUploader::~DirectoryUploader() {
  {
    absl::MutexLock lock(&mu_);
    stop_watching_ = true;
    stop_uploading_ = true;
  }
  if (wake_fd_.valid()) (void)eventfd_write(wake_fd_.get(), 1);
  if (watcher_.joinable()) watcher_.join();
  if (uploader_.joinable()) uploader_.join();
}

std::string DirectoryUploader::LocalPath(const FileId& id) const {
  return absl::StrCat(options_.sources[id.source].local_dir, "/", id.relative);
}

std::string DirectoryUploader::Key(const FileId& id) const {
  return Join(options_.sources[id.source].key_prefix, id.relative);
}

void DirectoryUploader::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

absl::Status DirectoryUploader::WatchTree(size_t source, const std::string& relative_dir,
                                          bool at_start) {
  const std::string dir = relative_dir.empty()
                              ? options_.sources[source].local_dir
                              : absl::StrCat(options_.sources[source].local_dir, "/", relative_dir);
  const int wd = inotify_add_watch(inotify_fd_.get(), dir.c_str(), kWatchMask);
  if (wd < 0) return ErrnoError(errno, absl::StrCat("cannot watch ", dir, " for uploads"));
  {
    absl::MutexLock lock(&mu_);
    watches_[wd] = {source, relative_dir};
  }
  // What is already there: subdirectories are watched in turn; files were
  // written before the writer started (at_start), else they may still be
  // open (the directory is new: see the header).
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    const fs::file_status status = it->symlink_status(error);
    if (error) break;
    const std::string relative = Join(relative_dir, name);
    if (fs::is_directory(status)) {
      (void)WatchTree(source, relative, at_start);
    } else if (fs::is_regular_file(status)) {
      struct stat info;
      if (lstat(absl::StrCat(dir, "/", name).c_str(), &info) != 0) continue;
      const bool complete = at_start || NoWriterHasItOpen(absl::StrCat(dir, "/", name));
      absl::MutexLock lock(&mu_);
      NoteFile({source, relative},
               {static_cast<int64_t>(info.st_size), absl::TimeFromTimespec(info.st_mtim)},
               complete);
    }
  }
  return absl::OkStatus();
}

bool DirectoryUploader::IsAppended(const FileId& id) const {
  const Source& source = options_.sources[id.source];
  for (const std::string& prefix : source.appended_prefixes) {
    if (absl::StartsWith(id.relative, prefix)) return true;
  }
  return source.appended_event_files && IsEventFile(id.relative);
}

void DirectoryUploader::NoteFile(const FileId& id, const FileVersion& version, bool closed) {
  if (IsTemporaryName(BaseName(id.relative))) return;
  auto [it, added] = files_.try_emplace(id);
  FileState& state = it->second;
  if (added) {
    if (BaseName(id.relative) == kEndMarker) {
      state.file_class = FileClass::kEnd;
    } else if (absl::StartsWith(id.relative, "index/")) {
      state.file_class = FileClass::kIndex;
    }
    state.appended = IsAppended(id);
    state.appended_records = state.appended && IsEventFile(id.relative);
  }
  state.seen = version;
  if (state.appended) {
    // Growing files go up on their interval (PromoteDueFiles); a closed one
    // is final: at once.
    if (closed && !(state.uploaded == version)) Enqueue(state);
    wake_uploader_ = true;
    return;
  }
  if (closed) {
    if (state.pending || !(state.uploaded == version)) Enqueue(state);
    return;
  }
  if (!state.pending && !state.unsettled && !(state.uploaded == version)) {
    state.unsettled = true;
    state.unsettled_since = options_.now();
    wake_uploader_ = true;
  }
}

void DirectoryUploader::Enqueue(FileState& state) {
  state.unsettled = false;
  wake_uploader_ = true;
  if (state.pending) return;  // keeps its place; Upload sees the new version
  state.pending = true;
  state.sequence = next_sequence_++;
}

void DirectoryUploader::WatchLoop() {
  alignas(inotify_event) char buffer[64 * 1024];
  while (true) {
    pollfd fds[2] = {{inotify_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
    (void)poll(fds, 2, -1);
    // Whatever is queued is handled, also when stopping (Finish wants the
    // last closes).
    while (true) {
      const ssize_t length = read(inotify_fd_.get(), buffer, sizeof buffer);
      if (length <= 0) break;
      HandleEvents(buffer, length);
    }
    absl::MutexLock lock(&mu_);
    if (stop_watching_) return;
  }
}

void DirectoryUploader::HandleEvents(const char* buffer, ssize_t length) {
  for (ssize_t offset = 0; offset < length;) {
    const auto* event = reinterpret_cast<const inotify_event*>(buffer + offset);
    offset += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    if (event->mask & IN_Q_OVERFLOW) {
      // Events were lost: look at everything again (new files unsettled).
      Log("upload watch: inotify queue overflowed; rescanning the output directories");
      for (size_t i = 0; i < options_.sources.size(); ++i) (void)WatchTree(i, "", false);
      continue;
    }
    if (event->mask & IN_IGNORED) {
      // The directory is gone (or unmounted): its descriptor may be reused.
      absl::MutexLock lock(&mu_);
      watches_.erase(event->wd);
      continue;
    }
    if (event->len == 0) continue;
    std::pair<size_t, std::string> where;
    {
      absl::MutexLock lock(&mu_);
      auto it = watches_.find(event->wd);
      if (it == watches_.end()) continue;
      where = it->second;
    }
    const FileId id{where.first, Join(where.second, event->name)};
    if (event->mask & IN_ISDIR) {
      if (event->mask & (IN_CREATE | IN_MOVED_TO)) {
        // A directory moved in is complete; a new one may be filling.
        absl::Status watched = WatchTree(id.source, id.relative, event->mask & IN_MOVED_TO);
        if (!watched.ok()) Log(std::string(watched.message()));
      }
      continue;
    }
    const bool closed = event->mask & (IN_CLOSE_WRITE | IN_MOVED_TO);
    struct stat info;
    if (lstat(LocalPath(id).c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    const FileVersion version{static_cast<int64_t>(info.st_size),
                              absl::TimeFromTimespec(info.st_mtim)};
    absl::MutexLock lock(&mu_);
    if (closed) {
      NoteFile(id, version, true);
    } else if (files_.count(id) == 0 && IsAppended(id)) {
      // Created: only growing files are tracked before they are closed.
      NoteFile(id, version, false);
    }
  }
}

void DirectoryUploader::ScanAllAsComplete() {
  for (size_t source = 0; source < options_.sources.size(); ++source) {
    const fs::path root = options_.sources[source].local_dir;
    std::error_code error;
    for (fs::recursive_directory_iterator it(root, error), end; !error && it != end;
         it.increment(error)) {
      const fs::file_status status = it->symlink_status(error);
      if (error || !fs::is_regular_file(status)) continue;
      struct stat info;
      if (lstat(it->path().c_str(), &info) != 0) continue;
      absl::MutexLock lock(&mu_);
      NoteFile({source, fs::relative(it->path(), root).string()},
               {static_cast<int64_t>(info.st_size), absl::TimeFromTimespec(info.st_mtim)}, true);
    }
  }
}

void DirectoryUploader::PromoteDueFiles(absl::Time now) {
  for (auto it = files_.begin(); it != files_.end();) {
    FileState& state = it->second;
    const bool due_append = state.appended && !state.pending && now >= state.next_append_upload;
    if (!state.unsettled && !due_append) {
      ++it;
      continue;
    }
    struct stat info;
    if (lstat(LocalPath(it->first).c_str(), &info) != 0) {
      if (state.pending) {
        ++it;
      } else {
        it = files_.erase(it);  // Gone before it was complete.
      }
      continue;
    }
    const FileVersion version{static_cast<int64_t>(info.st_size),
                              absl::TimeFromTimespec(info.st_mtim)};
    if (state.unsettled) {
      if (NoWriterHasItOpen(LocalPath(it->first))) {
        state.seen = version;
        Enqueue(state);
      } else if (!(version == state.seen)) {
        state.seen = version;
        state.unsettled_since = now;
      } else if (now - state.unsettled_since >= options_.settle_time) {
        Enqueue(state);
      }
    } else if (!(version == state.uploaded)) {
      state.seen = version;
      Enqueue(state);
    } else {
      state.next_append_upload = now + options_.append_interval;
    }
    ++it;
  }
}

const DirectoryUploader::FileId* DirectoryUploader::NextUpload() const {
  if (options_.now() < retry_at_) return nullptr;
  // The lowest class with anything not yet up (unsettled files included:
  // they may be the data an index names) goes first.
  int lowest = 3;
  for (const auto& [id, state] : files_) {
    if (state.pending || state.unsettled) {
      lowest = std::min(lowest, static_cast<int>(state.file_class));
    }
  }
  if (lowest == static_cast<int>(FileClass::kIndex)) {
    // Key order (files_ is sorted by source, then path): the first index
    // file not up yet goes next, once it is known complete.
    for (const auto& [id, state] : files_) {
      if (state.file_class == FileClass::kIndex && (state.pending || state.unsettled)) {
        return state.pending ? &id : nullptr;
      }
    }
    return nullptr;
  }
  const FileId* next = nullptr;
  uint64_t sequence = 0;
  for (const auto& [id, state] : files_) {
    if (state.pending && static_cast<int>(state.file_class) == lowest &&
        (next == nullptr || state.sequence < sequence)) {
      next = &id;
      sequence = state.sequence;
    }
  }
  return next;
}

namespace {

// The size of `data` up to and with its last line feed (0 if it has none).
size_t CompleteLinesSize(const std::string& data) {
  const size_t last_line_end = data.rfind('\n');
  return last_line_end == std::string::npos ? 0 : last_line_end + 1;
}

// The size of `data` up to the end of its last complete TFRecord record
// (length, its CRC, the data, its CRC): a torn last record stays behind.
// CRCs are the reader's to check.
size_t CompleteRecordsSize(const std::string& data) {
  constexpr size_t kHeader = 12, kFooter = 4;
  size_t end = 0;
  while (data.size() - end >= kHeader) {
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(data[end + i]);
    if (length > data.size() - end - kHeader || data.size() - end - kHeader - length < kFooter) {
      break;
    }
    end += kHeader + length + kFooter;
  }
  return end;
}

}  // namespace

int64_t DirectoryUploader::UploadedBytes(const FileId& id) {
  absl::MutexLock lock(&mu_);
  return files_[id].uploaded_bytes;
}

void DirectoryUploader::Upload(const FileId& id) {
  const bool appended = files_[id].appended;
  const bool records = files_[id].appended_records;
  const FileVersion seen_before = files_[id].seen;
  const Source& source = options_.sources[id.source];
  const std::string path = LocalPath(id);
  const std::string key = Key(id);
  mu_.Unlock();
  UploadRead read = ReadForUpload(id);
  absl::Status status = read.status;
  std::string& data = read.data;
  const FileVersion read_version = read.version;
  const bool vanished = read.vanished;
  // Complete lines only: a reader never meets half a sample.
  if (status.ok() && appended) {
    data.resize(records ? CompleteRecordsSize(data) : CompleteLinesSize(data));
  }
  const int64_t previous_bytes = UploadedBytes(id);
  // A growing file without a new complete line (or without any yet) has
  // nothing new for a reader.
  const bool unchanged =
      appended && status.ok() &&
      (static_cast<int64_t>(data.size()) == previous_bytes || (data.empty() && previous_bytes < 0));
  if (status.ok() && !unchanged) status = source.store->Put(key, data);
  mu_.Lock();
  auto it = files_.find(id);
  if (it == files_.end()) return;
  FileState& state = it->second;
  const absl::Time now = options_.now();
  if (vanished) {
    Log(absl::StrCat(path, " was removed before it was uploaded"));
    files_.erase(it);
    return;
  }
  if (read.refused) {
    // Written again while it was read: the new version is looked at too.
    const bool rewritten = !(state.seen == seen_before) && !(state.seen == read_version);
    Refuse(state, read);
    if (rewritten) Enqueue(state);
    return;
  }
  if (!status.ok()) {
    PauseAfterFailure(status, now);
    return;
  }
  ResumeAfterSuccess(key);
  if (!unchanged) {
    ++uploaded_files_;
    uploaded_bytes_ += static_cast<int64_t>(data.size());
  }
  state.uploaded = read_version;
  state.refused = false;
  state.uploaded_bytes = static_cast<int64_t>(data.size());
  state.pending = false;
  if (appended) state.next_append_upload = now + options_.append_interval;
  // Closed again (or found so by Finish's scan) while it went up: the new
  // version too.
  if (!(state.seen == seen_before) && !(state.seen == read_version)) Enqueue(state);
}

void DirectoryUploader::PauseAfterFailure(const absl::Status& status, absl::Time now) {
  if (last_error_.ok()) {
    Log(absl::StrCat("uploads paused: ", status.message(), "; files wait on disk"));
  }
  last_error_ = status;
  ++failed_attempts_;
  ++consecutive_failures_;
  absl::Duration wait = options_.initial_retry;
  for (int i = 1; i < consecutive_failures_ && wait < options_.max_retry; ++i) wait *= 2;
  retry_at_ = now + std::min(wait, options_.max_retry);
}

void DirectoryUploader::ResumeAfterSuccess(const std::string& key) {
  if (!last_error_.ok()) Log(absl::StrCat("uploads resumed: ", key, " is up"));
  last_error_ = absl::OkStatus();
  consecutive_failures_ = 0;
}

DirectoryUploader::UploadRead DirectoryUploader::ReadForUpload(const FileId& id) const {
  const std::string path = LocalPath(id);
  UploadRead read;
  // O_NONBLOCK: a FIFO put in the file's place must not wait for a writer.
  base::UniqueFd fd = OpenBeneath(source_dirs_[id.source].get(), id.relative, O_RDONLY | O_NONBLOCK);
  struct stat info;
  if (!fd.valid() || fstat(fd.get(), &info) != 0) {
    const int error = errno;
    read.vanished = error == ENOENT;
    read.status = ErrnoError(error, absl::StrCat("cannot read ", path, " to upload it"));
    if (error == ELOOP || error == EXDEV || error == ENOTDIR) {
      read.refused = true;
      read.status = absl::PermissionDeniedError(absl::StrCat(
          "not uploading ", path, ": a symbolic link (or a non-directory) on its way below ",
          options_.sources[id.source].local_dir, "; links are not followed"));
    } else if (error != ENOENT && error != EMFILE && error != ENFILE && error != ENOMEM) {
      // Unreadable (EACCES, ...): waiting would not help. Out of
      // descriptors or memory: tried again after the backoff.
      read.refused = true;
    }
    return read;
  }
  read.version = {static_cast<int64_t>(info.st_size), absl::TimeFromTimespec(info.st_mtim)};
  if (!S_ISREG(info.st_mode)) {
    read.refused = true;
    read.status = absl::PermissionDeniedError(
        absl::StrCat("not uploading ", path, ": not a regular file (only files go up)"));
    return read;
  }
  if (info.st_size > options_.max_file_bytes) {
    read.refused = true;
    read.status = absl::ResourceExhaustedError(absl::StrCat(
        "not uploading ", path, ": ", info.st_size, " bytes, more than the upload limit of ",
        options_.max_file_bytes, " bytes per file"));
    return read;
  }
  // Up to the size at open time (within the limit): a file growing
  // meanwhile goes up again when it is closed again.
  read.data.resize(static_cast<size_t>(info.st_size));
  size_t done = 0;
  while (done < read.data.size()) {
    const ssize_t got = pread(fd.get(), read.data.data() + done, read.data.size() - done,
                              static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  read.data.resize(done);
  return read;
}

void DirectoryUploader::Refuse(FileState& state, const UploadRead& read) {
  // Not a store failure: no backoff, and the files after it go on.
  if (!state.refused || !(state.uploaded == read.version)) {
    Log(std::string(read.status.message()));
    ++refused_files_;
    last_refusal_ = read.status;
  }
  state.refused = true;
  state.uploaded = read.version;
  state.pending = false;
  state.next_append_upload = options_.now() + options_.append_interval;
}

void DirectoryUploader::UploadLoop() {
  absl::MutexLock lock(&mu_);
  while (!stop_uploading_) {
    const absl::Time now = options_.now();
    PromoteDueFiles(now);
    if (const FileId* next = NextUpload()) {
      const FileId id = *next;
      Upload(id);
      continue;
    }
    // Sleep until something changes or the next time-driven step.
    absl::Time deadline = now + kMaxIdleWait;
    if (retry_at_ > now) deadline = std::min(deadline, retry_at_);
    for (const auto& [id, state] : files_) {
      if (state.unsettled)
        deadline = std::min(deadline, state.unsettled_since + options_.settle_time);
      if (state.appended && !state.pending) {
        deadline = std::min(deadline, state.next_append_upload);
      }
    }
    wake_uploader_ = false;
    const auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return wake_uploader_ || stop_uploading_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&woken), std::max(deadline - now, absl::ZeroDuration()));
  }
}

DirectoryUploader::Backlog DirectoryUploader::backlog() const {
  absl::MutexLock lock(&mu_);
  Backlog backlog;
  for (const auto& [id, state] : files_) {
    if (state.pending || state.unsettled) {
      ++backlog.pending_files;
      backlog.pending_bytes += std::max<int64_t>(0, state.seen.size);
    }
  }
  backlog.uploaded_files = uploaded_files_;
  backlog.uploaded_bytes = uploaded_bytes_;
  backlog.failed_attempts = failed_attempts_;
  backlog.refused_files = refused_files_;
  backlog.last_refusal = last_refusal_;
  if (backlog.pending_files > 0) backlog.last_error = last_error_;
  return backlog;
}

absl::Status DirectoryUploader::Finish(absl::Duration bound) {
  {
    absl::MutexLock lock(&mu_);
    stop_watching_ = true;
  }
  (void)eventfd_write(wake_fd_.get(), 1);
  if (watcher_.joinable()) watcher_.join();
  ScanAllAsComplete();
  absl::Status result;
  {
    absl::MutexLock lock(&mu_);
    // Growing files: their last lines now, whatever their interval.
    for (auto& [id, state] : files_) {
      if (state.appended) state.next_append_upload = absl::InfinitePast();
    }
    wake_uploader_ = true;
    const auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const auto& [id, state] : files_) {
        if (state.pending || state.unsettled) return false;
        if (state.appended && state.next_append_upload == absl::InfinitePast()) return false;
      }
      return true;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&settled), bound)) {
      int64_t files = 0, bytes = 0;
      for (const auto& [id, state] : files_) {
        if (state.pending || state.unsettled ||
            (state.appended && state.next_append_upload == absl::InfinitePast())) {
          ++files;
          bytes += std::max<int64_t>(0, state.seen.size);
        }
      }
      result = absl::DeadlineExceededError(absl::StrCat(
          files, " files (", bytes, " bytes) were not uploaded within ",
          absl::FormatDuration(bound),
          last_error_.ok() ? std::string() : absl::StrCat(": ", last_error_.message())));
    }
    stop_uploading_ = true;
  }
  if (uploader_.joinable()) uploader_.join();
  return result;
}

}  // namespace debugplane::objectstore
