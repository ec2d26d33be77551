// Copyright 2026 The ufspack Authors.
//
// Credentials from AWS STS: AssumeRoleWithWebIdentity (EKS IRSA, OIDC) and
// AssumeRole (a role_arn profile, signed with its source's credentials).
// Both POST a form to the STS endpoint that aws_config.cc chose
// (AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL, else
// https://sts.REGION.amazonaws.com) and read the Credentials of the XML
// answer, which expire at their Expiration.
#ifndef UFSPACK_REMOTE_STS_CREDENTIALS_H_
#define UFSPACK_REMOTE_STS_CREDENTIALS_H_

#include <memory>
#include <string>

#include "credentials.h"
#include "credentials_cache.h"

namespace ufspack {
namespace remote {

// AssumeRoleWithWebIdentity: the token is read from `token_file` at every
// fetch and sent, unsigned, with the role and session name.
struct WebIdentityConfig {
  std::string role_arn;
  std::string session_name;
  std::string token_file;
  std::string sts_endpoint;  // "https://sts.us-east-1.amazonaws.com"
  std::string source;        // for messages: "the environment", "file:line"
};
std::unique_ptr<CredentialsProvider> MakeWebIdentityProvider(
    const WebIdentityConfig& config);

// AssumeRole: signed (SigV4, service "sts") with the current credentials
// of `source_credentials`, which are fetched (and refreshed) through their
// own cache -- for chained roles, another AssumeRole's.
struct AssumeRoleConfig {
  std::string role_arn;
  std::string session_name;
  std::string external_id;   // empty: none
  int duration_seconds = 0;  // 0: STS's default (1 hour)
  std::string sts_endpoint;
  std::string region;  // the signing region
  std::string source;  // for messages: "file:line [profile dev]"
  std::shared_ptr<CredentialsCache> source_credentials;
};
std::unique_ptr<CredentialsProvider> MakeAssumeRoleProvider(
    const AssumeRoleConfig& config);

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_STS_CREDENTIALS_H_
