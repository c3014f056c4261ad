// libFuzzer target: CreateTrainingJob and UpdateTrainingJob validation
// (core/jobs/validation.h) with the built-in rules' parameter checks installed
// (rules_engine/scheduling/validation_hooks.h), as the server runs it.
//
// The input is not parsed as a protobuf: it is decoded into a request by
// walking the message descriptors, so every string, number, enum, list and
// map of the request can be reached, and a few bytes can ask for what a
// byte-level mutator would rarely produce: JSON nested up to 200,000 levels,
// regular expressions with thousands of nested groups and lookarounds,
// values up to 300,000 bytes, maps and lists of thousands of entries, rule
// names and parameter names the checks know, NUL bytes and invalid UTF-8.
//
// Checked beyond "no crash": the answer is OK or INVALID_ARGUMENT; a refusal
// lists at least one field violation, every description and field is valid
// UTF-8 (they go into google.rpc.BadRequest) and the report stays small
// (gRPC's 8 KiB of trailers); the shared regex cache stays within its
// bounds; warnings of a valid request are computed without failing.
//
// Build and run: scripts/fuzz.sh (all fuzzers, DP_FUZZ_SECONDS each), or
// after its build: build/fuzz/training_job_request_fuzzer -max_total_time=60
// -rss_limit_mb=2048 build/fuzz/corpus/training_job_request_fuzzer

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/jobs/field_violations.h"
#include "core/jobs/validation.h"
#include "debugplane/v1/training_job.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/profiler_rules/profiler_rules.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/scheduling/validation_hooks.h"
#include "rules_engine/smdebug/python_regex.h"

namespace {

using debugplane::v1::CreateTrainingJobRequest;
using debugplane::v1::UpdateTrainingJobRequest;
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// All the string bytes one input may produce: large enough for the
// 200,000-level JSON of the report, small enough for many runs a second.
constexpr size_t kMaxInputBytes = 4 << 20;
constexpr int kMaxMessageDepth = 6;

// Values the checks give meaning to; decoded strings often start from one.
const char* const kKnownValues[] = {
    "builtin",
    "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest",
    "s3://bucket/output",
    "file:///tmp/dp-fuzz-root/out",
    "/tmp/dp-fuzz-root/out",
    "/tmp/dp-fuzz-root/../etc",
    "job-1",
    "arn:aws:iam::111122223333:role/Test",
    "File",
    "ml.m5.xlarge",
    "True",
    "False",
    "None",
    "0",
    "-1",
    "1e308",
    "nan",
    "10.0",
    "['a', 'b']",
    "[",
    "a, b,,",
    "TRAIN",
    "EVAL",
    "weights",
    "losses",
    ".*relu_output",
    "^(?!gradient).*weight",
    "[Ll]oss_(?!input).*output",
    "(?<=x)y",
    "a(?!b)c|d",
    "{\"StartStep\": 5, \"NumSteps\": 3, }",
    "{\"StartTimeInSecSinceEpoch\": 1, \"DurationInSeconds\": 1}",
    "{\"ProfilerName\": \"cProfile\", \"cProfileTimer\": \"cpu\", \"StartStep\": 1}",
    "{\"MetricsRegex\": \".*\", \"StartStep\": 1}",
    "[{\"name\": \"stoptraining\", \"training_job_prefix\": \"job\"}]",
    "{\"name\": \"email\", \"endpoint\": \"a@example.com\"}",
    "{\"name\": \"sms\", \"endpoint\": \"+12223334444\"}",
};

const char* const kParameterNames[] = {
    "rule_to_invoke",
    "action_json",
    "tensor_regex",
    "collection_names",
    "labels_regex",
    "predictions_regex",
    "regex",
    "activation_inputs_regex",
    "threshold",
    "num_steps",
    "diff_percent",
    "mode",
    "only_nan",
    "other_trials",
    "use_losses_collection",
    "min_threshold",
    "max_threshold",
    "channel",
    "threshold_mean",
    "token_values",
    "token_thresholds_percent",
    "patience",
    "start_step",
    "end_step",
    "cpu_threshold",
    "threshold_p95",
    "scan_interval_us",
    "CPUBottleneck_threshold",
    "LowGPUUtilization_threshold_p95",
    "base_trial",
};

const char* const kProfilingKeys[] = {
    "DataloaderProfilingConfig", "DetailedProfilingConfig",          "PythonProfilingConfig",
    "HorovodProfilingConfig",    "SMDataParallelProfilingConfig",    "LocalPath",
    "RotateMaxFileSizeInBytes",  "RotateFileCloseIntervalInSeconds", "FileOpenFailThreshold",
};

// Decodes the fuzzer's bytes into request contents.
class Decoder {
 public:
  explicit Decoder(FuzzedDataProvider& in) : in_(in) {}

  void Fill(Message* message, int depth) {
    const Descriptor* type = message->GetDescriptor();
    const Reflection* reflection = message->GetReflection();
    for (int i = 0; i < type->field_count() && in_.remaining_bytes() > 0; ++i) {
      const FieldDescriptor* field = type->field(i);
      if (!in_.ConsumeBool()) continue;
      if (field->is_map()) {
        FillMap(message, field);
      } else if (field->is_repeated()) {
        const int count = Count();
        for (int n = 0; n < count && in_.remaining_bytes() > 0; ++n)
          AddElement(message, field, depth);
      } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        if (depth < kMaxMessageDepth) Fill(reflection->MutableMessage(message, field), depth + 1);
      } else {
        SetScalar(message, field);
      }
    }
  }

 private:
  // Mostly a few, sometimes thousands (validation caps lists and maps).
  int Count() {
    switch (in_.ConsumeIntegralInRange(0, 15)) {
      case 15:
        return in_.ConsumeIntegralInRange(0, 5000);
      case 14:
        return in_.ConsumeIntegralInRange(15, 60);
      default:
        return in_.ConsumeIntegralInRange(0, 3);
    }
  }

  // Reserves `bytes` of the per-input budget; false when it is spent.
  bool Spend(size_t bytes) {
    if (bytes > kMaxInputBytes - spent_) return false;
    spent_ += bytes;
    return true;
  }

  std::string Nested(int levels, absl::string_view open, absl::string_view close,
                     absl::string_view inner) {
    if (!Spend(static_cast<size_t>(levels) * (open.size() + close.size()))) return "[]";
    std::string text;
    text.reserve(levels * (open.size() + close.size()) + inner.size());
    for (int i = 0; i < levels; ++i) absl::StrAppend(&text, open);
    absl::StrAppend(&text, inner);
    for (int i = 0; i < levels; ++i) absl::StrAppend(&text, close);
    return text;
  }

  int Depth() {
    return in_.ConsumeBool() ? in_.ConsumeIntegralInRange(0, 300)
                             : in_.ConsumeIntegralInRange(0, 200000);
  }

  std::string String() {
    switch (in_.ConsumeIntegralInRange(0, 9)) {
      case 0: {  // Nested JSON arrays or objects, in a profiling config or not.
        const int levels = Depth();
        std::string nested =
            in_.ConsumeBool() ? Nested(levels, "[", "]", "1") : Nested(levels, "{\"a\":", "}", "1");
        return in_.ConsumeBool() ? absl::StrCat("{\"StartStep\": ", nested, "}") : nested;
      }
      case 1: {  // Nested groups, under a lookaround or not.
        static const char* const kPrefixes[] = {"", "(?=", "(?!", "^(?!", "x(?!", "(?<="};
        const char* prefix = kPrefixes[in_.ConsumeIntegralInRange<size_t>(0, 5)];
        std::string groups = Nested(Depth(), "(", ")", "a");
        return *prefix == '\0' ? groups : absl::StrCat(prefix, groups, ")b");
      }
      case 2: {  // Long.
        const size_t length = in_.ConsumeIntegralInRange<size_t>(0, 300000);
        if (!Spend(length)) return "";
        return std::string(length, static_cast<char>(in_.ConsumeIntegral<uint8_t>()));
      }
      case 3:
      case 4:
        return kKnownValues[in_.ConsumeIntegralInRange<size_t>(0, std::size(kKnownValues) - 1)];
      case 5:  // A known value with fuzzed bytes after it.
        return absl::StrCat(
            kKnownValues[in_.ConsumeIntegralInRange<size_t>(0, std::size(kKnownValues) - 1)],
            in_.ConsumeRandomLengthString(64));
      default:
        return in_.ConsumeRandomLengthString(300);
    }
  }

  std::string Key(const FieldDescriptor* map_field) {
    const std::string& name = map_field->name();
    if (in_.ConsumeIntegralInRange(0, 3) != 0) {
      if (name == "rule_parameters") {
        return kParameterNames[in_.ConsumeIntegralInRange<size_t>(0,
                                                                  std::size(kParameterNames) - 1)];
      }
      if (name == "profiling_parameters") {
        return kProfilingKeys[in_.ConsumeIntegralInRange<size_t>(0, std::size(kProfilingKeys) - 1)];
      }
    }
    return in_.ConsumeBool() ? in_.ConsumeRandomLengthString(40) : String();
  }

  // rule_to_invoke: a built-in name most of the time, so that the rules'
  // parameter checks run.
  std::string Value(const FieldDescriptor* map_field, const std::string& key) {
    if (key == "rule_to_invoke" && in_.ConsumeIntegralInRange(0, 3) != 0) {
      const std::vector<std::string>& names = RuleNames();
      return names[in_.ConsumeIntegralInRange<size_t>(0, names.size() - 1)];
    }
    return String();
  }

  static const std::vector<std::string>& RuleNames() {
    static const std::vector<std::string>* const names = [] {
      auto* all = new std::vector<std::string>(debugplane::rules_engine::BuiltinTensorRuleNames());
      for (const std::string& name : debugplane::rules_engine::ProfilerRuleNames()) {
        all->push_back(name);
      }
      all->push_back("ProfilerReport");
      return all;
    }();
    return *names;
  }

  void FillMap(Message* message, const FieldDescriptor* field) {
    const Reflection* reflection = message->GetReflection();
    const int count = Count();
    for (int n = 0; n < count && in_.remaining_bytes() > 0; ++n) {
      Message* entry = reflection->AddMessage(message, field);
      const Descriptor* entry_type = entry->GetDescriptor();
      const std::string key = Key(field);
      entry->GetReflection()->SetString(entry, entry_type->map_key(), key);
      const FieldDescriptor* value_field = entry_type->map_value();
      if (value_field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
        entry->GetReflection()->SetString(entry, value_field, Value(field, key));
      }
    }
  }

  void AddElement(Message* message, const FieldDescriptor* field, int depth) {
    const Reflection* reflection = message->GetReflection();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE: {
        Message* element = reflection->AddMessage(message, field);
        if (depth < kMaxMessageDepth) Fill(element, depth + 1);
        break;
      }
      case FieldDescriptor::CPPTYPE_STRING:
        reflection->AddString(message, field, String());
        break;
      default:
        break;  // No repeated scalars other than strings in these requests.
    }
  }

  void SetScalar(Message* message, const FieldDescriptor* field) {
    const Reflection* reflection = message->GetReflection();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        reflection->SetString(message, field, String());
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        reflection->SetBool(message, field, in_.ConsumeBool());
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        reflection->SetInt32(message, field, in_.ConsumeIntegral<int32_t>());
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        reflection->SetInt64(message, field, in_.ConsumeIntegral<int64_t>());
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        reflection->SetUInt32(message, field, in_.ConsumeIntegral<uint32_t>());
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        reflection->SetUInt64(message, field, in_.ConsumeIntegral<uint64_t>());
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        reflection->SetDouble(message, field, in_.ConsumeFloatingPoint<double>());
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        reflection->SetFloat(message, field, in_.ConsumeFloatingPoint<float>());
        break;
      case FieldDescriptor::CPPTYPE_ENUM:
        // Open enums: any number, as a client may send.
        reflection->SetEnumValue(message, field, in_.ConsumeIntegral<int32_t>());
        break;
      case FieldDescriptor::CPPTYPE_MESSAGE:
        break;
    }
  }

  FuzzedDataProvider& in_;
  size_t spent_ = 0;
};

bool IsValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t length = c < 0x80           ? 1
                    : (c >> 5) == 0x6  ? 2
                    : (c >> 4) == 0xE  ? 3
                    : (c >> 3) == 0x1E ? 4
                                       : 0;
    if (length == 0 || i + length > s.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

void CheckAnswer(const absl::Status& status) {
  if (status.ok()) return;
  if (status.code() != absl::StatusCode::kInvalidArgument) abort();
  const std::vector<debugplane::core::FieldViolation> violations =
      debugplane::core::FieldViolationsOf(status);
  if (violations.empty()) abort();
  size_t bytes = 0;
  for (const auto& violation : violations) {
    if (!IsValidUtf8(violation.field) || !IsValidUtf8(violation.description)) abort();
    bytes += violation.field.size() + violation.description.size();
  }
  // validation.h: about 1.8 KB of listed violations, plus the count line.
  if (bytes > 4096 || status.message().size() > 8192) abort();
}

const debugplane::core::ValidationOptions& Options() {
  static const debugplane::core::ValidationOptions* const options = [] {
    auto* o = new debugplane::core::ValidationOptions();
    o->data_roots = {"/tmp/dp-fuzz-root"};
    o->allowed_custom_evaluators = {"my-rule:latest"};
    debugplane::rules_engine::InstallRuleValidation(o);
    return o;
  }();
  return *options;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Decoder decoder(in);
  const debugplane::core::ValidationOptions& options = Options();
  if (in.ConsumeBool()) {
    CreateTrainingJobRequest request;
    decoder.Fill(&request, 0);
    const absl::Status status =
        debugplane::core::ValidateCreateTrainingJobRequest(request, options);
    CheckAnswer(status);
    if (status.ok()) (void)debugplane::core::CreateTrainingJobWarnings(request, options);
  } else {
    UpdateTrainingJobRequest request;
    decoder.Fill(&request, 0);
    CheckAnswer(debugplane::core::ValidateUpdateTrainingJobRequest(request, options));
  }
  const auto& cache = debugplane::rules_engine::RegexCache::Shared();
  if (cache.entries() > 256 || cache.pattern_bytes() > (256u << 10)) abort();
  return 0;
}
