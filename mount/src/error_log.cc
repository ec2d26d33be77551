// Copyright 2026 The ufspack Authors.
#include "error_log.h"

#include <utility>

namespace ufspack {
namespace mount {

ErrorLog::ErrorLog(std::function<void(const std::string&)> sink,
                   Clock::duration quiet)
    : sink_(std::move(sink)), quiet_(quiet) {}

void ErrorLog::ReportAt(uint64_t record, const std::string& line,
                        Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(record);
  if (it != records_.end() && now - it->second.logged_at < quiet_) {
    ++it->second.not_logged;
    ++suppressed_;
    return;
  }
  std::string out = line;
  if (it != records_.end() && it->second.not_logged > 0) {
    out += " (" + std::to_string(it->second.not_logged) + " more failure" +
           (it->second.not_logged == 1 ? "" : "s") +
           " of this record not logged)";
  }
  if (it == records_.end()) {
    if (records_.size() >= kMaxRecords) Forget(now);
    it = records_.emplace(record, Entry{}).first;
  }
  it->second = Entry{now, 0};
  ++logged_;
  if (sink_) sink_(out);
}

void ErrorLog::Write(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sink_) sink_(line);
}

void ErrorLog::Forget(Clock::time_point now) {
  for (auto it = records_.begin(); it != records_.end();) {
    it = now - it->second.logged_at >= quiet_ ? records_.erase(it) : ++it;
  }
  if (records_.size() > kMaxRecords - kMaxRecords / 4) records_.clear();
}

uint64_t ErrorLog::logged() const {
  std::lock_guard<std::mutex> lock(mu_);
  return logged_;
}

uint64_t ErrorLog::suppressed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return suppressed_;
}

}  // namespace mount
}  // namespace ufspack
