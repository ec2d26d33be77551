// Copyright 2026 The ufspack Authors.
//
// Archives that would give wrong bytes or wrong names (packer/src:
// archive_reader.h, gzip_source.h, tar_header_check.h, byte_source.h):
// gzip trailers (CRC-32, length), multi-member gzip and what may follow
// it, malformed numbers in tar headers (pax records, the size field),
// headers straddling the reader's blocks, and zip names marked UTF-8 read
// under the C locale.
#include "archive_reader.h"

#include <gtest/gtest.h>
#include <locale.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "byte_source.h"
#include "gzip_source.h"
#include "tar_header_check.h"
#include "testutil.h"

namespace ufspack {
namespace internal {
namespace {

using test::TempDir;
using test::WriteFile;

// --- building test archives -------------------------------------------------

// A ustar header block: `size_field` as stored (12 bytes, padded with NULs)
// when given, else `size` in octal; the checksum filled in.
std::string TarHeader(const std::string& name, char type, uint64_t size,
                      const std::string& size_field = "") {
  std::string h(512, '\0');
  std::memcpy(&h[0], name.data(), std::min<size_t>(name.size(), 100));
  std::memcpy(&h[100], "0000644", 7);
  std::memcpy(&h[108], "0000000", 7);
  std::memcpy(&h[116], "0000000", 7);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%011llo",
                static_cast<unsigned long long>(size));
  const std::string sf = size_field.empty() ? std::string(buf) : size_field;
  std::memcpy(&h[124], sf.data(), std::min<size_t>(sf.size(), 12));
  std::memcpy(&h[136], "00000000000", 11);
  h[156] = type;
  std::memcpy(&h[257],
              "ustar\0"
              "00",
              8);
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(buf, sizeof buf, "%06o", sum);
  std::memcpy(&h[148], buf, 7);  // six digits, NUL, then the space
  return h;
}

std::string Padded(std::string s) {
  s.resize((s.size() + 511) / 512 * 512, '\0');
  return s;
}

// "LEN key=value\n" with LEN its own length.
std::string PaxRecord(const std::string& key, const std::string& value) {
  const std::string body = " " + key + "=" + value + "\n";
  size_t len = body.size() + 1;
  while (std::to_string(len).size() + body.size() != len) ++len;
  return std::to_string(len) + body;
}

// A pax 'x' (or 'g') header with `records`, then the member's own header
// and data.
std::string TarMember(const std::string& name, const std::string& data,
                      const std::string& records = "", char pax_type = 'x') {
  std::string out;
  if (!records.empty()) {
    out += TarHeader("PaxHeader/" + name, pax_type, records.size());
    out += Padded(records);
  }
  out += TarHeader(name, '0', data.size());
  out += Padded(data);
  return out;
}

std::string TarEnd() { return std::string(1024, '\0'); }

std::string Gzip(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY),
            Z_OK);
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// A zip (stored) of `entries`: {name bytes, data, UTF-8 flag, Info-ZIP
// Unicode path (0x7075) or empty}.
struct ZipEntry {
  std::string name, data;
  bool utf8_flag;
  std::string unicode_path;
};

std::string Le(uint64_t v, int bytes) {
  std::string s;
  for (int k = 0; k < bytes; ++k) s += static_cast<char>((v >> (8 * k)) & 0xff);
  return s;
}

std::string Zip(const std::vector<ZipEntry>& entries) {
  std::string out, dir;
  auto crc = [](const std::string& s) {
    return crc32(0, reinterpret_cast<const Bytef*>(s.data()),
                 static_cast<uInt>(s.size()));
  };
  for (const ZipEntry& e : entries) {
    std::string extra;
    if (!e.unicode_path.empty()) {
      const std::string body = "\x01" + Le(crc(e.name), 4) + e.unicode_path;
      extra = Le(0x7075, 2) + Le(body.size(), 2) + body;
    }
    const uint16_t flags = e.utf8_flag ? 0x800 : 0;
    const std::string common = Le(20, 2) + Le(flags, 2) + Le(0, 2) + Le(0, 2) +
                               Le(0, 2) + Le(crc(e.data), 4) +
                               Le(e.data.size(), 4) + Le(e.data.size(), 4) +
                               Le(e.name.size(), 2) + Le(extra.size(), 2);
    const size_t at = out.size();
    out += Le(0x04034b50, 4) + common + e.name + extra + e.data;
    dir += Le(0x02014b50, 4) + Le(20, 2) + common + Le(0, 2) + Le(0, 2) +
           Le(0, 2) + Le(0, 4) + Le(at, 4) + e.name + extra;
  }
  const std::string end = Le(0x06054b50, 4) + Le(0, 2) + Le(0, 2) +
                          Le(entries.size(), 2) + Le(entries.size(), 2) +
                          Le(dir.size(), 4) + Le(out.size(), 4) + Le(0, 2);
  return out + dir + end;
}

// A ByteSource over a string, handing out `chunk` bytes at a time.
class StringSource : public ByteSource {
 public:
  StringSource(std::string bytes, size_t chunk)
      : bytes_(std::move(bytes)), chunk_(chunk) {}
  Status Read(const char** data, size_t* n) override {
    *n = std::min(chunk_, bytes_.size() - at_);
    *data = bytes_.data() + at_;
    at_ += *n;
    return Status::OK();
  }
  uint64_t consumed() const override { return at_; }

 private:
  std::string bytes_;
  size_t chunk_;
  size_t at_ = 0;
};

// All of a gzip stream, or the error; *before: the bytes read before it.
Status Gunzip(const std::string& gz, size_t chunk, std::string* out) {
  StringSource in(gz, chunk);
  GzipByteSource g(&in);
  out->clear();
  for (;;) {
    const char* p = nullptr;
    size_t n = 0;
    UFSPACK_RETURN_IF_ERROR(g.Read(&p, &n));
    if (n == 0) return Status::OK();
    out->append(p, n);
  }
}

// Every member of the archive at `path`: name -> bytes, or the error.
Status ReadAll(const std::string& path,
               std::vector<std::pair<std::string, std::string>>* members) {
  std::unique_ptr<ArchiveReader> r;
  UFSPACK_RETURN_IF_ERROR(ArchiveReader::Open(path, &r));
  members->clear();
  for (;;) {
    ArchiveMember m;
    bool more = false;
    UFSPACK_RETURN_IF_ERROR(r->Next(&m, &more));
    if (!more) return Status::OK();
    std::string bytes(m.size + 1, '\0');
    size_t have = 0, got = 0;
    do {
      UFSPACK_RETURN_IF_ERROR(r->Read(&bytes[have], bytes.size() - have, &got));
      have += got;
    } while (got > 0 && have < bytes.size());
    bytes.resize(have);
    members->emplace_back(m.name, bytes);
  }
}

// --- CheckTarHeaders
// ----------------------------------------------------------

TEST(TarHeaderCheckTest, WellFormedHeadersPass) {
  const std::string chain = TarMember(
      "c/a.jpg", "12 bytes....",
      PaxRecord("size", "12") + PaxRecord("mtime", "1700000000.25") +
          PaxRecord("mtime", "-3") + PaxRecord("path", "c/a.jpg") +
          PaxRecord("GNU.sparse.map", "0,5,10,2") + PaxRecord("uid", "000123"));
  EXPECT_TRUE(CheckTarHeaders(chain, 0).ok());
  // The size field as GNU, star and V7 tar write it; base-256; empty.
  for (const std::string& f :
       {std::string("00000000014\0", 12), std::string("00000000014 "),
        std::string("          14"),
        std::string("\x80\0\0\0\0\0\0\0\0\0\0\x0c", 12),
        std::string(12, '\0')}) {
    EXPECT_TRUE(CheckTarHeaders(TarHeader("a", '0', 12, f), 0).ok()) << f;
  }
}

TEST(TarHeaderCheckTest, PaxSizeWithLettersIsCorruptionShowingIt) {
  const std::string chain =
      TarEnd() +
      TarMember("c/a.jpg", std::string(20, 'A'), PaxRecord("size", "12abc"));
  const Status s = CheckTarHeaders(std::string_view(chain).substr(1024), 1024);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_EQ(s.message(),
            "pax extended header at byte 1024: 'size' is '12abc', expected an "
            "unsigned decimal number");
}

TEST(TarHeaderCheckTest, EveryMalformedNumberIsCorruption) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"size", ""},
      {"size", "-1"},
      {"size", " 12"},
      {"size", "12 "},
      {"size", "0x10"},
      {"size", "9223372036854775808"},
      {"uid", "1.5"},
      {"gid", "abc"},
      {"mtime", "1e9"},
      {"mtime", "."},
      {"atime", "12.3.4"},
      {"GNU.sparse.size", "7k"},
      {"GNU.sparse.map", "0,,5"},
      {"SCHILY.realsize", "+5"},
      {"GNU.sparse.realsize", "1 2"}};
  for (const auto& [key, value] : bad) {
    const Status s =
        CheckTarHeaders(TarMember("a", "x", PaxRecord(key, value)), 0);
    EXPECT_TRUE(s.IsCorruption()) << key << "=" << value;
    EXPECT_NE(s.message().find("'" + key + "' is"), std::string_view::npos)
        << s.message();
  }
  EXPECT_TRUE(
      CheckTarHeaders(
          TarMember("a", "x", PaxRecord("size", "0009223372036854775807")), 0)
          .ok());
}

TEST(TarHeaderCheckTest, MalformedRecordsAreCorruption) {
  for (const std::string& body :
       {std::string("13 size=12\n"),  // says 13 bytes, has 11
        std::string("11 size:12\n"),  // no '='
        std::string("11 size=123"),   // no newline
        std::string("x1 size=12\n"), std::string("11size=12\n "),
        std::string("6 =12\n")}) {
    const Status s = CheckTarHeaders(TarMember("a", "x", body), 0);
    EXPECT_TRUE(s.IsCorruption()) << body;
    EXPECT_NE(s.message().find("malformed record"), std::string_view::npos)
        << s.message();
  }
  // Records end at a NUL (what follows is padding to libarchive).
  EXPECT_TRUE(CheckTarHeaders(
                  TarMember("a", "x",
                            PaxRecord("size", "1") + std::string("\0junk", 5)),
                  0)
                  .ok());
}

TEST(TarHeaderCheckTest, GlobalHeaderSettingSizeIsRefused) {
  const Status s =
      CheckTarHeaders(TarMember("a", "x", PaxRecord("size", "1"), 'g'), 0);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("global"), std::string_view::npos);
  EXPECT_TRUE(
      CheckTarHeaders(TarMember("a", "x", PaxRecord("comment", "hi"), 'g'), 0)
          .ok());
}

TEST(TarHeaderCheckTest, SizeFieldMustBeOctal) {
  // libarchive reads "0000012x45" as 012 = 10 bytes.
  Status s = CheckTarHeaders(
      TarHeader("a", '0', 0, std::string("0000012x45\0", 11)), 512);
  ASSERT_TRUE(s.IsCorruption());
  EXPECT_EQ(s.message(),
            "tar header at byte 512: the size field '0000012x45\\x00\\x00' is "
            "not an octal number");
  for (const std::string& f : {std::string("00000000019"), std::string("+12"),
                               std::string("\xff\xff\xff\xff\xff\xff\xff\xff"
                                           "\xff\xff\xff\xfe")}) {
    EXPECT_TRUE(CheckTarHeaders(TarHeader("a", '0', 0, f), 0).IsCorruption())
        << f;
  }
  // In a GNU long-name header too, and in the header after it.
  const std::string longname = "d/" + std::string(150, 'n');
  const std::string chain = TarHeader("././@LongLink", 'L', longname.size()) +
                            Padded(longname) +
                            TarHeader("short", '0', 0, "12z");
  s = CheckTarHeaders(chain, 0);
  ASSERT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("tar header at byte 1024"), std::string_view::npos)
      << s.message();
}

TEST(TarHeaderCheckTest, LongValuesAreShownEscapedAndCut) {
  const std::string value = "1" + std::string(100, 'z') + "\x01";
  const Status s =
      CheckTarHeaders(TarMember("a", "x", PaxRecord("size", value)), 0);
  ASSERT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("'1" + std::string(39, 'z') + "...'"),
            std::string_view::npos)
      << s.message();
}

// --- GzipByteSource
// -------------------------------------------------------------

TEST(GzipSourceTest, MultiMemberAndZeroPaddingRoundTrip) {
  const std::string a = test::RandomBytes(300000, 1);
  const std::string b = test::CompressibleBytes(200000, 2);
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{4096}, kSourceBlockSize}) {
    std::string out;
    ASSERT_TRUE(
        Gunzip(Gzip(a) + Gzip(b) + std::string(777, '\0'), chunk, &out).ok())
        << chunk;
    EXPECT_TRUE(out == a + b) << chunk;
  }
}

TEST(GzipSourceTest, CrcMismatchIsCorruptionWithStoredAndComputed) {
  const std::string data = test::RandomBytes(50000, 3);
  std::string gz = Gzip(data);
  gz[gz.size() - 8] ^= 0x01;  // the CRC-32's low byte
  const uint32_t crc = crc32(0, reinterpret_cast<const Bytef*>(data.data()),
                             static_cast<uInt>(data.size()));
  char want[96];
  std::snprintf(want, sizeof want, "stored 0x%08x, computed 0x%08x",
                static_cast<unsigned>(crc ^ 1), static_cast<unsigned>(crc));
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{4096}, kSourceBlockSize}) {
    std::string out;
    const Status s = Gunzip(gz, chunk, &out);
    ASSERT_TRUE(s.IsCorruption()) << chunk;
    EXPECT_NE(s.message().find("CRC-32 mismatch in gzip member 1"),
              std::string_view::npos)
        << s.message();
    EXPECT_NE(s.message().find(want), std::string_view::npos) << s.message();
    // The bytes before the trailer went out first.
    EXPECT_TRUE(out == data) << chunk;
  }
}

TEST(GzipSourceTest, LengthMismatchIsCorruption) {
  std::string gz = Gzip("hello") + Gzip("world");
  gz[gz.size() - 1] ^= 0x01;  // ISIZE's high byte of member 2
  std::string out;
  const Status s = Gunzip(gz, 5, &out);
  ASSERT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("length mismatch in gzip member 2"),
            std::string_view::npos)
      << s.message();
  EXPECT_NE(s.message().find("the trailer says 16777221 bytes"),
            std::string_view::npos)
      << s.message();
}

TEST(GzipSourceTest, TruncatedAndTrailingGarbageAreCorruption) {
  const std::string gz = Gzip(test::RandomBytes(10000, 4));
  std::string out;
  Status s = Gunzip(gz.substr(0, gz.size() - 3), 100, &out);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("truncated"), std::string_view::npos);
  s = Gunzip(gz + "garbage", 100, &out);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("trailing garbage"), std::string_view::npos)
      << s.message();
  s = Gunzip(gz + std::string(20, '\0') + "x", 100, &out);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("trailing garbage"), std::string_view::npos)
      << s.message();
}

// --- StreamWindow
// ----------------------------------------------------------------

TEST(StreamWindowTest, HoldsFromTheKeptPositionAcrossBlocks) {
  // One buffer, reused for every block as a source does.
  StreamWindow w;
  std::string buf;
  auto hand = [&](const std::string& block) {
    w.Retire();
    buf = block;
    w.Handed(buf.data(), buf.size());
  };
  std::string scratch;
  std::string_view got;
  hand("0123456789");
  w.KeepFrom(7);
  hand("abcdefghij");
  hand("ABCDEFGHIJ");
  ASSERT_TRUE(w.Get(7, 23, &scratch, &got));
  EXPECT_EQ(got, "789abcdefghijABC");
  EXPECT_FALSE(w.Get(6, 8, &scratch, &got));  // dropped
  w.KeepFrom(25);
  hand("0123");
  ASSERT_TRUE(w.Get(25, 34, &scratch, &got));
  EXPECT_EQ(got, "FGHIJ0123");
  w.Skipped(100);
  EXPECT_EQ(w.end(), 134u);
  EXPECT_FALSE(w.Get(30, 31, &scratch, &got));
}

// --- ArchiveReader
// ---------------------------------------------------------------

// A tar whose second member's pax header starts 512 bytes before the
// reader's 1 MiB block boundary, so its records are in the next block, a
// whole one (the source reuses the first block's memory for it).
std::string TarStraddling(const std::string& size_value) {
  const std::string first(kSourceBlockSize - 1024, 'a');
  return TarMember("c/first.bin", first) +
         TarMember("c/second.bin", std::string(20, 'B'),
                   PaxRecord("size", size_value)) +
         TarMember("c/third.bin", test::RandomBytes(kSourceBlockSize, 5)) +
         TarEnd();
}

TEST(ArchiveReaderTest, PaxSizeAcrossABlockBoundaryIsCorruption) {
  TempDir dir;
  const std::string tar = TarStraddling("12abc");
  ASSERT_EQ(tar.find("PaxHeader/c/second"), kSourceBlockSize - 512);
  for (const auto& [name, bytes] :
       {std::pair{std::string("x.tar"), tar},
        std::pair{std::string("x.tar.gz"), Gzip(tar)}}) {
    WriteFile(dir / name, bytes);
    std::vector<std::pair<std::string, std::string>> members;
    const Status s = ReadAll(dir / name, &members);
    ASSERT_TRUE(s.IsCorruption()) << name << ": " << s.ToString();
    EXPECT_EQ(s.message(), dir / name +
                               ", member 'c/second.bin': pax extended header "
                               "at byte 1048064: 'size' is '12abc', expected "
                               "an unsigned decimal number");
  }
  // Well formed, the same layout reads whole.
  WriteFile(dir / "ok.tar.gz", Gzip(TarStraddling("20")));
  std::vector<std::pair<std::string, std::string>> members;
  ASSERT_TRUE(ReadAll(dir / "ok.tar.gz", &members).ok());
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[1].second, std::string(20, 'B'));
}

TEST(ArchiveReaderTest, GzipTrailerIsCheckedBeforeTheEnd) {
  TempDir dir;
  const std::string tar =
      TarMember("c/a.jpg", "AAAA") + TarMember("c/b.jpg", "BBBB") + TarEnd();
  std::string gz = Gzip(tar);
  gz[gz.size() - 6] ^= 0x10;
  WriteFile(dir / "x.tar.gz", gz);
  std::vector<std::pair<std::string, std::string>> members;
  const Status s = ReadAll(dir / "x.tar.gz", &members);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_EQ(members.size(), 2u);  // read, then refused at the end
  EXPECT_NE(s.message().find(dir / "x.tar.gz" +
                             ", after its last member 'c/b.jpg': gzip data "
                             "damaged: CRC-32 mismatch in gzip member 1"),
            std::string_view::npos)
      << s.message();
  // Multi-member with zero padding reads.
  WriteFile(dir / "m.tar.gz", Gzip(tar.substr(0, 700)) + Gzip(tar.substr(700)) +
                                  std::string(512, '\0'));
  ASSERT_TRUE(ReadAll(dir / "m.tar.gz", &members).ok());
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[1],
            (std::pair<std::string, std::string>{"c/b.jpg", "BBBB"}));
}

TEST(ArchiveReaderTest, ZipUtf8NamesReadUnderEveryLocale) {
  TempDir dir;
  const std::string e_acute = "\xc3\xa9", nihon = "\xe6\x97\xa5\xe6\x9c\xac";
  WriteFile(dir / "u.zip",
            Zip({{"c/" + e_acute + ".jpg", "1", true, ""},
                 {"c/" + nihon + ".jpg", "2", true, ""},
                 // CP437 bytes in the name, UTF-8 in Info-ZIP's field.
                 {"c/\x82t\x82.jpg", "3", false,
                  "c/" + e_acute + "t" + e_acute + ".jpg"},
                 // Not marked: the bytes as stored.
                 {"c/\xff.jpg", "4", false, ""}}));
  const std::vector<std::pair<std::string, std::string>> want = {
      {"c/" + e_acute + ".jpg", "1"},
      {"c/" + nihon + ".jpg", "2"},
      {"c/" + e_acute + "t" + e_acute + ".jpg", "3"},
      {"c/\xff.jpg", "4"}};
  const std::string saved = setlocale(LC_ALL, nullptr);
  for (const char* loc : {"C", "C.UTF-8"}) {
    if (setlocale(LC_ALL, loc) == nullptr) continue;
    std::vector<std::pair<std::string, std::string>> members;
    const Status s = ReadAll(dir / "u.zip", &members);
    EXPECT_TRUE(s.ok()) << loc << ": " << s.ToString();
    EXPECT_EQ(members, want) << loc;
  }
  setlocale(LC_ALL, saved.c_str());
  // Marked UTF-8 but not: refused, saying which.
  WriteFile(dir / "bad.zip",
            Zip({{"c/ok.jpg", "1", true, ""}, {"c/\xff.jpg", "2", true, ""}}));
  std::vector<std::pair<std::string, std::string>> members;
  const Status s = ReadAll(dir / "bad.zip", &members);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("member 2 (after 'c/ok.jpg'): its name cannot "
                             "be read"),
            std::string_view::npos)
      << s.message();
}

}  // namespace
}  // namespace internal
}  // namespace ufspack
