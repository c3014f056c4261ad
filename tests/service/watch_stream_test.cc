// WatchTrainingJob streams on the real gRPC adapter (service::GrpcServer,
// TrainingJobServiceImpl), fed by a handler the test drives, so the stream's
// life on the server can be observed: every stream a client ends must end on
// the server too (its registration is released), or it leaks and
// GrpcServer::Shutdown waits for it forever.

#include <chrono>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "service/server.h"

namespace debugplane {
namespace {

// Serves only WatchTrainingJob, like the job manager does: the current state
// at once, later events when the test pushes them, under the handler's lock.
class WatchOnlyHandler final : public core::TrainingJobHandler {
 public:
  void CreateTrainingJob(const v1::CreateTrainingJobRequest&, v1::CreateTrainingJobResponse*,
                         core::DoneCallback done) override {
    std::move(done)(absl::UnimplementedError("watch only"));
  }
  void DescribeTrainingJob(const v1::DescribeTrainingJobRequest&, v1::DescribeTrainingJobResponse*,
                           core::DoneCallback done) override {
    std::move(done)(absl::UnimplementedError("watch only"));
  }
  void ListTrainingJobs(const v1::ListTrainingJobsRequest&, v1::ListTrainingJobsResponse*,
                        core::DoneCallback done) override {
    std::move(done)(absl::UnimplementedError("watch only"));
  }
  void UpdateTrainingJob(const v1::UpdateTrainingJobRequest&, v1::UpdateTrainingJobResponse*,
                         core::DoneCallback done) override {
    std::move(done)(absl::UnimplementedError("watch only"));
  }
  void StopTrainingJob(const v1::StopTrainingJobRequest&, v1::StopTrainingJobResponse*,
                       core::DoneCallback done) override {
    std::move(done)(absl::UnimplementedError("watch only"));
  }
  void DeleteTrainingJob(const v1::DeleteTrainingJobRequest&, v1::DeleteTrainingJobResponse*,
                         core::DoneCallback done) override {
    std::move(done)(absl::UnimplementedError("watch only"));
  }

  absl::StatusOr<std::unique_ptr<core::WatchRegistration>> WatchTrainingJob(
      const v1::WatchTrainingJobRequest& request, core::JobWatcher* watcher) override {
    absl::MutexLock lock(&mu_);
    watcher->OnEvent(Event(request.training_job_name(), v1::StatusChange::KIND_INITIAL_STATE));
    watchers_.push_back(watcher);
    return std::make_unique<Registration>(this, watcher);
  }

  // An event to the newest watcher only: a write to an older, leaked stream
  // would fail and end it, hiding the leak.
  void PushToNewest() {
    absl::MutexLock lock(&mu_);
    if (!watchers_.empty()) {
      watchers_.back()->OnEvent(Event("job", v1::StatusChange::KIND_DEBUG_RULE_STATUS));
    }
  }

  // Ends every stream still registered (as the manager does at shutdown).
  void EndAll() {
    absl::MutexLock lock(&mu_);
    for (core::JobWatcher* watcher : watchers_) {
      watcher->OnEnd(absl::UnavailableError("test over"));
    }
  }

  // Streams whose registration the adapter still holds.
  size_t registered() {
    absl::MutexLock lock(&mu_);
    return watchers_.size();
  }

  bool AwaitNoneRegistered(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
        absl::Condition(
            +[](std::vector<core::JobWatcher*>* watchers) { return watchers->empty(); },
            &watchers_),
        timeout);
  }

 private:
  class Registration final : public core::WatchRegistration {
   public:
    Registration(WatchOnlyHandler* handler, core::JobWatcher* watcher)
        : handler_(handler), watcher_(watcher) {}
    ~Registration() override {
      absl::MutexLock lock(&handler_->mu_);
      auto& watchers = handler_->watchers_;
      watchers.erase(std::remove(watchers.begin(), watchers.end(), watcher_), watchers.end());
    }

   private:
    WatchOnlyHandler* handler_;
    core::JobWatcher* watcher_;
  };

  static std::shared_ptr<const v1::WatchTrainingJobResponse> Event(const std::string& job,
                                                                   v1::StatusChange::Kind kind) {
    auto event = std::make_shared<v1::WatchTrainingJobResponse>();
    event->set_training_job_name(job);
    event->add_changes()->set_kind(kind);
    return event;
  }

  absl::Mutex mu_;
  std::vector<core::JobWatcher*> watchers_ ABSL_GUARDED_BY(mu_);
};

// A client that stops reading once it has what it waited for (as
// bench/detection_latency_bench.cc does on IssuesFound) cancels right after a
// write arrived: on the server, OnCancel may then run before that write's
// OnWriteDone(ok=true). The stream must still finish.
TEST(WatchStreamTest, StreamsCancelledRightAfterAnEventAllEndOnTheServer) {
  WatchOnlyHandler handler;
  service::GrpcServerOptions options;
  options.listen_address = "127.0.0.1:0";
  auto server = service::GrpcServer::Start(options, &handler);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::TrainingJobService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->port()), grpc::InsecureChannelCredentials()));

  constexpr int kStreams = 1000;
  for (int i = 0; i < kStreams; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::WatchTrainingJobRequest request;
    request.set_training_job_name("job");
    auto stream = stub->WatchTrainingJob(&context, request);
    v1::WatchTrainingJobResponse event;
    ASSERT_TRUE(stream->Read(&event)) << "stream " << i;  // The current state.
    handler.PushToNewest();
    ASSERT_TRUE(stream->Read(&event)) << "stream " << i;
    context.TryCancel();
    (void)stream->Finish();
  }

  const bool all_ended = handler.AwaitNoneRegistered(absl::Seconds(10));
  const size_t leaked = handler.registered();
  // End the leaked streams, or the server's shutdown below would wait for
  // them forever (the hang the detection-latency bench hit).
  handler.EndAll();
  EXPECT_TRUE(all_ended) << leaked << " of " << kStreams
                         << " streams cancelled by their client never ended on the server";
  (*server)->Shutdown(absl::ZeroDuration());
  (*server)->Wait();
}

// A client that never reads: the server keeps at most
// watch_limits.max_pending_bytes of merged changes for it, then ends the
// stream with RESOURCE_EXHAUSTED instead of growing (200 such streams used
// to take 178 MB and slow every change of the job down 70 times).
TEST(WatchStreamTest, AClientThatDoesNotReadIsEndedWithResourceExhaustedAtTheLimit) {
  WatchOnlyHandler handler;
  service::GrpcServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.watch_limits.max_pending_bytes = 4096;
  auto server = service::GrpcServer::Start(options, &handler);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::TrainingJobService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->port()), grpc::InsecureChannelCredentials()));

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::WatchTrainingJobRequest request;
  request.set_training_job_name("job");
  auto stream = stub->WatchTrainingJob(&context, request);
  v1::WatchTrainingJobResponse event;
  ASSERT_TRUE(stream->Read(&event));  // Registered.

  // Far more than the transport buffers for a reader that does not read.
  constexpr int kEvents = 200000;
  for (int i = 0; i < kEvents; ++i) handler.PushToNewest();

  int changes_received = 0;
  while (stream->Read(&event)) changes_received += event.changes_size();
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("fell behind"));
  EXPECT_LT(changes_received, kEvents);
  EXPECT_TRUE(handler.AwaitNoneRegistered(absl::Seconds(10)));
  (*server)->Shutdown(absl::ZeroDuration());
  (*server)->Wait();
}

// A reader that is merely slow loses nothing: everything pushed while a
// write was in flight arrives, merged, in order.
TEST(WatchStreamTest, ASlowReaderGetsEveryChangeMerged) {
  WatchOnlyHandler handler;
  service::GrpcServerOptions options;
  options.listen_address = "127.0.0.1:0";
  auto server = service::GrpcServer::Start(options, &handler);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::TrainingJobService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::WatchTrainingJobRequest request;
  request.set_training_job_name("job");
  auto stream = stub->WatchTrainingJob(&context, request);
  v1::WatchTrainingJobResponse event;
  ASSERT_TRUE(stream->Read(&event));

  constexpr int kEvents = 5000;
  for (int i = 0; i < kEvents; ++i) handler.PushToNewest();
  int changes_received = 0;
  while (changes_received < kEvents && stream->Read(&event)) {
    changes_received += event.changes_size();
  }
  EXPECT_EQ(changes_received, kEvents);
  handler.EndAll();
  (void)stream->Finish();
  (*server)->Shutdown(absl::ZeroDuration());
  (*server)->Wait();
}

}  // namespace
}  // namespace debugplane
