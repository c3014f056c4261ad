#include "core/output_path.h"

#include <cerrno>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/validation_text.h"

namespace debugplane::core {
namespace {

namespace fs = std::filesystem;

// The S3Uri shape's maximum length. It also bounds the work done on a local
// path (one lstat per component).
constexpr size_t kMaxOutputPathLength = 1024;

constexpr absl::string_view kAllowedForms =
    "use s3://bucket[/prefix], https://host/path, file:///absolute/path or /absolute/path";

std::string Quote(absl::string_view value) { return QuoteForMessage(value, 80); }

std::string RootList(const std::vector<fs::path>& roots) {
  return absl::StrJoin(roots, ", ",
                       [](std::string* out, const fs::path& p) { out->append(p.string()); });
}

// True if `path` is `root` or below it, comparing whole components: /data2 is
// not inside /data. Both must be lexically normal and absolute.
bool IsWithin(const fs::path& path, const fs::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    // A trailing separator of a root shows up as an empty last component.
    if (r->empty() && std::next(r) == root.end()) return true;
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

// `path` without a trailing separator (other than the root "/").
fs::path WithoutTrailingSeparator(fs::path path) {
  if (path.has_relative_path() && !path.has_filename()) path = path.parent_path();
  return path;
}

// Resolves symlinks in the longest existing prefix of `path` (absolute and
// lexically normal, without ".."); the rest is appended as is. Unlike
// std::filesystem::weakly_canonical, a dangling symlink is an error rather
// than the end of the existing prefix: writing through it would create its
// target, wherever that is.
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

absl::StatusOr<OutputLocation> ResolveLocalPath(absl::string_view original, absl::string_view raw,
                                                const std::vector<fs::path>& data_roots) {
  if (raw.empty() || raw.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(original),
                     " is a relative path; local output paths must be absolute "
                     "(/path or file:///path)"));
  }
  const fs::path given(std::string{raw});
  for (const fs::path& component : given) {
    if (component == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat(Quote(original), " has a '..' component; give the path without '..'"));
    }
  }
  const fs::path normal = WithoutTrailingSeparator(given.lexically_normal());

  if (data_roots.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(original),
                     " is a local path, but the server allows none (it has no data roots; "
                     "start it with --data-root DIR); use s3:// or https:// instead"));
  }
  // The roots should already be canonical; normalizing them here keeps a
  // root given as "/data/" working.
  std::vector<fs::path> roots;
  roots.reserve(data_roots.size());
  for (const fs::path& root : data_roots) {
    if (root.is_absolute()) roots.push_back(WithoutTrailingSeparator(root.lexically_normal()));
  }
  auto within_a_root = [&roots](const fs::path& p) {
    for (const fs::path& root : roots) {
      if (IsWithin(p, root)) return true;
    }
    return false;
  };
  if (!within_a_root(normal)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(original),
                     " is outside the server's data roots; local output paths "
                     "must be inside one of: ",
                     RootList(roots)));
  }
  absl::StatusOr<fs::path> real = ResolveExistingPrefix(normal);
  if (!real.ok()) return real.status();
  if (!within_a_root(*real)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Quote(original), " leads through a symlink to ", Quote(real->string()),
        ", which is outside the server's data roots; local output paths must resolve inside "
        "one of: ",
        RootList(roots)));
  }
  return OutputLocation{.kind = OutputLocation::Kind::kLocal, .location = normal.string()};
}

}  // namespace

absl::StatusOr<OutputLocation> ResolveOutputPath(absl::string_view uri,
                                                 const std::vector<fs::path>& data_roots) {
  if (uri.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("is empty; ", kAllowedForms));
  }
  const size_t length = CharCount(uri);
  if (length > kMaxOutputPathLength) {
    return absl::InvalidArgumentError(absl::StrCat("is ", length, " characters long; at most ",
                                                   kMaxOutputPathLength, " are allowed"));
  }
  // NUL would silently truncate a path at the OS boundary; other control
  // characters have no place in an object key or file name we write.
  for (const char c : uri) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quote(uri), " contains a control character (byte 0x",
                       absl::Hex(byte, absl::kZeroPad2), "); output paths must be printable"));
    }
  }

  for (const absl::string_view scheme : {"s3://", "https://"}) {
    if (!absl::StartsWith(uri, scheme)) continue;
    const absl::string_view rest = uri.substr(scheme.size());
    const absl::string_view host = rest.substr(0, rest.find('/'));
    if (host.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quote(uri), scheme == "s3://" ? " names no bucket; use s3://bucket[/prefix]"
                                                     : " names no host; use https://host/path"));
    }
    return OutputLocation{.kind = OutputLocation::Kind::kObjectStore, .location = std::string(uri)};
  }
  if (absl::StartsWith(uri, "file://")) {
    const absl::string_view path = uri.substr(7);
    if (path.empty() || path.front() != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          Quote(uri), " is not a local file URI; use file:///absolute/path (empty host)"));
    }
    return ResolveLocalPath(uri, path, data_roots);
  }
  if (uri.front() == '/') return ResolveLocalPath(uri, uri, data_roots);

  const size_t colon = uri.find("://");
  if (colon != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(Quote(uri), " has the unsupported scheme '",
                                                   EscapeForMessage(uri.substr(0, colon)), "'; ",
                                                   kAllowedForms));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(Quote(uri), " is a relative path or not a URI; ", kAllowedForms));
}

}  // namespace debugplane::core
