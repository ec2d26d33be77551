// Copyright 2026 The ufspack Authors.
//
// The refreshing credentials cache, shared per process and kept across
// fork (see credentials_cache.h).
#include "credentials_cache.h"

#include <pthread.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace ufspack {
namespace remote {
namespace {

int64_t NowSeconds() { return static_cast<int64_t>(::time(nullptr)); }

// --- the registry of caches, for sharing and fork handling

std::mutex& RegistryMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}
std::set<CredentialsCache*>& AllCaches() {
  static auto* caches = new std::set<CredentialsCache*>;
  return *caches;
}
std::map<std::string, std::shared_ptr<CredentialsCache>>& SharedCaches() {
  static auto* caches =
      new std::map<std::string, std::shared_ptr<CredentialsCache>>;
  return *caches;
}

void InstallForkHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    ::pthread_atfork(&CredentialsCache::PrepareFork,
                     &CredentialsCache::ParentAfterFork,
                     &CredentialsCache::ChildAfterFork);
  });
}

}  // namespace

// --- the cache

CredentialsCache::CredentialsCache(std::unique_ptr<CredentialsProvider> p)
    : provider_(std::move(p)), name_(provider_->Name()) {
  InstallForkHandlers();
  std::lock_guard<std::mutex> lock(RegistryMutex());
  AllCaches().insert(this);
}

CredentialsCache::~CredentialsCache() {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  AllCaches().erase(this);
}

int CredentialsCache::fetches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fetches_;
}

int64_t CredentialsCache::RefreshAt() const {
  if (expiration_ == 0) return INT64_MAX;
  const int64_t lifetime = std::max<int64_t>(0, expiration_ - fetched_at_);
  return expiration_ - std::min(kRefreshMarginSeconds, lifetime / 2);
}

int64_t CredentialsCache::expiration() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_ != nullptr ? expiration_ : 0;
}

int64_t CredentialsCache::refresh_at() const {
  std::lock_guard<std::mutex> lock(mu_);
  return RefreshAt();
}

Status CredentialsCache::Get(std::shared_ptr<const Credentials>* out) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const int64_t now = NowSeconds();
    const bool valid =
        current_ != nullptr && (expiration_ == 0 || now < expiration_);
    if (current_ != nullptr && now < RefreshAt()) {
      *out = current_;
      return Status::OK();
    }
    if (refreshing_ || now < retry_after_) {
      if (valid) {
        *out = current_;
        return Status::OK();
      }
      if (!refreshing_) {
        return last_error_.WithContext(
            "no valid AWS credentials (the last fetch failed less than " +
            std::to_string(kFailureBackoffSeconds) + " s ago)");
      }
      done_.wait(lock);  // another thread of this process is fetching
      continue;
    }
    refreshing_ = true;
    lock.unlock();
    TimedCredentials fresh;
    Status s = provider_->Fetch(&fresh);
    const int64_t after = NowSeconds();
    lock.lock();
    s = Record(std::move(s), fresh, after);
    done_.notify_all();
    // This thread's fetch is its answer: the new credentials, the old ones
    // while still valid, or the fetch's own error.
    if (current_ != nullptr && (expiration_ == 0 || after < expiration_)) {
      *out = current_;
      return Status::OK();
    }
    return s;
  }
}

Status CredentialsCache::Record(Status s, const TimedCredentials& fresh,
                                int64_t after) {
  refreshing_ = false;
  ++fetches_;
  // Every provider's credentials pass here: none that would break a
  // header line or the string to sign is ever held.
  if (s.ok()) s = CheckCredentials(fresh.credentials, provider_->Name());
  if (s.ok() && fresh.expiration != 0 && fresh.expiration <= after) {
    s = Status::InvalidArgument(provider_->Name() +
                                ": expected credentials that expire in the "
                                "future; found an Expiration already past");
  }
  if (s.ok()) {
    current_ = std::make_shared<const Credentials>(fresh.credentials);
    expiration_ = fresh.expiration;
    fetched_at_ = after;
    retry_after_ = 0;
    last_error_ = Status::OK();
    logged_ = false;
    return s;
  }
  last_error_ = s;
  const bool still_valid =
      current_ != nullptr && (expiration_ == 0 || after < expiration_);
  if (!still_valid) {
    retry_after_ = after + kFailureBackoffSeconds;
    return s;
  }
  // Retry in a quarter of what is left, at least 1 s apart.
  retry_after_ = after + std::max<int64_t>(
                             1, std::min<int64_t>(kFailureBackoffSeconds * 3,
                                                  (expiration_ - after) / 4));
  if (!logged_) {
    logged_ = true;
    std::fprintf(stderr,
                 "ufspack: refreshing AWS credentials failed; using the "
                 "current ones until they expire in %lld s: %s\n",
                 static_cast<long long>(expiration_ - after),
                 std::string(s.message()).c_str());
  }
  return s;
}

void CredentialsCache::PrepareFork() {
  RegistryMutex().lock();
  for (CredentialsCache* c : AllCaches()) c->mu_.lock();
}

void CredentialsCache::ParentAfterFork() {
  for (CredentialsCache* c : AllCaches()) c->mu_.unlock();
  RegistryMutex().unlock();
}

void CredentialsCache::ChildAfterFork() {
  for (CredentialsCache* c : AllCaches()) {
    // A refresh in flight belonged to a parent thread: forget it, and the
    // waiters (parent threads) with it.
    c->refreshing_ = false;
    new (&c->done_) std::condition_variable();
    c->fetches_ = 0;
    c->logged_ = false;
    c->mu_.unlock();
  }
  RegistryMutex().unlock();
}

std::shared_ptr<CredentialsCache> SharedCredentialsCache(
    const std::string& key,
    const std::function<std::unique_ptr<CredentialsProvider>()>& make) {
  {
    std::lock_guard<std::mutex> lock(RegistryMutex());
    auto it = SharedCaches().find(key);
    if (it != SharedCaches().end()) return it->second;
  }
  auto cache = std::make_shared<CredentialsCache>(make());
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto inserted = SharedCaches().emplace(key, cache);
  return inserted.first->second;
}

}  // namespace remote
}  // namespace ufspack
