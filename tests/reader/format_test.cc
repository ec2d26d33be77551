// Copyright 2026 The ufspack Authors.
//
// Tests for the on-disk structures in ufspack/format.h and the fixed-width
// helpers in ufspack/coding.h: exact encodings, one test per decoding rule
// and per layout rule.
#include "ufspack/format.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ufspack/coding.h"

namespace ufspack {
namespace {

// Whether `haystack` contains `needle`, printing both when it does not.
::testing::AssertionResult Contains(std::string_view haystack,
                                    std::string_view needle) {
  if (haystack.find(needle) != std::string_view::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "\"" << haystack << "\" does not contain \"" << needle << "\"";
}

uint8_t Byte(const std::string& s, size_t i) {
  return static_cast<uint8_t>(s[i]);
}

PackId SamplePackId() {
  PackId id;
  for (int i = 0; i < 16; ++i) id.bytes[i] = static_cast<uint8_t>(0xA0 + i);
  return id;
}

// A header whose sections describe a consistent index: 3 records, 2
// classes, 8 lookup slots, a 20-byte name pool and 24 bytes of metadata,
// back to back after the 176-byte header.
IndexHeader ValidHeader() {
  IndexHeader h;
  h.version = kFormatVersion;
  h.record_size = RecordEntry::kEncodedLength;
  h.pack_id = SamplePackId();
  h.record_count = 3;
  h.class_count = 2;
  h.data_size = DataHeader::kEncodedLength + 100;
  h.records = {176, 3 * 56};                // [176, 344)
  h.classes = {344, 2 * 32};                // [344, 408)
  h.lookup = {408, LookupSlotsFor(3) * 4};  // [408, 440)
  h.names = {440, 20};                      // [440, 460)
  h.meta = {460, 24};                       // [460, 484)
  h.index_size = 484;
  h.body_checksum = 0x1122334455667788ull;
  return h;
}

std::string Encode(const IndexHeader& h) {
  std::string s;
  h.EncodeTo(&s);
  return s;
}

// Recomputes the header checksum of an encoded index header after a test
// patched some of its bytes.
void Reseal(std::string* enc) {
  EncodeFixed64(&(*enc)[IndexHeader::kHeaderChecksumOffset],
                Checksum64(enc->data(), IndexHeader::kHeaderChecksumOffset));
}

Status DecodeIndex(const std::string& enc, IndexHeader* out) {
  std::string_view in(enc);
  return out->DecodeFrom(&in);
}

Status DecodeIndex(const std::string& enc) {
  IndexHeader h;
  return DecodeIndex(enc, &h);
}

// ---------------------------------------------------------------------------
// coding.h
// ---------------------------------------------------------------------------

TEST(CodingTest, Fixed32IsLittleEndian) {
  char buf[4];
  EncodeFixed32(buf, 0x04030201u);
  EXPECT_EQ(buf[0], 0x01);
  EXPECT_EQ(buf[1], 0x02);
  EXPECT_EQ(buf[2], 0x03);
  EXPECT_EQ(buf[3], 0x04);
  EXPECT_EQ(DecodeFixed32(buf), 0x04030201u);
}

TEST(CodingTest, Fixed64IsLittleEndian) {
  char buf[8];
  EncodeFixed64(buf, 0x0807060504030201ull);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(buf[i], i + 1) << i;
  EXPECT_EQ(DecodeFixed64(buf), 0x0807060504030201ull);
}

TEST(CodingTest, Fixed16RoundTrip) {
  char buf[2];
  EncodeFixed16(buf, 0xBEEF);
  EXPECT_EQ(static_cast<uint8_t>(buf[0]), 0xEF);
  EXPECT_EQ(static_cast<uint8_t>(buf[1]), 0xBE);
  EXPECT_EQ(DecodeFixed16(buf), 0xBEEF);
}

TEST(CodingTest, DecodeHandlesHighBitsAndUnalignedInput) {
  char buf[16] = {};
  EncodeFixed64(buf + 3, 0xFEDCBA9876543210ull);
  EXPECT_EQ(DecodeFixed64(buf + 3), 0xFEDCBA9876543210ull);
  EncodeFixed32(buf + 1, 0xFFFFFFFFu);
  EXPECT_EQ(DecodeFixed32(buf + 1), 0xFFFFFFFFu);
}

TEST(CodingTest, PutFixedAppends) {
  std::string s = "x";
  PutFixed32(&s, 7);
  PutFixed64(&s, UINT64_MAX);
  ASSERT_EQ(s.size(), 1u + 4 + 8);
  EXPECT_EQ(DecodeFixed32(s.data() + 1), 7u);
  EXPECT_EQ(DecodeFixed64(s.data() + 5), UINT64_MAX);
}

// ---------------------------------------------------------------------------
// Constants, checksums, pack ids
// ---------------------------------------------------------------------------

TEST(FormatConstantsTest, MagicBytes) {
  EXPECT_EQ(std::string(kDataMagic, 8), std::string("\x89UFSDAT\n", 8));
  EXPECT_EQ(std::string(kIndexMagic, 8), std::string("\x89UFSIDX\n", 8));
  EXPECT_EQ(kFormatVersion, 1u);
  EXPECT_LE(kMinReadableVersion, kFormatVersion);
  EXPECT_GE(kMaxReadableVersion, kFormatVersion);
}

TEST(ChecksumTest, KnownAnswerForEmptyInput) {
  EXPECT_EQ(Checksum64("", 0), 0x2d06800538d394c2ull);
}

TEST(ChecksumTest, IsXxh3SeedZero) {
  const std::string s = "cats/cat.1.jpg";
  EXPECT_EQ(Checksum64(s.data(), s.size()), XXH3_64bits(s.data(), s.size()));
  EXPECT_EQ(NameHash(s), XXH3_64bits(s.data(), s.size()));
  EXPECT_NE(Checksum64("a", 1), Checksum64("b", 1));
}

TEST(ChecksumTest, NameHashTagIsHigh32Bits) {
  EXPECT_EQ(NameHashTag(0x123456789ABCDEF0ull), 0x12345678u);
  EXPECT_EQ(LookupHome(0x123456789ABCDEF0ull, 16), 0x0u);
  EXPECT_EQ(LookupHome(0x123456789ABCDEF7ull, 8), 7u);
}

TEST(PackIdTest, OfIsDeterministic) {
  const std::string body = "index body bytes";
  EXPECT_EQ(PackId::Of(body.data(), body.size()),
            PackId::Of(body.data(), body.size()));
  const std::string other = "index body bytez";
  EXPECT_NE(PackId::Of(body.data(), body.size()),
            PackId::Of(other.data(), other.size()));
}

TEST(PackIdTest, OfIsXxh3_128LowThenHighLittleEndian) {
  const std::string body = "abc";
  const XXH128_hash_t h = XXH3_128bits(body.data(), body.size());
  const PackId id = PackId::Of(body.data(), body.size());
  char raw[16];
  std::memcpy(raw, id.bytes.data(), 16);
  EXPECT_EQ(DecodeFixed64(raw), h.low64);
  EXPECT_EQ(DecodeFixed64(raw + 8), h.high64);
  EXPECT_EQ(id.bytes[0], static_cast<uint8_t>(h.low64 & 0xff));
  EXPECT_EQ(id.bytes[15], static_cast<uint8_t>(h.high64 >> 56));
}

TEST(PackIdTest, ToHexIsLowerCaseInByteOrder) {
  PackId id;
  for (int i = 0; i < 16; ++i) id.bytes[i] = static_cast<uint8_t>(i * 17);
  EXPECT_EQ(id.ToHex(), "00112233445566778899aabbccddeeff");
  EXPECT_EQ(PackId().ToHex(), std::string(32, '0'));
}

TEST(LookupSlotsTest, SmallestPowerOfTwoAtLeastTwiceCount) {
  EXPECT_EQ(LookupSlotsFor(0), 0u);
  EXPECT_EQ(LookupSlotsFor(1), 2u);
  EXPECT_EQ(LookupSlotsFor(2), 4u);
  EXPECT_EQ(LookupSlotsFor(3), 8u);
  EXPECT_EQ(LookupSlotsFor(4), 8u);
  EXPECT_EQ(LookupSlotsFor(5), 16u);
  EXPECT_EQ(LookupSlotsFor(1000), 2048u);
  EXPECT_EQ(LookupSlotsFor(1024), 2048u);
  EXPECT_EQ(LookupSlotsFor(1025), 4096u);
  EXPECT_EQ(LookupSlotsFor(kMaxRecords), 1ull << 33);
}

TEST(CodecTest, Names) {
  EXPECT_STREQ(CodecName(Codec::kRaw), "raw");
  EXPECT_STREQ(CodecName(Codec::kZstd), "zstd");
  EXPECT_STREQ(CodecName(static_cast<Codec>(9)), "unknown");
}

// ---------------------------------------------------------------------------
// DataHeader
// ---------------------------------------------------------------------------

TEST(DataHeaderTest, EncodedLengthIs64) {
  DataHeader h;
  std::string s = "prefix";
  h.EncodeTo(&s);
  EXPECT_EQ(s.size(), 6 + DataHeader::kEncodedLength);
  EXPECT_EQ(DataHeader::kEncodedLength, 64u);
}

TEST(DataHeaderTest, RoundTrip) {
  DataHeader h;
  h.pack_id = SamplePackId();
  std::string s;
  h.EncodeTo(&s);
  s += "tail";
  std::string_view in(s);
  DataHeader d;
  ASSERT_TRUE(d.DecodeFrom(&in).ok());
  EXPECT_EQ(d.version, kFormatVersion);
  EXPECT_EQ(d.pack_id, h.pack_id);
  EXPECT_EQ(in, "tail");  // consumed exactly 64 bytes
}

TEST(DataHeaderTest, FieldPositions) {
  DataHeader h;
  h.pack_id = SamplePackId();
  std::string s;
  h.EncodeTo(&s);
  EXPECT_EQ(s.substr(0, 8), std::string(kDataMagic, 8));
  // version 1 at offset 8, little-endian.
  EXPECT_EQ(Byte(s, 8), 1);
  EXPECT_EQ(Byte(s, 9), 0);
  EXPECT_EQ(Byte(s, 11), 0);
  // header size 64 at offset 12.
  EXPECT_EQ(Byte(s, 12), 64);
  EXPECT_EQ(Byte(s, 13), 0);
  // pack id at 16..31, byte for byte.
  for (int i = 0; i < 16; ++i) EXPECT_EQ(Byte(s, 16 + i), 0xA0 + i) << i;
  // reserved 32..63 zero.
  EXPECT_EQ(s.substr(32), std::string(32, '\0'));
}

TEST(DataHeaderTest, BadMagicIsCorruption) {
  std::string s;
  DataHeader().EncodeTo(&s);
  s[4] = 'X';
  std::string_view in(s);
  DataHeader d;
  Status st = d.DecodeFrom(&in);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "not a ufspack data file"));
  EXPECT_EQ(in.size(), s.size());  // nothing consumed
}

TEST(DataHeaderTest, IndexMagicIsNotADataFile) {
  std::string s;
  IndexHeader h = ValidHeader();
  h.EncodeTo(&s);
  std::string_view in(s);
  DataHeader d;
  Status st = d.DecodeFrom(&in);
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_TRUE(Contains(st.message(), "not a ufspack data file"));
}

TEST(DataHeaderTest, UnsupportedVersionIsNotSupported) {
  DataHeader h;
  h.version = 2;
  std::string s;
  h.EncodeTo(&s);
  std::string_view in(s);
  DataHeader d;
  Status st = d.DecodeFrom(&in);
  EXPECT_TRUE(st.IsNotSupported()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "version 2"));
  EXPECT_TRUE(Contains(st.message(), "1..1"));
}

TEST(DataHeaderTest, VersionZeroIsNotSupported) {
  DataHeader h;
  h.version = 0;
  std::string s;
  h.EncodeTo(&s);
  std::string_view in(s);
  DataHeader d;
  Status st = d.DecodeFrom(&in);
  EXPECT_TRUE(st.IsNotSupported()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "version 0"));
}

TEST(DataHeaderTest, ShortInputIsCorruption) {
  std::string s;
  DataHeader().EncodeTo(&s);
  s.resize(40);
  std::string_view in(s);
  DataHeader d;
  Status st = d.DecodeFrom(&in);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "64"));
  EXPECT_TRUE(Contains(st.message(), "found 40"));
  EXPECT_EQ(in.size(), 40u);
}

TEST(DataHeaderTest, EmptyInputIsBadMagic) {
  std::string_view in;
  DataHeader d;
  Status st = d.DecodeFrom(&in);
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_TRUE(Contains(st.message(), "not a ufspack data file"));
}

TEST(DataHeaderTest, WrongHeaderSizeIsCorruption) {
  std::string s;
  DataHeader().EncodeTo(&s);
  EncodeFixed32(&s[12], 65);
  std::string_view in(s);
  DataHeader d;
  Status st = d.DecodeFrom(&in);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "expected 64, found 65"));
}

TEST(DataHeaderTest, NonZeroReservedIsCorruption) {
  std::string s;
  DataHeader().EncodeTo(&s);
  s[63] = 1;
  std::string_view in(s);
  DataHeader d;
  Status st = d.DecodeFrom(&in);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "reserved"));
}

// ---------------------------------------------------------------------------
// IndexHeader: encoding and decoding
// ---------------------------------------------------------------------------

TEST(IndexHeaderTest, EncodedLengthIs176) {
  std::string s = Encode(ValidHeader());
  EXPECT_EQ(s.size(), IndexHeader::kEncodedLength);
  EXPECT_EQ(IndexHeader::kEncodedLength, 176u);
  EXPECT_EQ(IndexHeader::kHeaderChecksumOffset, 168u);
}

TEST(IndexHeaderTest, RoundTripKeepsEveryField) {
  IndexHeader h = ValidHeader();
  h.optional_flags = kOptionalFlagFlat | (1u << 9);
  h.class_count = 0;
  std::string s = Encode(h) + "body";
  std::string_view in(s);
  IndexHeader d;
  ASSERT_TRUE(d.DecodeFrom(&in).ok());
  EXPECT_EQ(in, "body");
  EXPECT_EQ(d.version, h.version);
  EXPECT_EQ(d.required_flags, 0u);
  EXPECT_EQ(d.optional_flags, h.optional_flags);
  EXPECT_TRUE(d.flat());
  EXPECT_EQ(d.checksum_type, ChecksumType::kXXH3_64);
  EXPECT_EQ(d.record_size, 56u);
  EXPECT_EQ(d.pack_id, h.pack_id);
  EXPECT_EQ(d.record_count, h.record_count);
  EXPECT_EQ(d.class_count, h.class_count);
  EXPECT_EQ(d.data_size, h.data_size);
  EXPECT_EQ(d.index_size, h.index_size);
  EXPECT_EQ(d.records.offset, h.records.offset);
  EXPECT_EQ(d.records.size, h.records.size);
  EXPECT_EQ(d.classes.offset, h.classes.offset);
  EXPECT_EQ(d.classes.size, h.classes.size);
  EXPECT_EQ(d.lookup.offset, h.lookup.offset);
  EXPECT_EQ(d.lookup.size, h.lookup.size);
  EXPECT_EQ(d.lookup_slots(), 8u);
  EXPECT_EQ(d.names.offset, h.names.offset);
  EXPECT_EQ(d.names.size, h.names.size);
  EXPECT_EQ(d.meta.offset, h.meta.offset);
  EXPECT_EQ(d.meta.size, h.meta.size);
  EXPECT_EQ(d.body_checksum, h.body_checksum);
}

TEST(IndexHeaderTest, FieldPositionsAreLittleEndian) {
  IndexHeader h = ValidHeader();
  h.record_count = 0x0102030405060708ull;
  h.data_size = 0x1112131415161718ull;
  h.optional_flags = 0xA1B2C3D4u;
  h.body_checksum = 0xCAFEBABEDEADBEEFull;
  h.names.size = 0x99;
  h.meta = {0x0A0B0C0D0E0F1011ull, 0x77};
  std::string s = Encode(h);
  EXPECT_EQ(s.substr(0, 8), std::string(kIndexMagic, 8));
  EXPECT_EQ(Byte(s, 8), 1);     // version
  EXPECT_EQ(Byte(s, 12), 176);  // header size
  EXPECT_EQ(Byte(s, 13), 0);
  EXPECT_EQ(Byte(s, 20), 0xD4);  // optional flags, low byte first
  EXPECT_EQ(Byte(s, 23), 0xA1);
  EXPECT_EQ(Byte(s, 24), 1);     // checksum type XXH3-64
  EXPECT_EQ(Byte(s, 28), 56);    // record size
  EXPECT_EQ(Byte(s, 32), 0xA0);  // pack id
  EXPECT_EQ(Byte(s, 47), 0xAF);
  EXPECT_EQ(Byte(s, 48), 0x08);  // record count
  EXPECT_EQ(Byte(s, 55), 0x01);
  EXPECT_EQ(Byte(s, 64), 0x18);  // data size
  EXPECT_EQ(Byte(s, 71), 0x11);
  EXPECT_EQ(DecodeFixed64(s.data() + 72), 484u);   // index size
  EXPECT_EQ(DecodeFixed64(s.data() + 80), 176u);   // records.offset
  EXPECT_EQ(DecodeFixed64(s.data() + 88), 168u);   // records.size
  EXPECT_EQ(DecodeFixed64(s.data() + 96), 344u);   // classes.offset
  EXPECT_EQ(DecodeFixed64(s.data() + 104), 64u);   // classes.size
  EXPECT_EQ(DecodeFixed64(s.data() + 112), 408u);  // lookup.offset
  EXPECT_EQ(DecodeFixed64(s.data() + 120), 32u);   // lookup.size
  EXPECT_EQ(DecodeFixed64(s.data() + 128), 440u);  // names.offset
  EXPECT_EQ(Byte(s, 136), 0x99);                   // names.size
  EXPECT_EQ(Byte(s, 144), 0x11);                   // meta.offset
  EXPECT_EQ(Byte(s, 151), 0x0A);
  EXPECT_EQ(DecodeFixed64(s.data() + 152), 0x77u);  // meta.size
  EXPECT_EQ(Byte(s, 160), 0xEF);                    // body checksum
  EXPECT_EQ(Byte(s, 167), 0xCA);
  EXPECT_EQ(DecodeFixed64(s.data() + 168), Checksum64(s.data(), 168));
}

TEST(IndexHeaderTest, BadMagicIsCorruption) {
  std::string s = Encode(ValidHeader());
  s[0] = 'I';
  Status st = DecodeIndex(s);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "not a ufspack index"));
}

TEST(IndexHeaderTest, DataMagicIsNotAnIndex) {
  std::string s;
  DataHeader().EncodeTo(&s);
  s.resize(IndexHeader::kEncodedLength, '\0');
  Status st = DecodeIndex(s);
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_TRUE(Contains(st.message(), "not a ufspack index"));
}

TEST(IndexHeaderTest, JpegIsNotAnIndex) {
  std::string s("\xFF\xD8\xFF\xE0\x00\x10JFIF\x00", 11);
  s.resize(400, 'j');
  Status st = DecodeIndex(s);
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_TRUE(Contains(st.message(), "not a ufspack index"));
}

TEST(IndexHeaderTest, ShortInputIsTruncatedCorruption) {
  std::string s = Encode(ValidHeader());
  s.resize(100);
  std::string_view in(s);
  IndexHeader d;
  Status st = d.DecodeFrom(&in);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "truncated"));
  EXPECT_TRUE(Contains(st.message(), "found 100"));
  EXPECT_EQ(in.size(), 100u);
}

TEST(IndexHeaderTest, UnsupportedVersionIsNotSupported) {
  IndexHeader h = ValidHeader();
  h.version = 7;
  Status st = DecodeIndex(Encode(h));  // checksum is valid for version 7
  EXPECT_TRUE(st.IsNotSupported()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "version 7"));
  EXPECT_TRUE(Contains(st.message(), "this build reads 1..1"));
}

TEST(IndexHeaderTest, VersionIsCheckedBeforeHeaderChecksum) {
  // A newer writer may change the header layout, checksum included, so a
  // version this build cannot read must be reported as such.
  std::string s = Encode(ValidHeader());
  EncodeFixed32(&s[8], 2);  // checksum now stale
  Status st = DecodeIndex(s);
  EXPECT_TRUE(st.IsNotSupported()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "version 2"));
}

TEST(IndexHeaderTest, HeaderChecksumMismatchIsCorruption) {
  std::string s = Encode(ValidHeader());
  s[64] ^= 0x01;  // data size, covered by the header checksum
  Status st = DecodeIndex(s);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "checksum mismatch"));
  EXPECT_TRUE(Contains(st.message(), "expected 0x"));
  EXPECT_TRUE(Contains(st.message(), "found 0x"));
}

TEST(IndexHeaderTest, DamagedStoredChecksumIsCorruption) {
  std::string s = Encode(ValidHeader());
  s[IndexHeader::kEncodedLength - 1] ^= 0x80;  // stored header checksum
  Status st = DecodeIndex(s);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "checksum mismatch"));
}

TEST(IndexHeaderTest, WrongHeaderSizeIsCorruption) {
  std::string s = Encode(ValidHeader());
  EncodeFixed32(&s[12], 160);  // the size before the metadata section
  Reseal(&s);
  Status st = DecodeIndex(s);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "expected 176, found 160"));
}

TEST(IndexHeaderTest, UnknownRequiredFlagIsNotSupported) {
  IndexHeader h = ValidHeader();
  h.required_flags = 1u << 3;
  Status st = DecodeIndex(Encode(h));
  EXPECT_TRUE(st.IsNotSupported()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "required flags"));
  EXPECT_TRUE(Contains(st.message(), "0x0000000000000008"));
}

TEST(IndexHeaderTest, UnknownOptionalFlagIsAccepted) {
  IndexHeader h = ValidHeader();
  h.optional_flags = 1u << 31;
  IndexHeader d;
  Status st = DecodeIndex(Encode(h), &d);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(d.optional_flags, 1u << 31);
  EXPECT_FALSE(d.flat());
  EXPECT_TRUE(d.ValidateLayout().ok());
}

TEST(IndexHeaderTest, UnknownChecksumTypeIsNotSupported) {
  IndexHeader h = ValidHeader();
  h.checksum_type = static_cast<ChecksumType>(2);
  Status st = DecodeIndex(Encode(h));
  EXPECT_TRUE(st.IsNotSupported()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "checksum type 2"));
}

TEST(IndexHeaderTest, NonZeroReservedBytesAreCorruption) {
  for (int off = 25; off <= 27; ++off) {
    SCOPED_TRACE(off);
    std::string s = Encode(ValidHeader());
    s[off] = 0x40;
    Reseal(&s);
    Status st = DecodeIndex(s);
    EXPECT_TRUE(st.IsCorruption()) << st.ToString();
    EXPECT_TRUE(Contains(st.message(), "reserved"));
  }
}

TEST(IndexHeaderTest, WrongRecordSizeIsCorruption) {
  IndexHeader h = ValidHeader();
  h.record_size = 64;
  Status st = DecodeIndex(Encode(h));
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "expected 56, found 64"));
}

// ---------------------------------------------------------------------------
// IndexHeader::ValidateLayout
// ---------------------------------------------------------------------------

TEST(ValidateLayoutTest, ConsistentLayoutIsOk) {
  Status st = ValidHeader().ValidateLayout();
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(ValidateLayoutTest, EmptyPackIsOk) {
  IndexHeader h;
  h.record_size = 56;
  h.data_size = 64;
  h.records = {176, 0};
  h.classes = {176, 0};
  h.lookup = {176, 0};
  h.names = {176, 0};
  h.meta = {176, 0};
  h.index_size = 176;
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(ValidateLayoutTest, SectionPastEndIsCorruption) {
  IndexHeader h = ValidHeader();
  h.meta = {460, 0};
  h.index_size = 460;
  h.names.size = 21;  // one byte past index_size
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "name pool"));
  EXPECT_TRUE(Contains(st.message(), "outside the index"));
  EXPECT_TRUE(Contains(st.message(), "index size 460"));
}

TEST(ValidateLayoutTest, SectionStartingPastEndIsCorruption) {
  IndexHeader h = ValidHeader();
  h.names = {485, 0};  // index_size + 1
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "name pool"));
}

TEST(ValidateLayoutTest, SectionInsideHeaderIsCorruption) {
  IndexHeader h = ValidHeader();
  h.records.offset = IndexHeader::kEncodedLength - 8;
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "record table"));
}

TEST(ValidateLayoutTest, OverlappingSectionsAreCorruption) {
  IndexHeader h = ValidHeader();
  h.classes.offset = 336;  // last 8 bytes of the record table
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "overlaps"));
  EXPECT_TRUE(Contains(st.message(), "record table"));
  EXPECT_TRUE(Contains(st.message(), "class table"));
}

TEST(ValidateLayoutTest, OverlapAcrossEmptySectionIsCorruption) {
  // An empty section sorted between two others must not hide their overlap.
  IndexHeader h = ValidHeader();
  h.class_count = 0;
  h.classes = {200, 0};   // inside the record table, but empty
  h.lookup.offset = 316;  // overlaps the record table [176, 344)
  h.names.offset = 348;
  h.meta.offset = 368;
  h.index_size = 392;
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "overlaps"));
}

TEST(ValidateLayoutTest, IdenticalSectionsAreCorruption) {
  IndexHeader h = ValidHeader();
  h.names = h.lookup;  // same bytes, same size
  h.names.size = 20;
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "overlaps"));
}

TEST(ValidateLayoutTest, WrongRecordTableSizeIsCorruption) {
  IndexHeader h = ValidHeader();
  h.records.size = 3 * 56 - 1;
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(
      Contains(st.message(), "record table size: expected 168, found 167"));
}

TEST(ValidateLayoutTest, WrongClassTableSizeIsCorruption) {
  IndexHeader h = ValidHeader();
  h.class_count = 3;
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(
      Contains(st.message(), "class table size: expected 96, found 64"));
}

TEST(ValidateLayoutTest, WrongLookupTableSizeIsCorruption) {
  IndexHeader h = ValidHeader();
  h.lookup.size = 16;  // 4 slots for 3 records: load factor > 1/2
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(
      Contains(st.message(), "lookup table size: expected 32, found 16"));
}

TEST(ValidateLayoutTest, RecordCountOverLimitIsCorruption) {
  IndexHeader h = ValidHeader();
  h.record_count = kMaxRecords + 1;
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "record count"));
  EXPECT_TRUE(Contains(st.message(), std::to_string(kMaxRecords)));
}

TEST(ValidateLayoutTest, HugeRecordCountIsCorruptionNotOverflow) {
  // UINT64_MAX * 56 wraps; the count check must come first.
  IndexHeader h = ValidHeader();
  h.record_count = UINT64_MAX;
  h.records.size = UINT64_MAX * 56;  // what a wrapping multiply would give
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "record count"));
}

TEST(ValidateLayoutTest, ClassCountAtNoLabelIsCorruption) {
  IndexHeader h = ValidHeader();
  h.class_count = kNoLabel;
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "class count"));
}

TEST(ValidateLayoutTest, FlatPackWithClassesIsCorruption) {
  IndexHeader h = ValidHeader();
  h.optional_flags = kOptionalFlagFlat;
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "flat pack with 2 classes"));
}

TEST(ValidateLayoutTest, DataSizeBelowHeaderIsCorruption) {
  IndexHeader h = ValidHeader();
  h.data_size = 63;
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "data size 63"));
}

TEST(ValidateLayoutTest, IndexSizeBelowHeaderIsCorruption) {
  IndexHeader h = ValidHeader();
  h.index_size = 100;
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "index size 100"));
}

TEST(ValidateLayoutTest, MaxOffsetDoesNotWrap) {
  IndexHeader h = ValidHeader();
  h.names = {UINT64_MAX, 20};  // offset + size wraps to 19
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "name pool"));
}

TEST(ValidateLayoutTest, MaxSizeDoesNotWrap) {
  IndexHeader h = ValidHeader();
  h.names = {440, UINT64_MAX};  // 440 + size wraps to 439
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "name pool"));
}

TEST(ValidateLayoutTest, MaxIndexSizeStillBoundsSections) {
  // index_size is untrusted as well: even claiming UINT64_MAX bytes, a
  // section that wraps around is rejected.
  IndexHeader h = ValidHeader();
  h.index_size = UINT64_MAX;
  h.names = {UINT64_MAX - 4, 10};
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
}

// --- The metadata section: any size, in bounds, not overlapping ----------

TEST(ValidateLayoutTest, EmptyMetadataIsOk) {
  IndexHeader h = ValidHeader();
  h.meta = {460, 0};
  h.index_size = 460;
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.ok()) << st.ToString();
  // An empty section may sit anywhere in bounds, even inside another one.
  h.meta = {200, 0};
  st = h.ValidateLayout();
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(ValidateLayoutTest, MetadataOfAnySizeIsOk) {
  for (uint64_t size : {1u, 3u, 4u, 5u, 1000u}) {
    SCOPED_TRACE(size);
    IndexHeader h = ValidHeader();
    h.meta.size = size;
    h.index_size = h.meta.offset + size;
    Status st = h.ValidateLayout();
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
}

TEST(ValidateLayoutTest, MetadataBeforeOtherSectionsIsOk) {
  // The order of the sections in the file is not prescribed.
  IndexHeader h = ValidHeader();
  h.meta = {176, 24};  // [176, 200)
  h.records.offset = 200;
  h.classes.offset = 368;
  h.lookup.offset = 432;
  h.names.offset = 464;
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(ValidateLayoutTest, MetadataPastEndIsCorruption) {
  IndexHeader h = ValidHeader();
  h.meta.size = 25;  // one byte past index_size
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "metadata at offset 460 + 25"));
  EXPECT_TRUE(Contains(st.message(), "outside the index"));
  EXPECT_TRUE(Contains(st.message(), "index size 484"));
}

TEST(ValidateLayoutTest, MetadataStartingPastEndIsCorruption) {
  IndexHeader h = ValidHeader();
  h.meta = {485, 0};  // index_size + 1, even though empty
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "metadata"));
}

TEST(ValidateLayoutTest, MetadataInsideHeaderIsCorruption) {
  IndexHeader h = ValidHeader();
  h.meta.offset = IndexHeader::kEncodedLength - 1;
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "metadata"));
  // Offset 0, as a header that never set the section would have it.
  h.meta = {0, 0};
  st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "metadata at offset 0"));
}

TEST(ValidateLayoutTest, MetadataOverlappingNamePoolIsCorruption) {
  IndexHeader h = ValidHeader();
  h.meta.offset = 459;  // last byte of the name pool [440, 460)
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "name pool overlaps metadata"));
}

TEST(ValidateLayoutTest, MetadataOverlappingRecordTableIsCorruption) {
  IndexHeader h = ValidHeader();
  h.meta.offset = 176;  // the first record entry
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "overlaps"));
  EXPECT_TRUE(Contains(st.message(), "record table"));
  EXPECT_TRUE(Contains(st.message(), "metadata"));
}

TEST(ValidateLayoutTest, MetadataCoveringEverythingIsCorruption) {
  IndexHeader h = ValidHeader();
  h.meta = {176, 484 - 176};
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "overlaps"));
}

TEST(ValidateLayoutTest, MetadataMaxOffsetOrSizeDoesNotWrap) {
  IndexHeader h = ValidHeader();
  h.meta = {UINT64_MAX, 24};  // offset + size wraps to 23
  Status st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "metadata"));
  h.meta = {460, UINT64_MAX};  // 460 + size wraps to 459
  st = h.ValidateLayout();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "metadata"));
}

// ---------------------------------------------------------------------------
// RecordEntry
// ---------------------------------------------------------------------------

RecordEntry SampleRecord() {
  RecordEntry e;
  e.offset = 0x0102030405060708ull;
  e.stored_length = 1000;
  e.original_length = 5000;
  e.checksum = 0xDEADBEEFCAFEF00Dull;
  e.name_offset = 77;
  e.name_length = 0x0A0B0C0Du;
  e.label = 3;
  e.name_hash = 0x89ABCDEFu;
  e.codec = Codec::kZstd;
  return e;
}

std::string Encode(const RecordEntry& e) {
  std::string s;
  e.EncodeTo(&s);
  return s;
}

Status DecodeRecord(const std::string& s, RecordEntry* out) {
  std::string_view in(s);
  return out->DecodeFrom(&in);
}

TEST(RecordEntryTest, EncodedLengthIs56) {
  EXPECT_EQ(Encode(SampleRecord()).size(), 56u);
  EXPECT_EQ(RecordEntry::kEncodedLength, 56u);
}

TEST(RecordEntryTest, RoundTrip) {
  const RecordEntry e = SampleRecord();
  std::string s = Encode(e) + "next";
  std::string_view in(s);
  RecordEntry d;
  ASSERT_TRUE(d.DecodeFrom(&in).ok());
  EXPECT_EQ(in, "next");
  EXPECT_EQ(d.offset, e.offset);
  EXPECT_EQ(d.stored_length, e.stored_length);
  EXPECT_EQ(d.original_length, e.original_length);
  EXPECT_EQ(d.checksum, e.checksum);
  EXPECT_EQ(d.name_offset, e.name_offset);
  EXPECT_EQ(d.name_length, e.name_length);
  EXPECT_EQ(d.label, e.label);
  EXPECT_EQ(d.name_hash, e.name_hash);
  EXPECT_EQ(d.codec, e.codec);
}

TEST(RecordEntryTest, RawRoundTripWithNoLabel) {
  RecordEntry e;
  e.offset = 64;
  e.stored_length = e.original_length = 0;
  e.label = kNoLabel;
  e.codec = Codec::kRaw;
  RecordEntry d;
  ASSERT_TRUE(DecodeRecord(Encode(e), &d).ok());
  EXPECT_EQ(d.label, kNoLabel);
  EXPECT_EQ(d.codec, Codec::kRaw);
  EXPECT_EQ(d.original_length, 0u);
}

TEST(RecordEntryTest, FieldPositions) {
  std::string s = Encode(SampleRecord());
  EXPECT_EQ(Byte(s, 0), 0x08);  // offset, low byte first
  EXPECT_EQ(Byte(s, 7), 0x01);
  EXPECT_EQ(DecodeFixed64(s.data() + 8), 1000u);
  EXPECT_EQ(DecodeFixed64(s.data() + 16), 5000u);
  EXPECT_EQ(Byte(s, 24), 0x0D);  // checksum
  EXPECT_EQ(Byte(s, 31), 0xDE);
  EXPECT_EQ(DecodeFixed64(s.data() + 32), 77u);
  EXPECT_EQ(Byte(s, 40), 0x0D);  // name length
  EXPECT_EQ(Byte(s, 43), 0x0A);
  EXPECT_EQ(Byte(s, 44), 3);     // label
  EXPECT_EQ(Byte(s, 48), 0xEF);  // name hash
  EXPECT_EQ(Byte(s, 51), 0x89);
  EXPECT_EQ(Byte(s, 52), 1);  // codec zstd
  EXPECT_EQ(s.substr(53), std::string(3, '\0'));
}

TEST(RecordEntryTest, UnknownCodecIsCorruption) {
  std::string s = Encode(SampleRecord());
  s[52] = 2;
  RecordEntry d;
  Status st = DecodeRecord(s, &d);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "unknown codec 2"));
}

TEST(RecordEntryTest, NonZeroReservedIsCorruption) {
  for (int off = 53; off <= 55; ++off) {
    SCOPED_TRACE(off);
    std::string s = Encode(SampleRecord());
    s[off] = 1;
    RecordEntry d;
    Status st = DecodeRecord(s, &d);
    EXPECT_TRUE(st.IsCorruption()) << st.ToString();
    EXPECT_TRUE(Contains(st.message(), "reserved"));
  }
}

TEST(RecordEntryTest, RawWithDifferentLengthsIsCorruption) {
  RecordEntry e = SampleRecord();
  e.codec = Codec::kRaw;
  RecordEntry d;
  Status st = DecodeRecord(Encode(e), &d);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "stored length 1000"));
  EXPECT_TRUE(Contains(st.message(), "original length 5000"));
}

TEST(RecordEntryTest, ShortInputIsCorruption) {
  std::string s = Encode(SampleRecord());
  s.resize(55);
  std::string_view in(s);
  RecordEntry d;
  Status st = d.DecodeFrom(&in);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "needs 56 bytes, found 55"));
  EXPECT_EQ(in.size(), 55u);
}

// ---------------------------------------------------------------------------
// ClassEntry
// ---------------------------------------------------------------------------

ClassEntry SampleClass() {
  ClassEntry c;
  c.name_offset = 0x1122334455667788ull;
  c.name_length = 0xAABBCCDDu;
  c.first_record = 1234;
  c.record_count = 0x0100000000ull;
  return c;
}

TEST(ClassEntryTest, EncodedLengthIs32) {
  std::string s;
  SampleClass().EncodeTo(&s);
  EXPECT_EQ(s.size(), 32u);
  EXPECT_EQ(ClassEntry::kEncodedLength, 32u);
}

TEST(ClassEntryTest, RoundTrip) {
  const ClassEntry c = SampleClass();
  std::string s;
  c.EncodeTo(&s);
  s += "z";
  std::string_view in(s);
  ClassEntry d;
  ASSERT_TRUE(d.DecodeFrom(&in).ok());
  EXPECT_EQ(in, "z");
  EXPECT_EQ(d.name_offset, c.name_offset);
  EXPECT_EQ(d.name_length, c.name_length);
  EXPECT_EQ(d.first_record, c.first_record);
  EXPECT_EQ(d.record_count, c.record_count);
}

TEST(ClassEntryTest, FieldPositions) {
  std::string s;
  SampleClass().EncodeTo(&s);
  EXPECT_EQ(Byte(s, 0), 0x88);  // name offset
  EXPECT_EQ(Byte(s, 7), 0x11);
  EXPECT_EQ(Byte(s, 8), 0xDD);  // name length
  EXPECT_EQ(Byte(s, 11), 0xAA);
  EXPECT_EQ(s.substr(12, 4), std::string(4, '\0'));  // reserved
  EXPECT_EQ(DecodeFixed64(s.data() + 16), 1234u);
  EXPECT_EQ(Byte(s, 28), 0x01);  // record count bit 32
  EXPECT_EQ(Byte(s, 24), 0x00);
}

TEST(ClassEntryTest, NonZeroReservedIsCorruption) {
  std::string s;
  SampleClass().EncodeTo(&s);
  s[14] = 1;
  std::string_view in(s);
  ClassEntry d;
  Status st = d.DecodeFrom(&in);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "reserved"));
}

TEST(ClassEntryTest, ShortInputIsCorruption) {
  std::string s;
  SampleClass().EncodeTo(&s);
  s.resize(31);
  std::string_view in(s);
  ClassEntry d;
  Status st = d.DecodeFrom(&in);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "needs 32 bytes, found 31"));
}

// ---------------------------------------------------------------------------
// Metadata section
// ---------------------------------------------------------------------------

using MetaEntries = std::vector<std::pair<std::string_view, std::string_view>>;

std::string EncodeMeta(const std::map<std::string, std::string>& m) {
  std::string s;
  EncodeMetadata(m, &s);
  return s;
}

// A metadata section built by hand: count, then (key, value) pairs in the
// order given (EncodeMetadata would sort them).
std::string RawMeta(uint32_t count,
                    const std::vector<std::pair<std::string, std::string>>& e) {
  std::string s;
  PutFixed32(&s, count);
  for (const auto& [k, v] : e) {
    PutFixed32(&s, static_cast<uint32_t>(k.size()));
    PutFixed32(&s, static_cast<uint32_t>(v.size()));
    s += k;
    s += v;
  }
  return s;
}

TEST(MetadataTest, SourceRootKey) {
  EXPECT_EQ(std::string(kMetaSourceRoot), "source_root");
}

TEST(MetadataTest, EmptyMapEncodesToEmptySection) {
  std::string s = "keep";
  EncodeMetadata({}, &s);
  EXPECT_EQ(s, "keep");  // appends nothing
  MetaEntries entries = {{"stale", "entry"}};
  Status st = DecodeMetadata("", &entries);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(entries.empty());
}

TEST(MetadataTest, ZeroCountIsAnEmptyList) {
  // Not what EncodeMetadata writes for no entries, but well formed.
  MetaEntries entries;
  Status st = DecodeMetadata(std::string(4, '\0'), &entries);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(entries.empty());
}

TEST(MetadataTest, ExactEncoding) {
  const std::string s = EncodeMeta({{"k", "vv"}});
  EXPECT_EQ(s, std::string("\x01\0\0\0"  // one entry
                           "\x01\0\0\0"  // key length
                           "\x02\0\0\0"  // value length
                           "kvv",
                           15));
}

TEST(MetadataTest, RoundTripInKeyOrder) {
  const std::string binary("\0\xff\x01\n\x89UFS\0", 9);
  const std::map<std::string, std::string> m = {
      {"source_root", "/data/photos"},
      {"empty", ""},
      {"binary", binary},
      {"", "empty key"},
      {std::string("k\0ey", 4), "nul in key"},
      {"\xc3\xa9t\xc3\xa9", std::string(70000, 'x')},
  };
  const std::string s = EncodeMeta(m);
  EXPECT_EQ(DecodeFixed32(s.data()), m.size());
  MetaEntries entries;
  Status st = DecodeMetadata(s, &entries);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(entries.size(), m.size());
  size_t k = 0;
  for (const auto& [key, value] : m) {  // std::map iterates in key order
    SCOPED_TRACE(k);
    EXPECT_EQ(entries[k].first, key);
    EXPECT_TRUE(entries[k].second == value);
    ++k;
  }
  EXPECT_EQ(entries[0].first, "");
  EXPECT_EQ(entries[1].first, "binary");
  EXPECT_EQ(entries[1].second, binary);
  EXPECT_EQ(entries[2].first, "empty");
  EXPECT_EQ(entries[2].second, "");
  // Views point into the section, not at copies.
  EXPECT_GE(entries[5].first.data(), s.data());
  EXPECT_LE(entries[5].first.data() + entries[5].first.size(),
            s.data() + s.size());
}

TEST(MetadataTest, EncodingIsIndependentOfInsertionOrder) {
  std::map<std::string, std::string> a, b;
  a["zeta"] = "1";
  a["alpha"] = "2";
  a["mid"] = "3";
  b["mid"] = "3";
  b["alpha"] = "2";
  b["zeta"] = "1";
  EXPECT_EQ(EncodeMeta(a), EncodeMeta(b));
  const std::string s = EncodeMeta(a);
  EXPECT_EQ(s.substr(12, 5), "alpha");  // first entry after count + lengths
}

TEST(MetadataTest, EncodeAppends) {
  std::string s = "xy";
  EncodeMetadata({{"a", "b"}}, &s);
  EXPECT_EQ(s.substr(0, 2), "xy");
  MetaEntries entries;
  ASSERT_TRUE(DecodeMetadata(std::string_view(s).substr(2), &entries).ok());
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].first, "a");
  EXPECT_EQ(entries[0].second, "b");
}

TEST(MetadataTest, ShortCountIsCorruption) {
  for (size_t n = 1; n < 4; ++n) {
    SCOPED_TRACE(n);
    MetaEntries entries;
    Status st = DecodeMetadata(std::string(n, '\x01'), &entries);
    EXPECT_TRUE(st.IsCorruption()) << st.ToString();
    EXPECT_TRUE(Contains(st.message(), "metadata"));
    EXPECT_TRUE(Contains(st.message(), "too short for the entry count"));
  }
}

TEST(MetadataTest, CountBeyondEntriesIsCorruption) {
  // Claims two entries, holds one: the second entry's lengths are missing.
  std::string s = RawMeta(2, {{"a", "b"}});
  MetaEntries entries;
  Status st = DecodeMetadata(s, &entries);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "entry 1"));
  EXPECT_TRUE(Contains(st.message(), "runs past the section"));
}

TEST(MetadataTest, TruncatedEntryLengthsAreCorruption) {
  const std::string full = RawMeta(1, {{"key", "value"}});
  for (size_t n = 4; n < 12; ++n) {  // inside the two lengths
    SCOPED_TRACE(n);
    MetaEntries entries;
    Status st = DecodeMetadata(full.substr(0, n), &entries);
    EXPECT_TRUE(st.IsCorruption()) << st.ToString();
    EXPECT_TRUE(Contains(st.message(), "entry 0"));
  }
}

TEST(MetadataTest, EntryRunningPastTheEndIsCorruption) {
  const std::string full = RawMeta(1, {{"key", "value"}});
  for (size_t n = 12; n < full.size(); ++n) {  // inside key or value
    SCOPED_TRACE(n);
    MetaEntries entries;
    Status st = DecodeMetadata(full.substr(0, n), &entries);
    EXPECT_TRUE(st.IsCorruption()) << st.ToString();
    EXPECT_TRUE(Contains(st.message(), "entry 0 of 3 + 5 bytes"));
    EXPECT_TRUE(Contains(st.message(), "runs past the section"));
  }
  MetaEntries entries;
  ASSERT_TRUE(DecodeMetadata(full, &entries).ok());
}

TEST(MetadataTest, SecondEntryRunningPastTheEndIsCorruption) {
  std::string s = RawMeta(2, {{"a", "1"}, {"b", "2"}});
  EncodeFixed32(&s[4 + 8 + 2 + 4], 3);  // entry 1's value length
  MetaEntries entries;
  Status st = DecodeMetadata(s, &entries);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "entry 1 of 1 + 3 bytes"));
}

TEST(MetadataTest, TrailingBytesAreCorruption) {
  for (const std::string& s :
       {EncodeMeta({{"a", "b"}}) + "z", RawMeta(0, {}) + std::string(3, '\0'),
        RawMeta(1, {{"a", "b"}, {"c", "d"}})}) {
    SCOPED_TRACE(s.size());
    MetaEntries entries;
    Status st = DecodeMetadata(s, &entries);
    EXPECT_TRUE(st.IsCorruption()) << st.ToString();
    EXPECT_TRUE(Contains(st.message(), "trailing bytes"));
  }
}

TEST(MetadataTest, HugeLengthsDoNotWrap) {
  // Lengths near 2^32 whose sum, or whose sum with the position, would wrap
  // a 32-bit (or careless 64-bit) bound check.
  const std::vector<std::pair<uint32_t, uint32_t>> cases = {
      {UINT32_MAX, UINT32_MAX},   {UINT32_MAX, 1}, {1, UINT32_MAX},
      {0x80000000u, 0x80000000u}, {0, UINT32_MAX}, {UINT32_MAX, 0},
  };
  for (const auto& [klen, vlen] : cases) {
    SCOPED_TRACE(std::to_string(klen) + " + " + std::to_string(vlen));
    std::string s;
    PutFixed32(&s, 1);
    PutFixed32(&s, klen);
    PutFixed32(&s, vlen);
    s += "some bytes that are far fewer than claimed";
    MetaEntries entries;
    Status st = DecodeMetadata(s, &entries);
    EXPECT_TRUE(st.IsCorruption()) << st.ToString();
    EXPECT_TRUE(Contains(st.message(), "runs past the section"));
  }
}

TEST(MetadataTest, HugeCountIsCorruptionNotALongLoop) {
  std::string s = EncodeMeta({{"a", "b"}});
  EncodeFixed32(&s[0], UINT32_MAX);
  MetaEntries entries;
  Status st = DecodeMetadata(s, &entries);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "entry 1"));
}

}  // namespace
}  // namespace ufspack
