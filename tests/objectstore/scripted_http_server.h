// ScriptedHttpServer: a tiny HTTP/1.1 server on a free loopback port that
// answers each request with the next of a list of canned replies (the last
// one repeats) and records the requests, for what a real S3 server cannot
// be made to do on demand: 503 SlowDown, 429, malformed replies.
// One request per connection (it answers "Connection: close"), or, with
// keep_alive, every request of a connection until the client closes it
// (one connection at a time).

#ifndef DEBUGPLANE_TESTS_OBJECTSTORE_SCRIPTED_HTTP_SERVER_H_
#define DEBUGPLANE_TESTS_OBJECTSTORE_SCRIPTED_HTTP_SERVER_H_

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace debugplane::testing {

class ScriptedHttpServer {
 public:
  struct Reply {
    int status = 200;
    std::string body;
    std::vector<std::string> headers;  // "Name: value"
  };

  // Listens on 127.0.0.1 at a free port and serves from a thread.
  explicit ScriptedHttpServer(std::vector<Reply> replies, bool keep_alive = false);
  ~ScriptedHttpServer();

  // "http://127.0.0.1:PORT".
  std::string endpoint() const;
  int port() const { return port_; }
  // The requests so far: request line and headers, as received.
  std::vector<std::string> requests() const;
  // The connections accepted so far.
  int connections() const;

 private:
  void Serve();
  // Answers the next request of `connection` (`pending`: bytes read past
  // the previous one); false when the connection is done.
  bool Answer(int connection, std::string* pending);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::vector<Reply> replies_;
  const bool keep_alive_;
  mutable absl::Mutex mu_;
  std::vector<std::string> requests_ ABSL_GUARDED_BY(mu_);
  int connections_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

// An S3 error reply body: <Error><Code>code</Code><Message>message</Message>.
std::string S3ErrorBody(absl::string_view code, absl::string_view message);

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_OBJECTSTORE_SCRIPTED_HTTP_SERVER_H_
