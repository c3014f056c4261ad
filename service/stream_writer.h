// StreamWriter: the server side of a server-streaming RPC whose messages
// come from threads debugplane owns (the job manager's) and must not block
// them. One write is in flight at a time; messages that arrive meanwhile are
// merged into one pending message, in place (the subclass decides how:
// coalesce changes, or keep the latest).
//
// A client that stops reading must not cost the server without bound: the
// pending message is limited to StreamLimits::max_pending_bytes, and a
// stream whose write has been in flight for StreamLimits::max_stall while
// more waits is behind for good. Either way the pending message is dropped
// and the stream ends with RESOURCE_EXHAUSTED (after the write in flight),
// saying what happened and that watching again resumes from the current
// state.
//
// Messages are written raw (encoded here), as the methods are registered raw
// (see raw_call.h). The stream finishes exactly once: with End's status after
// the last write, or CANCELLED when the client goes away.

#ifndef DEBUGPLANE_SERVICE_STREAM_WRITER_H_
#define DEBUGPLANE_SERVICE_STREAM_WRITER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "service/raw_call.h"

namespace debugplane::service {

struct StreamLimits {
  // Upper bound of the encoded size of the pending (merged) message.
  size_t max_pending_bytes = 8 << 20;
  // How long a write may stay in flight while more is waiting.
  absl::Duration max_stall = absl::Seconds(120);
  // The clock; tests may replace it.
  std::function<absl::Time()> now = [] { return absl::Now(); };
};

template <typename Message>
class StreamWriter : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit StreamWriter(StreamLimits limits = {}) : limits_(std::move(limits)) {}

  // Sends `message` (or merges it into the one waiting). Ignored after End,
  // Finish or cancellation. Thread-safe; does not block.
  void Push(std::shared_ptr<const Message> message) {
    absl::MutexLock lock(&mu_);
    if (finished_ || ended_ || cancelled_) return;
    if (!writing_) {
      StartWriteLocked(*message);
      return;
    }
    const size_t added = message->ByteSizeLong();
    if (pending_ == nullptr) {
      pending_ = std::move(message);
      pending_bytes_ = added;
      pending_messages_ = 1;
    } else {
      if (owned_pending_ == nullptr) {
        // Copied once; from then on every merge works in place.
        owned_pending_ = std::make_shared<Message>(*pending_);
        pending_ = owned_pending_;
      }
      MergeInto(*owned_pending_, *message);
      pending_bytes_ += added;  // An upper bound: merging replaces state.
      ++pending_messages_;
    }
    const absl::Duration stalled = limits_.now() - write_started_;
    if (pending_bytes_ > limits_.max_pending_bytes || stalled > limits_.max_stall) {
      FallBehindLocked(stalled);
    }
  }

  // Finishes with `status` once what was pushed is written. Thread-safe;
  // the first call wins.
  void End(grpc::Status status) {
    absl::MutexLock lock(&mu_);
    EndLocked(std::move(status));
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
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
      std::shared_ptr<const Message> next = std::move(pending_);
      ClearPendingLocked();
      StartWriteLocked(*next);
    } else if (ended_) {
      FinishLocked(end_status_);
    }
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    // With a write in flight, its OnWriteDone finishes (gRPC allows one
    // write at a time, and Finish after it).
    if (!finished_ && !writing_) {
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
  // Makes `pending` stand for itself followed by `next`.
  virtual void MergeInto(Message& pending, const Message& next) = 0;
  // Stops the source of messages (e.g. unregisters a watcher); called once,
  // from OnDone, before the object is deleted.
  virtual void Detach() = 0;

 private:
  // REQUIRES: mu_ is held and no write is in flight.
  void StartWriteLocked(const Message& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    mu_.AssertHeld();
    in_flight_.Clear();
    if (!EncodeMessage(message, &in_flight_)) {
      EndLocked(grpc::Status(grpc::StatusCode::INTERNAL, "a stream message cannot be encoded"));
      return;
    }
    writing_ = true;
    write_started_ = limits_.now();
    StartWrite(&in_flight_);
  }

  void FallBehindLocked(absl::Duration stalled) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::string why = absl::StrCat(
        "the client fell behind: it has not taken a message for ",
        absl::FormatDuration(absl::Trunc(stalled, absl::Milliseconds(1))), " while ",
        pending_messages_, " more (about ", pending_bytes_,
        " bytes) waited; they were dropped. Watch again to continue from the current state");
    ClearPendingLocked();
    EndLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, why));
  }

  void EndLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || ended_) return;
    ended_ = true;
    end_status_ = std::move(status);
    if (!writing_) FinishLocked(end_status_);
  }

  void ClearPendingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    pending_ = nullptr;
    owned_pending_ = nullptr;
    pending_bytes_ = 0;
    pending_messages_ = 0;
  }

  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    ClearPendingLocked();
    Finish(std::move(status));
  }

  const StreamLimits limits_;
  absl::Mutex mu_;
  grpc::ByteBuffer in_flight_ ABSL_GUARDED_BY(mu_);  // Valid while writing_.
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time write_started_ ABSL_GUARDED_BY(mu_);
  // What waits: shared with the job manager until a second message arrives,
  // then `owned_pending_` (the same object, mutable) takes the merges.
  std::shared_ptr<const Message> pending_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Message> owned_pending_ ABSL_GUARDED_BY(mu_);
  size_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t pending_messages_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_STREAM_WRITER_H_
