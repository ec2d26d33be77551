// Copyright 2026 The ufspack Authors.
#include "record_codec.h"

#include <zstd.h>

#include <memory>
#include <string>

#include "ufspack/text.h"

namespace ufspack {
namespace internal {
namespace {

struct ZstdDCtxDeleter {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

// Per-thread decompression state: no locks on the read path, and nothing
// shared that a fork() could leave locked.
ZSTD_DCtx* ThreadDCtx() {
  thread_local std::unique_ptr<ZSTD_DCtx, ZstdDCtxDeleter> ctx(
      ZSTD_createDCtx());
  return ctx.get();
}

Status BadFrame(const std::string& data_name, const Record& r,
                const std::string& what) {
  return Status::Corruption(data_name + ": record " + std::to_string(r.index) +
                            " '" + EscapeBytes(r.name) + "' at offset " +
                            std::to_string(r.offset) + ": " + what);
}

// Checks that the zstd frame in frame[0, r.stored_length) declares exactly
// r.original_length bytes of content.  Necessary, not sufficient: the frame
// header is as untrusted as the index, so ZstdRecordDecoder below also never
// allocates more than the frame has actually produced.
Status CheckFrameSize(const std::string& data_name, const Record& r,
                      const char* frame) {
  const unsigned long long content =
      ZSTD_getFrameContentSize(frame, r.stored_length);
  if (content != r.original_length) {
    return BadFrame(data_name, r,
                    "zstd frame content size: expected " +
                        std::to_string(r.original_length) + ", found " +
                        (content == ZSTD_CONTENTSIZE_ERROR ||
                                 content == ZSTD_CONTENTSIZE_UNKNOWN
                             ? std::string("none")
                             : std::to_string(content)));
  }
  return Status::OK();
}

}  // namespace

std::string& ThreadScratch() {
  thread_local std::string scratch;
  return scratch;
}

Status DecodeZstdRecord(const std::string& data_name, const Record& r,
                        const char* frame, ZstdOutput* output) {
  UFSPACK_RETURN_IF_ERROR(CheckFrameSize(data_name, r, frame));
  ZSTD_DCtx* dctx = ThreadDCtx();
  if (dctx == nullptr)
    return Status::IOError("out of memory (ZSTD_createDCtx)");
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  const uint64_t expected = r.original_length;
  auto sizes = [&](uint64_t found) {
    return "expected " + std::to_string(expected) + " bytes, found " +
           std::to_string(found);
  };
  ZSTD_inBuffer in{frame, static_cast<size_t>(r.stored_length), 0};
  uint64_t produced = 0;
  size_t ret = 1;  // 0 once the last frame is complete
  char spill[1];   // catches output past original_length
  for (;;) {
    ZSTD_outBuffer out{spill, sizeof(spill), 0};
    const bool past_end = produced == expected;
    if (!past_end) {
      char* dst = nullptr;
      size_t size = 0;
      UFSPACK_RETURN_IF_ERROR(
          output->Room(produced, expected - produced, &dst, &size));
      out = ZSTD_outBuffer{dst, size, 0};
    }
    bool stalled = false;
    while (out.pos < out.size && !(ret == 0 && in.pos == in.size)) {
      const size_t in_before = in.pos, out_before = out.pos;
      ret = ZSTD_decompressStream(dctx, &out, &in);
      if (ZSTD_isError(ret)) {
        if (!past_end) UFSPACK_RETURN_IF_ERROR(output->Filled(out.pos));
        produced += past_end ? 0 : out.pos;
        // zstd checks the declared size when it decodes the last block,
        // before handing that block out, so `produced` may miss up to one
        // block (128 KiB) of what the frame holds.
        return BadFrame(
            data_name, r,
            "zstd frame ends early or is damaged: " + sizes(produced) +
                " before zstd stopped (" + ZSTD_getErrorName(ret) + ")");
      }
      if (in.pos == in_before && out.pos == out_before) {
        stalled = true;  // input used up inside a frame
        break;
      }
    }
    if (past_end) {
      if (out.pos > 0) {
        return BadFrame(data_name, r,
                        "zstd frame goes on past its size: expected " +
                            std::to_string(expected) + " bytes, found more");
      }
    } else {
      UFSPACK_RETURN_IF_ERROR(output->Filled(out.pos));
      produced += out.pos;
    }
    if (stalled) {
      return BadFrame(data_name, r, "zstd frame truncated: " + sizes(produced));
    }
    if (ret == 0 && in.pos == in.size) break;
  }
  if (produced != expected) {
    return BadFrame(data_name, r, "zstd frame ends early: " + sizes(produced));
  }
  return Status::OK();
}

}  // namespace internal
}  // namespace ufspack
