// Helpers of the authentication end-to-end tests: a credentials file, calls
// with a bearer token, certificates made by the openssl command.

#ifndef DEBUGPLANE_TESTS_SERVICE_AUTH_AUTH_TEST_UTIL_H_
#define DEBUGPLANE_TESTS_SERVICE_AUTH_AUTH_TEST_UTIL_H_

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "tests/service/server_process.h"

namespace debugplane::testing {

// Writes `text` to `path` with `mode` (0600: what the server accepts).
// Replaces the file whole (a temporary file renamed over it), as an operator
// rotating keys should: a reload that a previous SIGHUP started late must
// read either the old or the new file, never a half-written one.
inline void WriteCredentials(const std::filesystem::path& path, const std::string& text,
                             mode_t mode = 0600) {
  const std::filesystem::path temporary = path.string() + ".new";
  std::ofstream(temporary) << text;
  chmod(temporary.c_str(), mode);
  std::filesystem::rename(temporary, path);
}

// A context with a deadline and, unless `token` is empty, the bearer token.
inline std::unique_ptr<grpc::ClientContext> TokenContext(const std::string& token,
                                                         int seconds = 10) {
  std::unique_ptr<grpc::ClientContext> context = Context(seconds);
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
  return context;
}

// Runs a shell command quietly; true if it exited 0.
inline bool Shell(const std::string& command) {
  return std::system((command + " > /dev/null 2>&1").c_str()) == 0;
}

// A CA: <dir>/<name>.pem and <name>.key.
inline bool MakeCa(const std::filesystem::path& dir, const std::string& name) {
  const std::string base = (dir / name).string();
  return Shell(absl::StrCat("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=", name,
                            " -keyout ", base, ".key -out ", base, ".pem"));
}

// A certificate for `common_name` signed by the CA `ca`: <dir>/<name>.pem
// and <name>.key. With `server`, valid for 127.0.0.1 and localhost.
inline bool MakeSignedCertificate(const std::filesystem::path& dir, const std::string& ca,
                                  const std::string& name, const std::string& common_name,
                                  bool server = false) {
  const std::string base = (dir / name).string();
  const std::string ca_base = (dir / ca).string();
  const std::string extensions = (dir / (name + ".ext")).string();
  std::ofstream(extensions) << (server ? "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                       : "extendedKeyUsage=clientAuth\n");
  return Shell(absl::StrCat("openssl req -newkey rsa:2048 -nodes -subj /CN=", common_name,
                            " -keyout ", base, ".key -out ", base, ".csr")) &&
         Shell(absl::StrCat("openssl x509 -req -in ", base, ".csr -CA ", ca_base, ".pem -CAkey ",
                            ca_base, ".key -CAcreateserial -days 1 -extfile ", extensions, " -out ",
                            base, ".pem"));
}

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SERVICE_AUTH_AUTH_TEST_UTIL_H_
