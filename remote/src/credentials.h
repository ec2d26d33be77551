// Copyright 2026 The ufspack Authors.
//
// AWS credentials that may change while a process runs: the interface of
// a provider that fetches them, and the trivial provider of keys that never
// change.  The other providers live in a file each --
// credential_process.h, container_credentials.h, imds_credentials.h,
// sts_credentials.h (web identity and assume role) -- the cache that
// refreshes them in credentials_cache.h, and the chain that picks one in
// credential_chain.h (the order is documented in docs/remote.md,
// "Credentials").
//
// Secrets: no message, log line or Name() holds a secret key, a session
// token, a container authorization token or a process's output.
#ifndef UFSPACK_REMOTE_CREDENTIALS_H_
#define UFSPACK_REMOTE_CREDENTIALS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "sigv4.h"
#include "ufspack/status.h"

namespace ufspack {
namespace remote {

// getenv-like lookup; returns nullptr when unset (tests pass their own).
using EnvLookup = std::function<const char*(const char*)>;

// The variable's value; unset and empty are the same ("").
std::string EnvValue(const EnvLookup& env, const char* name);

// `s` with A-Z lowered (settings' values are ASCII keywords).
std::string AsciiLower(std::string s);

struct TimedCredentials {
  Credentials credentials;
  int64_t expiration = 0;  // Unix seconds; 0: they do not expire
};

// Fetches credentials from one source.
class CredentialsProvider {
 public:
  virtual ~CredentialsProvider() = default;
  // Fresh credentials; may block (a process, the network) for a bounded
  // time.  Errors name the provider, its file or URL, and what was
  // expected and found.
  virtual Status Fetch(TimedCredentials* out) = 0;
  // For messages: "credential_process of profile 'dev' (/h/.aws/config:3)".
  virtual std::string Name() const = 0;
};

// Credentials that never change (environment, shared-file keys).
std::unique_ptr<CredentialsProvider> MakeStaticProvider(
    const Credentials& credentials, const std::string& name);

// OK when `value` holds no control character (a byte below 0x20, or
// 0x7f).  Credentials and tokens go into HTTP header lines and SigV4's
// string to sign, where CR LF would end the line and start a header of
// the value's choosing.  Otherwise InvalidArgument naming `source` (the
// provider, a variable) and `field` (if not empty), the byte and its
// offset, never the value:
//   "environment: SessionToken: expected no control characters; found
//    byte 0x0d at offset 12 (the value is not shown)"
Status CheckNoControlCharacters(const std::string& value,
                                const std::string& source,
                                const std::string& field);

// CheckNoControlCharacters of every field of `credentials` (AccessKeyId,
// SecretAccessKey, SessionToken).  CredentialsCache applies it to every
// fetch of every provider, so no provider can hand out credentials that
// fail it.
Status CheckCredentials(const Credentials& credentials,
                        const std::string& source);

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_CREDENTIALS_H_
