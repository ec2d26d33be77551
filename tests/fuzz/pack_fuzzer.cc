// Copyright 2026 The ufspack Authors.
//
// libFuzzer target for the reader: opens arbitrary index + data bytes through
// in-memory storage (NewMemoryRegion / NewMemoryRandomAccessFile) and drives
// the whole public Reader API over them, with both ReaderOptions settings.
// The input format and the fix-ups are described in pack_fuzzer.h and
// tests/fuzz/README.md.
//
// Oracle: every call returns either a non-OK Status with a non-empty message
// or a result that agrees with an independent decoding of the same bytes
// done here (the record entry fields, the name bytes, the data slice, an
// independent zstd decompression, the metadata entries).  Any disagreement
// calls __builtin_trap(); crashes, hangs and huge allocations are caught by
// libFuzzer and the sanitizers (-rss_limit_mb, -malloc_limit_mb, -timeout).
//
// The same file builds without libFuzzer: replay_main.cc supplies main() and
// runs LLVMFuzzerTestOneInput over the corpus and the regression inputs.
#include "pack_fuzzer.h"

#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ufspack/file.h"
#include "ufspack/format.h"
#include "ufspack/open_reader.h"
#include "ufspack/reader.h"
#include "ufspack/status.h"

namespace ufspack {
namespace fuzz {
namespace {

// Oracle failure: print what disagreed, then trap (a crash libFuzzer
// reports and minimizes; a non-zero exit under the replay driver).
[[noreturn]] void Fail(const char* what, const Status& s = Status::OK()) {
  std::fprintf(stderr, "pack_fuzzer oracle failure: %s (%s)\n", what,
               s.ToString().c_str());
  std::fflush(stderr);
  __builtin_trap();
}

#define FUZZ_CHECK(cond)                            \
  do {                                              \
    if (!(cond)) Fail(#cond " at line " FUZZ_LINE); \
  } while (0)
#define FUZZ_STR2(x) #x
#define FUZZ_STR(x) FUZZ_STR2(x)
#define FUZZ_LINE FUZZ_STR(__LINE__)

// An error must carry a message.
void CheckError(const Status& s) {
  if (s.ok()) Fail("CheckError on OK");
  if (s.message().empty()) Fail("error status without a message", s);
}

// Little-endian field access independent of ufspack/coding.h.
uint64_t Get(std::string_view s, uint64_t off, int bytes) {
  uint64_t v = 0;
  for (int k = bytes - 1; k >= 0; --k) {
    v = (v << 8) | static_cast<uint8_t>(s[off + k]);
  }
  return v;
}
void Put(std::string* s, uint64_t off, int bytes, uint64_t v) {
  for (int k = 0; k < bytes; ++k) {
    (*s)[off + k] = static_cast<char>(v >> (8 * k));
  }
}

// [off, off + len) lies inside a string of `size` bytes (overflow-safe).
bool InRange(uint64_t off, uint64_t len, uint64_t size) {
  return off <= size && len <= size - off;
}

constexpr uint64_t kIndexHeaderSize = 176;
constexpr uint64_t kEntrySize = 56;
constexpr uint64_t kClassSize = 32;

// The header fields this file needs, decoded here rather than by
// IndexHeader::DecodeFrom so the oracle does not trust the code under test.
struct Layout {
  uint64_t record_count = 0, class_count = 0;
  uint64_t records_off = 0, classes_off = 0, lookup_off = 0, lookup_size = 0;
  uint64_t names_off = 0, names_size = 0, meta_off = 0, meta_size = 0;
  uint64_t body_checksum = 0;
};

Layout ReadLayout(std::string_view idx) {
  Layout l;
  l.record_count = Get(idx, 48, 8);
  l.class_count = Get(idx, 56, 8);
  l.records_off = Get(idx, 80, 8);
  l.classes_off = Get(idx, 96, 8);
  l.lookup_off = Get(idx, 112, 8);
  l.lookup_size = Get(idx, 120, 8);
  l.names_off = Get(idx, 128, 8);
  l.names_size = Get(idx, 136, 8);
  l.meta_off = Get(idx, 144, 8);
  l.meta_size = Get(idx, 152, 8);
  l.body_checksum = Get(idx, 160, 8);
  return l;
}

// The name pool bytes [off, off + len) if both the pool and the name lie in
// the index.
bool PoolBytes(std::string_view idx, const Layout& l, uint64_t off,
               uint64_t len, std::string_view* out) {
  if (!InRange(l.names_off, l.names_size, idx.size())) return false;
  if (!InRange(off, len, l.names_size)) return false;
  *out = idx.substr(l.names_off + off, len);
  return true;
}

// Applies the fix-ups selected by `flags` (see pack_fuzzer.h) so mutated
// inputs get past the checksums and pairing checks and reach the per-record
// validation, the lookup table, the class table and the metadata.
void FixUp(uint8_t flags, std::string* idx, std::string* data) {
  if (idx->size() < kIndexHeaderSize) return;
  const Layout l = ReadLayout(*idx);
  if (flags & (kFixNameHashes | kFixRecordChecksums)) {
    for (uint64_t i = 0; i < l.record_count; ++i) {
      const uint64_t e = l.records_off + i * kEntrySize;
      if (l.records_off > idx->size() ||
          i >= (idx->size() - l.records_off) / kEntrySize) {
        break;
      }
      if (flags & kFixNameHashes) {
        std::string_view name;
        if (PoolBytes(*idx, l, Get(*idx, e + 32, 8), Get(*idx, e + 40, 4),
                      &name)) {
          Put(idx, e + 48, 4, NameHash(name) >> 32);
        }
      }
      if (flags & kFixRecordChecksums) {
        const uint64_t off = Get(*idx, e, 8), len = Get(*idx, e + 8, 8);
        if (InRange(off, len, data->size())) {
          Put(idx, e + 24, 8, Checksum64(data->data() + off, len));
        }
      }
    }
  }
  if (flags & kFixSizes) {
    Put(idx, 64, 8, data->size());
    Put(idx, 72, 8, idx->size());
  }
  const char* body = idx->data() + kIndexHeaderSize;
  const size_t body_len = idx->size() - kIndexHeaderSize;
  if (flags & kFixPackId) {
    const PackId id = PackId::Of(body, body_len);
    std::memcpy(&(*idx)[32], id.bytes.data(), 16);
    if (data->size() >= 32) std::memcpy(&(*data)[16], id.bytes.data(), 16);
  }
  if (flags & kFixBodyChecksum) Put(idx, 160, 8, Checksum64(body, body_len));
  if (flags & kFixHeaderChecksum)
    Put(idx, 168, 8, Checksum64(idx->data(), 168));
}

// What one record should read as, computed here from the raw bytes.
struct Expected {
  bool ok = false;
  std::string bytes;
};

// Independent expectation for a record the reader accepted in GetRecord():
// raw records read as the data slice; zstd records as one frame whose
// content size is original_length and that decodes to exactly that many
// bytes.  With verify_checksums the slice must also match the checksum.
Expected ExpectRecord(const Record& r, std::string_view data,
                      bool verify_checksums) {
  Expected x;
  std::string_view stored = data.substr(r.offset, r.stored_length);
  if (verify_checksums &&
      Checksum64(stored.data(), stored.size()) != r.checksum)
    return x;
  if (r.codec == Codec::kRaw) {
    x.ok = true;
    x.bytes.assign(stored);
    return x;
  }
  const unsigned long long fcs =
      ZSTD_getFrameContentSize(stored.data(), stored.size());
  if (fcs != r.original_length) return x;
  x.bytes.resize(r.original_length);
  const size_t n = ZSTD_decompress(x.bytes.data(), x.bytes.size(),
                                   stored.data(), stored.size());
  if (ZSTD_isError(n) || n != r.original_length) {
    x.bytes.clear();
    return x;
  }
  x.ok = true;
  return x;
}

// Independent metadata parser (docs/format.md, "Metadata section").
bool ParseMeta(std::string_view m,
               std::vector<std::pair<std::string_view, std::string_view>>* e) {
  e->clear();
  if (m.empty()) return true;
  if (m.size() < 4) return false;
  const uint64_t count = Get(m, 0, 4);
  uint64_t pos = 4;
  for (uint64_t k = 0; k < count; ++k) {
    if (m.size() - pos < 8) return false;
    const uint64_t kl = Get(m, pos, 4), vl = Get(m, pos + 4, 4);
    pos += 8;
    if (kl + vl > m.size() - pos) return false;
    e->emplace_back(m.substr(pos, kl), m.substr(pos + kl, vl));
    pos += kl + vl;
  }
  return pos == m.size();
}

// Drives every public Reader method over an opened reader.
void Exercise(const Reader& reader, std::string_view idx, std::string_view data,
              uint8_t flags) {
  const Layout l = ReadLayout(idx);
  const PackInfo& info = reader.info();
  FUZZ_CHECK(reader.size() == l.record_count);
  FUZZ_CHECK(reader.class_count() == l.class_count);
  FUZZ_CHECK(info.data_size == data.size());
  FUZZ_CHECK(info.index_size == idx.size());
  FUZZ_CHECK(std::memcmp(info.pack_id.bytes.data(), idx.data() + 32, 16) == 0);
  // Open() checked the layout: the record table must be inside the index.
  FUZZ_CHECK(InRange(l.records_off, l.record_count * kEntrySize, idx.size()));
  const bool verify = reader.options().verify_checksums;

  const uint64_t n = l.record_count;
  std::vector<Record> records(n);
  std::vector<Expected> expected(n);
  std::vector<bool> record_ok(n, false);
  for (uint64_t i = 0; i < n; ++i) {
    Record& r = records[i];
    Status s = reader.GetRecord(i, &r);
    if (!s.ok()) {
      CheckError(s);
      FUZZ_CHECK(s.IsCorruption());
    } else {
      record_ok[i] = true;
      // Every field as decoded here, and every per-record rule.
      const uint64_t e = l.records_off + i * kEntrySize;
      FUZZ_CHECK(r.index == i);
      FUZZ_CHECK(r.offset == Get(idx, e, 8));
      FUZZ_CHECK(r.stored_length == Get(idx, e + 8, 8));
      FUZZ_CHECK(r.original_length == Get(idx, e + 16, 8));
      FUZZ_CHECK(r.checksum == Get(idx, e + 24, 8));
      FUZZ_CHECK(r.label == Get(idx, e + 44, 4));
      FUZZ_CHECK(static_cast<uint8_t>(r.codec) == Get(idx, e + 52, 1));
      FUZZ_CHECK(Get(idx, e + 53, 3) == 0);
      std::string_view name;
      FUZZ_CHECK(
          PoolBytes(idx, l, Get(idx, e + 32, 8), Get(idx, e + 40, 4), &name));
      FUZZ_CHECK(r.name == name);
      FUZZ_CHECK((NameHash(name) >> 32) == Get(idx, e + 48, 4));
      FUZZ_CHECK(r.offset >= 64);
      FUZZ_CHECK(InRange(r.offset, r.stored_length, data.size()));
      FUZZ_CHECK(l.class_count == 0 ? r.label == kNoLabel
                                    : r.label < l.class_count);
      if (r.codec == Codec::kRaw) {
        FUZZ_CHECK(r.stored_length == r.original_length);
      } else {
        FUZZ_CHECK(r.codec == Codec::kZstd);
        FUZZ_CHECK(r.stored_length >= 1);
        FUZZ_CHECK(r.original_length / 32768 <= r.stored_length);
      }
      expected[i] = ExpectRecord(r, data, verify);
    }

    // Read into a string: exactly the expected bytes, or an error.
    std::string got = "stale";
    s = reader.Read(i, &got);
    if (!record_ok[i]) {
      CheckError(s);
    } else if (expected[i].ok) {
      if (!s.ok()) Fail("Read failed on a good record", s);
      FUZZ_CHECK(got == expected[i].bytes);
    } else {
      CheckError(s);
      FUZZ_CHECK(s.IsCorruption());
      FUZZ_CHECK(got.empty());
    }

    // Read into a caller buffer of exactly original_length bytes, followed
    // by guard bytes that must stay untouched.  (A damaged zstd entry may
    // claim 32768 times its stored length: the harness only allocates that
    // much when the frame confirms it, as the reader does.)
    if (record_ok[i] &&
        (expected[i].ok || r.original_length <= (uint64_t{1} << 20))) {
      const size_t len = static_cast<size_t>(r.original_length);
      constexpr size_t kGuard = 64;
      std::string buf(len + kGuard, '\xa5');
      size_t length = 0;
      s = reader.Read(i, buf.data(), len, &length);
      FUZZ_CHECK(s.ok() == expected[i].ok);
      if (s.ok()) {
        FUZZ_CHECK(length == len);
        FUZZ_CHECK(std::string_view(buf.data(), len) == expected[i].bytes);
      } else {
        CheckError(s);
      }
      FUZZ_CHECK(buf.find_first_not_of('\xa5', len) == std::string::npos);
      // With spare room after the record: the reader must still write only
      // original_length bytes (zstd may not use the rest as workspace).
      buf.assign(len + kGuard, '\xa5');
      s = reader.Read(r, buf.data(), buf.size());
      FUZZ_CHECK(s.ok() == expected[i].ok);
      if (s.ok()) {
        FUZZ_CHECK(std::string_view(buf.data(), len) == expected[i].bytes);
      } else {
        CheckError(s);
      }
      FUZZ_CHECK(buf.find_first_not_of('\xa5', len) == std::string::npos);
      // One byte short: refused before any read.
      if (len > 0) {
        s = reader.Read(r, buf.data(), len - 1);
        CheckError(s);
        FUZZ_CHECK(s.IsInvalidArgument());
      }
      // By name: if the lookup finds something, it has this name.
      uint64_t found = 0;
      s = reader.Find(r.name, &found);
      if (s.ok()) {
        Record fr;
        FUZZ_CHECK(found < n);
        FUZZ_CHECK(reader.GetRecord(found, &fr).ok());
        FUZZ_CHECK(fr.name == r.name);
      } else {
        CheckError(s);
      }
    }
  }

  // Out of range.
  Record past;
  Status s = reader.GetRecord(n, &past);
  CheckError(s);
  FUZZ_CHECK(s.IsOutOfRange());
  std::string none;
  CheckError(reader.Read(n, &none));

  // Names that are (almost certainly) absent, and one taken from the data.
  const std::string probes[] = {
      "", "no/such/name",
      std::string(data.substr(0, std::min<size_t>(data.size(), 16)))};
  for (const std::string& q : probes) {
    uint64_t found = 0;
    s = reader.Find(q, &found);
    if (s.ok()) {
      Record fr;
      FUZZ_CHECK(reader.GetRecord(found, &fr).ok());
      FUZZ_CHECK(fr.name == q);
    } else {
      CheckError(s);
    }
  }

  // Classes.
  const uint64_t c_count = l.class_count;
  std::vector<bool> class_ok(c_count, false);
  for (uint64_t c = 0; c < c_count; ++c) {
    ClassInfo ci;
    s = reader.GetClass(c, &ci);
    if (!s.ok()) {
      CheckError(s);
      FUZZ_CHECK(s.IsCorruption());
      continue;
    }
    class_ok[c] = true;
    const uint64_t e = l.classes_off + c * kClassSize;
    FUZZ_CHECK(InRange(e, kClassSize, idx.size()));
    std::string_view name;
    FUZZ_CHECK(PoolBytes(idx, l, Get(idx, e, 8), Get(idx, e + 8, 4), &name));
    FUZZ_CHECK(ci.name == name);
    FUZZ_CHECK(Get(idx, e + 12, 4) == 0);
    FUZZ_CHECK(ci.first_record == Get(idx, e + 16, 8));
    FUZZ_CHECK(ci.record_count == Get(idx, e + 24, 8));
    FUZZ_CHECK(ci.first_record <= n && ci.record_count <= n - ci.first_record);
  }
  ClassInfo past_class;
  s = reader.GetClass(c_count, &past_class);
  CheckError(s);
  FUZZ_CHECK(s.IsOutOfRange());

  // Metadata, against the parser above.
  std::vector<std::pair<std::string_view, std::string_view>> meta, mine;
  s = reader.ListMetadata(&meta);
  FUZZ_CHECK(InRange(l.meta_off, l.meta_size, idx.size()));
  const bool meta_ok = ParseMeta(idx.substr(l.meta_off, l.meta_size), &mine);
  FUZZ_CHECK(s.ok() == meta_ok);
  if (s.ok()) {
    FUZZ_CHECK(meta == mine);
    for (const auto& [key, value] : meta) {
      std::string_view v;
      Status ms = reader.GetMetadata(key, &v);
      if (!ms.ok()) Fail("GetMetadata of a listed key", ms);
      // The first entry with this key wins.
      for (const auto& [k2, v2] : meta) {
        if (k2 == key) {
          FUZZ_CHECK(v == v2);
          break;
        }
      }
    }
  } else {
    CheckError(s);
    FUZZ_CHECK(s.IsCorruption());
  }
  std::string_view root;
  s = reader.GetMetadata(kMetaSourceRoot, &root);
  if (!s.ok()) {
    CheckError(s);
    FUZZ_CHECK(s.IsNotFound() == meta_ok);
  }

  // ReadBatch over every record, in reverse order, plus the first again:
  // succeeds exactly when every single Read does, with the same bytes.
  std::vector<uint64_t> order;
  for (uint64_t i = n; i-- > 0;) order.push_back(i);
  if (n > 0) order.push_back(0);
  bool all_ok = true;
  for (uint64_t i : order) all_ok = all_ok && record_ok[i] && expected[i].ok;
  Batch batch;
  s = reader.ReadBatch(order.data(), order.size(), &batch,
                       (flags & kFlagThreads) ? 2 : 1);
  if (all_ok) {
    if (!s.ok()) Fail("ReadBatch failed where every Read succeeds", s);
    FUZZ_CHECK(batch.size() == order.size());
    for (size_t k = 0; k < order.size(); ++k) {
      FUZZ_CHECK(batch.get(k) == expected[order[k]].bytes);
    }
  } else {
    CheckError(s);
    FUZZ_CHECK(batch.data.empty() && batch.offsets.empty());
  }

  // The full check: when it passes, everything above must have passed too,
  // and the lookup must find every record by its own name.
  s = reader.CheckIndex();
  if (!s.ok()) {
    CheckError(s);
    return;
  }
  FUZZ_CHECK(Checksum64(idx.data() + kIndexHeaderSize,
                        idx.size() - kIndexHeaderSize) == l.body_checksum);
  FUZZ_CHECK(meta_ok);
  uint64_t covered = 0;
  for (uint64_t c = 0; c < c_count; ++c) {
    FUZZ_CHECK(class_ok[c]);
    ClassInfo ci;
    FUZZ_CHECK(reader.GetClass(c, &ci).ok());
    FUZZ_CHECK(ci.first_record == covered);
    for (uint64_t i = ci.first_record; i < ci.first_record + ci.record_count;
         ++i) {
      FUZZ_CHECK(records[i].label == c);
    }
    covered += ci.record_count;
  }
  FUZZ_CHECK(c_count == 0 || covered == n);
  for (uint64_t i = 0; i < n; ++i) {
    FUZZ_CHECK(record_ok[i]);
    uint64_t found = n;
    FUZZ_CHECK(reader.Find(records[i].name, &found).ok());
    FUZZ_CHECK(found == i);
  }
}

}  // namespace

void RunOne(const uint8_t* input, size_t size) {
  if (size < kPrefixLength) return;
  const uint8_t flags = input[0];
  const uint64_t want =
      Get(std::string_view(reinterpret_cast<const char*>(input + 1), 4), 0, 4);
  const size_t rest = size - kPrefixLength;
  const size_t index_len = static_cast<size_t>(std::min<uint64_t>(want, rest));
  const char* p = reinterpret_cast<const char*>(input) + kPrefixLength;
  std::string idx(p, index_len);
  std::string data(p + index_len, rest - index_len);
  FixUp(flags, &idx, &data);

  // Open twice: verify_checksums on (the default), then off with the body
  // checksum verified at open.  The second Open checks strictly more, so it
  // may only succeed when the first does.
  bool first_opened = false;
  for (int pass = 0; pass < 2; ++pass) {
    ReaderOptions options;
    options.verify_checksums = (pass == 0);
    options.verify_index_checksum = (pass == 1);
    std::unique_ptr<Reader> reader;
    Status s = internal::OpenReader(NewMemoryRegion("index.ufs", idx),
                                    NewMemoryRandomAccessFile("data.ufs", data),
                                    options, &reader);
    if (!s.ok()) {
      CheckError(s);
      FUZZ_CHECK(reader == nullptr);
      FUZZ_CHECK(s.IsCorruption() || s.IsNotSupported());
      continue;
    }
    if (pass == 0) first_opened = true;
    if (pass == 1) FUZZ_CHECK(first_opened);
    FUZZ_CHECK(idx.size() >= kIndexHeaderSize && data.size() >= 64);
    Exercise(*reader, idx, data, flags);
  }
}

}  // namespace fuzz
}  // namespace ufspack

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ufspack::fuzz::RunOne(data, size);
  return 0;
}
