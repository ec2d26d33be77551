// Copyright 2026 The ufspack Authors.
//
// HTTP transfers over libcurl's multi interface: many requests in flight
// from one thread, connections kept and reused between calls, HTTP/2
// multiplexing where a TLS server offers it, retries with jittered
// exponential backoff.
//
// Why libcurl: Debian's libcurl4-openssl-dev is maintained, speaks
// HTTP/1.1 and HTTP/2 (nghttp2) over OpenSSL with the system's trust
// store, and its multi interface runs dozens of transfers on one thread
// with a connection cache -- what a batch of ranged GETs needs.  A raw
// socket client would have to redo TLS, chunked bodies, keep-alive and
// proxies; an SDK (aws-sdk-cpp) is not packaged by Debian.
//
// Thread safety: Run() may be called from any number of threads at once;
// each call borrows a session (a multi handle with its easy handles and
// connections) from a process-wide pool.  Fork: sessions made by another
// process are abandoned, never used or closed (their sockets and TLS
// state belong to the parent).
#ifndef UFSPACK_REMOTE_HTTP_H_
#define UFSPACK_REMOTE_HTTP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sigv4.h"
#include "ufspack/remote.h"
#include "ufspack/status.h"

namespace ufspack {
namespace remote {

struct Transfer {
  // --- request
  std::string method = "GET";
  std::string url;      // what is sent (may hold a signed query string)
  std::string display;  // what messages show: no query string, no secret
  bool has_range = false;
  uint64_t range_begin = 0;
  uint64_t range_length = 0;  // > 0
  // Body of a 2xx response goes here (up to capacity bytes; more is an
  // error); without dst it goes to `body` (at most 16 MiB).
  char* dst = nullptr;
  size_t capacity = 0;
  // Request body (PUT, POST).
  const char* upload = nullptr;
  size_t upload_size = 0;
  // Hex SHA-256 of the body when the caller already has it (an upload
  // part hashed once for all its attempts); empty: the signer hashes it.
  std::string payload_sha256;
  // Sent on every attempt.  A name or value holding CR, LF or NUL (here or
  // added by `sign`) fails the transfer with InvalidArgument naming it
  // (never the value) before anything is sent, not retried.
  std::vector<Header> headers;
  // Called before every attempt to add per-attempt headers (a SigV4
  // signature with the attempt's date and the credentials current then).
  // An error (no usable credentials) fails the transfer, not retried.
  std::function<Status(const Transfer&, std::vector<Header>*)> sign;
  // Non-empty: a 2xx response whose ETag differs is an error (the object
  // changed), not retried.
  std::string expect_etag;
  bool follow_redirects = false;
  std::string ca_bundle;  // CA file for TLS; empty: the system's store
  // Set (by another thread): the transfer stops within about a second, in
  // flight or waiting to be retried, and fails with Aborted.
  const std::atomic<bool>* cancel = nullptr;
  // Non-null: request body bytes sent by the current attempt, updated as
  // they go (0 again at each retry).
  std::atomic<uint64_t>* sent = nullptr;

  // --- response
  Status status;
  long http_code = 0;
  std::string etag;
  std::string content_range;
  uint64_t object_size = UINT64_MAX;  // from Content-Range's total, or the
                                      // length of a 200 response
  size_t received = 0;                // body bytes (dst or body)
  std::string body;                   // error bodies, or dst == nullptr
  int attempts = 0;
  bool retryable = false;  // the last failure was one to retry
};

// Runs every transfer, at most `max_in_flight` at once, retrying as
// `options` says, and sets each one's status.  Once one fails for good, no
// new transfer is started (those not started fail with Aborted); the
// call returns the first failure (OK when all succeeded).
Status RunTransfers(Transfer* const* transfers, size_t count,
                    const RemoteOptions& options);

// Counters behind GetRemoteStats().
void CountCoalesced(uint64_t n);

// "<url>" without its query string (which may hold a signature).
std::string Redact(const std::string& url);

// The text of the first <tag>...</tag> in `xml` (an S3 or STS answer),
// with the five predefined entities decoded; false when there is none.
bool XmlText(const std::string& xml, const std::string& tag, std::string* text);

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_HTTP_H_
