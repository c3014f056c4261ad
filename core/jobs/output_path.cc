#include "core/jobs/output_path.h"

#include <iterator>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/jobs/local_paths.h"
#include "core/jobs/validation_text.h"
#include "objectstore/metered_object_store.h"

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

// The lexically normal form of the local path `raw` (of `original`), and
// the data root it lies in (the innermost one when roots nest); only the
// text is examined. INVALID_ARGUMENT as ResolveOutputPath says.
struct LexicalLocal {
  fs::path normal;
  size_t root_index = 0;  // Into the normalized roots.
};
absl::StatusOr<LexicalLocal> ResolveLocalLexically(absl::string_view original,
                                                   absl::string_view raw,
                                                   const std::vector<fs::path>& roots) {
  if (raw.empty() || raw.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(original),
                     " is a relative path; local output paths must be absolute "
                     "(/path or file:///path)"));
  }
  const fs::path given(std::string{raw});
  if (HasParentComponent(given)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(original), " has a '..' component; give the path without '..'"));
  }
  LexicalLocal result;
  result.normal = WithoutTrailingSeparator(given.lexically_normal());

  if (roots.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(original),
                     " is a local path, but the server allows none (it has no data roots; "
                     "start it with --data-root DIR); use s3:// or https:// instead"));
  }
  const std::optional<size_t> root = InnermostRoot(result.normal, roots);
  if (!root.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(original),
                     " is outside the server's data roots; local output paths "
                     "must be inside one of: ",
                     RootList(roots)));
  }
  result.root_index = *root;
  return result;
}

absl::StatusOr<OutputLocation> ResolveLocalPath(absl::string_view original, absl::string_view raw,
                                                const std::vector<fs::path>& data_roots) {
  const std::vector<fs::path> roots = NormalRoots(data_roots);
  absl::StatusOr<LexicalLocal> lexical = ResolveLocalLexically(original, raw, roots);
  if (!lexical.ok()) return lexical.status();
  absl::StatusOr<fs::path> real = ResolveExistingPrefix(lexical->normal);
  if (!real.ok()) return real.status();
  if (!IsWithinAnyRoot(*real, roots)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Quote(original), " leads through a symlink to ", Quote(real->string()),
        ", which is outside the server's data roots; local output paths must resolve inside "
        "one of: ",
        RootList(roots)));
  }
  return OutputLocation{.kind = OutputLocation::Kind::kLocal, .location = lexical->normal.string()};
}

// The checks every URI gets before its scheme is looked at: length and
// control characters.
absl::Status CheckUriText(absl::string_view uri) {
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
  return absl::OkStatus();
}

// Which form `uri` has, and for a local path its path text.
struct UriForm {
  bool object_store = false;
  absl::string_view local_path;  // For a local path: "/abs/path".
};
absl::StatusOr<UriForm> ClassifyUri(absl::string_view uri) {
  for (const absl::string_view scheme : {"s3://", "https://"}) {
    if (!absl::StartsWith(uri, scheme)) continue;
    const absl::string_view rest = uri.substr(scheme.size());
    const absl::string_view host = rest.substr(0, rest.find('/'));
    if (host.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quote(uri), scheme == "s3://" ? " names no bucket; use s3://bucket[/prefix]"
                                                     : " names no host; use https://host/path"));
    }
    return UriForm{.object_store = true};
  }
  if (absl::StartsWith(uri, "file://")) {
    const absl::string_view path = uri.substr(7);
    if (path.empty() || path.front() != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          Quote(uri), " is not a local file URI; use file:///absolute/path (empty host)"));
    }
    return UriForm{.local_path = path};
  }
  if (uri.front() == '/') return UriForm{.local_path = uri};

  const size_t colon = uri.find("://");
  if (colon != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(Quote(uri), " has the unsupported scheme '",
                                                   EscapeForMessage(uri.substr(0, colon)), "'; ",
                                                   kAllowedForms));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(Quote(uri), " is a relative path or not a URI; ", kAllowedForms));
}

}  // namespace

absl::StatusOr<OutputLocation> ResolveOutputPath(absl::string_view uri,
                                                 const std::vector<fs::path>& data_roots) {
  if (absl::Status text = CheckUriText(uri); !text.ok()) return text;
  absl::StatusOr<UriForm> form = ClassifyUri(uri);
  if (!form.ok()) return form.status();
  if (form->object_store) {
    return OutputLocation{.kind = OutputLocation::Kind::kObjectStore, .location = std::string(uri)};
  }
  return ResolveLocalPath(uri, form->local_path, data_roots);
}

DataRootStores::DataRootStores(std::vector<fs::path> data_roots,
                               objectstore::LocalObjectStore::Options options,
                               BucketStoreFactory bucket_stores,
                               metrics::ObjectStoreMetrics* metrics)
    : data_roots_(std::move(data_roots)),
      bucket_store_factory_(std::move(bucket_stores)),
      metrics_(metrics) {
  for (const fs::path& path : NormalRoots(data_roots_)) {
    Root root;
    root.path = path;
    absl::StatusOr<std::shared_ptr<objectstore::LocalObjectStore>> store =
        objectstore::LocalObjectStore::Open(path.string(), options);
    if (store.ok()) {
      root.store = *std::move(store);
      root.reader = objectstore::Metered(root.store, "local", metrics_);
    } else {
      root.open_error = store.status();
    }
    roots_.push_back(std::move(root));
  }
}

absl::StatusOr<objectstore::StoreLocation> DataRootStores::Resolve(absl::string_view uri) const {
  if (absl::Status text = CheckUriText(uri); !text.ok()) return text;
  absl::StatusOr<UriForm> form = ClassifyUri(uri);
  if (!form.ok()) return form.status();
  if (form->object_store) return ResolveObjectStore(uri);
  std::vector<fs::path> paths;
  paths.reserve(roots_.size());
  for (const Root& root : roots_) paths.push_back(root.path);
  absl::StatusOr<LexicalLocal> lexical = ResolveLocalLexically(uri, form->local_path, paths);
  if (!lexical.ok()) return lexical.status();
  const Root& root = roots_[lexical->root_index];
  if (root.store == nullptr) {
    return absl::Status(root.open_error.code(),
                        absl::StrCat("the data root ", root.path.string(),
                                     " cannot be read: ", root.open_error.message()));
  }
  const fs::path relative = lexical->normal.lexically_relative(root.path);
  std::string prefix = relative == "." ? "" : relative.generic_string();
  if (!prefix.empty()) {
    if (absl::Status key = objectstore::ValidateKey(prefix); !key.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          Quote(uri), " cannot be read as a path below its data root: ", key.message()));
    }
  }
  return objectstore::StoreLocation{root.reader, std::move(prefix)};
}

absl::StatusOr<objectstore::StoreLocation> DataRootStores::ResolveObjectStore(
    absl::string_view uri) const {
  absl::string_view rest = uri;
  if (!absl::ConsumePrefix(&rest, "s3://")) {
    return absl::UnimplementedError(absl::StrCat(
        Quote(uri), " is an https:// URL; this server reads object storage as s3://bucket/prefix"));
  }
  if (bucket_store_factory_ == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        Quote(uri), " is in object storage, which this server is not configured to read"));
  }
  const size_t slash = rest.find('/');
  const absl::string_view bucket = rest.substr(0, slash);
  absl::string_view prefix = slash == absl::string_view::npos ? "" : rest.substr(slash + 1);
  while (absl::ConsumeSuffix(&prefix, "/")) {
  }
  if (!prefix.empty()) {
    if (absl::Status key = objectstore::ValidateKey(prefix); !key.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quote(uri), " has a prefix that is not a valid key: ", key.message()));
    }
  }
  absl::StatusOr<std::shared_ptr<const objectstore::ObjectStore>> store = BucketStore(bucket);
  if (!store.ok()) return store.status();
  return objectstore::StoreLocation{*std::move(store), std::string(prefix)};
}

absl::StatusOr<std::shared_ptr<const objectstore::ObjectStore>> DataRootStores::BucketStore(
    absl::string_view bucket) const {
  {
    absl::MutexLock lock(&buckets_mutex_);
    if (auto found = buckets_.find(bucket); found != buckets_.end()) return found->second;
  }
  // Made outside the lock: the factory may read configuration files.
  absl::StatusOr<std::shared_ptr<const objectstore::ObjectStore>> made =
      bucket_store_factory_(bucket);
  if (!made.ok()) return made.status();
  absl::MutexLock lock(&buckets_mutex_);
  // Another thread may have made one meanwhile: every caller gets the first.
  return buckets_
      .emplace(std::string(bucket), objectstore::Metered(*std::move(made), "s3", metrics_))
      .first->second;
}

}  // namespace debugplane::core
