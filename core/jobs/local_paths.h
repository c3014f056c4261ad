// Local paths below data roots: the lexical path arithmetic output paths
// need, and the one walk of the file system they need (the symlinks on the
// way to a path that may not exist yet). output_path.h's rules are built
// from these; nothing else in core/jobs touches the file system for them.
//
// Every path here is absolute and lexically normal unless said otherwise.
// Thread-safe: pure functions, but ResolveExistingPrefix reads the file
// system, which may change under it (callers confine later reads through
// objectstore::LocalObjectStore).

#ifndef DEBUGPLANE_CORE_JOBS_LOCAL_PATHS_H_
#define DEBUGPLANE_CORE_JOBS_LOCAL_PATHS_H_

#include <cstddef>
#include <filesystem>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"

namespace debugplane::core {

// True if `path` is `root` or below it, comparing whole components: /data2 is
// not inside /data.
bool IsWithin(const std::filesystem::path& path, const std::filesystem::path& root);

// True if `path` is within one of `roots`.
bool IsWithinAnyRoot(const std::filesystem::path& path,
                     const std::vector<std::filesystem::path>& roots);

// The index in `roots` of the innermost root `path` is within (the one with
// the most components when roots nest), or nullopt if none.
std::optional<size_t> InnermostRoot(const std::filesystem::path& path,
                                    const std::vector<std::filesystem::path>& roots);

// True if `path` (as given, any form) has a ".." component.
bool HasParentComponent(const std::filesystem::path& path);

// `path` without a trailing separator (other than the root "/"); any form.
std::filesystem::path WithoutTrailingSeparator(std::filesystem::path path);

// The absolute ones of `data_roots`, lexically normal without a trailing
// separator: they should already be canonical; normalizing them keeps a root
// given as "/data/" working. Relative roots are dropped.
std::vector<std::filesystem::path> NormalRoots(
    const std::vector<std::filesystem::path>& data_roots);

// `path` (without "..") with the symlinks of its longest existing prefix
// resolved; the rest is appended as is (the path need not exist yet).
// Unlike std::filesystem::weakly_canonical, a dangling or looping symlink is
// an error rather than the end of the existing prefix: writing through it
// would create its target, wherever that is. INVALID_ARGUMENT naming the
// component for that, and for a component that cannot be checked (EACCES).
absl::StatusOr<std::filesystem::path> ResolveExistingPrefix(const std::filesystem::path& path);

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_JOBS_LOCAL_PATHS_H_
