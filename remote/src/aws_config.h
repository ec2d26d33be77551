// Copyright 2026 The ufspack Authors.
//
// S3 settings the way AWS's own tools read them: environment variables,
// then the shared config and credentials files, for one profile.
//
//   credentials  the provider chain, first match wins (docs/remote.md,
//                "Credentials"): AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY
//                (+ AWS_SESSION_TOKEN) > web identity
//                (AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, or the
//                profile's) > assume role (the config profile's
//                role_arn + source_profile / credential_source) > the
//                profile's static keys in
//                AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials), then in
//                AWS_CONFIG_FILE (~/.aws/config) > the profile's
//                credential_process > container credentials
//                (AWS_CONTAINER_CREDENTIALS_*_URI) > EC2 instance metadata
//                (IMDSv2, unless AWS_EC2_METADATA_DISABLED=true); none
//                found: anonymous (unsigned) requests
//   profile      AWS_PROFILE (else AWS_DEFAULT_PROFILE, else "default")
//   region       AWS_REGION > AWS_DEFAULT_REGION > the profile's region
//                > "us-east-1"
//   endpoint     AWS_ENDPOINT_URL_S3 > AWS_ENDPOINT_URL > the profile's
//                "s3 = \n  endpoint_url = ..." > its endpoint_url; none
//                when AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true
//   addressing   the profile's "s3 = \n  addressing_style = path|virtual|auto"
//                (auto: virtual-hosted on AWS for DNS-compatible buckets,
//                path style with a custom endpoint)
//   TLS          AWS_CA_BUNDLE > the profile's ca_bundle
//
// Not supported yet (say so in errors and docs): SSO, chained roles (a
// source_profile that assumes a role), mfa_serial, IMDSv1.  A
// profile that uses one of them and has no static keys is an error naming the
// profile and the key, not a silent fall back to anonymous.
//
// Thread safety: safe to call from any thread; credentials that can expire
// come from a process-wide CredentialsCache (credentials.h) shared by
// every load that chose the same provider, and the load fetches them
// once when the cache has none.
// Secrets: AwsSettings::Describe() never includes a secret or a token.
#ifndef UFSPACK_REMOTE_AWS_CONFIG_H_
#define UFSPACK_REMOTE_AWS_CONFIG_H_

#include <functional>
#include <memory>
#include <string>

#include "credentials.h"
#include "sigv4.h"
#include "ufspack/status.h"

namespace ufspack {
namespace remote {

enum class Addressing { kAuto, kVirtual, kPath };

struct AwsSettings {
  // The credentials as loaded (for Describe); requests are signed with
  // what `provider` gives at the time, which refreshes expiring ones.
  Credentials credentials;                     // empty: anonymous
  std::shared_ptr<CredentialsCache> provider;  // null: anonymous
  std::string profile;  // the profile used ("default" when none named)
  std::string region;
  std::string endpoint_url;  // empty: AWS (https://s3.<region>.amazonaws.com)
  Addressing addressing = Addressing::kAuto;
  std::string ca_bundle;  // empty: the system's trust store
  // Where the credentials came from, for messages: "environment",
  // "/root/.aws/credentials [default]", "container credentials (URL)",
  // "none (anonymous; tried ...: why)".
  std::string credentials_source;

  // One line for messages and --verbose: profile, region, endpoint,
  // addressing and credentials_source.  Never a secret or token.
  std::string Describe() const;
};

// Loads the settings.  A missing config or credentials file is fine; an
// unreadable or malformed one, a named profile that exists nowhere, a
// profile with unsupported credential sources and no keys, or a
// configured credential_process or container endpoint that fails is an
// error naming the provider, the file or URL and what was expected.
// EC2 instance metadata is the last resort: when it fails the requests
// are anonymous and credentials_source says why.
Status LoadAwsSettings(const EnvLookup& env, AwsSettings* settings);

// LoadAwsSettings with the process environment (::getenv).
Status LoadAwsSettings(AwsSettings* settings);

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_AWS_CONFIG_H_
