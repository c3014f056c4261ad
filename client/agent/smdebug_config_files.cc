#include "client/agent/smdebug_config_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/agent/write_fully.h"
#include "nlohmann/json.hpp"

namespace debugplane::client {
namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr char kLocalPath[] = "LocalPath";
constexpr char kProfilerEnabled[] = "ProfilerEnabled";
constexpr char kIntervalKey[] = "ProfilingIntervalInMilliseconds";

// smdebug converts these with int()/float(); a JSON number saves it the
// string round trip and is what SageMaker itself writes.
constexpr const char* kNumericParameters[] = {
    "RotateMaxFileSizeInBytes",
    "RotateFileCloseIntervalInSeconds",
    "FileOpenFailThreshold",
};

bool IsNumericParameter(const std::string& key) {
  return std::any_of(std::begin(kNumericParameters), std::end(kNumericParameters),
                     [&](const char* name) { return key == name; });
}

// A number for `text` (integer if it is one), or nullopt-like null.
OrderedJson ParseNumber(const std::string& text) {
  int64_t integer = 0;
  if (absl::SimpleAtoi(text, &integer)) return integer;
  double real = 0;
  if (absl::SimpleAtod(text, &real) && std::isfinite(real)) return real;
  return nullptr;
}

// Protobuf maps iterate in unspecified order; sorting keeps the file
// byte-identical across runs (and diffable when it is rewritten).
template <typename Map>
std::map<std::string, std::string> Sorted(const Map& map) {
  return std::map<std::string, std::string>(map.begin(), map.end());
}

OrderedJson StringObject(const std::map<std::string, std::string>& map) {
  OrderedJson object = OrderedJson::object();
  for (const auto& [key, value] : map) object[key] = value;
  return object;
}

std::string Dump(const OrderedJson& json) {
  // `replace` rather than throwing: invalid UTF-8 cannot come through proto3
  // strings, and a config file must never abort the agent.
  return json.dump(2, ' ', false, OrderedJson::error_handler_t::replace) + "\n";
}

// Closes `fd` on scope exit unless released.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  // Closes now; returns close(2)'s errno (0 on success).
  int Close() {
    int fd = std::exchange(fd_, -1);
    return close(fd) == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// FNV-1a, 64 bits: stable across runs and builds (unlike std::hash or
// absl::Hash), which is what lets a later run find the same alias.
uint64_t Fnv1a64(absl::string_view text) {
  uint64_t hash = 14695981039346656037ULL;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return hash;
}

// `dir` made absolute and normal, without a trailing '/' (a symlink to
// "/a/b/" and one to "/a/b" are the same alias).
absl::StatusOr<std::filesystem::path> AbsoluteDirectory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(dir, ec).lexically_normal();
  if (ec) {
    return absl::ErrnoToStatus(ec.value(),
                               absl::StrCat("cannot make the directory ", dir, " absolute"));
  }
  if (!absolute.has_filename() && absolute.has_parent_path() && absolute != absolute.root_path()) {
    absolute = absolute.parent_path();
  }
  return absolute;
}

}  // namespace

bool SurvivesLowerCasing(absl::string_view path) {
  return std::all_of(path.begin(), path.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x80 && !(byte >= 'A' && byte <= 'Z');
  });
}

std::string LowerCaseAliasRoot(const std::string& temp_dir) {
  const std::filesystem::path below = std::filesystem::path("debugplane-agent") / "smdebug-paths";
  if (!temp_dir.empty() && temp_dir.front() == '/') {
    std::string root = (std::filesystem::path(temp_dir) / below).lexically_normal().string();
    if (SurvivesLowerCasing(root)) return root;
  }
  return (std::filesystem::path("/tmp") / below).string();
}

absl::StatusOr<std::string> LowerCaseAlias(const std::string& real_dir,
                                           const std::string& alias_root) {
  if (real_dir.empty()) {
    return absl::InvalidArgumentError("LowerCaseAlias: the profiler output directory is empty");
  }
  if (alias_root.empty() || alias_root.front() != '/' || !SurvivesLowerCasing(alias_root)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the alias directory \"", alias_root,
                     "\" must be an absolute path that lower-casing leaves unchanged"));
  }
  if (SurvivesLowerCasing(real_dir)) return real_dir;
  absl::StatusOr<std::filesystem::path> target = AbsoluteDirectory(real_dir);
  if (!target.ok()) return target.status();
  std::error_code ec;
  if (!std::filesystem::create_directories(*target, ec) && ec) {
    return absl::ErrnoToStatus(
        ec.value(), absl::StrCat("cannot create the profiler output directory ", target->string()));
  }
  if (!std::filesystem::create_directories(alias_root, ec) && ec) {
    return absl::ErrnoToStatus(
        ec.value(), absl::StrCat("cannot create the directory of lower-case aliases ", alias_root));
  }
  const std::string alias =
      (std::filesystem::path(alias_root) / absl::StrFormat("%016x", Fnv1a64(target->string())))
          .string();
  // The common case after the first run: the alias is there already.
  if (std::filesystem::read_symlink(alias, ec) == *target && !ec) return alias;

  // A fresh symlink renamed over the name: whoever resolves the alias
  // meanwhile finds the old link or the new one, never none, and agents
  // racing here each leave a correct link.
  static std::atomic<uint64_t> attempt{0};
  const std::string temp = absl::StrCat(alias, ".tmp.", getpid(), ".", attempt++);
  unlink(temp.c_str());  // Left by a crashed agent that had our pid.
  auto failure = [&](int error) {
    return absl::ErrnoToStatus(error, absl::StrCat("cannot create the lower-case alias ", alias,
                                                   " -> ", target->string()));
  };
  if (symlink(target->c_str(), temp.c_str()) != 0) return failure(errno);
  if (rename(temp.c_str(), alias.c_str()) != 0) {
    const int error = errno;
    unlink(temp.c_str());
    return failure(error);
  }
  return alias;
}

std::string DebugHookConfigJson(const v1::DebugHookConfig& config, const std::string& local_path) {
  OrderedJson json = OrderedJson::object();
  json[kLocalPath] = local_path.empty() ? config.local_path() : local_path;
  json["HookParameters"] = StringObject(Sorted(config.hook_parameters()));
  OrderedJson collections = OrderedJson::array();
  for (const v1::CollectionConfiguration& collection : config.collection_configurations()) {
    OrderedJson entry = OrderedJson::object();
    entry["CollectionName"] = collection.collection_name();
    entry["CollectionParameters"] = StringObject(Sorted(collection.collection_parameters()));
    collections.push_back(std::move(entry));
  }
  json["CollectionConfigurations"] = std::move(collections);
  return Dump(json);
}

std::string ProfilerConfigJson(const v1::ProfilerConfig& config, bool profiler_enabled,
                               const std::string& local_path) {
  OrderedJson parameters = OrderedJson::object();
  if (!profiler_enabled || config.disable_profiler()) {
    parameters[kProfilerEnabled] = false;
    return Dump(OrderedJson{{"ProfilingParameters", std::move(parameters)}});
  }
  const std::map<std::string, std::string> api = Sorted(config.profiling_parameters());
  parameters[kProfilerEnabled] = true;
  if (!local_path.empty()) {
    parameters[kLocalPath] = local_path;
  } else if (auto it = api.find(kLocalPath); it != api.end()) {
    parameters[kLocalPath] = it->second;
  }
  OrderedJson interval = kDefaultProfilingIntervalMillis;
  if (config.has_profiling_interval_in_milliseconds()) {
    interval = config.profiling_interval_in_milliseconds();
  } else if (auto it = api.find(kIntervalKey); it != api.end()) {
    if (OrderedJson parsed = ParseNumber(it->second); !parsed.is_null()) interval = parsed;
  }
  parameters[kIntervalKey] = interval;
  for (const auto& [key, value] : api) {
    if (key == kProfilerEnabled || key == kLocalPath || key == kIntervalKey) continue;
    if (IsNumericParameter(key)) {
      OrderedJson number = ParseNumber(value);
      parameters[key] = number.is_null() ? OrderedJson(value) : number;
    } else {
      parameters[key] = value;
    }
  }
  return Dump(OrderedJson{{"ProfilingParameters", std::move(parameters)}});
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  if (path.empty()) return absl::InvalidArgumentError("WriteFileAtomically: empty path");
  const std::filesystem::path target(path);
  std::filesystem::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  if (std::error_code ec; !std::filesystem::create_directories(dir, ec) && ec) {
    return absl::ErrnoToStatus(
        ec.value(), absl::StrCat("cannot create directory ", dir.string(), " for ", path));
  }

  // Same directory as the target: rename(2) is only atomic within one file
  // system, and a reader must see either the old or the new inode.
  std::string temp = (dir / absl::StrCat(".", target.filename().string(), ".tmp.XXXXXX")).string();
  int fd = mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot create temporary file for ", path, " in ", dir.string()));
  }
  FdCloser closer(fd);
  auto fail = [&](int error, absl::string_view what) {
    unlink(temp.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat(what, " ", temp, " (for ", path, ")"));
  };
  // mkostemp creates 0600; the training process may run as another user.
  if (fchmod(fd, 0644) != 0) return fail(errno, "cannot chmod");
  if (int error = WriteFully(fd, contents); error != 0) return fail(error, "cannot write");
  // Data before rename: otherwise a crash can leave `path` naming an empty
  // file (delayed allocation), the one outcome a reader must never see.
  if (fsync(fd) != 0) return fail(errno, "cannot fsync");
  if (int error = closer.Close(); error != 0) return fail(error, "cannot close");
  if (rename(temp.c_str(), path.c_str()) != 0) {
    int error = errno;
    unlink(temp.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat("cannot rename ", temp, " to ", path));
  }
  // The rename itself is only durable once the directory is synced.
  int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot open directory ", dir.string(), " to sync ", path));
  }
  FdCloser dir_closer(dir_fd);
  if (fsync(dir_fd) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot fsync directory ", dir.string(), " after writing ", path));
  }
  return absl::OkStatus();
}

}  // namespace debugplane::client
