#include "objectstore/change_notifier.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace debugplane::objectstore {
namespace {

// A polled directory's listing is fingerprinted over at most this many
// entries (a directory of more is still polled; changes past them are
// missed until the caller's own periodic pass).
constexpr size_t kMaxPolledEntries = 100000;

// FNV-1a over the listing: a change of any key, size or modified time
// changes it.
class Fingerprint {
 public:
  void Add(absl::string_view bytes) {
    for (const char c : bytes) {
      hash_ ^= static_cast<unsigned char>(c);
      hash_ *= 1099511628211ull;
    }
    Add64(bytes.size());
  }
  void Add64(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      hash_ ^= (v >> (8 * i)) & 0xff;
      hash_ *= 1099511628211ull;
    }
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 1469598103934665603ull;
};

// The fingerprint of `directory`'s listing; a distinct value when it does
// not exist or cannot be listed (so that appearing or failing is a change).
uint64_t ListingFingerprint(const StoreLocation& directory) {
  absl::StatusOr<ListResult> listing = directory.store->ListAll(
      ListOptions{.prefix = directory.DirectoryPrefix(), .delimiter = "/"}, kMaxPolledEntries);
  Fingerprint fingerprint;
  if (!listing.ok()) {
    fingerprint.Add64(static_cast<uint64_t>(listing.status().code()));
    fingerprint.Add("error");
    return fingerprint.value();
  }
  for (const ObjectEntry& entry : listing->objects) {
    fingerprint.Add(entry.key);
    fingerprint.Add64(entry.size);
    fingerprint.Add64(static_cast<uint64_t>(absl::ToUnixNanos(entry.modified)));
  }
  for (const std::string& prefix : listing->common_prefixes) fingerprint.Add(prefix);
  return fingerprint.value();
}

uint32_t InotifyMask(uint32_t events) {
  uint32_t mask = 0;
  if (events & kEntryChanged) mask |= IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE;
  if (events & kObjectAppended) mask |= IN_MODIFY;
  return mask;
}

}  // namespace

struct ChangeNotifier::Polled {
  StoreLocation directory;
  uint64_t fingerprint = 0;
};

ChangeNotifier::ChangeNotifier(Listener listener, Options options)
    : listener_(std::move(listener)), options_(options) {
  if (options_.use_inotify) {
    // Watches are added through /proc/self/fd/<fd> of the confined
    // descriptor; without /proc there is no confined way: poll instead.
    if (::access("/proc/self/fd", X_OK) != 0) {
      spdlog::warn("/proc is not mounted; new training data is noticed by polling every {}",
                   absl::FormatDuration(options_.poll_interval));
    } else {
      inotify_fd_.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
      if (!inotify_fd_.valid()) {
        spdlog::warn("inotify unavailable ({}); new training data is noticed by polling every {}",
                     std::strerror(errno), absl::FormatDuration(options_.poll_interval));
      }
    }
  }
  if (inotify_fd_.valid()) {
    wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    inotify_thread_ = std::thread([this] { InotifyLoop(); });
  }
  if (options_.poll_interval != absl::InfiniteDuration()) {
    poll_thread_ = std::thread([this] { PollLoop(); });
  }
}

ChangeNotifier::~ChangeNotifier() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    stop_cv_.SignalAll();
  }
  if (wake_fd_.valid()) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_.get(), &one, sizeof(one));
  }
  if (inotify_thread_.joinable()) inotify_thread_.join();
  if (poll_thread_.joinable()) poll_thread_.join();
}

absl::StatusOr<ChangeNotifier::WatchId> ChangeNotifier::Watch(const StoreLocation& directory,
                                                              uint32_t events) {
  absl::StatusOr<base::UniqueFd> fd = directory.store->OpenDirectoryForWatch(directory.prefix);
  if (absl::IsUnimplemented(fd.status()) || (fd.ok() && !inotify_fd_.valid())) {
    return WatchPolled(directory);
  }
  if (!fd.ok()) return fd.status();
  const std::string proc_path = absl::StrCat("/proc/self/fd/", fd->get());
  // No IN_DONT_FOLLOW: the magic link must be followed to the descriptor's
  // directory (and only there).
  const int wd = ::inotify_add_watch(inotify_fd_.get(), proc_path.c_str(),
                                     InotifyMask(events) | IN_ONLYDIR | IN_MASK_ADD);
  if (wd < 0) {
    const int err = errno;
    if (err == ENOSPC) {
      // Out of inotify watches (fs.inotify.max_user_watches): poll it.
      return WatchPolled(directory);
    }
    return absl::UnavailableError(
        absl::StrCat("cannot watch ", directory.Describe(), ": ", std::strerror(err)));
  }
  return static_cast<WatchId>(wd);
}

absl::StatusOr<ChangeNotifier::WatchId> ChangeNotifier::WatchPolled(
    const StoreLocation& directory) {
  // Listed before the lock: the listing is I/O.
  const uint64_t fingerprint = ListingFingerprint(directory);
  absl::MutexLock lock(&mu_);
  auto [it, inserted] =
      polled_ids_.try_emplace(std::make_pair(directory.store.get(), directory.prefix), 0);
  if (!inserted) return it->second;
  it->second = next_polled_id_--;
  polled_[it->second] = Polled{directory, fingerprint};
  return it->second;
}

void ChangeNotifier::Unwatch(WatchId id) {
  if (id >= 0) {
    if (inotify_fd_.valid()) ::inotify_rm_watch(inotify_fd_.get(), static_cast<int>(id));
    return;
  }
  absl::MutexLock lock(&mu_);
  auto it = polled_.find(id);
  if (it == polled_.end()) return;
  polled_ids_.erase(std::make_pair(it->second.directory.store.get(), it->second.directory.prefix));
  polled_.erase(it);
}

void ChangeNotifier::PollNow() {
  std::vector<std::pair<WatchId, StoreLocation>> directories;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, polled] : polled_) directories.emplace_back(id, polled.directory);
  }
  std::vector<WatchId> changed;
  for (const auto& [id, directory] : directories) {
    const uint64_t fingerprint = ListingFingerprint(directory);
    absl::MutexLock lock(&mu_);
    auto it = polled_.find(id);
    if (it == polled_.end() || it->second.fingerprint == fingerprint) continue;
    it->second.fingerprint = fingerprint;
    changed.push_back(id);
  }
  for (const WatchId id : changed) listener_(id);
}

void ChangeNotifier::PollLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      const absl::Time deadline = absl::Now() + options_.poll_interval;
      while (!stopping_ && absl::Now() < deadline) {
        stop_cv_.WaitWithTimeout(&mu_, deadline - absl::Now());
      }
      if (stopping_) return;
    }
    PollNow();
  }
}

void ChangeNotifier::InotifyLoop() {
  alignas(inotify_event) char buffer[16 * 1024];
  while (true) {
    pollfd fds[2] = {{inotify_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    const ssize_t length = ::read(inotify_fd_.get(), buffer, sizeof(buffer));
    if (length <= 0) continue;
    // One call per watch per batch: a burst of writes wakes a reader once.
    std::set<WatchId> changed;
    for (ssize_t offset = 0; offset < length;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + offset);
      offset += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      if (event->wd >= 0 && (event->mask & IN_IGNORED) == 0) changed.insert(event->wd);
    }
    for (const WatchId id : changed) listener_(id);
  }
}

}  // namespace debugplane::objectstore
