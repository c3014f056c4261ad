// libFuzzer target: the SageMaker HTTP request path (service/http/): the
// X-Amz-Target header and SageMaker JSON -> request messages.
//
// Build and run (see tfrecord_fuzzer.cc for the cmake line):
//   ninja -C /work/main/build-fuzz -j2 sagemaker_json_fuzzer
//   /work/main/build-fuzz/sagemaker_json_fuzzer -max_total_time=60 -max_len=4096
// The first byte picks the request type (or the target parser); the rest is
// the body. Invariants: an accepted body prints to JSON that parses back to
// the same message; a refused one carries an AWS error code.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "debugplane/v1/training_job.pb.h"
#include "google/protobuf/util/message_differencer.h"
#include "service/auth/auth.h"
#include "service/http/sagemaker_json.h"
#include "service/http/sagemaker_protocol.h"

namespace {

std::unique_ptr<google::protobuf::Message> RequestOfKind(uint8_t kind) {
  namespace v1 = debugplane::v1;
  switch (kind % 6) {
    case 0:
      return std::make_unique<v1::CreateTrainingJobRequest>();
    case 1:
      return std::make_unique<v1::DescribeTrainingJobRequest>();
    case 2:
      return std::make_unique<v1::ListTrainingJobsRequest>();
    case 3:
      return std::make_unique<v1::UpdateTrainingJobRequest>();
    case 4:
      return std::make_unique<v1::StopTrainingJobRequest>();
    default:
      return std::make_unique<v1::DeleteTrainingJobRequest>();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using debugplane::service::http::ParseSageMakerJson;
  using debugplane::service::http::ToSageMakerJson;
  if (size == 0) return 0;
  const absl::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] >= 0xF0) {
    (void)debugplane::service::http::ParseAmzTarget(body);
    return 0;
  }
  std::unique_ptr<google::protobuf::Message> request = RequestOfKind(data[0]);
  const absl::Status parsed = ParseSageMakerJson(body, request.get());
  if (!parsed.ok()) {
    if (!debugplane::service::auth::AwsErrorCode(parsed).has_value()) abort();
    return 0;
  }
  std::unique_ptr<google::protobuf::Message> again = RequestOfKind(data[0]);
  if (!ParseSageMakerJson(ToSageMakerJson(*request), again.get()).ok()) abort();
  if (!google::protobuf::util::MessageDifferencer::Equals(*request, *again)) abort();
  return 0;
}
