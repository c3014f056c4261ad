// libFuzzer target: AWS Signature Version 4 verification (service/auth/sigv4.h
// and the authenticator): the Authorization header parser, the canonical
// URI, query and headers, all of which read whatever an HTTP client sends.
//
// The input is split on '\n' into: Authorization header, path, query,
// x-amz-date, body (the rest). Build and run (scripts/fuzz.sh does both):
//   scripts/fuzz.sh sigv4_fuzzer

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "service/auth/credential_authenticator.h"
#include "service/auth/sigv4.h"

namespace {

using debugplane::service::auth::Authenticator;

const Authenticator& TheAuthenticator() {
  static const std::unique_ptr<Authenticator> authenticator = [] {
    auto set = debugplane::service::auth::ParseCredentials(
        "admin AKIDEXAMPLE wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY\n", "fuzz");
    return debugplane::service::auth::NewAuthenticator(
        std::make_shared<debugplane::service::auth::CredentialStore>(*std::move(set)), {});
  }();
  return *authenticator;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace debugplane::service::auth;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts = absl::StrSplit(text, absl::MaxSplits('\n', 4));
  parts.resize(5);
  (void)ParseSigV4Authorization(parts[0]);
  (void)CanonicalUri(parts[1]);
  (void)CanonicalQuery(parts[2]);
  SignedHttpRequest request;
  request.method = "POST";
  request.path = parts[1];
  request.query = parts[2];
  // The headers SageMaker's clients sign (the authenticator requires
  // host, content-type and x-amz-target among SignedHeaders), so that
  // inputs naming them reach the canonical request; a state-changing
  // target, so that the replay cache is reached too.
  request.headers = {{"Authorization", parts[0]},
                     {"Host", "localhost"},
                     {"Content-Type", "application/x-amz-json-1.1"},
                     {"X-Amz-Target", "SageMaker.StopTrainingJob"},
                     {"X-Amz-Date", parts[3]},
                     {"x-amz-content-sha256", parts[3]}};
  request.body = parts[4];
  (void)TheAuthenticator().AuthenticateSigV4(request, absl::FromUnixSeconds(1440938160));
  return 0;
}
