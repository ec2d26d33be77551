// Copyright 2026 The ufspack Authors.
//
// AWS's credential provider chain, in the SDKs' order (docs/remote.md,
// "Credentials"):
//   1 environment       AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY
//                       (+ AWS_SESSION_TOKEN)
//   2 web identity      AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, else the
//                       profile's web_identity_token_file + role_arn
//   3 assume role       the profile's role_arn + source_profile (static
//                       keys, credential_process, web identity or another
//                       role: chained roles, at most kMaxChainedRoles) or
//                       credential_source (Environment, EcsContainer,
//                       Ec2InstanceMetadata)
//   4 static keys       the profile's keys in the credentials, then the
//                       config file
//   5 credential_process  the profile's, config file first
//   6 container         AWS_CONTAINER_CREDENTIALS_{RELATIVE,FULL}_URI
//   7 EC2 metadata      IMDSv2 (IMDSv1 only when allowed), unless
//                       AWS_EC2_METADATA_DISABLED=true
// The first provider that is configured is used; when it fails that is
// the error (no fall back to the next one).  EC2 metadata is the last
// resort: when it cannot be reached, refuses or has no role the requests
// are anonymous; when it answers with credentials that are not usable
// (malformed, or a token or key with control characters) that is an error.
//
// Thread safety: ResolveCredentials may be called from any thread; the
// caches it returns are process-wide (SharedCredentialsCache).
// Secrets: no step, source or message holds a secret or token.
#ifndef UFSPACK_REMOTE_CREDENTIAL_CHAIN_H_
#define UFSPACK_REMOTE_CREDENTIAL_CHAIN_H_

#include <memory>
#include <string>
#include <vector>

#include "aws_shared_file.h"
#include "credentials.h"
#include "credentials_cache.h"
#include "ufspack/status.h"

namespace ufspack {
namespace remote {

// Roles one profile may chain through source_profile (AWS's tools have
// no limit but loops; a longer chain is almost surely a mistake, and each
// link is one more STS call per refresh).
constexpr int kMaxChainedRoles = 5;

// One provider of the chain as the resolver saw it, for
// `--explain-credentials`: "not configured (...)", "chosen: NAME",
// "failed: why", "disabled (...)".
struct CredentialsStep {
  std::string provider;  // "environment", "web identity", ...
  std::string outcome;
};

struct ChainContext {
  EnvLookup env;
  const SharedFile* credentials_file = nullptr;
  const SharedFile* config_file = nullptr;
  std::string profile;
  std::string region;  // STS's signing region and regional endpoint
};

struct ChainResult {
  Credentials credentials;                  // as first fetched; empty: none
  std::shared_ptr<CredentialsCache> cache;  // null: anonymous
  // Where they came from, for messages ("environment", a provider's
  // Name(), "none (anonymous; ...)").
  std::string source;
  std::vector<CredentialsStep> steps;  // filled on failure too
};

// Runs the chain for context.profile.  Errors: a configured provider that
// is malformed or fails (naming it, its file and line or variable, and
// what was expected), a profile that needs an unsupported source (SSO).
Status ResolveCredentials(const ChainContext& context, ChainResult* result);

// STS's endpoint: AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL (both
// ignored when AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true), else
// https://sts.REGION.amazonaws.com.
std::string StsEndpoint(const EnvLookup& env, const std::string& region);

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_CREDENTIAL_CHAIN_H_
