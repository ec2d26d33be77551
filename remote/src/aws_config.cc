// Copyright 2026 The ufspack Authors.
//
// The AWS settings loader (see aws_config.h for the precedence): the
// profile, region, endpoint, addressing and CA bundle; the shared files are
// parsed by aws_shared_file.cc and the credentials chosen by
// credential_chain.cc.
//
// Supported sub-section settings: s3.endpoint_url and s3.addressing_style in
// the profile, s3.endpoint_url in the profile's "services = name" section
// ("[services name]", AWS's service-specific endpoint configuration), and
// the profile's ignore_configured_endpoint_urls.
#include "aws_config.h"

#include <cstdlib>
#include <ctime>
#include <string>
#include <utility>

#include "aws_shared_file.h"

namespace ufspack {
namespace remote {

namespace {

constexpr char kDefaultRegion[] = "us-east-1";

// Reads the settings for one profile; one method per setting so that each
// precedence rule reads on its own.
class Loader {
 public:
  explicit Loader(const EnvLookup& env) : env_(env) {}

  Status Load(AwsSettings* out) {
    const std::string home = Env("HOME");
    credentials_file_ = SharedFile(
        FilePath("AWS_SHARED_CREDENTIALS_FILE", home, "/.aws/credentials"),
        FileKind::kCredentials);
    config_file_ = SharedFile(FilePath("AWS_CONFIG_FILE", home, "/.aws/config"),
                              FileKind::kConfig);
    Status s = credentials_file_.Load();
    if (s.ok()) s = config_file_.Load();
    if (s.ok()) s = FindProfile(out);
    if (s.ok()) s = LoadRegion(out);  // STS's endpoint needs it
    if (s.ok()) s = LoadEndpoint(out);
    if (s.ok()) s = LoadAddressing(out);
    if (s.ok()) LoadCaBundle(out);
    if (s.ok()) s = LoadCredentials(out);
    return s;
  }

 private:
  std::string Env(const char* name) const { return EnvValue(env_, name); }

  std::string FilePath(const char* variable, const std::string& home,
                       const char* default_suffix) const {
    std::string path = Env(variable);
    if (path.empty()) {
      return home.empty() ? std::string() : home + default_suffix;
    }
    if (StartsWith(path, "~/") && !home.empty()) path = home + path.substr(1);
    return path;
  }

  Status FindProfile(AwsSettings* out) {
    std::string from = "AWS_PROFILE";
    std::string profile = Env("AWS_PROFILE");
    if (profile.empty()) {
      from = "AWS_DEFAULT_PROFILE";
      profile = Env("AWS_DEFAULT_PROFILE");
    }
    const bool named = !profile.empty();
    if (!named) profile = kDefaultProfile;
    out->profile = profile;
    credentials_section_ = credentials_file_.Profile(profile);
    config_section_ = config_file_.Profile(profile);
    if (!named || credentials_section_ != nullptr ||
        config_section_ != nullptr) {
      return Status::OK();
    }
    std::string msg =
        "AWS profile '" + profile + "' (from " + from +
        ") not found: expected [" + profile + "] in " +
        credentials_file_.Describe() +
        (credentials_file_.exists() ? "" : " (missing)") + " or [" +
        (profile == kDefaultProfile ? profile : "profile " + profile) +
        "] in " + config_file_.Describe() +
        (config_file_.exists() ? "" : " (missing)");
    if (config_file_.HasUnprefixed(profile)) {
      msg += "; the config file has [" + profile +
             "], which AWS's tools ignore: write it [profile " + profile + "]";
    }
    return Status::InvalidArgument(msg);
  }

  Status LoadCredentials(AwsSettings* out) {
    ChainContext context;
    context.env = env_;
    context.credentials_file = &credentials_file_;
    context.config_file = &config_file_;
    context.profile = out->profile;
    context.region = out->region;
    ChainResult result;
    Status s = ResolveCredentials(context, &result);
    out->credentials_steps = std::move(result.steps);
    if (!s.ok()) return s;
    out->credentials = std::move(result.credentials);
    out->provider = std::move(result.cache);
    out->credentials_source = std::move(result.source);
    return Status::OK();
  }

  // A region goes into host names and the signing scope.
  static bool ValidRegion(const std::string& r) {
    if (r.empty()) return false;
    for (char c : r) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '-';
      if (!ok) return false;
    }
    return true;
  }

  Status LoadRegion(AwsSettings* out) {
    for (const char* variable : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
      const std::string r = Env(variable);
      if (r.empty()) continue;
      if (!ValidRegion(r)) {
        return Status::InvalidArgument(
            std::string(variable) +
            ": expected a region name such as us-east-1; found '" + r + "'");
      }
      out->region = r;
      return Status::OK();
    }
    const Setting* r =
        config_section_ != nullptr ? config_section_->Find("region") : nullptr;
    if (r == nullptr) {
      out->region = kDefaultRegion;
      return Status::OK();
    }
    if (!ValidRegion(r->value)) {
      return Status::InvalidArgument(
          config_file_.At(r->line) + config_section_->header +
          " region: expected a region name such as us-east-1; found '" +
          r->value + "'");
    }
    out->region = r->value;
    return Status::OK();
  }

  static Status ParseBool(const std::string& where, const std::string& value,
                          bool* b) {
    const std::string v = AsciiLower(value);
    if (v == "true" || v == "false") {
      *b = v == "true";
      return Status::OK();
    }
    return Status::InvalidArgument(where + ": expected true or false; found '" +
                                   value + "'");
  }

  static Status CheckUrl(const std::string& where, const std::string& url) {
    // Its host goes into the Host header.
    UFSPACK_RETURN_IF_ERROR(CheckNoControlCharacters(url, where, ""));
    const std::string lower = AsciiLower(url);
    if (StartsWith(lower, "http://") || StartsWith(lower, "https://")) {
      return Status::OK();
    }
    return Status::InvalidArgument(
        where + ": expected a URL starting with http:// or https://; found '" +
        url + "'");
  }

  // Where a profile setting came from, for messages.
  std::string Where(const Setting& s, const std::string& key) const {
    return config_file_.At(s.line) + config_section_->header + " " + key;
  }

  Status LoadEndpoint(AwsSettings* out) {
    bool ignore = false;
    const std::string ignore_env = Env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
    const Setting* ignore_setting =
        config_section_ != nullptr
            ? config_section_->Find("ignore_configured_endpoint_urls")
            : nullptr;
    Status s;
    if (!ignore_env.empty()) {
      s = ParseBool("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", ignore_env, &ignore);
    } else if (ignore_setting != nullptr) {
      s = ParseBool(Where(*ignore_setting, "ignore_configured_endpoint_urls"),
                    ignore_setting->value, &ignore);
    }
    if (!s.ok() || ignore) return s;

    for (const char* variable : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
      const std::string url = Env(variable);
      if (url.empty()) continue;
      out->endpoint_url = url;
      return CheckUrl(variable, url);
    }
    if (config_section_ == nullptr) return Status::OK();
    if (const Setting* url = config_section_->Find("s3.endpoint_url")) {
      out->endpoint_url = url->value;
      return CheckUrl(Where(*url, "s3.endpoint_url"), url->value);
    }
    if (const Setting* services = config_section_->Find("services")) {
      const Section* section = config_file_.Services(services->value);
      if (section == nullptr) {
        return Status::InvalidArgument(Where(*services, "services") +
                                       ": expected a [services " +
                                       services->value + "] section in " +
                                       config_file_.path() + "; found none");
      }
      if (const Setting* url = section->Find("s3.endpoint_url")) {
        out->endpoint_url = url->value;
        return CheckUrl(
            config_file_.At(url->line) + section->header + " s3.endpoint_url",
            url->value);
      }
    }
    if (const Setting* url = config_section_->Find("endpoint_url")) {
      out->endpoint_url = url->value;
      return CheckUrl(Where(*url, "endpoint_url"), url->value);
    }
    return Status::OK();
  }

  Status LoadAddressing(AwsSettings* out) {
    out->addressing = Addressing::kAuto;
    const Setting* style = config_section_ != nullptr
                               ? config_section_->Find("s3.addressing_style")
                               : nullptr;
    if (style == nullptr) return Status::OK();
    const std::string v = AsciiLower(style->value);
    if (v == "auto") {
      out->addressing = Addressing::kAuto;
    } else if (v == "virtual") {
      out->addressing = Addressing::kVirtual;
    } else if (v == "path") {
      out->addressing = Addressing::kPath;
    } else {
      return Status::InvalidArgument(
          Where(*style, "s3.addressing_style") +
          ": expected path, virtual or auto; found '" + style->value + "'");
    }
    return Status::OK();
  }

  void LoadCaBundle(AwsSettings* out) {
    out->ca_bundle = Env("AWS_CA_BUNDLE");
    if (!out->ca_bundle.empty() || config_section_ == nullptr) return;
    if (const Setting* ca = config_section_->Find("ca_bundle")) {
      out->ca_bundle = ca->value;
    }
  }

  const EnvLookup& env_;
  SharedFile credentials_file_{std::string(), FileKind::kCredentials};
  SharedFile config_file_{std::string(), FileKind::kConfig};
  const Section* credentials_section_ = nullptr;
  const Section* config_section_ = nullptr;
};

// "2026-11-27T10:42:30Z".
std::string UtcTime(int64_t seconds) {
  const time_t t = static_cast<time_t>(seconds);
  std::tm tm;
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

const char* AddressingName(Addressing a) {
  switch (a) {
    case Addressing::kVirtual:
      return "virtual";
    case Addressing::kPath:
      return "path";
    case Addressing::kAuto:
      break;
  }
  return "auto";
}

}  // namespace

std::string AwsSettings::DescribeWhere() const {
  std::string out = "profile '" + profile + "', region " + region +
                    ", endpoint " +
                    (endpoint_url.empty() ? "AWS" : endpoint_url) +
                    ", addressing " + AddressingName(addressing);
  if (!ca_bundle.empty()) out += ", CA bundle " + ca_bundle;
  return out;
}

std::string AwsSettings::DescribeCredentials() const {
  std::string out = credentials_source;
  if (!credentials.empty()) {
    // Like "aws configure list": only the last 4 characters of the key id.
    const std::string& id = credentials.access_key_id;
    out += " (access key id ****" +
           (id.size() > 4 ? id.substr(id.size() - 4) : std::string()) +
           (credentials.session_token.empty() ? ")" : ", with session token)");
  }
  return out;
}

std::string AwsSettings::Describe() const {
  return DescribeWhere() + ", credentials: " + DescribeCredentials();
}

std::string AwsSettings::Explain(const Status& status) const {
  std::string out;
  if (!region.empty()) out += "AWS settings: " + DescribeWhere() + "\n";
  if (credentials_steps.empty()) {
    out += "credential providers: none asked (the settings above failed)\n";
  } else {
    out += "credential providers, in the order asked:\n";
    for (size_t i = 0; i < credentials_steps.size(); ++i) {
      out += "  " + std::to_string(i + 1) + ". " +
             credentials_steps[i].provider + ": " +
             credentials_steps[i].outcome + "\n";
    }
  }
  if (!status.ok()) return out + "error: " + status.ToString() + "\n";
  out += "credentials: " + DescribeCredentials() + "\n";
  if (provider == nullptr) return out + "requests: unsigned (anonymous)\n";
  const int64_t expires = provider->expiration();
  if (expires == 0) return out + "expires: never\n";
  const int64_t now = ::time(nullptr);
  return out + "expires: " + UtcTime(expires) + " (in " +
         std::to_string(expires - now) + " s); refreshed from " +
         UtcTime(provider->refresh_at()) + " (" +
         std::to_string(kRefreshMarginSeconds / 60) +
         " min before expiry, or half their lifetime when shorter)\n";
}

Status LoadAwsSettings(const EnvLookup& env, AwsSettings* settings) {
  AwsSettings loaded;
  Loader loader(env);
  Status s = loader.Load(&loaded);
  if (!s.ok()) return s;
  *settings = std::move(loaded);
  return Status::OK();
}

Status LoadAwsSettings(AwsSettings* settings) {
  return LoadAwsSettings([](const char* name) { return std::getenv(name); },
                         settings);
}

Status ExplainAwsSettings(const EnvLookup& env, std::string* text) {
  AwsSettings loaded;
  Loader loader(env);
  Status s = loader.Load(&loaded);
  *text = loaded.Explain(s);
  return s;
}

}  // namespace remote
}  // namespace ufspack
