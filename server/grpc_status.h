// The one place where absl::Status and grpc::Status are translated, and the token check.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"

namespace tune::server {

/// absl::Status -> grpc::Status with the same code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

/// grpc::Status -> absl::Status; `what` prefixes the message ("daemon at ADDR: ...").
absl::Status FromGrpcStatus(const grpc::Status& status, const std::string& what);

/// OK when `token` is empty or the call carries "authorization: Bearer <token>";
/// Unauthenticated otherwise. Compares in time independent of where the tokens differ.
absl::Status CheckToken(const grpc::ServerContextBase& context, const std::string& token);

/// Adds the token to a client call's metadata (nothing for an empty token) and, for
/// `deadline_s` > 0, a deadline that many seconds from now.
void AttachToken(grpc::ClientContext& context, const std::string& token, double deadline_s = 0);

}  // namespace tune::server
