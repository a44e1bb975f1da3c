// The daemon serves the standard grpc.health.v1.Health service (no token needed): SERVING
// while it runs, NOT_FOUND for a service name it does not know.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/daemon.h"
#include "tests/common/temp_dir.h"

namespace tune::test {
namespace {

/// grpc.health.v1.HealthCheckRequest with `service` (field 1, a string), encoded by hand.
grpc::ByteBuffer HealthRequest(const std::string& service) {
  std::string bytes;
  if (!service.empty()) {
    bytes.push_back(0x0a);
    bytes.push_back(static_cast<char>(service.size()));
    bytes += service;
  }
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

/// Calls grpc.health.v1.Health/Check; the status, and the response's bytes in `reply`.
grpc::Status HealthCheck(grpc::GenericStub& stub, const std::string& service, std::string* reply) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  const grpc::ByteBuffer request = HealthRequest(service);
  grpc::ByteBuffer response;
  grpc::Status status;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                 &response, [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = s;
                   done = true;
                   cv.notify_all();
                 });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  std::vector<grpc::Slice> slices;
  reply->clear();
  if (status.ok() && response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) reply->append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return status;
}

TEST(GrpcHealthTest, ServingWhileTheDaemonRuns) {
  TempDir dir;
  server::DaemonOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = dir.Join("records.db");
  o.token = "health-token";  // the standard health service is answered without it
  server::Daemon daemon(o);
  auto port = daemon.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  grpc::GenericStub stub(grpc::CreateChannel("127.0.0.1:" + std::to_string(*port), grpc::InsecureChannelCredentials()));
  std::string reply;
  grpc::Status st = HealthCheck(stub, "", &reply);
  ASSERT_TRUE(st.ok()) << st.error_code() << " " << st.error_message();
  // HealthCheckResponse{status: SERVING (1)}: field 1, varint 1.
  EXPECT_EQ(reply, std::string("\x08\x01", 2));
  st = HealthCheck(stub, "no.such.Service", &reply);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
  daemon.Shutdown();
}

}  // namespace
}  // namespace tune::test
