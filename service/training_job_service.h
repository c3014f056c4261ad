// The gRPC adapter of TrainingJobService: thin. Each RPC gets one reactor
// that hands the request to a core::TrainingJobHandler and finishes exactly
// once with the handler's status mapped to a real gRPC code.

#ifndef DEBUGPLANE_SERVICE_TRAINING_JOB_SERVICE_H_
#define DEBUGPLANE_SERVICE_TRAINING_JOB_SERVICE_H_

#include "core/manager/training_job_handler.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "service/auth/auth.h"
#include "service/grpc_adapter.h"
#include "service/raw_call.h"
#include "service/stream_writer.h"

namespace debugplane::service {

// Every method is raw (see raw_call.h): requests that do not decode get
// INVALID_ARGUMENT naming the method. DescribeTrainingJob, the hot read, also
// sends the job's committed bytes (encoded once per change, shared) without
// copying the record or encoding it again. Every call is authenticated and
// authorized (service/call_authorization.h) before the handler sees it.
using RawTrainingJobService = v1::TrainingJobService::WithRawCallbackMethod_CreateTrainingJob<
    v1::TrainingJobService::WithRawCallbackMethod_DescribeTrainingJob<
        v1::TrainingJobService::WithRawCallbackMethod_ListTrainingJobs<
            v1::TrainingJobService::WithRawCallbackMethod_UpdateTrainingJob<
                v1::TrainingJobService::WithRawCallbackMethod_StopTrainingJob<
                    v1::TrainingJobService::WithRawCallbackMethod_DeleteTrainingJob<
                        v1::TrainingJobService::WithRawCallbackMethod_WatchTrainingJob<
                            v1::TrainingJobService::Service>>>>>>>;

class TrainingJobServiceImpl final : public RawTrainingJobService,
                                     private GrpcAdapter<core::TrainingJobHandler> {
 public:
  // `authenticator` null: authentication off.
  // REQUIRES: `handler` and `authenticator` outlive the service and every
  // call it serves.
  TrainingJobServiceImpl(core::TrainingJobHandler* handler, StreamLimits watch_limits,
                         const auth::Authenticator* authenticator = nullptr)
      : GrpcAdapter(handler, authenticator), watch_limits_(std::move(watch_limits)) {}

  DEBUGPLANE_RAW_UNARY_METHOD(CreateTrainingJob);
  DEBUGPLANE_RAW_UNARY_METHOD(DescribeTrainingJob);
  DEBUGPLANE_RAW_UNARY_METHOD(ListTrainingJobs);
  DEBUGPLANE_RAW_UNARY_METHOD(UpdateTrainingJob);
  DEBUGPLANE_RAW_UNARY_METHOD(StopTrainingJob);
  DEBUGPLANE_RAW_UNARY_METHOD(DeleteTrainingJob);
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchTrainingJob(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;

 private:
  const StreamLimits watch_limits_;
};

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_TRAINING_JOB_SERVICE_H_
