// Copyright 2026 The ufspack Authors.
//
// S3 settings the way AWS's own tools read them: environment variables,
// then the shared config and credentials files, for one profile.
//
//   credentials  the provider chain of credential_chain.h, first match
//                wins (docs/remote.md, "Credentials"); none found:
//                anonymous (unsigned) requests
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
// Not supported (say so in errors and docs): SSO profiles.  A profile that
// uses one and has no static keys is an error naming the profile and the
// key, not a silent fall back to anonymous.
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
#include <vector>

#include "credential_chain.h"
#include "credentials.h"
#include "credentials_cache.h"
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
  // Each provider of the chain asked, in order, and what came of it.
  std::vector<CredentialsStep> credentials_steps;

  // One line for messages and --verbose: profile, region, endpoint,
  // addressing and credentials_source.  Never a secret or token.
  std::string Describe() const;
  // Its two halves: where requests go, and which credentials sign them.
  std::string DescribeWhere() const;
  std::string DescribeCredentials() const;
  // Several lines for --explain-credentials: the settings, each provider
  // asked and why it was skipped, failed or chosen, the credentials and
  // when they expire and are refreshed; `status` is the load's outcome
  // (an error ends the text).  Never a secret or token.
  std::string Explain(const Status& status) const;
};

// Loads the settings.  A missing config or credentials file is fine; an
// unreadable or malformed one, a named profile that exists nowhere, a
// profile with unsupported credential sources and no keys, or a
// configured credential_process or container endpoint that fails is an
// error naming the provider, the file or URL and what was expected.
// EC2 instance metadata is the last resort: when it cannot be reached,
// refuses or has no role the requests are anonymous and
// credentials_source says why; an answer that is not usable credentials
// is an error.  Credentials or tokens with control characters are errors
// naming the provider and field, never the value.
Status LoadAwsSettings(const EnvLookup& env, AwsSettings* settings);

// LoadAwsSettings with the process environment (::getenv).
Status LoadAwsSettings(AwsSettings* settings);

// Loads the settings as LoadAwsSettings does and sets *text to their
// Explain() (also when loading fails); returns the load's status.
Status ExplainAwsSettings(const EnvLookup& env, std::string* text);

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_AWS_CONFIG_H_
