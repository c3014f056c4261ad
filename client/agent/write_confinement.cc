#include "client/agent/write_confinement.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/unique_fd.h"

namespace debugplane::client {
namespace {

namespace fs = std::filesystem;

absl::Status ErrnoError(int error, absl::string_view what, absl::string_view path) {
  return absl::ErrnoToStatus(error, absl::StrCat(what, " ", path, ": ", std::strerror(error)));
}

// The components of `path` without empty ones and ".". Sets `has_dotdot`.
std::vector<std::string> Components(absl::string_view path, bool& has_dotdot) {
  std::vector<std::string> components;
  has_dotdot = false;
  for (absl::string_view component : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (component == ".") continue;
    if (component == "..") has_dotdot = true;
    components.emplace_back(component);
  }
  return components;
}

std::string JoinAbsolute(const std::vector<std::string>& components, size_t count) {
  std::string path;
  for (size_t i = 0; i < count; ++i) absl::StrAppend(&path, "/", components[i]);
  return path.empty() ? "/" : path;
}

// `path` written with single slashes and without "." components.
std::string Normalized(const std::string& path) {
  bool has_dotdot = false;
  const std::vector<std::string> components = Components(path, has_dotdot);
  return JoinAbsolute(components, components.size());
}

bool IsInside(const std::string& real_path, const std::string& root) {
  if (root == "/") return true;
  return real_path == root ||
         (real_path.size() > root.size() && real_path.compare(0, root.size(), root) == 0 &&
          real_path[root.size()] == '/');
}

}  // namespace

absl::StatusOr<std::string> ResolveExistingPrefix(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("an empty path");
  std::string absolute = path;
  if (path[0] != '/') {
    std::error_code error;
    const fs::path cwd = fs::current_path(error);
    if (error) return absl::InternalError(absl::StrCat("no working directory: ", error.message()));
    absolute = (cwd / path).string();
  }
  bool has_dotdot = false;
  const std::vector<std::string> components = Components(absolute, has_dotdot);
  if (has_dotdot) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": '..' is not allowed (give the path without it)"));
  }
  // The longest prefix that exists (lstat: a last component that is a
  // symbolic link counts, even when it leads nowhere).
  size_t existing = 0;
  while (existing < components.size()) {
    const std::string prefix = JoinAbsolute(components, existing + 1);
    struct stat info;
    if (lstat(prefix.c_str(), &info) == 0) {
      ++existing;
      continue;
    }
    if (errno == ENOENT) break;
    return ErrnoError(errno, "cannot look at", prefix);
  }
  const std::string prefix = JoinAbsolute(components, existing);
  char real[PATH_MAX];
  if (realpath(prefix.c_str(), real) == nullptr) {
    if (errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat(prefix,
                       " is, or passes through, a symbolic link to a path that does not "
                       "exist"));
    }
    return ErrnoError(errno, "cannot resolve", prefix);
  }
  std::string resolved = real;
  for (size_t i = existing; i < components.size(); ++i) {
    if (resolved != "/") resolved += "/";
    resolved += components[i];
  }
  return resolved;
}

absl::StatusOr<WriteConfinement> WriteConfinement::Create(const std::vector<WritableRoot>& roots) {
  std::vector<WritableRoot> resolved_roots;
  for (const WritableRoot& root : roots) {
    absl::StatusOr<std::string> real = ResolveExistingPrefix(root.path);
    if (!real.ok()) {
      return absl::Status(real.status().code(),
                          absl::StrCat(root.origin, " ", root.path, ": ", real.status().message()));
    }
    resolved_roots.push_back({*std::move(real), root.origin});
  }
  return WriteConfinement(std::move(resolved_roots));
}

const WritableRoot* WriteConfinement::RootOf(const std::string& real_path) const {
  const WritableRoot* deepest = nullptr;
  for (const WritableRoot& root : roots_) {
    if (IsInside(real_path, root.path) &&
        (deepest == nullptr || root.path.size() > deepest->path.size())) {
      deepest = &root;
    }
  }
  return deepest;
}

std::string WriteConfinement::DescribeRoots() const {
  if (roots_.empty()) return "none";
  std::vector<std::string> described;
  for (const WritableRoot& root : roots_) {
    described.push_back(absl::StrCat(root.origin, " ", root.path));
  }
  return absl::StrJoin(described, ", ");
}

absl::StatusOr<std::string> WriteConfinement::Confine(absl::string_view field,
                                                      const std::string& path,
                                                      absl::string_view alternative) const {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " \"", path, "\" is not an absolute path"));
  }
  absl::StatusOr<std::string> real = ResolveExistingPrefix(path);
  if (!real.ok()) {
    return absl::Status(real.status().code(),
                        absl::StrCat(field, " ", path, ": ", real.status().message()));
  }
  if (RootOf(*real) != nullptr) return real;
  const std::string where =
      *real == Normalized(path)
          ? absl::StrCat(field, " ", path, " is outside")
          : absl::StrCat(field, " ", path, " leads through a symbolic link to ", *real,
                         ", outside");
  const std::string allowed =
      roots_.empty() ? "every directory this agent may write: it was given none"
                     : absl::StrCat("the directories this agent may write (", DescribeRoots(), ")");
  return absl::PermissionDeniedError(absl::StrCat(
      where, " ", allowed, "; allow it with --allow-write ", path, ", or give ", alternative));
}

absl::Status WriteConfinement::CreateDirectories(const std::string& real_path) const {
  const WritableRoot* root = RootOf(real_path);
  if (root == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(real_path, " is outside the directories this agent may write"));
  }
  std::error_code error;
  fs::create_directories(root->path, error);
  if (error) {
    return absl::Status(
        absl::ErrnoToStatus(error.value(), "").code(),
        absl::StrCat("cannot create ", root->origin, " ", root->path, ": ", error.message()));
  }
  base::UniqueFd dir(open(root->path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return ErrnoError(errno, "cannot open", root->path);
  std::string made = root->path;
  const std::string below = root->path == "/" ? real_path : real_path.substr(root->path.size());
  for (absl::string_view component : absl::StrSplit(below, '/', absl::SkipEmpty())) {
    const std::string name(component);
    made = made == "/" ? "/" + name : absl::StrCat(made, "/", name);
    if (mkdirat(dir.get(), name.c_str(), 0777) != 0 && errno != EEXIST) {
      return ErrnoError(errno, "cannot create the directory", made);
    }
    const int next = openat(dir.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat info;
    if (next < 0 || fstat(next, &info) != 0 || !S_ISDIR(info.st_mode)) {
      if (next >= 0) close(next);
      const bool link = fstatat(dir.get(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 &&
                        S_ISLNK(info.st_mode);
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot create ", real_path, ": ", made,
          link ? " is a symbolic link (not followed below " : " is not a directory (below ",
          root->origin, " ", root->path, ")"));
    }
    dir.reset(next);
  }
  return absl::OkStatus();
}

}  // namespace debugplane::client
