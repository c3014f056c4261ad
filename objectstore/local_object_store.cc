#include "objectstore/local_object_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/message_text.h"

namespace debugplane::objectstore {
namespace {

// Paths are shown in full up to this many characters.
constexpr size_t kShownPathChars = 512;
// A recursive listing goes at most this deep below its directory.
constexpr int kMaxListDepth = 128;
// openat2 may fail with EAGAIN when a rename races with the lookup.
constexpr int kOpenat2Attempts = 8;

constexpr uint64_t kResolveConfined = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

long Openat2(int dir_fd, const char* path, int flags) {
  struct open_how how;
  std::memset(&how, 0, sizeof(how));
  how.flags = static_cast<uint64_t>(flags);
  how.resolve = kResolveConfined;
  return syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));
}

absl::Time ModifiedTime(const struct stat& st) {
  return absl::FromUnixSeconds(st.st_mtim.tv_sec) + absl::Nanoseconds(st.st_mtim.tv_nsec);
}

// The status for `err` (an errno) met while doing `what` on `path`.
absl::Status ErrnoStatus(int err, absl::string_view what, absl::string_view path) {
  const std::string message = absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENAMETOOLONG:
      return absl::InvalidArgumentError(message);
    default:
      return absl::UnavailableError(message);
  }
}

std::string LinkRefused(absl::string_view path) {
  return absl::StrCat(path,
                      " is a symbolic link; debugplane does not follow links inside a data root");
}

// "a/b/c" -> {"a", "b", "c"}; "" -> {}.
std::vector<absl::string_view> Components(absl::string_view key) {
  if (key.empty()) return {};
  return absl::StrSplit(key, '/');
}

// A key without its trailing '/' (list prefixes and watch prefixes may end
// in one).
absl::string_view WithoutTrailingSlash(absl::string_view key) {
  if (!key.empty() && key.back() == '/') key.remove_suffix(1);
  return key;
}

struct DirEntry {
  std::string name;
  bool directory = false;
  std::string sort_key;  // name, or name + "/" for a directory: key order.
};

// The entries of the open directory `dir_fd` (opened for this listing: read
// from its start, once) whose names start with `name_prefix`, unsorted.
// Links are reported through `*links` and otherwise left out, as are FIFOs,
// sockets and devices. getdents64 on the descriptor itself: no second
// descriptor as fdopendir would need.
absl::Status ReadEntries(int dir_fd, absl::FunctionRef<std::string()> dir_path,
                         absl::string_view name_prefix, std::vector<DirEntry>* entries,
                         std::vector<std::string>* links) {
  alignas(8) char buffer[32 * 1024];
  while (true) {
    const ssize_t length = ::getdents64(dir_fd, buffer, sizeof(buffer));
    if (length < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      return ErrnoStatus(err, "list", dir_path());
    }
    if (length == 0) return absl::OkStatus();
    for (ssize_t offset = 0; offset < length;) {
      const auto* e = reinterpret_cast<const struct dirent64*>(buffer + offset);
      offset += e->d_reclen;
      const absl::string_view name(e->d_name);
      if (name == "." || name == ".." || !absl::StartsWith(name, name_prefix)) continue;
      unsigned char type = e->d_type;
      if (type == DT_UNKNOWN) {
        struct stat st;
        if (::fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // Gone.
        type = S_ISREG(st.st_mode)   ? DT_REG
               : S_ISDIR(st.st_mode) ? DT_DIR
               : S_ISLNK(st.st_mode) ? DT_LNK
                                     : DT_UNKNOWN;
      }
      if (type == DT_LNK) {
        links->emplace_back(name);
      } else if (type == DT_REG || type == DT_DIR) {
        DirEntry entry;
        entry.name = std::string(name);
        entry.directory = type == DT_DIR;
        entry.sort_key = entry.directory ? absl::StrCat(name, "/") : entry.name;
        entries->push_back(std::move(entry));
      }
    }
  }
}

}  // namespace

LocalObjectStore::LocalObjectStore(std::string root, base::UniqueFd root_fd, bool use_openat2)
    : root_(std::move(root)), root_fd_(std::move(root_fd)), use_openat2_(use_openat2) {}

absl::StatusOr<std::shared_ptr<LocalObjectStore>> LocalObjectStore::Open(const std::string& root) {
  return Open(root, Options());
}

absl::StatusOr<std::shared_ptr<LocalObjectStore>> LocalObjectStore::Open(const std::string& root,
                                                                         Options options) {
  if (root.empty() || root.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("a local store's root must be an absolute path, not ",
                     base::QuoteForMessage(root, kShownPathChars)));
  }
  std::string normal = root;
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  base::UniqueFd fd(::open(normal.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    const std::string shown = base::EscapeForMessage(normal, kShownPathChars);
    if (err == ENOTDIR) {
      return absl::FailedPreconditionError(absl::StrCat(shown, " is not a directory"));
    }
    return ErrnoStatus(err, "open the data root", shown);
  }
  bool use_openat2 = false;
  if (options.resolution != Resolution::kWalk) {
    base::UniqueFd probe(static_cast<int>(Openat2(fd.get(), ".", O_PATH | O_DIRECTORY | O_CLOEXEC)));
    // ENOSYS: an older kernel; EPERM: a seccomp filter that does not know
    // the call; E2BIG/EINVAL: a kernel without these resolve flags.
    use_openat2 = probe.valid();
    if (!use_openat2 && options.resolution == Resolution::kOpenat2) {
      return absl::UnimplementedError(
          absl::StrCat("openat2 is not available here (", std::strerror(errno), ")"));
    }
  }
  return std::shared_ptr<LocalObjectStore>(
      new LocalObjectStore(std::move(normal), std::move(fd), use_openat2));
}

std::string LocalObjectStore::Describe(absl::string_view key) const {
  if (key.empty()) return base::EscapeForMessage(root_, kShownPathChars);
  return base::EscapeForMessage(absl::StrCat(root_ == "/" ? "" : root_, "/", key), kShownPathChars);
}

absl::StatusOr<base::UniqueFd> LocalObjectStore::OpenBeneath(absl::string_view key, int flags,
                                                       struct stat* path_stat) const {
  flags |= O_NOFOLLOW | O_CLOEXEC;
  absl::StatusOr<base::UniqueFd> fd;
  if (key.empty()) {
    base::UniqueFd root(::openat(root_fd_.get(), ".", flags));
    if (root.valid()) {
      fd = std::move(root);
    } else {
      fd = OpenError(errno, key);
    }
  } else if (use_openat2_) {
    fd = OpenWithOpenat2(key, flags);
  } else {
    fd = OpenByWalk(key, flags);
  }
  if (!fd.ok() || (flags & O_PATH) == 0) return fd;
  // With O_PATH | O_NOFOLLOW a link as the last component is opened itself.
  struct stat st;
  if (path_stat == nullptr) path_stat = &st;
  if (::fstat(fd->get(), path_stat) != 0) return ErrnoError("open", key);
  if (S_ISLNK(path_stat->st_mode)) return absl::PermissionDeniedError(LinkRefused(Describe(key)));
  return fd;
}

absl::StatusOr<base::UniqueFd> LocalObjectStore::OpenWithOpenat2(absl::string_view key, int flags) const {
  const std::string path(key);
  for (int attempt = 0;; ++attempt) {
    base::UniqueFd fd(static_cast<int>(Openat2(root_fd_.get(), path.c_str(), flags)));
    if (fd.valid()) return fd;
    const int err = errno;
    if ((err == EAGAIN && attempt + 1 < kOpenat2Attempts) || err == EINTR) continue;
    return OpenError(err, key);
  }
}

absl::StatusOr<base::UniqueFd> LocalObjectStore::OpenByWalk(absl::string_view key, int flags) const {
  const std::vector<absl::string_view> components = Components(key);
  base::UniqueFd current;  // The directory reached; the root before the first step.
  for (size_t i = 0; i < components.size(); ++i) {
    const std::string name(components[i]);
    // ValidateKey refuses these; the walk refuses them again by itself.
    if (name.empty() || name == "." || name == "..") {
      return absl::PermissionDeniedError(
          absl::StrCat(Describe(key), ": '.', '..' and empty components are not followed"));
    }
    const int parent = current.valid() ? current.get() : root_fd_.get();
    const bool last = i + 1 == components.size();
    const int step_flags = last ? flags : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    int fd;
    do {
      fd = ::openat(parent, name.c_str(), step_flags);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return OpenError(errno, key);
    current.reset(fd);
  }
  return current;
}

absl::Status LocalObjectStore::ErrnoError(absl::string_view what, absl::string_view key) const {
  const int err = errno;  // Before anything else can change it.
  return ErrnoStatus(err, what, Describe(key));
}

absl::Status LocalObjectStore::OpenError(int err, absl::string_view key) const {
  if (err == ELOOP || err == ENOTDIR || err == EXDEV) {
    // Which component is a link, or not a directory? Walked again, confined
    // the same way, only on this error path.
    const std::vector<absl::string_view> components = Components(key);
    base::UniqueFd current;
    for (size_t i = 0; i < components.size(); ++i) {
      const std::string name(components[i]);
      if (name.empty() || name == "." || name == "..") break;
      const int parent = current.valid() ? current.get() : root_fd_.get();
      const std::string so_far = std::string(key.substr(
          0, static_cast<size_t>(components[i].data() - key.data()) + components[i].size()));
      struct stat st;
      if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return ErrnoError("open", key);
      }
      if (S_ISLNK(st.st_mode)) return absl::PermissionDeniedError(LinkRefused(Describe(so_far)));
      if (i + 1 == components.size()) break;
      if (!S_ISDIR(st.st_mode)) {
        return absl::NotFoundError(absl::StrCat("cannot open ", Describe(key), ": ",
                                                Describe(so_far), " is not a directory"));
      }
      base::UniqueFd next(::openat(parent, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!next.valid()) break;  // Changed meanwhile: report the original error.
      current = std::move(next);
    }
    if (err == ENOTDIR) {
      return absl::NotFoundError(
          absl::StrCat("cannot open ", Describe(key), ": not a directory where one is needed"));
    }
    if (err == ELOOP) {
      // A link that was replaced meanwhile: still a link on the way.
      return absl::PermissionDeniedError(LinkRefused(Describe(key)));
    }
    return absl::PermissionDeniedError(
        absl::StrCat(Describe(key), " leads outside the data root ", Describe("")));
  }
  return ErrnoStatus(err, "open", Describe(key));
}

absl::Status LocalObjectStore::ReadRangeInto(absl::string_view key, uint64_t offset,
                                             uint64_t length, std::string* out) const {
  out->clear();
  if (absl::Status valid = ValidateKey(key); !valid.ok()) return valid;
  if (length > kMaxReadBytes) {
    return absl::InvalidArgumentError(absl::StrCat("read of ", length, " bytes of ", Describe(key),
                                                   ": at most ", kMaxReadBytes, " at once"));
  }
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  absl::StatusOr<base::UniqueFd> fd = OpenBeneath(key, O_RDONLY | O_NONBLOCK);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return ErrnoError("read", key);
  if (S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(Describe(key), " is a directory, not an object"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::PermissionDeniedError(
        absl::StrCat(Describe(key), " is not a regular file; debugplane reads only files"));
  }
  // Read up to the size at open time: a consistent prefix of an append-only
  // file. Clamped before allocating (lengths come from files too).
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset >= size) return absl::OkStatus();
  const uint64_t want = std::min(length, size - offset);
  out->resize(want);
  uint64_t done = 0;
  while (done < want) {
    const ssize_t n =
        ::pread(fd->get(), out->data() + done, want - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      out->clear();
      return ErrnoStatus(err, "read", Describe(key));
    }
    if (n == 0) break;  // Truncated meanwhile: what is there.
    done += static_cast<uint64_t>(n);
  }
  out->resize(done);
  return absl::OkStatus();
}

absl::StatusOr<ObjectEntry> LocalObjectStore::Stat(absl::string_view key) const {
  if (absl::Status valid = ValidateKey(key); !valid.ok()) return valid;
  struct stat st;  // Of what was opened: OpenBeneath looks for a link.
  absl::StatusOr<base::UniqueFd> fd = OpenBeneath(key, O_PATH, &st);
  if (!fd.ok()) return fd.status();
  if (S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(Describe(key), " is a directory, not an object"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::PermissionDeniedError(
        absl::StrCat(Describe(key), " is not a regular file; debugplane reads only files"));
  }
  return ObjectEntry{std::string(key), static_cast<uint64_t>(st.st_size), ModifiedTime(st)};
}

absl::StatusOr<base::UniqueFd> LocalObjectStore::OpenDirectoryForWatch(absl::string_view prefix) const {
  const absl::string_view key = WithoutTrailingSlash(prefix);
  if (!key.empty()) {
    if (absl::Status valid = ValidateKey(key); !valid.ok()) return valid;
  }
  return OpenBeneath(key, O_PATH | O_DIRECTORY);
}

absl::StatusOr<ListResult> LocalObjectStore::List(const ListOptions& options) const {
  if (absl::Status valid = ValidatePrefix(options.prefix); !valid.ok()) return valid;
  if (!options.delimiter.empty() && options.delimiter != "/") {
    return absl::InvalidArgumentError(absl::StrCat("unsupported list delimiter ",
                                                   base::QuoteForMessage(options.delimiter, 8),
                                                   "; use \"/\" or none"));
  }
  const size_t slash = options.prefix.rfind('/');
  const std::string dir_key = slash == std::string::npos ? "" : options.prefix.substr(0, slash);
  absl::StatusOr<base::UniqueFd> dir = OpenBeneath(dir_key, O_RDONLY | O_DIRECTORY);
  if (!dir.ok()) return dir.status();
  ListResult result;
  if (options.max_keys == 0) return result;
  absl::Status listed =
      ListDirectory(dir->get(), dir_key, options, options.delimiter.empty(), &result);
  if (!listed.ok()) return listed;
  return result;
}

// One listing's depth-first walk, in key order, of the directory tree
// below an open directory (ListDirectory): a stack of directories being
// read, each with its sorted entries.
class LocalObjectStore::Lister {
 public:
  Lister(const LocalObjectStore& store, int dir_fd, const ListOptions& options, bool recursive,
         ListResult* out)
      : store_(store), dir_fd_(dir_fd), options_(options), recursive_(recursive), out_(out) {}

  // Lists the directory `dir_key` (dir_fd) into `out`, up to max_keys.
  absl::Status Run(const std::string& dir_key) {
    // The part of the prefix after the directory: a start of names.
    const std::string name_prefix =
        options_.prefix.substr(dir_key.empty() ? 0 : dir_key.size() + 1);
    if (absl::Status first = Push(base::UniqueFd(), dir_key, name_prefix); !first.ok()) {
      return first;
    }
    while (!stack_.empty() && !page_full_) {
      Frame& frame = stack_.back();
      if (frame.next == frame.entries.size()) {
        stack_.pop_back();
        continue;
      }
      const DirEntry& entry = frame.entries[frame.next++];
      const int fd = frame.fd.valid() ? frame.fd.get() : dir_fd_;
      const std::string key =
          frame.key.empty() ? entry.sort_key : absl::StrCat(frame.key, "/", entry.sort_key);
      absl::Status visited =
          entry.directory ? VisitDirectory(fd, entry, key) : VisitFile(fd, entry, key);
      if (!visited.ok()) return visited;
    }
    return absl::OkStatus();
  }

 private:
  struct Frame {
    base::UniqueFd fd;              // Invalid for the first: dir_fd.
    std::string key;                // "" or "a/b": the directory's key.
    std::vector<DirEntry> entries;  // Sorted.
    size_t next = 0;
  };

  // Reads the entries of directory `key` (open as `fd`; invalid: dir_fd)
  // whose names start with `names` onto the stack. A link in the range
  // listed fails the listing: it is named, not silently left out.
  absl::Status Push(base::UniqueFd fd, std::string key, absl::string_view names) {
    Frame frame;
    frame.fd = std::move(fd);
    frame.key = std::move(key);
    const int read_fd = frame.fd.valid() ? frame.fd.get() : dir_fd_;
    std::vector<std::string> links;
    absl::Status read = ReadEntries(
        read_fd, [this, &frame] { return store_.Describe(frame.key); }, names, &frame.entries,
        &links);
    if (!read.ok()) return read;
    const std::string key_slash = frame.key.empty() ? "" : absl::StrCat(frame.key, "/");
    std::sort(links.begin(), links.end());
    for (const std::string& link : links) {
      const std::string link_key = key_slash + link;
      if (absl::StrCat(link_key, "/") > options_.start_after) {
        return absl::PermissionDeniedError(LinkRefused(store_.Describe(link_key)));
      }
    }
    std::sort(frame.entries.begin(), frame.entries.end(),
              [](const DirEntry& a, const DirEntry& b) { return a.sort_key < b.sort_key; });
    stack_.push_back(std::move(frame));
    return absl::OkStatus();
  }

  // A directory entry (`key` ends in '/'): a common prefix when not
  // recursive, else its entries pushed (unless all sort before start_after).
  absl::Status VisitDirectory(int fd, const DirEntry& entry, const std::string& key) {
    if (!recursive_) {
      if (key > options_.start_after && Room()) Emit(key, /*object=*/std::nullopt);
      return absl::OkStatus();
    }
    // Below it, every key starts with `key`: skip the subtree if all of it
    // sorts before start_after.
    if (key <= options_.start_after && !absl::StartsWith(options_.start_after, key)) {
      return absl::OkStatus();
    }
    if (stack_.size() > static_cast<size_t>(kMaxListDepth)) {
      return absl::FailedPreconditionError(absl::StrCat("cannot list ", store_.Describe(key),
                                                        ": nested more than ", kMaxListDepth,
                                                        " directories deep"));
    }
    base::UniqueFd sub(
        ::openat(fd, entry.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    const int open_errno = errno;
    const std::string sub_key = key.substr(0, key.size() - 1);
    if (!sub.valid()) {
      if (open_errno == ENOENT) return absl::OkStatus();  // Removed since it was listed.
      return store_.OpenError(open_errno, sub_key);
    }
    return Push(std::move(sub), sub_key, "");
  }

  // A file entry: an object if it is still a regular file.
  absl::Status VisitFile(int fd, const DirEntry& entry, const std::string& key) {
    if (key <= options_.start_after) return absl::OkStatus();
    struct stat st;
    if (::fstatat(fd, entry.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return absl::OkStatus();  // Removed since it was listed.
      return store_.ErrnoError("stat", key);
    }
    if (S_ISLNK(st.st_mode)) {
      return absl::PermissionDeniedError(LinkRefused(store_.Describe(key)));
    }
    if (!S_ISREG(st.st_mode)) return absl::OkStatus();  // Replaced by a directory or FIFO.
    if (Room()) {
      Emit(key, ObjectEntry{key, static_cast<uint64_t>(st.st_size), ModifiedTime(st)});
    }
    return absl::OkStatus();
  }

  // Whether another key fits in the page; if not, marks the result
  // truncated (more keys follow), says where the next page starts, and
  // ends the walk.
  bool Room() {
    if (emitted_ < options_.max_keys) return true;
    out_->truncated = true;
    out_->next_start_after = last_emitted_;
    page_full_ = true;
    return false;
  }

  // Adds `key` to the page: `object`, or a common prefix if none.
  void Emit(const std::string& key, std::optional<ObjectEntry> object) {
    if (object.has_value()) {
      out_->objects.push_back(*std::move(object));
    } else {
      out_->common_prefixes.push_back(key);
    }
    last_emitted_ = key;
    ++emitted_;
  }

  const LocalObjectStore& store_;
  const int dir_fd_;
  const ListOptions& options_;
  const bool recursive_;
  ListResult* const out_;
  std::vector<Frame> stack_;
  size_t emitted_ = 0;
  std::string last_emitted_;  // Keys are emitted in key order.
  bool page_full_ = false;
};

absl::Status LocalObjectStore::ListDirectory(int dir_fd, const std::string& dir_key,
                                             const ListOptions& options, bool recursive,
                                             ListResult* out) const {
  return Lister(*this, dir_fd, options, recursive, out).Run(dir_key);
}

absl::StatusOr<StoreLocation> OpenLocalPath(const std::string& path,
                                            LocalObjectStore::Options options) {
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(base::QuoteForMessage(path, kShownPathChars), " is not an absolute path"));
  }
  std::vector<std::string> components;
  for (absl::string_view component : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (component == ".") continue;
    if (component == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat(base::QuoteForMessage(path, kShownPathChars), " has a '..' component"));
    }
    components.emplace_back(component);
  }
  // The longest existing directory among /c0/c1/.../cn, /c0/.../cn-1, ..., /.
  for (size_t depth = components.size() + 1; depth-- > 0;) {
    std::string root = "/";
    for (size_t i = 0; i < depth; ++i) absl::StrAppend(&root, i == 0 ? "" : "/", components[i]);
    absl::StatusOr<std::shared_ptr<LocalObjectStore>> store = LocalObjectStore::Open(root, options);
    if (!store.ok()) {
      const absl::StatusCode code = store.status().code();
      if ((code == absl::StatusCode::kNotFound || code == absl::StatusCode::kFailedPrecondition) &&
          depth > 0) {
        continue;  // Not there yet, or a file: its parent then.
      }
      return store.status();
    }
    std::string prefix;
    for (size_t i = depth; i < components.size(); ++i) {
      absl::StrAppend(&prefix, prefix.empty() ? "" : "/", components[i]);
    }
    return StoreLocation{*std::move(store), std::move(prefix)};
  }
  return absl::InternalError("unreachable");
}

}  // namespace debugplane::objectstore
