// Copyright 2026 The ufspack Authors.
//
// S3 settings the way AWS's own tools read them: environment variables,
// then the shared config and credentials files, for one profile.
//
//   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+
//   AWS_SESSION_TOKEN)
//                > [profile] in AWS_SHARED_CREDENTIALS_FILE
//                (~/.aws/credentials) > [profile NAME] / [default] in
//                AWS_CONFIG_FILE (~/.aws/config) none found: anonymous
//                (unsigned) requests
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
// Not supported (say so in errors and docs): credential_process, SSO,
// assume-role profiles (role_arn), web identity, EC2/ECS instance metadata.
// A profile that uses one of them and has no static keys is an error
// naming the profile and the key, not a silent fall back to anonymous.
//
// Thread safety: pure functions of their inputs.
// Secrets: AwsSettings::Describe() never includes a secret or a token.
#ifndef UFSPACK_REMOTE_AWS_CONFIG_H_
#define UFSPACK_REMOTE_AWS_CONFIG_H_

#include <functional>
#include <string>

#include "sigv4.h"
#include "ufspack/status.h"

namespace ufspack {
namespace remote {

enum class Addressing { kAuto, kVirtual, kPath };

struct AwsSettings {
  Credentials credentials;  // empty: anonymous
  std::string profile;      // the profile used ("default" when none named)
  std::string region;
  std::string endpoint_url;  // empty: AWS (https://s3.<region>.amazonaws.com)
  Addressing addressing = Addressing::kAuto;
  std::string ca_bundle;  // empty: the system's trust store
  // Where the credentials came from, for messages: "environment",
  // "/root/.aws/credentials [default]", "none (anonymous)".
  std::string credentials_source;

  // One line for messages and --verbose: profile, region, endpoint,
  // addressing and credentials_source.  Never a secret or token.
  std::string Describe() const;
};

// getenv-like lookup; returns nullptr when unset (tests pass their own).
using EnvLookup = std::function<const char*(const char*)>;

// Loads the settings.  A missing config or credentials file is fine; an
// unreadable or malformed one, a named profile that exists nowhere, or a
// profile with unsupported credential sources and no keys is an
// InvalidArgument naming the file, the line and what was expected.
Status LoadAwsSettings(const EnvLookup& env, AwsSettings* settings);

// LoadAwsSettings with the process environment (::getenv).
Status LoadAwsSettings(AwsSettings* settings);

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_AWS_CONFIG_H_
