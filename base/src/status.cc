// Copyright 2026 The ufspack Authors.
#include "ufspack/status.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace ufspack {

const char* StatusCodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk:
      return "OK";
    case Status::Code::kNotFound:
      return "NotFound";
    case Status::Code::kInvalidArgument:
      return "InvalidArgument";
    case Status::Code::kOutOfRange:
      return "OutOfRange";
    case Status::Code::kCorruption:
      return "Corruption";
    case Status::Code::kIOError:
      return "IOError";
    case Status::Code::kNotSupported:
      return "NotSupported";
    case Status::Code::kAborted:
      return "Aborted";
  }
  return "Unknown";
}

Status::Status(Code code, std::string_view msg, int errnum)
    : state_(new State{code, errnum, std::string(msg)}) {}

Status::Status(const Status& other)
    : state_(other.state_ ? new State(*other.state_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) {
    state_.reset(other.state_ ? new State(*other.state_) : nullptr);
  }
  return *this;
}

Status Status::FromErrno(std::string_view context, int errnum) {
  std::string msg(context);
  msg += ": ";
  msg += std::strerror(errnum);
  Code code = (errnum == ENOENT || errnum == ENOTDIR) ? Code::kNotFound
                                                      : Code::kIOError;
  return Status(code, msg, errnum);
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s = StatusCodeName(state_->code);
  s += ": ";
  s += state_->message;
  return s;
}

Status Status::WithContext(std::string_view prefix) const {
  if (ok()) return Status();
  std::string msg(prefix);
  msg += ": ";
  msg += state_->message;
  return Status(state_->code, msg, state_->errnum);
}

}  // namespace ufspack
