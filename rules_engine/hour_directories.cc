#include "rules_engine/hour_directories.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"

namespace debugplane::rules_engine {

namespace fs = std::filesystem;

std::vector<HourFile> ListHourFiles(const std::string& dir,
                                    absl::FunctionRef<bool(absl::string_view name)> accept) {
  std::vector<std::string> hours;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    std::error_code entry_error;
    if (it->is_directory(entry_error)) hours.push_back(it->path().filename().string());
  }
  std::sort(hours.begin(), hours.end());
  std::vector<HourFile> files;
  for (const std::string& hour : hours) {
    const size_t first = files.size();
    std::error_code hour_error;
    for (fs::directory_iterator it(fs::path(dir) / hour, hour_error), end; !hour_error && it != end;
         it.increment(hour_error)) {
      std::string name = it->path().filename().string();
      std::error_code entry_error;
      if (!accept(name) || !it->is_regular_file(entry_error)) continue;
      const uint64_t size = it->file_size(entry_error);
      HourFile file;
      file.relative = absl::StrCat(hour, "/", name);
      file.name = std::move(name);
      file.size = entry_error ? 0 : size;
      files.push_back(std::move(file));
    }
    std::sort(files.begin() + static_cast<std::ptrdiff_t>(first), files.end(),
              [](const HourFile& a, const HourFile& b) { return a.name < b.name; });
  }
  return files;
}

}  // namespace debugplane::rules_engine
