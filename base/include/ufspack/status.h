// Copyright 2026 The ufspack Authors.
//
// Status: the result of an operation that can fail, in the style of
// LevelDB's and abseil's Status.  An OK status holds no allocation; an error
// carries a code and a message that names the file, record, offset, what was
// expected and what was found, e.g.
//
//   index.ufs: record 123 'cat/x.jpg': offset 4096 + length 20311 exceeds
//   data size 4100000
//
// Thread safety: a Status is a value type; distinct objects may be used from
// different threads, a single object needs external synchronisation.
#ifndef UFSPACK_STATUS_H_
#define UFSPACK_STATUS_H_

#include <memory>
#include <string>
#include <string_view>

#include "ufspack/export.h"

namespace ufspack {

class UFSPACK_EXPORT [[nodiscard]] Status {
 public:
  enum class Code : unsigned char {
    kOk = 0,
    kNotFound = 1,         // a file, record or name does not exist
    kInvalidArgument = 2,  // the caller asked for something impossible
    kOutOfRange = 3,       // an index past the end
    kCorruption = 4,       // bytes on disk disagree with the format
    kIOError = 5,          // the operating system reported an error
    kNotSupported = 6,     // a valid file this build cannot read
    kAborted = 7,          // cancelled by the caller (e.g. Ctrl-C)
  };

  Status() noexcept = default;
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&& other) noexcept = default;
  Status& operator=(Status&& other) noexcept = default;
  ~Status() = default;

  static Status OK() { return Status(); }
  static Status NotFound(std::string_view msg) {
    return Status(Code::kNotFound, msg);
  }
  static Status InvalidArgument(std::string_view msg) {
    return Status(Code::kInvalidArgument, msg);
  }
  static Status OutOfRange(std::string_view msg) {
    return Status(Code::kOutOfRange, msg);
  }
  static Status Corruption(std::string_view msg) {
    return Status(Code::kCorruption, msg);
  }
  static Status IOError(std::string_view msg) {
    return Status(Code::kIOError, msg);
  }
  // An IOError (or NotFound for ENOENT/ENOTDIR) built from an errno value:
  // "<context>: <strerror(errnum)>".
  static Status FromErrno(std::string_view context, int errnum);
  static Status NotSupported(std::string_view msg) {
    return Status(Code::kNotSupported, msg);
  }
  static Status Aborted(std::string_view msg) {
    return Status(Code::kAborted, msg);
  }

  bool ok() const { return state_ == nullptr; }
  Code code() const { return state_ ? state_->code : Code::kOk; }
  bool IsNotFound() const { return code() == Code::kNotFound; }
  bool IsInvalidArgument() const { return code() == Code::kInvalidArgument; }
  bool IsOutOfRange() const { return code() == Code::kOutOfRange; }
  bool IsCorruption() const { return code() == Code::kCorruption; }
  bool IsIOError() const { return code() == Code::kIOError; }
  bool IsNotSupported() const { return code() == Code::kNotSupported; }
  bool IsAborted() const { return code() == Code::kAborted; }

  // The message alone (empty for OK).
  std::string_view message() const {
    return state_ ? std::string_view(state_->message) : std::string_view();
  }
  // "OK" or "<Code name>: <message>".
  std::string ToString() const;

  // Returns a copy whose message is "<prefix>: <message>". OK stays OK.
  Status WithContext(std::string_view prefix) const;

  // errno value for IO errors built by FromErrno, 0 otherwise.
  int errno_value() const { return state_ ? state_->errnum : 0; }

 private:
  struct State {
    Code code;
    int errnum;
    std::string message;
  };
  Status(Code code, std::string_view msg, int errnum = 0);

  std::unique_ptr<State> state_;
};

// Name of a code: "OK", "NotFound", "Corruption", ...
UFSPACK_EXPORT const char* StatusCodeName(Status::Code code);

}  // namespace ufspack

// Evaluates `expr` (a Status) and returns it from the enclosing function if
// it is not OK.
#define UFSPACK_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::ufspack::Status _ufspack_status = (expr);        \
    if (!_ufspack_status.ok()) return _ufspack_status; \
  } while (0)

#endif  // UFSPACK_STATUS_H_
