#include "service/auth/credential_authenticator.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/auth/signature_replay_cache.h"
#include "service/auth/signing_key_cache.h"
#include "service/auth/sigv4.h"

namespace debugplane::service::auth {
namespace {

constexpr absl::string_view kAmzDateFormat = "%Y%m%dT%H%M%SZ";

absl::Status Refused(absl::string_view aws_code, absl::string_view message) {
  absl::Status status = absl::UnauthenticatedError(message);
  SetAwsErrorCode(status, aws_code);
  return status;
}

absl::Status InvalidSignature(absl::string_view message) {
  return Refused("InvalidSignatureException", message);
}

// Constant-time equality of two secrets or signatures: their SHA-256
// digests are compared, so neither the content nor the length leaks.
bool SecretsEqual(absl::string_view a, absl::string_view b) {
  const std::string digest_a = Sha256Hex(a);
  const std::string digest_b = Sha256Hex(b);
  return CRYPTO_memcmp(digest_a.data(), digest_b.data(), digest_a.size()) == 0;
}

// Constant-time equality of two signatures (hex digests). Their length is
// public (a parsed signature is always 64 hex digits), so only the content
// is compared in constant time, without hashing both first.
bool SignaturesEqual(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Principal PrincipalOf(const Credential& credential) {
  return Principal{.role = credential.role,
                   .access_key_id = credential.access_key_id,
                   .job_name = credential.job_name};
}

// The single value of header `name` (any case); nullopt if absent.
std::optional<absl::string_view> HeaderValue(const SignedHttpRequest& request,
                                             absl::string_view name) {
  for (const auto& [header, value] : request.headers) {
    if (absl::EqualsIgnoreCase(header, name)) return absl::string_view(value);
  }
  return std::nullopt;
}

// Parses YYYYMMDD'T'HHMMSS'Z'. (absl's %Y would take all eight digits of
// the date, so the fields are separated first.)
bool ParseAmzDate(absl::string_view text, absl::Time* time) {
  if (text.size() != 16 || text[8] != 'T' || text[15] != 'Z') return false;
  for (size_t i : {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14}) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  const std::string separated =
      absl::StrCat(text.substr(0, 4), "-", text.substr(4, 2), "-", text.substr(6, 2), " ",
                   text.substr(9, 2), ":", text.substr(11, 2), ":", text.substr(13, 2));
  std::string error;
  return absl::ParseTime("%Y-%m-%d %H:%M:%S", separated, absl::UTCTimeZone(), time, &error);
}

std::string FormatAmzDate(absl::Time time) {
  return absl::FormatTime(kAmzDateFormat, time, absl::UTCTimeZone());
}

// A header's name as HTTP shows it: "x-amz-target" -> "X-Amz-Target".
std::string DisplayHeaderName(absl::string_view name) {
  std::string out(name);
  bool word_start = true;
  for (char& c : out) {
    if (word_start) c = absl::ascii_toupper(static_cast<unsigned char>(c));
    word_start = c == '-';
  }
  return out;
}

// Whether the SageMaker operation named by `target` ("SageMaker.StopTrainingJob")
// changes state. Only known read prefixes are reads; anything else,
// including no target, counts as a change.
bool ChangesState(std::optional<absl::string_view> target) {
  if (!target.has_value()) return true;
  absl::string_view operation = *target;
  if (const size_t dot = operation.rfind('.'); dot != absl::string_view::npos) {
    operation.remove_prefix(dot + 1);
  }
  for (absl::string_view read : {"Describe", "List", "Get", "Search", "BatchDescribe"}) {
    if (absl::StartsWith(operation, read)) return false;
  }
  return true;
}

class CredentialAuthenticator final : public Authenticator {
 public:
  CredentialAuthenticator(std::shared_ptr<CredentialStore> store, SigV4Options options)
      : store_(std::move(store)),
        options_(std::move(options)),
        replays_(options_.replay_cache_entries) {}

  bool enabled() const override { return store_ != nullptr; }

  absl::StatusOr<Principal> AuthenticateBearer(absl::string_view authorization) const override {
    if (!enabled()) return Anonymous();
    authorization = absl::StripAsciiWhitespace(authorization);
    if (authorization.empty()) {
      return absl::UnauthenticatedError(
          "no credentials: send 'authorization: Bearer ACCESS_KEY_ID:SECRET_ACCESS_KEY' "
          "(debugplane --token, DEBUGPLANE_TOKEN or --token-file)");
    }
    constexpr absl::string_view kScheme = "bearer ";
    if (authorization.size() <= kScheme.size() ||
        !absl::StartsWithIgnoreCase(authorization, kScheme)) {
      return absl::UnauthenticatedError(
          "malformed authorization: expected 'Bearer ACCESS_KEY_ID:SECRET_ACCESS_KEY'");
    }
    absl::string_view token =
        absl::StripLeadingAsciiWhitespace(authorization.substr(kScheme.size()));
    const size_t colon = token.find(':');
    if (colon == absl::string_view::npos || colon == 0 || colon + 1 == token.size()) {
      return absl::UnauthenticatedError(
          "malformed bearer token: expected ACCESS_KEY_ID:SECRET_ACCESS_KEY");
    }
    const absl::string_view key_id = token.substr(0, colon);
    std::shared_ptr<const CredentialSet> credentials = store_->Snapshot();
    auto found = credentials->keys.find(key_id);
    if (found == credentials->keys.end()) {
      return absl::UnauthenticatedError(
          absl::StrCat("unknown access key id '", Printable(key_id), "'"));
    }
    if (!SecretsEqual(token.substr(colon + 1), found->second.secret_access_key)) {
      return absl::UnauthenticatedError(
          absl::StrCat("wrong secret for access key '", found->first, "'"));
    }
    return PrincipalOf(found->second);
  }

  absl::StatusOr<Principal> AuthenticateCertificate(absl::string_view common_name) const override {
    if (!enabled()) return Anonymous();
    std::shared_ptr<const CredentialSet> credentials = store_->Snapshot();
    auto found = credentials->common_names.find(common_name);
    if (found == credentials->common_names.end()) {
      return absl::UnauthenticatedError(absl::StrCat(
          "the client certificate's common name '", Printable(common_name),
          "' is not in the credentials file (add a line 'ROLE cn:NAME -'), and no bearer "
          "token was sent"));
    }
    return PrincipalOf(found->second);
  }

  absl::StatusOr<Principal> AuthenticateSigV4(const SignedHttpRequest& request,
                                              absl::Time now) const override {
    if (!enabled()) return Anonymous();
    std::optional<absl::string_view> header = HeaderValue(request, "authorization");
    if (!header.has_value()) {
      return Refused("MissingAuthenticationTokenException", "Missing Authentication Token");
    }
    absl::StatusOr<SigV4Authorization> parsed = ParseSigV4Authorization(*header);
    if (!parsed.ok()) return parsed.status();
    absl::StatusOr<absl::Time> signed_at = CheckScope(request, *parsed, now);
    if (!signed_at.ok()) return signed_at.status();

    std::shared_ptr<const CredentialSet> credentials = store_->Snapshot();
    auto found = credentials->keys.find(parsed->access_key_id);
    if (found == credentials->keys.end()) {
      return Refused("UnrecognizedClientException",
                     "The security token included in the request is invalid.");
    }
    const std::string payload_hash = Sha256Hex(request.body);
    if (std::optional<absl::string_view> claimed = HeaderValue(request, "x-amz-content-sha256");
        claimed.has_value() && absl::AsciiStrToLower(*claimed) != payload_hash) {
      return InvalidSignature(
          "The provided 'x-amz-content-sha256' header does not match what was computed.");
    }
    absl::StatusOr<std::string> canonical =
        CanonicalRequest(request, parsed->signed_headers, payload_hash);
    if (!canonical.ok()) return canonical.status();
    // The key comes from the server's secret for this access key (cached
    // per day, region and service); the request's claims only select it.
    const std::string expected = SigV4SignatureWithKey(
        signing_keys_.SigningKey(found->first, found->second.secret_access_key, parsed->date,
                                 parsed->region, parsed->service),
        StringToSign(FormatAmzDate(*signed_at), parsed->Scope(), *canonical));
    if (!SignaturesEqual(expected, parsed->signature)) {
      return InvalidSignature(
          "The request signature we calculated does not match the signature you provided. "
          "Check your AWS Secret Access Key and signing method.");
    }
    // Verified: a state-changing request is obeyed once. The signature
    // is valid until signed_at + max_skew, and refused as expired after.
    const std::optional<absl::string_view> target = HeaderValue(request, "x-amz-target");
    if (ChangesState(target) &&
        !replays_.FirstUse(parsed->signature, *signed_at + options_.max_skew, now)) {
      return InvalidSignature(
          absl::StrCat("This request's signature was used already for ",
                       target.has_value() ? Printable(*target) : std::string("this request"),
                       "; a request that changes state is accepted once: sign each request anew."));
    }
    return PrincipalOf(found->second);
  }

 private:
  static Principal Anonymous() {
    return Principal{.role = Role::kAdmin, .access_key_id = "anonymous", .job_name = ""};
  }

  // A caller-supplied name, shortened and stripped of control characters
  // before it goes into an error or a log line.
  static std::string Printable(absl::string_view text) {
    std::string out;
    for (char c : text.substr(0, 128)) {
      out.push_back(absl::ascii_isprint(static_cast<unsigned char>(c)) ? c : '?');
    }
    return out;
  }

  // Signed headers, x-amz-date (format, skew, the scope's date), service
  // and region. Returns the signing time.
  absl::StatusOr<absl::Time> CheckScope(const SignedHttpRequest& request,
                                        const SigV4Authorization& parsed, absl::Time now) const {
    const auto is_signed = [&](absl::string_view name) {
      return std::find(parsed.signed_headers.begin(), parsed.signed_headers.end(), name) !=
             parsed.signed_headers.end();
    };
    for (const std::string& required : options_.required_signed_headers) {
      if (!is_signed(required)) {
        return InvalidSignature(absl::StrCat("'", DisplayHeaderName(required),
                                             "' must be a 'SignedHeader' in the AWS "
                                             "Authorization."));
      }
    }
    std::optional<absl::string_view> amz_date = HeaderValue(request, "x-amz-date");
    if (!amz_date.has_value() || !is_signed("x-amz-date")) {
      return Refused("IncompleteSignatureException",
                     "Authorization header requires a signed 'X-Amz-Date' header.");
    }
    absl::Time signed_at;
    if (!ParseAmzDate(*amz_date, &signed_at)) {
      return Refused("IncompleteSignatureException",
                     "X-Amz-Date must be in the ISO8601 basic format YYYYMMDD'T'HHMMSS'Z'.");
    }
    if (amz_date->substr(0, 8) != parsed.date) {
      return InvalidSignature(absl::StrCat(
          "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from "
          "HTTP: '",
          parsed.date, "' != '", amz_date->substr(0, 8), "', from '", *amz_date, "'."));
    }
    const int skew_minutes = static_cast<int>(absl::ToInt64Minutes(options_.max_skew));
    if (signed_at < now - options_.max_skew) {
      return InvalidSignature(absl::StrFormat(
          "Signature expired: %s is now earlier than %s (%s - %d min.)", *amz_date,
          FormatAmzDate(now - options_.max_skew), FormatAmzDate(now), skew_minutes));
    }
    if (signed_at > now + options_.max_skew) {
      return InvalidSignature(absl::StrFormat(
          "Signature not yet current: %s is still later than %s (%s + %d min.)", *amz_date,
          FormatAmzDate(now + options_.max_skew), FormatAmzDate(now), skew_minutes));
    }
    if (parsed.service != options_.service) {
      return InvalidSignature(absl::StrCat("Credential should be scoped to correct service: '",
                                           options_.service, "'."));
    }
    if (!options_.region.empty() && parsed.region != options_.region) {
      return InvalidSignature(absl::StrCat("Credential should be scoped to a valid region, not '",
                                           Printable(parsed.region), "'. This server accepts '",
                                           options_.region, "'."));
    }
    return signed_at;
  }

  const std::shared_ptr<CredentialStore> store_;
  const SigV4Options options_;
  // Signatures of state-changing requests within max_skew (mutable: the
  // Authenticator interface is const, and recording a use is no change of
  // what the authenticator accepts).
  mutable SignatureReplayCache replays_;
  // Derived signing keys (mutable for the same reason: a cache).
  mutable SigningKeyCache signing_keys_;
};

}  // namespace

std::unique_ptr<Authenticator> NewAuthenticator(std::shared_ptr<CredentialStore> store,
                                                SigV4Options options) {
  return std::make_unique<CredentialAuthenticator>(std::move(store), std::move(options));
}

}  // namespace debugplane::service::auth
