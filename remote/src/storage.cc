// Copyright 2026 The ufspack Authors.
//
// RemoteFile: a RandomAccessFile over one object, read with ranged GETs;
// the storages registered for s3://, http:// and https://.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "aws_config.h"
#include "http.h"
#include "location.h"
#include "ufspack/file.h"
#include "ufspack/format.h"
#include "ufspack/remote.h"

namespace ufspack {
namespace remote {
namespace {

// How much of an object its open fetches: an index whole up to 1 MiB (a
// larger one takes one more request), of a data file only its header.
size_t ProbeBytes(const std::string& url) {
  const std::string suffix = std::string("/") + kIndexFileName;
  if (url.size() >= suffix.size() &&
      url.compare(url.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return 1 << 20;
  }
  return 4096;
}

class RemoteFile final : public RandomAccessFile {
 public:
  RemoteFile(std::shared_ptr<const ObjectLocation> location,
             const RemoteOptions& options)
      : location_(std::move(location)), options_(options) {}

  // Fetches the first `probe` bytes: the object's size, its ETag and its
  // head in one request.
  Status Probe(size_t probe) {
    prefix_.resize(probe);
    Transfer t;
    Prepare(location_, "GET", {}, &t);
    t.has_range = true;
    t.range_begin = 0;
    t.range_length = probe;
    t.dst = prefix_.data();
    t.capacity = prefix_.size();
    Transfer* ts[] = {&t};
    Status s = RunTransfers(ts, 1, options_);
    if (s.IsOutOfRange() && t.object_size == 0) {
      size_ = 0;  // an empty object: no byte to range over
      prefix_.clear();
      etag_ = t.etag;
      return Status::OK();
    }
    if (s.IsOutOfRange()) {  // a 416 for bytes=0-... of a non-empty object
      return Status::IOError(std::string(s.message()) +
                             ": expected the object's first bytes or an "
                             "empty object, found " +
                             SizeFound(t.object_size));
    }
    UFSPACK_RETURN_IF_ERROR(s);
    prefix_.resize(t.received);
    size_ = t.object_size == UINT64_MAX ? t.received : t.object_size;
    etag_ = t.etag;
    return Status::OK();
  }

  Status Read(uint64_t offset, size_t n, char* scratch,
              size_t* bytes_read) const override {
    ReadOp op;
    op.offset = offset;
    op.n = n;
    op.dst = scratch;
    size_t failed = 0;
    Status s = ReadMany(&op, 1, &failed);
    *bytes_read = s.ok() ? op.got : 0;
    return s;
  }

  Status ReadMany(ReadOp* ops, size_t count, size_t* failed) const override {
    // Clamp to the object and serve what the probe already holds; what is
    // left of each op is a piece to fetch.
    struct Piece {
      uint64_t offset;
      size_t len;
      char* dst;
      size_t op;
    };
    std::vector<Piece> pieces;
    pieces.reserve(count);
    for (size_t k = 0; k < count; ++k) {
      ReadOp& op = ops[k];
      op.got = op.offset >= size_ ? 0
                                  : static_cast<size_t>(std::min<uint64_t>(
                                        op.n, size_ - op.offset));
      size_t held = 0;
      if (op.offset < prefix_.size()) {
        held = static_cast<size_t>(
            std::min<uint64_t>(op.got, prefix_.size() - op.offset));
        std::memcpy(op.dst, prefix_.data() + op.offset, held);
      }
      // What is left, in pieces of at most max_request_bytes: a large read
      // (an index, a warm-up run) goes as concurrent requests.
      const size_t chunk = static_cast<size_t>(
          std::max<uint64_t>(options_.max_request_bytes, 1));
      for (size_t at = held; at < op.got; at += chunk) {
        const size_t len = std::min(chunk, op.got - at);
        pieces.push_back(Piece{op.offset + at, len, op.dst + at, k});
      }
    }
    if (pieces.empty()) return Status::OK();
    std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
      return a.offset < b.offset;
    });
    // Groups of pieces close enough to fetch with one request.
    struct Group {
      uint64_t begin, end;
      size_t first, last;  // into pieces
      std::string scratch;
    };
    std::vector<Group> groups;
    for (size_t i = 0; i < pieces.size(); ++i) {
      const Piece& pc = pieces[i];
      const uint64_t end = pc.offset + pc.len;
      if (!groups.empty()) {
        Group& g = groups.back();
        const bool close = pc.offset <= g.end + options_.coalesce_gap;
        const bool fits =
            std::max(end, g.end) - g.begin <= options_.max_request_bytes;
        if (close && fits) {
          g.end = std::max(g.end, end);
          g.last = i;
          continue;
        }
      }
      groups.push_back(Group{pc.offset, end, i, i, std::string()});
    }
    std::vector<Transfer> transfers(groups.size());
    std::vector<Transfer*> ptrs(groups.size());
    uint64_t merged = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
      Group& gr = groups[g];
      Transfer& t = transfers[g];
      Prepare(location_, "GET", {}, &t);
      t.has_range = true;
      t.range_begin = gr.begin;
      t.range_length = gr.end - gr.begin;
      t.expect_etag = etag_;
      if (gr.first == gr.last) {
        t.dst = pieces[gr.first].dst;
      } else {
        merged += gr.last - gr.first + 1;
        gr.scratch.resize(static_cast<size_t>(gr.end - gr.begin));
        t.dst = gr.scratch.data();
      }
      t.capacity = static_cast<size_t>(t.range_length);
      ptrs[g] = &t;
    }
    if (merged > 0) CountCoalesced(merged);
    Status s = RunTransfers(ptrs.data(), ptrs.size(), options_);
    if (!s.ok()) {
      *failed = count;
      for (size_t g = 0; g < groups.size(); ++g) {
        if (!transfers[g].status.ok() && !transfers[g].status.IsAborted()) {
          *failed = pieces[groups[g].first].op;
          return ReadError(transfers[g]);
        }
      }
      return s;  // Aborted: cancelled
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      const Group& gr = groups[g];
      if (transfers[g].received != gr.end - gr.begin) {
        *failed = pieces[gr.first].op;
        return Status::IOError(
            name() + ": short body at offset " + std::to_string(gr.begin) +
            ": expected " + std::to_string(gr.end - gr.begin) +
            " bytes, received " + std::to_string(transfers[g].received));
      }
      if (gr.first == gr.last) continue;
      for (size_t i = gr.first; i <= gr.last; ++i) {
        const Piece& pc = pieces[i];
        std::memcpy(pc.dst, gr.scratch.data() + (pc.offset - gr.begin), pc.len);
      }
    }
    return Status::OK();
  }

  Status Size(uint64_t* size) const override {
    *size = size_;
    return Status::OK();
  }
  const std::string& name() const override { return location_->display; }
  bool prefers_batches() const override { return true; }

 private:
  // "N bytes", or what a 416 without a usable Content-Range implies.
  static std::string SizeFound(uint64_t object_size) {
    return object_size == UINT64_MAX ? std::string("no size (no Content-Range)")
                                     : std::to_string(object_size) + " bytes";
  }

  // What a failed ranged GET of the opened object reports: IOError or
  // Corruption (or the Aborted of a cancelled read), never a code that
  // means something else to the reader's callers.  HTTP 416 is
  // OutOfRange from http.cc, which to a caller means "index past the end"
  // (IndexError in Python, which ends a `for` loop without an error), and
  // 404 is NotFound, "no such pack or record".  Every read was clamped to
  // the size the object had when opened, so a 416 says the object is now
  // shorter than that: Corruption naming both sizes (IOError when the
  // server's own Content-Range says the bytes are there).  Any other
  // failure is IOError, its message kept.
  Status ReadError(const Transfer& t) const {
    const Status& s = t.status;
    if (s.IsIOError() || s.IsCorruption() || s.IsAborted()) return s;
    const std::string msg(s.message());
    const uint64_t end = t.range_begin + t.range_length;
    if (s.IsOutOfRange() && t.object_size != UINT64_MAX &&
        t.object_size >= end) {  // a server at odds with itself
      return Status::IOError(msg +
                             ": the server refused a range inside the "
                             "object (" +
                             std::to_string(t.object_size) + " bytes)");
    }
    if (s.IsOutOfRange()) {
      return Status::Corruption(
          msg + ": expected an object of " + std::to_string(size_) +
          " bytes (its size when opened; this read needs " +
          std::to_string(end) + "), found " + SizeFound(t.object_size) +
          ": the object is shorter than the pack says (truncated or "
          "replaced since it was opened?)");
    }
    if (s.IsNotFound()) {
      return Status::IOError(msg + ": the object was there when opened (" +
                             std::to_string(size_) +
                             " bytes): deleted or moved since?");
    }
    return Status::IOError(msg);
  }

  const std::shared_ptr<const ObjectLocation> location_;
  const RemoteOptions options_;
  uint64_t size_ = 0;
  std::string etag_;
  std::string prefix_;
};

class RemoteStorage final : public UrlStorage {
 public:
  RemoteStorage(bool s3, bool has_options, const RemoteOptions& options)
      : s3_(s3), has_options_(has_options), options_(options) {}

  Status OpenFile(const std::string& url,
                  std::unique_ptr<RandomAccessFile>* file) override {
    auto location = std::make_shared<ObjectLocation>();
    if (s3_) {
      auto settings = std::make_shared<AwsSettings>();
      UFSPACK_RETURN_IF_ERROR(LoadAwsSettings(settings.get()).WithContext(url));
      UFSPACK_RETURN_IF_ERROR(LocateS3(url, settings, location.get()));
      if (location->key.empty()) {
        return Status::InvalidArgument(url + ": names a bucket, not an object");
      }
    } else {
      UFSPACK_RETURN_IF_ERROR(LocateHttp(url, location.get()));
    }
    const RemoteOptions options =
        has_options_ ? options_ : RemoteOptions::FromEnvironment();
    std::unique_ptr<RemoteFile> f(new RemoteFile(location, options));
    UFSPACK_RETURN_IF_ERROR(f->Probe(ProbeBytes(url)));
    *file = std::move(f);
    return Status::OK();
  }

 private:
  const bool s3_;
  const bool has_options_;
  const RemoteOptions options_;
};

void Register(bool has_options, const RemoteOptions& options) {
  RegisterUrlStorage(
      "s3", std::make_shared<RemoteStorage>(true, has_options, options));
  auto http = std::make_shared<RemoteStorage>(false, has_options, options);
  RegisterUrlStorage("http", http);
  RegisterUrlStorage("https", http);
}

template <typename T>
void EnvNumber(const char* name, T* value) {
  const char* v = ::getenv(name);
  if (v == nullptr || *v == '\0') return;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (end != v && *end == '\0' && d >= 0) *value = static_cast<T>(d);
}

}  // namespace
}  // namespace remote

RemoteOptions RemoteOptions::FromEnvironment() {
  RemoteOptions o;
  remote::EnvNumber("UFSPACK_REMOTE_IN_FLIGHT", &o.max_in_flight);
  remote::EnvNumber("UFSPACK_REMOTE_COALESCE_GAP", &o.coalesce_gap);
  remote::EnvNumber("UFSPACK_REMOTE_MAX_REQUEST_BYTES", &o.max_request_bytes);
  remote::EnvNumber("UFSPACK_REMOTE_MAX_ATTEMPTS", &o.max_attempts);
  remote::EnvNumber("UFSPACK_REMOTE_RETRY_SECONDS", &o.retry_seconds);
  remote::EnvNumber("UFSPACK_REMOTE_CONNECT_TIMEOUT_MS", &o.connect_timeout_ms);
  remote::EnvNumber("UFSPACK_REMOTE_STALL_SECONDS", &o.stall_seconds);
  if (o.max_in_flight < 1) o.max_in_flight = 1;
  if (o.max_attempts < 1) o.max_attempts = 1;
  if (o.max_request_bytes < 1) o.max_request_bytes = 1;
  return o;
}

void RegisterRemoteStorage() { remote::Register(false, RemoteOptions()); }

void RegisterRemoteStorage(const RemoteOptions& options) {
  remote::Register(true, options);
}

}  // namespace ufspack
