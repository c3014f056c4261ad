// AWS Signature Version 4, the pieces a verifier needs: parsing the
// `Authorization` header, the canonical request, the string to sign and the
// signature (https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html).
// Hashes and MACs are OpenSSL's; nothing here compares secrets (the
// authenticator does, in constant time).

#ifndef DEBUGPLANE_SERVICE_AUTH_SIGV4_H_
#define DEBUGPLANE_SERVICE_AUTH_SIGV4_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/auth/auth.h"

namespace debugplane::service::auth {

inline constexpr absl::string_view kSigV4Algorithm = "AWS4-HMAC-SHA256";

// `Authorization: AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/SERVICE/aws4_request,
// SignedHeaders=a;b, Signature=HEX`, parsed.
struct SigV4Authorization {
  std::string access_key_id;
  std::string date;  // YYYYMMDD
  std::string region;
  std::string service;
  std::vector<std::string> signed_headers;  // Lower-case, as listed.
  std::string signature;                    // 64 lower-case hex digits.

  // DATE/REGION/SERVICE/aws4_request.
  std::string Scope() const;
};

// Parses the header's value. Errors: UNAUTHENTICATED with AwsErrorCode
// IncompleteSignatureException naming what is missing or malformed (another
// algorithm, a component without '=', a credential that is not
// KEY/DATE/REGION/SERVICE/aws4_request, a signature that is not 64 hex
// digits). Never echoes the signature.
absl::StatusOr<SigV4Authorization> ParseSigV4Authorization(absl::string_view header);

// The lower-case hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

// The canonical URI of a percent-encoded request path as AWS computes it for
// services other than S3: dot segments and repeated slashes removed, then
// every byte but unreserved characters and '/' percent-encoded (so "%20" in
// the path becomes "%2520"). "" becomes "/".
std::string CanonicalUri(absl::string_view path);

// The canonical query string: parameters decoded, re-encoded with AWS's
// encoding, sorted by name then value, "name=value" joined by '&'.
std::string CanonicalQuery(absl::string_view query);

// The canonical request: METHOD\nURI\nQUERY\nHEADERS\nSIGNED\nPAYLOAD_HASH.
// The canonical headers are `signed_headers` (lower-case, in the given
// order), each with the request's values for that name (any case) trimmed,
// inner blank runs collapsed, and joined by ','. Returns
// UNAUTHENTICATED/IncompleteSignatureException if a signed header is absent.
absl::StatusOr<std::string> CanonicalRequest(const SignedHttpRequest& request,
                                             const std::vector<std::string>& signed_headers,
                                             absl::string_view payload_hash);

// AWS4-HMAC-SHA256\nAMZ_DATE\nSCOPE\nhex(sha256(canonical_request)).
std::string StringToSign(absl::string_view amz_date, absl::string_view scope,
                         absl::string_view canonical_request);

// hex(HMAC(signing key derived from secret/date/region/service, string_to_sign)).
std::string SigV4Signature(absl::string_view secret_access_key, absl::string_view date,
                           absl::string_view region, absl::string_view service,
                           absl::string_view string_to_sign);

// The signing key SigV4Signature derives (four HMACs): a pure function of
// its arguments, valid for every request of that day, region and service,
// so a verifier may keep it (SigningKeyCache). Raw bytes, a secret.
std::string SigV4SigningKey(absl::string_view secret_access_key, absl::string_view date,
                            absl::string_view region, absl::string_view service);

// hex(HMAC(signing_key, string_to_sign)): SigV4Signature with the key
// already derived.
std::string SigV4SignatureWithKey(absl::string_view signing_key,
                                  absl::string_view string_to_sign);

}  // namespace debugplane::service::auth

#endif  // DEBUGPLANE_SERVICE_AUTH_SIGV4_H_
