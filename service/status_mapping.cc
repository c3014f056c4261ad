#include "service/status_mapping.h"

#include <string>

#include "google/rpc/status.pb.h"

namespace debugplane::service {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const auto code = static_cast<grpc::StatusCode>(status.code());
  const std::string message(status.message());
  google::rpc::Status details;
  status.ForEachPayload([&details](absl::string_view type_url, const absl::Cord& payload) {
    // Only google.rpc error detail types are meant for clients.
    if (type_url.rfind("type.googleapis.com/google.rpc.", 0) != 0) return;
    auto* any = details.add_details();
    any->set_type_url(std::string(type_url));
    any->set_value(std::string(payload));
  });
  if (details.details().empty()) return grpc::Status(code, message);
  details.set_code(static_cast<int>(code));
  details.set_message(message);
  return grpc::Status(code, message, details.SerializeAsString());
}

}  // namespace debugplane::service
