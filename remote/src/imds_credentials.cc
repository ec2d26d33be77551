// Copyright 2026 The ufspack Authors.
//
// EC2 instance metadata credentials (see imds_credentials.h).
#include "imds_credentials.h"

#include <map>
#include <utility>
#include <vector>

#include "credentials_http.h"
#include "credentials_json.h"
#include "http.h"

namespace ufspack {
namespace remote {
namespace {

class ImdsProvider final : public CredentialsProvider {
 public:
  ImdsProvider(std::string endpoint, bool v1_fallback)
      : endpoint_(std::move(endpoint)), v1_fallback_(v1_fallback) {
    while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
  }

  std::string Name() const override {
    return std::string("EC2 instance metadata (IMDSv2, ") +
           (v1_fallback_ ? "IMDSv1 fallback allowed, " : "") + endpoint_ + ")";
  }

  Status Fetch(TimedCredentials* out) override {
    std::vector<Header> auth;
    UFSPACK_RETURN_IF_ERROR(SessionToken(&auth));
    const std::string base =
        endpoint_ + "/latest/meta-data/iam/security-credentials/";
    std::string roles;
    Status s = HttpCall("GET", base, auth, Name() + ": role name",
                        MetadataOptions(), &roles);
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
    const std::string what = Name() + ": role '" + role + "'";
    std::string body;
    UFSPACK_RETURN_IF_ERROR(
        HttpCall("GET", base + role, auth, what, MetadataOptions(), &body));
    std::map<std::string, std::string> m;
    if (ParseJsonObject(body, &m).ok() && m.count("Code") &&
        m["Code"] != "Success") {
      return Status::IOError(what +
                             ": expected \"Code\": \"Success\"; found \"" +
                             m["Code"] + "\"");
    }
    return CredentialsFromJson(body, what, "Token", out);
  }

 private:
  // The IMDSv2 session token header for the GETs; none when the token
  // request is refused and IMDSv1 is allowed.
  Status SessionToken(std::vector<Header>* auth) const {
    std::string token;
    long code = 0;
    Status s = HttpCall("PUT", endpoint_ + "/latest/api/token",
                        {{"X-aws-ec2-metadata-token-ttl-seconds", "21600"}},
                        Name() + ": session token", MetadataOptions(), &token,
                        "", &code);
    if (s.ok() && !token.empty()) {
      // Sent back as a header's value.
      UFSPACK_RETURN_IF_ERROR(CheckNoControlCharacters(
          token, Name(), "session token (PUT /latest/api/token)"));
      auth->emplace_back("X-aws-ec2-metadata-token", token);
      return Status::OK();
    }
    if (s.ok()) {
      return Status::IOError(Name() +
                             ": PUT /latest/api/token: expected a "
                             "session token; found an empty body");
    }
    const bool v1_answer = code == 403 || code == 404 || code == 405;
    if (v1_answer && v1_fallback_) return Status::OK();  // IMDSv1
    if (!v1_answer) return s;
    return Status::IOError(std::string(s.message()) +
                           "; IMDSv1 fallback is off (set "
                           "AWS_EC2_METADATA_V1_DISABLED=false to allow it)");
  }

  std::string endpoint_;
  const bool v1_fallback_;
};

Status ParseV1Disabled(const std::string& value, const std::string& where,
                       bool* v1_fallback) {
  const std::string v = AsciiLower(value);
  if (v.empty() || v == "true") {
    *v1_fallback = false;
  } else if (v == "false") {
    *v1_fallback = true;
  } else {
    return Status::InvalidArgument(where + ": expected true or false; found '" +
                                   value + "'");
  }
  return Status::OK();
}

Status ImdsEndpoint(const EnvLookup& env, std::string* endpoint) {
  *endpoint = EnvValue(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (!endpoint->empty()) {
    const std::string lower = AsciiLower(*endpoint);
    if (lower.compare(0, 7, "http://") == 0 ||
        lower.compare(0, 8, "https://") == 0) {
      return Status::OK();
    }
    return Status::InvalidArgument(
        "AWS_EC2_METADATA_SERVICE_ENDPOINT: expected http://host[:port] or "
        "https://host[:port]; found '" +
        Redact(*endpoint) + "'");
  }
  const std::string mode =
      AsciiLower(EnvValue(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"));
  if (mode.empty() || mode == "ipv4") {
    *endpoint = "http://169.254.169.254";
  } else if (mode == "ipv6") {
    *endpoint = "http://[fd00:ec2::254]";
  } else {
    return Status::InvalidArgument(
        "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE: expected IPv4 or IPv6; "
        "found '" +
        mode + "'");
  }
  return Status::OK();
}

}  // namespace

Status MakeImdsProvider(const EnvLookup& env,
                        const std::string& profile_v1_disabled,
                        const std::string& profile_v1_where,
                        std::unique_ptr<CredentialsProvider>* provider,
                        std::string* key) {
  provider->reset();
  const std::string disabled =
      AsciiLower(EnvValue(env, "AWS_EC2_METADATA_DISABLED"));
  if (disabled == "true") return Status::OK();
  if (!disabled.empty() && disabled != "false") {
    return Status::InvalidArgument(
        "AWS_EC2_METADATA_DISABLED: expected true or false; found '" +
        disabled + "'");
  }
  bool v1_fallback = false;
  const std::string v1_env = EnvValue(env, "AWS_EC2_METADATA_V1_DISABLED");
  if (!v1_env.empty()) {
    UFSPACK_RETURN_IF_ERROR(
        ParseV1Disabled(v1_env, "AWS_EC2_METADATA_V1_DISABLED", &v1_fallback));
  } else {
    UFSPACK_RETURN_IF_ERROR(
        ParseV1Disabled(profile_v1_disabled, profile_v1_where, &v1_fallback));
  }
  std::string endpoint;
  UFSPACK_RETURN_IF_ERROR(ImdsEndpoint(env, &endpoint));
  *key = "imds\n" + endpoint + (v1_fallback ? "\nv1" : "");
  *provider = std::make_unique<ImdsProvider>(endpoint, v1_fallback);
  return Status::OK();
}

}  // namespace remote
}  // namespace ufspack
