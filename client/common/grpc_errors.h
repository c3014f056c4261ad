// Exit codes of the `debugplane` CLI and how failed RPCs are reported.
//
// Scripts branch on the exit code, people read stderr: a failed RPC maps to
// one exit code (see kExitCodeTable in grpc_errors.cc) and is formatted as
//
//   error: INVALID_ARGUMENT: <server message>
//     - <field>: <description>        (one per google.rpc.BadRequest violation)

#ifndef DEBUGPLANE_CLIENT_COMMON_GRPC_ERRORS_H_
#define DEBUGPLANE_CLIENT_COMMON_GRPC_ERRORS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace debugplane::client {

// Process exit codes; documented for users in cli.h and `debugplane --help`.
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,               // Any other failure, local or remote.
  kExitUsage = 2,               // Bad flags, unreadable or invalid input file.
  kExitInvalidArgument = 3,     // The server rejected the request.
  kExitNotFound = 4,            // No such training job.
  kExitAlreadyExists = 5,       // A job with that name exists.
  kExitFailedPrecondition = 6,  // Not allowed in the job's current state.
  kExitUnavailable = 7,         // Server unreachable, or no answer in time.
  kExitNotAllowed = 8,          // No, wrong or insufficient credentials.
};

// The exit code for a status returned by the server (kExitOk for OK).
int ExitCodeForGrpcStatus(grpc::StatusCode code);

// The canonical name of a gRPC code, e.g. "NOT_FOUND"; "CODE(<n>)" for
// values outside the enum, so a newer server's codes still print.
std::string GrpcCodeName(grpc::StatusCode code);

// The multi-line stderr report of a failed RPC (ends with '\n'):
//   error: <CODE>: <message>
//     - <field>: <description>          per BadRequest field violation
// `server` (HOST:PORT) is only used to hint at the cause of UNAVAILABLE and
// DEADLINE_EXCEEDED; pass "" to omit the hint.
std::string FormatGrpcError(const grpc::Status& status, absl::string_view server = "");

// The report of a local failure (no RPC was made): "error: <message>\n".
std::string FormatLocalError(const absl::Status& status);

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_COMMON_GRPC_ERRORS_H_
