// Test helper: writes an smdebug trial directory in the on-disk format of
// docs/smdebug-format.md (collections, index, TFRecord event
// files with real CRCs, training_job_end.ts), for reader and rule tests.
//
//   TrialWriter w(dir);
//   w.AddStep(0, Mode::kTrain, 0, {{"CrossEntropyLoss_output_0", {}, {0.69}},
//                                  {"gradient/fc1.weight", {2, 2}, {1, 2, 3, 4}}});
//   w.EndTraining();
//
// Values are written as FLOAT tensor_content. I/O failures are reported as
// gtest failures (ADD_FAILURE), so call sites need no status handling.

#ifndef DEBUGPLANE_TESTS_RULES_ENGINE_TRIAL_WRITER_H_
#define DEBUGPLANE_TESTS_RULES_ENGINE_TRIAL_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "rules_engine/smdebug/step.h"

namespace debugplane::rules_engine::testing {

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // {} for a scalar.
  std::vector<double> values;  // C order; must have the shape's element count.
  // Non-empty: a STRING tensor (string_val) of these, `values` unused (the
  // XGBoost hook's "hyperparameters/objective").
  std::vector<std::string> strings = {};
};

class TrialWriter {
 public:
  // Writes into `dir` (created if missing) as worker `worker` of
  // `num_workers`. The collections file is written on the first AddStep,
  // with smdebug's built-in collections (losses, weights, biases, gradients,
  // relu_output) plus those added with AddCollection.
  explicit TrialWriter(std::string dir, std::string worker = "worker_0", int num_workers = 1);

  void AddCollection(const std::string& name, std::vector<std::string> include_regex,
                     std::vector<std::string> tensor_names = {});
  // Footer form of the records written from now on: masked_crc32c(payload)
  // (default) or smdebug's masked_crc32c("0x12345678").
  void UsePlaceholderFooter(bool on) { placeholder_footer_ = on; }

  // Writes events/<step>/<step>_<worker>.tfevents and then its index file.
  void AddStep(int64_t global_step, Mode mode, int64_t mode_step,
               const std::vector<TensorSpec>& tensors);
  // Writes training_job_end.ts.
  void EndTraining();

  // Paths of the files AddStep writes, for tests that damage them.
  std::string EventFile(int64_t global_step) const;
  std::string IndexFile(int64_t global_step) const;
  const std::string& dir() const { return dir_; }

  // The Event payload (not framed) holding one FLOAT (or STRING) tensor, with smdebug's
  // mode/mode_step plugin metadata.
  static std::string EncodeTensorEvent(int64_t global_step, Mode mode, int64_t mode_step,
                                       const TensorSpec& tensor);

 private:
  void WriteCollections();

  std::string dir_;
  std::string worker_;
  int num_workers_;
  bool placeholder_footer_ = false;
  bool collections_written_ = false;
  struct CollectionSpec {
    std::string name;
    std::vector<std::string> include_regex;
    std::vector<std::string> tensor_names;
  };
  std::vector<CollectionSpec> collections_;
};

// Writes `data` to `path` (creating parent directories); false on failure.
bool WriteFile(const std::string& path, const std::string& data);

// A fresh empty directory under the test temp dir, named after `name` and
// this process (removed first if a previous run left it).
std::string FreshTempDir(const std::string& name);

}  // namespace debugplane::rules_engine::testing

#endif  // DEBUGPLANE_TESTS_RULES_ENGINE_TRIAL_WRITER_H_
