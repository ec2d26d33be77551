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
// standard AWS environment variables and shared files; credentials from
// AWS's provider chain (environment, web identity, assume role, shared-file
// keys, credential_process, container credentials, EC2 instance metadata
// IMDSv2), refreshed before
// they expire and shared by the process's readers; see docs/remote.md,
// "Credentials".  No credential ever appears in a message: URLs are shown
// without their query string, and request headers are never shown.
//
// Packs, single or merged, are written to S3 with UploadPack() (`ufspack
// build DIR -o s3://... [--parts N]` builds locally, then uploads);
// http(s):// URLs are read-only.
//
// Thread safety: all functions are thread-safe.  Files opened through the
// registered storage may be read from any number of threads at once.
// Fork safety: a child process never uses its parent's connections (they
// are left to the parent and new ones are made), nor a credentials
// refresh its parent had in flight (it refreshes on its own when due).
#ifndef UFSPACK_REMOTE_H_
#define UFSPACK_REMOTE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "ufspack/export.h"
#include "ufspack/status.h"

namespace ufspack {

struct RemoteOptions {
  // Requests in flight at once for one batch (Reader::ReadBatch).
  int max_in_flight = 32;
  // Ranges whose gap is at most this many bytes are fetched by one
  // request: at 1 ms and ~100 MB/s one round trip costs as much as ~100 KB,
  // so a small gap is cheaper fetched than asked for twice.
  uint64_t coalesce_gap = 16 << 10;
  // No request asks for more than this many bytes: merging stops there,
  // and a larger read (an index, a warm-up run) is split into requests of
  // this size, sent concurrently.  16 MiB: a block of block reads
  // (ReaderOptions::block_bytes, 8 MiB by default, plus the record that
  // ends past it) is one request.
  uint64_t max_request_bytes = 16 << 20;
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

// Where the credentials for `url` come from, as `ufspack info URL
// --explain-credentials` prints it: for s3:// the AWS settings, each
// provider of the chain asked (in order) and why it was skipped, failed or
// chosen, the credentials chosen (the last 4 characters of the access key
// id, never a secret or token) and when they expire and are refreshed; for
// http(s):// that requests are unsigned.  *text is set also when the
// settings or the credentials cannot be loaded; the status says so.
UFSPACK_EXPORT Status ExplainCredentials(const std::string& url,
                                         std::string* text);

// --- Uploading to S3 ------------------------------------------------------

struct UploadOptions {
  // A file of at most part_bytes goes up in one PUT; a larger one as an S3
  // multipart upload in parts of part_bytes, grown (to a multiple of 1 MiB)
  // when the file would otherwise need more than S3's 10,000 parts.  S3
  // takes parts of 5 MiB to 5 GiB (the last may be smaller): part_bytes
  // outside that range is InvalidArgument.
  uint64_t part_bytes = 16 << 20;
  // Parts read and sent at once.  Memory: parts_in_flight x part size.
  int parts_in_flight = 4;
  // Called on the calling thread, about 10 times a second and once at the
  // end, with the bytes sent (parts in flight counted as far as they have
  // gone; a retried part goes back) and the total: for UploadPack() the two
  // files together, or for a merged pack every part's two files and the
  // manifest (a file found already uploaded counts as sent).
  std::function<void(uint64_t done, uint64_t total)> progress;
  // Set from another thread (a signal handler's flag): the upload stops
  // within about a second, aborts its multipart upload and returns Aborted.
  const std::atomic<bool>* cancel = nullptr;
  // Called on the calling thread with one line (no newline) for each step
  // of UploadPack() other than sending bytes: a part of a merged pack
  // skipped because the destination holds it already, a stale single pack
  // deleted.  May be empty.
  std::function<void(const std::string& line)> log;
  // Retries, timeouts and TLS of each request (see RemoteOptions).
  RemoteOptions remote;
};

// Uploads the local file `local_path` to the object `s3_url`
// ("s3://bucket/key"), replacing what is there.  Credentials, region and
// endpoint as for reading (docs/remote.md).  Each request is signed with
// its body's SHA-256 and retried as options.remote says.
//
// All or nothing: a multipart upload that fails, is cancelled or has its
// CompleteMultipartUpload refused (an HTTP error, or HTTP 200 with an
// <Error> body, which S3 may send once the request has started) is aborted
// with AbortMultipartUpload, so no part stays stored (and billed) and the
// object keeps its previous contents.  A single PUT replaces the object
// only when the whole body arrived.  The exception is a request whose
// answer was lost in a way that a retry cannot repair (a CreateMultipartUpload
// that succeeded, then timed out, leaves one upload behind); a bucket
// lifecycle rule "AbortIncompleteMultipartUpload" removes such leftovers.
//
// Errors: InvalidArgument for an http(s):// URL ("read-only: upload to
// s3:// only"), a malformed URL or bad options; NotFound/IOError for the
// local file; IOError naming the request ("PUT s3://b/k (UploadPart 3 of
// 12)"), the HTTP status, S3's error code and the attempts for a failed
// one; Aborted when cancelled before the last byte of the body (or of
// every part) was sent: a later cancel waits for the server's answer and
// returns its outcome.
UFSPACK_EXPORT Status UploadFile(const std::string& local_path,
                                 const std::string& s3_url,
                                 const UploadOptions& options);

// Uploads the local pack `local_pack_dir` to the pack URL `s3_url`
// ("s3://bucket/prefix/train.ufspack"; a URL ending in /index.ufs or
// /manifest.ufs names the same prefix).  The local pack must open with
// Reader::Open; it is either
//
// A single pack (a directory with index.ufs and data.ufs): the objects
// .../data.ufs and .../index.ufs.  data.ufs goes first and index.ufs last,
// so that a reader never finds the new index without its data.
//
// Replacing a pack in place (S3 has no rename of two objects at once):
//   - a reader that opens before data.ufs is replaced opens the old pack;
//     its later reads of data.ufs fail, once it is replaced, with
//     Corruption "the object changed since it was opened" (every read is
//     pinned to the ETag seen at open), never bytes of the new pack;
//   - a reader that opens between the two uploads finds the new data.ufs
//     with the old index.ufs and gets Corruption "... are not one pack"
//     (the pack-id check), never a mix of the two;
//   - a reader that opens after index.ufs is replaced opens the new pack.
// Cancelling: honoured until data.ufs is in place (then nothing changed at
// the destination).  Once data.ufs is replaced the index follows whatever
// `cancel` says, because stopping there would leave a pair that no reader
// can open; the call then returns OK.  An error uploading index.ufs says
// that the destination holds the new data with the old index until the
// upload is repeated.  A manifest.ufs left at the prefix by an earlier
// merged upload is not deleted: opening the prefix finds the single pack
// first, and the old manifest (whose parts are kept) stays a consistent
// pack for whoever names it.
//
// A merged pack (a directory holding manifest.ufs, or the manifest
// itself; docs/format.md "Merged packs"): each part k goes up as a single
// pack (data.ufs, then index.ufs) to the prefix
// "<s3_url>/<16 hex digits of the part's pack id>-part-<k, 5 digits>",
// part after part, and then, last, a manifest naming the parts by those
// relative paths (the same merged pack id) to "<s3_url>/manifest.ufs".
// Nothing is visible as the new pack until the manifest is up: a
// cancelled or failed upload returns leaving the prefix's previous pack
// as it was (parts already sent stay, unnamed and harmless).  Before
// anything is sent, the merged pack is opened with Reader::Open and each
// part as a pack matching its manifest entry (pack id, record count,
// sizes).  A part key whose data.ufs and index.ufs already hold the part
// (the sizes, and the pack id in each file's header: one ranged GET each)
// is not sent again, so a re-run after an interrupted upload resumes;
// options.log says so.  Part keys are led by the part's pack id, so parts
// spread over S3's partitioned prefixes, and a part that changed never
// replaces one that an older manifest names: readers of the previous
// manifest keep working (old parts are never deleted; a lifecycle rule or
// a manual delete removes them).  After the manifest is up, a single pack
// at the prefix from an earlier upload (index.ufs, data.ufs) is deleted,
// index first, whatever `cancel` says, because Reader::Open tries a URL
// prefix as a single pack before its manifest; this needs
// s3:DeleteObject, and only when there is such a pack.  Readers that had
// that single pack open then get NotFound on their next read.  Progress
// counts every part's two files and the manifest.
UFSPACK_EXPORT Status UploadPack(const std::string& local_pack_dir,
                                 const std::string& s3_url,
                                 const UploadOptions& options);

namespace remote_internal {
// Registration by inclusion: every program that includes this header gets
// the remote storages before main() (registration only stores a pointer;
// libcurl is initialised at the first request).
inline const bool registered = (RegisterRemoteStorage(), true);
}  // namespace remote_internal

}  // namespace ufspack

#endif  // UFSPACK_REMOTE_H_
