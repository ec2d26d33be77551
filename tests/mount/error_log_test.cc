// Copyright 2026 The ufspack Authors.
//
// The mount's log of failed records (mount/src/error_log.h): a line per
// failure of a record, not per request; repeats counted and told.  The
// lines of real mounts: tests/python/test_mount.py.
#include "error_log.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace ufspack {
namespace mount {
namespace {

using std::chrono::seconds;
using Clock = ErrorLog::Clock;

struct Lines {
  std::vector<std::string> lines;
  ErrorLog log{[this](const std::string& l) { lines.push_back(l); },
               seconds(10)};
};

TEST(ErrorLogTest, RepeatsWithinTheQuietTimeAreCountedNotLogged) {
  Lines t;
  const Clock::time_point t0{};
  t.log.ReportAt(7, "EIO: record 7", t0);
  t.log.ReportAt(7, "EIO: record 7", t0 + seconds(1));
  t.log.ReportAt(7, "EIO: record 7", t0 + seconds(9));
  ASSERT_EQ(t.lines, std::vector<std::string>{"EIO: record 7"});
  EXPECT_EQ(t.log.logged(), 1u);
  EXPECT_EQ(t.log.suppressed(), 2u);
  // After the quiet time: logged again, with the count of those not logged.
  t.log.ReportAt(7, "EIO: record 7", t0 + seconds(10));
  ASSERT_EQ(t.lines.size(), 2u);
  EXPECT_EQ(t.lines[1],
            "EIO: record 7 (2 more failures of this record not logged)");
  // The quiet time restarts from that line; one repeat is "failure".
  t.log.ReportAt(7, "EIO: record 7", t0 + seconds(11));
  t.log.ReportAt(7, "EIO: record 7", t0 + seconds(25));
  ASSERT_EQ(t.lines.size(), 3u);
  EXPECT_EQ(t.lines[2],
            "EIO: record 7 (1 more failure of this record not logged)");
  // A failure long after, with none between: the line alone.
  t.log.ReportAt(7, "EIO: record 7", t0 + seconds(100));
  ASSERT_EQ(t.lines.size(), 4u);
  EXPECT_EQ(t.lines[3], "EIO: record 7");
}

TEST(ErrorLogTest, EachRecordHasItsOwnQuietTime) {
  Lines t;
  const Clock::time_point t0{};
  t.log.ReportAt(1, "one", t0);
  t.log.ReportAt(2, "two", t0);
  t.log.ReportAt(1, "one", t0 + seconds(1));
  t.log.ReportAt(3, "three", t0 + seconds(1));
  t.log.Write("not about a record");
  t.log.Write("not about a record");
  EXPECT_EQ(t.lines, (std::vector<std::string>{"one", "two", "three",
                                               "not about a record",
                                               "not about a record"}));
}

TEST(ErrorLogTest, RemembersABoundedNumberOfRecords) {
  Lines t;
  const Clock::time_point t0{};
  for (uint64_t i = 0; i < ErrorLog::kMaxRecords; ++i) {
    t.log.ReportAt(i, "r", t0);
  }
  // Full, all within their quiet time: all forgotten for the next, so
  // record 0 (within its quiet time) is logged again rather than counted.
  t.log.ReportAt(ErrorLog::kMaxRecords, "r", t0 + seconds(1));
  t.log.ReportAt(0, "r", t0 + seconds(2));
  EXPECT_EQ(t.lines.size(), ErrorLog::kMaxRecords + 2);
  // Full again later: only those whose quiet time is over are forgotten.
  Lines u;
  for (uint64_t i = 0; i + 1 < ErrorLog::kMaxRecords; ++i) {
    u.log.ReportAt(i, "old", t0);
  }
  u.log.ReportAt(ErrorLog::kMaxRecords, "new", t0 + seconds(15));
  u.log.ReportAt(ErrorLog::kMaxRecords + 1, "newer", t0 + seconds(20));
  u.log.ReportAt(ErrorLog::kMaxRecords, "new", t0 + seconds(21));
  EXPECT_EQ(u.log.suppressed(), 1u);  // "new" was kept, within its time
  EXPECT_EQ(u.lines.back(), "newer");
}

TEST(ErrorLogTest, ConcurrentReportsOfOneRecordLogOneLine) {
  std::vector<std::string> lines;
  ErrorLog log([&lines](const std::string& l) { lines.push_back(l); },
               seconds(3600));
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&log] {
      for (int k = 0; k < 1000; ++k) log.Report(42, "EIO: record 42");
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(lines.size(), 1u);
  EXPECT_EQ(log.logged(), 1u);
  EXPECT_EQ(log.suppressed(), 7999u);
}

}  // namespace
}  // namespace mount
}  // namespace ufspack
