// StreamWriter: the server side of a server-streaming RPC whose messages
// come from threads debugplane owns (the job manager's) and must not block
// them. One write is in flight at a time; messages that arrive meanwhile are
// merged into one pending message (the subclass decides how: coalesce
// changes, or keep the latest), so a slow reader costs bounded memory.
// The stream finishes exactly once: with End's status after the last write,
// or CANCELLED when the client goes away.

#ifndef DEBUGPLANE_SERVICE_STREAM_WRITER_H_
#define DEBUGPLANE_SERVICE_STREAM_WRITER_H_

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"

namespace debugplane::service {

template <typename Message>
class StreamWriter : public grpc::ServerWriteReactor<Message> {
 public:
  // Sends `message` (or merges it into the one waiting). Ignored after End,
  // Finish or cancellation. Thread-safe; does not block.
  void Push(std::shared_ptr<const Message> message) {
    absl::MutexLock lock(&mu_);
    if (finished_ || ended_ || cancelled_) return;
    if (in_flight_ == nullptr) {
      in_flight_ = std::move(message);
      this->StartWrite(in_flight_.get());
      return;
    }
    pending_ = pending_ == nullptr ? std::move(message) : Merge(pending_, std::move(message));
  }

  // Finishes with `status` once what was pushed is written. Thread-safe;
  // the first call wins.
  void End(grpc::Status status) {
    absl::MutexLock lock(&mu_);
    if (finished_ || ended_) return;
    ended_ = true;
    end_status_ = std::move(status);
    if (in_flight_ == nullptr) FinishLocked(end_status_);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    in_flight_ = nullptr;
    if (finished_) return;
    // The client went away. gRPC does not order OnCancel and the completion
    // of a write in flight: if OnCancel came first it left the finishing to
    // this write, which may still have succeeded (ok), and no reaction
    // follows. Not finishing here would leave the stream registered until the
    // job ends, and GrpcServer::Shutdown waiting for it.
    if (!ok || cancelled_) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "stream closed by the client"));
      return;
    }
    if (pending_ != nullptr) {
      in_flight_ = std::move(pending_);
      this->StartWrite(in_flight_.get());
    } else if (ended_) {
      FinishLocked(end_status_);
    }
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    // With a write in flight, its OnWriteDone finishes (gRPC allows one
    // write at a time, and Finish after it).
    if (!finished_ && in_flight_ == nullptr) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    }
  }

  void OnDone() override {
    // Whatever feeds the stream is detached first: afterwards nothing calls
    // Push or End.
    Detach();
    delete this;
  }

 protected:
  // The message to send instead of `pending` followed by `next`.
  virtual std::shared_ptr<const Message> Merge(std::shared_ptr<const Message> pending,
                                               std::shared_ptr<const Message> next) = 0;
  // Stops the source of messages (e.g. unregisters a watcher); called once,
  // from OnDone, before the object is deleted.
  virtual void Detach() = 0;

 private:
  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    pending_ = nullptr;
    this->Finish(std::move(status));
  }

  absl::Mutex mu_;
  std::shared_ptr<const Message> in_flight_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Message> pending_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_STREAM_WRITER_H_
