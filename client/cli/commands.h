// The subcommands of `debugplane`, once their flags are parsed: build the
// request, call debugplane.v1.TrainingJobService, print the result and
// return the exit code (see grpc_errors.h). cli.cc maps flags onto these.

#ifndef DEBUGPLANE_CLIENT_CLI_COMMANDS_H_
#define DEBUGPLANE_CLIENT_CLI_COMMANDS_H_

#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/common/connection.h"
#include "client/cli/json_input.h"
#include "debugplane/v1/profiler_report.pb.h"
#include "debugplane/v1/tensor_query.pb.h"
#include "debugplane/v1/training_job.pb.h"
#include "grpcpp/channel.h"

namespace debugplane::client {

enum class OutputFormat { kJson, kText };

// What every command runs with. The streams must outlive the call.
struct CommandEnv {
  ConnectionOptions connection;
  OutputFormat format = OutputFormat::kJson;
  std::istream* in;   // Read for `--file -`.
  std::ostream* out;  // Results.
  std::ostream* err;  // Diagnostics.
};

struct CreateArgs {
  std::string file;  // CreateTrainingJobRequest JSON; "-" for stdin.
  std::string name;  // Overrides TrainingJobName when not empty.
  JsonInputOptions json;
  bool dry_run = false;  // Print the request instead of sending it.
};

struct UpdateArgs {
  std::string name;                    // Overrides TrainingJobName. Required.
  std::string file;                    // UpdateTrainingJobRequest JSON; "-" for stdin; optional.
  std::optional<int64_t> interval_ms;  // ProfilingIntervalInMilliseconds.
  bool disable_profiler = false;       // DisableProfiler = true.
  std::vector<std::string> profiling_parameters;  // KEY=VALUE each.
  JsonInputOptions json;
  bool dry_run = false;
};

struct ReportArgs {
  std::string name;         // TrainingJobName. Required.
  std::string rule;         // RuleConfigurationName; "" = the job's only ProfilerReport.
  bool json = false;        // The JSON summary instead of the HTML page.
  std::string output_file;  // Write the content here ("-" = stdout); "" = print the path only.
};

struct TensorArgs {
  std::string name;    // TrainingJobName. Required.
  std::string tensor;  // TensorName. Required.
  std::string steps;   // "A:B", "A:", ":B" or "A" (global steps, inclusive); "" = all.
  std::string mode;    // TRAIN, EVAL, PREDICT, GLOBAL; "" = every mode.
  std::optional<int32_t> max_points;
  std::string worker;
};

struct ListArgs {
  v1::ListTrainingJobsRequest request;
  bool all = false;  // Follow NextToken to the end, print one response.
};

// The request `create` sends: the file, then --name. INVALID_ARGUMENT or
// NOT_FOUND (file) naming the problem.
absl::StatusOr<v1::CreateTrainingJobRequest> BuildCreateRequest(const CreateArgs& args,
                                                                std::istream& in);

// The request `update` sends: the file if any, then the flags on top of it,
// then NAME. INVALID_ARGUMENT if nothing would change or a
// --profiling-parameter is not KEY=VALUE.
absl::StatusOr<v1::UpdateTrainingJobRequest> BuildUpdateRequest(const UpdateArgs& args,
                                                                std::istream& in);

int RunCreate(const CommandEnv& env, const CreateArgs& args);
int RunDescribe(const CommandEnv& env, const std::string& name);
int RunList(const CommandEnv& env, const ListArgs& args);
int RunUpdate(const CommandEnv& env, const UpdateArgs& args);
int RunStop(const CommandEnv& env, const std::string& name);
int RunDelete(const CommandEnv& env, const std::string& name);
// Fetches a ProfilerReport's report (ProfilerReportService). With an output
// file, writes the content there (atomically: a temporary file, then a
// rename) and prints where; without, prints the path on the server's machine
// and the report's status.
int RunReport(const CommandEnv& env, const ReportArgs& args);
// Lists a job's tensors (TensorQueryService.ListTensors): a table, or the
// response as JSON.
int RunTensors(const CommandEnv& env, const std::string& name);
// The request `tensor` sends; INVALID_ARGUMENT naming --steps or --mode.
absl::StatusOr<v1::GetTensorValuesRequest> BuildTensorValuesRequest(const TensorArgs& args);
// Prints a tensor's values (GetTensorValues), one line per point (NDJSON of
// TensorPoint with JSON) as the batches arrive.
int RunTensor(const CommandEnv& env, const TensorArgs& args);
// Prints each event as it arrives (one JSON line each) until the server
// ends the stream; no deadline, the server decides when it is over.
int RunWatch(const CommandEnv& env, const std::string& name);

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_CLI_COMMANDS_H_
