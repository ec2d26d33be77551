// Copyright 2026 The ufspack Authors.
//
// ProgressReporter: a build's progress, reported to BuildOptions::progress.
// Internal to the packer.
//
// Thread safety: one building thread's.
#ifndef UFSPACK_PACKER_SRC_PROGRESS_REPORTER_H_
#define UFSPACK_PACKER_SRC_PROGRESS_REPORTER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>

#include "ufspack/builder.h"

namespace ufspack {
namespace internal {

inline double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

// Calls BuildOptions::progress from the building thread: while a --part
// build sizes the tree, once the first files are listed, about four times a
// second while packing, and at the end.
class ProgressReporter {
 public:
  explicit ProgressReporter(const BuildOptions& options)
      : report_(options.progress),
        start_(std::chrono::steady_clock::now()),
        last_(start_) {}

  BuildProgress* progress() { return &progress_; }
  // Called before each report, to bring the counts up to date.
  void SetRefresh(std::function<void(BuildProgress*)> refresh) {
    refresh_ = std::move(refresh);
  }
  void ResetClock() { start_ = last_ = std::chrono::steady_clock::now(); }

  void Start() {
    start_ = last_ = std::chrono::steady_clock::now();
    if (refresh_) refresh_(&progress_);
    if (report_) report_(progress_);
  }
  // Reports if a quarter of a second went by since the last report.
  void Tick(const PackWriter& writer) { Tick(writer.data_bytes()); }
  // Tick() with data.ufs's size so far given.
  void Tick(uint64_t data_bytes) {
    if (!report_) return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_ >= std::chrono::milliseconds(250)) {
      last_ = now;
      Report(data_bytes);
    }
  }
  void Report(const PackWriter& writer) { Report(writer.data_bytes()); }
  void Report(uint64_t data_bytes) {
    if (refresh_) refresh_(&progress_);
    progress_.bytes_out = data_bytes;
    progress_.seconds = SecondsSince(start_);
    if (report_) report_(progress_);
  }

 private:
  const std::function<void(const BuildProgress&)>& report_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
  std::function<void(BuildProgress*)> refresh_;
  BuildProgress progress_;
};

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_PROGRESS_REPORTER_H_
