// Copyright 2026 The ufspack Authors.
//
// UploadFile / UploadPack and `ufspack build -o s3://...` against a real S3
// server: SeaweedFS on loopback, one for the whole binary (test::S3Server,
// tests/remote/s3server.py in the venv of scripts/s3-test-env.sh).  Skipped,
// saying why, only when that venv cannot be installed (no network).
#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "aws_config.h"
#include "gtest/gtest.h"
#include "http.h"
#include "location.h"
#include "servers.h"
#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/file.h"
#include "ufspack/manifest.h"
#include "ufspack/merge.h"
#include "ufspack/reader.h"
#include "ufspack/remote.h"

namespace ufspack {
namespace {

using test::Contains;
using test::ReadFile;
using test::TempDir;
using test::WriteFile;

// Under ASan the CLI refuses a preloaded shim ahead of its runtime unless
// told not to check the order (as cli_cache_test does).
std::string AsanOptionsForShim() {
  const char* asan = std::getenv("ASAN_OPTIONS");
  return std::string("ASAN_OPTIONS=") + (asan ? std::string(asan) + ":" : "") +
         "verify_asan_link_order=0";
}

// The keys of the running server (set from s3server.py's), or stand-ins
// for the tests without one.
std::string g_access_key = "UFSPACKUPLOADTESTKEY";
std::string g_secret_key = "upload/Test+Secret/0123456789abcdefghijk";
constexpr char kBucket[] = "ufspack-test";  // s3server.py's default bucket
std::string Env(const char* name) {
  const char* v = ::getenv(name);
  return v != nullptr ? v : "";
}

// One request to the server, signed with the test's keys; what came back.
remote::Transfer Request(const std::string& method, const std::string& url,
                         const std::vector<remote::Header>& query,
                         const std::string& body = "",
                         bool bucket_itself = false) {
  auto settings = std::make_shared<remote::AwsSettings>();
  remote::Transfer t;
  Status s = remote::LoadAwsSettings(settings.get());
  if (!s.ok()) {
    t.status = s;
    return t;
  }
  auto loc = std::make_shared<remote::ObjectLocation>();
  s = remote::LocateS3(url, settings, loc.get());
  if (!s.ok()) {
    t.status = s;
    return t;
  }
  if (bucket_itself) {  // "/bucket", not "/bucket/"
    loc->path = "/" + loc->bucket;
    loc->url = settings->endpoint_url + loc->path;
  }
  remote::Prepare(loc, method, query, &t);
  if (method == "PUT" || method == "POST") {  // else curl would POST
    t.upload = body.data();
    t.upload_size = body.size();
  }
  RemoteOptions options;
  options.max_attempts = 1;
  options.connect_timeout_ms = 2000;
  remote::Transfer* ts[] = {&t};
  (void)remote::RunTransfers(ts, 1, options);
  return t;
}

// Multipart uploads in progress in the bucket (ListMultipartUploads).
int PendingUploads() {
  remote::Transfer t =
      Request("GET", std::string("s3://") + kBucket, {{"uploads", ""}});
  EXPECT_TRUE(t.status.ok()) << t.status.ToString() << "\n" << t.body;
  int n = 0;
  for (size_t at = t.body.find("<Upload>"); at != std::string::npos;
       at = t.body.find("<Upload>", at + 1)) {
    ++n;
  }
  return n;
}

// The AWS settings pointing at the test server, nothing from this host.
void SetAwsEnvironment() {
  ::setenv("AWS_ACCESS_KEY_ID", g_access_key.c_str(), 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", g_secret_key.c_str(), 1);
  ::setenv("AWS_REGION", "us-east-1", 1);
  ::setenv("AWS_CONFIG_FILE", "/nonexistent/ufspack-upload-test", 1);
  ::setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/ufspack-upload-test",
           1);
  for (const char* v :
       {"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN",
        "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AWS_CA_BUNDLE",
        "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"}) {
    ::unsetenv(v);
  }
}

// A flat pack of `files` random files of `file_bytes` each (seeded), built
// into `out`; returns the files by name.
std::map<std::string, std::string> MakePack(const std::string& src,
                                            const std::string& out, int files,
                                            size_t file_bytes, uint64_t seed) {
  std::map<std::string, std::string> contents;
  for (int i = 0; i < files; ++i) {
    const std::string name = "f" + std::to_string(1000 + i) + ".bin";
    contents[name] =
        test::RandomBytes(file_bytes + static_cast<size_t>(i),
                          seed * 100003 + static_cast<uint64_t>(i));
    WriteFile(src + "/" + name, contents[name]);
  }
  BuildOptions options;
  options.scan.flat = true;
  options.scan.all_files = true;
  BuildSummary summary;
  Status s = BuildPack(src, out, options, &summary);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return contents;
}

// Opens `url` and checks every record against `expected`, read in one
// ReadBatch.
void ExpectPack(const std::string& url,
                const std::map<std::string, std::string>& expected) {
  std::unique_ptr<Reader> reader;
  Status s = Reader::Open(url, {}, &reader);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(reader->size(), expected.size());
  std::vector<uint64_t> all(reader->size());
  for (uint64_t i = 0; i < all.size(); ++i) all[i] = i;
  Batch batch;
  s = reader->ReadBatch(all.data(), all.size(), &batch);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (uint64_t i = 0; i < all.size(); ++i) {
    Record r;
    ASSERT_TRUE(reader->GetRecord(i, &r).ok());
    const auto it = expected.find(std::string(r.name));
    ASSERT_NE(it, expected.end()) << r.name;
    EXPECT_TRUE(batch.get(i) == it->second) << "record " << r.name;
  }
}

// A tree of `files` random files in 3 classes ("c0/x0.bin", ...) at `src`,
// built in `parts` parts (out/parts/part-k) and merged into `out`; returns
// the files by name.
std::map<std::string, std::string> MakeMergedPack(const std::string& src,
                                                  const std::string& out,
                                                  int files, int parts,
                                                  uint64_t seed) {
  std::map<std::string, std::string> contents;
  for (int i = 0; i < files; ++i) {
    const std::string name =
        "c" + std::to_string(i % 3) + "/x" + std::to_string(i) + ".bin";
    contents[name] =
        test::RandomBytes(1000 + static_cast<size_t>(i) * 37,
                          seed * 100003 + static_cast<uint64_t>(i));
    WriteFile(src + "/" + name, contents[name]);
  }
  std::vector<std::string> names;
  for (int k = 0; k < parts; ++k) {
    names.push_back(out + "/parts/part-" + std::to_string(k));
    BuildOptions options;
    options.scan.all_files = true;
    options.part = static_cast<uint32_t>(k);
    options.parts = static_cast<uint32_t>(parts);
    BuildSummary summary;
    Status s = BuildPack(src, names.back(), options, &summary);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  MergeSummary merged;
  Status s = MergePacks(names, out, &merged);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return contents;
}

// The manifest at `url` (its prefix), decoded; its bytes in *bytes.
Manifest RemoteManifest(const std::string& url, std::string* bytes) {
  Manifest m;
  remote::Transfer t = Request("GET", url + "/" + kManifestFileName, {});
  EXPECT_TRUE(t.status.ok()) << t.status.ToString();
  *bytes = t.body;
  Status s = DecodeManifest(*bytes, url, &m);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return m;
}

// Every record of `a` and `b` alike: names, labels, classes, bytes.
void ExpectSameRecords(const std::string& a_path, const std::string& b_path) {
  std::unique_ptr<Reader> a, b;
  Status s = Reader::Open(a_path, {}, &a);
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = Reader::Open(b_path, {}, &b);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(a->size(), b->size());
  EXPECT_EQ(a->info().pack_id, b->info().pack_id);
  EXPECT_EQ(a->info().part_count, b->info().part_count);
  ASSERT_EQ(a->info().class_count, b->info().class_count);
  for (uint64_t c = 0; c < a->info().class_count; ++c) {
    ClassInfo ca, cb;
    ASSERT_TRUE(a->GetClass(c, &ca).ok());
    ASSERT_TRUE(b->GetClass(c, &cb).ok());
    EXPECT_EQ(ca.name, cb.name);
    EXPECT_EQ(ca.first_record, cb.first_record);
    EXPECT_EQ(ca.record_count, cb.record_count);
  }
  std::vector<uint64_t> all(a->size());
  for (uint64_t i = 0; i < all.size(); ++i) all[i] = i;
  Batch ba, bb;
  s = a->ReadBatch(all.data(), all.size(), &ba);
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = b->ReadBatch(all.data(), all.size(), &bb);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (uint64_t i = 0; i < all.size(); ++i) {
    Record ra, rb;
    ASSERT_TRUE(a->GetRecord(i, &ra).ok());
    ASSERT_TRUE(b->GetRecord(i, &rb).ok());
    EXPECT_EQ(ra.name, rb.name);
    EXPECT_EQ(ra.label, rb.label);
    EXPECT_EQ(ra.part, rb.part);
    EXPECT_TRUE(ba.get(i) == bb.get(i)) << "record " << ra.name;
  }
}

// Directories named ufspack-build-* (the CLI's staging) in `dir`.
int StagingDirs(const std::string& dir) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (std::string(e->d_name).rfind("ufspack-build-", 0) == 0) ++n;
    }
    ::closedir(d);
  }
  return n;
}

class UploadTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    server_ = new test::S3Server("seaweedfs", *dir_ / "s3", false);
    skip_ = server_->skip_reason();
    if (server_->ok()) {
      g_access_key = server_->access_key();
      g_secret_key = server_->secret_key();
      SetAwsEnvironment();
      ::setenv("AWS_ENDPOINT_URL", server_->endpoint().c_str(), 1);
    } else if (skip_.empty()) {
      skip_ = "SeaweedFS did not start";
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
    server_ = nullptr;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_FALSE(HasFailure());
  }
  static std::string Url(const std::string& key) {
    return std::string("s3://") + kBucket + "/" + key;
  }

  static TempDir* dir_;
  static test::S3Server* server_;
  static std::string skip_;
  TempDir tmp_;
};
TempDir* UploadTest::dir_ = nullptr;
test::S3Server* UploadTest::server_ = nullptr;
std::string UploadTest::skip_;

TEST_F(UploadTest, SmallPackIsOnePutPerFileAndReadsBackExact) {
  const auto files = MakePack(tmp_ / "src", tmp_ / "pack", 40, 3000, 1);
  const RemoteStats before = GetRemoteStats();
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  UploadOptions options;
  options.progress = [&](uint64_t done, uint64_t total) {
    calls.emplace_back(done, total);
  };
  const std::string url = Url("small/train.ufspack");
  Status s = UploadPack(tmp_ / "pack", url, options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // Two PUTs: data.ufs, then index.ufs; no retry.
  const RemoteStats after = GetRemoteStats();
  EXPECT_EQ(after.requests - before.requests, 2u);
  EXPECT_EQ(after.retries, before.retries);
  const uint64_t total = test::FileSize(tmp_ / "pack/data.ufs") +
                         test::FileSize(tmp_ / "pack/index.ufs");
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back(), std::make_pair(total, total));
  for (size_t i = 1; i < calls.size(); ++i) {
    EXPECT_LE(calls[i - 1].first, calls[i].first);
  }
  ExpectPack(url, files);
  // The objects are the local files, byte for byte.
  std::unique_ptr<RandomAccessFile> f;
  ASSERT_TRUE(OpenRandomAccessFile(url + "/index.ufs", &f).ok());
  const std::string local_index = ReadFile(tmp_ / "pack/index.ufs");
  std::string remote_index(local_index.size(), '\0');
  size_t got = 0;
  ASSERT_TRUE(f->Read(0, remote_index.size(), remote_index.data(), &got).ok());
  EXPECT_EQ(got, local_index.size());
  EXPECT_TRUE(remote_index == local_index);
}

TEST_F(UploadTest, LargeDataIsMultipartAndReadsBackExact) {
  // ~13 MiB of data in parts of 5 MiB (S3's smallest): 3 parts.
  const auto files = MakePack(tmp_ / "src", tmp_ / "pack", 26, 500 << 10, 2);
  const uint64_t data_size = test::FileSize(tmp_ / "pack/data.ufs");
  ASSERT_GT(data_size, 10u << 20);
  const RemoteStats before = GetRemoteStats();
  UploadOptions options;
  options.part_bytes = 5 << 20;
  options.parts_in_flight = 2;
  uint64_t last_done = 0, last_total = 0;
  options.progress = [&](uint64_t done, uint64_t total) {
    EXPECT_GE(done + (5u << 20) * 2, last_done);  // a retried part goes back
    last_done = done;
    last_total = total;
  };
  const std::string url = Url("large/train.ufspack");
  Status s = UploadPack(tmp_ / "pack", url, options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(last_done, last_total);
  // Create + 3 parts + Complete for data.ufs, one PUT for index.ufs.
  const RemoteStats after = GetRemoteStats();
  EXPECT_EQ(after.requests - before.requests - (after.retries - before.retries),
            6u);
  ExpectPack(url, files);
  EXPECT_EQ(PendingUploads(), 0);
}

TEST_F(UploadTest, UploadFileRoundTripsEmptyAndMultipartFiles) {
  WriteFile(tmp_ / "empty", "");
  ASSERT_TRUE(UploadFile(tmp_ / "empty", Url("files/empty"), {}).ok());
  const std::string big = test::RandomBytes((11 << 20) + 17, 3);
  WriteFile(tmp_ / "big", big);
  UploadOptions options;
  options.part_bytes = 5 << 20;
  Status s = UploadFile(tmp_ / "big", Url("files/big"), options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  remote::Transfer t = Request("GET", Url("files/big"), {});
  ASSERT_TRUE(t.status.ok()) << t.status.ToString();
  EXPECT_EQ(t.body.size(), big.size());
  EXPECT_TRUE(t.body == big);
  t = Request("GET", Url("files/empty"), {});
  ASSERT_TRUE(t.status.ok()) << t.status.ToString();
  EXPECT_EQ(t.body, "");
}

TEST_F(UploadTest, CancelledMultipartLeavesNoObjectAndNoPendingUpload) {
  const std::string big = test::RandomBytes(24 << 20, 4);
  WriteFile(tmp_ / "big", big);
  std::atomic<bool> cancel{false};
  UploadOptions options;
  options.part_bytes = 5 << 20;
  options.parts_in_flight = 1;
  options.cancel = &cancel;
  uint64_t cancelled_at = 0;
  options.progress = [&](uint64_t done, uint64_t) {
    if (done >= (5u << 20) && !cancel.load()) {  // after the first part
      cancelled_at = done;
      cancel.store(true);
    }
  };
  Status s = UploadFile(tmp_ / "big", Url("cancel/big"), options);
  EXPECT_TRUE(s.IsAborted()) << s.ToString();
  EXPECT_TRUE(Contains(s, "multipart upload aborted")) << s.ToString();
  EXPECT_GT(cancelled_at, 0u);
  EXPECT_LT(cancelled_at, big.size());
  remote::Transfer t = Request("GET", Url("cancel/big"), {});
  EXPECT_TRUE(t.status.IsNotFound()) << t.status.ToString();
  EXPECT_EQ(PendingUploads(), 0);
}

TEST_F(UploadTest, CancelledPackUploadLeavesThePreviousPack) {
  const auto v1 = MakePack(tmp_ / "src1", tmp_ / "v1", 10, 1000, 5);
  const std::string url = Url("replace/train.ufspack");
  ASSERT_TRUE(UploadPack(tmp_ / "v1", url, {}).ok());
  MakePack(tmp_ / "src2", tmp_ / "v2", 24, 500 << 10, 6);
  std::atomic<bool> cancel{false};
  UploadOptions options;
  options.part_bytes = 5 << 20;
  options.parts_in_flight = 1;
  options.cancel = &cancel;
  options.progress = [&](uint64_t done, uint64_t) {
    if (done > 0) cancel.store(true);
  };
  Status s = UploadPack(tmp_ / "v2", url, options);
  EXPECT_TRUE(s.IsAborted()) << s.ToString();
  ExpectPack(url, v1);
  EXPECT_EQ(PendingUploads(), 0);
}

TEST_F(UploadTest, CancelAfterDataIsInPlaceStillUploadsTheIndex) {
  MakePack(tmp_ / "src1", tmp_ / "v1", 5, 1000, 11);
  const auto v2 = MakePack(tmp_ / "src2", tmp_ / "v2", 6, 1000, 12);
  const std::string url = Url("late-cancel/train.ufspack");
  ASSERT_TRUE(UploadPack(tmp_ / "v1", url, {}).ok());
  const uint64_t data_size = test::FileSize(tmp_ / "v2/data.ufs");
  std::atomic<bool> cancel{false};
  UploadOptions options;
  options.cancel = &cancel;
  options.progress = [&](uint64_t done, uint64_t) {
    if (done >= data_size) cancel.store(true);  // data.ufs is replaced
  };
  Status s = UploadPack(tmp_ / "v2", url, options);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(cancel.load());
  ExpectPack(url, v2);  // whole: the index followed its data
}

TEST_F(UploadTest, ReplacingInPlaceIsAnErrorNeverMixedBytes) {
  const auto v1 = MakePack(tmp_ / "src1", tmp_ / "v1", 10, 1000, 7);
  const auto v2 = MakePack(tmp_ / "src2", tmp_ / "v2", 12, 1000, 8);
  const std::string url = Url("inplace/train.ufspack");
  ASSERT_TRUE(UploadPack(tmp_ / "v1", url, {}).ok());
  std::unique_ptr<Reader> old_reader;
  ASSERT_TRUE(Reader::Open(url, {}, &old_reader).ok());
  // Between the two uploads: the new data.ufs with the old index.ufs.
  ASSERT_TRUE(UploadFile(tmp_ / "v2/data.ufs", url + "/data.ufs", {}).ok());
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(url, {}, &r);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s, "not one pack")) << s.ToString();
  // A reader opened before: pinned to the old data's ETag.  (The last
  // record: the first ones came with the head of data.ufs at open.)
  uint64_t last = old_reader->size() - 1;
  Batch batch;
  s = old_reader->ReadBatch(&last, 1, &batch);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s, "changed since it was opened")) << s.ToString();
  // The whole new pack.
  ASSERT_TRUE(UploadPack(tmp_ / "v2", url, {}).ok());
  ExpectPack(url, v2);
}

TEST_F(UploadTest, LocalPackMustOpen) {
  test::MakeDirs(tmp_ / "notapack");
  WriteFile(tmp_ / "notapack/data.ufs", "not a pack");
  WriteFile(tmp_ / "notapack/index.ufs", "not an index");
  const RemoteStats before = GetRemoteStats();
  Status s = UploadPack(tmp_ / "notapack", Url("bad/train.ufspack"), {});
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s, "does not open as a pack")) << s.ToString();
  EXPECT_EQ(GetRemoteStats().requests, before.requests);
}

TEST(UploadRefusedTest, HttpDestinationsAreReadOnly) {
  TempDir tmp;
  WriteFile(tmp / "f", "x");
  for (const std::string url :
       {"https://example.com/p/train.ufspack", "http://127.0.0.1:9/x"}) {
    Status s = UploadFile(tmp / "f", url, {});
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_TRUE(Contains(s, "read-only: upload to s3:// only")) << s.ToString();
    s = UploadPack(tmp.path(), url, {});
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_TRUE(Contains(s, "read-only: upload to s3:// only")) << s.ToString();
  }
  UploadOptions small;
  small.part_bytes = 1 << 20;
  EXPECT_TRUE(UploadFile(tmp / "f", "s3://b/k", small).IsInvalidArgument());
}

// A stand-in for S3 that accepts a multipart upload's parts and then
// answers CompleteMultipartUpload with 200 and an <Error> body, as S3 may;
// it logs the requests it gets.
constexpr char kCompleteFailsServer[] = R"PY(
import http.server, os, sys
port_file, log_file = sys.argv[1], sys.argv[2]
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def reply(self, code, body=b"", headers=()):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with open(log_file, "a") as f:
            f.write(f"{self.command} {self.path}\n")
        self.send_response(code)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        if self.path.endswith("?uploads="):
            self.reply(200, b"<InitiateMultipartUploadResult><UploadId>fake-1"
                            b"</UploadId></InitiateMultipartUploadResult>")
        else:
            self.reply(200, b"<Error><Code>InternalError</Code><Message>We "
                            b"encountered an internal error.</Message></Error>")
    def do_PUT(self):
        self.reply(200, headers=[("ETag", '"0123456789abcdef"')])
    def do_DELETE(self):
        self.reply(204)
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]) + "\n")
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
)PY";

TEST(UploadFakeS3Test, CompleteAnswering200WithAnErrorAbortsTheUpload) {
  SetAwsEnvironment();
  TempDir tmp;
  WriteFile(tmp / "server.py", kCompleteFailsServer);
  test::ServerProcess server;
  std::string port = server.Start(
      {test::kPython, tmp / "server.py", tmp / "port", tmp / "requests.log"},
      tmp / "server.log", tmp / "port", 30);
  while (!port.empty() && port.back() == '\n') port.pop_back();
  ASSERT_FALSE(port.empty()) << ReadFile(tmp / "server.log");
  const std::string saved = Env("AWS_ENDPOINT_URL");
  ::setenv("AWS_ENDPOINT_URL", ("http://127.0.0.1:" + port).c_str(), 1);
  WriteFile(tmp / "big", test::RandomBytes((10 << 20) + 1, 9));
  UploadOptions options;
  options.part_bytes = 5 << 20;
  Status s = UploadFile(tmp / "big", "s3://bucket/key", options);
  if (saved.empty()) {
    ::unsetenv("AWS_ENDPOINT_URL");
  } else {
    ::setenv("AWS_ENDPOINT_URL", saved.c_str(), 1);
  }
  server.Stop();
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(Contains(s, "CompleteMultipartUpload")) << s.ToString();
  EXPECT_TRUE(Contains(s,
                       "HTTP 200 with an S3 error in the body: "
                       "InternalError"))
      << s.ToString();
  EXPECT_TRUE(Contains(s, "multipart upload aborted")) << s.ToString();
  const std::string log = ReadFile(tmp / "requests.log");
  EXPECT_TRUE(Contains(log, "POST /bucket/key?uploads=\n")) << log;
  EXPECT_TRUE(Contains(log, "partNumber=3&uploadId=fake-1")) << log;
  EXPECT_TRUE(Contains(log, "DELETE /bucket/key?uploadId=fake-1\n")) << log;
}

// --- merged packs ----------------------------------------------------------

TEST_F(UploadTest, MergedPackPartsUnderKeysOfTheirOwnManifestLast) {
  const auto files = MakeMergedPack(tmp_ / "src", tmp_ / "merged", 30, 3, 21);
  const std::string url = Url("merged/train.ufspack");
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  std::vector<std::string> log;
  UploadOptions options;
  options.progress = [&](uint64_t done, uint64_t total) {
    calls.emplace_back(done, total);
  };
  options.log = [&](const std::string& line) { log.push_back(line); };
  Status s = UploadPack(tmp_ / "merged", url, options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(log.empty()) << log[0];
  ExpectSameRecords(tmp_ / "merged", url);
  ExpectPack(url, files);
  // Part k at "<16 hex of its pack id>-part-0000k"; the manifest is the
  // local one but for those paths (same pack id).
  std::string bytes;
  const Manifest m = RemoteManifest(url, &bytes);
  ASSERT_EQ(m.parts.size(), 3u);
  uint64_t total = bytes.size();
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(std::string(m.part_paths[k]),
              m.parts[k].pack_id.ToHex().substr(0, 16) + "-part-0000" +
                  std::to_string(k));
    total += m.parts[k].data_size + m.parts[k].index_size;
  }
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back(), std::make_pair(total, total));
  for (size_t i = 1; i < calls.size(); ++i) {
    EXPECT_LE(calls[i - 1].first, calls[i].first);
  }
  // Nothing at the prefix but the manifest and the parts.
  EXPECT_TRUE(Request("GET", url + "/index.ufs", {}).status.IsNotFound());
  // The local manifest file names the same pack.
  ASSERT_TRUE(UploadPack(tmp_ / "merged/manifest.ufs",
                         Url("merged2/train.ufspack/manifest.ufs"), {})
                  .ok());
  ExpectSameRecords(tmp_ / "merged", Url("merged2/train.ufspack"));
}

TEST_F(UploadTest, MergedPackReplacesASinglePackAtTheSamePrefix) {
  const auto v1 = MakePack(tmp_ / "src1", tmp_ / "single", 10, 1000, 22);
  const std::string url = Url("single-then-merged/train.ufspack");
  ASSERT_TRUE(UploadPack(tmp_ / "single", url, {}).ok());
  std::unique_ptr<Reader> old_reader;
  ASSERT_TRUE(Reader::Open(url, {}, &old_reader).ok());
  const auto v2 = MakeMergedPack(tmp_ / "src2", tmp_ / "merged", 12, 3, 23);
  std::vector<std::string> log;
  UploadOptions options;
  options.log = [&](const std::string& line) { log.push_back(line); };
  Status s = UploadPack(tmp_ / "merged", url, options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // The old single pack is gone (index first), so readers open the
  // manifest.
  ASSERT_EQ(log.size(), 2u);
  EXPECT_TRUE(Contains(log[0], url + "/index.ufs: deleted")) << log[0];
  EXPECT_TRUE(Contains(log[1], url + "/data.ufs: deleted")) << log[1];
  EXPECT_TRUE(Request("GET", url + "/index.ufs", {}).status.IsNotFound());
  EXPECT_TRUE(Request("GET", url + "/data.ufs", {}).status.IsNotFound());
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(Reader::Open(url, {}, &r).ok());
  EXPECT_EQ(r->info().part_count, 3u);
  ExpectPack(url, v2);
  // A reader of the old pack: its data is gone, an I/O error (NotFound
  // would read as "no such record" to the caller).
  uint64_t last = old_reader->size() - 1;
  Batch batch;
  s = old_reader->ReadBatch(&last, 1, &batch);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(Contains(s.ToString(), "deleted or moved since?"))
      << s.ToString();
  // And back: a single pack over the merged one wins on open (the old
  // manifest is left, still a whole pack for whoever names it).
  ASSERT_TRUE(UploadPack(tmp_ / "single", url, {}).ok());
  ExpectPack(url, v1);
  ExpectPack(url + "/manifest.ufs", v2);
}

TEST_F(UploadTest, MergedPackReuploadSkipsPartsAlreadyThere) {
  const auto files = MakeMergedPack(tmp_ / "src", tmp_ / "merged", 15, 3, 24);
  const std::string url = Url("resume/train.ufspack");
  ASSERT_TRUE(UploadPack(tmp_ / "merged", url, {}).ok());
  std::string bytes;
  const Manifest m = RemoteManifest(url, &bytes);
  ASSERT_EQ(m.parts.size(), 3u);
  const std::string part1 = url + "/" + std::string(m.part_paths[1]);
  // As if interrupted after part 1's data: its index is not there, and
  // nor is the manifest.
  ASSERT_TRUE(Request("DELETE", part1 + "/index.ufs", {}).status.ok());
  ASSERT_TRUE(Request("DELETE", url + "/manifest.ufs", {}).status.ok());
  std::vector<std::string> log;
  uint64_t last_done = 0, last_total = 1;
  UploadOptions options;
  options.log = [&](const std::string& line) { log.push_back(line); };
  options.progress = [&](uint64_t done, uint64_t total) {
    last_done = done;
    last_total = total;
  };
  const RemoteStats before = GetRemoteStats();
  Status s = UploadPack(tmp_ / "merged", url, options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const RemoteStats after = GetRemoteStats();
  // Per part a GET of data.ufs's header, and of index.ufs's when the data
  // matched (3 + 3); one PUT (part 1's index.ufs); the manifest's PUT;
  // two GETs for a single pack at the prefix (none).
  EXPECT_EQ(after.requests - before.requests - (after.retries - before.retries),
            10u);
  EXPECT_EQ(last_done, last_total);
  ASSERT_EQ(log.size(), 4u);
  EXPECT_TRUE(Contains(log[0], "part 0 of 3")) << log[0];
  EXPECT_TRUE(Contains(log[0], "there already")) << log[0];
  EXPECT_TRUE(Contains(log[1], part1 + "/data.ufs: part 1 of 3")) << log[1];
  EXPECT_TRUE(Contains(log[1], "uploading its index only")) << log[1];
  EXPECT_TRUE(Contains(log[2], "part 2 of 3")) << log[2];
  EXPECT_TRUE(Contains(log[3], "2 of 3 parts were there already")) << log[3];
  ExpectPack(url, files);
}

TEST_F(UploadTest, MissingRemotePartIsNotFoundNamingItsUrl) {
  const auto files = MakeMergedPack(tmp_ / "src", tmp_ / "merged", 15, 3, 25);
  const std::string url = Url("missing-part/train.ufspack");
  ASSERT_TRUE(UploadPack(tmp_ / "merged", url, {}).ok());
  std::string bytes;
  const Manifest m = RemoteManifest(url, &bytes);
  const std::string part2 = url + "/" + std::string(m.part_paths[2]);
  ASSERT_TRUE(Request("DELETE", part2 + "/index.ufs", {}).status.ok());
  // The parts of a remote manifest are checked on first use: the pack
  // opens, parts 0 and 1 read, part 2 is NotFound naming its URL.
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(url, {}, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const uint64_t first2 = m.parts[0].record_count + m.parts[1].record_count;
  Record rec;
  ASSERT_TRUE(r->GetRecord(0, &rec).ok());
  ASSERT_TRUE(r->GetRecord(first2 - 1, &rec).ok());
  s = r->GetRecord(first2, &rec);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(Contains(s, "part 2 (" + part2 + ") is missing")) << s.ToString();
  EXPECT_TRUE(Contains(s, part2 + "/index.ufs")) << s.ToString();
  // The CLI says the same.
  test::CommandResult c = test::RunCli({"verify", url});
  EXPECT_NE(c.exit_code, 0);
  EXPECT_TRUE(Contains(
      c.out + c.err,
      "part 2 (" + part2 + ") is missing: GET " + part2 + "/index.ufs"))
      << c.out << c.err;
  // Once, with the count of the other problems it stands for (the index
  // check's and each record of part 2's), not once per record.
  const uint64_t part2_records = r->size() - first2;  // the last segment
  EXPECT_EQ(c.out.find("is missing"), c.out.rfind("is missing")) << c.out;
  EXPECT_TRUE(
      Contains(c.out, std::to_string(part2_records + 1) + " problems found"))
      << c.out;
  EXPECT_TRUE(Contains(c.out, "(the same for " + std::to_string(part2_records) +
                                  " more records)"))
      << c.out;
  // A part replaced by another pack: Corruption naming what differs.
  ASSERT_TRUE(UploadPack(tmp_ / "merged/parts/part-0", part2, {}).ok());
  ASSERT_TRUE(Reader::Open(url, {}, &r).ok());
  s = r->GetRecord(first2, &rec);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s, "is not the part that was merged: pack id " +
                              m.parts[0].pack_id.ToHex() +
                              ", the manifest expects " +
                              m.parts[2].pack_id.ToHex()))
      << s.ToString();
}

TEST_F(UploadTest, ReadingOnePartFetchesNothingOfTheOthers) {
  MakeMergedPack(tmp_ / "src", tmp_ / "merged", 30, 3, 26);
  const std::string url = Url("lazy/train.ufspack");
  ASSERT_TRUE(UploadPack(tmp_ / "merged", url, {}).ok());
  std::string manifest;
  const Manifest m = RemoteManifest(url, &manifest);
  // Parts 1 and 2 deleted from the server: a reader of part 0 that
  // touched them would fail.
  for (size_t k : {1, 2}) {
    for (const char* file : {"/index.ufs", "/data.ufs"}) {
      const std::string object =
          url + "/" + std::string(m.part_paths[k]) + file;
      ASSERT_TRUE(Request("DELETE", object, {}).status.ok()) << object;
    }
  }
  std::unique_ptr<Reader> local;
  ASSERT_TRUE(Reader::Open(tmp_ / "merged", {}, &local).ok());
  const uint64_t n0 = m.parts[0].record_count;
  ASSERT_GT(n0, 1u);
  ASSERT_EQ(m.segments[0].part, 0u);
  ASSERT_EQ(m.segments[0].count, n0);
  const RemoteStats before = GetRemoteStats();
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(url, {}, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // Opening: the prefix's index.ufs (404: no single pack), then the
  // manifest (one request: it is smaller than the first request's MiB);
  // no part.
  const RemoteStats opened = GetRemoteStats();
  EXPECT_EQ(opened.requests - before.requests, 2u);
  // Every record of part 0, one at a time, then as a batch.
  for (uint64_t i = 0; i < n0; ++i) {
    std::string bytes, expected;
    s = r->Read(i, &bytes);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(local->Read(i, &expected).ok());
    EXPECT_TRUE(bytes == expected) << i;
  }
  std::vector<uint64_t> all(n0);
  for (uint64_t i = 0; i < n0; ++i) all[i] = i;
  Batch batch;
  s = r->ReadBatch(all.data(), all.size(), &batch);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // Part 0's open (its index, the head of its data.ufs), then at most one
  // request per record read alone, one per batch.
  const RemoteStats read = GetRemoteStats();
  EXPECT_LE(read.requests - opened.requests, 2 + n0 + 1);
  // The first record of part 1 is where its absence shows.
  Record rec;
  s = r->GetRecord(n0, &rec);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(Contains(s, "part 1 (")) << s.ToString();
}

TEST_F(UploadTest, CancelledMergedUploadLeavesThePreviousPack) {
  const auto v1 = MakePack(tmp_ / "src1", tmp_ / "single", 8, 1000, 28);
  const std::string url = Url("merged-cancel/train.ufspack");
  ASSERT_TRUE(UploadPack(tmp_ / "single", url, {}).ok());
  MakeMergedPack(tmp_ / "src2", tmp_ / "merged", 12, 3, 29);
  std::atomic<bool> cancel{false};
  UploadOptions options;
  options.cancel = &cancel;
  options.progress = [&](uint64_t done, uint64_t) {
    if (done > 0) cancel.store(true);  // once part 0 has begun
  };
  Status s = UploadPack(tmp_ / "merged", url, options);
  EXPECT_TRUE(s.IsAborted()) << s.ToString();
  EXPECT_TRUE(Contains(s, "no manifest was written")) << s.ToString();
  EXPECT_TRUE(Request("GET", url + "/manifest.ufs", {}).status.IsNotFound());
  ExpectPack(url, v1);
}

TEST_F(UploadTest, LocalMergedPackMustOpen) {
  MakeMergedPack(tmp_ / "src", tmp_ / "merged", 12, 3, 30);
  ASSERT_EQ(::unlink((tmp_ / "merged/parts/part-1/index.ufs").c_str()), 0);
  const RemoteStats before = GetRemoteStats();
  Status s = UploadPack(tmp_ / "merged", Url("bad-merged/train.ufspack"), {});
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(Contains(s, "does not open as a merged pack")) << s.ToString();
  EXPECT_TRUE(Contains(s, "part 1")) << s.ToString();
  // A part whose data file is missing: found before anything is sent.
  MakeMergedPack(tmp_ / "src2", tmp_ / "merged2", 12, 3, 31);
  ASSERT_EQ(::unlink((tmp_ / "merged2/parts/part-2/data.ufs").c_str()), 0);
  s = UploadPack(tmp_ / "merged2", Url("bad-merged/train.ufspack"), {});
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(Contains(s, "part 2 (")) << s.ToString();
  EXPECT_EQ(GetRemoteStats().requests, before.requests);
}

// --- the CLI ---------------------------------------------------------------

TEST_F(UploadTest, CliBuildToS3ThenVerifyAndCat) {
  std::map<std::string, std::string> files;
  for (int i = 0; i < 30; ++i) {
    const std::string name =
        "c" + std::to_string(i % 3) + "/x" + std::to_string(i) + ".bin";
    files[name] = test::RandomBytes(200 << 10, 100 + static_cast<uint64_t>(i));
    WriteFile(tmp_ / "src/" + name, files[name]);
  }
  test::MakeDirs(tmp_ / "staging");
  const std::string url = Url("cli/train.ufspack");
  test::CommandResult r =
      test::RunCli({"build", tmp_ / "src", "-o", url, "--all-files", "--json",
                    "--staging", tmp_ / "staging", "--part-size", "5M"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "\"ok\":true")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\"url\":\"" + url + "\"")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\"data\":\"" + url + "/data.ufs\"")) << r.out;
  EXPECT_FALSE(Contains(r.out + r.err, g_secret_key));
  EXPECT_FALSE(Contains(r.out + r.err, "Secret"));
  // The staging directory made under --staging is gone.
  EXPECT_EQ(StagingDirs(tmp_ / "staging"), 0);
  EXPECT_EQ(::rmdir((tmp_ / "staging").c_str()), 0);
  EXPECT_EQ(PendingUploads(), 0);

  r = test::RunCli({"verify", url});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* name : {"c0/x0.bin", "c1/x13.bin", "c2/x29.bin"}) {
    r = test::RunCli({"cat", url, name});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(r.out == files[name]) << name;
  }
}

TEST_F(UploadTest, CliBuildPartsToS3ThenInfoVerifyCat) {
  // The same tree built locally in 3 parts and merged, for comparison.
  const auto files = MakeMergedPack(tmp_ / "src", tmp_ / "local", 30, 3, 27);
  test::MakeDirs(tmp_ / "staging");
  const std::string url = Url("cli-parts/train.ufspack");
  test::CommandResult r =
      test::RunCli({"build", tmp_ / "src", "-o", url, "--all-files", "--parts",
                    "3", "--json", "--staging", tmp_ / "staging"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "\"ok\":true")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\"manifest\":\"" + url + "/manifest.ufs\""))
      << r.out;
  EXPECT_TRUE(Contains(r.out, "\"parts\":3")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\"files\":30")) << r.out;
  EXPECT_EQ(StagingDirs(tmp_ / "staging"), 0);
  ExpectSameRecords(tmp_ / "local", url);
  r = test::RunCli({"info", url});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "30")) << r.out;
  r = test::RunCli({"verify", url});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* name : {"c0/x0.bin", "c1/x13.bin", "c2/x29.bin"}) {
    r = test::RunCli({"cat", url, name});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(r.out == files.at(name)) << name;
  }
  // Again: every part is there already, and says so.
  r = test::RunCli({"build", tmp_ / "src", "-o", url, "--all-files", "--parts",
                    "3", "--staging", tmp_ / "staging"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.err, "3 of 3 parts were there already")) << r.err;
  EXPECT_TRUE(Contains(r.out, "in 3 parts, merged")) << r.out;
  // --parts is for s3:// output, and not with --part.
  r = test::RunCli({"build", tmp_ / "src", "-o", tmp_ / "out", "--parts", "3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "--parts is for s3:// output")) << r.err;
  r = test::RunCli(
      {"build", tmp_ / "src", "-o", url, "--parts", "3", "--part", "0/3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "--parts builds every part")) << r.err;
}

TEST(UploadRefusedTest, CliRefusesHttpsOutput) {
  TempDir tmp;
  WriteFile(tmp / "src/a/x.jpg", "x");
  test::CommandResult r = test::RunCli(
      {"build", tmp / "src", "-o", "https://example.com/train.ufspack"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(Contains(r.err, "read-only: upload to s3:// only")) << r.err;
}

TEST_F(UploadTest, CliInterruptAbortsTheUpload) {
  // Under the LD_PRELOAD shim every read of 64 KiB or more (each part the
  // upload reads) takes 1.5 s, so the multipart upload is in progress long
  // enough to be interrupted.
  WriteFile(tmp_ / "src/big", test::RandomBytes(12 << 20, 299));
  WriteFile(tmp_ / "src/small", "small");
  const std::string url = Url("interrupt/train.ufspack");
  pid_t pid = test::SpawnCli(
      {"build", tmp_ / "src", "-o", url, "--flat", "--all-files", "--part-size",
       "5M", "--json", "--staging", tmp_.path()},
      tmp_ / "out.json", tmp_ / "err.txt",
      {std::string("LD_PRELOAD=") + UFSPACK_SLOW_PREAD_PATH,
       "UFSPACK_TEST_PREAD_DELAY_MS=1500", AsanOptionsForShim()});
  ASSERT_GT(pid, 0);
  // Wait (bounded) for the multipart upload to exist, then Ctrl-C.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool seen = false;
  while (!seen && std::chrono::steady_clock::now() < deadline) {
    seen = PendingUploads() > 0;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGINT);
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(seen) << ReadFile(tmp_ / "err.txt");
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 130) << ReadFile(tmp_ / "err.txt");
  EXPECT_TRUE(Contains(ReadFile(tmp_ / "out.json"), "\"interrupted\":true"));
  EXPECT_EQ(PendingUploads(), 0);
  EXPECT_TRUE(Request("GET", url + "/data.ufs", {}).status.IsNotFound());
  EXPECT_TRUE(Request("GET", url + "/index.ufs", {}).status.IsNotFound());
  // The staging directory is removed.
  EXPECT_EQ(StagingDirs(tmp_.path()), 0);
}

}  // namespace
}  // namespace ufspack
