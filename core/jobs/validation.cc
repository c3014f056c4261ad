// Request validation: the sections of a CreateTrainingJob request and the
// CreateTrainingJob, UpdateTrainingJob and ListTrainingJobs validators. The
// field checks are in validation_checks.h, the rule configurations' in
// rule_validation.h, the warnings in validation_warnings.cc.

#include "core/jobs/validation.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "core/jobs/profiling_parameters.h"
#include "core/jobs/rule_validation.h"
#include "core/jobs/validation_checks.h"
#include "core/jobs/validation_text.h"
#include "google/protobuf/timestamp.pb.h"

namespace debugplane::core {

using validation_internal::CheckDirectoryPath;
using validation_internal::CheckEnum;
using validation_internal::CheckInputUri;
using validation_internal::CheckLength;
using validation_internal::CheckListSize;
using validation_internal::CheckMap;
using validation_internal::CheckNameCharacters;
using validation_internal::CheckNoNul;
using validation_internal::CheckOutputPath;
using validation_internal::CheckRange;
using validation_internal::CheckRequestStart;
using validation_internal::CheckRuleList;
using validation_internal::CheckString;
using validation_internal::CheckTrainingJobName;
using validation_internal::EntryField;
using validation_internal::Indexed;
using validation_internal::JoinInts;
using validation_internal::kConfigMap20;
using validation_internal::NameIndex;
using validation_internal::Quote;
using validation_internal::Violations;

namespace {

// ProfilerConfig and ProfilerConfigForUpdate share these members.
template <typename Config>
void CheckProfilerSettings(Violations& v, const Config& config, const ValidationOptions& options) {
  CheckOutputPath(v, "ProfilerConfig.S3OutputPath", config.s3_output_path(), /*required=*/false,
                  options);
  if (config.has_profiling_interval_in_milliseconds()) {
    const int64_t interval = config.profiling_interval_in_milliseconds();
    if (std::find(std::begin(kProfilingIntervalsMs), std::end(kProfilingIntervalsMs), interval) ==
        std::end(kProfilingIntervalsMs)) {
      v.Add(
          "ProfilerConfig.ProfilingIntervalInMilliseconds",
          absl::StrCat(interval, " is not allowed; use one of ", JoinInts(kProfilingIntervalsMs)));
    }
  }
  CheckMap(v, "ProfilerConfig.ProfilingParameters", config.profiling_parameters(), kConfigMap20);
  for (const auto& [key, value] : config.profiling_parameters()) {
    // An over-long value is refused by CheckMap and never parsed.
    if (CharCount(value) > kConfigMap20.value_max) continue;
    if (absl::Status checked = CheckProfilingParameter(key, value); !checked.ok()) {
      v.Add(EntryField("ProfilerConfig.ProfilingParameters", key), std::string(checked.message()));
    }
  }
}

void CheckAlgorithmSpecification(Violations& v, const v1::AlgorithmSpecification& spec) {
  const std::string f = "AlgorithmSpecification";
  CheckEnum(v, f + ".TrainingInputMode", spec.training_input_mode(), {"Pipe", "File", "FastFile"});
  CheckLength(v, f + ".TrainingImage", spec.training_image(), 0, 255);
  CheckLength(v, f + ".AlgorithmName", spec.algorithm_name(), 0, 170);
  CheckNameCharacters(v, f + ".AlgorithmName", spec.algorithm_name());
  CheckListSize(v, f + ".MetricDefinitions", spec.metric_definitions_size(), 40,
                "metric definitions");
  for (int i = 0; i < spec.metric_definitions_size(); ++i) {
    const std::string field = Indexed(f + ".MetricDefinitions", i);
    CheckLength(v, field + ".Name", spec.metric_definitions(i).name(), 1, 255);
    CheckNameCharacters(v, field + ".Name", spec.metric_definitions(i).name());
    CheckLength(v, field + ".Regex", spec.metric_definitions(i).regex(), 1, 500);
  }
  CheckListSize(v, f + ".ContainerEntrypoint", spec.container_entrypoint_size(), 100, "entries");
  for (int i = 0; i < spec.container_entrypoint_size(); ++i) {
    CheckLength(v, Indexed(f + ".ContainerEntrypoint", i), spec.container_entrypoint(i), 0, 256);
  }
  CheckListSize(v, f + ".ContainerArguments", spec.container_arguments_size(), 100, "arguments");
  for (int i = 0; i < spec.container_arguments_size(); ++i) {
    CheckLength(v, Indexed(f + ".ContainerArguments", i), spec.container_arguments(i), 0, 256);
  }
}

void CheckS3DataSource(Violations& v, const std::string& field, const v1::S3DataSource& s3) {
  CheckEnum(v, field + ".S3DataType", s3.s3_data_type(),
            {"ManifestFile", "S3Prefix", "AugmentedManifestFile", "Converse"});
  CheckInputUri(v, field + ".S3Uri", s3.s3_uri());
  if (!s3.s3_data_distribution_type().empty()) {
    CheckEnum(v, field + ".S3DataDistributionType", s3.s3_data_distribution_type(),
              {"FullyReplicated", "ShardedByS3Key"});
  }
  CheckListSize(v, field + ".AttributeNames", s3.attribute_names_size(), 16, "attribute names");
  for (int j = 0; j < s3.attribute_names_size(); ++j) {
    CheckLength(v, Indexed(field + ".AttributeNames", j), s3.attribute_names(j), 1, 256);
  }
}

void CheckFileSystemDataSource(Violations& v, const std::string& field,
                               const v1::FileSystemDataSource& fsx) {
  CheckString(v, field + ".FileSystemId", fsx.file_system_id(), 11, 21, "FileSystemId",
              "fs-[0-9a-f]{8,}");
  CheckEnum(v, field + ".FileSystemAccessMode", fsx.file_system_access_mode(), {"rw", "ro"});
  CheckEnum(v, field + ".FileSystemType", fsx.file_system_type(), {"EFS", "FSxLustre"});
  if (CheckLength(v, field + ".DirectoryPath", fsx.directory_path(), 1, 4096)) {
    CheckNoNul(v, field + ".DirectoryPath", fsx.directory_path());
  }
}

// One channel's members other than its name (unique names are the list's).
void CheckChannel(Violations& v, const std::string& f, const v1::Channel& channel) {
  if (!channel.content_type().empty())
    CheckLength(v, f + ".ContentType", channel.content_type(), 0, 256);
  if (!channel.compression_type().empty()) {
    CheckEnum(v, f + ".CompressionType", channel.compression_type(), {"None", "Gzip"});
  }
  if (!channel.record_wrapper_type().empty()) {
    CheckEnum(v, f + ".RecordWrapperType", channel.record_wrapper_type(), {"None", "RecordIO"});
  }
  if (!channel.input_mode().empty()) {
    CheckEnum(v, f + ".InputMode", channel.input_mode(), {"Pipe", "File", "FastFile"});
  }
  if (!channel.has_data_source()) {
    v.Add(f + ".DataSource", "is required: give S3DataSource or FileSystemDataSource");
    return;
  }
  const v1::DataSource& source = channel.data_source();
  const std::string sf = f + ".DataSource";
  if (!source.has_s3_data_source() && !source.has_file_system_data_source()) {
    v.Add(sf, "is empty; give S3DataSource or FileSystemDataSource");
  }
  if (source.has_s3_data_source()) {
    CheckS3DataSource(v, sf + ".S3DataSource", source.s3_data_source());
  }
  if (source.has_file_system_data_source()) {
    CheckFileSystemDataSource(v, sf + ".FileSystemDataSource", source.file_system_data_source());
  }
}

void CheckChannels(Violations& v, const google::protobuf::RepeatedPtrField<v1::Channel>& channels) {
  // Empty means absent (proto3), so only the upper bound of 1-20 applies.
  CheckListSize(v, "InputDataConfig", channels.size(), 20, "channels");
  absl::flat_hash_map<absl::string_view, int> names;
  for (int i = 0; i < channels.size(); ++i) {
    const v1::Channel& channel = channels[i];
    const std::string f = Indexed("InputDataConfig", i);
    CheckString(v, f + ".ChannelName", channel.channel_name(), 1, 64, "ChannelName",
                "[A-Za-z0-9.-_]+");
    if (!channel.channel_name().empty()) {
      auto [it, inserted] = names.try_emplace(channel.channel_name(), i);
      if (!inserted) {
        v.Add(
            f + ".ChannelName",
            absl::StrCat(Quote(channel.channel_name()), " is already the name of ",
                         Indexed("InputDataConfig", it->second), "; channel names must be unique"));
      }
    }
    CheckChannel(v, f, channel);
  }
}

void CheckOutputDataConfig(Violations& v, const v1::OutputDataConfig& output,
                           const ValidationOptions& options) {
  CheckOutputPath(v, "OutputDataConfig.S3OutputPath", output.s3_output_path(),
                  /*required=*/true, options);
  CheckString(v, "OutputDataConfig.KmsKeyId", output.kms_key_id(), 0, 2048, "KmsKeyId",
              "[a-zA-Z0-9:/_-]*");
  if (!output.compression_type().empty()) {
    CheckEnum(v, "OutputDataConfig.CompressionType", output.compression_type(), {"GZIP", "NONE"});
  }
}

void CheckCheckpointConfig(Violations& v, const v1::CheckpointConfig& config,
                           const ValidationOptions& options) {
  CheckOutputPath(v, "CheckpointConfig.S3Uri", config.s3_uri(), /*required=*/true, options);
  CheckDirectoryPath(v, "CheckpointConfig.LocalPath", config.local_path());
}

void CheckTensorBoardOutputConfig(Violations& v, const v1::TensorBoardOutputConfig& config,
                                  const ValidationOptions& options) {
  CheckOutputPath(v, "TensorBoardOutputConfig.S3OutputPath", config.s3_output_path(),
                  /*required=*/true, options);
  CheckDirectoryPath(v, "TensorBoardOutputConfig.LocalPath", config.local_path());
}

void CheckRetryStrategy(Violations& v, const v1::RetryStrategy& strategy) {
  CheckRange(v, "RetryStrategy.MaximumRetryAttempts", strategy.maximum_retry_attempts(), 1, 30);
}

void CheckResourceConfig(Violations& v, const v1::ResourceConfig& config) {
  if (!config.instance_type().empty()) {
    CheckString(v, "ResourceConfig.InstanceType", config.instance_type(), 1, 64, "InstanceType",
                "ml.<family>.<size>, e.g. ml.p3.2xlarge");
  }
  if (config.instance_count() < 0) {
    v.Add("ResourceConfig.InstanceCount",
          absl::StrCat(config.instance_count(), " is negative; use 0 or more"));
  }
  if (config.volume_size_in_gb() < 0) {
    v.Add("ResourceConfig.VolumeSizeInGB",
          absl::StrCat(config.volume_size_in_gb(), " is negative; use 0 or more"));
  }
  CheckString(v, "ResourceConfig.VolumeKmsKeyId", config.volume_kms_key_id(), 0, 2048, "KmsKeyId",
              "[a-zA-Z0-9:/_-]*");
  if (config.has_keep_alive_period_in_seconds()) {
    CheckRange(v, "ResourceConfig.KeepAlivePeriodInSeconds", config.keep_alive_period_in_seconds(),
               0, 21600, " seconds");
  }
}

void CheckStoppingCondition(Violations& v, const v1::StoppingCondition& condition) {
  if (condition.has_max_runtime_in_seconds() && condition.max_runtime_in_seconds() < 1) {
    v.Add("StoppingCondition.MaxRuntimeInSeconds",
          absl::StrCat(condition.max_runtime_in_seconds(), " is not allowed; use 1 or more"));
  }
  if (condition.has_max_wait_time_in_seconds()) {
    if (condition.max_wait_time_in_seconds() < 1) {
      v.Add("StoppingCondition.MaxWaitTimeInSeconds",
            absl::StrCat(condition.max_wait_time_in_seconds(), " is not allowed; use 1 or more"));
    } else if (condition.has_max_runtime_in_seconds() &&
               condition.max_wait_time_in_seconds() < condition.max_runtime_in_seconds()) {
      v.Add("StoppingCondition.MaxWaitTimeInSeconds",
            absl::StrCat(condition.max_wait_time_in_seconds(),
                         " is less than MaxRuntimeInSeconds (", condition.max_runtime_in_seconds(),
                         "); the wait time includes the run time, so use at least that"));
    }
  }
  if (condition.has_max_pending_time_in_seconds()) {
    CheckRange(v, "StoppingCondition.MaxPendingTimeInSeconds",
               condition.max_pending_time_in_seconds(), 7200, 2419200,
               " seconds (2 hours to 28 days)");
  }
}

void CheckTags(Violations& v, const google::protobuf::RepeatedPtrField<v1::Tag>& tags) {
  CheckListSize(v, "Tags", tags.size(), 50, "tags");
  constexpr absl::string_view kTagPattern =
      "[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]* (letters, digits, spaces and _.:/=+-@)";
  absl::flat_hash_map<absl::string_view, int> keys;
  for (int i = 0; i < tags.size(); ++i) {
    const std::string f = Indexed("Tags", i);
    CheckString(v, f + ".Key", tags[i].key(), 1, 128, "Tag", kTagPattern);
    CheckString(v, f + ".Value", tags[i].value(), 0, 256, "Tag", kTagPattern);
    if (tags[i].key().empty()) continue;
    auto [it, inserted] = keys.try_emplace(tags[i].key(), i);
    if (!inserted) {
      v.Add(f + ".Key", absl::StrCat(Quote(tags[i].key()), " is already the key of ",
                                     Indexed("Tags", it->second), "; tag keys must be unique"));
    }
  }
}

void CheckDebugHookConfig(Violations& v, const v1::DebugHookConfig& hook,
                          const ValidationOptions& options) {
  const std::string f = "DebugHookConfig";
  CheckDirectoryPath(v, f + ".LocalPath", hook.local_path());
  CheckOutputPath(v, f + ".S3OutputPath", hook.s3_output_path(), /*required=*/true, options);
  CheckMap(v, f + ".HookParameters", hook.hook_parameters(), kConfigMap20);
  CheckListSize(v, f + ".CollectionConfigurations", hook.collection_configurations_size(), 20,
                "collection configurations");
  absl::flat_hash_map<absl::string_view, int> names;
  for (int i = 0; i < hook.collection_configurations_size(); ++i) {
    const v1::CollectionConfiguration& collection = hook.collection_configurations(i);
    const std::string cf = Indexed(f + ".CollectionConfigurations", i);
    CheckLength(v, cf + ".CollectionName", collection.collection_name(), 1, 256);
    CheckNameCharacters(v, cf + ".CollectionName", collection.collection_name());
    CheckMap(v, cf + ".CollectionParameters", collection.collection_parameters(), kConfigMap20);
    if (collection.collection_name().empty()) continue;
    // Two configurations of one collection would leave which parameters
    // apply to the order the hook reads them in.
    auto [it, inserted] = names.try_emplace(collection.collection_name(), i);
    if (!inserted) {
      v.Add(cf + ".CollectionName",
            absl::StrCat(Quote(collection.collection_name()), " is already configured by ",
                         Indexed(f + ".CollectionConfigurations", it->second),
                         "; configure each collection once"));
    }
  }
}

void CheckVpcConfig(Violations& v, const v1::VpcConfig& vpc) {
  auto check_ids = [&](const std::string& field, const auto& ids, int max, absl::string_view what) {
    if (ids.empty()) {
      v.Add(field, absl::StrCat("is required with VpcConfig: 1-", max, " ", what));
    }
    CheckListSize(v, field, ids.size(), max, what);
    for (int i = 0; i < ids.size(); ++i) {
      CheckString(v, Indexed(field, i), ids[i], 1, 32, "VpcId", "[-0-9a-zA-Z]+");
    }
  };
  check_ids("VpcConfig.SecurityGroupIds", vpc.security_group_ids(), 5, "security group IDs");
  check_ids("VpcConfig.Subnets", vpc.subnets(), 16, "subnet IDs");
}

void CheckExperimentConfig(Violations& v, const v1::ExperimentConfig& config) {
  constexpr absl::string_view kText = "[a-zA-Z0-9](-*[a-zA-Z0-9]){0,119}";
  const std::pair<const char*, const std::string*> names[] = {
      {"ExperimentConfig.ExperimentName", &config.experiment_name()},
      {"ExperimentConfig.TrialName", &config.trial_name()},
      {"ExperimentConfig.TrialComponentDisplayName", &config.trial_component_display_name()},
      {"ExperimentConfig.RunName", &config.run_name()},
  };
  for (const auto& [field, value] : names) {
    if (!value->empty()) CheckString(v, field, *value, 1, 120, "ExperimentEntityName", kText);
  }
}

// A Timestamp inside the range google.protobuf.Timestamp documents.
bool CheckTimestamp(Violations& v, const std::string& field, const google::protobuf::Timestamp& t) {
  constexpr int64_t kMinSeconds = -62135596800;  // 0001-01-01T00:00:00Z
  constexpr int64_t kMaxSeconds = 253402300799;  // 9999-12-31T23:59:59Z
  if (t.seconds() < kMinSeconds || t.seconds() > kMaxSeconds || t.nanos() < 0 ||
      t.nanos() > 999999999) {
    v.Add(field, absl::StrCat("seconds=", t.seconds(), " nanos=", t.nanos(),
                              " is not a valid time; use 0001-01-01 to 9999-12-31 UTC with "
                              "nanos 0-999999999"));
    return false;
  }
  return true;
}

absl::Time ToTime(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

void CheckTimeRange(Violations& v, absl::string_view name, bool has_after,
                    const google::protobuf::Timestamp& after, bool has_before,
                    const google::protobuf::Timestamp& before) {
  const std::string after_field = absl::StrCat(name, "After");
  const std::string before_field = absl::StrCat(name, "Before");
  bool valid = true;
  if (has_after) valid &= CheckTimestamp(v, after_field, after);
  if (has_before) valid &= CheckTimestamp(v, before_field, before);
  if (!valid || !has_after || !has_before) return;
  if (ToTime(after) >= ToTime(before)) {
    v.Add(after_field,
          absl::StrCat(absl::FormatTime(absl::RFC3339_full, ToTime(after), absl::UTCTimeZone()),
                       " is not before ", before_field, " (",
                       absl::FormatTime(absl::RFC3339_full, ToTime(before), absl::UTCTimeZone()),
                       "); the range would be empty: give ", after_field, " < ", before_field));
  }
}

}  // namespace

absl::Status ValidateTrainingJobName(absl::string_view name, absl::string_view field) {
  Violations v;
  CheckTrainingJobName(v, std::string(field), name);
  return v.ToStatus();
}

absl::Status ValidateCreateTrainingJobRequest(const v1::CreateTrainingJobRequest& request,
                                              const ValidationOptions& options) {
  Violations v;
  if (!CheckRequestStart(v, request, request.training_job_name())) return v.ToStatus();
  CheckString(v, "RoleArn", request.role_arn(), 20, 2048, "RoleArn",
              "arn:aws[a-z\\-]*:iam::\\d{12}:role/?[a-zA-Z_0-9+=,.@\\-_/]+, e.g. "
              "arn:aws:iam::111122223333:role/MyRole");
  if (request.has_algorithm_specification()) {
    CheckAlgorithmSpecification(v, request.algorithm_specification());
  }
  CheckMap(v, "HyperParameters", request.hyper_parameters(),
           {.max_entries = 100, .key_min = 0, .key_max = 256, .value_max = 2500});
  CheckChannels(v, request.input_data_config());

  if (!request.has_output_data_config()) {
    v.Add("OutputDataConfig", "is required: give OutputDataConfig.S3OutputPath");
  } else {
    CheckOutputDataConfig(v, request.output_data_config(), options);
  }
  if (request.has_resource_config()) CheckResourceConfig(v, request.resource_config());
  if (request.has_stopping_condition()) CheckStoppingCondition(v, request.stopping_condition());
  CheckTags(v, request.tags());
  CheckMap(v, "Environment", request.environment(),
           {.max_entries = 100,
            .key_min = 1,
            .key_max = 512,
            .value_max = 512,
            .key_pattern_name = "EnvironmentKey",
            .key_pattern_text = "[a-zA-Z_][a-zA-Z0-9_]*"});
  if (request.has_checkpoint_config()) CheckCheckpointConfig(v, request.checkpoint_config(), options);
  if (request.has_debug_hook_config())
    CheckDebugHookConfig(v, request.debug_hook_config(), options);

  const NameIndex debug_names =
      CheckRuleList(v, request.debug_rule_configurations(), options, nullptr);
  CheckRuleList(v, request.profiler_rule_configurations(), options, &debug_names);

  if (request.has_tensor_board_output_config()) {
    CheckTensorBoardOutputConfig(v, request.tensor_board_output_config(), options);
  }
  if (request.has_profiler_config()) CheckProfilerSettings(v, request.profiler_config(), options);
  if (request.has_vpc_config()) CheckVpcConfig(v, request.vpc_config());
  if (request.has_experiment_config()) CheckExperimentConfig(v, request.experiment_config());
  if (request.has_retry_strategy()) CheckRetryStrategy(v, request.retry_strategy());
  return v.ToStatus();
}

absl::Status ValidateUpdateTrainingJobRequest(const v1::UpdateTrainingJobRequest& request,
                                              const ValidationOptions& options) {
  Violations v;
  if (!CheckRequestStart(v, request, request.training_job_name())) return v.ToStatus();
  if (request.has_profiler_config()) {
    const v1::ProfilerConfigForUpdate& config = request.profiler_config();
    CheckProfilerSettings(v, config, options);
    if (config.has_disable_profiler() && config.disable_profiler()) {
      std::vector<absl::string_view> others;
      if (!config.s3_output_path().empty()) others.push_back("S3OutputPath");
      if (config.has_profiling_interval_in_milliseconds()) {
        others.push_back("ProfilingIntervalInMilliseconds");
      }
      if (!config.profiling_parameters().empty()) others.push_back("ProfilingParameters");
      // New profiler rules would evaluate metrics that stop being collected.
      if (!request.profiler_rule_configurations().empty()) {
        others.push_back("ProfilerRuleConfigurations");
      }
      if (!others.empty()) {
        v.Add("ProfilerConfig.DisableProfiler",
              absl::StrCat("true turns profiling off and cannot be combined with other "
                           "profiling changes (",
                           absl::StrJoin(others, ", "),
                           "); send DisableProfiler alone, or the changes without it"));
      }
    }
  }
  // Names must also differ from the job's existing rules; the job manager
  // checks that against the job.
  CheckRuleList(v, request.profiler_rule_configurations(), options, nullptr);
  return v.ToStatus();
}

absl::Status ValidateListTrainingJobsRequest(const v1::ListTrainingJobsRequest& request) {
  Violations v;
  if (request.has_max_results()) CheckRange(v, "MaxResults", request.max_results(), 1, 100);
  if (!request.name_contains().empty()) {
    CheckString(v, "NameContains", request.name_contains(), 1, 63, "NameContains",
                "[a-zA-Z0-9\\-]+ (letters, digits and hyphens)");
  }
  CheckTimeRange(v, "CreationTime", request.has_creation_time_after(),
                 request.creation_time_after(), request.has_creation_time_before(),
                 request.creation_time_before());
  CheckTimeRange(v, "LastModifiedTime", request.has_last_modified_time_after(),
                 request.last_modified_time_after(), request.has_last_modified_time_before(),
                 request.last_modified_time_before());
  CheckLength(v, "NextToken", request.next_token(), 0, 8192);
  if (!v1::TrainingJobStatus::Value_IsValid(request.status_equals())) {
    v.Add("StatusEquals", absl::StrCat(request.status_equals(),
                                       " is not a training job status; use InProgress, "
                                       "Completed, Failed, Stopping, Stopped or Deleting"));
  }
  if (!request.sort_by().empty()) {
    CheckEnum(v, "SortBy", request.sort_by(), {"Name", "CreationTime", "Status"});
  }
  if (!request.sort_order().empty()) {
    CheckEnum(v, "SortOrder", request.sort_order(), {"Ascending", "Descending"});
  }
  return v.ToStatus();
}
}  // namespace debugplane::core
