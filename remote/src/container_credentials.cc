// Copyright 2026 The ufspack Authors.
//
// Container credentials: one GET with an optional Authorization token (see
// container_credentials.h).
#include "container_credentials.h"

#include <utility>
#include <vector>

#include "credentials_http.h"
#include "credentials_json.h"
#include "http.h"

namespace ufspack {
namespace remote {
namespace {

// http://HOST[:port]/...: loopback, or the ECS / EKS Pod Identity agents.
bool AllowedPlainHttpHost(const std::string& url) {
  const std::string rest = url.substr(7);
  std::string host = rest.substr(0, rest.find_first_of("/?#"));
  if (!host.empty() && host[0] == '[') {
    host = host.substr(0, host.find(']') + 1);
  } else {
    host = host.substr(0, host.find(':'));
  }
  host = AsciiLower(host);
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
    std::string from = "AWS_CONTAINER_AUTHORIZATION_TOKEN";
    if (!token_file_.empty()) {
      from = "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE " + token_file_;
      UFSPACK_RETURN_IF_ERROR(
          ReadTokenFile(token_file_, Name() + ": " + from, &token));
    }
    // It is sent as the Authorization header's value.
    UFSPACK_RETURN_IF_ERROR(CheckNoControlCharacters(token, Name(), from));
    if (!token.empty()) headers.emplace_back("Authorization", token);
    std::string body;
    UFSPACK_RETURN_IF_ERROR(
        HttpCall("GET", url_, headers, Name(), MetadataOptions(), &body));
    return CredentialsFromJson(body, Name(), "Token", out);
  }

 private:
  const std::string url_, token_, token_file_;
};

// The endpoint's URL from the two variables ("" when neither is set).
Status ContainerUrl(const EnvLookup& env, std::string* url) {
  const std::string relative =
      EnvValue(env, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  const std::string full = EnvValue(env, "AWS_CONTAINER_CREDENTIALS_FULL_URI");
  url->clear();
  if (!relative.empty()) {
    *url = std::string("http://169.254.170.2") +
           (relative[0] == '/' ? "" : "/") + relative;
    return Status::OK();
  }
  if (full.empty()) return Status::OK();
  const std::string lower = AsciiLower(full);
  if (lower.compare(0, 8, "https://") == 0 ||
      (lower.compare(0, 7, "http://") == 0 && AllowedPlainHttpHost(full))) {
    *url = full;
    return Status::OK();
  }
  return Status::InvalidArgument(
      "container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI: "
      "expected an https:// URL, or http:// to a loopback address, "
      "169.254.170.2, 169.254.170.23 or [fd00:ec2::23]; found '" +
      Redact(full) + "'");
}

}  // namespace

Status MakeContainerProvider(const EnvLookup& env,
                             std::unique_ptr<CredentialsProvider>* provider,
                             std::string* key) {
  provider->reset();
  std::string url;
  UFSPACK_RETURN_IF_ERROR(ContainerUrl(env, &url));
  if (url.empty()) return Status::OK();
  const std::string token_file =
      EnvValue(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  const std::string token =
      token_file.empty() ? EnvValue(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN")
                         : "";
  *key = "container\n" + url + "\n" + token_file + "\n" + token;
  *provider = std::make_unique<ContainerProvider>(url, token, token_file);
  return Status::OK();
}

}  // namespace remote
}  // namespace ufspack
