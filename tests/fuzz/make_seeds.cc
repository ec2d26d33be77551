// Copyright 2026 The ufspack Authors.
//
// Writes the seed corpus of ufspack_pack_fuzzer: small valid packs built with
// PackWriter, each stored as one fuzzer input (pack_fuzzer.h).  The committed
// corpus in tests/fuzz/corpus was made with
//
//   build/tests/fuzz/ufspack_make_fuzz_seeds tests/fuzz/corpus
//
// Builds are deterministic, so rerunning it rewrites identical files.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>

#include "pack_fuzzer.h"
#include "ufspack/builder.h"
#include "ufspack/coding.h"
#include "ufspack/format.h"
#include "ufspack/status.h"

namespace {

using ufspack::PackWriter;
using ufspack::PackWriterOptions;
using ufspack::Status;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

// A compressible payload of `n` bytes.
std::string Text(size_t n, char seed) {
  std::string s;
  while (s.size() < n) s += std::string("ufspack seed ") + seed + " line\n";
  s.resize(n);
  return s;
}

// Builds a pack in `tmp`/`name` with `fill`, and writes it to `out`/`name`
// as a fuzzer input with `flags`.
// `patch`, if given, edits the index bytes before they are written (the
// harness's fix-ups then reseal what the flags ask for).
bool Seed(const std::string& tmp, const std::string& out,
          const std::string& name, const PackWriterOptions& options,
          uint8_t flags, const std::function<Status(PackWriter*)>& fill,
          const std::function<void(std::string*)>& patch = nullptr) {
  const std::string dir = tmp + "/" + name;
  std::unique_ptr<PackWriter> w;
  Status s = PackWriter::Create(dir, options, &w);
  if (s.ok()) s = fill(w.get());
  if (s.ok()) s = w->Finish();
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), s.ToString().c_str());
    return false;
  }
  std::string index = ReadAll(dir + "/" + ufspack::kIndexFileName);
  if (patch) patch(&index);
  const std::string input = ufspack::fuzz::MakeInput(
      flags, index, ReadAll(dir + "/" + ufspack::kDataFileName));
  std::ofstream f(out + "/" + name, std::ios::binary);
  f.write(input.data(), static_cast<std::streamsize>(input.size()));
  std::printf("%s/%s: %zu bytes\n", out.c_str(), name.c_str(), input.size());
  return static_cast<bool>(f);
}

// A zstd frame that really holds `n` bytes (one RLE block of `byte`) but
// whose header declares `declared` bytes of content.
std::string ShortZstdFrame(uint32_t n, char byte, uint64_t declared) {
  char b[8];
  std::string f;
  ufspack::EncodeFixed32(b, 0xFD2FB528u);  // magic
  f.append(b, 4);
  f += static_cast<char>(0xC0);    // 8-byte content size, not single segment
  f += static_cast<char>(7 << 3);  // window 128 KiB
  ufspack::EncodeFixed64(b, declared);
  f.append(b, 8);
  const uint32_t block = 1u | (1u << 1) | (n << 3);  // last, RLE, n bytes
  f += static_cast<char>(block & 0xff);
  f += static_cast<char>((block >> 8) & 0xff);
  f += static_cast<char>((block >> 16) & 0xff);
  f += byte;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output directory>\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  char tmpl[] = "/tmp/ufspack-seeds-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string tmp = tmpl;
  const uint8_t all = ufspack::fuzz::kFixAll;
  const uint32_t kNo = ufspack::kNoLabel;
  PackWriterOptions flat;
  flat.flat = true;
  PackWriterOptions classes;
  PackWriterOptions zstd_flat = flat;
  zstd_flat.compress = true;
  PackWriterOptions zstd_classes;
  zstd_classes.compress = true;
  bool ok = true;

  ok &= Seed(tmp, out, "empty", flat, all,
             [](PackWriter*) { return Status::OK(); });
  auto three = [kNo](PackWriter* w) {
    UFSPACK_RETURN_IF_ERROR(w->Add("a.txt", kNo, "alpha"));
    UFSPACK_RETURN_IF_ERROR(w->Add("dir/b.bin", kNo, std::string("\0\1\2", 3)));
    return w->Add("dir/sub/c", kNo, "gamma gamma");
  };
  ok &= Seed(tmp, out, "flat", flat, all, three);
  // The same pack without fix-ups: mutations must get past the checksums
  // on their own (header checks, "not a ufspack index", ...).
  ok &= Seed(tmp, out, "flat-nofix", flat, 0, three);
  ok &= Seed(tmp, out, "classes", classes, all | ufspack::fuzz::kFlagThreads,
             [](PackWriter* w) {
               UFSPACK_RETURN_IF_ERROR(w->AddClass("cat"));
               UFSPACK_RETURN_IF_ERROR(w->AddClass("empty"));
               UFSPACK_RETURN_IF_ERROR(w->AddClass("dog"));
               UFSPACK_RETURN_IF_ERROR(w->Add("cat/1.jpg", 0, "meow"));
               UFSPACK_RETURN_IF_ERROR(w->Add("cat/2.jpg", 0, "purr"));
               return w->Add("dog/1.jpg", 2, "woof");
             });
  ok &= Seed(tmp, out, "zstd", zstd_flat, all, [kNo](PackWriter* w) {
    UFSPACK_RETURN_IF_ERROR(w->Add("big.txt", kNo, Text(1500, 'a')));
    UFSPACK_RETURN_IF_ERROR(w->Add("tiny", kNo, "x"));  // stays raw
    return w->Add("zeros", kNo, std::string(2000, '\0'));
  });
  ok &= Seed(tmp, out, "zero-length", flat, all, [kNo](PackWriter* w) {
    UFSPACK_RETURN_IF_ERROR(w->Add("empty1", kNo, ""));
    UFSPACK_RETURN_IF_ERROR(w->Add("one", kNo, "1"));
    return w->Add("empty2", kNo, "");
  });
  ok &= Seed(tmp, out, "metadata", flat, all, [kNo](PackWriter* w) {
    UFSPACK_RETURN_IF_ERROR(w->SetMetadata(ufspack::kMetaSourceRoot, "data/x"));
    UFSPACK_RETURN_IF_ERROR(w->SetMetadata(ufspack::kMetaExtensions, "*"));
    UFSPACK_RETURN_IF_ERROR(w->SetMetadata("other", ""));
    return w->Add("r", kNo, "record");
  });
  ok &= Seed(tmp, out, "mixed", zstd_classes, all, [](PackWriter* w) {
    UFSPACK_RETURN_IF_ERROR(w->SetMetadata(ufspack::kMetaSourceRoot, "/srv/d"));
    UFSPACK_RETURN_IF_ERROR(w->SetMetadata(ufspack::kMetaExtensions, ".jpg"));
    UFSPACK_RETURN_IF_ERROR(w->AddClass("a"));
    UFSPACK_RETURN_IF_ERROR(w->AddClass("b"));
    UFSPACK_RETURN_IF_ERROR(w->Add("a/0.jpg", 0, Text(900, 'm')));
    UFSPACK_RETURN_IF_ERROR(w->Add("a/1.jpg", 0, ""));
    UFSPACK_RETURN_IF_ERROR(w->Add("b/0.jpg", 1, "raw bytes"));
    return w->Add("b/1.jpg", 1, Text(600, 'n'));
  });
  // A zstd record at the format's expansion bound: entry and frame header
  // both claim 32768 x its 18 stored bytes, the frame holds 1000 (written
  // raw, then its entry made zstd: codec at 52, original_length at 16 of
  // the first record entry, at 176).  Reading it must report the early end
  // without allocating the claimed size (docs/reliability.md).
  const uint64_t claimed = 32768 * ShortZstdFrame(1000, 'z', 0).size();
  ok &= Seed(
      tmp, out, "zstd-short-frame", flat, all,
      [&](PackWriter* w) {
        UFSPACK_RETURN_IF_ERROR(
            w->Add("a.short", kNo, ShortZstdFrame(1000, 'z', claimed)));
        return w->Add("b.raw", kNo, "raw");
      },
      [&](std::string* index) {
        const size_t entry = ufspack::IndexHeader::kEncodedLength;
        ufspack::EncodeFixed64(&(*index)[entry + 16], claimed);
        (*index)[entry + ufspack::RecordEntry::kCodecAt] =
            static_cast<char>(ufspack::Codec::kZstd);
      });
  std::string cleanup = "rm -rf '" + tmp + "'";
  if (std::system(cleanup.c_str()) != 0) ok = false;
  return ok ? 0 : 1;
}
