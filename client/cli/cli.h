// `debugplane`: the command-line client of debugplane.v1.TrainingJobService.
//
//   debugplane [--server HOST:PORT] [--timeout SECONDS] [--tls [--ca-cert FILE]
//              [--client-cert FILE --client-key FILE]] [--token KEY:SECRET | --token-file FILE]
//              [--output json|text] <command> ...
//
//   create --file FILE|- [--name NAME]     CreateTrainingJob (SageMaker CLI JSON)
//   describe NAME                          DescribeTrainingJob
//   list [filters] [--all]                 ListTrainingJobs
//   update NAME [--file FILE|-] [flags]    UpdateTrainingJob
//   stop NAME                              StopTrainingJob
//   delete NAME                            DeleteTrainingJob
//   watch NAME                             WatchTrainingJob, one JSON line per event
//
// Responses print as JSON with SageMaker's member names; errors go to
// stderr. Exit codes, for scripts (the table is in grpc_errors.cc):
//
//   0  OK
//   1  any other error (INTERNAL, UNKNOWN, RESOURCE_EXHAUSTED, ...)
//   2  usage: bad flags, input file missing, unreadable or not valid JSON
//      for the request, unknown members in it
//   3  INVALID_ARGUMENT from the server (the request is invalid)
//   4  NOT_FOUND (no such training job)
//   5  ALREADY_EXISTS (a job with that name exists)
//   6  FAILED_PRECONDITION (not allowed in the job's current state)
//   7  UNAVAILABLE or DEADLINE_EXCEEDED (server unreachable or too slow)
//   8  UNAUTHENTICATED or PERMISSION_DENIED (no, wrong or insufficient
//      credentials: --token, DEBUGPLANE_TOKEN, --token-file)

#ifndef DEBUGPLANE_CLIENT_CLI_CLI_H_
#define DEBUGPLANE_CLIENT_CLI_CLI_H_

#include <ostream>

namespace debugplane::client {

// Runs `debugplane` with the command line `argv[0..argc)` (argv[0] is the
// program name) and returns the process exit code listed above.
//
// Results go to `out` and diagnostics (errors, warnings) to `err`; help goes
// to `out`. Reads std::cin only for `--file -`, and the DEBUGPLANE_SERVER
// and DEBUGPLANE_TOKEN environment variables when --server and --token are
// not given. Never calls exit() and
// keeps no state between calls, so tests may call it repeatedly; concurrent
// calls are safe only if they do not both read std::cin.
int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_CLI_CLI_H_
