// Copyright 2026 The ufspack Authors.
//
// test::HintedFile: a data file served from memory that records the
// read-ahead hints it is given (RandomAccessFile::WillNeed), for the tests
// of Reader::WillNeed (tests/reader/will_need_test.cc) and of the mount's
// read-ahead through the page cache
// (tests/mount/page_cache_read_ahead_test.cc).
#ifndef UFSPACK_TESTS_HINTED_FILE_H_
#define UFSPACK_TESTS_HINTED_FILE_H_

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ufspack/file.h"

namespace ufspack {
namespace test {

class HintedFile : public RandomAccessFile {
 public:
  using Hint = std::pair<uint64_t, uint64_t>;  // offset, length

  // remote: prefers_batches(), as a remote file says.
  explicit HintedFile(std::string contents, bool remote = false)
      : contents_(std::move(contents)), remote_(remote) {}
  Status Read(uint64_t offset, size_t n, char* scratch,
              size_t* bytes_read) const override {
    const size_t begin = std::min<uint64_t>(offset, contents_.size());
    *bytes_read = std::min(n, contents_.size() - begin);
    std::copy_n(contents_.data() + begin, *bytes_read, scratch);
    return Status::OK();
  }
  Status Size(uint64_t* size) const override {
    *size = contents_.size();
    return Status::OK();
  }
  const std::string& name() const override { return name_; }
  bool prefers_batches() const override { return remote_; }
  void WillNeed(uint64_t offset, uint64_t n) const override {
    std::lock_guard<std::mutex> lock(mu_);
    hints_.emplace_back(offset, n);
  }

  // The hints given since the last call, in order.
  std::vector<Hint> Take() const {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(hints_);
  }
  uint64_t size() const { return contents_.size(); }

 private:
  const std::string name_ = "mem/data.ufs";
  const std::string contents_;
  const bool remote_;
  mutable std::mutex mu_;
  mutable std::vector<Hint> hints_;  // guarded by mu_
};

}  // namespace test
}  // namespace ufspack

#endif  // UFSPACK_TESTS_HINTED_FILE_H_
