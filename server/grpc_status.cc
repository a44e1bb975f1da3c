// Status translation between absl and gRPC, and the shared-token check.
#include "server/grpc_status.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace tune::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status, const std::string& what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

absl::Status CheckToken(const grpc::ServerContextBase& context, const std::string& token) {
  if (token.empty()) return absl::OkStatus();
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return absl::UnauthenticatedError("missing token (authorization metadata)");
  const std::string expected = "Bearer " + token;
  const std::string got(it->second.data(), it->second.size());
  unsigned diff = got.size() != expected.size();
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>(expected[i]) ^ static_cast<unsigned char>(i < got.size() ? got[i] : 0);
  if (diff != 0) return absl::UnauthenticatedError("wrong token");
  return absl::OkStatus();
}

void AttachToken(grpc::ClientContext& context, const std::string& token, double deadline_s) {
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  if (deadline_s > 0)
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::microseconds(static_cast<int64_t>(deadline_s * 1e6)));
}

}  // namespace tune::server
