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
