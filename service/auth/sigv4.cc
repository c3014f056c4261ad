#include "service/auth/sigv4.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "objectstore/s3_object_store.h"
#include "service/http/percent_decoding.h"

namespace debugplane::service::auth {
namespace {

absl::Status Incomplete(absl::string_view message) {
  absl::Status status = absl::UnauthenticatedError(message);
  SetAwsErrorCode(status, "IncompleteSignatureException");
  return status;
}

// SHA-256 fetched from OpenSSL's provider once: EVP_sha256() and HMAC()
// look the algorithm up again on every call (OpenSSL 3), which cost a
// server more than the hashing of a small request itself.
EVP_MD* Sha256() {
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

// An HMAC-SHA256 context per thread, its digest set once; each MAC only
// re-keys it (EVP_MAC_init with a key and no parameters).
class HmacContext {
 public:
  HmacContext() {
    static EVP_MAC* const hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    context_ = EVP_MAC_CTX_new(hmac);
    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_END};
    EVP_MAC_CTX_set_params(context_, params);
  }
  ~HmacContext() { EVP_MAC_CTX_free(context_); }
  HmacContext(const HmacContext&) = delete;
  HmacContext& operator=(const HmacContext&) = delete;

  std::string Mac(absl::string_view key, absl::string_view data) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    size_t length = 0;
    // An empty key is a valid HMAC key; OpenSSL wants a non-null pointer.
    static const unsigned char kNoKey = 0;
    const unsigned char* key_bytes =
        key.empty() ? &kNoKey : reinterpret_cast<const unsigned char*>(key.data());
    if (EVP_MAC_init(context_, key_bytes, key.size(), nullptr) != 1 ||
        EVP_MAC_update(context_, reinterpret_cast<const unsigned char*>(data.data()),
                       data.size()) != 1 ||
        EVP_MAC_final(context_, mac, &length, sizeof(mac)) != 1) {
      // Only if OpenSSL itself is broken; an empty MAC matches no signature.
      return "";
    }
    return std::string(reinterpret_cast<const char*>(mac), length);
  }

 private:
  EVP_MAC_CTX* context_ = nullptr;
};

std::string Hmac(absl::string_view key, absl::string_view data) {
  thread_local HmacContext context;
  return context.Mac(key, data);
}

// Trims and collapses runs of blanks into one space, as AWS does to values.
std::string CanonicalHeaderValue(absl::string_view value) {
  std::string out;
  bool blank = false;
  for (char c : absl::StripAsciiWhitespace(value)) {
    if (c == ' ' || c == '\t') {
      blank = true;
      continue;
    }
    if (blank) out.push_back(' ');
    blank = false;
    out.push_back(c);
  }
  return out;
}

bool IsLowerHex(absl::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The Authorization header's components after the algorithm.
struct AuthorizationComponents {
  absl::string_view credential;
  absl::string_view signed_headers;
  absl::string_view signature;
};

// Splits `header` (after the algorithm) into its NAME=VALUE components;
// IncompleteSignatureException if one is malformed or any is missing.
absl::StatusOr<AuthorizationComponents> SplitComponents(absl::string_view header) {
  std::optional<absl::string_view> credential, signed_headers, signature;
  for (absl::string_view component : absl::StrSplit(header, ',')) {
    component = absl::StripAsciiWhitespace(component);
    if (component.empty()) continue;
    const size_t equals = component.find('=');
    if (equals == absl::string_view::npos) {
      return Incomplete(
          "Authorization header components must be NAME=VALUE (Credential=..., "
          "SignedHeaders=..., Signature=...)");
    }
    absl::string_view name = component.substr(0, equals);
    absl::string_view value = component.substr(equals + 1);
    if (name == "Credential") credential = value;
    if (name == "SignedHeaders") signed_headers = value;
    if (name == "Signature") signature = value;
  }
  std::vector<std::string> missing;
  if (!credential.has_value()) missing.push_back("Credential");
  if (!signed_headers.has_value()) missing.push_back("SignedHeaders");
  if (!signature.has_value()) missing.push_back("Signature");
  if (!missing.empty()) {
    return Incomplete(absl::StrCat("Authorization header requires '",
                                   absl::StrJoin(missing, "', '"), "' parameter"));
  }
  return AuthorizationComponents{
      .credential = *credential, .signed_headers = *signed_headers, .signature = *signature};
}

}  // namespace

std::string SigV4Authorization::Scope() const {
  return absl::StrCat(date, "/", region, "/", service, "/aws4_request");
}

absl::StatusOr<SigV4Authorization> ParseSigV4Authorization(absl::string_view header) {
  header = absl::StripAsciiWhitespace(header);
  absl::string_view algorithm = header.substr(0, header.find(' '));
  if (algorithm != kSigV4Algorithm) {
    return Incomplete(absl::StrCat(
        "Authorization header requires the algorithm AWS4-HMAC-SHA256 (Signature Version 4), "
        "not '",
        algorithm.substr(0, 32), "'"));
  }
  header.remove_prefix(algorithm.size());
  absl::StatusOr<AuthorizationComponents> components = SplitComponents(header);
  if (!components.ok()) return components.status();
  const absl::string_view credential = components->credential;
  const absl::string_view signature = components->signature;
  std::vector<absl::string_view> scope = absl::StrSplit(credential, '/');
  if (scope.size() != 5 || scope[4] != "aws4_request" || scope[0].empty() || scope[1].size() != 8 ||
      !std::all_of(scope[1].begin(), scope[1].end(), absl::ascii_isdigit) || scope[2].empty() ||
      scope[3].empty()) {
    return Incomplete(
        "Credential must be ACCESS_KEY_ID/YYYYMMDD/REGION/SERVICE/aws4_request in the "
        "Authorization header");
  }
  if (signature.size() != 64 || !IsLowerHex(signature)) {
    return Incomplete("Signature must be 64 lower-case hex digits in the Authorization header");
  }
  SigV4Authorization parsed;
  parsed.access_key_id = std::string(scope[0]);
  parsed.date = std::string(scope[1]);
  parsed.region = std::string(scope[2]);
  parsed.service = std::string(scope[3]);
  parsed.signature = std::string(signature);
  for (absl::string_view name : absl::StrSplit(components->signed_headers, ';')) {
    if (name.empty() || absl::AsciiStrToLower(name) != name) {
      return Incomplete(
          "SignedHeaders must be lower-case header names separated by ';' in the "
          "Authorization header");
    }
    parsed.signed_headers.emplace_back(name);
  }
  return parsed;
}

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, Sha256(), nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

std::string CanonicalUri(absl::string_view path) {
  if (path.empty()) return "/";
  std::vector<absl::string_view> segments;
  for (absl::string_view segment : absl::StrSplit(path, '/')) {
    if (segment.empty() || segment == ".") continue;
    if (segment == "..") {
      if (!segments.empty()) segments.pop_back();
      continue;
    }
    segments.push_back(segment);
  }
  std::string normalized = path.front() == '/' ? "/" : "";
  absl::StrAppend(&normalized, absl::StrJoin(segments, "/"));
  if (path.back() == '/' && !segments.empty()) normalized.push_back('/');
  return objectstore::S3UriEncode(normalized, /*keep_slash=*/true);
}

std::string CanonicalQuery(absl::string_view query) {
  std::vector<std::pair<std::string, std::string>> parameters;
  for (absl::string_view pair : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    const size_t equals = pair.find('=');
    absl::string_view name = pair.substr(0, equals);
    absl::string_view value =
        equals == absl::string_view::npos ? absl::string_view() : pair.substr(equals + 1);
    parameters.emplace_back(
        objectstore::S3UriEncode(http::PercentDecode(name, http::PlusMeans::kPlus), false),
        objectstore::S3UriEncode(http::PercentDecode(value, http::PlusMeans::kPlus), false));
  }
  std::sort(parameters.begin(), parameters.end());
  return absl::StrJoin(parameters, "&", absl::PairFormatter("="));
}

absl::StatusOr<std::string> CanonicalRequest(const SignedHttpRequest& request,
                                             const std::vector<std::string>& signed_headers,
                                             absl::string_view payload_hash) {
  std::string headers;
  for (const std::string& name : signed_headers) {
    std::vector<std::string> values;
    for (const auto& [header, value] : request.headers) {
      if (absl::EqualsIgnoreCase(header, name)) values.push_back(CanonicalHeaderValue(value));
    }
    if (values.empty()) {
      return Incomplete(absl::StrCat("the signed header '", name, "' is not in the request"));
    }
    absl::StrAppend(&headers, name, ":", absl::StrJoin(values, ","), "\n");
  }
  return absl::StrCat(request.method, "\n", CanonicalUri(request.path), "\n",
                      CanonicalQuery(request.query), "\n", headers, "\n",
                      absl::StrJoin(signed_headers, ";"), "\n", payload_hash);
}

std::string StringToSign(absl::string_view amz_date, absl::string_view scope,
                         absl::string_view canonical_request) {
  return absl::StrCat(kSigV4Algorithm, "\n", amz_date, "\n", scope, "\n",
                      Sha256Hex(canonical_request));
}

std::string SigV4Signature(absl::string_view secret_access_key, absl::string_view date,
                           absl::string_view region, absl::string_view service,
                           absl::string_view string_to_sign) {
  return SigV4SignatureWithKey(SigV4SigningKey(secret_access_key, date, region, service),
                               string_to_sign);
}

std::string SigV4SigningKey(absl::string_view secret_access_key, absl::string_view date,
                            absl::string_view region, absl::string_view service) {
  std::string key = Hmac(absl::StrCat("AWS4", secret_access_key), date);
  key = Hmac(key, region);
  key = Hmac(key, service);
  return Hmac(key, "aws4_request");
}

std::string SigV4SignatureWithKey(absl::string_view signing_key,
                                  absl::string_view string_to_sign) {
  return absl::BytesToHexString(Hmac(signing_key, string_to_sign));
}

}  // namespace debugplane::service::auth
