// The HTTP server's streamed replies (HttpResponder::StartStream): the
// state a stream shares between the handler that writes it (any thread)
// and libmicrohttpd's content reader (its thread), the HttpStream handed to
// the handler, and the registry through which Shutdown ends every stream.
// Internal to service/http (http_server.cc and http_exchange.cc).
//
// Threading contract: every method may be called from any thread and none
// blocks; StreamState's fields are guarded by its `mu`. A connection with
// nothing to send is suspended (MHD_suspend_connection) and resumed by the
// next write, close or shutdown, so no thread is held per stream.

#ifndef DEBUGPLANE_SERVICE_HTTP_HTTP_STREAM_H_
#define DEBUGPLANE_SERVICE_HTTP_HTTP_STREAM_H_

#include <microhttpd.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "service/http/http_server.h"

namespace debugplane::service::http {

// One streamed reply, shared by its HttpStream (any thread), libmicrohttpd's
// content reader (its thread) and the exchange.
struct StreamState {
  explicit StreamState(size_t max_queue_bytes) : max_queue_bytes(max_queue_bytes) {}

  const size_t max_queue_bytes;
  absl::Mutex mu;
  // Set when the reply is queued, null once libmicrohttpd is done with it.
  MHD_Connection* connection ABSL_GUARDED_BY(mu) = nullptr;
  // The content reader found nothing to send and suspended the connection.
  bool suspended ABSL_GUARDED_BY(mu) = false;
  // Written, not yet handed to libmicrohttpd: pending.substr(sent).
  std::string pending ABSL_GUARDED_BY(mu);
  size_t sent ABSL_GUARDED_BY(mu) = 0;
  bool closing ABSL_GUARDED_BY(mu) = false;  // Close: end after `pending`.
  bool cut_off ABSL_GUARDED_BY(mu) = false;  // Queue overflow: drop the connection.
  bool done ABSL_GUARDED_BY(mu) = false;     // The connection is finished.
  std::function<void()> on_closed ABSL_GUARDED_BY(mu);

  // Lets libmicrohttpd call the content reader again if it is waiting.
  void WakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // The connection is finished: refuse writes and call the callback.
  void Finish();
};

// The streams a server has started, so that Shutdown ends them (an open
// stream would otherwise keep its connection, suspended, past the grace).
class StreamRegistry {
 public:
  // False once the server shuts down (the stream is then not added).
  bool Add(const std::shared_ptr<StreamState>& stream);

  // Closes every stream (each ends after what was written) and refuses
  // new ones.
  void CloseAll();

 private:
  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::weak_ptr<StreamState>> streams_ ABSL_GUARDED_BY(mu_);
};

// The HttpStream a handler writes to (see HttpStream for the contract).
// Destroying it closes the stream.
class QueuedStream final : public HttpStream {
 public:
  explicit QueuedStream(std::shared_ptr<StreamState> state) : state_(std::move(state)) {}
  ~QueuedStream() override { Close(); }

  bool Write(std::string chunk) override;
  void Close() override;
  bool closed() const override;
  void SetOnClosed(std::function<void()> callback) override;

 private:
  // The client does not keep up: drop it rather than buffer forever.
  void CutOffLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu);

  const std::shared_ptr<StreamState> state_;
};

// libmicrohttpd's content reader of a stream (`cls`: a heap-allocated
// std::shared_ptr<StreamState>, freed by FreeStreamBox): what was written,
// or, with nothing to send, a suspended connection until the next write.
ssize_t ReadStream(void* cls, uint64_t position, char* buf, size_t max);
void FreeStreamBox(void* cls);

}  // namespace debugplane::service::http

#endif  // DEBUGPLANE_SERVICE_HTTP_HTTP_STREAM_H_
