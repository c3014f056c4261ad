#include "rules_engine/profiler/hour_directories.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace debugplane::rules_engine {

absl::StatusOr<std::vector<HourFile>> ListHourFiles(
    const objectstore::StoreLocation& dir, absl::FunctionRef<bool(absl::string_view name)> accept) {
  const std::string dir_prefix = dir.DirectoryPrefix();
  absl::StatusOr<objectstore::ListResult> hours =
      dir.store->ListAll({.prefix = dir_prefix, .delimiter = "/"});
  if (!hours.ok()) return hours.status();
  std::vector<HourFile> files;
  for (const std::string& hour_prefix : hours->common_prefixes) {
    // "<dir>/<hour>/": the hour is what lies between.
    const absl::string_view hour =
        absl::string_view(hour_prefix)
            .substr(dir_prefix.size(), hour_prefix.size() - dir_prefix.size() - 1);
    absl::StatusOr<objectstore::ListResult> listed =
        dir.store->ListAll({.prefix = hour_prefix, .delimiter = "/"});
    if (absl::IsNotFound(listed.status())) continue;  // Removed meanwhile.
    if (!listed.ok()) return listed.status();
    // Listings are in key order: names sorted within the hour.
    for (objectstore::ObjectEntry& object : listed->objects) {
      absl::string_view name = absl::string_view(object.key).substr(hour_prefix.size());
      if (!accept(name)) continue;
      HourFile file;
      file.relative = absl::StrCat(hour, "/", name);
      file.name = std::string(name);
      file.size = object.size;
      file.key = std::move(object.key);
      files.push_back(std::move(file));
    }
  }
  return files;
}

std::optional<std::vector<HourFile>> HourFileListing::List(
    const objectstore::StoreLocation& dir, absl::string_view label,
    absl::FunctionRef<bool(absl::string_view name)> accept,
    absl::FunctionRef<void(std::string)> report) {
  absl::StatusOr<std::vector<HourFile>> files = ListHourFiles(dir, accept);
  if (!files.ok()) {
    directory_exists_ = !absl::IsNotFound(files.status());
    if (directory_exists_ && error_ != files.status().message()) {
      error_ = std::string(files.status().message());
      report(absl::StrCat(label, ": ", error_));
    }
    return std::nullopt;
  }
  directory_exists_ = true;
  error_.clear();
  return *std::move(files);
}

}  // namespace debugplane::rules_engine
