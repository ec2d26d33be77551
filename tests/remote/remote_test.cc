// Copyright 2026 The ufspack Authors.
//
// Packs read over HTTP(S) from a real static web server
// (tests/remote/static_server.py) on loopback: exact bytes through Read and
// ReadBatch, one request per record and coalesced neighbours (counted by
// GetRemoteStats), a pack replaced under a running reader, missing objects,
// a server that goes away, TLS verification on by default, and the
// node-local cache as the local tier (epoch 2 without a request; offline).
#include "ufspack/remote.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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
#include "ufspack/cache.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace {

using test::Item;
using test::MakeItems;
using test::WritePack;

RemoteStats Delta(const RemoteStats& a, const RemoteStats& b) {
  RemoteStats d;
  d.requests = b.requests - a.requests;
  d.bytes = b.bytes - a.bytes;
  d.retries = b.retries - a.retries;
  d.coalesced = b.coalesced - a.coalesced;
  return d;
}

// Quick failure for the tests of unreachable servers.
RemoteOptions FastFail() {
  RemoteOptions o;
  o.max_attempts = 3;
  o.retry_seconds = 5;
  o.connect_timeout_ms = 2000;
  return o;
}

class HttpPackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterRemoteStorage();  // options from the environment (defaults)
    items_ = MakeItems(200, 30000, 7);
    WritePack(dir_.path() + "/www/p.ufspack", items_);
    server_ = std::make_unique<test::StaticServer>(dir_.path() + "/www");
    ASSERT_FALSE(server_->url().empty());
    url_ = server_->url() + "/p.ufspack";
  }
  void TearDown() override { RegisterRemoteStorage(); }

  std::unique_ptr<Reader> Open(const ReaderOptions& o = {}) {
    std::unique_ptr<Reader> r;
    Status s = Reader::Open(url_, o, &r);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return r;
  }

  test::TempDir dir_;
  std::vector<Item> items_;
  std::unique_ptr<test::StaticServer> server_;
  std::string url_;
};

TEST_F(HttpPackTest, EveryRecordByteExactThroughReadAndReadBatch) {
  std::unique_ptr<Reader> r = Open();
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), items_.size());
  EXPECT_TRUE(r->prefers_batches());
  EXPECT_EQ(r->info().data_path, url_ + "/data.ufs");
  std::string out;
  for (uint64_t i = 0; i < r->size(); i += 7) {
    ASSERT_TRUE(r->Read(i, &out).ok());
    EXPECT_EQ(out, items_[i].bytes) << i;
  }
  std::vector<uint64_t> order(items_.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(3));
  for (size_t b = 0; b < order.size(); b += 32) {
    const size_t n = std::min<size_t>(32, order.size() - b);
    Batch batch;
    Status s = r->ReadBatch(order.data() + b, n, &batch);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(batch.size(), n);
    for (size_t k = 0; k < n; ++k) {
      EXPECT_EQ(batch.get(k), items_[order[b + k]].bytes) << order[b + k];
    }
  }
  // ReadMany: raw records straight into the caller's buffers, one fetch;
  // a zstd record is refused.
  std::vector<Record> raw;
  for (uint64_t i = 0; i < r->size() && raw.size() < 40; ++i) {
    Record rec;
    ASSERT_TRUE(r->GetRecord(i, &rec).ok());
    if (rec.codec == Codec::kRaw) raw.push_back(rec);
  }
  std::vector<std::string> bufs(raw.size());
  std::vector<char*> dsts(raw.size());
  for (size_t k = 0; k < raw.size(); ++k) {
    bufs[k].resize(raw[k].original_length);
    dsts[k] = bufs[k].data();
  }
  Status many = r->ReadMany(raw.data(), dsts.data(), raw.size(), 2);
  ASSERT_TRUE(many.ok()) << many.ToString();
  for (size_t k = 0; k < raw.size(); ++k) {
    EXPECT_EQ(bufs[k], items_[raw[k].index].bytes) << raw[k].index;
  }
  Record zstd;  // every third record is compressible
  for (uint64_t i = 0; i < r->size(); ++i) {
    ASSERT_TRUE(r->GetRecord(i, &zstd).ok());
    if (zstd.codec == Codec::kZstd) break;
  }
  ASSERT_EQ(zstd.codec, Codec::kZstd);
  char* one = bufs[0].data();
  EXPECT_TRUE(r->ReadMany(&zstd, &one, 1).IsInvalidArgument());
  // The index as named by its own URL.
  std::unique_ptr<Reader> by_index;
  ASSERT_TRUE(Reader::Open(url_ + "/index.ufs", {}, &by_index).ok());
  EXPECT_EQ(by_index->info().pack_id, r->info().pack_id);
}

TEST_F(HttpPackTest, OneRequestPerRecordAndNeighboursCoalesced) {
  RemoteOptions o;
  o.coalesce_gap = 0;  // only touching ranges merge
  RegisterRemoteStorage(o);
  std::unique_ptr<Reader> r = Open();
  ASSERT_TRUE(r);
  // Far apart: one request each.
  std::vector<uint64_t> far = {3, 40, 77, 120, 160, 199};
  RemoteStats before = GetRemoteStats();
  Batch batch;
  ASSERT_TRUE(r->ReadBatch(far.data(), far.size(), &batch).ok());
  RemoteStats d = Delta(before, GetRemoteStats());
  EXPECT_EQ(d.requests, far.size());
  EXPECT_EQ(d.coalesced, 0u);
  uint64_t stored = 0;
  for (uint64_t i : far) {
    Record rec;
    ASSERT_TRUE(r->GetRecord(i, &rec).ok());
    stored += rec.stored_length;
  }
  EXPECT_EQ(d.bytes, stored);  // not a byte more than the records
  // Neighbours (touching ranges): one request for the run.
  std::vector<uint64_t> run = {50, 51, 52, 53, 54, 55, 56, 57};
  before = GetRemoteStats();
  ASSERT_TRUE(r->ReadBatch(run.data(), run.size(), &batch).ok());
  d = Delta(before, GetRemoteStats());
  EXPECT_EQ(d.requests, 1u);
  EXPECT_EQ(d.coalesced, run.size());
  for (size_t k = 0; k < run.size(); ++k) {
    EXPECT_EQ(batch.get(k), items_[run[k]].bytes);
  }
  // The same record twice in a batch.
  std::vector<uint64_t> twice = {9, 9};
  ASSERT_TRUE(r->ReadBatch(twice.data(), twice.size(), &batch).ok());
  EXPECT_EQ(batch.get(0), items_[9].bytes);
  EXPECT_EQ(batch.get(1), items_[9].bytes);
}

TEST_F(HttpPackTest, PackReplacedUnderARunningReaderIsAnError) {
  std::unique_ptr<Reader> r = Open();
  ASSERT_TRUE(r);
  std::string out;
  ASSERT_TRUE(r->Read(1, &out).ok());
  // A new build of other records at the same URL (renamed into place, so
  // a new ETag).
  std::vector<Item> other = MakeItems(200, 30000, 99);
  WritePack(dir_.path() + "/www/p.ufspack", other);
  for (uint64_t i : {2, 150}) {
    Status s = r->Read(i, &out);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(test::Contains(s, "changed since it was opened"))
        << s.ToString();
    EXPECT_TRUE(test::Contains(s, url_ + "/data.ufs")) << s.ToString();
  }
  // A reader opened now sees the new pack.
  std::unique_ptr<Reader> fresh = Open();
  ASSERT_TRUE(fresh);
  ASSERT_TRUE(fresh->Read(2, &out).ok());
  EXPECT_EQ(out, other[2].bytes);
}

TEST_F(HttpPackTest, MissingObjectsAreNotFoundNamingTheUrl) {
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(server_->url() + "/nothing.ufspack", {}, &r);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, server_->url() + "/nothing.ufspack/index.ufs"))
      << s.ToString();
  EXPECT_TRUE(test::Contains(s, "404")) << s.ToString();
  // An index without its data file.
  test::MakeDirs(dir_.path() + "/www/half");
  test::WriteFile(dir_.path() + "/www/half/index.ufs",
                  test::ReadFile(dir_.path() + "/www/p.ufspack/index.ufs"));
  s = Reader::Open(server_->url() + "/half", {}, &r);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "half/data.ufs")) << s.ToString();
  // A presigned-style URL names one object, not a pack.
  s = Reader::Open(url_ + "?X-Amz-Signature=secret", {}, &r);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_FALSE(test::Contains(s, "secret")) << s.ToString();
}

TEST_F(HttpPackTest, ServerGoneIsAnIOErrorAfterBoundedRetries) {
  RegisterRemoteStorage(FastFail());
  std::unique_ptr<Reader> r = Open();
  ASSERT_TRUE(r);
  server_->Stop();
  std::string out;
  RemoteStats before = GetRemoteStats();
  Status s = r->Read(5, &out);
  RemoteStats d = Delta(before, GetRemoteStats());
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "record 5")) << s.ToString();
  EXPECT_TRUE(test::Contains(s, url_ + "/data.ufs")) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "after 3 attempts")) << s.ToString();
  EXPECT_EQ(d.requests, 3u);
  EXPECT_EQ(d.retries, 2u);
  std::vector<uint64_t> batch_idx = {1, 60, 120};
  Batch batch;
  s = r->ReadBatch(batch_idx.data(), batch_idx.size(), &batch);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_EQ(batch.size(), 0u);  // never half filled
}

TEST_F(HttpPackTest, CacheServesEpochTwoWithoutARequestAndWorksOffline) {
  CacheOptions co;
  co.dir = dir_.path() + "/cache";
  co.warn = [](const std::string&) {};
  std::shared_ptr<Cache> cache;
  ASSERT_TRUE(Cache::Open(co, &cache).ok());
  ReaderOptions ro;
  ro.cache = cache;
  std::vector<uint64_t> all(items_.size());
  std::iota(all.begin(), all.end(), 0);
  {
    std::unique_ptr<Reader> r = Open(ro);
    ASSERT_TRUE(r);
    Batch batch;
    ASSERT_TRUE(r->ReadBatch(all.data(), all.size(), &batch).ok());
    for (size_t k = 0; k < all.size(); ++k) {
      ASSERT_EQ(batch.get(k), items_[k].bytes);
    }
  }
  // Epoch 2, a new reader (a new process would do the same): the index
  // copy and every record come from the cache.
  RemoteStats before = GetRemoteStats();
  std::unique_ptr<Reader> r2 = Open(ro);
  ASSERT_TRUE(r2);
  const uint64_t open_requests = GetRemoteStats().requests - before.requests;
  EXPECT_LE(open_requests, 2u);  // the index's head and data.ufs's head
  before = GetRemoteStats();
  Batch batch;
  ASSERT_TRUE(r2->ReadBatch(all.data(), all.size(), &batch).ok());
  EXPECT_EQ(GetRemoteStats().requests - before.requests, 0u);
  for (size_t k = 0; k < all.size(); ++k) {
    ASSERT_EQ(batch.get(k), items_[k].bytes);
  }
  // Offline: the server is gone; cached records keep coming.
  RegisterRemoteStorage(FastFail());
  server_->Stop();
  std::unique_ptr<Reader> r3 = Open(ro);
  ASSERT_TRUE(r3);
  EXPECT_TRUE(r3->offline());
  ASSERT_TRUE(r3->ReadBatch(all.data(), all.size(), &batch).ok());
  EXPECT_EQ(batch.get(17), items_[17].bytes);
}

TEST(HttpLargeIndexTest, AnIndexOverOneMiBTakesOneMoreRequestForItsRest) {
  RegisterRemoteStorage();
  test::TempDir dir;
  std::vector<Item> items = MakeItems(30000, 16, 5);
  WritePack(dir.path() + "/www/big.ufspack", items);
  ASSERT_GT(test::FileSize(dir.path() + "/www/big.ufspack/index.ufs"),
            uint64_t{1} << 20);
  test::StaticServer server(dir.path() + "/www");
  const RemoteStats before = GetRemoteStats();
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(server.url() + "/big.ufspack", {}, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const RemoteStats d = Delta(before, GetRemoteStats());
  // The index's first MiB, the rest of it, data.ufs's head.
  EXPECT_EQ(d.requests, 3u);
  EXPECT_LE(d.bytes,
            test::FileSize(dir.path() + "/www/big.ufspack/index.ufs") + 4096);
  EXPECT_TRUE(r->CheckIndex().ok());
  std::string out;
  ASSERT_TRUE(r->Read(29999, &out).ok());
  EXPECT_EQ(out, items[29999].bytes);
  // A read larger than max_request_bytes goes as concurrent requests of at
  // most that size.
  RemoteOptions o;
  o.max_request_bytes = 256 << 10;
  RegisterRemoteStorage(o);
  const uint64_t index_size =
      test::FileSize(dir.path() + "/www/big.ufspack/index.ufs");
  const uint64_t rest = index_size - (uint64_t{1} << 20);
  const RemoteStats before_split = GetRemoteStats();
  std::unique_ptr<Reader> split;
  s = Reader::Open(server.url() + "/big.ufspack", {}, &split);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(GetRemoteStats().requests - before_split.requests,
            1 + (rest + o.max_request_bytes - 1) / o.max_request_bytes + 1);
  EXPECT_EQ(split->info().pack_id, r->info().pack_id);
  EXPECT_TRUE(split->CheckIndex().ok());
  RegisterRemoteStorage();
}

TEST(HttpsPackTest, TlsVerifiedByDefaultAndTrustedWithACaBundle) {
  RegisterRemoteStorage();
  test::TempDir dir;
  std::vector<Item> items = MakeItems(20, 5000, 1);
  WritePack(dir.path() + "/www/p.ufspack", items);
  test::MakeSelfSignedCert(dir.path());
  test::StaticServer server(dir.path() + "/www", dir.path() + "/cert.pem",
                            dir.path() + "/key.pem");
  ASSERT_EQ(server.url().compare(0, 8, "https://"), 0) << server.url();
  const std::string url = server.url() + "/p.ufspack";
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(url, {}, &r);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "certificate")) << s.ToString();
  // The CA file is read when the pack is opened.  (CURL_CA_BUNDLE comes
  // before SSL_CERT_FILE, and may be set already.)
  const char* old = ::getenv("CURL_CA_BUNDLE");
  const std::string saved = old ? old : "";
  ASSERT_EQ(::setenv("CURL_CA_BUNDLE", (dir.path() + "/cert.pem").c_str(), 1),
            0);
  s = Reader::Open(url, {}, &r);
  if (old) {
    ::setenv("CURL_CA_BUNDLE", saved.c_str(), 1);
  } else {
    ::unsetenv("CURL_CA_BUNDLE");
  }
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string out;
  ASSERT_TRUE(r->Read(3, &out).ok());
  EXPECT_EQ(out, items[3].bytes);
}

TEST(UrlTest, UnregisteredSchemeAndBadUrls) {
  std::unique_ptr<Reader> r;
  Status s = Reader::Open("gs://bucket/p.ufspack", {}, &r);
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "gs://")) << s.ToString();
  RegisterRemoteStorage();
  s = Reader::Open("http:///nohost/p", {}, &r);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

// A server whose answer carries a 1 MiB header line: libcurl gives up with
// CURLE_OUT_OF_MEMORY; the error names the oversized header and the URL,
// and the request is not retried.
TEST(HttpHostileServerTest, AnOversizedResponseHeaderIsNamed) {
  RegisterRemoteStorage(FastFail());
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
            0);
  ASSERT_EQ(::listen(listener, 8), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len),
            0);
  const int port = ntohs(addr.sin_port);
  std::atomic<int> answered{0};
  std::thread server([&] {
    // At most 4 connections, each answered once, then the listener closes.
    for (int k = 0; k < 4; ++k) {
      const int c = ::accept(listener, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      (void)::recv(c, buf, sizeof(buf), 0);
      const std::string answer =
          "HTTP/1.1 200 OK\r\nX-Big: " + std::string(1 << 20, 'x') +
          "\r\nContent-Length: 0\r\n\r\n";
      (void)::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      ++answered;
      ::close(c);
    }
  });
  const std::string url =
      "http://127.0.0.1:" + std::to_string(port) + "/p.ufspack";
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(url, {}, &r);
  ::shutdown(listener, SHUT_RDWR);
  ::close(listener);
  server.join();
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "response header is too large"))
      << s.ToString();
  EXPECT_TRUE(test::Contains(s, url)) << s.ToString();
  EXPECT_EQ(answered.load(), 1) << "an oversized header is not retried";
  RegisterRemoteStorage();
}

}  // namespace
}  // namespace ufspack
