// Copyright 2026 The ufspack Authors.
//
// ErrorLog: the mount's log lines for records that fail, one per failure
// rather than one per request.  One read() of a damaged file reaches the
// mount more than once (the kernel's read-ahead of the file fails, then it
// asks again for the page the program wants), and programs retry too, so
// logging each request would repeat every line.  Here the first failure
// of a record is logged at once; further failures of it within `quiet`
// are counted, not logged; the first one after that is logged with the
// count ("(3 more failures of this record not logged)").  So a record that
// keeps failing costs a line per `quiet`, and a record that fails again
// later is logged again.
//
// Thread safety: Report() may be called concurrently (libfuse's workers);
// lines reach the sink one at a time, in the order reported (the sink is
// called under the lock: a sink that blocks, such as a log file on a hung
// NFS server, blocks every worker that reports a failure).  Memory: at
// most kMaxRecords records are remembered; beyond that those whose quiet
// time is over are forgotten, and if that frees less than a quarter
// (thousands of records failing at once: the storage gone) all are, with
// their counts of repeats not yet told.
#ifndef UFSPACK_MOUNT_ERROR_LOG_H_
#define UFSPACK_MOUNT_ERROR_LOG_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

namespace ufspack {
namespace mount {

class ErrorLog {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxRecords = 4096;

  ErrorLog(std::function<void(const std::string&)> sink, Clock::duration quiet);

  // Logs `line`, a failure of record `record`, unless that record's last
  // line was logged less than `quiet` ago (then it is counted).
  void Report(uint64_t record, const std::string& line) {
    ReportAt(record, line, Clock::now());
  }
  // As Report(), at time `now` (tests).
  void ReportAt(uint64_t record, const std::string& line,
                Clock::time_point now);

  // Writes `line` as it is (not about a record).
  void Write(const std::string& line);

  uint64_t logged() const;      // lines about records written
  uint64_t suppressed() const;  // failures counted instead

 private:
  struct Entry {
    Clock::time_point logged_at;
    uint64_t not_logged = 0;
  };
  void Forget(Clock::time_point now);  // under mu_

  const std::function<void(const std::string&)> sink_;
  const Clock::duration quiet_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> records_;  // guarded by mu_
  uint64_t logged_ = 0;                          // guarded by mu_
  uint64_t suppressed_ = 0;                      // guarded by mu_
};

}  // namespace mount
}  // namespace ufspack

#endif  // UFSPACK_MOUNT_ERROR_LOG_H_
