// Writes a one-record pack with the installed packer library, reads it back
// with the installed reader through the installed node-local cache (twice:
// the second read must be a cache hit), and prints the record.
#include <cstdio>
#include <memory>
#include <string>

#include "ufspack/builder.h"
#include "ufspack/cache.h"
#include "ufspack/reader.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::unique_ptr<ufspack::PackWriter> w;
  ufspack::PackWriterOptions o;
  o.flat = true;
  ufspack::Status s = ufspack::PackWriter::Create(argv[1], o, &w);
  if (s.ok())
    s = w->Add("hello.txt", ufspack::kNoLabel,
               "hello from an installed ufspack");
  if (s.ok()) s = w->Finish();
  ufspack::CacheOptions co;
  co.dir = std::string(argv[1]) + "-cache";
  std::shared_ptr<ufspack::Cache> cache;
  if (s.ok()) s = ufspack::Cache::Open(co, &cache);
  ufspack::ReaderOptions ro;
  ro.cache = cache;
  std::unique_ptr<ufspack::Reader> r;
  if (s.ok()) s = ufspack::Reader::Open(argv[1], ro, &r);
  std::string bytes;
  if (s.ok()) s = r->Read(0, &bytes);
  if (s.ok()) s = r->Read(0, &bytes);
  if (s.ok() && cache->Stats().back().hits != 1) {
    s = ufspack::Status::Corruption("expected one cache hit");
  }
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("%s\n", bytes.c_str());
  return 0;
}
