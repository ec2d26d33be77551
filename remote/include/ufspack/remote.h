// Copyright 2026 The ufspack Authors.
//
// Packs on object storage and web servers: s3:// and http(s):// URLs.
//
//   #include <ufspack/remote.h>      // registers s3, http and https
//   std::unique_ptr<ufspack::Reader> reader;
//   ufspack::Status s = ufspack::Reader::Open(
//       "s3://bucket/datasets/train.ufspack", {}, &reader);
//
// Including this header (and linking ufspack::remote) makes every reader
// of packs in the program (Reader::Open, the node-local cache, the CLI)
// accept these URLs; RegisterRemoteStorage() does the same explicitly.
//
// A pack URL names the pack's prefix: "s3://b/p/train.ufspack" is the two
// objects "p/train.ufspack/index.ufs" and "p/train.ufspack/data.ufs" of
// bucket b (a URL ending in "/index.ufs" names the index itself).  Opening
// one costs two requests: the first MiB of index.ufs (the whole index of
// packs up to ~20k records; the rest follows in one more request) and the
// head of data.ufs.  Each record is then one ranged GET; Reader::ReadBatch
// issues a batch's ranges concurrently (RemoteOptions::max_in_flight) over
// reused connections, merging ranges less than coalesce_gap apart.  Every
// response must carry the ETag the object had at open: a pack replaced
// under a running reader is an error, never a mix of two packs' bytes.
//
// S3 settings (credentials, region, endpoint, addressing) come from the
// standard AWS environment variables and shared files; see docs/remote.md.
// No credential ever appears in a message: URLs are shown without their
// query string, and request headers are never shown.
//
// Thread safety: all functions are thread-safe.  Files opened through the
// registered storage may be read from any number of threads at once.
// Fork safety: a child process never uses its parent's connections (they
// are left to the parent and new ones are made).
#ifndef UFSPACK_REMOTE_H_
#define UFSPACK_REMOTE_H_

#include <cstdint>

#include "ufspack/export.h"

namespace ufspack {

struct RemoteOptions {
  // Requests in flight at once for one batch (Reader::ReadBatch).
  int max_in_flight = 32;
  // Ranges whose gap is at most this many bytes are fetched by one
  // request: at 1 ms and ~100 MB/s one round trip costs as much as ~100 KB,
  // so a small gap is cheaper fetched than asked for twice.
  uint64_t coalesce_gap = 16 << 10;
  // A merged request never exceeds this many bytes.
  uint64_t max_request_bytes = 8 << 20;
  // Attempts per request (the first included) on connection errors,
  // timeouts, HTTP 429/500/502/503/504 (S3's SlowDown) and short bodies;
  // backoff is exponential from 50 ms (capped at 2 s) with full jitter,
  // and a request stops being retried once retry_seconds have passed.
  int max_attempts = 8;
  double retry_seconds = 60;
  // Connecting gives up after this long; a transfer that moves less than
  // 1 KiB/s for stall_seconds is aborted (and retried).
  int connect_timeout_ms = 10000;
  int stall_seconds = 30;
  // TLS peer and host verification (off only for tests of a self-signed
  // server you trust; AWS_CA_BUNDLE names a CA file instead).
  bool verify_tls = true;

  // The defaults above, overridden by UFSPACK_REMOTE_IN_FLIGHT,
  // UFSPACK_REMOTE_COALESCE_GAP, UFSPACK_REMOTE_MAX_REQUEST_BYTES,
  // UFSPACK_REMOTE_MAX_ATTEMPTS, UFSPACK_REMOTE_RETRY_SECONDS,
  // UFSPACK_REMOTE_CONNECT_TIMEOUT_MS, UFSPACK_REMOTE_STALL_SECONDS when set.
  static RemoteOptions FromEnvironment();
};

// Makes s3://, http:// and https:// URLs openable everywhere in this
// process.  Without options, each open reads RemoteOptions::FromEnvironment().
UFSPACK_EXPORT void RegisterRemoteStorage();
UFSPACK_EXPORT void RegisterRemoteStorage(const RemoteOptions& options);

// Process-wide counters of remote reads, for benchmarks and `--verbose`.
struct RemoteStats {
  uint64_t requests = 0;   // HTTP requests sent (retries included)
  uint64_t bytes = 0;      // response body bytes received
  uint64_t retries = 0;    // requests that were attempts after the first
  uint64_t coalesced = 0;  // ranges served by a request merged with others
};
UFSPACK_EXPORT RemoteStats GetRemoteStats();

namespace remote_internal {
// Registration by inclusion: every program that includes this header gets
// the remote storages before main() (registration only stores a pointer;
// libcurl is initialised at the first request).
inline const bool registered = (RegisterRemoteStorage(), true);
}  // namespace remote_internal

}  // namespace ufspack

#endif  // UFSPACK_REMOTE_H_
