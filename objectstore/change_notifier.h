// ChangeNotifier: "something changed in this directory of a store, look
// again". Separate from reading (object_store.h): a reader lists and reads
// whenever it is told to; the notifier only says when that is worth doing.
//
// Two mechanisms behind one interface, chosen per watched directory:
// - inotify, for stores that open their directories for watching
//   (ObjectStore::OpenDirectoryForWatch: the local store). The directory is
//   opened confined to its store (no link followed) and the watch is added
//   on that descriptor ("/proc/self/fd/<fd>"), so nothing outside a store's
//   root is ever watched. Milliseconds.
// - polling, for stores without notification (object storage) and where
//   inotify is unavailable: every poll_interval the directory is listed
//   again and a change of its listing (keys, sizes, modified times) is
//   reported.
//
//   ChangeNotifier notifier([&](ChangeNotifier::WatchId id) { Wake(id); }, {});
//   absl::StatusOr<ChangeNotifier::WatchId> id =
//       notifier.Watch(trial.Below("index"), kEntryChanged);
//
// Thread-safe. The listener runs on the notifier's own threads (or on the
// thread that calls PollNow), never with a lock of the notifier held, so it
// may take the caller's locks, under which the caller may call Watch and
// Unwatch; it must not block for long and must not destroy the notifier.

#ifndef DEBUGPLANE_OBJECTSTORE_CHANGE_NOTIFIER_H_
#define DEBUGPLANE_OBJECTSTORE_CHANGE_NOTIFIER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "objectstore/object_store.h"
#include "base/unique_fd.h"

namespace debugplane::objectstore {

// What a watch reports about the entries directly in its directory (bits).
enum ChangeEvent : uint32_t {
  // An object or directory appeared (created, moved in), or an object was
  // written completely (closed after writing).
  kEntryChanged = 1u << 0,
  // An object was appended to (it is still being written).
  kObjectAppended = 1u << 1,
};

class ChangeNotifier {
 public:
  // Watches are named by id. Watching the same directory again (through
  // the same or another store) returns the same id, its events merged, as
  // inotify does; one Unwatch ends it for every caller.
  using WatchId = int64_t;
  using Listener = std::function<void(WatchId)>;

  struct Options {
    // How often polled directories are listed again. InfiniteDuration: only
    // when PollNow is called (tests).
    absl::Duration poll_interval = absl::Seconds(1);
    // False: poll every directory, as where inotify is unavailable (tests).
    bool use_inotify = true;
  };

  // Starts the notifier's threads. Never fails: without inotify (or /proc)
  // every directory is polled.
  ChangeNotifier(Listener listener, Options options);
  // Stops the threads; the listener is not running and is not called again
  // once it returns. REQUIRES: not called from the listener.
  ~ChangeNotifier();
  ChangeNotifier(const ChangeNotifier&) = delete;
  ChangeNotifier& operator=(const ChangeNotifier&) = delete;

  // Reports `events` (ChangeEvent bits) in the directory `directory` (its
  // prefix is the directory's key, "" for the store's root) until Unwatch.
  // Errors: NOT_FOUND if the directory does not exist (watch its parent to
  // hear of its creation), the store's errors opening it (a symbolic link:
  // PERMISSION_DENIED naming it). A polled directory is listed once here,
  // so that only later changes are reported.
  absl::StatusOr<WatchId> Watch(const StoreLocation& directory, uint32_t events);

  // Ends the watch `id`. Unknown ids are ignored.
  void Unwatch(WatchId id);

  // Lists every polled directory now and calls the listener, on this
  // thread, for those whose listing changed since the last pass.
  void PollNow();

  // Whether inotify serves the stores that offer it (false: all polled).
  bool inotify_active() const { return inotify_fd_.valid(); }

 private:
  struct Polled;
  void InotifyLoop();
  void PollLoop();
  absl::StatusOr<WatchId> WatchPolled(const StoreLocation& directory);

  const Listener listener_;
  const Options options_;
  base::UniqueFd inotify_fd_;
  base::UniqueFd wake_fd_;  // eventfd that wakes the inotify thread to stop.

  absl::Mutex mu_;
  absl::CondVar stop_cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Polled watches by id (ids below 0, apart from inotify's), and the id of
  // each (store, prefix).
  std::map<WatchId, Polled> polled_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<const ObjectStore*, std::string>, WatchId> polled_ids_ ABSL_GUARDED_BY(mu_);
  WatchId next_polled_id_ ABSL_GUARDED_BY(mu_) = -1;

  std::thread inotify_thread_;
  std::thread poll_thread_;
};

}  // namespace debugplane::objectstore

#endif  // DEBUGPLANE_OBJECTSTORE_CHANGE_NOTIFIER_H_
