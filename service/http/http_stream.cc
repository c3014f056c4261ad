#include "service/http/http_stream.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace debugplane::service::http {

void StreamState::WakeLocked() {
  if (connection != nullptr && suspended) {
    suspended = false;
    MHD_resume_connection(connection);
  }
}

void StreamState::Finish() {
  std::function<void()> callback;
  {
    absl::MutexLock lock(&mu);
    if (done) return;
    done = true;
    connection = nullptr;
    pending.clear();
    sent = 0;
    callback = std::move(on_closed);
  }
  if (callback) callback();
}

bool StreamRegistry::Add(const std::shared_ptr<StreamState>& stream) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return false;
  // Forget streams that ended, so the list stays as long as the open ones.
  std::erase_if(streams_, [](const std::weak_ptr<StreamState>& s) { return s.expired(); });
  streams_.push_back(stream);
  return true;
}

void StreamRegistry::CloseAll() {
  std::vector<std::weak_ptr<StreamState>> streams;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    streams.swap(streams_);
  }
  for (const auto& weak : streams) {
    if (std::shared_ptr<StreamState> stream = weak.lock()) {
      absl::MutexLock lock(&stream->mu);
      stream->closing = true;
      stream->WakeLocked();
    }
  }
}

bool QueuedStream::Write(std::string chunk) {
  absl::MutexLock lock(&state_->mu);
  if (state_->closing || state_->cut_off || state_->done) return false;
  if (chunk.empty()) return true;
  const size_t queued = state_->pending.size() - state_->sent;
  if (queued + chunk.size() > state_->max_queue_bytes) {
    CutOffLocked();
    return false;
  }
  if (state_->sent > 0 && state_->sent == state_->pending.size()) {
    state_->pending.clear();
    state_->sent = 0;
  }
  state_->pending.append(chunk);
  state_->WakeLocked();
  return true;
}

void QueuedStream::CutOffLocked() {
  state_->cut_off = true;
  state_->pending.clear();
  state_->sent = 0;
  if (state_->connection != nullptr && !state_->suspended) {
    // libmicrohttpd waits for the socket to take more bytes, which a
    // client that does not read never lets happen: shutting the socket
    // down (libmicrohttpd still owns and closes it) ends that wait.
    const MHD_ConnectionInfo* info =
        MHD_get_connection_info(state_->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info != nullptr) shutdown(info->connect_fd, SHUT_RDWR);
  }
  state_->WakeLocked();
}

void QueuedStream::Close() {
  absl::MutexLock lock(&state_->mu);
  state_->closing = true;
  state_->WakeLocked();
}

bool QueuedStream::closed() const {
  absl::MutexLock lock(&state_->mu);
  return state_->closing || state_->cut_off || state_->done;
}

void QueuedStream::SetOnClosed(std::function<void()> callback) {
  {
    absl::MutexLock lock(&state_->mu);
    if (!state_->done) {
      state_->on_closed = std::move(callback);
      return;
    }
  }
  callback();
}

ssize_t ReadStream(void* cls, uint64_t, char* buf, size_t max) {
  StreamState& state = **static_cast<std::shared_ptr<StreamState>*>(cls);
  absl::MutexLock lock(&state.mu);
  if (state.cut_off) return MHD_CONTENT_READER_END_WITH_ERROR;
  const size_t left = state.pending.size() - state.sent;
  if (left > 0) {
    const size_t copied = std::min(left, max);
    std::memcpy(buf, state.pending.data() + state.sent, copied);
    state.sent += copied;
    if (state.sent == state.pending.size()) {
      state.pending.clear();
      state.sent = 0;
    }
    return static_cast<ssize_t>(copied);
  }
  if (state.closing || state.connection == nullptr) return MHD_CONTENT_READER_END_OF_STREAM;
  // Allowed from a content reader; returning 0 with the connection
  // suspended is how libmicrohttpd waits without polling.
  state.suspended = true;
  MHD_suspend_connection(state.connection);
  return 0;
}

void FreeStreamBox(void* cls) { delete static_cast<std::shared_ptr<StreamState>*>(cls); }

}  // namespace debugplane::service::http
