// Copyright 2026 The ufspack Authors.
//
// The credential providers (see credentials.h); the refreshing cache is
// in credentials_cache.cc, the JSON and times of credential documents in
// credentials_json.cc.
#include "credentials.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <new>
#include <set>
#include <utility>

#include "http.h"

extern char** environ;

namespace ufspack {
namespace remote {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// --- static

class StaticProvider final : public CredentialsProvider {
 public:
  StaticProvider(const Credentials& c, std::string name)
      : credentials_(c), name_(std::move(name)) {}
  Status Fetch(TimedCredentials* out) override {
    out->credentials = credentials_;
    out->expiration = 0;
    return Status::OK();
  }
  std::string Name() const override { return name_; }

 private:
  const Credentials credentials_;
  const std::string name_;
};

// --- credential_process

class ProcessProvider final : public CredentialsProvider {
 public:
  ProcessProvider(std::string command, std::string profile, std::string where,
                  int timeout_seconds)
      : command_(std::move(command)),
        profile_(std::move(profile)),
        where_(std::move(where)),
        timeout_seconds_(timeout_seconds) {}

  std::string Name() const override {
    return "credential_process of profile '" + profile_ + "' (" + where_ + ")";
  }

  Status Fetch(TimedCredentials* out) override {
    std::vector<std::string> argv;
    Status s = SplitCommand(command_, &argv);
    if (!s.ok()) return s.WithContext(Name());
    if (argv.empty()) {
      return Status::InvalidArgument(Name() +
                                     ": expected a command; found "
                                     "an empty value");
    }
    std::string output;
    UFSPACK_RETURN_IF_ERROR(Run(argv, &output));
    TimedCredentials c;
    UFSPACK_RETURN_IF_ERROR(
        CredentialsFromJson(output, Name(), "SessionToken", &c));
    std::map<std::string, std::string> m;
    (void)ParseJsonObject(output, &m);  // parsed above
    if (m["Version"] != "1") {
      return Status::InvalidArgument(
          Name() + ": expected \"Version\": 1 in its JSON output; found " +
          (m.count("Version") ? "\"Version\": " + m["Version"]
                              : std::string("no \"Version\"")));
    }
    *out = std::move(c);
    return Status::OK();
  }

 private:
  static constexpr size_t kMaxOutput = 64 << 10;

  Status Run(const std::vector<std::string>& argv, std::string* output) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      return Status::FromErrno(Name() + ": pipe", errno);
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    const int rc =
        ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
      ::close(fds[0]);
      return Status::InvalidArgument(Name() + ": cannot run '" + argv[0] +
                                     "': " + std::strerror(rc));
    }
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::seconds(timeout_seconds_);
    bool timed_out = false, too_long = false;
    char buf[4096];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) {
        timed_out = true;
        break;
      }
      pollfd p{fds[0], POLLIN, 0};
      const int n =
          ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) continue;
      const ssize_t r = ::read(fds[0], buf, sizeof(buf));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      output->append(buf, static_cast<size_t>(r));
      if (output->size() > kMaxOutput) {
        too_long = true;
        break;
      }
    }
    ::close(fds[0]);
    if (timed_out || too_long) ::kill(pid, SIGKILL);
    int wstatus = 0;
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
      return Status::IOError(Name() + ": expected it to finish within " +
                             std::to_string(timeout_seconds_) +
                             " s; killed it");
    }
    if (too_long) {
      return Status::InvalidArgument(Name() + ": expected at most " +
                                     std::to_string(kMaxOutput) +
                                     " bytes of JSON on stdout; found more");
    }
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0) {
      return Status::IOError(Name() + ": '" + argv[0] +
                             "' exited with status " +
                             std::to_string(WEXITSTATUS(wstatus)) +
                             " (its stderr is passed through; its stdout is "
                             "not shown)");
    }
    if (WIFSIGNALED(wstatus)) {
      return Status::IOError(Name() + ": '" + argv[0] +
                             "' was killed by signal " +
                             std::to_string(WTERMSIG(wstatus)));
    }
    return Status::OK();
  }

  const std::string command_, profile_, where_;
  const int timeout_seconds_;
};

// --- HTTP helpers for the metadata endpoints

RemoteOptions MetadataOptions() {
  RemoteOptions o;
  o.max_in_flight = 1;
  o.max_attempts = 2;
  o.retry_seconds = 3;
  o.connect_timeout_ms = 1000;
  o.stall_seconds = 1;
  return o;
}

Status HttpCall(const std::string& method, const std::string& url,
                std::vector<Header> headers, const std::string& what,
                std::string* body, const std::string& request_body = "") {
  Transfer t;
  t.method = method;
  t.url = url;
  t.display = Redact(url);
  t.headers = std::move(headers);
  if (!request_body.empty()) {
    t.upload = request_body.data();
    t.upload_size = request_body.size();
  }
  Transfer* list[] = {&t};
  Status s = RunTransfers(list, 1, MetadataOptions());
  if (!s.ok()) return s.WithContext(what);
  *body = std::move(t.body);
  return Status::OK();
}

// Reads a one-line secret (a token) from `path`; `what` names the provider
// and variable for messages, which never show the contents.
Status ReadTokenFile(const std::string& path, const std::string& what,
                     std::string* token) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return Status::InvalidArgument(what + ": expected a readable file; " +
                                   std::strerror(errno));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 65536) {
    ::close(fd);
    return Status::InvalidArgument(
        what + ": expected a regular file of at most 65536 bytes");
  }
  token->clear();
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Status::InvalidArgument(what + ": " + std::strerror(err));
    }
    token->append(buf, static_cast<size_t>(n));
    if (token->size() > 65536) break;
  }
  ::close(fd);
  while (!token->empty() && (token->back() == '\n' || token->back() == '\r' ||
                             token->back() == ' ')) {
    token->pop_back();
  }
  if (token->empty() || token->size() > 65536 ||
      token->find_first_of("\r\n") != std::string::npos) {
    return Status::InvalidArgument(
        what + ": expected one line holding the token; found " +
        (token->empty() ? "an empty file" : "several lines (not shown)"));
  }
  return Status::OK();
}

// --- container

bool AllowedPlainHttpHost(const std::string& url) {
  // http://HOST[:port]/...: loopback, or the ECS / EKS Pod Identity agents.
  const std::string rest = url.substr(7);
  std::string host = rest.substr(0, rest.find_first_of("/?#"));
  if (!host.empty() && host[0] == '[') {
    host = host.substr(0, host.find(']') + 1);
  } else {
    host = host.substr(0, host.find(':'));
  }
  host = Lower(host);
  return host == "localhost" || host == "[::1]" ||
         host.compare(0, 4, "127.") == 0 || host == "169.254.170.2" ||
         host == "169.254.170.23" || host == "[fd00:ec2::23]";
}

class ContainerProvider final : public CredentialsProvider {
 public:
  ContainerProvider(std::string url, std::string token, std::string token_file)
      : url_(std::move(url)),
        token_(std::move(token)),
        token_file_(std::move(token_file)) {}

  std::string Name() const override {
    return "container credentials (" + Redact(url_) + ")";
  }

  Status Fetch(TimedCredentials* out) override {
    std::vector<Header> headers;
    std::string token = token_;
    if (!token_file_.empty()) UFSPACK_RETURN_IF_ERROR(ReadToken(&token));
    if (!token.empty()) headers.emplace_back("Authorization", token);
    std::string body;
    UFSPACK_RETURN_IF_ERROR(HttpCall("GET", url_, headers, Name(), &body));
    return CredentialsFromJson(body, Name(), "Token", out);
  }

 private:
  Status ReadToken(std::string* token) const {
    return ReadTokenFile(
        token_file_,
        Name() + ": AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE " + token_file_,
        token);
  }

  const std::string url_, token_, token_file_;
};

// --- web identity (STS AssumeRoleWithWebIdentity)

// The text of the first <tag>...</tag> in `xml`, entities decoded.
bool XmlText(const std::string& xml, const std::string& tag, std::string* out) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  const size_t b = xml.find(open);
  if (b == std::string::npos) return false;
  const size_t e = xml.find(close, b + open.size());
  if (e == std::string::npos) return false;
  const std::string raw = xml.substr(b + open.size(), e - b - open.size());
  out->clear();
  static const std::pair<const char*, char> kEntities[] = {{"&amp;", '&'},
                                                           {"&lt;", '<'},
                                                           {"&gt;", '>'},
                                                           {"&quot;", '"'},
                                                           {"&apos;", '\''}};
  for (size_t i = 0; i < raw.size();) {
    bool replaced = false;
    if (raw[i] == '&') {
      for (const auto& [entity, c] : kEntities) {
        if (raw.compare(i, std::strlen(entity), entity) == 0) {
          out->push_back(c);
          i += std::strlen(entity);
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out->push_back(raw[i++]);
  }
  return true;
}

// The Credentials of an STS AssumeRole* response.
Status StsCredentials(const std::string& response, const std::string& name,
                      const std::string& action, TimedCredentials* out) {
  TimedCredentials t;
  std::string expiration;
  if (!XmlText(response, "AccessKeyId", &t.credentials.access_key_id) ||
      !XmlText(response, "SecretAccessKey", &t.credentials.secret_access_key) ||
      !XmlText(response, "SessionToken", &t.credentials.session_token) ||
      !XmlText(response, "Expiration", &expiration) ||
      t.credentials.access_key_id.empty() ||
      t.credentials.secret_access_key.empty()) {
    return Status::IOError(name + ": expected an " + action +
                           "Response with AccessKeyId, SecretAccessKey, "
                           "SessionToken and Expiration; found a response "
                           "without them (not shown)");
  }
  if (!ParseIso8601(expiration, &t.expiration)) {
    return Status::IOError(name +
                           ": expected Expiration as an ISO 8601 time; "
                           "found '" +
                           expiration + "'");
  }
  *out = std::move(t);
  return Status::OK();
}

std::string FormEncode(const std::vector<Header>& fields) {
  std::string body;
  for (const Header& f : fields) {
    if (!body.empty()) body += "&";
    body += UriEncode(f.first, false) + "=" + UriEncode(f.second, false);
  }
  return body;
}

class WebIdentityProvider final : public CredentialsProvider {
 public:
  WebIdentityProvider(WebIdentityConfig c) : c_(std::move(c)) {
    while (!c_.sts_endpoint.empty() && c_.sts_endpoint.back() == '/') {
      c_.sts_endpoint.pop_back();
    }
  }

  std::string Name() const override {
    return "web identity (role " + c_.role_arn + ", token file " +
           c_.token_file + " from " + c_.source + ", STS " + c_.sts_endpoint +
           ")";
  }

  Status Fetch(TimedCredentials* out) override {
    std::string token;
    UFSPACK_RETURN_IF_ERROR(ReadTokenFile(
        c_.token_file, Name() + ": token file " + c_.token_file, &token));
    const std::string body =
        "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=" +
        UriEncode(c_.role_arn, false) +
        "&RoleSessionName=" + UriEncode(c_.session_name, false) +
        "&WebIdentityToken=" + UriEncode(token, false);
    std::string response;
    UFSPACK_RETURN_IF_ERROR(
        HttpCall("POST", c_.sts_endpoint + "/",
                 {{"Content-Type", "application/x-www-form-urlencoded"}},
                 Name() + ": AssumeRoleWithWebIdentity", &response, body));
    return StsCredentials(response, Name(), "AssumeRoleWithWebIdentity", out);
  }

 private:
  WebIdentityConfig c_;
};

// --- assume role (STS AssumeRole signed with the source credentials)

class AssumeRoleProvider final : public CredentialsProvider {
 public:
  explicit AssumeRoleProvider(AssumeRoleConfig c) : c_(std::move(c)) {
    while (!c_.sts_endpoint.empty() && c_.sts_endpoint.back() == '/') {
      c_.sts_endpoint.pop_back();
    }
  }

  std::string Name() const override {
    return "assume role (role " + c_.role_arn + " from " + c_.source +
           ", source credentials: " + c_.source_credentials->Name() + ", STS " +
           c_.sts_endpoint + ")";
  }

  Status Fetch(TimedCredentials* out) override {
    std::shared_ptr<const Credentials> source;
    Status s = c_.source_credentials->Get(&source);
    if (!s.ok()) return s.WithContext(Name() + ": source credentials");
    std::vector<Header> form = {{"Action", "AssumeRole"},
                                {"Version", "2011-06-15"},
                                {"RoleArn", c_.role_arn},
                                {"RoleSessionName", c_.session_name}};
    if (!c_.external_id.empty())
      form.emplace_back("ExternalId", c_.external_id);
    if (c_.duration_seconds > 0) {
      form.emplace_back("DurationSeconds", std::to_string(c_.duration_seconds));
    }
    const std::string body = FormEncode(form);
    const size_t sep = c_.sts_endpoint.find("://");
    const std::string rest = sep == std::string::npos
                                 ? c_.sts_endpoint
                                 : c_.sts_endpoint.substr(sep + 3);
    const size_t slash = rest.find('/');
    const std::string host = rest.substr(0, slash);
    const std::string path =
        slash == std::string::npos ? "/" : rest.substr(slash) + "/";
    SigningRequest req;
    req.method = "POST";
    req.path = path;
    req.headers = {{"host", host},
                   {"content-type", "application/x-www-form-urlencoded"}};
    req.payload_hash = Sha256Hex(body);
    SigningScope scope;
    scope.region = c_.region;
    scope.service = "sts";
    scope.amz_date = AmzDateNow();
    scope.s3 = false;
    std::vector<Header> headers = {
        {"Host", host}, {"Content-Type", "application/x-www-form-urlencoded"}};
    for (Header& h : Sign(req, *source, scope)) headers.push_back(std::move(h));
    std::string response;
    UFSPACK_RETURN_IF_ERROR(HttpCall("POST", c_.sts_endpoint + "/", headers,
                                     Name() + ": AssumeRole", &response, body));
    return StsCredentials(response, Name(), "AssumeRole", out);
  }

 private:
  AssumeRoleConfig c_;
};

// --- IMDSv2

class ImdsProvider final : public CredentialsProvider {
 public:
  explicit ImdsProvider(std::string endpoint) : endpoint_(std::move(endpoint)) {
    while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
  }

  std::string Name() const override {
    return "EC2 instance metadata (IMDSv2, " + endpoint_ + ")";
  }

  Status Fetch(TimedCredentials* out) override {
    std::string token;
    UFSPACK_RETURN_IF_ERROR(
        HttpCall("PUT", endpoint_ + "/latest/api/token",
                 {{"X-aws-ec2-metadata-token-ttl-seconds", "21600"}},
                 Name() + ": session token (IMDSv1 is not used)", &token));
    if (token.empty()) {
      return Status::IOError(Name() +
                             ": PUT /latest/api/token: expected a "
                             "session token; found an empty body");
    }
    const std::vector<Header> auth = {{"X-aws-ec2-metadata-token", token}};
    const std::string base =
        endpoint_ + "/latest/meta-data/iam/security-credentials/";
    std::string roles;
    Status s = HttpCall("GET", base, auth, Name() + ": role name", &roles);
    if (s.IsNotFound()) {
      return Status::NotFound(Name() +
                              ": the instance has no IAM role attached (" +
                              std::string(s.message()) + ")");
    }
    UFSPACK_RETURN_IF_ERROR(s);
    const std::string role = roles.substr(0, roles.find_first_of("\r\n"));
    if (role.empty() || role.find('/') != std::string::npos) {
      return Status::IOError(
          Name() + ": GET " + base + ": expected a role name; found " +
          (role.empty() ? "an empty body" : "'" + role + "'"));
    }
    std::string body;
    s = HttpCall("GET", base + role, auth, Name() + ": role '" + role + "'",
                 &body);
    UFSPACK_RETURN_IF_ERROR(s);
    std::map<std::string, std::string> m;
    if (ParseJsonObject(body, &m).ok() && m.count("Code") &&
        m["Code"] != "Success") {
      return Status::IOError(Name() + ": role '" + role +
                             "': expected \"Code\": \"Success\"; found \"" +
                             m["Code"] + "\"");
    }
    return CredentialsFromJson(body, Name() + ": role '" + role + "'", "Token",
                               out);
  }

 private:
  std::string endpoint_;
};

}  // namespace

Status SplitCommand(const std::string& command,
                    std::vector<std::string>* words) {
  words->clear();
  std::string word;
  bool in_word = false;
  size_t i = 0;
  while (i < command.size()) {
    const char c = command[i++];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word) words->push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == '\\') {
      in_word = true;
      if (i < command.size()) {
        if (command[i] != '\n') word.push_back(command[i]);
        ++i;
      }
    } else if (c == '\'') {
      in_word = true;
      const size_t end = command.find('\'', i);
      if (end == std::string::npos) {
        return Status::InvalidArgument(
            "expected a closing ' in the command; found none");
      }
      word.append(command, i, end - i);
      i = end + 1;
    } else if (c == '"') {
      in_word = true;
      for (;;) {
        if (i >= command.size()) {
          return Status::InvalidArgument(
              "expected a closing \" in the command; found none");
        }
        const char d = command[i++];
        if (d == '"') break;
        if (d == '\\' && i < command.size() &&
            std::strchr("\"\\$`\n", command[i]) != nullptr) {
          if (command[i] != '\n') word.push_back(command[i]);
          ++i;
          continue;
        }
        word.push_back(d);
      }
    } else {
      in_word = true;
      word.push_back(c);
    }
  }
  if (in_word) words->push_back(std::move(word));
  return Status::OK();
}

std::unique_ptr<CredentialsProvider> MakeStaticProvider(
    const Credentials& credentials, const std::string& name) {
  return std::make_unique<StaticProvider>(credentials, name);
}

std::unique_ptr<CredentialsProvider> MakeProcessProvider(
    const std::string& command, const std::string& profile,
    const std::string& where, int timeout_seconds) {
  return std::make_unique<ProcessProvider>(command, profile, where,
                                           timeout_seconds);
}

Status MakeContainerProvider(const EnvLookup& env,
                             std::unique_ptr<CredentialsProvider>* provider,
                             std::string* key) {
  auto get = [&](const char* name) {
    const char* v = env ? env(name) : nullptr;
    return v == nullptr ? std::string() : std::string(v);
  };
  provider->reset();
  std::string url;
  const std::string relative = get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  const std::string full = get("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  if (!relative.empty()) {
    url = std::string("http://169.254.170.2") +
          (relative[0] == '/' ? "" : "/") + relative;
  } else if (!full.empty()) {
    const std::string lower = Lower(full);
    if (lower.compare(0, 8, "https://") == 0) {
      url = full;
    } else if (lower.compare(0, 7, "http://") == 0 &&
               AllowedPlainHttpHost(full)) {
      url = full;
    } else {
      return Status::InvalidArgument(
          "container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI: "
          "expected an https:// URL, or http:// to a loopback address, "
          "169.254.170.2, 169.254.170.23 or [fd00:ec2::23]; found '" +
          Redact(full) + "'");
    }
  } else {
    return Status::OK();
  }
  const std::string token_file = get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  const std::string token =
      token_file.empty() ? get("AWS_CONTAINER_AUTHORIZATION_TOKEN") : "";
  *key = "container\n" + url + "\n" + token_file + "\n" + token;
  *provider = std::make_unique<ContainerProvider>(url, token, token_file);
  return Status::OK();
}

std::unique_ptr<CredentialsProvider> MakeWebIdentityProvider(
    const WebIdentityConfig& config) {
  return std::make_unique<WebIdentityProvider>(config);
}

std::unique_ptr<CredentialsProvider> MakeAssumeRoleProvider(
    const AssumeRoleConfig& config) {
  return std::make_unique<AssumeRoleProvider>(config);
}

Status MakeImdsProvider(const EnvLookup& env,
                        std::unique_ptr<CredentialsProvider>* provider,
                        std::string* key) {
  auto get = [&](const char* name) {
    const char* v = env ? env(name) : nullptr;
    return v == nullptr ? std::string() : std::string(v);
  };
  provider->reset();
  const std::string disabled = Lower(get("AWS_EC2_METADATA_DISABLED"));
  if (disabled == "true") return Status::OK();
  if (!disabled.empty() && disabled != "false") {
    return Status::InvalidArgument(
        "AWS_EC2_METADATA_DISABLED: expected true or false; found '" +
        disabled + "'");
  }
  std::string endpoint = get("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (endpoint.empty()) {
    const std::string mode =
        Lower(get("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"));
    if (mode.empty() || mode == "ipv4") {
      endpoint = "http://169.254.169.254";
    } else if (mode == "ipv6") {
      endpoint = "http://[fd00:ec2::254]";
    } else {
      return Status::InvalidArgument(
          "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE: expected IPv4 or IPv6; "
          "found '" +
          mode + "'");
    }
  } else {
    const std::string lower = Lower(endpoint);
    if (lower.compare(0, 7, "http://") != 0 &&
        lower.compare(0, 8, "https://") != 0) {
      return Status::InvalidArgument(
          "AWS_EC2_METADATA_SERVICE_ENDPOINT: expected http://host[:port] or "
          "https://host[:port]; found '" +
          Redact(endpoint) + "'");
    }
  }
  *key = "imds\n" + endpoint;
  *provider = std::make_unique<ImdsProvider>(endpoint);
  return Status::OK();
}

}  // namespace remote
}  // namespace ufspack
