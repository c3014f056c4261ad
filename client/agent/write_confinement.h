// Where the host agent may write.
//
// A job's output paths (DebugHookConfig.S3OutputPath or LocalPath,
// ProfilerConfig.S3OutputPath) come from whoever created the job, while the
// agent and its training command run with the training host's permissions:
// taken as they are, they let any API client make the host write anywhere
// that user may. So the agent writes, and points the training command,
// only inside directories its operator gave it: its working directory (not
// when that is "/"), --tensor-dir, --profiler-dir, --config-dir and every
// --allow-write DIR. A job path outside them is refused before the command
// starts, naming the field, the path and the flag that would allow it.
//
// Symbolic links cannot lead out: a path is checked by its real location
// (symlinks in its existing part resolved, as realpath(3) does), and the
// directories the agent creates below a root are made one component at a
// time relative to a descriptor of the previous one, never following a
// symbolic link (mkdirat + openat with O_NOFOLLOW). The roots themselves are
// the operator's choice and may be, or pass through, symbolic links.
//
// Thread-safety: a WriteConfinement is immutable once created; its const
// methods may be called from any thread.

#ifndef DEBUGPLANE_CLIENT_AGENT_WRITE_CONFINEMENT_H_
#define DEBUGPLANE_CLIENT_AGENT_WRITE_CONFINEMENT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace debugplane::client {

// One directory the agent may write into, and how it was given (for
// messages): e.g. {"/srv/run", "the working directory"},
// {"/data/jobs", "--allow-write"}.
struct WritableRoot {
  std::string path;
  std::string origin;
};

// The real path of `path`: its longest existing prefix resolved with
// realpath(3) (every symbolic link in it followed), the rest appended as
// written. A relative `path` is taken relative to the working directory.
// Errors: INVALID_ARGUMENT for an empty path or one with a ".." component
// (which cannot be checked before the directory exists); a dangling
// symbolic link in the existing part is NOT_FOUND naming it; otherwise the
// errno code of realpath/lstat (e.g. PERMISSION_DENIED) naming the path.
absl::StatusOr<std::string> ResolveExistingPrefix(const std::string& path);

class WriteConfinement {
 public:
  // Resolves every root with ResolveExistingPrefix (roots need not exist
  // yet). Errors: that function's, prefixed with the root's origin and path
  // ("--allow-write data/../x: ..."). An empty list is allowed (nothing but
  // the agent's own state directory may be written then).
  static absl::StatusOr<WriteConfinement> Create(const std::vector<WritableRoot>& roots);

  // Returns the real path (ResolveExistingPrefix) of the job's output path
  // `path`, given in the job's field `field`, if it lies inside a root (or
  // is one). Otherwise PERMISSION_DENIED naming the field, the path, where
  // it really leads when a symbolic link takes it elsewhere, the allowed
  // directories, and the remedy: "--allow-write <path>" or `alternative`
  // (e.g. "--tensor-dir DIR"). INVALID_ARGUMENT naming the field if `path`
  // is not absolute or has a ".." component.
  absl::StatusOr<std::string> Confine(absl::string_view field, const std::string& path,
                                      absl::string_view alternative) const;

  // Creates the directory `real_path` (a result of Confine) and its missing
  // parents below the root that contains it, without following symbolic
  // links below that root: each component is made with mkdirat (mode 0777
  // less the umask: the training command may run as another user) and
  // opened with O_NOFOLLOW relative to the previous one. The root itself is
  // created (following links) if missing. Errors: FAILED_PRECONDITION
  // naming the component if it is a symbolic link or not a directory, the
  // errno code naming the path otherwise; INVALID_ARGUMENT if `real_path`
  // is inside no root.
  absl::Status CreateDirectories(const std::string& real_path) const;

  // "the working directory /srv/run, --allow-write /data/jobs" (real paths);
  // "none" if there are no roots.
  std::string DescribeRoots() const;

  const std::vector<WritableRoot>& roots() const { return roots_; }

 private:
  explicit WriteConfinement(std::vector<WritableRoot> roots) : roots_(std::move(roots)) {}

  // The deepest root containing `real_path`, or nullptr.
  const WritableRoot* RootOf(const std::string& real_path) const;

  std::vector<WritableRoot> roots_;  // Real paths.
};

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_AGENT_WRITE_CONFINEMENT_H_
