// The Authenticator (auth.h) over a CredentialStore: bearer tokens, TLS
// client certificates and AWS Signature Version 4.

#ifndef DEBUGPLANE_SERVICE_AUTH_CREDENTIAL_AUTHENTICATOR_H_
#define DEBUGPLANE_SERVICE_AUTH_CREDENTIAL_AUTHENTICATOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "service/auth/auth.h"
#include "service/auth/credential_store.h"

namespace debugplane::service::auth {

struct SigV4Options {
  // The region requests must be signed for. Empty: any region is accepted
  // (for a server that answers under several region names).
  std::string region = "us-east-1";
  // The service in the credential scope; AWS's SageMaker clients sign for
  // "sagemaker". Configurable for tests against AWS's published vectors.
  std::string service = "sagemaker";
  // How far x-amz-date may be from the server's clock, either way (AWS: 5
  // minutes). A captured request replayed later than this is refused.
  absl::Duration max_skew = absl::Minutes(5);
  // Headers every signature must cover (lower-case), besides x-amz-date:
  // SageMaker's clients always sign them, and a signature that leaves
  // X-Amz-Target out could be replayed as another operation (a captured
  // Describe as a Delete). AWS's generic test vectors sign host only.
  std::vector<std::string> required_signed_headers = {"host", "content-type", "x-amz-target"};
  // State-changing requests (every X-Amz-Target operation but Describe*,
  // List*, Get*, Search*) are obeyed once per signature: a second use
  // within max_skew is refused. At most this many signatures are
  // remembered (the ones expiring first make room).
  size_t replay_cache_entries = 65536;
};

// `store` null: authentication is off (enabled() false; every Authenticate*
// returns an anonymous admin). Otherwise every call authenticates against
// the store's snapshot at that moment, so a reload takes effect for the next
// call. The result is thread-safe and never blocks on I/O. Its SigV4 replay
// cache reads time only from the `now` each call passes.
std::unique_ptr<Authenticator> NewAuthenticator(std::shared_ptr<CredentialStore> store,
                                                SigV4Options options = {});

}  // namespace debugplane::service::auth

#endif  // DEBUGPLANE_SERVICE_AUTH_CREDENTIAL_AUTHENTICATOR_H_
