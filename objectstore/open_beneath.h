// OpenBeneath: opens a relative path below a directory without following a
// symbolic link on any component, so that a directory swapped for a link
// (to /etc, to another job's output) after it was listed cannot lead a
// reader outside. The agent's uploader (objectstore/directory_uploader.h)
// reads the training's output this way; LocalObjectStore confines the
// server's reads the same way (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
// where the kernel has it, else a walk with O_NOFOLLOW per component).

#ifndef DEBUGPLANE_OBJECTSTORE_OPEN_BENEATH_H_
#define DEBUGPLANE_OBJECTSTORE_OPEN_BENEATH_H_

#include <string>

#include "base/unique_fd.h"

namespace debugplane::objectstore {

// Opens `relative` ("a/b/c": no leading '/', no empty, "." or ".."
// component) beneath the directory `root_fd` with `flags` (O_NOFOLLOW and
// O_CLOEXEC are added). On failure returns an invalid descriptor with errno
// set: ELOOP when a component is a symbolic link, EXDEV when the path would
// leave `root_fd` (openat2 only), ENOTDIR when a component on the way is
// not a directory, EINVAL for a path that is not such a relative path, and
// the errors of openat otherwise.
base::UniqueFd OpenBeneath(int root_fd, const std::string& relative, int flags);

}  // namespace debugplane::objectstore

#endif  // DEBUGPLANE_OBJECTSTORE_OPEN_BENEATH_H_
