// Copyright 2026 The ufspack Authors.
//
// The credential provider chain (see credential_chain.h): which provider a
// profile uses, each provider's settings checked and turned into a shared
// cache, and a step per provider asked for `--explain-credentials`.
#include "credential_chain.h"

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <utility>

#include "container_credentials.h"
#include "credential_process.h"
#include "imds_credentials.h"
#include "sigv4.h"
#include "sts_credentials.h"

namespace ufspack {
namespace remote {
namespace {

// Profile settings that name a credential source this build cannot use.
struct UnsupportedSource {
  const char* key;
  const char* what;
};
constexpr UnsupportedSource kUnsupportedSources[] = {
    {"sso_session", "IAM Identity Center (SSO)"},
    {"sso_start_url", "IAM Identity Center (SSO)"},
    {"sso_account_id", "IAM Identity Center (SSO)"},
    {"sso_role_name", "IAM Identity Center (SSO)"},
    {"web_identity_token_file",
     "web identity in the credentials file; AWS's tools and ufspack read it "
     "from the config file only"},
};

using Place = std::pair<const SharedFile*, const Section*>;

// "a -> b -> c" for messages about chained roles.
std::string Arrows(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : " -> ") + n;
  return out;
}

// The chain for one profile; one method per provider, in order.
class Chain {
 public:
  Chain(const ChainContext& c, ChainResult* r) : c_(c), r_(r) {}

  Status Resolve() {
    using Method = Status (Chain::*)(std::string*, bool*);
    static const std::pair<const char*, Method> kProviders[] = {
        {"environment", &Chain::Environment},
        {"web identity", &Chain::WebIdentity},
        {"assume role", &Chain::AssumeRole},
        {"shared files, static keys", &Chain::StaticKeys},
        {"credential_process", &Chain::Process},
        {"container credentials", &Chain::Container},
        {"EC2 instance metadata", &Chain::Imds}};
    for (const auto& [name, method] : kProviders) {
      if (method == &Chain::Container) {
        UFSPACK_RETURN_IF_ERROR(UnsupportedSourceError());
      }
      std::string outcome;
      bool done = false;
      Status s = (this->*method)(&outcome, &done);
      r_->steps.push_back(
          {name, s.ok() ? outcome : "failed: " + std::string(s.message())});
      if (!s.ok() || done) return s;
    }
    return Status::OK();
  }

 private:
  std::string Env(const char* name) const { return EnvValue(c_.env, name); }
  const Section* ConfigSection(const std::string& profile) const {
    return c_.config_file->Profile(profile);
  }
  const Section* CredentialsSection(const std::string& profile) const {
    return c_.credentials_file->Profile(profile);
  }
  // "file:line: [profile p]" of a config file setting.
  std::string Where(const Setting& s, const Section& section) const {
    return c_.config_file->At(s.line) + section.header;
  }

  // --- the providers

  Status Environment(std::string* outcome, bool* done) {
    const std::string id = Env("AWS_ACCESS_KEY_ID");
    const std::string secret = Env("AWS_SECRET_ACCESS_KEY");
    if (id.empty() && secret.empty()) {
      *outcome =
          "not configured (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are "
          "not set)";
      return Status::OK();
    }
    if (id.empty() || secret.empty()) {
      return Status::InvalidArgument(
          std::string("expected both AWS_ACCESS_KEY_ID and "
                      "AWS_SECRET_ACCESS_KEY in the environment; found "
                      "only ") +
          (id.empty() ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID"));
    }
    Credentials keys{id, secret, Env("AWS_SESSION_TOKEN")};
    return UseStatic(keys, "environment", outcome, done);
  }

  Status WebIdentity(std::string* outcome, bool* done) {
    WebIdentityConfig c;
    c.token_file = Env("AWS_WEB_IDENTITY_TOKEN_FILE");
    c.role_arn = Env("AWS_ROLE_ARN");
    c.session_name = Env("AWS_ROLE_SESSION_NAME");
    c.source = "the environment";
    if (!c.token_file.empty() && c.role_arn.empty()) {
      return Status::InvalidArgument(
          "web identity: AWS_WEB_IDENTITY_TOKEN_FILE is set; expected "
          "AWS_ROLE_ARN with it (the role to assume); found none");
    }
    if (c.token_file.empty()) {
      // AWS_ROLE_ARN alone is not web identity (the SDKs ignore it too).
      const Section* section = ConfigSection(c_.profile);
      bool found = false;
      if (section != nullptr) {
        UFSPACK_RETURN_IF_ERROR(WebIdentityFrom(*section, &c, &found));
      }
      if (!found) {
        *outcome =
            "not configured (AWS_WEB_IDENTITY_TOKEN_FILE is not set; "
            "profile '" +
            c_.profile + "' has no web_identity_token_file)";
        return Status::OK();
      }
    }
    std::string key;
    return Use(WebIdentityCache(std::move(c), &key), outcome, done);
  }

  Status AssumeRole(std::string* outcome, bool* done) {
    const Section* section = ConfigSection(c_.profile);
    const Setting* role =
        section != nullptr ? section->Find("role_arn") : nullptr;
    if (role == nullptr) {
      const Setting* sp =
          section != nullptr ? section->Find("source_profile") : nullptr;
      const Setting* cs =
          section != nullptr ? section->Find("credential_source") : nullptr;
      if (sp != nullptr || cs != nullptr) {
        return Status::InvalidArgument(
            Where(sp != nullptr ? *sp : *cs, *section) + ": " +
            (sp != nullptr ? "source_profile" : "credential_source") +
            " needs role_arn (the role to assume) in the same profile; "
            "found none");
      }
      *outcome = "not configured (profile '" + c_.profile + "' has no " +
                 "role_arn in " + c_.config_file->Describe() + ")";
      return Status::OK();
    }
    std::shared_ptr<CredentialsCache> cache;
    std::string key;
    UFSPACK_RETURN_IF_ERROR(
        AssumeRoleCache(*section, {c_.profile}, &cache, &key));
    return Use(std::move(cache), outcome, done);
  }

  Status StaticKeys(std::string* outcome, bool* done) {
    for (const auto& [file, section] : TopPlaces(false)) {
      Credentials keys;
      bool found = false;
      UFSPACK_RETURN_IF_ERROR(KeysFrom(*file, section, &keys, &found));
      if (found) {
        return UseStatic(keys, file->path() + " " + section->header, outcome,
                         done);
      }
    }
    *outcome = "not configured (profile '" + c_.profile +
               "' has no aws_access_key_id in " +
               c_.credentials_file->Describe() + " or " +
               c_.config_file->Describe() + ")";
    return Status::OK();
  }

  Status Process(std::string* outcome, bool* done) {
    for (const auto& [file, section] : TopPlaces(true)) {
      std::shared_ptr<CredentialsCache> cache;
      std::string key;
      if (ProcessCache(*file, section, c_.profile, &cache, &key)) {
        return Use(std::move(cache), outcome, done);
      }
    }
    *outcome = "not configured (profile '" + c_.profile +
               "' has no credential_process)";
    return Status::OK();
  }

  Status Container(std::string* outcome, bool* done) {
    std::unique_ptr<CredentialsProvider> provider;
    std::string key;
    UFSPACK_RETURN_IF_ERROR(MakeContainerProvider(c_.env, &provider, &key));
    if (provider == nullptr) {
      *outcome =
          "not configured (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and "
          "AWS_CONTAINER_CREDENTIALS_FULL_URI are not set)";
      return Status::OK();
    }
    return Use(SharedCredentialsCache(key, [&] { return std::move(provider); }),
               outcome, done);
  }

  // The last resort: no answer, a refusal or no role means anonymous
  // requests, not an error; an answer that is not usable credentials (a
  // malformed document, a token or key with control characters:
  // InvalidArgument) is an error, as from any other configured provider.
  Status Imds(std::string* outcome, bool* done) {
    *done = true;
    std::unique_ptr<CredentialsProvider> provider;
    std::string key;
    UFSPACK_RETURN_IF_ERROR(MakeImdsFromProfile(&provider, &key));
    if (provider == nullptr) {
      *outcome = "disabled (AWS_EC2_METADATA_DISABLED=true)";
      r_->source =
          "none (anonymous; EC2 instance metadata disabled by "
          "AWS_EC2_METADATA_DISABLED)";
      return Status::OK();
    }
    std::shared_ptr<CredentialsCache> imds =
        SharedCredentialsCache(key, [&] { return std::move(provider); });
    std::shared_ptr<const Credentials> current;
    Status s = imds->Get(&current);
    if (s.IsInvalidArgument()) {
      return s.WithContext("AWS credentials for profile '" + c_.profile + "'");
    }
    if (!s.ok()) {
      *outcome =
          "failed, so requests are unsigned: " + std::string(s.message());
      r_->source =
          "none (anonymous; tried the environment, profile '" + c_.profile +
          "' in the shared files, container credentials (not configured), "
          "then " +
          std::string(s.message()) + ")";
      return Status::OK();
    }
    r_->credentials = *current;
    r_->source = imds->Name();
    r_->cache = std::move(imds);
    *outcome = "chosen: " + r_->source;
    return Status::OK();
  }

  // --- building blocks

  // The top profile's sections, credentials file first (or config first).
  std::vector<Place> TopPlaces(bool config_first) const {
    const Place creds{c_.credentials_file, CredentialsSection(c_.profile)};
    const Place config{c_.config_file, ConfigSection(c_.profile)};
    return config_first ? std::vector<Place>{config, creds}
                        : std::vector<Place>{creds, config};
  }

  // Fetches from `cache` now: failing to get credentials from a configured
  // source is an error.
  Status Use(std::shared_ptr<CredentialsCache> cache, std::string* outcome,
             bool* done) {
    std::shared_ptr<const Credentials> current;
    Status s = cache->Get(&current);
    if (!s.ok()) {
      return s.WithContext("AWS credentials for profile '" + c_.profile + "'");
    }
    r_->credentials = *current;
    r_->source = cache->Name();
    r_->cache = std::move(cache);
    *outcome = "chosen: " + r_->source;
    *done = true;
    return Status::OK();
  }

  Status UseStatic(const Credentials& keys, const std::string& source,
                   std::string* outcome, bool* done) {
    std::string key;
    return Use(StaticCache(keys, source, &key), outcome, done);
  }

  static std::shared_ptr<CredentialsCache> StaticCache(
      const Credentials& keys, const std::string& source, std::string* key) {
    *key = "static\n" + source + "\n" + keys.access_key_id + "\n" +
           Sha256Hex(keys.secret_access_key + "\n" + keys.session_token);
    return std::make_shared<CredentialsCache>(MakeStaticProvider(keys, source));
  }

  // Static keys of `section`, if it has any; a half pair is an error.
  static Status KeysFrom(const SharedFile& file, const Section* section,
                         Credentials* credentials, bool* found) {
    *found = false;
    if (section == nullptr) return Status::OK();
    const Setting* id = section->Find("aws_access_key_id");
    const Setting* secret = section->Find("aws_secret_access_key");
    if (id == nullptr && secret == nullptr) return Status::OK();
    if (id == nullptr || secret == nullptr) {
      const Setting* present = id != nullptr ? id : secret;
      return Status::InvalidArgument(
          file.At(present->line) + section->header + ": expected both " +
          "aws_access_key_id and aws_secret_access_key; found only " +
          (id != nullptr ? "aws_access_key_id" : "aws_secret_access_key"));
    }
    credentials->access_key_id = id->value;
    credentials->secret_access_key = secret->value;
    const Setting* token = section->Find("aws_session_token");
    if (token != nullptr) credentials->session_token = token->value;
    *found = true;
    return Status::OK();
  }

  // The credential_process of `section` (of profile `profile`), if any.
  bool ProcessCache(const SharedFile& file, const Section* section,
                    const std::string& profile,
                    std::shared_ptr<CredentialsCache>* cache,
                    std::string* key) const {
    const Setting* process =
        section != nullptr ? section->Find("credential_process") : nullptr;
    if (process == nullptr) return false;
    const std::string where = file.path() + ":" +
                              std::to_string(process->line) + " " +
                              section->header;
    const std::string& command = process->value;
    const int timeout = ProcessTimeout();
    *key = "process\n" + command + "\n" + profile + "\n" + where + "\n" +
           std::to_string(timeout);
    *cache = SharedCredentialsCache(*key, [&] {
      return MakeProcessProvider(command, profile, where, timeout);
    });
    return true;
  }

  int ProcessTimeout() const {
    const std::string v = Env("UFSPACK_CREDENTIAL_PROCESS_TIMEOUT_SECONDS");
    char* end = nullptr;
    const long t = v.empty() ? 0 : std::strtol(v.c_str(), &end, 10);
    return v.empty() || *end != '\0' || t <= 0 || t > 3600
               ? 60
               : static_cast<int>(t);
  }

  // The web identity settings of a config profile, if it has them.
  Status WebIdentityFrom(const Section& section, WebIdentityConfig* c,
                         bool* found) const {
    *found = false;
    const Setting* file = section.Find("web_identity_token_file");
    if (file == nullptr) return Status::OK();
    const Setting* role = section.Find("role_arn");
    if (role == nullptr) {
      return Status::InvalidArgument(
          Where(*file, section) +
          ": web_identity_token_file needs role_arn (the role to "
          "assume) in the same profile; found none");
    }
    c->source = c_.config_file->path() + ":" + std::to_string(file->line) +
                " " + section.header;
    c->token_file = file->value;
    c->role_arn = role->value;
    if (const Setting* name = section.Find("role_session_name")) {
      c->session_name = name->value;
    }
    *found = true;
    return Status::OK();
  }

  std::shared_ptr<CredentialsCache> WebIdentityCache(WebIdentityConfig c,
                                                     std::string* key) const {
    c.sts_endpoint = StsEndpoint(c_.env, c_.region);
    // One cache per role, token file, endpoint and named session.
    *key = "web-identity\n" + c.role_arn + "\n" + c.token_file + "\n" +
           c.sts_endpoint + "\n" + c.session_name;
    if (c.session_name.empty()) {
      c.session_name = "ufspack-session-" + std::to_string(::time(nullptr));
    }
    return SharedCredentialsCache(*key,
                                  [&] { return MakeWebIdentityProvider(c); });
  }

  Status RoleSettings(const Section& section, const std::string& where,
                      AssumeRoleConfig* c, std::string* named_session) const {
    const Setting* role = section.Find("role_arn");
    c->role_arn = role->value;
    c->source = c_.config_file->path() + ":" + std::to_string(role->line) +
                " " + section.header;
    // The cache key has the session name as configured (empty when not),
    // so that a default name made of the time does not split the cache.
    const Setting* session = section.Find("role_session_name");
    *named_session = session != nullptr ? session->value : std::string();
    c->session_name = session != nullptr ? session->value
                                         : "ufspack-session-" +
                                               std::to_string(::time(nullptr));
    if (const Setting* id = section.Find("external_id")) {
      c->external_id = id->value;
    }
    if (const Setting* d = section.Find("duration_seconds")) {
      char* end = nullptr;
      const long v = std::strtol(d->value.c_str(), &end, 10);
      if (*end != '\0' || v < 900 || v > 43200) {
        return Status::InvalidArgument(
            where + " duration_seconds: expected 900 to 43200; found '" +
            d->value + "'");
      }
      c->duration_seconds = static_cast<int>(v);
    }
    c->sts_endpoint = StsEndpoint(c_.env, c_.region);
    c->region = c_.region;
    return Status::OK();
  }

  // STS AssumeRole for the config profile `section` with role_arn, the
  // last of `chain` (the profiles whose roles lead here, first the one
  // asked for).
  Status AssumeRoleCache(const Section& section,
                         const std::vector<std::string>& chain,
                         std::shared_ptr<CredentialsCache>* cache,
                         std::string* key) {
    const std::string where = Where(*section.Find("role_arn"), section);
    const Setting* source_profile = section.Find("source_profile");
    const Setting* credential_source = section.Find("credential_source");
    if (source_profile == nullptr && credential_source == nullptr) {
      return Status::InvalidArgument(
          where +
          ": role_arn needs source_profile or credential_source (the "
          "credentials that assume the role), or "
          "web_identity_token_file; found none");
    }
    if (source_profile != nullptr && credential_source != nullptr) {
      return Status::InvalidArgument(
          where +
          ": expected one of source_profile and credential_source; "
          "found both");
    }
    if (section.Find("mfa_serial") != nullptr) {
      return Status::NotSupported(
          where +
          ": mfa_serial: the role needs an MFA code, and ufspack never "
          "prompts (it runs in training jobs); export temporary "
          "credentials instead, e.g. eval \"$(aws configure "
          "export-credentials --profile " +
          chain.front() + " --format env)\"");
    }
    AssumeRoleConfig c;
    std::string session;
    UFSPACK_RETURN_IF_ERROR(RoleSettings(section, where, &c, &session));
    std::string source_key;
    if (source_profile != nullptr) {
      UFSPACK_RETURN_IF_ERROR(SourceProfile(source_profile->value, where, chain,
                                            &c.source_credentials,
                                            &source_key));
    } else {
      UFSPACK_RETURN_IF_ERROR(CredentialSource(
          credential_source->value, where, &c.source_credentials, &source_key));
    }
    *key = "assume-role\n" + c.role_arn + "\n" + session + "\n" +
           c.external_id + "\n" + std::to_string(c.duration_seconds) + "\n" +
           c.sts_endpoint + "\n" + c.region + "\n" + c.source + "\n{" +
           source_key + "}";
    *cache =
        SharedCredentialsCache(*key, [&] { return MakeAssumeRoleProvider(c); });
    return Status::OK();
  }

  // The credentials of `name`, the source_profile of the last profile of
  // `chain`: another role (chained), web identity, static keys or
  // credential_process, in botocore's order.  A profile naming itself uses
  // its own static keys.
  Status SourceProfile(const std::string& name, const std::string& where,
                       std::vector<std::string> chain,
                       std::shared_ptr<CredentialsCache>* cache,
                       std::string* key) {
    const Section* in_credentials = CredentialsSection(name);
    const Section* in_config = ConfigSection(name);
    if (in_credentials == nullptr && in_config == nullptr) {
      return Status::InvalidArgument(
          where + ": source_profile '" + name + "': expected [" + name +
          "] in " + c_.credentials_file->Describe() + " or [" +
          (name == kDefaultProfile ? name : "profile " + name) + "] in " +
          c_.config_file->Describe() + "; found neither");
    }
    const bool self = name == chain.back();
    if (!self && in_config != nullptr &&
        in_config->Find("role_arn") != nullptr) {
      return ChainedRole(name, *in_config, where, std::move(chain), cache, key);
    }
    WebIdentityConfig web;
    bool found = false;
    if (!self && in_config != nullptr) {
      UFSPACK_RETURN_IF_ERROR(WebIdentityFrom(*in_config, &web, &found));
    }
    if (found) {
      *cache = WebIdentityCache(std::move(web), key);
      return Status::OK();
    }
    for (const Place& p : {Place{c_.credentials_file, in_credentials},
                           Place{c_.config_file, in_config}}) {
      Credentials keys;
      UFSPACK_RETURN_IF_ERROR(KeysFrom(*p.first, p.second, &keys, &found));
      if (found) {
        *cache =
            StaticCache(keys, p.first->path() + " " + p.second->header, key);
        return Status::OK();
      }
    }
    for (const Place& p : {Place{c_.config_file, in_config},
                           Place{c_.credentials_file, in_credentials}}) {
      if (ProcessCache(*p.first, p.second, name, cache, key)) {
        return Status::OK();
      }
    }
    return Status::InvalidArgument(
        where + ": source_profile '" + name + "': expected " +
        (self ? "" : "role_arn, web_identity_token_file, ") +
        "aws_access_key_id and aws_secret_access_key, or "
        "credential_process; found none");
  }

  Status ChainedRole(const std::string& name, const Section& section,
                     const std::string& where, std::vector<std::string> chain,
                     std::shared_ptr<CredentialsCache>* cache,
                     std::string* key) {
    const bool loop =
        std::find(chain.begin(), chain.end(), name) != chain.end();
    chain.push_back(name);
    if (loop) {
      return Status::InvalidArgument(
          where + ": source_profile '" + name +
          "' leads back to a profile already in the chain (" + Arrows(chain) +
          "); expected a chain that ends in credentials");
    }
    if (static_cast<int>(chain.size()) > kMaxChainedRoles) {
      return Status::InvalidArgument(
          where + ": expected at most " + std::to_string(kMaxChainedRoles) +
          " chained roles; found more (" + Arrows(chain) + ")");
    }
    return AssumeRoleCache(section, chain, cache, key);
  }

  // credential_source = Environment | EcsContainer | Ec2InstanceMetadata.
  Status CredentialSource(const std::string& value, const std::string& where,
                          std::shared_ptr<CredentialsCache>* cache,
                          std::string* key) {
    std::unique_ptr<CredentialsProvider> provider;
    if (value == "Environment") {
      Credentials keys{Env("AWS_ACCESS_KEY_ID"), Env("AWS_SECRET_ACCESS_KEY"),
                       Env("AWS_SESSION_TOKEN")};
      if (keys.access_key_id.empty() || keys.secret_access_key.empty()) {
        return Status::InvalidArgument(
            where +
            ": credential_source = Environment: expected "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; found "
            "them missing");
      }
      *cache = StaticCache(keys, "environment", key);
      return Status::OK();
    }
    if (value == "EcsContainer") {
      UFSPACK_RETURN_IF_ERROR(MakeContainerProvider(c_.env, &provider, key));
      if (provider == nullptr) {
        return Status::InvalidArgument(
            where +
            ": credential_source = EcsContainer: expected "
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or "
            "AWS_CONTAINER_CREDENTIALS_FULL_URI; found neither");
      }
    } else if (value == "Ec2InstanceMetadata") {
      UFSPACK_RETURN_IF_ERROR(MakeImdsFromProfile(&provider, key));
      if (provider == nullptr) {
        return Status::InvalidArgument(
            where +
            ": credential_source = Ec2InstanceMetadata, but "
            "AWS_EC2_METADATA_DISABLED is true");
      }
    } else {
      return Status::InvalidArgument(
          where +
          ": credential_source: expected Environment, EcsContainer "
          "or Ec2InstanceMetadata; found '" +
          value + "'");
    }
    *cache = SharedCredentialsCache(*key, [&] { return std::move(provider); });
    return Status::OK();
  }

  // IMDS with the top profile's ec2_metadata_v1_disabled.
  Status MakeImdsFromProfile(std::unique_ptr<CredentialsProvider>* provider,
                             std::string* key) const {
    const Section* section = ConfigSection(c_.profile);
    const Setting* v1 = section != nullptr
                            ? section->Find("ec2_metadata_v1_disabled")
                            : nullptr;
    return MakeImdsProvider(
        c_.env, v1 != nullptr ? v1->value : "",
        v1 != nullptr ? Where(*v1, *section) + " ec2_metadata_v1_disabled" : "",
        provider, key);
  }

  Status UnsupportedSourceError() const {
    for (const auto& [file, section] : TopPlaces(true)) {
      if (section == nullptr) continue;
      for (const UnsupportedSource& u : kUnsupportedSources) {
        const Setting* setting = section->Find(u.key);
        if (setting == nullptr) continue;
        return Status::InvalidArgument(
            file->At(setting->line) + section->header + ": profile '" +
            c_.profile + "' gets its credentials from '" + u.key + "' (" +
            u.what +
            "), which ufspack does not support; export "
            "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN "
            "instead, e.g. eval \"$(aws configure export-credentials "
            "--profile " +
            c_.profile +
            " --format env)\", or give the profile aws_access_key_id and "
            "aws_secret_access_key");
      }
    }
    return Status::OK();
  }

  const ChainContext& c_;
  ChainResult* r_;
};

}  // namespace

std::string StsEndpoint(const EnvLookup& env, const std::string& region) {
  if (AsciiLower(EnvValue(env, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")) !=
      "true") {
    for (const char* variable : {"AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL"}) {
      const std::string url = EnvValue(env, variable);
      if (!url.empty()) return url;
    }
  }
  return "https://sts." + region + ".amazonaws.com";
}

Status ResolveCredentials(const ChainContext& context, ChainResult* result) {
  *result = ChainResult();
  // STS's endpoint (StsEndpoint) goes into the URL and Host header.
  for (const char* variable : {"AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL"}) {
    UFSPACK_RETURN_IF_ERROR(CheckNoControlCharacters(
        EnvValue(context.env, variable), variable, ""));
  }
  return Chain(context, result).Resolve();
}

}  // namespace remote
}  // namespace ufspack
