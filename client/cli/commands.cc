#include "client/cli/commands.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/common/connection.h"
#include "client/common/grpc_errors.h"
#include "client/cli/output.h"
#include "debugplane/v1/profiler_report.grpc.pb.h"
#include "debugplane/v1/tensor_query.grpc.pb.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace debugplane::client {
namespace {

using Stub = v1::TrainingJobService::Stub;

// A failure before any RPC: bad input is the user's to fix (exit 2), the
// rest is ours (exit 1).
int ReportLocalError(const CommandEnv& env, const absl::Status& status) {
  *env.err << FormatLocalError(status);
  const bool usage = status.code() == absl::StatusCode::kInvalidArgument ||
                     status.code() == absl::StatusCode::kNotFound;
  return usage ? kExitUsage : kExitError;
}

int ReportRpcError(const CommandEnv& env, const grpc::Status& status) {
  // A TLS/plaintext mismatch looks like a server that is down; say which.
  if (std::optional<std::string> security = DiagnoseSecurityFailure(env.connection, status, [&env] {
        return ProbeServerTransport(env.connection.server, absl::Seconds(2));
      })) {
    *env.err << "error: " << *security << "\n" << std::flush;
    return ExitCodeForGrpcStatus(status.error_code());
  }
  *env.err << FormatGrpcError(status, env.connection.server) << std::flush;
  return ExitCodeForGrpcStatus(status.error_code());
}

absl::StatusOr<std::unique_ptr<Stub>> Connect(const CommandEnv& env) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = MakeChannel(env.connection);
  if (!channel.ok()) return channel.status();
  return v1::TrainingJobService::NewStub(*std::move(channel));
}

void SetDeadline(const CommandEnv& env, grpc::ClientContext* context) {
  const auto timeout = std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::duration<double>(env.connection.timeout_seconds));
  context->set_deadline(std::chrono::system_clock::now() + timeout);
}

// Connects and makes one unary call with the --timeout deadline. On success
// `print` writes the response; either way, returns the exit code.
int CallUnary(const CommandEnv& env,
              const std::function<grpc::Status(Stub&, grpc::ClientContext*)>& call,
              const std::function<void()>& print) {
  absl::StatusOr<std::unique_ptr<Stub>> stub = Connect(env);
  if (!stub.ok()) return ReportLocalError(env, stub.status());
  grpc::ClientContext context;
  SetDeadline(env, &context);
  const grpc::Status status = call(**stub, &context);
  if (!status.ok()) return ReportRpcError(env, status);
  print();
  *env.out << std::flush;
  return kExitOk;
}

void PrintJson(const CommandEnv& env, const google::protobuf::Message& message) {
  *env.out << ToPrettyJson(message);
}

// Text output: the response's Warnings on stderr, one "warning: " line
// each, so that stdout keeps only the ARN. (JSON output carries them in the
// response.)
void PrintWarnings(const CommandEnv& env,
                   const google::protobuf::RepeatedPtrField<std::string>& warnings) {
  for (const std::string& warning : warnings) *env.err << "warning: " << warning << "\n";
}

// Prints a response that says nothing to people (stop, delete): empty in
// SageMaker too; JSON still prints "{}" so that scripts piping every
// command into a JSON parser keep working.
auto PrintJsonOnly(const CommandEnv& env) {
  return [&env](const google::protobuf::Message& response) {
    if (env.format == OutputFormat::kJson) PrintJson(env, response);
  };
}

// Whether stdout no longer takes output (its reader went away: `watch x |
// head -1`); then cancels the stream `reader` reads and says so with
// `stopped` ("stopped watching").
template <typename Reader>
bool OutputGone(const CommandEnv& env, grpc::ClientContext& context, Reader& reader,
                const char* stopped) {
  if (*env.out) return false;
  context.TryCancel();
  reader.Finish();
  *env.err << "error: cannot write the output; " << stopped << "\n";
  return true;
}

// A Stub method of a unary call, e.g. &Stub::DescribeTrainingJob.
template <typename Request, typename Response>
using UnaryMethod = grpc::Status (Stub::*)(grpc::ClientContext*, const Request&, Response*);

// One unary call of `method` with `request` (CallUnary); `print` writes
// the response.
template <typename Request, typename Response, typename Print>
int CallMethod(const CommandEnv& env, UnaryMethod<Request, Response> method,
               const Request& request, Print print) {
  Response response;
  return CallUnary(
      env,
      [&](Stub& stub, grpc::ClientContext* context) {
        return (stub.*method)(context, request, &response);
      },
      [&] { print(response); });
}

// One unary call of `method` for the job `name` (describe, stop, delete).
template <typename Request, typename Response, typename Print>
int CallForJob(const CommandEnv& env, UnaryMethod<Request, Response> method,
               const std::string& name, Print print) {
  Request request;
  request.set_training_job_name(name);
  return CallMethod(env, method, request, print);
}

// Sends a request built from a file and flags (create, update), or with
// --dry-run prints it instead. Prints the response; as text, its
// TrainingJobArn on stdout and its Warnings on stderr.
template <typename Request, typename Response>
int SendBuiltRequest(const CommandEnv& env, const absl::StatusOr<Request>& request, bool dry_run,
                     UnaryMethod<Request, Response> method) {
  if (!request.ok()) return ReportLocalError(env, request.status());
  if (dry_run) {
    PrintJson(env, *request);
    return kExitOk;
  }
  return CallMethod(env, method, *request, [&env](const Response& response) {
    if (env.format == OutputFormat::kJson) return PrintJson(env, response);
    *env.out << response.training_job_arn() << "\n";
    PrintWarnings(env, response.warnings());
  });
}

}  // namespace

absl::StatusOr<v1::CreateTrainingJobRequest> BuildCreateRequest(const CreateArgs& args,
                                                                std::istream& in) {
  v1::CreateTrainingJobRequest request;
  if (absl::Status status = ReadJsonMessage(args.file, in, &request, args.json); !status.ok()) {
    return status;
  }
  if (!args.name.empty()) request.set_training_job_name(args.name);
  return request;
}

absl::StatusOr<v1::UpdateTrainingJobRequest> BuildUpdateRequest(const UpdateArgs& args,
                                                                std::istream& in) {
  v1::UpdateTrainingJobRequest request;
  if (!args.file.empty()) {
    if (absl::Status status = ReadJsonMessage(args.file, in, &request, args.json); !status.ok()) {
      return status;
    }
  } else if (!args.interval_ms.has_value() && !args.disable_profiler &&
             args.profiling_parameters.empty()) {
    return absl::InvalidArgumentError(
        "nothing to update: give --file, --interval, --disable-profiler or "
        "--profiling-parameter");
  }
  // Only touch ProfilerConfig for flags: an empty one in the request would
  // read as a (meaningless) profiler change when the file only adds rules.
  if (args.interval_ms.has_value()) {
    request.mutable_profiler_config()->set_profiling_interval_in_milliseconds(*args.interval_ms);
  }
  if (args.disable_profiler) request.mutable_profiler_config()->set_disable_profiler(true);
  for (const std::string& parameter : args.profiling_parameters) {
    const size_t equals = parameter.find('=');
    if (equals == std::string::npos || equals == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--profiling-parameter \"", parameter, "\" is not KEY=VALUE"));
    }
    (*request.mutable_profiler_config()
          ->mutable_profiling_parameters())[parameter.substr(0, equals)] =
        parameter.substr(equals + 1);
  }
  request.set_training_job_name(args.name);
  return request;
}

int RunCreate(const CommandEnv& env, const CreateArgs& args) {
  return SendBuiltRequest(env, BuildCreateRequest(args, *env.in), args.dry_run,
                          &Stub::CreateTrainingJob);
}

int RunDescribe(const CommandEnv& env, const std::string& name) {
  return CallForJob(env, &Stub::DescribeTrainingJob, name,
                    [&env](const v1::DescribeTrainingJobResponse& response) {
                      if (env.format == OutputFormat::kJson) return PrintJson(env, response);
                      *env.out << DescribeAsText(response);
                    });
}

int RunList(const CommandEnv& env, const ListArgs& args) {
  absl::StatusOr<std::unique_ptr<Stub>> stub = Connect(env);
  if (!stub.ok()) return ReportLocalError(env, stub.status());
  v1::ListTrainingJobsRequest request = args.request;
  v1::ListTrainingJobsResponse result;
  // A server that hands out a token twice would loop forever; stop instead.
  std::set<std::string> seen_tokens;
  while (true) {
    grpc::ClientContext context;
    SetDeadline(env, &context);
    v1::ListTrainingJobsResponse page;
    const grpc::Status status = (*stub)->ListTrainingJobs(&context, request, &page);
    if (!status.ok()) return ReportRpcError(env, status);
    if (!args.all) {
      result = std::move(page);
      break;
    }
    for (auto& summary : *page.mutable_training_job_summaries()) {
      *result.add_training_job_summaries() = std::move(summary);
    }
    if (page.next_token().empty()) break;
    if (!seen_tokens.insert(page.next_token()).second) {
      *env.err << "error: the server returned NextToken \"" << page.next_token()
               << "\" twice; stopping --all\n";
      return kExitError;
    }
    request.set_next_token(page.next_token());
  }
  if (env.format == OutputFormat::kJson) {
    PrintJson(env, result);
  } else {
    *env.out << ListAsText(result);
  }
  *env.out << std::flush;
  return kExitOk;
}

int RunUpdate(const CommandEnv& env, const UpdateArgs& args) {
  return SendBuiltRequest(env, BuildUpdateRequest(args, *env.in), args.dry_run,
                          &Stub::UpdateTrainingJob);
}

int RunStop(const CommandEnv& env, const std::string& name) {
  return CallForJob(env, &Stub::StopTrainingJob, name, PrintJsonOnly(env));
}

int RunDelete(const CommandEnv& env, const std::string& name) {
  return CallForJob(env, &Stub::DeleteTrainingJob, name, PrintJsonOnly(env));
}

int RunReport(const CommandEnv& env, const ReportArgs& args) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = MakeChannel(env.connection);
  if (!channel.ok()) return ReportLocalError(env, channel.status());
  auto stub = v1::ProfilerReportService::NewStub(*std::move(channel));
  v1::GetProfilerReportRequest request;
  request.set_training_job_name(args.name);
  request.set_rule_configuration_name(args.rule);
  request.set_format(args.json ? v1::ProfilerReportFormat::JSON : v1::ProfilerReportFormat::HTML);
  request.set_path_only(args.output_file.empty());
  v1::GetProfilerReportResponse response;
  grpc::ClientContext context;
  SetDeadline(env, &context);
  const grpc::Status status = stub->GetProfilerReport(&context, request, &response);
  if (!status.ok()) return ReportRpcError(env, status);
  if (args.output_file == "-") {
    *env.out << response.content() << std::flush;
    return kExitOk;
  }
  if (!args.output_file.empty()) {
    const std::string temporary = args.output_file + ".tmp";
    {
      std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
      file << response.content();
      file.close();
      if (!file) {
        return ReportLocalError(env, absl::PermissionDeniedError(absl::StrCat(
                                         "cannot write ", temporary, ": ", std::strerror(errno))));
      }
    }
    if (std::rename(temporary.c_str(), args.output_file.c_str()) != 0) {
      return ReportLocalError(env, absl::PermissionDeniedError(
                                       absl::StrCat("cannot rename ", temporary, " to ",
                                                    args.output_file, ": ", std::strerror(errno))));
    }
    response.set_path(args.output_file);
    response.clear_content();
  }
  if (env.format == OutputFormat::kText) {
    *env.out << response.path() << " ("
             << v1::RuleEvaluationStatus::Value_Name(response.rule_evaluation_status())
             << (response.final() ? ", final" : ", live: regenerated as data arrives") << ")\n";
  } else {
    PrintJson(env, response);
  }
  *env.out << std::flush;
  return kExitOk;
}

int RunWatch(const CommandEnv& env, const std::string& name) {
  absl::StatusOr<std::unique_ptr<Stub>> stub = Connect(env);
  if (!stub.ok()) return ReportLocalError(env, stub.status());
  v1::WatchTrainingJobRequest request;
  request.set_training_job_name(name);
  // No deadline: the stream lasts as long as the job does. An unreachable
  // server still fails fast (the call is not wait-for-ready).
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::WatchTrainingJobResponse>> reader =
      (*stub)->WatchTrainingJob(&context, request);
  v1::WatchTrainingJobResponse event;
  while (reader->Read(&event)) {
    *env.out << (env.format == OutputFormat::kJson ? ToJsonLine(event) : WatchEventAsText(event))
             << std::flush;  // Whoever reads the pipe sees each event now.
    // Stop watching rather than stream into the void until the job ends.
    if (OutputGone(env, context, *reader, "stopped watching")) return kExitError;
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return ReportRpcError(env, status);
  return kExitOk;
}

int RunTensors(const CommandEnv& env, const std::string& name) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = MakeChannel(env.connection);
  if (!channel.ok()) return ReportLocalError(env, channel.status());
  auto stub = v1::TensorQueryService::NewStub(*std::move(channel));
  v1::ListTensorsRequest request;
  request.set_training_job_name(name);
  v1::ListTensorsResponse response;
  grpc::ClientContext context;
  SetDeadline(env, &context);
  const grpc::Status status = stub->ListTensors(&context, request, &response);
  if (!status.ok()) return ReportRpcError(env, status);
  if (env.format == OutputFormat::kJson) {
    PrintJson(env, response);
  } else {
    *env.out << TensorsAsText(response);
  }
  *env.out << std::flush;
  return kExitOk;
}

absl::StatusOr<v1::GetTensorValuesRequest> BuildTensorValuesRequest(const TensorArgs& args) {
  v1::GetTensorValuesRequest request;
  request.set_training_job_name(args.name);
  request.set_tensor_name(args.tensor);
  if (!args.steps.empty()) {
    std::vector<std::string> parts = absl::StrSplit(args.steps, absl::MaxSplits(':', 1));
    if (parts.size() == 1) parts.push_back(parts[0]);  // "A": that step only.
    int64_t start = 0, end = 0;
    const bool start_ok = parts[0].empty() || absl::SimpleAtoi(parts[0], &start);
    const bool end_ok = parts[1].empty() || absl::SimpleAtoi(parts[1], &end);
    if (!start_ok || !end_ok || start < 0 || (!parts[1].empty() && end < start)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--steps: '", args.steps,
          "' is not a step range; use A:B, A: or :B (global steps, inclusive, A <= B)"));
    }
    request.set_start_step(start);
    if (!parts[1].empty()) request.set_end_step(end);
  }
  if (!args.mode.empty()) {
    v1::TensorMode::Value mode;
    if (!v1::TensorMode::Value_Parse(absl::AsciiStrToUpper(args.mode), &mode) ||
        mode == v1::TensorMode::TENSOR_MODE_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--mode: '", args.mode, "' is not a mode; use TRAIN, EVAL, PREDICT or GLOBAL"));
    }
    request.set_mode(mode);
  }
  if (args.max_points) request.set_max_points(*args.max_points);
  request.set_worker(args.worker);
  return request;
}

int RunTensor(const CommandEnv& env, const TensorArgs& args) {
  absl::StatusOr<v1::GetTensorValuesRequest> request = BuildTensorValuesRequest(args);
  if (!request.ok()) return ReportLocalError(env, request.status());
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = MakeChannel(env.connection);
  if (!channel.ok()) return ReportLocalError(env, channel.status());
  auto stub = v1::TensorQueryService::NewStub(*std::move(channel));
  grpc::ClientContext context;
  SetDeadline(env, &context);
  std::unique_ptr<grpc::ClientReader<v1::TensorValuesResponse>> reader =
      stub->GetTensorValues(&context, *request);
  v1::TensorValuesResponse batch;
  bool truncated = false;
  int64_t last_step_read = -1;
  while (reader->Read(&batch)) {
    for (const v1::TensorPoint& point : batch.points()) {
      *env.out << (env.format == OutputFormat::kJson ? ToJsonLine(point)
                                                     : TensorPointAsText(point));
    }
    *env.out << std::flush;
    truncated |= batch.truncated();
    last_step_read = std::max(last_step_read, batch.last_step_read());
    if (OutputGone(env, context, *reader, "stopped reading")) return kExitError;
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return ReportRpcError(env, status);
  if (truncated) {
    *env.err << "note: the server stopped at its bound after step " << last_step_read
             << "; continue with --steps " << last_step_read + 1 << ":\n";
  }
  return kExitOk;
}

}  // namespace debugplane::client
