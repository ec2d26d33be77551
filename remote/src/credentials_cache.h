// Copyright 2026 The ufspack Authors.
//
// A provider's current credentials, refreshed before they expire and
// shared by every reader of a process.
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
// Checked: every fetch's credentials pass CheckCredentials (credentials.h)
// before they are held; one that fails is a failed fetch (the error names
// the provider and the field, never the value).
//
// Thread safety: CredentialsCache is safe for concurrent use; its provider
// is called by one thread at a time (the cache's refresher).
// Fork: a child keeps the parent's cached credentials (plain data, copied
// consistently: fork waits for every cache's mutex), never the parent's
// refresh in flight (which belonged to a thread the child does not have);
// it refreshes on its own when they near expiry, once.
#ifndef UFSPACK_REMOTE_CREDENTIALS_CACHE_H_
#define UFSPACK_REMOTE_CREDENTIALS_CACHE_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "credentials.h"
#include "ufspack/status.h"

namespace ufspack {
namespace remote {

constexpr int64_t kRefreshMarginSeconds = 5 * 60;
constexpr int64_t kFailureBackoffSeconds = 10;

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
  // When the credentials held now expire (Unix seconds; 0: they do not, or
  // none are held) and when they will be refreshed (INT64_MAX: never).
  int64_t expiration() const;
  int64_t refresh_at() const;
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
  // Records the outcome of a fetch that ended at `after`.  REQUIRES: mu_
  // held.
  Status Record(Status fetched, const TimedCredentials& fresh, int64_t after);

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

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_CREDENTIALS_CACHE_H_
