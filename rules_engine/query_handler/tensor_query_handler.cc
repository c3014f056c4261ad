#include "rules_engine/query_handler/tensor_query_handler.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/jobs/field_violations.h"
#include "core/jobs/job_record.h"
#include "core/jobs/validation.h"

namespace debugplane::rules_engine {
namespace {

// Job names an error lists.
constexpr int kJobsInErrors = 10;

v1::TensorMode::Value ToProto(Mode mode) { return static_cast<v1::TensorMode::Value>(mode); }

void ToProto(const SeriesPoint& point, v1::TensorPoint* out) {
  out->set_step(point.step);
  out->set_mode(ToProto(point.mode));
  out->set_mode_step(point.mode_step);
  out->set_last_step(point.last_step);
  out->set_step_count(point.step_count);
  if (point.value) out->set_value(*point.value);
  if (point.mean) out->set_mean(*point.mean);
  if (point.norm) out->set_norm(*point.norm);
  if (point.min) out->set_min(*point.min);
  if (point.max) out->set_max(*point.max);
  out->set_non_finite_count(point.non_finite);
  out->set_element_count(point.elements);
  out->set_worker(point.worker);
  for (const double limit : point.bucket_limits) out->add_bucket_limits(limit);
  for (const double count : point.bucket_counts) out->add_bucket_counts(count);
}

void ToProto(const TrialListing& listing, v1::ListTensorsResponse* out) {
  out->set_trial_path(listing.path);
  for (const TensorListing& tensor : listing.tensors) {
    v1::TensorSummary* summary = out->add_tensors();
    summary->set_tensor_name(tensor.name);
    for (const std::string& c : tensor.collections) summary->add_collections(c);
    for (const auto& [mode, steps] : tensor.modes) {
      v1::TensorModeSteps* m = summary->add_modes();
      m->set_mode(ToProto(mode));
      m->set_first_step(steps.first_step);
      m->set_last_step(steps.last_step);
      m->set_step_count(steps.step_count);
    }
    if (tensor.dtype != 0) {
      summary->set_dtype(DtypeName(tensor.dtype));
      for (const int64_t dim : tensor.shape) summary->add_shape(dim);
    }
    summary->set_histogram(tensor.histogram);
    summary->set_series_name(tensor.series);
  }
  for (const CollectionListing& collection : listing.collections) {
    v1::CollectionSummary* c = out->add_collections();
    c->set_collection_name(collection.name);
    for (const std::string& name : collection.tensor_names) c->add_tensor_names(name);
    for (const std::string& regex : collection.include_regex) c->add_include_regex(regex);
  }
  out->set_step_count(listing.step_count);
  out->set_last_step(listing.last_step);
  out->set_training_ended(listing.training_ended);
  for (const std::string& worker : listing.workers) out->add_workers(worker);
  out->set_truncated(listing.truncated);
}

// The query `request` asks for, or INVALID_ARGUMENT naming the field.
absl::StatusOr<SeriesQuery> ToSeriesQuery(const v1::GetTensorValuesRequest& request) {
  core::FieldViolations violations;
  if (request.tensor_name().empty()) {
    violations.Add("TensorName", "is required (ListTensors names the job's tensors)");
  }
  if (request.start_step() < 0) {
    violations.Add("StartStep", absl::StrCat(request.start_step(), " is negative"));
  }
  if (request.has_end_step() && request.end_step() < request.start_step()) {
    violations.Add("EndStep",
                   absl::StrCat(request.end_step(), " is before StartStep ", request.start_step()));
  }
  if (!v1::TensorMode::Value_IsValid(request.mode())) {
    violations.Add("Mode", absl::StrCat(request.mode(),
                                        " is not a mode; use TRAIN, EVAL, PREDICT or GLOBAL, or "
                                        "leave it unset for every mode"));
  }
  if (request.has_max_points() &&
      (request.max_points() < 1 || request.max_points() > kMaxMaxPoints)) {
    violations.Add("MaxPoints", absl::StrCat(request.max_points(), " is out of range 1..",
                                             kMaxMaxPoints, " (default ", kDefaultMaxPoints, ")"));
  }
  if (absl::Status status = violations.ToStatus(); !status.ok()) return status;
  SeriesQuery query;
  query.tensor = request.tensor_name();
  query.start_step = request.start_step();
  if (request.has_end_step()) query.end_step = request.end_step();
  if (request.mode() != v1::TensorMode::TENSOR_MODE_UNSPECIFIED) {
    query.mode = static_cast<Mode>(request.mode());
  }
  query.max_points = request.has_max_points() ? request.max_points() : kDefaultMaxPoints;
  query.worker = request.worker();
  return query;
}

// The messages of a series: points in batches, the series' facts on the
// first message and the truncation on the last.
std::vector<v1::TensorValuesResponse> ToMessages(const std::string& job, const std::string& tensor,
                                                 const TensorSeries& series) {
  std::vector<v1::TensorValuesResponse> messages;
  size_t next = 0;
  do {
    v1::TensorValuesResponse& message = messages.emplace_back();
    message.set_training_job_name(job);
    message.set_tensor_name(tensor);
    for (int i = 0; i < kPointsPerMessage && next < series.points.size(); ++i, ++next) {
      ToProto(series.points[next], message.add_points());
    }
  } while (next < series.points.size());
  v1::TensorValuesResponse& first = messages.front();
  if (series.dtype != 0) {
    first.set_dtype(DtypeName(series.dtype));
    for (const int64_t dim : series.shape) first.add_shape(dim);
  }
  first.set_bucketed(series.bucketed);
  messages.back().set_truncated(series.truncated);
  messages.back().set_last_step_read(series.last_step_read);
  return messages;
}

// Runs `work(done)` on `pool`; if the pool refuses it (shutting down),
// `done` gets UNAVAILABLE instead: it runs exactly once either way.
template <typename Done, typename Work>
void Submit(base::ThreadPool& pool, Done done, Work work) {
  auto holder = std::make_shared<Done>(std::move(done));
  if (!pool.Schedule([holder, work = std::move(work)]() mutable { work(std::move(*holder)); })) {
    std::move (*holder)(absl::UnavailableError("the server is shutting down"));
  }
}

}  // namespace

TensorQueryHandler::TensorQueryHandler(core::TrainingJobManager* manager,
                                       TensorQueryOptions options)
    : manager_(manager),
      options_(std::move(options)),
      stores_(options_.data_roots, {}, options_.bucket_stores),
      pool_(options_.threads, "dp-tensor-query") {}

TensorQueryHandler::~TensorQueryHandler() { pool_.Shutdown(); }

absl::StatusOr<TensorQueryHandler::JobTrial> TensorQueryHandler::ResolveJob(
    const std::string& name) {
  if (absl::Status valid = core::ValidateTrainingJobName(name); !valid.ok()) return valid;
  std::shared_ptr<const core::JobRecord> job = manager_->GetJob(name);
  if (job == nullptr) {
    // Name some that exist: the list is in memory, and ListTrainingJobs
    // answers on this thread.
    v1::ListTrainingJobsRequest list;
    list.set_sort_by("Name");
    list.set_sort_order("Ascending");
    list.set_max_results(kJobsInErrors);
    v1::ListTrainingJobsResponse page;
    std::vector<std::string> names;
    bool listed = false;
    manager_->ListTrainingJobs(list, &page,
                               [&listed](absl::Status status) { listed = status.ok(); });
    if (listed) {
      for (const auto& summary : page.training_job_summaries()) {
        names.push_back(summary.training_job_name());
      }
    }
    return absl::NotFoundError(
        absl::StrCat("training job '", name, "' does not exist",
                     names.empty() ? std::string("; there are no jobs")
                                   : absl::StrCat("; jobs: ", absl::StrJoin(names, ", "),
                                                  page.next_token().empty() ? "" : ", ...")));
  }
  const bool has_tensorboard = job->has_tensor_board_output_config() &&
                               !job->tensor_board_output_config().s3_output_path().empty();
  const std::string& hook_uri = job->debug_hook_config().s3_output_path();
  const bool has_smdebug =
      !hook_uri.empty() &&
      !(has_tensorboard && hook_uri == job->tensor_board_output_config().s3_output_path());
  if (!has_smdebug && !has_tensorboard) {
    return absl::FailedPreconditionError(
        absl::StrCat("training job '", name,
                     "' saves no tensors: it has neither DebugHookConfig.S3OutputPath nor "
                     "TensorBoardOutputConfig.S3OutputPath"));
  }
  JobTrial trial;
  trial.training_ended = core::IsTerminal(job->training_job_status());
  if (has_smdebug) {
    absl::StatusOr<objectstore::StoreLocation> location =
        ResolveOutput(name, "DebugHookConfig.S3OutputPath", hook_uri);
    if (!location.ok()) return location.status();
    trial.smdebug = *std::move(location);
  }
  if (has_tensorboard) {
    absl::StatusOr<objectstore::StoreLocation> location =
        ResolveOutput(name, "TensorBoardOutputConfig.S3OutputPath",
                      job->tensor_board_output_config().s3_output_path());
    if (!location.ok()) return location.status();
    trial.tensorboard = *std::move(location);
    trial.tensorboard_options = tensorboard::TensorBoardOptionsOf(job->debug_hook_config());
  }
  return trial;
}

absl::StatusOr<objectstore::StoreLocation> TensorQueryHandler::ResolveOutput(
    const std::string& job, const std::string& field, const std::string& uri) const {
  absl::StatusOr<objectstore::StoreLocation> location = stores_.Resolve(uri);
  if (!location.ok()) {
    return absl::Status(location.status().code(),
                        absl::StrCat("training job '", job, "': ", field, " ", uri,
                                     " cannot be read: ", location.status().message()));
  }
  return location;
}

namespace {

// The listing of a job's trials: each one's, or both merged. A trial
// without data yet (FAILED_PRECONDITION) is left out when the other has.
absl::StatusOr<TrialListing> ListJobTensors(const std::optional<objectstore::StoreLocation>& smdebug,
                                            const std::optional<objectstore::StoreLocation>& logs,
                                            const tensorboard::TensorBoardOptions& options,
                                            bool training_ended, const QueryLimits& limits) {
  std::optional<absl::StatusOr<TrialListing>> first, second;
  if (smdebug) first = ListTrialTensors(*smdebug, training_ended, limits);
  if (logs) second = ListTensorBoardTensors(*logs, options, training_ended, limits);
  if (!first) return *std::move(second);
  if (!second) return *std::move(first);
  const auto no_data = [](const absl::Status& s) {
    return s.code() == absl::StatusCode::kFailedPrecondition;
  };
  if (first->ok() && second->ok()) return MergeListings(**std::move(first), **std::move(second));
  if (!first->ok() && !no_data(first->status())) return first->status();
  if (!second->ok() && !no_data(second->status())) return second->status();
  if (first->ok()) return *std::move(first);
  if (second->ok()) return *std::move(second);
  return absl::FailedPreconditionError(
      absl::StrCat(first->status().message(), "; ", second->status().message()));
}

}  // namespace

void TensorQueryHandler::ListTensors(const v1::ListTensorsRequest& request,
                                     v1::ListTensorsResponse* response, core::DoneCallback done) {
  absl::StatusOr<JobTrial> trial = ResolveJob(request.training_job_name());
  if (!trial.ok()) {
    std::move(done)(trial.status());
    return;
  }
  response->set_training_job_name(request.training_job_name());
  Submit(pool_, std::move(done),
         [this, trial = *std::move(trial), response](core::DoneCallback done) {
           absl::StatusOr<TrialListing> listing =
               ListJobTensors(trial.smdebug, trial.tensorboard, trial.tensorboard_options,
                              trial.training_ended, options_.limits);
           if (!listing.ok()) {
             std::move(done)(listing.status());
             return;
           }
           ToProto(*listing, response);
           std::move(done)(absl::OkStatus());
         });
}

void TensorQueryHandler::GetTensorValues(const v1::GetTensorValuesRequest& request,
                                         std::shared_ptr<const std::atomic<bool>> cancelled,
                                         ValuesDone done) {
  absl::StatusOr<SeriesQuery> query = ToSeriesQuery(request);
  if (!query.ok()) {
    std::move(done)(query.status());
    return;
  }
  absl::StatusOr<JobTrial> trial = ResolveJob(request.training_job_name());
  if (!trial.ok()) {
    std::move(done)(trial.status());
    return;
  }
  query->training_ended = trial->training_ended;
  Submit(pool_, std::move(done),
         [this, trial = *std::move(trial), query = *std::move(query),
          job = request.training_job_name(), cancelled = std::move(cancelled)](ValuesDone done) {
           QueryLimits limits = options_.limits;
           limits.cancelled = cancelled.get();
           // The smdebug trial's tensor, else the TensorBoard logs' tag.
           absl::StatusOr<TensorSeries> series =
               absl::NotFoundError("the job has no smdebug trial");
           if (trial.smdebug) series = ReadTensorSeries(*trial.smdebug, query, limits);
           const bool elsewhere = !series.ok() && (absl::IsNotFound(series.status()) ||
                                                   absl::IsFailedPrecondition(series.status()));
           if (trial.tensorboard && elsewhere) {
             series = ReadTensorBoardSeries(*trial.tensorboard, trial.tensorboard_options, query,
                                            limits);
           }
           if (!series.ok()) {
             std::move(done)(series.status());
             return;
           }
           std::move(done)(ToMessages(job, query.tensor, *series));
         });
}

}  // namespace debugplane::rules_engine
