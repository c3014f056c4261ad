#include "tests/rules_engine/trial_writer.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "rules_engine/smdebug/smdebug_event.pb.h"
#include "rules_engine/smdebug/tfrecord.h"

namespace debugplane::rules_engine::testing {

std::string FreshTempDir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat(name, "_", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

bool WriteFile(const std::string& path, const std::string& data) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  f.close();
  return f.good();
}

TrialWriter::TrialWriter(std::string dir, std::string worker, int num_workers)
    : dir_(std::move(dir)), worker_(std::move(worker)), num_workers_(num_workers) {
  // smdebug's built-in collections, with its patterns.
  collections_ = {
      {"losses", {"[Ll]oss_(?!input).*output"}, {}},  {"weights", {"^(?!gradient).*weight"}, {}},
      {"biases", {"^(?!gradient).*bias"}, {}},        {"gradients", {"^gradient"}, {}},
      {"relu_output", {".*relu[0-9]+_output_0"}, {}}, {"default", {}, {}},
  };
}

void TrialWriter::AddCollection(const std::string& name, std::vector<std::string> include_regex,
                                std::vector<std::string> tensor_names) {
  collections_.push_back({name, std::move(include_regex), std::move(tensor_names)});
  if (collections_written_) WriteCollections();
}

void TrialWriter::WriteCollections() {
  nlohmann::json collections = nlohmann::json::object();
  for (const CollectionSpec& c : collections_) {
    collections[c.name] = {{"name", c.name},
                           {"include_regex", c.include_regex},
                           {"tensor_names", c.tensor_names},
                           {"reduction_config", {{"save_raw_tensor", true}}}};
  }
  nlohmann::json j = {{"collections", collections}, {"_meta", {{"num_workers", num_workers_}}}};
  const std::string path =
      absl::StrCat(dir_, "/collections/000000000/", worker_, "_collections.json");
  if (!WriteFile(path, j.dump())) ADD_FAILURE() << "cannot write " << path;
  collections_written_ = true;
}

std::string TrialWriter::EventFile(int64_t step) const {
  return absl::StrFormat("%s/events/%012d/%012d_%s.tfevents", dir_, step, step, worker_);
}

std::string TrialWriter::IndexFile(int64_t step) const {
  return absl::StrFormat("%s/index/%09d/%012d_%s.json", dir_, step / 1000, step, worker_);
}

std::string TrialWriter::EncodeTensorEvent(int64_t global_step, Mode mode, int64_t mode_step,
                                           const TensorSpec& tensor) {
  smdebug::Event event;
  event.set_wall_time(1.7e9);
  event.set_step(global_step);
  smdebug::Summary::Value* value = event.mutable_summary()->add_value();
  value->set_tag(tensor.name);
  smdebug::TensorProto* proto = value->mutable_tensor();
  proto->set_dtype(tensor.strings.empty() ? smdebug::DT_FLOAT : smdebug::DT_STRING);
  for (int64_t d : tensor.shape) proto->mutable_tensor_shape()->add_dim()->set_size(d);
  for (const std::string& s : tensor.strings) proto->add_string_val(s);
  std::string content(tensor.values.size() * sizeof(float), '\0');
  for (size_t i = 0; i < tensor.values.size(); ++i) {
    const float f = static_cast<float>(tensor.values[i]);
    std::memcpy(content.data() + i * sizeof(float), &f, sizeof(float));
  }
  proto->set_tensor_content(content);
  auto* mode_plugin = value->mutable_metadata()->add_plugin_data();
  mode_plugin->set_plugin_name("mode");
  mode_plugin->set_content(absl::StrCat(static_cast<int>(mode)));
  auto* step_plugin = value->mutable_metadata()->add_plugin_data();
  step_plugin->set_plugin_name("mode_step");
  step_plugin->set_content(absl::StrCat(mode_step));
  return event.SerializeAsString();
}

void TrialWriter::AddStep(int64_t global_step, Mode mode, int64_t mode_step,
                          const std::vector<TensorSpec>& tensors) {
  if (!collections_written_) WriteCollections();
  std::string events;
  nlohmann::json payload = nlohmann::json::array();
  for (const TensorSpec& t : tensors) {
    const std::string record =
        EncodeTfRecord(EncodeTensorEvent(global_step, mode, mode_step, t), placeholder_footer_);
    payload.push_back(
        {{"tensorname", t.name}, {"start_idx", events.size()}, {"length", record.size()}});
    events += record;
  }
  const std::string event_rel =
      absl::StrFormat("events/%012d/%012d_%s.tfevents", global_step, global_step, worker_);
  // Event file first, then its index, as the smdebug hook does.
  if (!WriteFile(EventFile(global_step), events)) ADD_FAILURE() << "cannot write event file";
  nlohmann::json index = {{"meta",
                           {{"mode", std::string(ModeName(mode))},
                            {"mode_step", mode_step},
                            {"event_file_name", event_rel}}},
                          {"tensor_payload", payload},
                          {"shape_payload", nlohmann::json::array()}};
  if (!WriteFile(IndexFile(global_step), index.dump())) ADD_FAILURE() << "cannot write index";
}

void TrialWriter::EndTraining() {
  if (!collections_written_) WriteCollections();
  if (!WriteFile(dir_ + "/training_job_end.ts", "1700000000.0\n")) {
    ADD_FAILURE() << "cannot write training_job_end.ts";
  }
}

}  // namespace debugplane::rules_engine::testing
