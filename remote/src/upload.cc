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

// The text of the first <tag>...</tag> in `xml`, with the five predefined
// entities decoded; false when there is none.
bool XmlText(const std::string& xml, const std::string& tag,
             std::string* text) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  const size_t b = xml.find(open);
  if (b == std::string::npos) return false;
  const size_t e = xml.find(close, b + open.size());
  if (e == std::string::npos) return false;
  const std::string raw = xml.substr(b + open.size(), e - b - open.size());
  static const std::pair<const char*, char> kEntities[] = {{"&amp;", '&'},
                                                           {"&lt;", '<'},
                                                           {"&gt;", '>'},
                                                           {"&quot;", '"'},
                                                           {"&apos;", '\''}};
  text->clear();
  for (size_t i = 0; i < raw.size();) {
    bool decoded = false;
    if (raw[i] == '&') {
      for (const auto& ent : kEntities) {
        if (raw.compare(i, std::char_traits<char>::length(ent.first),
                        ent.first) == 0) {
          text->push_back(ent.second);
          i += std::char_traits<char>::length(ent.first);
          decoded = true;
          break;
        }
      }
    }
    if (!decoded) text->push_back(raw[i++]);
  }
  return true;
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
  // The destination's two objects.
  std::string index_url, data_url;
  if (StartsWith(s3_url, "http://") || StartsWith(s3_url, "https://")) {
    return Status::InvalidArgument(Redact(s3_url) +
                                   ": read-only: upload to s3:// only");
  }
  if (!StartsWith(s3_url, "s3://")) {
    return Status::InvalidArgument(
        s3_url + ": not an s3:// URL (expected s3://BUCKET/PREFIX)");
  }
  UFSPACK_RETURN_IF_ERROR(ResolvePackPath(s3_url, &index_url, &data_url));
  std::shared_ptr<const ObjectLocation> index_loc, data_loc;
  UFSPACK_RETURN_IF_ERROR(LocateDestination(index_url, &index_loc));
  UFSPACK_RETURN_IF_ERROR(LocateDestination(data_url, &data_loc));
  UFSPACK_RETURN_IF_ERROR(CheckOptions(options));
  if (IsUrl(local_pack_dir)) {
    return Status::InvalidArgument(Redact(local_pack_dir) +
                                   ": expected a local pack to upload");
  }

  // The local pack, opened the way a reader opens it, from the very file
  // descriptor (data) and mapping (index) that are uploaded: a build
  // replacing the pack meanwhile cannot make the two disagree.
  std::string index_path, data_path;
  struct stat mst;
  if (::stat((local_pack_dir + "/manifest.ufs").c_str(), &mst) == 0) {
    return Status::NotSupported(
        local_pack_dir +
        ": a merged pack; upload its parts and manifest.ufs with the same "
        "relative layout instead (each part as a pack, the manifest last)");
  }
  UFSPACK_RETURN_IF_ERROR(
      ResolvePackPath(local_pack_dir, &index_path, &data_path));
  std::unique_ptr<RandomAccessFile> data;
  UFSPACK_RETURN_IF_ERROR(NewPosixRandomAccessFile(data_path, &data));
  std::unique_ptr<Region> index;
  UFSPACK_RETURN_IF_ERROR(MapFile(index_path, &index));
  const std::string_view index_bytes = index->bytes();
  std::unique_ptr<Reader> reader;
  UFSPACK_RETURN_IF_ERROR(
      internal::OpenReader(std::move(index),
                           std::make_unique<BorrowedFile>(data.get()), {},
                           &reader)
          .WithContext("not uploading " + local_pack_dir +
                       ": it does not open as a pack"));
  const std::unique_ptr<RandomAccessFile> index_file =
      NewViewRandomAccessFile(index_path, index_bytes);

  Meter meter(options, reader->info().data_size + index_bytes.size());
  meter.Report(0);
  UFSPACK_RETURN_IF_ERROR(UploadObject(*data, data_loc, options, &meter));
  // data.ufs is replaced: from here on, stopping would leave the new data
  // with the old index, so the index goes up whatever `cancel` says.
  UploadOptions last = options;
  last.cancel = nullptr;
  Status s = UploadObject(*index_file, index_loc, last, &meter);
  if (!s.ok()) {
    return s.WithContext(
        data_url + " was replaced but " + index_url +
        " was not: readers get \"not one pack\" until the upload is "
        "repeated");
  }
  return Status::OK();
}

}  // namespace ufspack
