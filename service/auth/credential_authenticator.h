// The Authenticator (auth.h) over a CredentialStore: bearer tokens, TLS
// client certificates and AWS Signature Version 4.

#ifndef DEBUGPLANE_SERVICE_AUTH_CREDENTIAL_AUTHENTICATOR_H_
#define DEBUGPLANE_SERVICE_AUTH_CREDENTIAL_AUTHENTICATOR_H_

#include <memory>
#include <string>

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
};

// `store` null: authentication is off (enabled() false; every Authenticate*
// returns an anonymous admin). Otherwise every call authenticates against
// the store's snapshot at that moment, so a reload takes effect for the next
// call. The result is thread-safe and never blocks on I/O.
std::unique_ptr<Authenticator> NewAuthenticator(std::shared_ptr<CredentialStore> store,
                                                SigV4Options options = {});

}  // namespace debugplane::service::auth

#endif  // DEBUGPLANE_SERVICE_AUTH_CREDENTIAL_AUTHENTICATOR_H_
