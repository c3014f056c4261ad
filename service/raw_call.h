// Raw (ByteBuffer) calls: debugplane decodes every request itself.
//
// With generated message types, gRPC answers a request body that does not
// decode with UNIMPLEMENTED and no message, before any of our code runs; a
// client then cannot tell a wrong body from a missing method. Every method
// is therefore registered raw, and these helpers decode the request, answer
// INVALID_ARGUMENT naming the method and the message type when it does not
// decode, and encode the response.

#ifndef DEBUGPLANE_SERVICE_RAW_CALL_H_
#define DEBUGPLANE_SERVICE_RAW_CALL_H_

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/manager/training_job_handler.h"
#include "google/protobuf/arena.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "service/status_mapping.h"

namespace debugplane::service {

// Declares, in an adapter class, its override of the raw unary method
// `Method` (WithRawCallbackMethod_<Method>): one spelling for every
// adapter's unary methods.
#define DEBUGPLANE_RAW_UNARY_METHOD(Method)                                                     \
  grpc::ServerUnaryReactor* Method(grpc::CallbackServerContext* context,                        \
                                   const grpc::ByteBuffer* request, grpc::ByteBuffer* response) \
      override

// The first arena block of a unary call, inside the call's own allocation.
// Most requests decode into it; a larger one takes further blocks from the
// heap.
inline constexpr size_t kRawCallArenaBlockBytes = 8192;

// Decodes `raw` into `request` (which may live on an arena). Returns
// INVALID_ARGUMENT naming `method`, the message type and the body's size if
// it is not a `Request` (for example JSON sent without a JSON codec, or a
// message of another method).
template <typename Request>
absl::Status DecodeRequestInto(const grpc::ByteBuffer& raw, absl::string_view method,
                               Request* request) {
  grpc::ByteBuffer copy(raw);  // Shares the slices; decoding consumes its input.
  const size_t size = raw.Length();
  grpc::Status decoded = grpc::GenericDeserialize<grpc::ProtoBufferReader, Request>(&copy, request);
  if (!decoded.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        method, ": the request body (", size, " bytes) is not a valid ",
        Request::descriptor()->full_name(),
        " in the protobuf wire format; a JSON client needs a gRPC JSON codec (grpcurl, buf "
        "curl) or the HTTP API"));
  }
  return absl::OkStatus();
}

// As DecodeRequestInto, into a new heap-allocated `Request`.
template <typename Request>
absl::StatusOr<std::unique_ptr<Request>> DecodeRequest(const grpc::ByteBuffer& raw,
                                                       absl::string_view method) {
  auto request = std::make_unique<Request>();
  if (absl::Status decoded = DecodeRequestInto(raw, method, request.get()); !decoded.ok()) {
    return decoded;
  }
  return request;
}

// Encodes `message` into `raw`. Returns false only if protobuf refuses it
// (over 2 GiB).
template <typename Message>
bool EncodeMessage(const Message& message, grpc::ByteBuffer* raw) {
  bool own_buffer = false;
  return grpc::GenericSerialize<grpc::ProtoBufferWriter, Message>(message, raw, &own_buffer).ok();
}

// Serves one unary call: decodes the request, calls `invoke(request,
// response, done)` (a handler method that completes `done` inline or later,
// on any thread), then encodes the response and finishes the default reactor
// exactly once. The request and response live until `done` runs.
template <typename Request, typename Response, typename Invoke>
grpc::ServerUnaryReactor* ServeRawUnary(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* raw_request,
                                        grpc::ByteBuffer* raw_response, absl::string_view method,
                                        Invoke invoke) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The request and the response live on one arena, its first block inside
  // the call: decoding a request is then a handful of allocations instead
  // of one per string, map entry and nested message, and the call is freed
  // at once by whichever thread completes it (a Create's `done` runs on the
  // job manager's committer, which would otherwise free every piece of a
  // request another thread allocated).
  struct Call {
    static google::protobuf::ArenaOptions Options(char* block, size_t size) {
      google::protobuf::ArenaOptions options;
      options.initial_block = block;
      options.initial_block_size = size;
      return options;
    }
    Call() : arena(Options(first_block, sizeof(first_block))) {}
    alignas(std::max_align_t) char first_block[kRawCallArenaBlockBytes];
    google::protobuf::Arena arena;
    Request* request = google::protobuf::Arena::CreateMessage<Request>(&arena);
    Response* response = google::protobuf::Arena::CreateMessage<Response>(&arena);
  };
  auto call = std::make_shared<Call>();
  if (absl::Status decoded = DecodeRequestInto(*raw_request, method, call->request);
      !decoded.ok()) {
    reactor->Finish(ToGrpcStatus(decoded));
    return reactor;
  }
  const Request& request_ref = *call->request;
  Response* response = call->response;
  invoke(request_ref, response, [reactor, raw_response, call](const absl::Status& status) {
    if (status.ok() && !EncodeMessage(*call->response, raw_response)) {
      reactor->Finish(grpc::Status(grpc::StatusCode::INTERNAL, "the response cannot be encoded"));
      return;
    }
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_RAW_CALL_H_
