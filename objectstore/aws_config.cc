#include "objectstore/aws_config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/message_text.h"

namespace debugplane::objectstore {
namespace {

using IniSection = std::map<std::string, std::string>;
using IniFile = std::map<std::string, IniSection>;

// One of the AWS files: whether it exists, and its sections.
struct AwsFile {
  std::string path;
  bool exists = false;
  IniFile sections;
};

// The AWS files' INI dialect: "[section]", "key = value", comments starting
// with '#' or ';'. Indented lines (nested s3 settings) are skipped: none of
// the keys read here is nested.
IniFile ParseIni(const std::string& text) {
  IniFile sections;
  IniSection* current = nullptr;
  std::istringstream lines(text);
  std::string raw;
  while (std::getline(lines, raw)) {
    if (!raw.empty() && (raw[0] == ' ' || raw[0] == '\t')) continue;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      line.remove_prefix(1);
      line.remove_suffix(1);
      current = &sections[std::string(absl::StripAsciiWhitespace(line))];
      continue;
    }
    const size_t equals = line.find('=');
    if (current == nullptr || equals == absl::string_view::npos) continue;
    (*current)[absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, equals)))] =
        std::string(absl::StripAsciiWhitespace(line.substr(equals + 1)));
  }
  return sections;
}

absl::StatusOr<AwsFile> ReadAwsFile(std::string path) {
  AwsFile file;
  file.path = std::move(path);
  std::ifstream in(file.path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT || errno == ENOTDIR) return file;
    return absl::UnavailableError(
        absl::StrCat("cannot read AWS file ", file.path, ": ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  file.exists = true;
  file.sections = ParseIni(text.str());
  return file;
}

std::optional<std::string> NonEmpty(const EnvironmentLookup& environment, const std::string& name) {
  std::optional<std::string> value = environment(name);
  if (value.has_value() && value->empty()) return std::nullopt;
  return value;
}

// The section of `profile` in the credentials file ("name") or the config
// file ("profile name", or "default"); nullptr if absent.
const IniSection* FindProfile(const AwsFile& file, const std::string& profile, bool config_file) {
  std::vector<std::string> names;
  if (config_file) names.push_back(absl::StrCat("profile ", profile));
  if (!config_file || profile == "default") names.push_back(profile);
  for (const std::string& name : names) {
    auto it = file.sections.find(name);
    if (it != file.sections.end()) return &it->second;
  }
  return nullptr;
}

std::optional<std::string> Setting(const IniSection* section, const std::string& key) {
  if (section == nullptr) return std::nullopt;
  auto it = section->find(key);
  if (it == section->end() || it->second.empty()) return std::nullopt;
  return it->second;
}

std::string Describe(const AwsFile& file) {
  return file.exists ? file.path : absl::StrCat(file.path, " (no such file)");
}

// Credentials from one profile section into `config`; false if it has none.
absl::StatusOr<bool> CredentialsFromProfile(const IniSection* section, const AwsFile& file,
                                            const std::string& profile, S3Config* config) {
  std::optional<std::string> key_id = Setting(section, "aws_access_key_id");
  std::optional<std::string> secret = Setting(section, "aws_secret_access_key");
  if (!key_id.has_value() && !secret.has_value()) return false;
  const std::string where = absl::StrCat("profile '", profile, "' in ", file.path);
  if (!key_id.has_value() || !secret.has_value()) {
    return absl::UnauthenticatedError(absl::StrCat(
        where, " has ", key_id.has_value() ? "aws_access_key_id" : "aws_secret_access_key",
        " but not ", key_id.has_value() ? "aws_secret_access_key" : "aws_access_key_id"));
  }
  config->access_key_id = *key_id;
  config->secret_access_key = *secret;
  config->session_token = Setting(section, "aws_session_token").value_or("");
  config->credentials_source = where;
  return true;
}

absl::Status ResolveCredentials(const S3ConfigOverrides& overrides,
                                const EnvironmentLookup& environment, const std::string& profile,
                                bool profile_named, const AwsFile& credentials,
                                const AwsFile& config_file, S3Config* config) {
  if (overrides.access_key_id.has_value() || overrides.secret_access_key.has_value()) {
    if (!overrides.access_key_id.has_value() || !overrides.secret_access_key.has_value()) {
      return absl::UnauthenticatedError(
          "an S3 access key id and its secret access key must be given together");
    }
    config->access_key_id = *overrides.access_key_id;
    config->secret_access_key = *overrides.secret_access_key;
    config->session_token = overrides.session_token.value_or("");
    config->credentials_source = "the given access key";
    return absl::OkStatus();
  }
  // A named profile wins over the variables, as in the AWS CLI when the
  // profile is given explicitly; AWS_PROFILE does not (the SDKs' order).
  const bool explicit_profile = overrides.profile.has_value();
  std::optional<std::string> key_id = NonEmpty(environment, "AWS_ACCESS_KEY_ID");
  std::optional<std::string> secret = NonEmpty(environment, "AWS_SECRET_ACCESS_KEY");
  if (!explicit_profile && (key_id.has_value() || secret.has_value())) {
    if (!key_id.has_value() || !secret.has_value()) {
      return absl::UnauthenticatedError(absl::StrCat(
          key_id.has_value() ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY", " is set but ",
          key_id.has_value() ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID", " is not"));
    }
    config->access_key_id = *key_id;
    config->secret_access_key = *secret;
    config->session_token = NonEmpty(environment, "AWS_SESSION_TOKEN").value_or("");
    config->credentials_source = "AWS_ACCESS_KEY_ID";
    return absl::OkStatus();
  }
  const IniSection* in_credentials = FindProfile(credentials, profile, /*config_file=*/false);
  const IniSection* in_config = FindProfile(config_file, profile, /*config_file=*/true);
  if (profile_named && in_credentials == nullptr && in_config == nullptr) {
    return absl::NotFoundError(absl::StrCat("AWS profile '", profile, "' is in neither ",
                                            Describe(credentials), " nor ", Describe(config_file)));
  }
  absl::StatusOr<bool> found = CredentialsFromProfile(in_credentials, credentials, profile, config);
  if (!found.ok()) return found.status();
  if (*found) return absl::OkStatus();
  found = CredentialsFromProfile(in_config, config_file, profile, config);
  if (!found.ok()) return found.status();
  if (*found) return absl::OkStatus();
  return absl::UnauthenticatedError(absl::StrCat(
      "no AWS credentials for S3: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set, and "
      "profile '",
      profile, "' has no aws_access_key_id in ", Describe(credentials), " or ",
      Describe(config_file)));
}

}  // namespace

EnvironmentLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

EnvironmentLookup MapEnvironment(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const std::string& name) -> std::optional<std::string> {
    auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  };
}

absl::StatusOr<std::string> NormalizeEndpoint(absl::string_view url, absl::string_view what) {
  const std::string shown = base::SingleQuoteForMessage(url, 200);
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "https://") && !absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", shown, " is not an http:// or https:// URL"));
  }
  while (absl::ConsumeSuffix(&rest, "/")) {
  }
  if (rest.empty())
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", shown, " has no host"));
  for (char c : rest) {
    if (c == '/' || c == '?' || c == '#' || c == '@' || absl::ascii_isspace(c) ||
        absl::ascii_iscntrl(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", shown,
                       " must be only scheme://host[:port] (no path, user, query or fragment)"));
    }
  }
  // The scheme and host[:port], without the trailing '/'s dropped above.
  return std::string(url.substr(0, static_cast<size_t>(rest.data() - url.data()) + rest.size()));
}

absl::StatusOr<S3Config> LoadS3Config(const S3ConfigOverrides& overrides,
                                      const EnvironmentLookup& environment) {
  S3Config config;
  const std::string home = NonEmpty(environment, "HOME").value_or("");
  const std::string credentials_path =
      NonEmpty(environment, "AWS_SHARED_CREDENTIALS_FILE").value_or(home + "/.aws/credentials");
  const std::string config_path =
      NonEmpty(environment, "AWS_CONFIG_FILE").value_or(home + "/.aws/config");
  absl::StatusOr<AwsFile> credentials = ReadAwsFile(credentials_path);
  if (!credentials.ok()) return credentials.status();
  absl::StatusOr<AwsFile> config_file = ReadAwsFile(config_path);
  if (!config_file.ok()) return config_file.status();

  std::optional<std::string> profile = overrides.profile;
  if (!profile.has_value()) profile = NonEmpty(environment, "AWS_PROFILE");
  const bool profile_named = profile.has_value();
  const std::string profile_name = profile.value_or("default");
  const IniSection* profile_config = FindProfile(*config_file, profile_name, /*config_file=*/true);

  std::optional<std::string> region = overrides.region;
  if (!region.has_value()) region = NonEmpty(environment, "AWS_REGION");
  if (!region.has_value()) region = NonEmpty(environment, "AWS_DEFAULT_REGION");
  if (!region.has_value()) region = Setting(profile_config, "region");
  if (region.has_value()) config.region = *region;

  std::optional<std::string> endpoint = overrides.endpoint;
  std::string endpoint_source = "the given endpoint";
  for (const char* variable : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
    if (endpoint.has_value()) break;
    endpoint = NonEmpty(environment, variable);
    endpoint_source = variable;
  }
  if (endpoint.has_value()) {
    absl::StatusOr<std::string> normalized = NormalizeEndpoint(*endpoint, endpoint_source);
    if (!normalized.ok()) return normalized.status();
    config.endpoint = *std::move(normalized);
  } else {
    config.endpoint = absl::StrCat("https://s3.", config.region, ".amazonaws.com");
    config.aws_endpoint = true;
  }
  config.path_style = overrides.path_style.value_or(!config.aws_endpoint);

  std::optional<std::string> ca_file = overrides.ca_file;
  if (!ca_file.has_value()) ca_file = NonEmpty(environment, "AWS_CA_BUNDLE");
  config.ca_file = ca_file.value_or("");

  absl::Status status = ResolveCredentials(overrides, environment, profile_name, profile_named,
                                           *credentials, *config_file, &config);
  if (!status.ok()) return status;
  return config;
}

}  // namespace debugplane::objectstore
