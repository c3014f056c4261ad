#include "client/common/grpc_errors.h"

#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"

namespace debugplane::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ExitCodeTest, DocumentedTable) {
  EXPECT_EQ(ExitCodeForGrpcStatus(grpc::StatusCode::OK), 0);
  EXPECT_EQ(ExitCodeForGrpcStatus(grpc::StatusCode::INVALID_ARGUMENT), 3);
  EXPECT_EQ(ExitCodeForGrpcStatus(grpc::StatusCode::NOT_FOUND), 4);
  EXPECT_EQ(ExitCodeForGrpcStatus(grpc::StatusCode::ALREADY_EXISTS), 5);
  EXPECT_EQ(ExitCodeForGrpcStatus(grpc::StatusCode::FAILED_PRECONDITION), 6);
  EXPECT_EQ(ExitCodeForGrpcStatus(grpc::StatusCode::UNAVAILABLE), 7);
  EXPECT_EQ(ExitCodeForGrpcStatus(grpc::StatusCode::DEADLINE_EXCEEDED), 7);
  EXPECT_EQ(ExitCodeForGrpcStatus(grpc::StatusCode::UNAUTHENTICATED), 8);
  EXPECT_EQ(ExitCodeForGrpcStatus(grpc::StatusCode::PERMISSION_DENIED), 8);
  for (grpc::StatusCode code : {grpc::StatusCode::CANCELLED, grpc::StatusCode::UNKNOWN,
                                grpc::StatusCode::RESOURCE_EXHAUSTED, grpc::StatusCode::ABORTED,
                                grpc::StatusCode::OUT_OF_RANGE, grpc::StatusCode::UNIMPLEMENTED,
                                grpc::StatusCode::INTERNAL, grpc::StatusCode::DATA_LOSS}) {
    EXPECT_EQ(ExitCodeForGrpcStatus(code), 1) << GrpcCodeName(code);
  }
  EXPECT_EQ(ExitCodeForGrpcStatus(static_cast<grpc::StatusCode>(42)), 1);
  // Distinct from every server-side code: scripts can tell "fix your
  // command line" from "the server said no".
  EXPECT_EQ(kExitUsage, 2);
}

TEST(GrpcCodeNameTest, CanonicalNames) {
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::OK), "OK");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::INVALID_ARGUMENT), "INVALID_ARGUMENT");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::FAILED_PRECONDITION), "FAILED_PRECONDITION");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
  EXPECT_EQ(GrpcCodeName(static_cast<grpc::StatusCode>(42)), "CODE(42)");
}

std::string BadRequestDetails() {
  google::rpc::BadRequest bad_request;
  auto* violation = bad_request.add_field_violations();
  violation->set_field("TrainingJobName");
  violation->set_description("must match [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}");
  violation = bad_request.add_field_violations();
  violation->set_field("DebugRuleConfigurations[1].RuleParameters");
  violation->set_description("rule_to_invoke is required");
  google::rpc::Status details;
  details.set_code(static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  details.set_message("invalid request");
  // Something the CLI does not know goes first: it must be skipped.
  google::rpc::ResourceInfo info;
  info.set_resource_name("x");
  details.add_details()->PackFrom(info);
  details.add_details()->PackFrom(bad_request);
  return details.SerializeAsString();
}

TEST(FormatGrpcErrorTest, CodeMessageAndOneLinePerViolation) {
  grpc::Status status(grpc::StatusCode::INVALID_ARGUMENT, "invalid request", BadRequestDetails());
  EXPECT_EQ(FormatGrpcError(status),
            "error: INVALID_ARGUMENT: invalid request\n"
            "  - TrainingJobName: must match [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}\n"
            "  - DebugRuleConfigurations[1].RuleParameters: rule_to_invoke is required\n");
}

TEST(FormatGrpcErrorTest, PreconditionFailureViolations) {
  google::rpc::PreconditionFailure failure;
  auto* violation = failure.add_violations();
  violation->set_type("STATE");
  violation->set_subject("training-job/a");
  violation->set_description("job is Stopping");
  google::rpc::Status details;
  details.add_details()->PackFrom(failure);
  grpc::Status status(grpc::StatusCode::FAILED_PRECONDITION, "cannot delete",
                      details.SerializeAsString());
  EXPECT_EQ(FormatGrpcError(status),
            "error: FAILED_PRECONDITION: cannot delete\n  - training-job/a: job is Stopping\n");
}

TEST(FormatGrpcErrorTest, WithoutDetails) {
  EXPECT_EQ(FormatGrpcError(grpc::Status(grpc::StatusCode::NOT_FOUND, "no job \"x\"")),
            "error: NOT_FOUND: no job \"x\"\n");
  EXPECT_EQ(FormatGrpcError(grpc::Status(grpc::StatusCode::INTERNAL, "")), "error: INTERNAL\n");
}

TEST(FormatGrpcErrorTest, UnparseableDetailsAreIgnored) {
  grpc::Status status(grpc::StatusCode::INVALID_ARGUMENT, "bad", "\xff\xff not a proto");
  EXPECT_EQ(FormatGrpcError(status), "error: INVALID_ARGUMENT: bad\n");
}

TEST(FormatGrpcErrorTest, UnreachableServerGetsAHint) {
  grpc::Status status(grpc::StatusCode::UNAVAILABLE, "failed to connect to all addresses");
  EXPECT_THAT(FormatGrpcError(status, "127.0.0.1:1"),
              HasSubstr("is debugplane-server running at 127.0.0.1:1?"));
  EXPECT_THAT(FormatGrpcError(
                  grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"), "h:1"),
              HasSubstr("--timeout"));
  // No hint for errors the server itself returned.
  EXPECT_THAT(FormatGrpcError(grpc::Status(grpc::StatusCode::NOT_FOUND, "x"), "h:1"),
              Not(HasSubstr("h:1")));
}

TEST(FormatLocalErrorTest, PrefixesError) {
  EXPECT_EQ(FormatLocalError(absl::NotFoundError("job.json: no such file")),
            "error: job.json: no such file\n");
}

}  // namespace
}  // namespace debugplane::client
