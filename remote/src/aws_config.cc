// Copyright 2026 The ufspack Authors.
//
// The AWS settings loader (see aws_config.h for the precedence).
//
// The shared files are read the way botocore's configparser reads them:
//   - "[name]" section headers; in the config file "[default]" and
//     "[profile name]" are profiles, "[services name]" are services sections
//     and every other section (sso-session, plugins, a "[name]" missing its
//     "profile " prefix) is parsed but not used;
//   - "name = value" (or "name: value") settings, names case-insensitive,
//     whitespace around the delimiter ignored, no inline comments (a '#'
//     after a value is part of the value, as with the AWS CLI);
//   - whole-line comments starting with '#' or ';', blank lines;
//   - a sub-section: "s3 =" with nothing after the '=' followed by indented
//     "name = value" lines, stored as "s3.name".
// Supported sub-section settings: s3.endpoint_url and s3.addressing_style in
// the profile, s3.endpoint_url in the profile's "services = name" section
// ("[services name]", AWS's service-specific endpoint configuration), and
// the profile's ignore_configured_endpoint_urls.
#include "aws_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace ufspack {
namespace remote {

namespace {

constexpr char kDefaultRegion[] = "us-east-1";
constexpr char kDefaultProfile[] = "default";
// Shared config files are a few KiB; anything larger is not one.
constexpr size_t kMaxFileBytes = size_t{1} << 20;

std::string_view Trim(std::string_view s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A setting's value and the line it was read from.
struct Setting {
  std::string value;
  int line = 0;
};

// One section of a shared file.  Nested settings are keyed "parent.name".
struct Section {
  std::string header;  // as written in the file, e.g. "[profile dev]"
  std::map<std::string, Setting> settings;

  // The setting, or nullptr when absent or empty.
  const Setting* Find(const std::string& key) const {
    auto it = settings.find(key);
    if (it == settings.end() || it->second.value.empty()) return nullptr;
    return &it->second;
  }
};

enum class FileKind { kCredentials, kConfig };

// A parsed shared credentials or config file.
class SharedFile {
 public:
  SharedFile(std::string path, FileKind kind)
      : path_(std::move(path)), kind_(kind) {}

  // Reads and parses the file; a missing one is an empty one.  Never blocks
  // (a FIFO at the path is refused, not opened for reading).
  Status Load() {
    if (path_.empty()) return Status::OK();
    std::string text;
    Status s = ReadWholeFile(&text);
    if (!s.ok() || !exists_) return s;
    return Parse(text);
  }

  const std::string& path() const { return path_; }
  bool exists() const { return exists_; }

  const Section* Profile(const std::string& name) const {
    auto it = profiles_.find(name);
    return it == profiles_.end() ? nullptr : &it->second;
  }
  const Section* Services(const std::string& name) const {
    auto it = services_.find(name);
    return it == services_.end() ? nullptr : &it->second;
  }
  // Whether the config file has "[name]" (a profile written without its
  // "profile " prefix, which AWS's tools ignore).
  bool HasUnprefixed(const std::string& name) const {
    auto it = others_.find(name);
    return it != others_.end();
  }

  // "<path>:<line>: " for messages.
  std::string At(int line) const {
    return path_ + ":" + std::to_string(line) + ": ";
  }

 private:
  Status ReadWholeFile(std::string* text) {
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      if (errno == ENOENT || errno == ENOTDIR) return Status::OK();
      return Status::InvalidArgument(path_ +
                                     ": cannot open: " + std::strerror(errno));
    }
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status::InvalidArgument(
          path_ + ": expected a regular file (an AWS " + Kind() + " file)");
    }
    if (static_cast<uint64_t>(st.st_size) > kMaxFileBytes) {
      ::close(fd);
      return Status::InvalidArgument(
          path_ + ": expected an AWS " + Kind() + " file of at most " +
          std::to_string(kMaxFileBytes) + " bytes; found " +
          std::to_string(st.st_size) + " bytes");
    }
    text->clear();
    char buf[8192];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR) continue;
        const int err = errno;
        ::close(fd);
        return Status::InvalidArgument(path_ +
                                       ": cannot read: " + std::strerror(err));
      }
      if (n == 0) break;
      text->append(buf, static_cast<size_t>(n));
      if (text->size() > kMaxFileBytes) {
        ::close(fd);
        return Status::InvalidArgument(path_ + ": grew past " +
                                       std::to_string(kMaxFileBytes) +
                                       " bytes while being read");
      }
    }
    ::close(fd);
    exists_ = true;
    return Status::OK();
  }

  const char* Kind() const {
    return kind_ == FileKind::kConfig ? "config" : "credentials";
  }

  // The section that "[name]" opens in this file.
  Section* OpenSection(const std::string& name, const std::string& header) {
    std::map<std::string, Section>* table = &others_;
    std::string key = name;
    if (kind_ == FileKind::kCredentials) {
      table = &profiles_;
    } else if (name == kDefaultProfile) {
      table = &profiles_;
    } else if (StartsWith(name, "profile ") || StartsWith(name, "profile\t")) {
      table = &profiles_;
      key = std::string(Trim(std::string_view(name).substr(8)));
    } else if (StartsWith(name, "services ") ||
               StartsWith(name, "services\t")) {
      table = &services_;
      key = std::string(Trim(std::string_view(name).substr(9)));
    }
    Section& section = (*table)[key];
    if (section.header.empty()) section.header = header;
    return &section;
  }

  Status Parse(const std::string& text) {
    std::string_view rest(text);
    if (StartsWith(rest, "\xEF\xBB\xBF")) rest.remove_prefix(3);  // BOM
    Section* section = nullptr;
    std::string parent;  // the "name =" that opened the current sub-section
    int line_no = 0;
    while (!rest.empty()) {
      size_t eol = rest.find('\n');
      std::string_view line = rest.substr(0, eol);
      rest.remove_prefix(eol == std::string_view::npos ? rest.size() : eol + 1);
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      const std::string_view t = Trim(line);
      if (t.empty() || t[0] == '#' || t[0] == ';') continue;
      const bool indented = line[0] == ' ' || line[0] == '\t';

      if (!indented && t[0] == '[') {
        if (t.back() != ']') {
          return Status::InvalidArgument(
              At(line_no) + "expected ']' at the end of the section header");
        }
        const std::string name(Trim(t.substr(1, t.size() - 2)));
        if (name.empty()) {
          return Status::InvalidArgument(
              At(line_no) + "expected a section name between '[' and ']'");
        }
        section = OpenSection(name, std::string(t));
        parent.clear();
        continue;
      }
      if (section == nullptr) {
        return Status::InvalidArgument(
            At(line_no) +
            "expected a section header such as [default] before the first "
            "setting");
      }
      // The line is not echoed: a malformed line may be a pasted secret.
      const size_t eq = t.find_first_of("=:");
      if (eq == std::string_view::npos) {
        return Status::InvalidArgument(
            At(line_no) + "expected 'name = value', a [section] header or a " +
            "comment; found a line without '=' (not shown: it may hold a "
            "secret)");
      }
      const std::string name = Lower(Trim(t.substr(0, eq)));
      if (name.empty()) {
        return Status::InvalidArgument(
            At(line_no) + "expected a setting name before '" + t[eq] + "'");
      }
      Setting setting{std::string(Trim(t.substr(eq + 1))), line_no};
      if (indented && !parent.empty()) {
        section->settings[parent + "." + name] = std::move(setting);
        continue;
      }
      // An empty value may open a sub-section of indented lines.
      parent = setting.value.empty() ? name : std::string();
      section->settings[name] = std::move(setting);
    }
    return Status::OK();
  }

  std::string path_;
  FileKind kind_;
  bool exists_ = false;
  std::map<std::string, Section> profiles_;
  std::map<std::string, Section> services_;
  std::map<std::string, Section> others_;
};

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
    if (s.ok()) s = LoadRegion(out);  // web identity's STS endpoint needs it
    if (s.ok()) s = LoadCredentials(out);
    if (s.ok()) s = LoadEndpoint(out);
    if (s.ok()) s = LoadAddressing(out);
    if (s.ok()) LoadCaBundle(out);
    return s;
  }

 private:
  // The variable's value; unset and empty are the same.
  std::string Env(const char* name) const {
    const char* v = env_ ? env_(name) : nullptr;
    return v == nullptr ? std::string() : std::string(v);
  }

  std::string FilePath(const char* variable, const std::string& home,
                       const char* default_suffix) const {
    std::string path = Env(variable);
    if (path.empty()) {
      return home.empty() ? std::string() : home + default_suffix;
    }
    if (StartsWith(path, "~/") && !home.empty()) path = home + path.substr(1);
    return path;
  }

  std::string Describe(const SharedFile& file) const {
    if (!file.path().empty()) return file.path();
    return "(no file: HOME is not set)";
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
        Describe(credentials_file_) +
        (credentials_file_.exists() ? "" : " (missing)") + " or [" +
        (profile == kDefaultProfile ? profile : "profile " + profile) +
        "] in " + Describe(config_file_) +
        (config_file_.exists() ? "" : " (missing)");
    if (config_file_.HasUnprefixed(profile)) {
      msg += "; the config file has [" + profile +
             "], which AWS's tools ignore: write it [profile " + profile + "]";
    }
    return Status::InvalidArgument(msg);
  }

  // Static keys of `section`, if it has any; a half pair is an error.
  Status KeysFrom(const SharedFile& file, const Section* section,
                  Credentials* credentials, bool* found) const {
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

  Status UnsupportedSourceError(const std::string& profile) const {
    const std::pair<const SharedFile*, const Section*> places[] = {
        {&config_file_, config_section_},
        {&credentials_file_, credentials_section_}};
    for (const auto& [file, section] : places) {
      if (section == nullptr) continue;
      for (const UnsupportedSource& u : kUnsupportedSources) {
        const Setting* setting = section->Find(u.key);
        if (setting == nullptr) continue;
        return Status::InvalidArgument(
            file->At(setting->line) + section->header + ": profile '" +
            profile + "' gets its credentials from '" + u.key + "' (" + u.what +
            "), which ufspack does not support; export "
            "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN "
            "instead, e.g. eval \"$(aws configure export-credentials "
            "--profile " +
            profile +
            " --format env)\", or give the profile aws_access_key_id and "
            "aws_secret_access_key");
      }
    }
    return Status::OK();
  }

  Status LoadCredentials(AwsSettings* out) {
    const std::string id = Env("AWS_ACCESS_KEY_ID");
    const std::string secret = Env("AWS_SECRET_ACCESS_KEY");
    if (!id.empty() || !secret.empty()) {
      if (id.empty() || secret.empty()) {
        return Status::InvalidArgument(
            std::string("expected both AWS_ACCESS_KEY_ID and "
                        "AWS_SECRET_ACCESS_KEY in the environment; found "
                        "only ") +
            (id.empty() ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID"));
      }
      out->credentials.access_key_id = id;
      out->credentials.secret_access_key = secret;
      out->credentials.session_token = Env("AWS_SESSION_TOKEN");
      return UseStatic(out, "environment");
    }
    bool used = false;
    UFSPACK_RETURN_IF_ERROR(LoadWebIdentity(out, &used));
    if (used) return Status::OK();
    UFSPACK_RETURN_IF_ERROR(LoadAssumeRole(out, &used));
    if (used) return Status::OK();
    const std::pair<const SharedFile*, const Section*> places[] = {
        {&credentials_file_, credentials_section_},
        {&config_file_, config_section_}};
    for (const auto& [file, section] : places) {
      bool found = false;
      Status s = KeysFrom(*file, section, &out->credentials, &found);
      if (!s.ok()) return s;
      if (found) return UseStatic(out, file->path() + " " + section->header);
    }
    const std::pair<const SharedFile*, const Section*> process_places[] = {
        {&config_file_, config_section_},
        {&credentials_file_, credentials_section_}};
    for (const auto& [file, section] : process_places) {
      const Setting* process =
          section != nullptr ? section->Find("credential_process") : nullptr;
      if (process == nullptr) continue;
      const std::string where = file->path() + ":" +
                                std::to_string(process->line) + " " +
                                section->header;
      const std::string command = process->value;
      const std::string profile = out->profile;
      const int timeout = ProcessTimeout();
      return UseCache(out, SharedCredentialsCache(
                               "process\n" + command + "\n" + profile + "\n" +
                                   where + "\n" + std::to_string(timeout),
                               [&] {
                                 return MakeProcessProvider(command, profile,
                                                            where, timeout);
                               }));
    }
    Status s = UnsupportedSourceError(out->profile);
    if (!s.ok()) return s;

    std::unique_ptr<CredentialsProvider> provider;
    std::string key;
    UFSPACK_RETURN_IF_ERROR(MakeContainerProvider(env_, &provider, &key));
    if (provider != nullptr) {
      return UseCache(out, SharedCredentialsCache(
                               key, [&] { return std::move(provider); }));
    }
    UFSPACK_RETURN_IF_ERROR(MakeImdsProvider(env_, &provider, &key));
    if (provider == nullptr) {
      out->credentials_source =
          "none (anonymous; EC2 instance metadata disabled by "
          "AWS_EC2_METADATA_DISABLED)";
      return Status::OK();
    }
    std::shared_ptr<CredentialsCache> imds =
        SharedCredentialsCache(key, [&] { return std::move(provider); });
    std::shared_ptr<const Credentials> current;
    s = imds->Get(&current);
    if (!s.ok()) {
      out->credentials_source =
          "none (anonymous; tried the environment, profile '" + out->profile +
          "' in the shared files, container credentials (not configured), "
          "then " +
          std::string(s.message()) + ")";
      return Status::OK();
    }
    out->credentials = *current;
    out->credentials_source = imds->Name();
    out->provider = std::move(imds);
    return Status::OK();
  }

  // STS: AWS_ENDPOINT_URL_STS > AWS_ENDPOINT_URL (unless ignored) >
  // https://sts.REGION.amazonaws.com.
  std::string StsEndpoint(const AwsSettings& out) const {
    const std::string ignore =
        Lower(Env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"));
    if (ignore != "true") {
      for (const char* variable :
           {"AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL"}) {
        const std::string url = Env(variable);
        if (!url.empty()) return url;
      }
    }
    return "https://sts." + out.region + ".amazonaws.com";
  }

  // Web identity from the environment (AWS_WEB_IDENTITY_TOKEN_FILE +
  // AWS_ROLE_ARN [+ AWS_ROLE_SESSION_NAME]), else from the profile
  // (web_identity_token_file + role_arn [+ role_session_name]).
  Status LoadWebIdentity(AwsSettings* out, bool* used) {
    *used = false;
    WebIdentityConfig c;
    c.token_file = Env("AWS_WEB_IDENTITY_TOKEN_FILE");
    c.role_arn = Env("AWS_ROLE_ARN");
    c.session_name = Env("AWS_ROLE_SESSION_NAME");
    c.source = "the environment";
    if (c.token_file.empty() && !c.role_arn.empty()) {
      // AWS_ROLE_ARN alone is not web identity (the SDKs ignore it too).
      c.role_arn.clear();
    }
    if (!c.token_file.empty() && c.role_arn.empty()) {
      return Status::InvalidArgument(
          "web identity: AWS_WEB_IDENTITY_TOKEN_FILE is set; expected "
          "AWS_ROLE_ARN with it (the role to assume); found none");
    }
    if (c.token_file.empty() && config_section_ != nullptr) {
      const Setting* file = config_section_->Find("web_identity_token_file");
      if (file != nullptr) {
        const Setting* role = config_section_->Find("role_arn");
        c.source = config_file_.path() + ":" + std::to_string(file->line) +
                   " " + config_section_->header;
        if (role == nullptr) {
          return Status::InvalidArgument(
              config_file_.At(file->line) + config_section_->header +
              ": web_identity_token_file needs role_arn (the role to "
              "assume) in the same profile; found none");
        }
        c.token_file = file->value;
        c.role_arn = role->value;
        if (const Setting* name = config_section_->Find("role_session_name")) {
          c.session_name = name->value;
        }
      }
    }
    if (c.token_file.empty()) return Status::OK();
    c.sts_endpoint = StsEndpoint(*out);
    // One cache per role, token file, endpoint and named session.
    const std::string key = "web-identity\n" + c.role_arn + "\n" +
                            c.token_file + "\n" + c.sts_endpoint + "\n" +
                            c.session_name;
    if (c.session_name.empty()) {
      c.session_name = "ufspack-session-" + std::to_string(::time(nullptr));
    }
    *used = true;
    return UseCache(out, SharedCredentialsCache(
                             key, [&] { return MakeWebIdentityProvider(c); }));
  }

  // A profile with role_arn + source_profile or credential_source (in the
  // config file): STS AssumeRole signed with the source's credentials.
  Status LoadAssumeRole(AwsSettings* out, bool* used) {
    *used = false;
    if (config_section_ == nullptr) return Status::OK();
    const Section& section = *config_section_;
    const Setting* role = section.Find("role_arn");
    const Setting* source_profile = section.Find("source_profile");
    const Setting* credential_source = section.Find("credential_source");
    if (role == nullptr) {
      const Setting* orphan =
          source_profile != nullptr ? source_profile : credential_source;
      if (orphan == nullptr) return Status::OK();
      return Status::InvalidArgument(
          config_file_.At(orphan->line) + section.header + ": " +
          (orphan == source_profile ? "source_profile" : "credential_source") +
          " needs role_arn (the role to assume) in the same profile; found "
          "none");
    }
    const std::string where = config_file_.At(role->line) + section.header;
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
          ": mfa_serial (a prompt for an MFA code) is not supported; "
          "export temporary credentials instead, e.g. eval \"$(aws "
          "configure export-credentials --profile " +
          out->profile + " --format env)\"");
    }
    AssumeRoleConfig c;
    c.role_arn = role->value;
    c.source = config_file_.path() + ":" + std::to_string(role->line) + " " +
               section.header;
    // The cache key has the session name as configured (empty when not),
    // so that a default name made of the time does not split the cache.
    const Setting* named_session = section.Find("role_session_name");
    const std::string session =
        named_session != nullptr ? named_session->value : std::string();
    c.session_name = named_session != nullptr
                         ? session
                         : "ufspack-session-" + std::to_string(::time(nullptr));
    if (const Setting* id = section.Find("external_id"))
      c.external_id = id->value;
    if (const Setting* d = section.Find("duration_seconds")) {
      char* end = nullptr;
      const long v = std::strtol(d->value.c_str(), &end, 10);
      if (*end != '\0' || v < 900 || v > 43200) {
        return Status::InvalidArgument(
            config_file_.At(d->line) + section.header +
            " duration_seconds: expected 900 to 43200; found '" + d->value +
            "'");
      }
      c.duration_seconds = static_cast<int>(v);
    }
    c.sts_endpoint = StsEndpoint(*out);
    c.region = out->region;
    std::string source_key;
    if (source_profile != nullptr) {
      UFSPACK_RETURN_IF_ERROR(SourceProfile(
          source_profile->value, where, &c.source_credentials, &source_key));
    } else {
      UFSPACK_RETURN_IF_ERROR(CredentialSource(
          credential_source->value, where, &c.source_credentials, &source_key));
    }
    *used = true;
    const std::string key =
        "assume-role\n" + c.role_arn + "\n" + session + "\n" + c.external_id +
        "\n" + std::to_string(c.duration_seconds) + "\n" + c.sts_endpoint +
        "\n" + c.region + "\n" + c.source + "\n" + source_key;
    return UseCache(out, SharedCredentialsCache(
                             key, [&] { return MakeAssumeRoleProvider(c); }));
  }

  // The credentials of `name`, a source_profile: its static keys or its
  // credential_process (a profile that itself assumes a role is not
  // supported yet).
  Status SourceProfile(const std::string& name, const std::string& where,
                       std::shared_ptr<CredentialsCache>* cache,
                       std::string* key) {
    const Section* in_credentials = credentials_file_.Profile(name);
    const Section* in_config = config_file_.Profile(name);
    if (in_credentials == nullptr && in_config == nullptr) {
      return Status::InvalidArgument(
          where + ": source_profile '" + name + "': expected [" + name +
          "] in " + Describe(credentials_file_) + " or [" +
          (name == kDefaultProfile ? name : "profile " + name) + "] in " +
          Describe(config_file_) + "; found neither");
    }
    const std::pair<const SharedFile*, const Section*> places[] = {
        {&credentials_file_, in_credentials}, {&config_file_, in_config}};
    for (const auto& [file, section] : places) {
      Credentials keys;
      bool found = false;
      UFSPACK_RETURN_IF_ERROR(KeysFrom(*file, section, &keys, &found));
      if (!found) continue;
      const std::string source = file->path() + " " + section->header;
      *key = "static\n" + source + "\n" + keys.access_key_id + "\n" +
             Sha256Hex(keys.secret_access_key + "\n" + keys.session_token);
      *cache =
          std::make_shared<CredentialsCache>(MakeStaticProvider(keys, source));
      return Status::OK();
    }
    const std::pair<const SharedFile*, const Section*> process_places[] = {
        {&config_file_, in_config}, {&credentials_file_, in_credentials}};
    for (const auto& [file, section] : process_places) {
      const Setting* process =
          section != nullptr ? section->Find("credential_process") : nullptr;
      if (process == nullptr) continue;
      const std::string at = file->path() + ":" +
                             std::to_string(process->line) + " " +
                             section->header;
      const std::string command = process->value;
      const int timeout = ProcessTimeout();
      *key = "process\n" + command + "\n" + name + "\n" + at + "\n" +
             std::to_string(timeout);
      *cache = SharedCredentialsCache(*key, [&] {
        return MakeProcessProvider(command, name, at, timeout);
      });
      return Status::OK();
    }
    if (in_config != nullptr && in_config->Find("role_arn") != nullptr) {
      return Status::NotSupported(
          where + ": source_profile '" + name +
          "' assumes a role itself; chained roles are not supported yet");
    }
    return Status::InvalidArgument(
        where + ": source_profile '" + name +
        "': expected aws_access_key_id and aws_secret_access_key, or "
        "credential_process; found neither");
  }

  // credential_source = Environment | EcsContainer | Ec2InstanceMetadata.
  Status CredentialSource(const std::string& value, const std::string& where,
                          std::shared_ptr<CredentialsCache>* cache,
                          std::string* key) {
    std::unique_ptr<CredentialsProvider> provider;
    if (value == "Environment") {
      Credentials keys;
      keys.access_key_id = Env("AWS_ACCESS_KEY_ID");
      keys.secret_access_key = Env("AWS_SECRET_ACCESS_KEY");
      keys.session_token = Env("AWS_SESSION_TOKEN");
      if (keys.access_key_id.empty() || keys.secret_access_key.empty()) {
        return Status::InvalidArgument(
            where +
            ": credential_source = Environment: expected "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; found "
            "them missing");
      }
      *key = "static\nenvironment\n" + keys.access_key_id + "\n" +
             Sha256Hex(keys.secret_access_key + "\n" + keys.session_token);
      *cache = std::make_shared<CredentialsCache>(
          MakeStaticProvider(keys, "environment"));
      return Status::OK();
    }
    if (value == "EcsContainer") {
      UFSPACK_RETURN_IF_ERROR(MakeContainerProvider(env_, &provider, key));
      if (provider == nullptr) {
        return Status::InvalidArgument(
            where +
            ": credential_source = EcsContainer: expected "
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or "
            "AWS_CONTAINER_CREDENTIALS_FULL_URI; found neither");
      }
    } else if (value == "Ec2InstanceMetadata") {
      UFSPACK_RETURN_IF_ERROR(MakeImdsProvider(env_, &provider, key));
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

  int ProcessTimeout() const {
    const std::string v = Env("UFSPACK_CREDENTIAL_PROCESS_TIMEOUT_SECONDS");
    char* end = nullptr;
    const long t = v.empty() ? 0 : std::strtol(v.c_str(), &end, 10);
    return v.empty() || *end != '\0' || t <= 0 || t > 3600
               ? 60
               : static_cast<int>(t);
  }

  Status UseStatic(AwsSettings* out, const std::string& source) {
    out->credentials_source = source;
    out->provider = std::make_shared<CredentialsCache>(
        MakeStaticProvider(out->credentials, source));
    return Status::OK();
  }

  // Credentials from a configured source: failing to get them is an error.
  Status UseCache(AwsSettings* out, std::shared_ptr<CredentialsCache> cache) {
    std::shared_ptr<const Credentials> current;
    Status s = cache->Get(&current);
    if (!s.ok()) {
      return s.WithContext("AWS credentials for profile '" + out->profile +
                           "'");
    }
    out->credentials = *current;
    out->credentials_source = cache->Name();
    out->provider = std::move(cache);
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
    const std::string v = Lower(value);
    if (v == "true" || v == "false") {
      *b = v == "true";
      return Status::OK();
    }
    return Status::InvalidArgument(where + ": expected true or false; found '" +
                                   value + "'");
  }

  static Status CheckUrl(const std::string& where, const std::string& url) {
    const std::string lower = Lower(url);
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
    const std::string v = Lower(style->value);
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

std::string AwsSettings::Describe() const {
  std::string out = "profile '" + profile + "', region " + region +
                    ", endpoint " +
                    (endpoint_url.empty() ? "AWS" : endpoint_url) +
                    ", addressing " + AddressingName(addressing);
  if (!ca_bundle.empty()) out += ", CA bundle " + ca_bundle;
  out += ", credentials: " + credentials_source;
  if (!credentials.empty()) {
    // Like "aws configure list": only the last 4 characters of the key id.
    const std::string& id = credentials.access_key_id;
    out += " (access key id ****" +
           (id.size() > 4 ? id.substr(id.size() - 4) : std::string()) +
           (credentials.session_token.empty() ? ")" : ", with session token)");
  }
  return out;
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

}  // namespace remote
}  // namespace ufspack
