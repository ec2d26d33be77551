// Copyright 2026 The ufspack Authors.
//
// Packs on a real S3 server on loopback (tests/remote/s3server.py):
// SeaweedFS for reads, settings and signatures (it checks SigV4), moto
// behind the fault-injecting proxy for retries (503 SlowDown, dropped
// connections, truncated bodies, 403) with every request counted from the
// proxy's log.  The packs are uploaded with boto3, as any other tool would.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "servers.h"
#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/reader.h"
#include "ufspack/remote.h"

namespace ufspack {
namespace {

using test::Item;
using test::MakeItems;
using test::WritePack;

// Uploads the pack at `dir` under `prefix`, data first, as `aws s3 cp`
// of the two files would.
void Upload(const test::S3Server& s3, const std::string& dir,
            const std::string& prefix) {
  s3.Put(dir + "/data.ufs", prefix + "/data.ufs");
  s3.Put(dir + "/index.ufs", prefix + "/index.ufs");
}

size_t CountOf(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t p = haystack.find(needle); p != std::string::npos;
       p = haystack.find(needle, p + 1)) {
    ++n;
  }
  return n;
}

// ---------------------------------------------------------------------------
// SeaweedFS: a real object store that checks signatures.

class SeaweedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    server_ = new test::S3Server("seaweedfs", dir_->path() + "/s3", false);
    if (!server_->ok()) return;
    items_ = new std::vector<Item>(MakeItems(300, 40000, 11));
    WritePack(dir_->path() + "/pack", *items_);
    Upload(*server_, dir_->path() + "/pack", "sets/train.ufspack");
  }
  static void TearDownTestSuite() {
    delete server_;
    delete items_;
    delete dir_;
    server_ = nullptr;
    items_ = nullptr;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!server_->skip_reason().empty()) GTEST_SKIP() << server_->skip_reason();
    ASSERT_TRUE(server_->ok());
    server_->ExportEnv();
    RegisterRemoteStorage();
    url_ = "s3://" + server_->bucket() + "/sets/train.ufspack";
  }
  void TearDown() override {
    test::ClearAwsEnv();
    RegisterRemoteStorage();
  }

  static test::TempDir* dir_;
  static test::S3Server* server_;
  static std::vector<Item>* items_;
  std::string url_;
};
test::TempDir* SeaweedTest::dir_ = nullptr;
test::S3Server* SeaweedTest::server_ = nullptr;
std::vector<Item>* SeaweedTest::items_ = nullptr;

TEST_F(SeaweedTest, PackUploadedByAnotherToolReadsByteExact) {
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(url_, {}, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(r->size(), items_->size());
  EXPECT_EQ(r->info().data_path, url_ + "/data.ufs");
  std::vector<uint64_t> order(items_->size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(5));
  for (size_t b = 0; b < order.size(); b += 64) {
    const size_t n = std::min<size_t>(64, order.size() - b);
    Batch batch;
    s = r->ReadBatch(order.data() + b, n, &batch);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (size_t k = 0; k < n; ++k) {
      ASSERT_EQ(batch.get(k), (*items_)[order[b + k]].bytes) << order[b + k];
    }
  }
  std::string out;
  ASSERT_TRUE(r->Read(42, &out).ok());
  EXPECT_EQ(out, (*items_)[42].bytes);
  Status check = r->CheckIndex();
  EXPECT_TRUE(check.ok()) << check.ToString();
}

TEST_F(SeaweedTest, CredentialsAndEndpointFromSharedFilesAndProfile) {
  test::ClearAwsEnv();
  const std::string d = dir_->path() + "/aws";
  test::WriteFile(d + "/credentials",
                  "[default]\naws_access_key_id = WRONG\n"
                  "aws_secret_access_key = WRONG\n\n[ufspack-test]\n"
                  "aws_access_key_id = " +
                      server_->access_key() + "\naws_secret_access_key = " +
                      server_->secret_key() + "\n");
  test::WriteFile(d + "/config",
                  "[profile ufspack-test]\nregion = us-east-1\ns3 =\n"
                  "  addressing_style = path\n  endpoint_url = " +
                      server_->endpoint() + "\n");
  ::setenv("AWS_SHARED_CREDENTIALS_FILE", (d + "/credentials").c_str(), 1);
  ::setenv("AWS_CONFIG_FILE", (d + "/config").c_str(), 1);
  ::setenv("AWS_PROFILE", "ufspack-test", 1);
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(url_, {}, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string out;
  ASSERT_TRUE(r->Read(7, &out).ok());
  EXPECT_EQ(out, (*items_)[7].bytes);
}

TEST_F(SeaweedTest, VirtualHostedAddressing) {
  // SeaweedFS serves BUCKET.localhost (-s3.domainName=localhost); libcurl
  // resolves *.localhost to loopback.
  const std::string d = dir_->path() + "/aws-virtual";
  std::string endpoint = server_->endpoint();
  endpoint.replace(endpoint.find("127.0.0.1"), 9, "localhost");
  test::WriteFile(d + "/config",
                  "[default]\ns3 =\n  addressing_style = virtual\n");
  ::setenv("AWS_CONFIG_FILE", (d + "/config").c_str(), 1);
  ::setenv("AWS_ENDPOINT_URL", endpoint.c_str(), 1);
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(url_, {}, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string out;
  ASSERT_TRUE(r->Read(8, &out).ok());
  EXPECT_EQ(out, (*items_)[8].bytes);
}

TEST_F(SeaweedTest, WrongSecretIsAccessDeniedNotRetriedAndNotShown) {
  ::setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-x9Y8z7", 1);
  const RemoteStats before = GetRemoteStats();
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(url_, {}, &r);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "access denied")) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "SignatureDoesNotMatch")) << s.ToString();
  EXPECT_TRUE(test::Contains(s, url_ + "/index.ufs")) << s.ToString();
  EXPECT_FALSE(test::Contains(s, "not-the-secret")) << s.ToString();
  EXPECT_FALSE(test::Contains(s, server_->access_key())) << s.ToString();
  EXPECT_EQ(GetRemoteStats().requests - before.requests, 1u);
}

TEST_F(SeaweedTest, AnonymousRequestsAreDeniedByThisServer) {
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(url_, {}, &r);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "AccessDenied")) << s.ToString();
}

TEST_F(SeaweedTest, MissingPackIsNotFoundNamingTheObject) {
  std::unique_ptr<Reader> r;
  Status s =
      Reader::Open("s3://" + server_->bucket() + "/no/such.ufspack", {}, &r);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(test::Contains(
      s, "s3://" + server_->bucket() + "/no/such.ufspack/index.ufs"))
      << s.ToString();
  EXPECT_TRUE(test::Contains(s, "NoSuchKey")) << s.ToString();
  s = Reader::Open("s3://no-such-bucket-ufspack/p.ufspack", {}, &r);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "NoSuchBucket")) << s.ToString();
}

TEST_F(SeaweedTest, PackReplacedUnderARunningReaderIsAnError) {
  std::vector<Item> first = MakeItems(40, 5000, 3);
  WritePack(dir_->path() + "/first", first);
  Upload(*server_, dir_->path() + "/first", "sets/moving.ufspack");
  const std::string url = "s3://" + server_->bucket() + "/sets/moving.ufspack";
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(Reader::Open(url, {}, &r).ok());
  std::vector<Item> second = MakeItems(40, 5000, 4);
  WritePack(dir_->path() + "/second", second);
  // Half a replacement: the new data.ufs beside the old index.
  server_->Put(dir_->path() + "/second/data.ufs",
               "sets/moving.ufspack/data.ufs");
  std::string out;
  Status s = r->Read(30, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "changed since it was opened")) << s.ToString();
  std::unique_ptr<Reader> mid;
  s = Reader::Open(url, {}, &mid);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "not one pack")) << s.ToString();
  server_->Put(dir_->path() + "/second/index.ufs",
               "sets/moving.ufspack/index.ufs");
  std::unique_ptr<Reader> fresh;
  ASSERT_TRUE(Reader::Open(url, {}, &fresh).ok());
  ASSERT_TRUE(fresh->Read(30, &out).ok());
  EXPECT_EQ(out, second[30].bytes);
}

// ---------------------------------------------------------------------------
// moto behind the proxy: faults, and what went over the wire.

class FaultTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    server_ = new test::S3Server("moto", dir_->path() + "/s3", true);
    if (!server_->ok()) return;
    items_ = new std::vector<Item>(MakeItems(200, 30000, 21));
    WritePack(dir_->path() + "/pack", *items_);
    Upload(*server_, dir_->path() + "/pack", "f/p.ufspack");
  }
  static void TearDownTestSuite() {
    delete server_;
    delete items_;
    delete dir_;
    server_ = nullptr;
    items_ = nullptr;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!server_->skip_reason().empty()) GTEST_SKIP() << server_->skip_reason();
    ASSERT_TRUE(server_->ok());
    server_->ExportEnv(/*via_proxy=*/true);
    url_ = "s3://" + server_->bucket() + "/f/p.ufspack";
    ASSERT_NO_FATAL_FAILURE(OpenWithAttempts(4));
  }
  // Registers the S3 storage with `attempts` tries per request and opens
  // reader_ with it.  A test that injects k faults and expects success
  // must use more than k: the proxy hands its faults to whichever requests
  // arrive first, and a retry (full jitter: its delay may be ~0) can
  // arrive before the batch's other requests, so one request may meet
  // every fault.
  void OpenWithAttempts(int attempts) {
    RemoteOptions o;
    o.max_attempts = attempts;
    o.retry_seconds = 20;
    o.coalesce_gap = 0;
    RegisterRemoteStorage(o);
    reader_.reset();
    Status s = Reader::Open(url_, {}, &reader_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    server_->Reset();  // waits until the open's requests are logged
  }
  // The proxy's log once it holds at least `n` entries (it logs a request
  // after answering it, so the last one may land after the client has its
  // answer); bounded at 5 s.
  static std::string LogOf(size_t n) {
    std::string log = server_->Log();
    for (int k = 0; k < 250 && CountOf(log, "\"seq\"") < n; ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      log = server_->Log();
    }
    return log;
  }
  void TearDown() override {
    if (server_ != nullptr && server_->ok()) server_->Reset();
    test::ClearAwsEnv();
    RegisterRemoteStorage();
  }

  static test::TempDir* dir_;
  static test::S3Server* server_;
  static std::vector<Item>* items_;
  std::string url_;
  std::unique_ptr<Reader> reader_;
};
test::TempDir* FaultTest::dir_ = nullptr;
test::S3Server* FaultTest::server_ = nullptr;
std::vector<Item>* FaultTest::items_ = nullptr;

TEST_F(FaultTest, SlowDownIsRetriedThenServed) {
  server_->Faults(
      R"({"method": "GET", "path": "data.ufs", "count": 3, "action": "status",)"
      R"( "status": 503, "code": "SlowDown", "message": "Please reduce your request rate."})");
  const RemoteStats before = GetRemoteStats();
  std::string out;
  Status s = reader_->Read(77, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out, (*items_)[77].bytes);
  EXPECT_EQ(GetRemoteStats().retries - before.retries, 3u);
  const std::string log = LogOf(4);
  EXPECT_EQ(CountOf(log, "\"status\": 503"), 3u) << log;
  EXPECT_EQ(CountOf(log, "\"status\": 206"), 1u) << log;
}

TEST_F(FaultTest, PersistentSlowDownFailsNamingUrlRecordAndStatus) {
  server_->Faults(
      R"({"method": "GET", "path": "data.ufs", "count": -1, "action": "status",)"
      R"( "status": 503, "code": "SlowDown", "message": "Please reduce your request rate."})");
  std::string out;
  Status s = reader_->Read(5, &out);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "record 5")) << s.ToString();
  EXPECT_TRUE(test::Contains(s, url_ + "/data.ufs")) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "HTTP 503 SlowDown")) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "after 4 attempts")) << s.ToString();
  EXPECT_EQ(CountOf(LogOf(4), "\"status\": 503"), 4u);
}

TEST_F(FaultTest, ForbiddenAndNotFoundAreNotRetried) {
  server_->Faults(
      R"({"method": "GET", "path": "data.ufs", "count": 1, "action": "status",)"
      R"( "status": 403, "code": "AccessDenied", "message": "Access Denied"})");
  std::string out;
  Status s = reader_->Read(9, &out);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "access denied")) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "AccessDenied")) << s.ToString();
  EXPECT_EQ(CountOf(LogOf(1), "\"seq\""), 1u);
  server_->Reset();
  server_->Faults(
      R"({"method": "GET", "path": "data.ufs", "count": 1, "action": "status",)"
      R"( "status": 404, "code": "NoSuchKey", "message": "gone"})");
  s = reader_->Read(9, &out);
  // A read of an object opened before: IOError (NotFound would say "no
  // such record"), naming the 404.
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "HTTP 404")) << s.ToString();
  EXPECT_EQ(CountOf(LogOf(1), "\"seq\""), 1u);
}

TEST_F(FaultTest, DroppedConnectionsAndTruncatedBodiesAreRetried) {
  ASSERT_NO_FATAL_FAILURE(OpenWithAttempts(8));  // > the faults below
  server_->Faults(
      R"([{"method": "GET", "path": "data.ufs", "count": 2, "action": "drop"},)"
      R"( {"method": "GET", "path": "data.ufs", "count": 2, "action": "truncate",)"
      R"( "after_bytes": 100}])");
  std::string out;
  // Record 100's stored bytes exceed 100 (every record here is > 1 byte,
  // most far more); pick one that is.
  uint64_t i = 100;
  Record rec;
  ASSERT_TRUE(reader_->GetRecord(i, &rec).ok());
  ASSERT_GT(rec.stored_length, 200u);
  Status s = reader_->Read(i, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out, (*items_)[i].bytes);
}

TEST_F(FaultTest, BatchUnderFaultsIsExactWithOneRequestPerRecord) {
  ASSERT_NO_FATAL_FAILURE(OpenWithAttempts(8));  // > the faults below
  // Records past data.ufs's first 4 KiB (which came with the open).
  std::vector<uint64_t> idx;
  for (uint64_t i = 1; i < items_->size(); i += 9) {
    Record rec;
    ASSERT_TRUE(reader_->GetRecord(i, &rec).ok());
    if (rec.offset >= 4096) idx.push_back(i);
  }
  ASSERT_GT(idx.size(), 15u);
  std::shuffle(idx.begin(), idx.end(), std::mt19937_64(8));
  // Clean batch first: the proxy log counts requests and bytes.
  Batch batch;
  Status s = reader_->ReadBatch(idx.data(), idx.size(), &batch);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string log = LogOf(idx.size());
  EXPECT_EQ(CountOf(log, "\"seq\""), idx.size()) << log;
  uint64_t stored = 0;
  for (uint64_t i : idx) {
    Record rec;
    ASSERT_TRUE(reader_->GetRecord(i, &rec).ok());
    stored += rec.stored_length;
  }
  // Bytes the server sent for the batch = the records' stored bytes.
  uint64_t sent = 0;
  for (size_t p = log.find("\"bytes\": "); p != std::string::npos;
       p = log.find("\"bytes\": ", p + 1)) {
    sent += std::strtoull(log.c_str() + p + 9, nullptr, 10);
  }
  EXPECT_EQ(sent, stored);
  // Now with a few requests failing along the way.
  server_->Reset();
  server_->Faults(
      R"([{"method": "GET", "count": 3, "action": "status", "status": 503,)"
      R"( "code": "SlowDown"}, {"method": "GET", "count": 2, "action": "drop"},)"
      R"( {"method": "GET", "count": 2, "action": "status", "status": 500,)"
      R"( "code": "InternalError"}])");
  s = reader_->ReadBatch(idx.data(), idx.size(), &batch);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (size_t k = 0; k < idx.size(); ++k) {
    ASSERT_EQ(batch.get(k), (*items_)[idx[k]].bytes);
  }
}

// Block reads (ReaderOptions::block_bytes) over S3: a block fetch is a
// ranged GET like any other, retried on 5xx, dropped connections and
// truncated bodies; the records come out exact, with one request per block.
TEST_F(FaultTest, BlockFetchesAreRetriedAndExact) {
  ASSERT_NO_FATAL_FAILURE(OpenWithAttempts(8));  // > the faults below
  ReaderOptions o;
  o.block_bytes = 256 << 10;
  std::unique_ptr<Reader> blocks;
  Status s = Reader::Open(url_, o, &blocks);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<uint64_t> first, members;
  ASSERT_TRUE(blocks->BlockMembers(o.block_bytes, &first, &members).ok());
  server_->Reset();
  server_->Faults(
      R"([{"method": "GET", "path": "data.ufs", "count": 2, "action": "status",)"
      R"( "status": 503, "code": "SlowDown"},)"
      R"( {"method": "GET", "path": "data.ufs", "count": 1, "action": "drop"},)"
      R"( {"method": "GET", "path": "data.ufs", "count": 1, "action": "truncate",)"
      R"( "after_bytes": 1000}])");
  const RemoteStats before = GetRemoteStats();
  for (uint64_t i : members) {
    std::string out;
    s = blocks->Read(i, &out);
    ASSERT_TRUE(s.ok()) << i << ": " << s.ToString();
    ASSERT_EQ(out, (*items_)[i].bytes) << i;
  }
  const BlockReadStats st = blocks->block_stats();
  size_t nonempty = 0;
  for (size_t b = 0; b + 1 < first.size(); ++b)
    nonempty += first[b + 1] > first[b];
  EXPECT_EQ(st.block_fetches, nonempty);
  // The two 503s and the dropped connection at least (a body cut short is
  // retried too, as a short read or a transfer error).
  EXPECT_GE(GetRemoteStats().retries - before.retries, 3u);
  // Every GET that succeeded is a whole block: at most one per block, plus
  // the truncated one (logged as 206 before its body was cut).
  const std::string log = LogOf(nonempty + 4);
  EXPECT_LE(CountOf(log, "\"status\": 206"), nonempty + 1) << log;
}

TEST_F(FaultTest, AFailedBlockFetchIsNotKeptAndNamesTheUrl) {
  ReaderOptions o;
  o.block_bytes = 256 << 10;
  std::unique_ptr<Reader> blocks;
  Status s = Reader::Open(url_, o, &blocks);
  ASSERT_TRUE(s.ok()) << s.ToString();
  server_->Reset();
  server_->Faults(
      R"({"method": "GET", "path": "data.ufs", "count": 4, "action": "status",)"
      R"( "status": 503, "code": "SlowDown"})");
  std::string out;
  s = blocks->Read(150, &out);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, url_ + "/data.ufs")) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "HTTP 503 SlowDown")) << s.ToString();
  // The faults are used up: the block is fetched again, and served.
  s = blocks->Read(150, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out, (*items_)[150].bytes);
}

}  // namespace
}  // namespace ufspack
