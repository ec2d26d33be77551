// Copyright 2026 The ufspack Authors.
//
// AWS credentials that change while a process runs: providers that fetch
// them (an external credential_process, STS AssumeRoleWithWebIdentity and
// AssumeRole, the ECS/EKS container endpoint, EC2's instance metadata
// service IMDSv2) and a cache that hands the current ones to every
// request, refreshing them before they expire.  aws_config.cc decides
// which provider a profile uses (the chain and its order are documented in
// docs/remote.md, "Credentials").
//
// Refresh: credentials that expire at E, fetched at F, are used until
//   E - min(kRefreshMarginSeconds, (E - F) / 2)
// and then refreshed by the first request that asks (others keep using
// the old ones while they are still valid, or wait for the refresh when
// they are not).  A failed refresh while the old credentials are still
// valid keeps them, logs one line to stderr per run of failures, and is
// retried after a pause, never by every request; a failure with no valid
// credentials left fails the requests asking and is retried at most once
// per kFailureBackoffSeconds.
//
// Thread safety: CredentialsCache is safe for concurrent use; providers
// are called by one thread at a time (the cache's refresher).
// Fork: a child keeps the parent's cached credentials (plain data, copied
// consistently: fork waits for every cache's mutex), never the parent's
// refresh in flight (which belonged to a thread the child does not have);
// it refreshes on its own when they near expiry, once.
// Secrets: no message, log line or Name() holds a secret key, a session
// token, a container authorization token or a process's output.
#ifndef UFSPACK_REMOTE_CREDENTIALS_H_
#define UFSPACK_REMOTE_CREDENTIALS_H_

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sigv4.h"
#include "ufspack/status.h"

namespace ufspack {
namespace remote {

// getenv-like lookup; returns nullptr when unset (tests pass their own).
using EnvLookup = std::function<const char*(const char*)>;

constexpr int64_t kRefreshMarginSeconds = 5 * 60;
constexpr int64_t kFailureBackoffSeconds = 10;

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

// Runs `command` (split into words the way the AWS CLI does, with POSIX
// shell quoting rules -- Python's shlex.split -- and run without a shell,
// searched in PATH) and reads the JSON it prints on stdout:
//   {"Version": 1, "AccessKeyId": ..., "SecretAccessKey": ...,
//    "SessionToken": ... (optional), "Expiration": ISO 8601 (optional:
//    without it the credentials never expire)}
// Its stdin is /dev/null, its stderr the caller's.  It is killed after
// `timeout_seconds`; its output is never shown in messages.
std::unique_ptr<CredentialsProvider> MakeProcessProvider(
    const std::string& command, const std::string& profile,
    const std::string& where, int timeout_seconds);

// The ECS/EKS container credentials endpoint, from
// AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (on http://169.254.170.2) or
// AWS_CONTAINER_CREDENTIALS_FULL_URI (https://, or http:// to a loopback
// address or 169.254.170.2 / 169.254.170.23 / [fd00:ec2::23]), with the
// Authorization header from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (read at
// every fetch) or AWS_CONTAINER_AUTHORIZATION_TOKEN.  *provider is null
// when neither URI variable is set; an unusable URI is InvalidArgument.
Status MakeContainerProvider(const EnvLookup& env,
                             std::unique_ptr<CredentialsProvider>* provider,
                             std::string* key);

// STS AssumeRoleWithWebIdentity (EKS IRSA, GitHub OIDC, ...): the token
// is read from `token_file` at every fetch and sent, unsigned, to
// POST `sts_endpoint`/ with the role and session name; the response's
// Credentials expire at their Expiration.
struct WebIdentityConfig {
  std::string role_arn;
  std::string session_name;
  std::string token_file;
  std::string sts_endpoint;  // "https://sts.us-east-1.amazonaws.com"
  std::string source;        // for messages: "the environment", "file:line"
};
std::unique_ptr<CredentialsProvider> MakeWebIdentityProvider(
    const WebIdentityConfig& config);

// STS AssumeRole: POST `sts_endpoint`/ signed (SigV4, service "sts") with
// the current credentials of `source_credentials`, which are fetched (and
// refreshed) through their own cache.
class CredentialsCache;
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

// EC2 instance metadata, IMDSv2 only: PUT /latest/api/token, then GET
// /latest/meta-data/iam/security-credentials/ and .../<role>.  Endpoint
// AWS_EC2_METADATA_SERVICE_ENDPOINT, else http://169.254.169.254
// (http://[fd00:ec2::254] with AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6).
// Each request: 1 s to connect, 1 s of stall, 2 attempts.  *provider is
// null when AWS_EC2_METADATA_DISABLED is true.
Status MakeImdsProvider(const EnvLookup& env,
                        std::unique_ptr<CredentialsProvider>* provider,
                        std::string* key);

// Hands out a provider's current credentials (see the file comment).
class CredentialsCache {
 public:
  explicit CredentialsCache(std::unique_ptr<CredentialsProvider> provider);
  ~CredentialsCache();
  CredentialsCache(const CredentialsCache&) = delete;
  CredentialsCache& operator=(const CredentialsCache&) = delete;

  // The current credentials, refreshed first when due.  The pointer stays
  // valid (and unchanged) as long as it is held.
  Status Get(std::shared_ptr<const Credentials>* out);
  std::string Name() const { return name_; }
  // Fetches made by this process (successful or not; a forked child
  // starts from 0), for tests.
  int fetches() const;

  // Fork handlers (pthread_atfork): every cache's mutex is taken before
  // fork and released after it in both processes.
  static void PrepareFork();
  static void ParentAfterFork();
  static void ChildAfterFork();

 private:
  int64_t RefreshAt() const;  // REQUIRES: mu_ held

  const std::unique_ptr<CredentialsProvider> provider_;
  const std::string name_;
  mutable std::mutex mu_;
  std::condition_variable done_;
  std::shared_ptr<const Credentials> current_;  // null before the first
  int64_t expiration_ = 0;
  int64_t fetched_at_ = 0;
  bool refreshing_ = false;  // a thread of this process is fetching
  int64_t retry_after_ = 0;  // no fetch before this after a failure
  Status last_error_;
  bool logged_ = false;  // the current run of failures was logged
  int fetches_ = 0;
};

// The process-wide cache for `key` (one per provider configuration, so
// that all readers of a process share it), made with `make` the first
// time.  Caches live until the process exits.
std::shared_ptr<CredentialsCache> SharedCredentialsCache(
    const std::string& key,
    const std::function<std::unique_ptr<CredentialsProvider>()>& make);

// --- parts exposed for tests

// Splits a command line like Python's shlex.split (POSIX mode): words
// separated by blanks, '...' literal, "..." with \" \\ \$ \` escapes,
// backslash escapes outside quotes.  An unterminated quote is an error.
Status SplitCommand(const std::string& command,
                    std::vector<std::string>* words);

// The top-level string, number and boolean members of a JSON object
// (numbers and booleans as written).  Errors give a byte offset, never
// the text.
Status ParseJsonObject(const std::string& json,
                       std::map<std::string, std::string>* members);

// "2026-11-27T10:42:30Z", with optional fractional seconds and a
// "+HH:MM" / "-HH:MM" offset instead of "Z", to Unix seconds.
bool ParseIso8601(const std::string& text, int64_t* seconds);

// A credentials document (credential_process's output, the container and
// IMDS endpoints' answers): AccessKeyId, SecretAccessKey, the session
// token under `token_field`, an optional ISO 8601 Expiration.  `what`
// names the source in messages, which never hold the document.
Status CredentialsFromJson(const std::string& body, const std::string& what,
                           const char* token_field, TimedCredentials* out);

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_CREDENTIALS_H_
