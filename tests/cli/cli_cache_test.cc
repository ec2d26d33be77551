// Copyright 2026 The ufspack Authors.
//
// End-to-end tests of the node-local cache commands: `ufspack warmup`,
// `ufspack cache stat|clear`, and `--cache` on cat, verify and extract,
// run as processes; the cache directory is checked with Cache::Stat and by
// walking it.
#include <fcntl.h>
#include <ftw.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "testutil.h"
#include "ufspack/cache.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace {

using test::CommandResult;
using test::Contains;
using test::RunCli;
using test::TempDir;

// --- A small JSON parser: the --json outputs must be JSON, not just hold
// the right substrings. ---------------------------------------------------

struct Json {
  enum Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = kNull;
  bool boolean = false;
  std::string text;  // a string's value, or a number as written
  std::vector<Json> items;
  std::map<std::string, Json> fields;

  bool Has(const std::string& key) const {
    return type == kObject && fields.count(key) > 0;
  }
  const Json& operator[](const std::string& key) const {
    static const Json missing;
    auto it = fields.find(key);
    return it == fields.end() ? missing : it->second;
  }
  // The value of a non-negative integer; -1 when this is not one.
  long long Int() const {
    if (type != kNumber || text.empty()) return -1;
    for (char c : text) {
      if (c < '0' || c > '9') return -1;
    }
    return std::stoll(text);
  }
  double Number() const { return type == kNumber ? std::stod(text) : -1; }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}
  // Parses the whole input (surrounding whitespace allowed).
  bool Parse(Json* out) {
    return Value(out, 0) && (Space(), pos_ == s_.size());
  }

 private:
  void Space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' ||
                                s_[pos_] == '\t' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Literal(const char* word) {
    const std::string w = word;
    if (s_.compare(pos_, w.size(), w) != 0) return false;
    pos_ += w.size();
    return true;
  }
  bool String(std::string* out) {
    if (pos_ >= s_.size() || s_[pos_] != '"') return false;
    ++pos_;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      const unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c < 0x20) return false;
      if (c != '\\') {
        out->push_back(static_cast<char>(c));
        ++pos_;
        continue;
      }
      if (++pos_ >= s_.size()) return false;
      const char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u':
          for (int k = 0; k < 4; ++k, ++pos_) {
            if (pos_ >= s_.size() ||
                !std::isxdigit(static_cast<unsigned char>(s_[pos_]))) {
              return false;
            }
          }
          out->push_back('?');  // code points are not needed here
          break;
        default:
          return false;
      }
    }
    if (pos_ >= s_.size()) return false;
    ++pos_;
    return true;
  }
  bool Number(std::string* out) {
    const size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ > d;
    };
    if (!digits()) return false;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (!digits()) return false;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digits()) return false;
    }
    *out = s_.substr(start, pos_ - start);
    return true;
  }
  bool Value(Json* out, int depth) {
    if (depth > 64) return false;
    Space();
    if (pos_ >= s_.size()) return false;
    const char c = s_[pos_];
    if (c == '{') {
      out->type = Json::kObject;
      ++pos_;
      Space();
      if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
      for (;;) {
        Space();
        std::string key;
        if (!String(&key)) return false;
        Space();
        if (pos_ >= s_.size() || s_[pos_++] != ':') return false;
        if (out->fields.count(key)) return false;  // a repeated key
        if (!Value(&out->fields[key], depth + 1)) return false;
        Space();
        if (pos_ >= s_.size()) return false;
        if (s_[pos_] == '}') return ++pos_, true;
        if (s_[pos_++] != ',') return false;
      }
    }
    if (c == '[') {
      out->type = Json::kArray;
      ++pos_;
      Space();
      if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
      for (;;) {
        out->items.emplace_back();
        if (!Value(&out->items.back(), depth + 1)) return false;
        Space();
        if (pos_ >= s_.size()) return false;
        if (s_[pos_] == ']') return ++pos_, true;
        if (s_[pos_++] != ',') return false;
      }
    }
    if (c == '"') {
      out->type = Json::kString;
      return String(&out->text);
    }
    if (Literal("true")) {
      out->type = Json::kBool;
      out->boolean = true;
      return true;
    }
    if (Literal("false")) {
      out->type = Json::kBool;
      return true;
    }
    if (Literal("null")) return true;
    out->type = Json::kNumber;
    return Number(&out->text);
  }

  const std::string& s_;
  size_t pos_ = 0;
};

Json ParseJson(const std::string& text) {
  Json j;
  EXPECT_TRUE(JsonParser(text).Parse(&j)) << "not JSON: " << text;
  return j;
}

TEST(CliCacheJson, ParserRejectsWhatIsNotJson) {
  Json j;
  EXPECT_TRUE(
      JsonParser(R"({"a":[1,2.5,-3e2],"b":null,"c":"x\"y"})").Parse(&j));
  EXPECT_EQ(j["a"].items.size(), 3u);
  EXPECT_EQ(j["c"].text, "x\"y");
  for (const char* bad :
       {"", "{", "{\"a\":1,}", "{\"a\" 1}", "[1 2]", "{\"a\":1}x",
        "{\"a\":01.}", "{a:1}", "nul", "{\"a\":1,\"a\":2}"}) {
    Json k;
    EXPECT_FALSE(JsonParser(bad).Parse(&k)) << bad;
  }
}

// --- Helpers --------------------------------------------------------------

using test::DiskUsage;

CacheTierStats Stat(const std::string& dir) {
  CacheTierStats st;
  Status s = Cache::Stat(dir, &st);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return st;
}

using test::SpawnCli;

class CliCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    src_ = tmp_ / "src";
    pack_ = tmp_ / "train.ufspack";
    cache_ = tmp_ / "cache";
  }
  // An ImageFolder tree of `files` files of about `size` bytes (random,
  // and every fifth compressible, so a zstd pack mixes codecs), packed.
  void MakePack(int files, size_t size, bool zstd = false) {
    for (int k = 0; k < files; ++k) {
      const std::string name = (k % 2 ? "dogs/d" : "cats/c") +
                               std::to_string(k) + (k % 3 ? ".jpg" : ".png");
      const std::string bytes = k % 5 == 0
                                    ? test::CompressibleBytes(size + k, k)
                                    : test::RandomBytes(size + k, k);
      test::WriteFile(src_ + "/" + name, bytes);
      files_[name] = bytes;
    }
    std::vector<std::string> args = {"build", src_, "-o", pack_, "-q"};
    if (zstd) args.insert(args.end(), {"--compress", "zstd"});
    CommandResult b = RunCli(args);
    ASSERT_EQ(b.exit_code, 0) << b.err;
  }
  uint64_t records() const { return files_.size(); }

  TempDir tmp_;
  std::string src_, pack_, cache_;
  std::map<std::string, std::string> files_;
};

// --- warmup ---------------------------------------------------------------

TEST_F(CliCacheTest, WarmupFillsTheCacheAndReadersServeItWithoutTheSource) {
  MakePack(12, 30000, /*zstd=*/true);
  CommandResult w =
      RunCli({"warmup", pack_, "--cache", cache_, "--limit", "64M"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_TRUE(Contains(w.out, "warmed up " + pack_ +
                                  ": 12 records, 0 already "
                                  "cached, 12 added, 0 "
                                  "refused"))
      << w.out;
  EXPECT_TRUE(w.err.empty()) << w.err;

  CommandResult st = RunCli({"cache", "stat", cache_, "--json"});
  ASSERT_EQ(st.exit_code, 0) << st.err;
  Json j = ParseJson(st.out);
  ASSERT_EQ(j["tiers"].items.size(), 1u) << st.out;
  const Json& tier = j["tiers"].items[0];
  EXPECT_EQ(tier["dir"].text, cache_);
  EXPECT_EQ(tier["entries"].Int(), static_cast<long long>(records()));
  EXPECT_EQ(tier["inserts"].Int(), static_cast<long long>(records()));
  EXPECT_EQ(tier["tables"].Int(), 1);
  EXPECT_EQ(tier["limit"].Int(), 64ll << 20);
  EXPECT_EQ(tier["hits"].Int(), 0);

  // The source goes away (an unmounted NFS share): the cached records are
  // still served, byte for byte, by cat, extract and verify.
  ASSERT_EQ(::rename(pack_.c_str(), (tmp_ / "moved").c_str()), 0);
  for (const auto& [name, bytes] : files_) {
    CommandResult c = RunCli({"cat", pack_, name, "--cache", cache_});
    ASSERT_EQ(c.exit_code, 0) << name << ": " << c.err;
    EXPECT_TRUE(c.out == bytes) << name;
  }
  CommandResult x = RunCli({"extract", pack_, tmp_ / "out", "--cache", cache_});
  ASSERT_EQ(x.exit_code, 0) << x.err;
  EXPECT_EQ(test::ReadTree(tmp_ / "out"), files_);
  CommandResult v = RunCli({"verify", pack_, "--cache", cache_});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_TRUE(Contains(v.out, "OK: 12 records")) << v.out;
  const CacheTierStats after = Stat(cache_);
  EXPECT_EQ(after.hits, 3 * records());
  EXPECT_EQ(after.misses, 0u);
  // Without the cache there is nothing to read.
  CommandResult plain = RunCli({"cat", pack_, files_.begin()->first});
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_TRUE(plain.out.empty());
}

TEST_F(CliCacheTest, CatThroughTheCacheFillsIt) {
  MakePack(4, 5000);
  const std::string name = files_.begin()->first;
  CommandResult c1 = RunCli({"cat", pack_, name, "--cache", cache_});
  ASSERT_EQ(c1.exit_code, 0) << c1.err;
  EXPECT_TRUE(c1.out == files_[name]);
  CacheTierStats st = Stat(cache_);
  EXPECT_EQ(st.entries, 1u);
  EXPECT_EQ(st.misses, 1u);
  CommandResult c2 = RunCli({"cat", pack_, name, "--cache", cache_});
  ASSERT_EQ(c2.exit_code, 0) << c2.err;
  EXPECT_TRUE(c2.out == files_[name]);
  EXPECT_EQ(Stat(cache_).hits, 1u);
  // A --cache that cannot be a cache is not used: one warning naming it,
  // and the records come from the source (a cache never fails a read).
  CommandResult bad = RunCli({"cat", pack_, name, "--cache", src_});
  EXPECT_EQ(bad.exit_code, 0) << bad.err;
  EXPECT_TRUE(Contains(bad.err, "ufspack: warning: cache " + src_ +
                                    " not used (IOError: " + src_ +
                                    ": not a ufspack cache directory"))
      << bad.err;
  EXPECT_TRUE(bad.out == files_[name]);
  CommandResult bad_extract =
      RunCli({"extract", pack_, tmp_ / "out", "--cache", src_});
  EXPECT_EQ(bad_extract.exit_code, 0) << bad_extract.err;
  EXPECT_TRUE(Contains(bad_extract.err, "ufspack: warning: cache " + src_))
      << bad_extract.err;
  EXPECT_EQ(test::ReadFile(tmp_ / "out" + "/" + name), files_[name]);
  CommandResult bad_verify =
      RunCli({"verify", pack_, "--cache", src_, "--json"});
  EXPECT_EQ(bad_verify.exit_code, 0) << bad_verify.err;
  Json v = ParseJson(bad_verify.out);
  EXPECT_TRUE(v["ok"].boolean);
  EXPECT_TRUE(Contains(bad_verify.err, "ufspack: warning: cache " + src_))
      << bad_verify.err;
  // Nothing was created in the directory that is not a cache.
  EXPECT_FALSE(test::Exists(src_ + "/ufspack-cache"));
  EXPECT_FALSE(test::Exists(src_ + "/ns"));
  // warmup, whose subject is the cache, fails naming it.
  CommandResult bad_warmup = RunCli({"warmup", pack_, "--cache", src_});
  EXPECT_EQ(bad_warmup.exit_code, 1);
  EXPECT_TRUE(Contains(bad_warmup.err, "ufspack: error: " + src_ +
                                           ": not a ufspack cache directory"))
      << bad_warmup.err;
}

TEST_F(CliCacheTest, WarmupResumesSkippingWhatIsCached) {
  MakePack(10, 20000);
  ASSERT_EQ(RunCli({"warmup", pack_, "--cache", cache_, "-q"}).exit_code, 0);
  CommandResult again = RunCli({"warmup", pack_, "--cache", cache_, "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  Json j = ParseJson(again.out);
  EXPECT_EQ(j["records"].Int(), 10);
  EXPECT_EQ(j["already_cached"].Int(), 10);
  EXPECT_EQ(j["added"].Int(), 0);
  EXPECT_EQ(j["bytes_read"].Int(), 0);
  EXPECT_EQ(j["bytes_total"].Int(), 0);
  EXPECT_EQ(Stat(cache_).entries, 10u);
  // The text summary says the same.
  CommandResult text = RunCli({"warmup", pack_, "--cache", cache_});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(Contains(text.out, "10 records, 10 already cached, 0 added"))
      << text.out;
  // -q: nothing on stdout.
  CommandResult quiet = RunCli({"warmup", pack_, "--cache", cache_, "-q"});
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_TRUE(quiet.out.empty()) << quiet.out;
}

TEST_F(CliCacheTest, LimitSmallerThanThePackRefusesAndHoldsTheLimit) {
  MakePack(40, 100000);  // about 4 MB
  CommandResult w = RunCli({"warmup", pack_, "--cache", cache_, "--limit", "1M",
                            "--json", "-j1", "--block", "64K"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  Json j = ParseJson(w.out);
  EXPECT_TRUE(j["ok"].boolean);
  EXPECT_TRUE(j["cache_full"].boolean);
  EXPECT_GT(j["refused"].Int(), 0);
  EXPECT_GT(j["added"].Int(), 0);
  EXPECT_LT(j["added"].Int(), 40);
  EXPECT_EQ(j["not_cached"].Int(), 40 - j["added"].Int());
  EXPECT_TRUE(Contains(
      w.err, "ufspack: cache full: " + std::to_string(40 - j["added"].Int()) +
                 " records not cached (limit 1.00 MiB); "
                 "raise --limit"))
      << w.err;
  // Never more on disk than the limit, whatever was refused.
  EXPECT_LE(DiskUsage(cache_), 1u << 20);
  const CacheTierStats st = Stat(cache_);
  EXPECT_EQ(st.entries, static_cast<uint64_t>(j["added"].Int()));
  EXPECT_LE(st.charged_bytes, st.limit);
  EXPECT_GT(st.refused, 0u);

  // A limit that cannot even hold the pack's table (its index copy) is a
  // failure, not an interruption.
  CommandResult tiny =
      RunCli({"warmup", pack_, "--cache", tmp_ / "tiny", "--limit", "40K"});
  EXPECT_EQ(tiny.exit_code, 1) << tiny.err;
  EXPECT_TRUE(Contains(tiny.err, "ufspack: error: cache " + (tmp_ / "tiny") +
                                     " has no room for pack " + pack_))
      << tiny.err;
  EXPECT_TRUE(Contains(tiny.err, "raise the limit")) << tiny.err;
  EXPECT_LE(DiskUsage(tmp_ / "tiny"), 40u << 10);

  // Raising the limit lets a re-run cache the rest.
  CommandResult more =
      RunCli({"warmup", pack_, "--cache", cache_, "--limit", "64M", "--json"});
  ASSERT_EQ(more.exit_code, 0) << more.err;
  Json m = ParseJson(more.out);
  EXPECT_EQ(m["already_cached"].Int(), j["added"].Int());
  EXPECT_EQ(m["added"].Int(), 40 - j["added"].Int());
  EXPECT_FALSE(m["cache_full"].boolean);
  EXPECT_EQ(Stat(cache_).entries, 40u);
}

TEST_F(CliCacheTest, SizesAcceptUnitsAndFractions) {
  MakePack(2, 1000);
  const std::vector<std::pair<std::string, long long>> cases = {
      {"1048576", 1048576}, {"500K", 500 << 10},    {"1.5M", 3 << 19},
      {"2m", 2 << 20},      {"1.25GiB", 5ll << 28}, {"3G", 3ll << 30},
  };
  for (const auto& [text, bytes] : cases) {
    const std::string dir = tmp_ / ("c" + text);
    CommandResult w =
        RunCli({"warmup", pack_, "--cache", dir, "--limit", text, "-q"});
    ASSERT_EQ(w.exit_code, 0) << text << ": " << w.err;
    EXPECT_EQ(Stat(dir).limit, static_cast<uint64_t>(bytes)) << text;
  }
  for (const char* bad : {"", "0", "M", "1.5", "1.", "12X", "1MB", "-1M",
                          "99999999999T", "1e6"}) {
    CommandResult w =
        RunCli({"warmup", pack_, "--cache", tmp_ / "bad", "--limit", bad});
    EXPECT_EQ(w.exit_code, 2) << bad;
    EXPECT_TRUE(Contains(w.err, "see 'ufspack warmup --help'")) << w.err;
  }
  EXPECT_FALSE(test::Exists(tmp_ / "bad"));
  EXPECT_EQ(RunCli({"warmup", pack_}).exit_code, 2);  // no --cache
  EXPECT_EQ(
      RunCli({"warmup", pack_, "--cache", cache_, "--block", "1K"}).exit_code,
      2);
  EXPECT_EQ(RunCli({"warmup", pack_, "--cache", cache_, "-j0"}).exit_code, 2);
  EXPECT_EQ(RunCli({"warmup", pack_, "--cache", cache_, "-j65"}).exit_code, 2);
  EXPECT_EQ(RunCli({"warmup", pack_, "--cache", cache_, "--ram-limit", "1G"})
                .exit_code,
            2);
}

TEST_F(CliCacheTest, JsonOutputsHoldTheDocumentedFields) {
  MakePack(6, 4000);
  CommandResult w = RunCli({"warmup", pack_, "--cache", cache_, "--json"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  Json j = ParseJson(w.out);
  ASSERT_EQ(j.type, Json::kObject);
  for (const char* n :
       {"records", "already_cached", "added", "refused", "not_cached",
        "bytes_read", "bytes_total", "exit_code", "oversized_records"}) {
    EXPECT_GE(j[n].Int(), 0) << n << " in " << w.out;
  }
  for (const char* n : {"seconds", "mb_per_s"}) {
    EXPECT_EQ(j[n].type, Json::kNumber) << n;
    EXPECT_GE(j[n].Number(), 0) << n;
  }
  for (const char* n : {"ok", "interrupted", "cache_full"}) {
    EXPECT_EQ(j[n].type, Json::kBool) << n;
  }
  EXPECT_TRUE(j["ok"].boolean);
  EXPECT_FALSE(j["interrupted"].boolean);
  EXPECT_EQ(j["pack"].text, pack_);
  EXPECT_EQ(j["cache"].text, cache_);
  EXPECT_EQ(j["ram_dir"].type, Json::kNull);
  EXPECT_EQ(j["records"].Int(), 6);
  EXPECT_EQ(j["added"].Int(), 6);
  uint64_t stored = 0;
  for (const auto& [name, bytes] : files_) stored += bytes.size();
  EXPECT_EQ(j["bytes_read"].Int(), static_cast<long long>(stored));
  EXPECT_EQ(j["warnings"].type, Json::kArray);
  ASSERT_EQ(j["tiers"].items.size(), 1u);
  const char* kTierFields[] = {"limit",   "charged_bytes", "disk_bytes",
                               "entries", "tables",        "hits",
                               "misses",  "inserts",       "refused",
                               "dropped", "errors",        "evicted_tables"};
  for (const char* n : kTierFields) {
    EXPECT_GE(j["tiers"].items[0][n].Int(), 0) << n;
  }
  EXPECT_EQ(j["tiers"].items[0]["dir"].text, cache_);
  EXPECT_EQ(j["tiers"].items[0]["entries"].Int(), 6);

  // cache stat --json, after one hit and one miss: hit_rate 0.5.
  ASSERT_EQ(RunCli({"cat", pack_, "#0", "--cache", cache_}).exit_code, 0);
  CacheOptions co;
  co.dir = cache_;
  std::shared_ptr<Cache> cache;
  ASSERT_TRUE(Cache::Open(co, &cache).ok());
  std::unique_ptr<PackCache> attached;
  ASSERT_TRUE(
      cache->AttachPack(pack_ + "/index.ufs", pack_ + "/data.ufs", &attached)
          .ok());
  char byte;
  EXPECT_FALSE(attached->Lookup(/*i=*/0, 1, 0, &byte));  // a wrong length
  attached.reset();
  cache.reset();
  CommandResult st = RunCli({"cache", "stat", cache_, "--json"});
  ASSERT_EQ(st.exit_code, 0) << st.err;
  Json s = ParseJson(st.out);
  ASSERT_EQ(s["tiers"].items.size(), 1u);
  const Json& t = s["tiers"].items[0];
  for (const char* n : kTierFields) EXPECT_GE(t[n].Int(), 0) << n;
  EXPECT_EQ(t["hits"].Int(), 1);
  EXPECT_GE(t["misses"].Int(), 1);
  EXPECT_EQ(t["hit_rate"].type, Json::kNumber);
  EXPECT_NEAR(t["hit_rate"].Number(),
              1.0 / static_cast<double>(1 + t["misses"].Int()), 1e-3);
  EXPECT_EQ(t["dropped"].Int(), 1);  // the entry looked up wrongly
  EXPECT_EQ(t["entries"].Int(), 5);

  // cache clear --json.
  CommandResult c = RunCli({"cache", "clear", cache_, "--json"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  Json cj = ParseJson(c.out);
  ASSERT_EQ(cj["dirs"].items.size(), 1u);
  const Json& d = cj["dirs"].items[0];
  EXPECT_EQ(d["dir"].text, cache_);
  EXPECT_EQ(d["removed_tables"].Int(), 1);
  EXPECT_EQ(d["removed_entries"].Int(), 5);
  EXPECT_GT(d["freed_bytes"].Int(), 0);
  EXPECT_EQ(d["kept_tables"].Int(), 0);

  // A failed warmup is a JSON object too.
  CommandResult missing =
      RunCli({"warmup", tmp_ / "nope", "--cache", cache_, "--json"});
  EXPECT_EQ(missing.exit_code, 1);
  Json mj = ParseJson(missing.out);
  EXPECT_FALSE(mj["ok"].boolean);
  EXPECT_EQ(mj["exit_code"].Int(), 1);
  EXPECT_TRUE(Contains(mj["error"].text, tmp_ / "nope")) << missing.out;
}

TEST_F(CliCacheTest, RamTierTakesRecordsFirst) {
  MakePack(5, 3000);
  // Any directory can be the first tier; 200M is above the 128 MiB a RAM
  // tier must be able to hold.
  CommandResult w =
      RunCli({"warmup", pack_, "--cache", cache_, "--limit", "64M", "--ram-dir",
              tmp_ / "ram", "--ram-limit", "200M", "--json"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  Json j = ParseJson(w.out);
  EXPECT_EQ(j["ram_dir"].text, tmp_ / "ram");
  ASSERT_EQ(j["tiers"].items.size(), 2u) << w.out;
  EXPECT_EQ(j["tiers"].items[0]["dir"].text, tmp_ / "ram");
  EXPECT_EQ(j["tiers"].items[0]["entries"].Int(), 5);
  EXPECT_EQ(j["tiers"].items[1]["dir"].text, cache_);
  EXPECT_EQ(j["tiers"].items[1]["entries"].Int(), 0);
  CommandResult st = RunCli({"cache", "stat", tmp_ / "ram", cache_});
  ASSERT_EQ(st.exit_code, 0) << st.err;
  EXPECT_TRUE(Contains(st.out, "cache:          " + (tmp_ / "ram") +
                                   "\nlimit:          200.0 MiB"))
      << st.out;
  EXPECT_TRUE(Contains(st.out, "entries:        5 in 1 table")) << st.out;
  EXPECT_TRUE(Contains(st.out, "entries:        0 in 1 table")) << st.out;
}

TEST_F(CliCacheTest, UnreachableSourceIsAnErrorNamingIt) {
  MakePack(3, 1000);
  CommandResult w = RunCli({"warmup", tmp_ / "nowhere", "--cache", cache_});
  EXPECT_EQ(w.exit_code, 1);
  EXPECT_TRUE(Contains(w.err, "ufspack: error: " + (tmp_ / "nowhere")))
      << w.err;
  EXPECT_FALSE(test::Exists(cache_));  // nothing created for a typo
  // Cached once, then gone: nothing to warm up from, said so.
  ASSERT_EQ(RunCli({"warmup", pack_, "--cache", cache_, "-q"}).exit_code, 0);
  ASSERT_EQ(::rename(pack_.c_str(), (tmp_ / "moved").c_str()), 0);
  CommandResult gone = RunCli({"warmup", pack_, "--cache", cache_});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_TRUE(Contains(gone.err, "ufspack: error: " + pack_)) << gone.err;
  // A damaged pack is exit status 3, as elsewhere.
  ASSERT_EQ(::rename((tmp_ / "moved").c_str(), pack_.c_str()), 0);
  test::FlipByte(pack_ + "/index.ufs", 40);
  CommandResult bad = RunCli({"warmup", pack_, "--cache", tmp_ / "c2"});
  EXPECT_EQ(bad.exit_code, 3) << bad.err;
  EXPECT_TRUE(Contains(bad.err, pack_ + "/index.ufs")) << bad.err;
}

TEST_F(CliCacheTest, DamagedRecordStopsTheWarmupWithStatusThree) {
  MakePack(6, 20000);
  // Damage record 3's bytes in data.ufs.
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(Reader::Open(pack_, {}, &reader).ok());
  Record r;
  ASSERT_TRUE(reader->GetRecord(3, &r).ok());
  reader.reset();
  test::FlipByte(pack_ + "/data.ufs", r.offset + 10);
  CommandResult w = RunCli({"warmup", pack_, "--cache", cache_});
  EXPECT_EQ(w.exit_code, 3) << w.err;
  EXPECT_TRUE(Contains(w.err, "record 3")) << w.err;
  EXPECT_TRUE(Contains(w.err, "checksum mismatch")) << w.err;
  EXPECT_TRUE(Contains(w.err, "what was cached stays")) << w.err;
}

TEST_F(CliCacheTest, RecordLargerThanTheCacheTakesIsReported) {
  // The cache takes records of at most 16 MiB - 1 bytes: a larger one is
  // skipped (read from the source each time) and the warm-up goes on.
  test::WriteFile(src_ + "/a/big.jpg", test::RandomBytes(17 << 20, 1));
  test::WriteFile(src_ + "/a/small.jpg", test::RandomBytes(1000, 2));
  test::WriteFile(src_ + "/a/z.jpg", test::RandomBytes(1000, 3));
  ASSERT_EQ(RunCli({"build", src_, "-o", pack_, "-q"}).exit_code, 0);
  CommandResult w =
      RunCli({"warmup", pack_, "--cache", cache_, "--limit", "1G", "--json"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  Json j = ParseJson(w.out);
  EXPECT_EQ(j["oversized_records"].Int(), 1);
  EXPECT_FALSE(j["cache_full"].boolean);
  EXPECT_EQ(j["refused"].Int(), 0);
  EXPECT_EQ(j["added"].Int(), 2);
  EXPECT_FALSE(Contains(w.err, "cache full")) << w.err;
  test::RemoveAll(cache_);
  CommandResult text =
      RunCli({"warmup", pack_, "--cache", cache_, "--limit", "1G"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(Contains(text.out, "1 larger than the cache takes (16.0 MiB)"))
      << text.out;
}

// --- cache stat / clear -----------------------------------------------------

TEST_F(CliCacheTest, StatOfWhatIsNotACacheFailsNamingIt) {
  const std::string missing = tmp_ / "no/such/dir";
  CommandResult r = RunCli({"cache", "stat", missing});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "ufspack: error: " + missing)) << r.err;
  EXPECT_TRUE(Contains(r.err, "No such file or directory")) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_FALSE(test::Exists(missing));
  test::WriteFile(tmp_ / "plain/file", "x");
  r = RunCli({"cache", "stat", tmp_ / "plain", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, (tmp_ / "plain") + ": not a ufspack cache"))
      << r.err;
  EXPECT_TRUE(r.out.empty());
  r = RunCli({"cache", "stat", tmp_ / "plain/file"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, (tmp_ / "plain/file") + ": not a directory"))
      << r.err;
  r = RunCli({"cache", "clear", missing});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "ufspack: error: " + missing)) << r.err;
  EXPECT_FALSE(test::Exists(missing));
  EXPECT_EQ(RunCli({"cache", "stat"}).exit_code, 2);
  EXPECT_EQ(RunCli({"cache"}).exit_code, 2);
  EXPECT_EQ(RunCli({"cache", "frob", cache_}).exit_code, 2);
}

TEST_F(CliCacheTest, ClearEmptiesTheCache) {
  MakePack(8, 10000);
  ASSERT_EQ(RunCli({"warmup", pack_, "--cache", cache_, "-q"}).exit_code, 0);
  ASSERT_EQ(Stat(cache_).entries, 8u);
  const uint64_t full_usage = DiskUsage(cache_);
  CommandResult c = RunCli({"cache", "clear", cache_});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_TRUE(
      Contains(c.out, "cleared " + cache_ + ": removed 1 table (8 entries, "))
      << c.out;
  EXPECT_TRUE(Contains(c.out, "none in use")) << c.out;
  const CacheTierStats st = Stat(cache_);
  EXPECT_EQ(st.entries, 0u);
  EXPECT_EQ(st.tables, 0u);
  EXPECT_EQ(st.inserts, 0u);  // alone: the counters start again
  EXPECT_LT(DiskUsage(cache_), full_usage);
  // Still a cache: a warm-up fills it again.
  CommandResult w = RunCli({"warmup", pack_, "--cache", cache_, "--json"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_EQ(ParseJson(w.out)["added"].Int(), 8);
}

TEST_F(CliCacheTest, ClearKeepsTablesRunningProcessesUse) {
  MakePack(4, 5000);
  ASSERT_EQ(RunCli({"warmup", pack_, "--cache", cache_, "-q"}).exit_code, 0);
  {
    // This process reads the pack through the cache while clear runs.
    CacheOptions co;
    co.dir = cache_;
    std::shared_ptr<Cache> cache;
    ASSERT_TRUE(Cache::Open(co, &cache).ok());
    ReaderOptions ro;
    ro.cache = cache;
    std::unique_ptr<Reader> reader;
    ASSERT_TRUE(Reader::Open(pack_, ro, &reader).ok());
    CommandResult c = RunCli({"cache", "clear", cache_});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    EXPECT_TRUE(Contains(c.out, "removed 0 tables (0 entries, "));
    EXPECT_TRUE(Contains(c.out, "kept 1 table in use by running processes"))
        << c.out;
    EXPECT_EQ(Stat(cache_).entries, 4u);
    std::string bytes;
    Record r;
    ASSERT_TRUE(reader->GetRecord(0, &r).ok());
    ASSERT_TRUE(reader->Read(r, &bytes).ok());
    EXPECT_TRUE(bytes == files_.at(std::string(r.name)));
  }
  CommandResult c = RunCli({"cache", "clear", cache_});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_TRUE(Contains(c.out, "removed 1 table (4 entries, ")) << c.out;
  EXPECT_EQ(Stat(cache_).entries, 0u);
}

// --- Ctrl-C -----------------------------------------------------------------

TEST_F(CliCacheTest, InterruptedWarmupExits130AndAReRunCompletes) {
  // 40 records of 256 KiB, each its own 64 KiB+ read; the shim makes every
  // such read take 50 ms (as a slow network file system would), so the
  // warm-up runs for about 2 s and the signal lands part way through.
  MakePack(40, 256 << 10);
  const std::string preload =
      std::string("LD_PRELOAD=") + UFSPACK_SLOW_PREAD_PATH;
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string asan_options = std::string("ASAN_OPTIONS=") +
                                   (asan ? std::string(asan) + ":" : "") +
                                   "verify_asan_link_order=0";
  pid_t pid = SpawnCli(
      {"warmup", pack_, "--cache", cache_, "-j1", "--block", "64K", "--json"},
      tmp_ / "stdout", tmp_ / "stderr",
      {preload, "UFSPACK_TEST_PREAD_DELAY_MS=50", asan_options});
  ASSERT_GT(pid, 0);
  // Signal once the first records are in the cache.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    CacheTierStats st;
    if (Cache::Stat(cache_, &st).ok() && st.entries > 0) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << test::ReadFile(tmp_ / "stderr");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  const std::string err = test::ReadFile(tmp_ / "stderr");
  ASSERT_EQ(WEXITSTATUS(status), 130) << err;
  EXPECT_TRUE(Contains(err, "ufspack: interrupted: ")) << err;
  EXPECT_TRUE(Contains(err, "run the same command again to resume")) << err;
  Json j = ParseJson(test::ReadFile(tmp_ / "stdout"));
  EXPECT_FALSE(j["ok"].boolean);
  EXPECT_TRUE(j["interrupted"].boolean);
  EXPECT_EQ(j["exit_code"].Int(), 130);
  const long long added = j["added"].Int();
  EXPECT_GT(added, 0);
  EXPECT_LT(added, 40);
  EXPECT_EQ(Stat(cache_).entries, static_cast<uint64_t>(added));

  // The re-run (full speed) skips what is cached and completes.
  CommandResult again = RunCli({"warmup", pack_, "--cache", cache_, "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  Json a = ParseJson(again.out);
  EXPECT_EQ(a["already_cached"].Int(), added);
  EXPECT_EQ(a["added"].Int(), 40 - added);
  EXPECT_EQ(Stat(cache_).entries, 40u);
  // And every record reads back intact through the cache.
  CommandResult v = RunCli({"verify", pack_, "--cache", cache_, "-q"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
}

// --- help -------------------------------------------------------------------

TEST(CliCacheHelp, EveryCommandExplainsItself) {
  CommandResult main_help = RunCli({"--help"});
  EXPECT_TRUE(Contains(main_help.out, "warmup <pack> --cache <dir>"));
  EXPECT_TRUE(Contains(main_help.out, "cache stat <dir>"));
  EXPECT_TRUE(Contains(main_help.out, "cache clear <dir>"));
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"warmup", "--help"}, "Usage: ufspack warmup"},
      {{"help", "warmup"}, "Usage: ufspack warmup"},
      {{"cache", "--help"}, "Usage: ufspack cache stat"},
      {{"help", "cache"}, "Usage: ufspack cache stat"},
      {{"cache", "stat", "--help"}, "Usage: ufspack cache stat <dir>..."},
      {{"help", "cache", "stat"}, "Usage: ufspack cache stat <dir>..."},
      {{"cache", "clear", "-h"}, "Usage: ufspack cache clear <dir>..."},
      {{"help", "cache", "clear"}, "Usage: ufspack cache clear <dir>..."},
  };
  for (const auto& [args, first] : cases) {
    CommandResult h = RunCli(args);
    EXPECT_EQ(h.exit_code, 0) << args[0];
    EXPECT_EQ(h.out.rfind(first, 0), 0u) << h.out;
  }
  // As for every command: -h is --help, --help wins over anything else on
  // the line, and the help gives the exit status and examples.
  for (const std::vector<std::string>& cmd :
       std::vector<std::vector<std::string>>{
           {"warmup"}, {"cache"}, {"cache", "stat"}, {"cache", "clear"}}) {
    auto with = [&](std::vector<std::string> extra) {
      std::vector<std::string> args = cmd;
      args.insert(args.end(), extra.begin(), extra.end());
      return RunCli(args);
    };
    CommandResult h = with({"--help"});
    EXPECT_EQ(h.exit_code, 0) << cmd.back();
    EXPECT_EQ(with({"-h"}).out, h.out) << cmd.back();
    EXPECT_EQ(with({"--bogus", "--help"}).out, h.out) << cmd.back();
    EXPECT_TRUE(Contains(h.out, "Exit status")) << cmd.back();
    EXPECT_TRUE(Contains(h.out, "Example")) << cmd.back();
  }
  EXPECT_TRUE(Contains(RunCli({"warmup", "--help"}).out,
                       "K, M, G or T (powers of\n1024"));
  for (const char* cmd : {"cat", "verify", "extract"}) {
    EXPECT_TRUE(Contains(RunCli({cmd, "--help"}).out, "--cache <dir>")) << cmd;
  }
  CommandResult u = RunCli({"cache", "stat", "--bogus"});
  EXPECT_EQ(u.exit_code, 2);
  EXPECT_TRUE(Contains(u.err, "see 'ufspack cache stat --help'")) << u.err;
}

}  // namespace
}  // namespace ufspack
