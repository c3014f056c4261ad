// DirectoryUploader: uploads the files a training process writes into local
// directories to S3 prefixes as soon as each is complete, as SageMaker's
// platform uploads a job's /opt/ml/output to its S3OutputPath. The agent
// (client/agent/agent.h) runs one for the tensor and profiler output of an s3://
// job.
//
// What is uploaded, and when (relative paths, per source directory):
// - A file is complete when its writer closes it after writing
//   (inotify IN_CLOSE_WRITE) or it is moved in (IN_MOVED_TO, as smdebug
//   moves its temporary files into place). Files already there at Start
//   are complete (the writer has not started). A file found in a directory
//   created while running (it may have been opened before the directory's
//   watch was added) is complete if no process has it open for writing (a
//   read lease, F_SETLEASE, can be taken: the agent owns the files it
//   watches), else once its close is seen; where no lease can be taken
//   (another owner, a file system without leases) once its size and
//   modification time have not changed for Options::settle_time.
// - Names starting with '.' or ending in ".tmp" are a writer's temporary
//   files: never uploaded.
// - Order, so that a reader never sees a name before what it names: every
//   pending data file goes up before any index file ("index/..."), and
//   "training_job_end.ts" goes up only when nothing else is pending (files
//   not yet known complete included). Data files go in the order they
//   became complete; index files in key order, each after every index file
//   with a smaller key known to be there, because readers list index keys
//   after the last one they read (ListObjectsV2 start-after).
// - Files under Source::appended_prefixes (system metrics, which are
//   appended to all hour long) are uploaded up to their last '\n' (never a
//   half-written line), again every Options::append_interval while they
//   grow, and once more when closed or at Finish. TensorBoard event files
//   (names with ".tfevents.") of a Source with appended_event_files go the
//   same way up to their last complete TFRecord record (never a torn one).
// - A complete file is uploaded once; it goes up again only when it is
//   written again (another close with a new size or time), whole: a reader
//   sees the old or the new object, never a mix.
//
// What is read: each file is opened beneath its source directory's
// descriptor (taken at Start) without following a symbolic link on any
// component (objectstore/open_beneath.h), and without waiting (O_NONBLOCK):
// only regular files go up. A file that cannot go up (a link or a
// directory swapped for a link on its way, something not a regular file,
// an unreadable file, more than Options::max_file_bytes) is refused: logged once naming the
// file and why (the limit), counted in Backlog::refused_files, and passed
// over; the others go on in order. It goes up if written again within the
// limits.
//
// The store going away: a failed upload keeps its file pending and its
// place in the order; uploads pause with exponential backoff
// (Options::initial_retry up to max_retry) and resume in order when the
// store answers again. Nothing is dropped: files wait on disk.
//
// Thread-safety: thread-safe. Two threads of its own: one reads inotify,
// one uploads (one request at a time, so the order holds on the wire).

#ifndef DEBUGPLANE_OBJECTSTORE_DIRECTORY_UPLOADER_H_
#define DEBUGPLANE_OBJECTSTORE_DIRECTORY_UPLOADER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "objectstore/s3_object_store.h"
#include "base/unique_fd.h"

namespace debugplane::objectstore {

class DirectoryUploader {
 public:
  struct Source {
    // An existing local directory (absolute), watched with its subdirectories.
    std::string local_dir;
    std::shared_ptr<const S3ObjectStore> store;
    // Key prefix without a trailing '/' ("" for the bucket's top): the file
    // <local_dir>/a/b goes to "<key_prefix>/a/b".
    std::string key_prefix;
    // Relative path prefixes ("system/") of files their writer appends to.
    std::vector<std::string> appended_prefixes;
    // Whether TensorBoard event files (".tfevents." in the name), which
    // their writer appends TFRecord records to, are uploaded while they grow.
    bool appended_event_files = false;
  };

  // Options::max_file_bytes by default: 1 GiB (profiler traces and event
  // files are hundreds of MB at most; an agent shares its host with the
  // training).
  static constexpr int64_t kDefaultMaxFileBytes = int64_t{1} << 30;

  struct Options {
    std::vector<Source> sources;
    absl::Duration append_interval = absl::Seconds(10);
    absl::Duration settle_time = absl::Seconds(2);
    absl::Duration initial_retry = absl::Milliseconds(250);
    absl::Duration max_retry = absl::Seconds(30);
    // The largest file uploaded, in bytes: a file is read whole into memory
    // before it goes up (S3ObjectStore::Put), so this bounds the memory an
    // upload takes. A larger file (or a sparse one claiming to be) is
    // refused (see the file comment).
    int64_t max_file_bytes = kDefaultMaxFileBytes;
    // The clock deciding settle times, append intervals and retry times;
    // absl::Now by default.
    std::function<absl::Time()> now;
    // Diagnostics (an outage starting and ending, a file that vanished); one
    // line each, no trailing newline. May be empty.
    std::function<void(const std::string&)> log;
  };

  // What is still to upload, and what went up.
  struct Backlog {
    int64_t pending_files = 0;  // complete or growing files not (re)uploaded yet
    int64_t pending_bytes = 0;  // their sizes when last seen
    int64_t uploaded_files = 0;
    int64_t uploaded_bytes = 0;
    int64_t failed_attempts = 0;  // uploads the store refused or did not answer
    // Refusals of files that cannot go up (see the file comment; each file
    // version once), and the last one's reason (OK when none).
    int64_t refused_files = 0;
    absl::Status last_refusal;
    // The last failed upload's error while files are pending; OK otherwise.
    absl::Status last_error;
  };

  // Watches every source directory (recursively) and starts uploading
  // what is already there. INVALID_ARGUMENT for a source without a store or
  // a relative directory, or a max_file_bytes under 1; the errno code naming the directory when it
  // cannot be watched (does not exist, inotify limits).
  static absl::StatusOr<std::unique_ptr<DirectoryUploader>> Start(Options options);

  // Stops at once (a request in flight ends first), uploading nothing more.
  ~DirectoryUploader();

  DirectoryUploader(const DirectoryUploader&) = delete;
  DirectoryUploader& operator=(const DirectoryUploader&) = delete;

  Backlog backlog() const;

  // The writers are done: takes every file now in the directories as
  // complete (growing ones up to their last line), uploads all that is
  // pending in order, and returns once nothing is, or after `bound` of real
  // time: DEADLINE_EXCEEDED saying how many files and bytes are left and
  // the last error. Watching stops; uploads too once it returns.
  // REQUIRES: called once.
  absl::Status Finish(absl::Duration bound);

 private:
  // Upload order classes: data first, then indexes, then the end marker.
  enum class FileClass { kData = 0, kIndex = 1, kEnd = 2 };

  struct FileId {
    size_t source = 0;
    std::string relative;  // "events/000000000001/x.tfevents"
    bool operator<(const FileId& other) const {
      return std::tie(source, relative) < std::tie(other.source, other.relative);
    }
  };
  struct FileVersion {
    int64_t size = -1;
    absl::Time modified = absl::InfinitePast();
    bool operator==(const FileVersion& other) const {
      return size == other.size && modified == other.modified;
    }
  };
  struct FileState {
    FileClass file_class = FileClass::kData;
    bool appended = false;
    bool appended_records = false;  // appended TFRecord records, not lines
    // Queued for upload, in order of `sequence`.
    bool pending = false;
    uint64_t sequence = 0;
    // Seen in a new directory, not known to be closed: pending once it has
    // not changed for settle_time (`unsettled_since`).
    bool unsettled = false;
    absl::Time unsettled_since;
    FileVersion seen;             // when last looked at
    FileVersion uploaded;         // what went up (size -1: nothing yet)
    int64_t uploaded_bytes = -1;  // appended files: bytes up to the last line
    bool refused = false;         // `uploaded` is the version refused
    absl::Time next_append_upload = absl::InfinitePast();
  };

  explicit DirectoryUploader(Options options);

  // Watching (watcher thread, and Start).
  absl::Status WatchTree(size_t source, const std::string& relative_dir, bool at_start);
  void WatchLoop();
  void HandleEvents(const char* buffer, ssize_t length);
  // A file event or a scan found `id` with `version`; `closed`: known complete.
  void NoteFile(const FileId& id, const FileVersion& version, bool closed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Enqueue(FileState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `id`'s writer appends to it (appended_prefixes, event files).
  bool IsAppended(const FileId& id) const;
  // Every file under the sources as complete (Finish).
  void ScanAllAsComplete();

  // Uploading (upload thread).
  void UploadLoop();
  // Settled and due appended files become pending.
  void PromoteDueFiles(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The file to upload next in order, if one may go now.
  const FileId* NextUpload() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Uploads `id` (mu_ not held while the request runs).
  void Upload(const FileId& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The bytes of `id` uploaded last (-1: none yet).
  int64_t UploadedBytes(const FileId& id) ABSL_LOCKS_EXCLUDED(mu_);
  // After a failed Put: logs the first failure of a run, counts it, and
  // waits (doubling from initial_retry up to max_retry) before the next try.
  void PauseAfterFailure(const absl::Status& status, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a successful Put of `key`: logs the end of a run of failures.
  void ResumeAfterSuccess(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What reading `id` for its upload gave.
  struct UploadRead {
    absl::Status status;
    std::string data;
    FileVersion version;   // as read
    bool vanished = false;  // removed before it was read
    bool refused = false;   // cannot go up (status says why)
  };
  // Reads `id` whole, confined to its source directory (mu_ not held).
  UploadRead ReadForUpload(const FileId& id) const;
  // `id` was refused (`read` says why): passed over until written again.
  void Refuse(FileState& state, const UploadRead& read)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string LocalPath(const FileId& id) const;
  std::string Key(const FileId& id) const;
  void Log(const std::string& line) const;

  const Options options_;
  // Each source's directory (O_PATH), opened at Start: uploads open files
  // beneath it.
  std::vector<base::UniqueFd> source_dirs_;
  base::UniqueFd inotify_fd_;
  base::UniqueFd wake_fd_;  // eventfd: ends the watcher's poll

  mutable absl::Mutex mu_;
  std::map<FileId, FileState> files_ ABSL_GUARDED_BY(mu_);
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  // Watch descriptor -> (source, relative directory).
  std::map<int, std::pair<size_t, std::string>> watches_ ABSL_GUARDED_BY(mu_);
  int consecutive_failures_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  int64_t uploaded_files_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t uploaded_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failed_attempts_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_files_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status last_refusal_ ABSL_GUARDED_BY(mu_);
  // Something changed that the upload thread should look at.
  bool wake_uploader_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_watching_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_uploading_ ABSL_GUARDED_BY(mu_) = false;

  std::thread watcher_;
  std::thread uploader_;
};

}  // namespace debugplane::objectstore

#endif  // DEBUGPLANE_OBJECTSTORE_DIRECTORY_UPLOADER_H_
