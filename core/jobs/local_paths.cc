#include "core/jobs/local_paths.h"

#include <iterator>
#include <string>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/jobs/validation_text.h"

namespace debugplane::core {
namespace {

namespace fs = std::filesystem;

std::string Quote(absl::string_view value) { return QuoteForMessage(value, 80); }

}  // namespace

bool IsWithin(const fs::path& path, const fs::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    // A trailing separator of a root shows up as an empty last component.
    if (r->empty() && std::next(r) == root.end()) return true;
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

fs::path WithoutTrailingSeparator(fs::path path) {
  if (path.has_relative_path() && !path.has_filename()) path = path.parent_path();
  return path;
}

bool IsWithinAnyRoot(const fs::path& path, const std::vector<fs::path>& roots) {
  for (const fs::path& root : roots) {
    if (IsWithin(path, root)) return true;
  }
  return false;
}

std::optional<size_t> InnermostRoot(const fs::path& path, const std::vector<fs::path>& roots) {
  std::optional<size_t> innermost;
  for (size_t i = 0; i < roots.size(); ++i) {
    if (!IsWithin(path, roots[i])) continue;
    if (!innermost.has_value() ||
        std::distance(roots[i].begin(), roots[i].end()) >
            std::distance(roots[*innermost].begin(), roots[*innermost].end())) {
      innermost = i;
    }
  }
  return innermost;
}

bool HasParentComponent(const fs::path& path) {
  for (const fs::path& component : path) {
    if (component == "..") return true;
  }
  return false;
}

std::vector<fs::path> NormalRoots(const std::vector<fs::path>& data_roots) {
  std::vector<fs::path> roots;
  roots.reserve(data_roots.size());
  for (const fs::path& root : data_roots) {
    if (root.is_absolute()) roots.push_back(WithoutTrailingSeparator(root.lexically_normal()));
  }
  return roots;
}

absl::StatusOr<fs::path> ResolveExistingPrefix(const fs::path& path) {
  fs::path resolved = path.root_path();
  auto it = path.begin();
  ++it;  // The root "/".
  for (; it != path.end(); ++it) {
    if (it->empty()) continue;  // A trailing separator.
    const fs::path candidate = resolved / *it;
    std::error_code error;
    const fs::file_status status = fs::symlink_status(candidate, error);
    if (error || !fs::exists(status)) {
      if (error && error != std::errc::no_such_file_or_directory &&
          error != std::errc::not_a_directory) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot check ", Quote(candidate.string()), ": ", error.message()));
      }
      // Nothing exists from here on: the remaining components are new.
      for (; it != path.end(); ++it) {
        if (!it->empty()) resolved /= *it;
      }
      return resolved;
    }
    if (fs::is_symlink(status)) {
      fs::path target = fs::canonical(candidate, error);
      if (error) {
        return absl::InvalidArgumentError(
            absl::StrCat(Quote(candidate.string()), " is a symlink that cannot be resolved (",
                         error.message(), "); dangling or looping symlinks are refused"));
      }
      resolved = std::move(target);
    } else {
      resolved = candidate;
    }
  }
  return resolved;
}

}  // namespace debugplane::core
