// Copyright 2026 The ufspack Authors.
//
// Tests for ufspack::Status: codes, messages, errno mapping, context and
// value semantics.
#include "ufspack/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

namespace ufspack {
namespace {

TEST(StatusTest, DefaultIsOkWithEmptyMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kOk);
  EXPECT_TRUE(s.message().empty());
  EXPECT_EQ(s.errno_value(), 0);
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, OkFactoryEqualsDefault) {
  Status s = Status::OK();
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE(s.message().empty());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, OkHoldsNoAllocation) {
  // An OK status is a single null pointer: no heap state to carry.
  static_assert(sizeof(Status) == sizeof(void*),
                "Status should be one pointer wide");
  static_assert(std::is_nothrow_move_constructible<Status>::value,
                "moving a Status must not throw");
  static_assert(std::is_nothrow_default_constructible<Status>::value,
                "an OK status must be free to make");
  Status s;
  EXPECT_TRUE(s.ok());
}

TEST(StatusTest, EachFactorySetsItsCode) {
  struct Case {
    Status status;
    Status::Code code;
    const char* name;
  };
  Case cases[] = {
      {Status::NotFound("m"), Status::Code::kNotFound, "NotFound"},
      {Status::InvalidArgument("m"), Status::Code::kInvalidArgument,
       "InvalidArgument"},
      {Status::OutOfRange("m"), Status::Code::kOutOfRange, "OutOfRange"},
      {Status::Corruption("m"), Status::Code::kCorruption, "Corruption"},
      {Status::IOError("m"), Status::Code::kIOError, "IOError"},
      {Status::NotSupported("m"), Status::Code::kNotSupported, "NotSupported"},
      {Status::Aborted("m"), Status::Code::kAborted, "Aborted"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_EQ(c.status.message(), "m");
    EXPECT_EQ(c.status.ToString(), std::string(c.name) + ": m");
    EXPECT_STREQ(StatusCodeName(c.code), c.name);
    EXPECT_EQ(c.status.errno_value(), 0);
  }
}

TEST(StatusTest, PredicatesMatchOnlyTheirCode) {
  EXPECT_TRUE(Status::NotFound("x").IsNotFound());
  EXPECT_TRUE(Status::InvalidArgument("x").IsInvalidArgument());
  EXPECT_TRUE(Status::OutOfRange("x").IsOutOfRange());
  EXPECT_TRUE(Status::Corruption("x").IsCorruption());
  EXPECT_TRUE(Status::IOError("x").IsIOError());
  EXPECT_TRUE(Status::NotSupported("x").IsNotSupported());
  EXPECT_TRUE(Status::Aborted("x").IsAborted());

  Status c = Status::Corruption("x");
  EXPECT_FALSE(c.IsNotFound());
  EXPECT_FALSE(c.IsInvalidArgument());
  EXPECT_FALSE(c.IsOutOfRange());
  EXPECT_FALSE(c.IsIOError());
  EXPECT_FALSE(c.IsNotSupported());
  EXPECT_FALSE(c.IsAborted());

  Status ok;
  EXPECT_FALSE(ok.IsNotFound());
  EXPECT_FALSE(ok.IsCorruption());
}

TEST(StatusTest, StatusCodeNameOfOk) {
  EXPECT_STREQ(StatusCodeName(Status::Code::kOk), "OK");
}

TEST(StatusTest, ErrorWithEmptyMessageIsStillAnError) {
  Status s = Status::IOError("");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.message().empty());
  EXPECT_EQ(s.ToString(), "IOError: ");
}

TEST(StatusTest, MessageKeepsEmbeddedBytes) {
  const std::string msg("a\0b", 3);
  Status s = Status::Corruption(msg);
  EXPECT_EQ(s.message(), msg);
}

TEST(StatusTest, FromErrnoEnoentIsNotFound) {
  Status s = Status::FromErrno("/no/such/file", ENOENT);
  EXPECT_TRUE(s.IsNotFound());
  EXPECT_EQ(s.errno_value(), ENOENT);
  EXPECT_EQ(s.message(),
            std::string("/no/such/file: ") + std::strerror(ENOENT));
}

TEST(StatusTest, FromErrnoEnotdirIsNotFound) {
  Status s = Status::FromErrno("a/b", ENOTDIR);
  EXPECT_TRUE(s.IsNotFound());
  EXPECT_EQ(s.errno_value(), ENOTDIR);
}

TEST(StatusTest, FromErrnoEioIsIOErrorWithErrno) {
  Status s = Status::FromErrno("data.ufs: read at offset 64", EIO);
  EXPECT_TRUE(s.IsIOError());
  EXPECT_EQ(s.errno_value(), EIO);
  EXPECT_EQ(s.message(),
            std::string("data.ufs: read at offset 64: ") + std::strerror(EIO));
  EXPECT_EQ(s.ToString(),
            std::string("IOError: data.ufs: read at offset 64: ") +
                std::strerror(EIO));
}

TEST(StatusTest, FromErrnoEaccesIsIOError) {
  Status s = Status::FromErrno("x", EACCES);
  EXPECT_TRUE(s.IsIOError());
  EXPECT_EQ(s.errno_value(), EACCES);
}

TEST(StatusTest, WithContextPrefixesMessageAndKeepsCode) {
  Status s = Status::Corruption("bad magic").WithContext("index.ufs");
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_EQ(s.message(), "index.ufs: bad magic");
  EXPECT_EQ(s.ToString(), "Corruption: index.ufs: bad magic");
}

TEST(StatusTest, WithContextNests) {
  Status s = Status::NotFound("c").WithContext("b").WithContext("a");
  EXPECT_TRUE(s.IsNotFound());
  EXPECT_EQ(s.message(), "a: b: c");
}

TEST(StatusTest, WithContextKeepsErrno) {
  Status s = Status::FromErrno("f", EIO).WithContext("record 3");
  EXPECT_TRUE(s.IsIOError());
  EXPECT_EQ(s.errno_value(), EIO);
  EXPECT_EQ(s.message().substr(0, 12), "record 3: f:");
}

TEST(StatusTest, WithContextOnOkStaysOk) {
  Status s = Status::OK().WithContext("index.ufs");
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE(s.message().empty());
}

TEST(StatusTest, WithContextLeavesOriginalUnchanged) {
  Status original = Status::Corruption("x");
  Status wrapped = original.WithContext("p");
  EXPECT_EQ(original.message(), "x");
  EXPECT_EQ(wrapped.message(), "p: x");
}

TEST(StatusTest, CopyIsDeepAndIndependent) {
  Status a = Status::FromErrno("path", EIO);
  Status b(a);
  EXPECT_EQ(b.code(), a.code());
  EXPECT_EQ(b.message(), a.message());
  EXPECT_EQ(b.errno_value(), EIO);
  // The copy owns its own message.
  EXPECT_NE(b.message().data(), a.message().data());
  a = Status::OK();
  EXPECT_TRUE(a.ok());
  EXPECT_TRUE(b.IsIOError());
  EXPECT_EQ(b.message(), std::string("path: ") + std::strerror(EIO));
}

TEST(StatusTest, CopyAssignmentReplacesState) {
  Status a = Status::NotFound("a");
  Status b = Status::Corruption("b");
  b = a;
  EXPECT_TRUE(b.IsNotFound());
  EXPECT_EQ(b.message(), "a");
  EXPECT_TRUE(a.IsNotFound());

  Status ok;
  b = ok;
  EXPECT_TRUE(b.ok());
  EXPECT_TRUE(b.message().empty());
}

TEST(StatusTest, SelfCopyAssignmentKeepsState) {
  Status a = Status::OutOfRange("keep me");
  Status& alias = a;
  a = alias;
  EXPECT_TRUE(a.IsOutOfRange());
  EXPECT_EQ(a.message(), "keep me");
}

TEST(StatusTest, MoveTransfersState) {
  Status a = Status::Corruption("moved");
  const char* data = a.message().data();
  Status b(std::move(a));
  EXPECT_TRUE(b.IsCorruption());
  EXPECT_EQ(b.message(), "moved");
  EXPECT_EQ(b.message().data(), data);  // no reallocation
}

TEST(StatusTest, MoveAssignmentTransfersState) {
  Status a = Status::NotSupported("v9");
  Status b = Status::IOError("old");
  b = std::move(a);
  EXPECT_TRUE(b.IsNotSupported());
  EXPECT_EQ(b.message(), "v9");
}

Status FailsAt(int step, int* reached) {
  for (int i = 0; i < 3; ++i) {
    *reached = i;
    UFSPACK_RETURN_IF_ERROR(i == step ? Status::Aborted("stop") : Status::OK());
  }
  return Status::OK();
}

TEST(StatusTest, ReturnIfErrorReturnsFirstError) {
  int reached = -1;
  Status s = FailsAt(1, &reached);
  EXPECT_TRUE(s.IsAborted());
  EXPECT_EQ(s.message(), "stop");
  EXPECT_EQ(reached, 1);
}

TEST(StatusTest, ReturnIfErrorPassesOk) {
  int reached = -1;
  Status s = FailsAt(-1, &reached);
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(reached, 2);
}

}  // namespace
}  // namespace ufspack
