#include "client/cli/output.h"

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "nlohmann/json.hpp"

namespace debugplane::client {
namespace {

using Json = nlohmann::ordered_json;
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::util::TimeUtil;

// The gRPC JSON mapping: json_names (SageMaker's PascalCase members), enum
// value names, fields at their default value left out. 64-bit integers are
// strings there and non-finite doubles "NaN"/"Infinity"/"-Infinity".
std::string ProtoJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  options.preserve_proto_field_names = false;  // json_name: SageMaker's names.
  options.always_print_enums_as_ints = false;
  std::string json;
  // Printing fails only for Any with unknown types, which these messages do
  // not contain; fall back to an empty object rather than printing garbage.
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return "{}";
  return json;
}

void FixMessage(const Descriptor& type, Json& object);

// "NaN" -> "nan", "Infinity" -> "inf", "-Infinity" -> "-inf": the spelling
// of C, Python and the rules' status details, always without a sign on nan.
void FixNonFinite(Json& value) {
  if (!value.is_string()) return;
  const std::string& text = value.get_ref<const std::string&>();
  if (text == "NaN") {
    value = "nan";
  } else if (text == "Infinity") {
    value = "inf";
  } else if (text == "-Infinity") {
    value = "-inf";
  }
}

// One value of `field` (an element, for repeated fields and map values).
void FixValue(const FieldDescriptor& field, Json& value) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT64:
      if (int64_t number = 0;
          value.is_string() && absl::SimpleAtoi(value.get_ref<const std::string&>(), &number)) {
        value = number;
      }
      return;
    case FieldDescriptor::CPPTYPE_UINT64:
      if (uint64_t number = 0;
          value.is_string() && absl::SimpleAtoi(value.get_ref<const std::string&>(), &number)) {
        value = number;
      }
      return;
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      FixNonFinite(value);
      return;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      FixMessage(*field.message_type(), value);
      return;
    default:
      return;
  }
}

// The field printed as `json_name` (this protobuf has no lookup by it).
const FieldDescriptor* FieldByJsonName(const Descriptor& type, const std::string& json_name) {
  for (int i = 0; i < type.field_count(); ++i) {
    if (type.field(i)->json_name() == json_name) return type.field(i);
  }
  return nullptr;
}

// Walks `object`, the JSON of a message of `type`, by its schema: only the
// schema tells a 64-bit integer ("500", to become 500) from a string that
// happens to hold digits (a RuleParameters value stays "500").
void FixMessage(const Descriptor& type, Json& object) {
  const std::string& name = type.full_name();
  if (name == "google.protobuf.Int64Value" || name == "google.protobuf.UInt64Value" ||
      name == "google.protobuf.DoubleValue" || name == "google.protobuf.FloatValue") {
    FixValue(*type.FindFieldByName("value"), object);  // Printed as the bare value.
    return;
  }
  // Their own JSON forms (RFC 3339 times, "1.5s", ...) are what readers
  // expect; a Struct's numbers are doubles already.
  if (name == "google.protobuf.Timestamp" || name == "google.protobuf.Duration" ||
      name == "google.protobuf.FieldMask" || name == "google.protobuf.Any" ||
      name == "google.protobuf.Struct" || name == "google.protobuf.Value" ||
      name == "google.protobuf.ListValue" || !object.is_object()) {
    return;
  }
  for (auto& member : object.items()) {
    const FieldDescriptor* field = FieldByJsonName(type, member.key());
    if (field == nullptr) continue;
    Json& value = member.value();
    if (field->is_map()) {
      for (auto& entry : value.items())
        FixValue(*field->message_type()->map_value(), entry.value());
    } else if (field->is_repeated()) {
      for (Json& element : value) FixValue(*field, element);
    } else {
      FixValue(*field, value);
    }
  }
}

// The gRPC JSON mapping with numbers as numbers, as SageMaker's own output
// and every JSON reader expect ("ProfilingIntervalInMilliseconds": 500).
Json CliJson(const google::protobuf::Message& message) {
  Json json = Json::parse(ProtoJson(message), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return Json::object();
  FixMessage(*message.GetDescriptor(), json);
  return json;
}

std::string Dump(const Json& json, int indent) {
  // Replace, not throw: printing what the server sent beats failing on it.
  return json.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace) + "\n";
}

std::string Time(const google::protobuf::Timestamp& time) { return TimeUtil::ToString(time); }

std::string JobStatus(v1::TrainingJobStatus::Value status) {
  return status == v1::TrainingJobStatus::TRAINING_JOB_STATUS_UNSPECIFIED
             ? "-"
             : v1::TrainingJobStatus::Value_Name(status);
}

std::string Secondary(v1::SecondaryStatus::Value status) {
  return status == v1::SecondaryStatus::SECONDARY_STATUS_UNSPECIFIED
             ? "-"
             : v1::SecondaryStatus::Value_Name(status);
}

std::string RuleStatus(v1::RuleEvaluationStatus::Value status) {
  return status == v1::RuleEvaluationStatus::RULE_EVALUATION_STATUS_UNSPECIFIED
             ? "-"
             : v1::RuleEvaluationStatus::Value_Name(status);
}

// Left-aligned columns separated by two spaces; the last column is not
// padded so lines carry no trailing blanks.
std::string Table(const std::vector<std::vector<std::string>>& rows,
                  absl::string_view indent = "") {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line(indent);
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

// "read 12 objects, 40960 bytes, to step 9": how far the rule's reader read.
std::string ReadProgressText(const v1::RuleReadProgress& read) {
  return absl::StrCat(
      "read ", read.objects_read(), read.objects_read() == 1 ? " object, " : " objects, ",
      read.bytes_read(), read.bytes_read() == 1 ? " byte" : " bytes",
      read.has_last_step_read() ? absl::StrCat(", to step ", read.last_step_read()) : "");
}

// One row per rule: name, status, read progress (a column only when some
// rule has one), details.
template <typename RuleStatuses>
void AppendRules(absl::string_view title, const RuleStatuses& statuses, std::string* out) {
  if (statuses.empty()) return;
  const bool any_read = std::any_of(statuses.begin(), statuses.end(),
                                    [](const auto& rule) { return rule.has_read_progress(); });
  std::vector<std::vector<std::string>> rows;
  for (const auto& rule : statuses) {
    std::vector<std::string>& row = rows.emplace_back();
    row.push_back(rule.rule_configuration_name());
    row.push_back(RuleStatus(rule.rule_evaluation_status()));
    if (any_read) {
      row.push_back(rule.has_read_progress() ? ReadProgressText(rule.read_progress()) : "");
    }
    row.push_back(rule.status_details());
  }
  absl::StrAppend(out, title, ":\n", Table(rows, "  "));
}

}  // namespace

std::string ToPrettyJson(const google::protobuf::Message& message) {
  return Dump(CliJson(message), /*indent=*/2);
}

std::string ToJsonLine(const google::protobuf::Message& message) {
  return Dump(CliJson(message), /*indent=*/-1);
}

std::string DescribeAsText(const v1::DescribeTrainingJobResponse& job) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"TrainingJobName:", job.training_job_name()});
  rows.push_back({"TrainingJobArn:", job.training_job_arn()});
  rows.push_back({"TrainingJobStatus:", absl::StrCat(JobStatus(job.training_job_status()), " (",
                                                     Secondary(job.secondary_status()), ")")});
  if (!job.failure_reason().empty()) rows.push_back({"FailureReason:", job.failure_reason()});
  if (job.has_creation_time()) rows.push_back({"CreationTime:", Time(job.creation_time())});
  if (job.has_training_start_time()) {
    rows.push_back({"TrainingStartTime:", Time(job.training_start_time())});
  }
  if (job.has_training_end_time()) {
    rows.push_back({"TrainingEndTime:", Time(job.training_end_time())});
  }
  if (job.has_last_modified_time()) {
    rows.push_back({"LastModifiedTime:", Time(job.last_modified_time())});
  }
  if (job.profiling_status() != v1::ProfilingStatus::PROFILING_STATUS_UNSPECIFIED) {
    std::string profiling = v1::ProfilingStatus::Value_Name(job.profiling_status());
    if (job.profiler_config().has_profiling_interval_in_milliseconds()) {
      absl::StrAppend(&profiling, ", every ",
                      job.profiler_config().profiling_interval_in_milliseconds(), " ms");
    }
    rows.push_back({"ProfilingStatus:", profiling});
  }
  rows.push_back({"ConfigVersion:", absl::StrCat(job.config_version())});
  if (job.has_progress_info()) {
    const auto& progress = job.progress_info();
    std::vector<std::string> parts;
    if (progress.has_current_epoch()) {
      parts.push_back(absl::StrCat(
          "epoch ", progress.current_epoch(),
          progress.has_max_epoch() ? absl::StrCat("/", progress.max_epoch()) : std::string()));
    }
    if (progress.has_current_step()) {
      parts.push_back(absl::StrCat("step ", progress.current_step()));
    }
    if (!parts.empty()) rows.push_back({"ProgressInfo:", absl::StrJoin(parts, ", ")});
  }
  std::string out = Table(rows);
  AppendRules("DebugRuleEvaluationStatuses", job.debug_rule_evaluation_statuses(), &out);
  AppendRules("ProfilerRuleEvaluationStatuses", job.profiler_rule_evaluation_statuses(), &out);
  return out;
}

std::string ListAsText(const v1::ListTrainingJobsResponse& page) {
  std::vector<std::vector<std::string>> rows = {{"NAME", "STATUS", "SECONDARY", "CREATED"}};
  for (const auto& job : page.training_job_summaries()) {
    rows.push_back({job.training_job_name(), JobStatus(job.training_job_status()),
                    Secondary(job.secondary_status()),
                    job.has_creation_time() ? Time(job.creation_time()) : "-"});
  }
  std::string out = Table(rows);
  if (!page.next_token().empty()) {
    absl::StrAppend(&out, "(more: --next-token ", page.next_token(), ", or --all)\n");
  }
  return out;
}

std::string WatchEventAsText(const v1::WatchTrainingJobResponse& event) {
  std::string out = absl::StrCat(
      event.has_event_time() ? Time(event.event_time()) : "-", "  ", event.training_job_name(),
      "  ", JobStatus(event.training_job_status()), "/", Secondary(event.secondary_status()));
  std::vector<std::string> changes;
  for (const auto& change : event.changes()) {
    if (change.kind() == v1::StatusChange::KIND_INITIAL_STATE) {
      changes.push_back("initial state");
      continue;
    }
    std::string text;
    if (!change.rule_configuration_name().empty()) {
      absl::StrAppend(&text, change.rule_configuration_name(), ": ");
    }
    if (!change.from().empty() || !change.to().empty()) {
      absl::StrAppend(&text, change.from().empty() ? "-" : change.from(), " -> ", change.to());
    } else if (change.kind() == v1::StatusChange::KIND_CONFIGURATION) {
      absl::StrAppend(&text, "configuration v", event.config_version());
    } else if (change.kind() == v1::StatusChange::KIND_PROGRESS) {
      absl::StrAppend(&text, "progress");
    }
    if (!change.details().empty()) absl::StrAppend(&text, " (", change.details(), ")");
    if (!text.empty()) changes.push_back(std::move(text));
  }
  if (!changes.empty()) absl::StrAppend(&out, "  ", absl::StrJoin(changes, "; "));
  return out + "\n";
}

namespace {

std::string ModeName(v1::TensorMode::Value mode) {
  return mode == v1::TensorMode::TENSOR_MODE_UNSPECIFIED ? "-" : v1::TensorMode::Value_Name(mode);
}

std::string Number(double value) { return absl::StrFormat("%.6g", value); }

}  // namespace

std::string TensorsAsText(const v1::ListTensorsResponse& listing) {
  std::vector<std::vector<std::string>> rows = {{"NAME", "COLLECTIONS", "MODES", "STEPS", "SHAPE"}};
  for (const auto& tensor : listing.tensors()) {
    std::vector<std::string> modes;
    int64_t first = -1, last = -1;
    for (const auto& m : tensor.modes()) {
      modes.push_back(absl::StrCat(ModeName(m.mode()), ":", m.step_count()));
      first = first < 0 ? m.first_step() : std::min(first, m.first_step());
      last = std::max(last, m.last_step());
    }
    const std::string shape =
        tensor.histogram()       ? "histogram"
        : tensor.dtype().empty() ? "-"
                                 : absl::StrCat(tensor.dtype(), "[",
                                                absl::StrJoin(tensor.shape(), ","), "]");
    rows.push_back({tensor.tensor_name(),
                    tensor.collections().empty() ? "-" : absl::StrJoin(tensor.collections(), ","),
                    absl::StrJoin(modes, " "), absl::StrCat(first, "..", last), shape});
  }
  std::string out = Table(rows);
  absl::StrAppend(&out, listing.tensors_size(), " tensors, ", listing.step_count(), " steps (last ",
                  listing.last_step(), ")", listing.training_ended() ? ", training ended" : "",
                  " in ", listing.trial_path(), "\n");
  if (listing.truncated()) {
    absl::StrAppend(&out, "(stopped at the server's bound after step ", listing.last_step(),
                    "; later steps are not counted)\n");
  }
  return out;
}

std::string TensorPointAsText(const v1::TensorPoint& point) {
  std::string steps = point.step_count() > 1 ? absl::StrCat(point.step(), "-", point.last_step(),
                                                            " (", point.step_count(), " steps)")
                                             : absl::StrCat(point.step());
  std::string line = absl::StrCat(steps, "  ", ModeName(point.mode()));
  if (point.has_value()) {
    absl::StrAppend(&line, "  ", Number(point.value()));
    if (point.step_count() > 1 && point.has_min() && point.has_max()) {
      absl::StrAppend(&line, "  min=", Number(point.min()), " max=", Number(point.max()));
    }
  } else if (point.has_mean()) {
    // A histogram gives only the statistics that are finite.
    absl::StrAppend(&line, "  mean=", Number(point.mean()));
    if (point.has_norm()) absl::StrAppend(&line, " norm=", Number(point.norm()));
    if (point.has_min()) absl::StrAppend(&line, " min=", Number(point.min()));
    if (point.has_max()) absl::StrAppend(&line, " max=", Number(point.max()));
  } else {
    absl::StrAppend(&line, "  (no finite values)");
  }
  if (point.non_finite_count() > 0) {
    absl::StrAppend(&line, "  non-finite=", point.non_finite_count());
  }
  if (point.bucket_counts_size() > 0) {
    absl::StrAppend(&line, "  buckets=", point.bucket_counts_size());
  }
  return absl::StrCat(line, "\n");
}

}  // namespace debugplane::client
