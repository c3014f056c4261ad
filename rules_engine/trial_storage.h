// Where trial files are read from. The local file system now; an object
// store (S3-compatible) later, without touching readers or rules.

#ifndef DEBUGPLANE_RULES_ENGINE_TRIAL_STORAGE_H_
#define DEBUGPLANE_RULES_ENGINE_TRIAL_STORAGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace debugplane::rules_engine {

class TrialStorage {
 public:
  virtual ~TrialStorage() = default;
  // Names (not paths) of the entries directly under `dir`, sorted.
  // NOT_FOUND if `dir` does not exist.
  virtual absl::StatusOr<std::vector<std::string>> List(const std::string& dir) = 0;
  // The whole file. NOT_FOUND if missing.
  virtual absl::StatusOr<std::string> Read(const std::string& path) = 0;
  // Bytes [offset, offset + length) of the file; fewer at its end.
  virtual absl::StatusOr<std::string> ReadRange(const std::string& path, uint64_t offset,
                                                uint64_t length) = 0;
  virtual bool Exists(const std::string& path) = 0;
};

// The local file system. Thread-safe.
std::shared_ptr<TrialStorage> LocalTrialStorage();

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_TRIAL_STORAGE_H_
