// Copyright 2026 The ufspack Authors.
//
// Uploading files and packs to S3: one PUT for a small file, a multipart
// upload (CreateMultipartUpload, UploadPart x N, CompleteMultipartUpload,
// AbortMultipartUpload on any failure) for a large one.  Every request
// goes through RunTransfers (retries, timeouts) and is signed by the
// location's SigV4 signer with the SHA-256 of its body.
//
// Threads: the parts of a file are read and sent by parts_in_flight
// worker threads, each running one RunTransfers() call at a time (each
// call borrows its own curl session, so a worker keeps its connection
// from part to part), while the calling thread reports progress and
// watches the cancel flag.  A part's body is read into the worker's own
// buffer, so memory is parts_in_flight x part size.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "aws_config.h"
#include "http.h"
#include "location.h"
#include "sigv4.h"
#include "ufspack/file.h"
#include "ufspack/format.h"
#include "ufspack/manifest.h"
#include "ufspack/open_reader.h"
#include "ufspack/reader.h"
#include "ufspack/remote.h"

namespace ufspack {
namespace remote {
namespace {

// S3's limits
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html).
constexpr uint64_t kMinPartBytes = uint64_t{5} << 20;
constexpr uint64_t kMaxPartBytes = uint64_t{5} << 30;
constexpr uint64_t kMaxParts = 10000;
constexpr uint64_t kMaxObjectBytes = uint64_t{5} << 40;
constexpr int kMaxPartsInFlight = 256;

bool StartsWith(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

// The object `s3_url` names, with the AWS settings of the environment.
Status LocateDestination(const std::string& s3_url,
                         std::shared_ptr<const ObjectLocation>* location) {
  if (StartsWith(s3_url, "http://") || StartsWith(s3_url, "https://")) {
    return Status::InvalidArgument(Redact(s3_url) +
                                   ": read-only: upload to s3:// only");
  }
  auto settings = std::make_shared<AwsSettings>();
  UFSPACK_RETURN_IF_ERROR(
      LoadAwsSettings(settings.get()).WithContext(Redact(s3_url)));
  auto loc = std::make_shared<ObjectLocation>();
  UFSPACK_RETURN_IF_ERROR(LocateS3(s3_url, settings, loc.get()));
  if (loc->key.empty() || loc->key.back() == '/') {
    return Status::InvalidArgument(
        s3_url + ": names a bucket or a folder, not an object");
  }
  *location = std::move(loc);
  return Status::OK();
}

Status CheckOptions(const UploadOptions& options) {
  if (options.part_bytes < kMinPartBytes ||
      options.part_bytes > kMaxPartBytes) {
    return Status::InvalidArgument(
        "part size " + std::to_string(options.part_bytes) +
        " bytes: S3 takes parts of 5 MiB (5242880) to 5 GiB");
  }
  if (options.parts_in_flight < 1 ||
      options.parts_in_flight > kMaxPartsInFlight) {
    return Status::InvalidArgument(
        "parts in flight " + std::to_string(options.parts_in_flight) +
        ": expected 1 to " + std::to_string(kMaxPartsInFlight));
  }
  return Status::OK();
}

// Progress over one or more files: bytes of the files already sent
// (`base`) plus those of the current one.  Used on the calling thread.
class Meter {
 public:
  Meter(const UploadOptions& options, uint64_t total)
      : callback_(options.progress), total_(total) {}
  void Report(uint64_t current) {
    if (callback_) callback_(std::min(total_, base_ + current), total_);
  }
  void FinishFile(uint64_t size) {
    base_ += size;
    Report(0);
  }

 private:
  const std::function<void(uint64_t, uint64_t)> callback_;
  const uint64_t total_;
  uint64_t base_ = 0;
};

// A RandomAccessFile that reads through another one it does not own.
class BorrowedFile final : public RandomAccessFile {
 public:
  explicit BorrowedFile(const RandomAccessFile* file) : file_(file) {}
  Status Read(uint64_t offset, size_t n, char* scratch,
              size_t* bytes_read) const override {
    return file_->Read(offset, n, scratch, bytes_read);
  }
  Status Size(uint64_t* size) const override { return file_->Size(size); }
  const std::string& name() const override { return file_->name(); }

 private:
  const RandomAccessFile* const file_;
};

// Sends the bodies [k * part_size, ...) of `file`, k in [0, count), from
// worker threads, one request each, made by `prepare(k, body, transfer)`.
// The calling thread reports progress and watches options.cancel.
//
// Thread safety: one Run() per object.
class PartSender {
 public:
  using PrepareFn = std::function<void(size_t k, Transfer* t)>;

  PartSender(const RandomAccessFile& file, uint64_t size, uint64_t part_size,
             const UploadOptions& options, Meter* meter)
      : file_(file),
        size_(size),
        part_size_(part_size),
        count_(size == 0
                   ? 1
                   : static_cast<size_t>((size + part_size - 1) / part_size)),
        options_(options),
        meter_(meter),
        etags_(count_) {}

  size_t count() const { return count_; }
  const std::vector<std::string>& etags() const { return etags_; }
  bool cancelled() const { return cancelled_; }

  // Sends every part; returns the first failure (Aborted when cancelled).
  Status Run(const PrepareFn& prepare) {
    const size_t workers = std::min<size_t>(
        count_, static_cast<size_t>(std::max(1, options_.parts_in_flight)));
    sent_ = std::vector<std::atomic<uint64_t>>(workers);
    for (auto& s : sent_) s.store(0);
    running_ = workers;
    std::vector<std::thread> threads;
    threads.reserve(workers);
    for (size_t w = 0; w < workers; ++w) {
      threads.emplace_back([this, w, &prepare] { Work(w, prepare); });
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (running_ > 0) {
        cv_.wait_for(lock, std::chrono::milliseconds(100));
        if (options_.cancel != nullptr && options_.cancel->load() &&
            !cancelled_) {
          cancelled_ = true;
          stop_.store(true);
        }
        uint64_t current = done_;
        for (const auto& s : sent_) current += s.load();
        lock.unlock();
        meter_->Report(current);
        lock.lock();
      }
    }
    for (std::thread& t : threads) t.join();
    // A cancel that came after every part was stored is too late: the
    // object (or every part) is in place, and saying otherwise would hide
    // that from UploadPack, which must then publish the index.  (A failed
    // part is never counted, so all counted means none failed.)
    if (cancelled_ && completed_ < count_) {
      return Status::Aborted(file_.name() + ": upload cancelled");
    }
    return first_error_;
  }

 private:
  void Work(size_t w, const PrepareFn& prepare) {
    std::string body;
    for (;;) {
      size_t k;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_.load() || next_ >= count_) break;
        k = next_++;
      }
      Status s = Send(k, w, prepare, &body);
      std::lock_guard<std::mutex> lock(mu_);
      sent_[w].store(0);
      if (!s.ok()) {
        if (first_error_.ok() && !(s.IsAborted() && stop_.load())) {
          first_error_ = s;
        }
        stop_.store(true);
        break;
      }
      done_ += body.size();
      ++completed_;
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
    cv_.notify_all();
  }

  Status Send(size_t k, size_t w, const PrepareFn& prepare, std::string* body) {
    const uint64_t offset = static_cast<uint64_t>(k) * part_size_;
    const size_t n =
        static_cast<size_t>(std::min<uint64_t>(part_size_, size_ - offset));
    body->resize(n);
    size_t got = 0;
    UFSPACK_RETURN_IF_ERROR(file_.Read(offset, n, body->data(), &got));
    if (got != n) {
      return Status::IOError(file_.name() + ": read " + std::to_string(got) +
                             " bytes at offset " + std::to_string(offset) +
                             ", expected " + std::to_string(n) +
                             ": the file shrank while being uploaded");
    }
    Transfer t;
    prepare(k, &t);
    t.upload = body->data();
    t.upload_size = body->size();
    t.payload_sha256 = Sha256Hex(*body);
    t.headers.emplace_back("Content-Type", "application/octet-stream");
    t.cancel = &stop_;
    t.sent = &sent_[w];
    Transfer* ts[] = {&t};
    UFSPACK_RETURN_IF_ERROR(RunTransfers(ts, 1, options_.remote));
    etags_[k] = t.etag;
    return Status::OK();
  }

  const RandomAccessFile& file_;
  const uint64_t size_;
  const uint64_t part_size_;
  const size_t count_;
  const UploadOptions& options_;
  Meter* const meter_;
  std::atomic<bool> stop_{false};
  std::vector<std::atomic<uint64_t>> sent_;  // per worker, in flight
  std::vector<std::string> etags_;           // per part; written once each
  std::mutex mu_;
  std::condition_variable cv_;
  size_t next_ = 0;         // guarded by mu_
  size_t running_ = 0;      // guarded by mu_
  uint64_t done_ = 0;       // guarded by mu_: bytes of parts sent
  size_t completed_ = 0;    // guarded by mu_: parts sent
  Status first_error_;      // guarded by mu_
  bool cancelled_ = false;  // written by the calling thread only
};

// The upload of one local file to one object.
class ObjectUpload {
 public:
  ObjectUpload(const RandomAccessFile& file, uint64_t size,
               std::shared_ptr<const ObjectLocation> location,
               const UploadOptions& options, Meter* meter)
      : file_(file),
        size_(size),
        location_(std::move(location)),
        options_(options),
        meter_(meter) {}

  Status Run() {
    if (size_ > kMaxObjectBytes) {
      return Status::InvalidArgument(
          file_.name() + ": " + std::to_string(size_) +
          " bytes: larger than S3's largest object (5 TiB)");
    }
    if (Cancelled()) {
      return Status::Aborted(file_.name() + ": upload cancelled");
    }
    return size_ <= options_.part_bytes ? SinglePut() : Multipart();
  }

 private:
  bool Cancelled() const {
    return options_.cancel != nullptr && options_.cancel->load();
  }

  Status SinglePut() {
    PartSender sender(file_, size_, std::max<uint64_t>(size_, 1), options_,
                      meter_);
    return sender.Run(
        [this](size_t, Transfer* t) { Prepare(location_, "PUT", {}, t); });
  }

  // Part size: options.part_bytes, grown to a whole number of MiB when the
  // file would need more than kMaxParts parts.
  uint64_t PartSize() const {
    uint64_t part = options_.part_bytes;
    const uint64_t needed = (size_ + kMaxParts - 1) / kMaxParts;
    if (needed > part) {
      const uint64_t mib = uint64_t{1} << 20;
      part = (needed + mib - 1) / mib * mib;
    }
    return part;
  }

  Status Multipart() {
    std::string upload_id;
    UFSPACK_RETURN_IF_ERROR(Create(&upload_id));
    PartSender sender(file_, size_, PartSize(), options_, meter_);
    const size_t count = sender.count();
    Status s = sender.Run([&](size_t k, Transfer* t) {
      Prepare(location_, "PUT",
              {{"partNumber", std::to_string(k + 1)}, {"uploadId", upload_id}},
              t);
      t->display = location_->display + " (UploadPart " +
                   std::to_string(k + 1) + " of " + std::to_string(count) + ")";
    });
    if (s.ok()) {
      for (size_t k = 0; k < count; ++k) {
        if (sender.etags()[k].empty()) {
          s = Status::IOError(location_->display + " (UploadPart " +
                              std::to_string(k + 1) +
                              "): the response has no ETag header, which "
                              "CompleteMultipartUpload needs");
          break;
        }
      }
    }
    if (s.ok() && Cancelled()) {
      s = Status::Aborted(file_.name() + ": upload cancelled");
    }
    if (s.ok()) s = Complete(upload_id, sender.etags());
    if (!s.ok()) return Abort(upload_id, s);
    return Status::OK();
  }

  Status Create(std::string* upload_id) {
    Transfer t;
    Prepare(location_, "POST", {{"uploads", ""}}, &t);
    t.display = location_->display + " (CreateMultipartUpload)";
    t.headers.emplace_back("Content-Type", "application/octet-stream");
    Transfer* ts[] = {&t};
    UFSPACK_RETURN_IF_ERROR(RunTransfers(ts, 1, options_.remote));
    if (!XmlText(t.body, "UploadId", upload_id) || upload_id->empty()) {
      return Status::IOError(t.method + " " + t.display + ": HTTP " +
                             std::to_string(t.http_code) +
                             " without an <UploadId> in its body (" +
                             std::to_string(t.body.size()) + " bytes)");
    }
    return Status::OK();
  }

  Status Complete(const std::string& upload_id,
                  const std::vector<std::string>& etags) {
    std::string xml =
        "<CompleteMultipartUpload "
        "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
    for (size_t k = 0; k < etags.size(); ++k) {
      xml += "<Part><PartNumber>" + std::to_string(k + 1) +
             "</PartNumber><ETag>" + XmlEscape(etags[k]) + "</ETag></Part>";
    }
    xml += "</CompleteMultipartUpload>";
    Transfer t;
    Prepare(location_, "POST", {{"uploadId", upload_id}}, &t);
    t.display = location_->display + " (CompleteMultipartUpload, " +
                std::to_string(etags.size()) + " parts)";
    t.upload = xml.data();
    t.upload_size = xml.size();
    t.headers.emplace_back("Content-Type", "application/xml");
    Transfer* ts[] = {&t};
    UFSPACK_RETURN_IF_ERROR(RunTransfers(ts, 1, options_.remote));
    // S3 answers 200 as soon as it starts combining the parts, and may
    // then report a failure in the body.
    if (t.body.find("<Error>") != std::string::npos) {
      std::string code, message;
      XmlText(t.body, "Code", &code);
      XmlText(t.body, "Message", &message);
      return Status::IOError(t.method + " " + t.display + ": HTTP " +
                             std::to_string(t.http_code) +
                             " with an S3 error in the body: " +
                             (code.empty() ? "(no code)" : code) +
                             (message.empty() ? "" : ": " + message));
    }
    return Status::OK();
  }

  // Aborts the upload after `why`; returns `why` with the outcome.
  Status Abort(const std::string& upload_id, const Status& why) {
    Transfer t;
    Prepare(location_, "DELETE", {{"uploadId", upload_id}}, &t);
    t.display = location_->display + " (AbortMultipartUpload)";
    Transfer* ts[] = {&t};
    Status s = RunTransfers(ts, 1, options_.remote);
    if (s.ok() || s.IsNotFound()) {
      return why.WithContext(location_->display +
                             ": multipart upload aborted, the object is "
                             "unchanged");
    }
    return why.WithContext(
        location_->display + ": the multipart upload could not be aborted (" +
        std::string(s.message()) + "); its parts stay stored until a " +
        "lifecycle rule (AbortIncompleteMultipartUpload) removes them");
  }

  const RandomAccessFile& file_;
  const uint64_t size_;
  const std::shared_ptr<const ObjectLocation> location_;
  const UploadOptions& options_;
  Meter* const meter_;
};

Status UploadObject(const RandomAccessFile& file,
                    const std::shared_ptr<const ObjectLocation>& location,
                    const UploadOptions& options, Meter* meter) {
  uint64_t size = 0;
  UFSPACK_RETURN_IF_ERROR(file.Size(&size));
  ObjectUpload upload(file, size, location, options, meter);
  UFSPACK_RETURN_IF_ERROR(upload.Run());
  meter->FinishFile(size);
  return Status::OK();
}

bool Cancelled(const UploadOptions& options) {
  return options.cancel != nullptr && options.cancel->load();
}

void Log(const UploadOptions& options, const std::string& line) {
  if (options.log) options.log(line);
}

// The two objects of the pack URL `url` (a prefix, or its index.ufs).
struct PackObjects {
  std::string prefix;  // the pack URL without "/index.ufs"
  std::string index_url, data_url;
  std::shared_ptr<const ObjectLocation> index, data;
};

Status LocatePack(const std::string& url, PackObjects* o) {
  UFSPACK_RETURN_IF_ERROR(ResolvePackPath(url, &o->index_url, &o->data_url));
  o->prefix = DirName(o->index_url);
  UFSPACK_RETURN_IF_ERROR(LocateDestination(o->index_url, &o->index));
  return LocateDestination(o->data_url, &o->data);
}

// A local single pack, opened the way a reader opens it, from the very
// file descriptor (data) and mapping (index) that are uploaded: a build
// replacing the pack meanwhile cannot make the two disagree.
struct LocalPack {
  std::unique_ptr<RandomAccessFile> data;
  std::unique_ptr<Reader> reader;           // owns the index's mapping
  std::unique_ptr<RandomAccessFile> index;  // a view of that mapping
  uint64_t index_size = 0;

  const PackInfo& info() const { return reader->info(); }
};

Status OpenLocalPack(const std::string& dir, LocalPack* pack) {
  std::string index_path, data_path;
  UFSPACK_RETURN_IF_ERROR(ResolvePackPath(dir, &index_path, &data_path));
  UFSPACK_RETURN_IF_ERROR(NewPosixRandomAccessFile(data_path, &pack->data));
  std::unique_ptr<Region> index;
  UFSPACK_RETURN_IF_ERROR(MapFile(index_path, &index));
  const std::string_view index_bytes = index->bytes();
  UFSPACK_RETURN_IF_ERROR(
      internal::OpenReader(std::move(index),
                           std::make_unique<BorrowedFile>(pack->data.get()), {},
                           &pack->reader)
          .WithContext("not uploading " + dir +
                       ": it does not open as a pack"));
  pack->index = NewViewRandomAccessFile(index_path, index_bytes);
  pack->index_size = index_bytes.size();
  return Status::OK();
}

// The first `n` bytes of the object at `location` (fewer when it is
// shorter) and its size; *exists is false when there is none (HTTP 404)
// or it is empty (HTTP 416).
Status ProbeObject(const std::shared_ptr<const ObjectLocation>& location,
                   size_t n, const RemoteOptions& options, bool* exists,
                   uint64_t* size, std::string* head) {
  Transfer t;
  Prepare(location, "GET", {}, &t);
  t.has_range = true;
  t.range_begin = 0;
  t.range_length = n;
  Transfer* ts[] = {&t};
  Status s = RunTransfers(ts, 1, options);
  *exists = s.ok();
  if (s.IsNotFound() || s.IsOutOfRange()) return Status::OK();
  UFSPACK_RETURN_IF_ERROR(s);
  *size = t.object_size;
  *head = std::move(t.body);
  return Status::OK();
}

// Whether the destination already holds `pack`'s data.ufs and index.ufs:
// each object of the local file's size whose header carries the pack's
// id (one ranged GET of its header each).  An object is written whole or
// not at all, so these cheap checks are enough to skip it.
Status AlreadyThere(const LocalPack& pack, const PackObjects& dst,
                    const RemoteOptions& options, bool* data_there,
                    bool* index_there) {
  bool exists = false;
  uint64_t size = 0;
  std::string head;
  *data_there = *index_there = false;
  UFSPACK_RETURN_IF_ERROR(ProbeObject(dst.data, DataHeader::kEncodedLength,
                                      options, &exists, &size, &head));
  if (exists && size == pack.info().data_size) {
    DataHeader h;
    std::string_view in = head;
    *data_there = h.DecodeFrom(&in).ok() && h.pack_id == pack.info().pack_id;
  }
  if (!*data_there) return Status::OK();
  UFSPACK_RETURN_IF_ERROR(ProbeObject(dst.index, IndexHeader::kEncodedLength,
                                      options, &exists, &size, &head));
  if (exists && size == pack.index_size) {
    IndexHeader h;
    std::string_view in = head;
    *index_there = h.DecodeFrom(&in).ok() && h.pack_id == pack.info().pack_id;
  }
  return Status::OK();
}

// Deletes the object at `location` (retried as any request); a missing
// one is no error.
Status DeleteObject(const std::shared_ptr<const ObjectLocation>& location,
                    const RemoteOptions& options) {
  Transfer t;
  Prepare(location, "DELETE", {}, &t);
  Transfer* ts[] = {&t};
  Status s = RunTransfers(ts, 1, options);
  return s.IsNotFound() ? Status::OK() : s;
}

// Uploads a single pack: data.ufs first, index.ufs last.
Status UploadSinglePack(const std::string& local_pack_dir,
                        const PackObjects& dst, const UploadOptions& options) {
  LocalPack pack;
  UFSPACK_RETURN_IF_ERROR(OpenLocalPack(local_pack_dir, &pack));
  Meter meter(options, pack.info().data_size + pack.index_size);
  meter.Report(0);
  UFSPACK_RETURN_IF_ERROR(UploadObject(*pack.data, dst.data, options, &meter));
  // data.ufs is replaced: from here on, stopping would leave the new data
  // with the old index, so the index goes up whatever `cancel` says.
  UploadOptions last = options;
  last.cancel = nullptr;
  Status s = UploadObject(*pack.index, dst.index, last, &meter);
  if (!s.ok()) {
    return s.WithContext(
        dst.data_url + " was replaced but " + dst.index_url +
        " was not: readers get \"not one pack\" until the upload is "
        "repeated");
  }
  return Status::OK();
}

// The key (relative to the pack URL) of part k of a merged pack: led by
// 16 hex digits of the part's pack id, so that parts spread over S3's
// prefix partitions and a rebuilt part never lands on the key of a part
// an older manifest names.
std::string PartKey(const PackId& id, size_t k) {
  char number[24];
  std::snprintf(number, sizeof(number), "%05zu", k);
  return id.ToHex().substr(0, 16) + "-part-" + number;
}

// Uploads the merged pack whose manifest is `manifest_path`: every part as
// a pack under a key of its own (PartKey), then a manifest naming them,
// then deletes a single pack left at the destination from before.
class MergedPackUpload {
 public:
  MergedPackUpload(const std::string& local_pack_dir,
                   const std::string& manifest_path, const PackObjects& dst,
                   const UploadOptions& options)
      : dir_(local_pack_dir),
        manifest_path_(manifest_path),
        dst_(dst),
        options_(options),
        manifest_url_(dst.prefix + "/" + kManifestFileName),
        unchanged_(": no manifest was written, " + dst.prefix +
                   " is unchanged (the parts already up are kept; a new run "
                   "skips them)") {}

  Status Run() {
    UFSPACK_RETURN_IF_ERROR(Prepare());
    // Every part checked against its entry before anything is sent.
    for (size_t k = 0; k < manifest_.parts.size(); ++k) {
      LocalPack pack;
      UFSPACK_RETURN_IF_ERROR(OpenPart(k, &pack));
    }
    Meter meter(options_, total_ + manifest_bytes_.size());
    meter.Report(0);
    UFSPACK_RETURN_IF_ERROR(SendParts(&meter));
    // Last, the manifest: only now is the new pack visible.
    Status s = UploadObject(*manifest_file_, manifest_loc_, options_, &meter);
    if (s.IsAborted()) return s.WithContext(manifest_url_ + unchanged_);
    UFSPACK_RETURN_IF_ERROR(
        s.WithContext("uploading " + manifest_url_ + unchanged_));
    return DeleteOldSinglePack();
  }

 private:
  // The merged pack must open as a reader opens it (the manifest and every
  // part's header); then the parts' local paths and keys, and the manifest
  // to upload: the same one with the new part paths (the merged pack id
  // covers the parts' ids and the segments, not paths).
  Status Prepare() {
    {
      std::unique_ptr<Reader> merged;
      UFSPACK_RETURN_IF_ERROR(
          Reader::Open(dir_, {}, &merged)
              .WithContext("not uploading " + dir_ +
                           ": it does not open as a merged pack"));
    }
    std::unique_ptr<Region> region;
    UFSPACK_RETURN_IF_ERROR(LoadFile(manifest_path_, &region));
    UFSPACK_RETURN_IF_ERROR(
        DecodeManifest(region->bytes(), manifest_path_, &manifest_));
    const std::string dir = DirName(manifest_path_);
    const size_t count = manifest_.parts.size();
    local_.resize(count);
    keys_.resize(count);
    for (size_t k = 0; k < count; ++k) {
      UFSPACK_RETURN_IF_ERROR(
          JoinPartPath(dir, manifest_.part_paths[k], &local_[k])
              .WithContext(manifest_path_ + ": part " + std::to_string(k)));
      keys_[k] = PartKey(manifest_.parts[k].pack_id, k);
      total_ += manifest_.parts[k].data_size + manifest_.parts[k].index_size;
    }
    ManifestContents contents;
    UFSPACK_RETURN_IF_ERROR(
        ManifestContentsOf(manifest_, manifest_path_, &contents));
    for (size_t k = 0; k < count; ++k) contents.parts[k].path = keys_[k];
    PackId id;
    EncodeManifest(contents, &manifest_bytes_, &id);
    if (id != manifest_.header.pack_id) {
      return Status::Corruption(
          manifest_path_ + ": pack id " + manifest_.header.pack_id.ToHex() +
          ", but its parts and segments give " + id.ToHex());
    }
    UFSPACK_RETURN_IF_ERROR(LocateDestination(manifest_url_, &manifest_loc_));
    manifest_file_ = NewMemoryRandomAccessFile(manifest_path_, manifest_bytes_);
    return Status::OK();
  }

  // Opens part k as a pack that must match its manifest entry.
  Status OpenPart(size_t k, LocalPack* pack) const {
    const std::string what =
        manifest_path_ + ": part " + std::to_string(k) + " (" + local_[k] + ")";
    UFSPACK_RETURN_IF_ERROR(OpenLocalPack(local_[k], pack).WithContext(what));
    const PartEntry& e = manifest_.parts[k];
    const PackInfo& i = pack->info();
    if (i.pack_id != e.pack_id || i.record_count != e.record_count ||
        i.data_size != e.data_size || pack->index_size != e.index_size) {
      return Status::Corruption(
          what + " is not the part that was merged: expected pack id " +
          e.pack_id.ToHex() + ", " + std::to_string(e.record_count) +
          " records, data " + std::to_string(e.data_size) + " + index " +
          std::to_string(e.index_size) + " bytes; found " + i.pack_id.ToHex() +
          ", " + std::to_string(i.record_count) + " records, data " +
          std::to_string(i.data_size) + " + index " +
          std::to_string(pack->index_size) + " bytes");
    }
    return Status::OK();
  }

  // Every part, in order: uploaded, or skipped when the destination holds
  // it already (the same pack id and sizes).
  Status SendParts(Meter* meter) const {
    const size_t count = manifest_.parts.size();
    size_t skipped = 0;
    for (size_t k = 0; k < count; ++k) {
      if (Cancelled(options_)) {
        return Status::Aborted(
            manifest_path_ + ": upload cancelled before part " +
            std::to_string(k) + " of " + std::to_string(count) + unchanged_);
      }
      bool was_there = false;
      UFSPACK_RETURN_IF_ERROR(SendPart(k, meter, &was_there));
      skipped += was_there;
    }
    if (skipped > 0) {
      Log(options_, dst_.prefix + ": " + std::to_string(skipped) + " of " +
                        std::to_string(count) +
                        " parts were there already and were not sent again");
    }
    return Status::OK();
  }

  Status SendPart(size_t k, Meter* meter, bool* was_there) const {
    LocalPack pack;
    UFSPACK_RETURN_IF_ERROR(OpenPart(k, &pack));
    PackObjects part;
    UFSPACK_RETURN_IF_ERROR(LocatePack(dst_.prefix + "/" + keys_[k], &part));
    bool data_there = false, index_there = false;
    UFSPACK_RETURN_IF_ERROR(
        AlreadyThere(pack, part, options_.remote, &data_there, &index_there));
    const std::string which = "part " + std::to_string(k) + " of " +
                              std::to_string(manifest_.parts.size()) +
                              " (pack id " + pack.info().pack_id.ToHex() + ")";
    Status s;
    if (data_there) {
      meter->FinishFile(pack.info().data_size);
    } else {
      s = UploadObject(*pack.data, part.data, options_, meter);
    }
    if (s.ok() && index_there) {
      meter->FinishFile(pack.index_size);
      *was_there = true;
      Log(options_, part.prefix + ": " + which +
                        " is there already (same pack id and sizes); skipped");
    } else if (s.ok()) {
      if (data_there) {
        Log(options_, part.data_url + ": " + which +
                          " data is there already; uploading its index only");
      }
      s = UploadObject(*pack.index, part.index, options_, meter);
    }
    if (s.IsAborted()) return s.WithContext(which + unchanged_);
    return s.WithContext("uploading " + which + " to " + part.prefix +
                         unchanged_);
  }

  // A single pack at the destination (an older upload) would still be
  // opened first (Reader::Open tries a URL prefix as a single pack before
  // its manifest): deleted, index first, whatever `cancel` says.
  Status DeleteOldSinglePack() const {
    for (const auto& [url, loc] : {std::make_pair(dst_.index_url, dst_.index),
                                   std::make_pair(dst_.data_url, dst_.data)}) {
      bool exists = false;
      uint64_t size = 0;
      std::string head;
      Status s = ProbeObject(loc, 1, options_.remote, &exists, &size, &head);
      if (s.ok() && exists) {
        s = DeleteObject(loc, options_.remote);
        if (s.ok()) {
          Log(options_, url +
                            ": deleted (a single pack from before, which "
                            "readers would open instead of the manifest)");
        }
      }
      if (!s.ok()) {
        return s.WithContext(
            manifest_url_ + " is up, but " + url +
            " (a single pack from before) could not be deleted: readers of " +
            dst_.prefix + " still open the old single pack until it is");
      }
    }
    return Status::OK();
  }

  const std::string dir_;
  const std::string manifest_path_;
  const PackObjects& dst_;
  const UploadOptions& options_;
  const std::string manifest_url_;
  const std::string unchanged_;  // what a failure before the manifest leaves
  Manifest manifest_;
  std::vector<std::string> local_, keys_;  // per part: its path, its key
  uint64_t total_ = 0;                     // bytes of every part's files
  std::string manifest_bytes_;             // the manifest uploaded
  std::shared_ptr<const ObjectLocation> manifest_loc_;
  std::unique_ptr<RandomAccessFile> manifest_file_;
};

Status UploadMergedPack(const std::string& local_pack_dir,
                        const std::string& manifest_path,
                        const PackObjects& dst, const UploadOptions& options) {
  return MergedPackUpload(local_pack_dir, manifest_path, dst, options).Run();
}

}  // namespace
}  // namespace remote

Status UploadFile(const std::string& local_path, const std::string& s3_url,
                  const UploadOptions& options) {
  using namespace remote;
  std::shared_ptr<const ObjectLocation> location;
  UFSPACK_RETURN_IF_ERROR(LocateDestination(s3_url, &location));
  UFSPACK_RETURN_IF_ERROR(CheckOptions(options));
  if (IsUrl(local_path)) {
    return Status::InvalidArgument(Redact(local_path) +
                                   ": expected a local file to upload");
  }
  std::unique_ptr<RandomAccessFile> file;
  UFSPACK_RETURN_IF_ERROR(NewPosixRandomAccessFile(local_path, &file));
  uint64_t size = 0;
  UFSPACK_RETURN_IF_ERROR(file->Size(&size));
  Meter meter(options, size);
  meter.Report(0);
  return UploadObject(*file, location, options, &meter);
}

Status UploadPack(const std::string& local_pack_dir, const std::string& s3_url,
                  const UploadOptions& options) {
  using namespace remote;
  if (StartsWith(s3_url, "http://") || StartsWith(s3_url, "https://")) {
    return Status::InvalidArgument(Redact(s3_url) +
                                   ": read-only: upload to s3:// only");
  }
  if (!StartsWith(s3_url, "s3://")) {
    return Status::InvalidArgument(
        s3_url + ": not an s3:// URL (expected s3://BUCKET/PREFIX)");
  }
  // The destination: a pack URL, or its index.ufs or manifest.ufs.
  std::string url = s3_url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  const std::string manifest_suffix = std::string("/") + kManifestFileName;
  if (url.size() > manifest_suffix.size() &&
      url.compare(url.size() - manifest_suffix.size(), manifest_suffix.size(),
                  manifest_suffix) == 0) {
    url.resize(url.size() - manifest_suffix.size());
  }
  PackObjects dst;
  UFSPACK_RETURN_IF_ERROR(LocatePack(url, &dst));
  UFSPACK_RETURN_IF_ERROR(CheckOptions(options));
  if (IsUrl(local_pack_dir)) {
    return Status::InvalidArgument(Redact(local_pack_dir) +
                                   ": expected a local pack to upload");
  }
  // A directory holding manifest.ufs is a merged pack, whatever else it
  // holds (docs/format.md); the manifest itself names it too.
  std::string manifest = local_pack_dir;
  while (manifest.size() > 1 && manifest.back() == '/') manifest.pop_back();
  struct stat st;
  if (::stat(manifest.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    manifest += manifest_suffix;
  }
  const size_t name_size = manifest_suffix.size() - 1;
  if ((manifest == kManifestFileName ||
       (manifest.size() > name_size &&
        manifest.compare(manifest.size() - manifest_suffix.size(),
                         manifest_suffix.size(), manifest_suffix) == 0)) &&
      ::stat(manifest.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    return UploadMergedPack(DirName(manifest), manifest, dst, options);
  }
  return UploadSinglePack(local_pack_dir, dst, options);
}

}  // namespace ufspack
