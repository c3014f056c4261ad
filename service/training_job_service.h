// The gRPC adapter of TrainingJobService: thin. Each RPC gets one reactor
// that hands the request to a core::TrainingJobHandler and finishes exactly
// once with the handler's status mapped to a real gRPC code.

#ifndef DEBUGPLANE_SERVICE_TRAINING_JOB_SERVICE_H_
#define DEBUGPLANE_SERVICE_TRAINING_JOB_SERVICE_H_

#include "core/training_job_handler.h"
#include "debugplane/v1/training_job.grpc.pb.h"

namespace debugplane::service {

// DescribeTrainingJob, the hot read, is a raw method: it sends the job's
// committed bytes (encoded once per change, shared) without copying the record
// or encoding it again.
class TrainingJobServiceImpl final
    : public v1::TrainingJobService::WithRawCallbackMethod_DescribeTrainingJob<
          v1::TrainingJobService::CallbackService> {
 public:
  // REQUIRES: `handler` outlives the service and every call it serves.
  explicit TrainingJobServiceImpl(core::TrainingJobHandler* handler) : handler_(handler) {}

  grpc::ServerUnaryReactor* CreateTrainingJob(grpc::CallbackServerContext* context,
                                              const v1::CreateTrainingJobRequest* request,
                                              v1::CreateTrainingJobResponse* response) override;
  grpc::ServerUnaryReactor* DescribeTrainingJob(grpc::CallbackServerContext* context,
                                                const grpc::ByteBuffer* request,
                                                grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListTrainingJobs(grpc::CallbackServerContext* context,
                                             const v1::ListTrainingJobsRequest* request,
                                             v1::ListTrainingJobsResponse* response) override;
  grpc::ServerUnaryReactor* UpdateTrainingJob(grpc::CallbackServerContext* context,
                                              const v1::UpdateTrainingJobRequest* request,
                                              v1::UpdateTrainingJobResponse* response) override;
  grpc::ServerUnaryReactor* StopTrainingJob(grpc::CallbackServerContext* context,
                                            const v1::StopTrainingJobRequest* request,
                                            v1::StopTrainingJobResponse* response) override;
  grpc::ServerUnaryReactor* DeleteTrainingJob(grpc::CallbackServerContext* context,
                                              const v1::DeleteTrainingJobRequest* request,
                                              v1::DeleteTrainingJobResponse* response) override;
  grpc::ServerWriteReactor<v1::WatchTrainingJobResponse>* WatchTrainingJob(
      grpc::CallbackServerContext* context, const v1::WatchTrainingJobRequest* request) override;

 private:
  core::TrainingJobHandler* const handler_;
};

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_TRAINING_JOB_SERVICE_H_
