// Copyright 2026 The ufspack Authors.
//
// A plain main() for the fuzz targets, so they build with any compiler and
// run in ctest without libFuzzer: feeds every regular file found (recursively)
// under the given files or directories to LLVMFuzzerTestOneInput, in sorted
// order, and prints how many inputs ran.  Files named README* are skipped.
// An oracle failure traps, so a regression shows up as a crashed test; a
// hang shows up as the test's TIMEOUT.
//
//   ufspack_pack_fuzzer_replay tests/fuzz/corpus tests/fuzz/regressions
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

bool Skipped(const fs::path& p) {
  return p.filename().string().rfind("README", 0) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <file or directory>...\n", argv[0]);
    return 2;
  }
  std::vector<fs::path> inputs;
  for (int a = 1; a < argc; ++a) {
    const fs::path root(argv[a]);
    std::error_code ec;
    if (fs::is_regular_file(root, ec)) {
      inputs.push_back(root);
      continue;
    }
    if (!fs::is_directory(root, ec)) {
      std::fprintf(stderr, "%s: not a file or directory\n", argv[a]);
      return 2;
    }
    for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end;
         it.increment(ec)) {
      if (it->is_regular_file() && !Skipped(it->path())) {
        inputs.push_back(it->path());
      }
    }
    if (ec) {
      std::fprintf(stderr, "%s: %s\n", argv[a], ec.message().c_str());
      return 2;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  for (const fs::path& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "%s: cannot open\n", p.c_str());
      return 2;
    }
    std::string bytes((std::istreambuf_iterator<char>(in)),
                      std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay %s (%zu bytes)\n", p.c_str(), bytes.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                           bytes.size());
  }
  std::printf("replayed %zu inputs, no failure\n", inputs.size());
  return 0;
}
