// The gRPC adapter of TensorQueryService: thin. Both methods are registered
// raw (raw_call.h) and completed by a rules_engine::TensorQueryHandler,
// which reads the trial on its own pool; the adapter never reads on a gRPC
// callback thread. GetTensorValues writes the handler's batches one at a
// time, each after the previous write completed.

#ifndef DEBUGPLANE_SERVICE_TENSOR_QUERY_SERVICE_H_
#define DEBUGPLANE_SERVICE_TENSOR_QUERY_SERVICE_H_

#include "debugplane/v1/tensor_query.grpc.pb.h"
#include "rules_engine/query_handler/tensor_query_handler.h"
#include "service/auth/auth.h"
#include "service/grpc_adapter.h"
#include "service/raw_call.h"

namespace debugplane::service {

class TensorQueryServiceImpl final
    : public v1::TensorQueryService::WithRawCallbackMethod_ListTensors<
          v1::TensorQueryService::WithRawCallbackMethod_GetTensorValues<
              v1::TensorQueryService::Service>>,
      private GrpcAdapter<rules_engine::TensorQueryHandler> {
 public:
  // REQUIRES: `handler` outlives the service and every call it serves.
  // `authenticator` null: every caller may query (authentication off).
  TensorQueryServiceImpl(rules_engine::TensorQueryHandler* handler,
                         const auth::Authenticator* authenticator)
      : GrpcAdapter(handler, authenticator) {}

  DEBUGPLANE_RAW_UNARY_METHOD(ListTensors);
  grpc::ServerWriteReactor<grpc::ByteBuffer>* GetTensorValues(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
};

// The one place where a caller of TensorQueryService is authorized: both
// methods are read-only (role reader, for the job named). Returns OK or the
// error to finish the call with (PERMISSION_DENIED / UNAUTHENTICATED).
absl::Status AuthorizeTensorQuery(const auth::Authenticator* authenticator,
                                  grpc::CallbackServerContext* context, absl::string_view method,
                                  absl::string_view training_job_name);

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_TENSOR_QUERY_SERVICE_H_
