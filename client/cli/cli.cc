#include "client/cli/cli.h"

#include <cstdint>
#include <exception>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "client/cli/commands.h"
#include "client/common/connection.h"
#include "client/common/grpc_errors.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/time_util.h"

namespace debugplane::client {
namespace {

constexpr char kDescription[] =
    "debugplane: create, inspect, update, stop and watch training jobs and their\n"
    "Debugger rule evaluations on a debugplane server (SageMaker Debugger's\n"
    "training-job API, self-hosted). Responses print as JSON with SageMaker's\n"
    "member names; errors go to stderr.";

constexpr char kMainFooter[] =
    R"(Global options may also follow the command. 'debugplane COMMAND --help' tells more.

Environment:
  DEBUGPLANE_SERVER  default for --server
  DEBUGPLANE_TOKEN   default for --token (ACCESS_KEY_ID:SECRET_ACCESS_KEY)

Exit codes:
  0  ok
  1  any other error
  2  usage error: bad flags, input file missing, unreadable or invalid
  3  INVALID_ARGUMENT: the server rejected the request (violations listed)
  4  NOT_FOUND: no such training job
  5  ALREADY_EXISTS: a training job with that name exists
  6  FAILED_PRECONDITION: not allowed in the job's current state
  7  UNAVAILABLE or DEADLINE_EXCEEDED: server unreachable or too slow
  8  UNAUTHENTICATED or PERMISSION_DENIED: no, wrong or insufficient credentials)";

constexpr char kCreateFooter[] = R"(Prints the CreateTrainingJobResponse (TrainingJobArn, Warnings).

FILE is the JSON of `aws sagemaker create-training-job --cli-input-json`
(a CreateTrainingJobRequest), taken as is: the // comments of the SageMaker
Debugger documentation templates are allowed. Members debugplane does not know
are an error (exit 2) unless --ignore-unknown-fields is given. The server's
validation errors exit 3, listing each bad field; a taken name exits 5.

Examples:
  debugplane create --file debugger-training-job-cli.json
  debugplane create --file job.json --name job-2 --dry-run
  generate-job | debugplane create --file -)";

constexpr char kUpdateFooter[] =
    R"(Prints the UpdateTrainingJobResponse (TrainingJobArn, Warnings: changes the training
frameworks cannot apply while the job runs; with -o text they go to stderr).

FILE is an UpdateTrainingJobRequest (ProfilerConfig, ProfilerRuleConfigurations);
the flags apply on top of it and NAME replaces its TrainingJobName. Only jobs
InProgress can be updated (else exit 6).

Examples:
  debugplane update my-job --interval 100
  debugplane update my-job --profiling-parameter 'DetailedProfilingConfig={"StartStep": 5, "NumSteps": 3}'
  debugplane update my-job --disable-profiler
  debugplane update my-job --file add-profiler-rules.json)";

constexpr char kListFooter[] =
    R"(Times are RFC 3339, e.g. 2024-05-01T12:00:00Z or 2024-05-01T14:00:00+02:00.
Without --all one page prints, with its NextToken when more follow; with --all
every page is fetched (each call with its own --timeout) and the summaries print
as one ListTrainingJobsResponse without NextToken.)";

constexpr char kWatchFooter[] =
    R"(Prints the job's state when watching starts, then one event per committed change
of the job or of its rule evaluations, each as one JSON line (NDJSON), as it
happens. Ends with exit 0 once the job and all its rule evaluations are
terminal, or exit 4 if the job is deleted. --timeout does not apply.)";

// The value names of a SageMaker enum wrapper, without the UNSPECIFIED zero.
std::vector<std::string> EnumNames(const google::protobuf::EnumDescriptor* type) {
  std::vector<std::string> names;
  for (int i = 0; i < type->value_count(); ++i) {
    if (type->value(i)->number() != 0) names.push_back(type->value(i)->name());
  }
  return names;
}

// Looks up a value of an enum by name; only called with names IsMember
// already accepted.
int EnumNumber(const google::protobuf::EnumDescriptor* type, const std::string& name) {
  const google::protobuf::EnumValueDescriptor* value = type->FindValueByName(name);
  return value == nullptr ? 0 : value->number();
}

CLI::Validator Rfc3339() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        google::protobuf::Timestamp unused;
        if (google::protobuf::util::TimeUtil::FromString(text, &unused)) return "";
        return absl::StrCat("\"", text, "\" is not an RFC 3339 time (e.g. 2024-05-01T12:00:00Z)");
      },
      /*validator_desc=*/"");
}

CLI::Validator Seconds() {
  // Bounded so that the deadline arithmetic cannot overflow.
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double seconds = 0;
        if (CLI::detail::lexical_cast(text, seconds) && seconds > 0 && seconds <= 31536000) {
          return "";
        }
        return absl::StrCat("\"", text, "\" is not a number of seconds in (0, 31536000]");
      },
      /*validator_desc=*/"");
}

CLI::Validator PositiveInteger() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int64_t value = 0;
        if (CLI::detail::lexical_cast(text, value) && value > 0) return "";
        return absl::StrCat("\"", text, "\" is not a positive integer");
      },
      /*validator_desc=*/"");
}

google::protobuf::Timestamp ParseTime(const std::string& text) {
  google::protobuf::Timestamp time;
  google::protobuf::util::TimeUtil::FromString(text, &time);
  return time;
}

// "error: <what>" plus where to find help for the command being parsed.
std::string FailureMessage(const CLI::App* app, const CLI::Error& error) {
  std::string command = "debugplane";
  for (const CLI::App* sub = app; sub != nullptr;) {
    const std::vector<CLI::App*> parsed = sub->get_subcommands();
    sub = parsed.empty() ? nullptr : parsed.front();
    if (sub != nullptr) absl::StrAppend(&command, " ", sub->get_name());
  }
  return absl::StrCat("error: ", error.what(), "\nRun '", command, " --help' for usage.\n");
}

// Everything the command line sets; CLI11 binds to these.
struct Flags {
  ConnectionOptions connection;
  std::string output = "json";
  std::string name;  // NAME of describe, update, stop, delete, watch.
  CreateArgs create;
  UpdateArgs update;
  ReportArgs report;
  TensorArgs tensor;
  int32_t max_points = 0;
  int64_t interval_ms = 0;
  ListArgs list;
  std::string status;  // --status, a TrainingJobStatus value name.
  std::string created_after, created_before, modified_after, modified_before;
  int max_results = 0;
  bool until_terminal = true;
};

void AddNameArgument(CLI::App* command, std::string* name) {
  command->add_option("NAME", *name, "Training job name (TrainingJobName)")
      ->type_name("")
      ->required();
}

// The flags create and update share: how the request's JSON is read, and
// whether it is only printed.
void AddRequestFileFlags(CLI::App* command, JsonInputOptions* json, bool* dry_run) {
  command->add_flag("--ignore-unknown-fields", json->ignore_unknown_fields,
                    "Drop JSON members debugplane does not support instead of failing");
  command->add_flag("--dry-run", *dry_run, "Print the request as it would be sent; do not send it");
}

// The parsed command line's commands, and the options whose presence
// (rather than value) matters.
struct Commands {
  CLI::App* create = nullptr;
  CLI::App* describe = nullptr;
  CLI::App* list = nullptr;
  CLI::App* update = nullptr;
  CLI::App* stop = nullptr;
  CLI::App* delete_command = nullptr;
  CLI::App* watch = nullptr;
  CLI::App* report = nullptr;
  CLI::App* tensors = nullptr;
  CLI::App* tensor = nullptr;
  CLI::Option* output = nullptr;       // --output
  CLI::Option* max_results = nullptr;  // list --max-results
  CLI::Option* interval = nullptr;     // update --interval
  CLI::Option* max_points = nullptr;   // tensor --max-points
};

// --server, --timeout, TLS, token and --output; returns --output.
CLI::Option* AddGlobalOptions(CLI::App& app, Flags& flags) {
  app.add_option("--server,-s", flags.connection.server, "Server address (gRPC target)")
      ->type_name("HOST:PORT")
      ->envname("DEBUGPLANE_SERVER")
      ->capture_default_str();
  app.add_option("--timeout", flags.connection.timeout_seconds, "Deadline of each call")
      ->type_name("SECONDS")
      ->check(Seconds())
      ->capture_default_str();
  AddTlsFlags(app, flags.connection);
  AddTokenFlags(app, flags.connection);
  return app.add_option("--output,-o", flags.output, "Output format")
      ->type_name("json|text")
      ->check(CLI::Validator(CLI::IsMember({"json", "text"})).description(""))
      ->capture_default_str();
}

CLI::App* AddCreateCommand(CLI::App& app, Flags& flags) {
  CLI::App* create = app.add_subcommand("create", "Create a training job (CreateTrainingJob)");
  create->footer(kCreateFooter);
  create->add_option("--file,-f", flags.create.file, "Request JSON; - reads stdin")
      ->type_name("FILE|-")
      ->required();
  create
      ->add_option("--name,-n", flags.create.name, "Use this TrainingJobName instead of the file's")
      ->type_name("NAME");
  AddRequestFileFlags(create, &flags.create.json, &flags.create.dry_run);
  return create;
}

CLI::App* AddDescribeCommand(CLI::App& app, Flags& flags) {
  CLI::App* describe =
      app.add_subcommand("describe", "Describe a training job (DescribeTrainingJob)");
  describe->footer(
      "Prints the DescribeTrainingJobResponse (or, with -o text, a summary).\n"
      "Exit 4 if there is no such job.");
  AddNameArgument(describe, &flags.name);
  return describe;
}

// An RFC 3339 time filter of list.
void AddTimeFilter(CLI::App* list, const std::string& flag, std::string* value,
                   const std::string& description) {
  list->add_option(flag, *value, description)->type_name("TIME")->check(Rfc3339());
}

CLI::App* AddListCommand(CLI::App& app, Flags& flags, Commands& commands) {
  CLI::App* list = app.add_subcommand("list", "List training jobs (ListTrainingJobs)");
  list->footer(kListFooter);
  list->add_option("--status", flags.status, "Only jobs with this TrainingJobStatus")
      ->type_name("STATUS")
      ->check(CLI::IsMember(EnumNames(v1::TrainingJobStatus::Value_descriptor())));
  list->add_option("--name-contains", *flags.list.request.mutable_name_contains(),
                   "Only jobs whose name contains this (case-insensitive)")
      ->type_name("TEXT");
  AddTimeFilter(list, "--created-after", &flags.created_after,
                "Only jobs created at or after this time");
  AddTimeFilter(list, "--created-before", &flags.created_before,
                "Only jobs created before this time");
  AddTimeFilter(list, "--modified-after", &flags.modified_after,
                "Only jobs last modified at or after this time");
  AddTimeFilter(list, "--modified-before", &flags.modified_before,
                "Only jobs last modified before this time");
  // SortBy and SortOrder are strings in the proto; the server validates them
  // too, but a typo is a usage error, caught before any call.
  list->add_option("--sort-by", *flags.list.request.mutable_sort_by(),
                   "Sort key (server default: CreationTime)")
      ->type_name("KEY")
      ->check(CLI::IsMember({"Name", "CreationTime", "Status"}));
  list->add_option("--sort-order", *flags.list.request.mutable_sort_order(),
                   "Sort order (server default: Descending)")
      ->type_name("ORDER")
      ->check(CLI::IsMember({"Ascending", "Descending"}));
  commands.max_results =
      list->add_option("--max-results", flags.max_results, "Page size, 1-100 (server default: 10)")
          ->type_name("N")
          ->check(CLI::Validator(CLI::Range(1, 100)).description(""));
  list->add_option("--next-token", *flags.list.request.mutable_next_token(),
                   "Continue from a previous page's NextToken")
      ->type_name("TOKEN");
  list->add_flag("--all", flags.list.all,
                 "Follow NextToken to the end and print every summary in one response");
  return list;
}

CLI::App* AddUpdateCommand(CLI::App& app, Flags& flags, Commands& commands) {
  CLI::App* update =
      app.add_subcommand("update", "Change a running job's profiling (UpdateTrainingJob)");
  update->footer(kUpdateFooter);
  AddNameArgument(update, &flags.update.name);
  update->add_option("--file,-f", flags.update.file, "Request JSON; - reads stdin")
      ->type_name("FILE|-");
  commands.interval =
      update->add_option("--interval", flags.interval_ms, "New ProfilingIntervalInMilliseconds")
          ->type_name("MS")
          ->check(PositiveInteger());
  update->add_flag("--disable-profiler", flags.update.disable_profiler,
                   "Turn monitoring and profiling off (DisableProfiler)");
  update
      ->add_option("--profiling-parameter", flags.update.profiling_parameters,
                   "Set one ProfilingParameters entry; repeatable")
      ->type_name("KEY=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  AddRequestFileFlags(update, &flags.update.json, &flags.update.dry_run);
  return update;
}

// stop, delete and watch.
void AddLifecycleCommands(CLI::App& app, Flags& flags, Commands& commands) {
  commands.stop = app.add_subcommand("stop", "Stop a training job (StopTrainingJob)");
  commands.stop->footer(
      "The job goes Stopping, then Stopped; so do its rule evaluations. Stopping a job\n"
      "that is already stopping or has ended succeeds and changes nothing.\n"
      "Exit 4 if there is no such job.");
  AddNameArgument(commands.stop, &flags.name);
  commands.delete_command =
      app.add_subcommand("delete", "Delete a stopped or finished job (DeleteTrainingJob)");
  commands.delete_command->footer(
      "Only jobs that are Completed, Failed or Stopped can be deleted: exit 6 while the\n"
      "job is InProgress or Stopping (stop it first), exit 4 if there is no such job.");
  AddNameArgument(commands.delete_command, &flags.name);
  commands.watch =
      app.add_subcommand("watch", "Stream a job's status changes until it ends (WatchTrainingJob)");
  commands.watch->footer(kWatchFooter);
  AddNameArgument(commands.watch, &flags.name);
  // Accepted for scripts that spell it out; it is what the server does anyway.
  commands.watch->add_flag("--until-terminal", flags.until_terminal,
                           "End when the job and its rules are terminal (the default)");
}

CLI::App* AddReportCommand(CLI::App& app, Flags& flags) {
  CLI::App* report = app.add_subcommand(
      "report",
      "Fetch the report of a job's ProfilerReport rule, or of its CreateXgboostReport debugging "
      "rule (the XGBoost training report) (GetProfilerReport)");
  report->footer(
      "The report is regenerated while the job runs and a last time when training ends\n"
      "(\"Final\": true). Without -o, prints where the server keeps it.\n"
      "Exit 4 if there is no such job or no report yet, 6 if the job has no report rule\n"
      "(or several: name one with --rule, e.g. --rule CreateXgboostReport).");
  AddNameArgument(report, &flags.report.name);
  report->add_option("--rule", flags.report.rule,
                     "The report rule's RuleConfigurationName (ProfilerReport or "
                     "CreateXgboostReport; if the job has several)");
  report->add_flag("--json", flags.report.json, "The JSON summary instead of the HTML page");
  report->add_option("-o,--output-file", flags.report.output_file,
                     "Write the report to this file ('-' for standard output)");
  return report;
}

// tensors and tensor.
void AddTensorCommands(CLI::App& app, Flags& flags, Commands& commands) {
  commands.tensors = app.add_subcommand(
      "tensors", "List the tensors a job's Debugger hook saved (TensorQueryService.ListTensors)");
  commands.tensors->footer(
      "A table (name, collections, steps saved per mode, first..last global step, dtype and\n"
      "shape); -o json prints the ListTensorsResponse. Exit 4 if there is no such job, 6 if\n"
      "the job saves no tensors or its trial holds no step yet.");
  AddNameArgument(commands.tensors, &flags.name);
  CLI::App* tensor = commands.tensor = app.add_subcommand(
      "tensor", "Print one tensor's values step by step (TensorQueryService.GetTensorValues)");
  tensor->footer(
      "One line per step: step, mode, then the value of a scalar or mean/norm/min/max of\n"
      "other tensors (over finite elements; non-finite ones are counted). With more steps\n"
      "than --max-points in a mode, each line is a bucket of steps with their mean, min and\n"
      "max. -o json prints one TensorPoint per line (NDJSON).\n"
      "Exit 4 if there is no such job or tensor, 3 for a bad range or mode.");
  AddNameArgument(tensor, &flags.tensor.name);
  tensor->add_option("TENSOR", flags.tensor.tensor, "Tensor name (as `tensors` lists it)")
      ->type_name("")
      ->required();
  tensor->add_option("--steps", flags.tensor.steps, "Global steps A:B, A: or :B (inclusive)")
      ->type_name("A:B");
  tensor->add_option("--mode", flags.tensor.mode, "Only this mode (default: every mode)")
      ->type_name("TRAIN|EVAL|PREDICT|GLOBAL");
  commands.max_points =
      tensor
          ->add_option("--max-points", flags.max_points,
                       "At most N points per mode, 1-10000 (server default: 2000)")
          ->type_name("N");
  tensor->add_option("--worker", flags.tensor.worker, "Only this worker's values (worker_0)")
      ->type_name("WORKER");
}

// The command line's grammar: the global options, then every command.
Commands DefineCommandLine(CLI::App& app, Flags& flags) {
  app.footer(kMainFooter);
  app.require_subcommand(1);
  // Lets global options follow the command too ("debugplane describe x
  // --server h:1"); subcommands inherit this setting.
  app.fallthrough();
  app.failure_message(FailureMessage);
  Commands commands;
  commands.output = AddGlobalOptions(app, flags);
  commands.create = AddCreateCommand(app, flags);
  commands.describe = AddDescribeCommand(app, flags);
  commands.list = AddListCommand(app, flags, commands);
  commands.update = AddUpdateCommand(app, flags, commands);
  AddLifecycleCommands(app, flags, commands);
  commands.report = AddReportCommand(app, flags);
  AddTensorCommands(app, flags, commands);
  // After the subcommands, which would otherwise inherit it.
  app.set_help_all_flag("--help-all", "Print help for every command and exit");
  return commands;
}

// Completes list's request from the flags that need converting.
void CompleteListRequest(Flags& flags, bool max_results_given) {
  v1::ListTrainingJobsRequest& request = flags.list.request;
  if (!flags.status.empty()) {
    request.set_status_equals(static_cast<v1::TrainingJobStatus::Value>(
        EnumNumber(v1::TrainingJobStatus::Value_descriptor(), flags.status)));
  }
  // Only the fields of given flags: an empty Timestamp would be a filter.
  using TimeField = google::protobuf::Timestamp* (v1::ListTrainingJobsRequest::*)();
  const std::pair<const std::string*, TimeField> times[] = {
      {&flags.created_after, &v1::ListTrainingJobsRequest::mutable_creation_time_after},
      {&flags.created_before, &v1::ListTrainingJobsRequest::mutable_creation_time_before},
      {&flags.modified_after, &v1::ListTrainingJobsRequest::mutable_last_modified_time_after},
      {&flags.modified_before, &v1::ListTrainingJobsRequest::mutable_last_modified_time_before},
  };
  for (const auto& [text, field] : times) {
    if (!text->empty()) *(request.*field)() = ParseTime(*text);
  }
  if (max_results_given) request.set_max_results(flags.max_results);
}

// Runs the command that was parsed; returns the exit code.
int RunParsedCommand(const Commands& commands, Flags& flags, CommandEnv& env) {
  if (commands.create->parsed()) return RunCreate(env, flags.create);
  if (commands.describe->parsed()) return RunDescribe(env, flags.name);
  if (commands.report->parsed()) return RunReport(env, flags.report);
  // These print for people unless JSON is asked for.
  if (commands.tensors->parsed() || commands.tensor->parsed()) {
    if (commands.output->count() == 0) env.format = OutputFormat::kText;
    if (commands.tensors->parsed()) return RunTensors(env, flags.name);
    if (commands.max_points->count() > 0) flags.tensor.max_points = flags.max_points;
    return RunTensor(env, flags.tensor);
  }
  if (commands.list->parsed()) {
    CompleteListRequest(flags, commands.max_results->count() > 0);
    return RunList(env, flags.list);
  }
  if (commands.update->parsed()) {
    if (commands.interval->count() > 0) flags.update.interval_ms = flags.interval_ms;
    return RunUpdate(env, flags.update);
  }
  if (commands.stop->parsed()) return RunStop(env, flags.name);
  if (commands.delete_command->parsed()) return RunDelete(env, flags.name);
  if (commands.watch->parsed()) return RunWatch(env, flags.name);
  // Unreachable: require_subcommand(1) makes parse() fail without one.
  *env.err << "error: no command given\n";
  return kExitUsage;
}

int Run(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  Flags flags;
  CLI::App app(kDescription, "debugplane");
  const Commands commands = DefineCommandLine(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --help-all are "errors" that exit 0.
    return app.exit(e, out, err) == 0 ? kExitOk : kExitUsage;
  }
  CommandEnv env{flags.connection,
                 flags.output == "text" ? OutputFormat::kText : OutputFormat::kJson, &std::cin,
                 &out, &err};
  return RunParsedCommand(commands, flags, env);
}

}  // namespace

int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  try {
    return Run(argc, argv, out, err);
  } catch (const std::exception& e) {
    // A bug, not a user error; still an orderly message and exit code.
    err << "error: internal: " << e.what() << "\n";
    return kExitError;
  }
}

}  // namespace debugplane::client
