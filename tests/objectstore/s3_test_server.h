// S3TestServer: a real S3-compatible server (moto's) on a free loopback port
// for one test suite, started from tests/objectstore/s3_test_server.py.
//
// Start fails (it never skips) when python3 or moto's server is missing,
// saying what to install. The server process ends when this object is
// destroyed (its stdin is closed), or with the test process.

#ifndef DEBUGPLANE_TESTS_OBJECTSTORE_S3_TEST_SERVER_H_
#define DEBUGPLANE_TESTS_OBJECTSTORE_S3_TEST_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "objectstore/aws_config.h"

namespace debugplane::testing {

class S3TestServer {
 public:
  struct Options {
    // Buckets to create.
    std::vector<std::string> buckets;
    // Check every request's SigV4 signature (see s3_test_server.py for what
    // moto then refuses); each bucket then holds "signed/hello.txt".
    bool check_signatures = false;
    // The loopback port to serve on; 0: a free one. A server started again
    // on the port of one that ended is the same endpoint coming back (with
    // none of its objects: moto keeps them in memory).
    int port = 0;
    // The address to serve on; "" for 127.0.0.1. "0.0.0.0" serves on every
    // interface: for a server in a network namespace of its own, reached
    // over several links (endpoint() then names 0.0.0.0; clients use an
    // address of the namespace with port()).
    std::string host;
  };

  // Starts the server and waits (up to a minute) until it is serving.
  static absl::StatusOr<std::unique_ptr<S3TestServer>> Start(const Options& options);
  // Start for a test suite that keeps one server for the rest of the process
  // (in a function-local static; moto exits with the process): the server,
  // never destroyed, or null after a test failure that says why.
  static S3TestServer* StartForSuite(const Options& options);
  ~S3TestServer();

  const std::string& endpoint() const { return endpoint_; }
  // The port endpoint() names.
  int port() const;
  const std::string& access_key_id() const { return access_key_id_; }
  const std::string& secret_access_key() const { return secret_access_key_; }

  // A configuration for this server: its endpoint and key, path-style,
  // short timeouts and backoff so that failing tests fail fast.
  objectstore::S3Config Config() const;

  // Stores `data` at `key` in `bucket` with an unsigned PUT (only on a
  // server started without check_signatures). The key is encoded with
  // curl's own escaping, independently of the store under test.
  absl::Status Put(absl::string_view bucket, absl::string_view key, absl::string_view data) const;

 private:
  S3TestServer() = default;

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  std::string endpoint_;
  std::string access_key_id_;
  std::string secret_access_key_;
};

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_OBJECTSTORE_S3_TEST_SERVER_H_
