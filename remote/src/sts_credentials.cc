// Copyright 2026 The ufspack Authors.
//
// The two STS providers and the client they share (see sts_credentials.h).
#include "sts_credentials.h"

#include <utility>
#include <vector>

#include "credentials_http.h"
#include "credentials_json.h"
#include "http.h"
#include "sigv4.h"

namespace ufspack {
namespace remote {
namespace {

constexpr char kForm[] = "application/x-www-form-urlencoded";

std::string FormEncode(const std::vector<Header>& fields) {
  std::string body;
  for (const Header& f : fields) {
    if (!body.empty()) body += "&";
    body += UriEncode(f.first, false) + "=" + UriEncode(f.second, false);
  }
  return body;
}

std::string WithoutTrailingSlashes(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

// POSTs `form` (Action=`action`) to `endpoint`/ with `headers` and reads
// the Credentials of the answer.  `name` (the provider) starts messages; an
// HTTP 401/403 names STS's error code and message, never the form (which
// may hold a web identity token).
Status StsCall(const std::string& name, const std::string& action,
               const std::string& endpoint, std::vector<Header> headers,
               const std::string& form, TimedCredentials* out) {
  std::string response;
  long code = 0;
  Status s =
      HttpCall("POST", endpoint + "/", std::move(headers), name + ": " + action,
               StsOptions(), &response, form, &code);
  if (!s.ok() && (code == 401 || code == 403)) {
    std::string error, message;
    XmlText(response, "Code", &error);
    XmlText(response, "Message", &message);
    return Status::IOError(name + ": STS " + action + " at " +
                           Redact(endpoint) + "/ refused with HTTP " +
                           std::to_string(code) +
                           (error.empty() ? "" : " " + error) +
                           (message.empty() ? "" : ": " + message) +
                           " (expected credentials that may assume the role)");
  }
  UFSPACK_RETURN_IF_ERROR(s);
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

class WebIdentityProvider final : public CredentialsProvider {
 public:
  explicit WebIdentityProvider(WebIdentityConfig c) : c_(std::move(c)) {
    c_.sts_endpoint = WithoutTrailingSlashes(c_.sts_endpoint);
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
    const std::string form =
        FormEncode({{"Action", "AssumeRoleWithWebIdentity"},
                    {"Version", "2011-06-15"},
                    {"RoleArn", c_.role_arn},
                    {"RoleSessionName", c_.session_name},
                    {"WebIdentityToken", token}});
    return StsCall(Name(), "AssumeRoleWithWebIdentity", c_.sts_endpoint,
                   {{"Content-Type", kForm}}, form, out);
  }

 private:
  WebIdentityConfig c_;
};

class AssumeRoleProvider final : public CredentialsProvider {
 public:
  explicit AssumeRoleProvider(AssumeRoleConfig c) : c_(std::move(c)) {
    c_.sts_endpoint = WithoutTrailingSlashes(c_.sts_endpoint);
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
    std::vector<Header> fields = {{"Action", "AssumeRole"},
                                  {"Version", "2011-06-15"},
                                  {"RoleArn", c_.role_arn},
                                  {"RoleSessionName", c_.session_name}};
    if (!c_.external_id.empty()) {
      fields.emplace_back("ExternalId", c_.external_id);
    }
    if (c_.duration_seconds > 0) {
      fields.emplace_back("DurationSeconds",
                          std::to_string(c_.duration_seconds));
    }
    const std::string form = FormEncode(fields);
    return StsCall(Name(), "AssumeRole", c_.sts_endpoint,
                   SignedHeaders(*source, form), form, out);
  }

 private:
  // Host, Content-Type and the SigV4 headers of a POST of `form`.
  std::vector<Header> SignedHeaders(const Credentials& source,
                                    const std::string& form) const {
    const size_t sep = c_.sts_endpoint.find("://");
    const std::string rest = sep == std::string::npos
                                 ? c_.sts_endpoint
                                 : c_.sts_endpoint.substr(sep + 3);
    const size_t slash = rest.find('/');
    const std::string host = rest.substr(0, slash);
    SigningRequest req;
    req.method = "POST";
    req.path = slash == std::string::npos ? "/" : rest.substr(slash) + "/";
    req.headers = {{"host", host}, {"content-type", kForm}};
    req.payload_hash = Sha256Hex(form);
    SigningScope scope;
    scope.region = c_.region;
    scope.service = "sts";
    scope.amz_date = AmzDateNow();
    scope.s3 = false;
    std::vector<Header> headers = {{"Host", host}, {"Content-Type", kForm}};
    for (Header& h : Sign(req, source, scope)) headers.push_back(std::move(h));
    return headers;
  }

  AssumeRoleConfig c_;
};

}  // namespace

std::unique_ptr<CredentialsProvider> MakeWebIdentityProvider(
    const WebIdentityConfig& config) {
  return std::make_unique<WebIdentityProvider>(config);
}

std::unique_ptr<CredentialsProvider> MakeAssumeRoleProvider(
    const AssumeRoleConfig& config) {
  return std::make_unique<AssumeRoleProvider>(config);
}

}  // namespace remote
}  // namespace ufspack
