// Copyright 2026 The ufspack Authors.
//
// RecentRecords: the bytes of the records being read in pieces, kept in a
// few slots (a slot per key, by hash) so that the kernel's 128 KiB reads of
// one large file cost one request, when the file system has no open files
// to keep them in (zero-message opens, FUSE_CAP_NO_OPEN_SUPPORT).
//
// Thread safety: Get() may be called concurrently; readers of one key wait
// for its one load.  Lifetime: the bytes handed out stay valid while the
// caller holds them, whatever happens to the slot.
#ifndef UFSPACK_MOUNT_RECENT_RECORDS_H_
#define UFSPACK_MOUNT_RECENT_RECORDS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace ufspack {
namespace mount {

class RecentRecords {
 public:
  explicit RecentRecords(size_t slots);

  // Sets *out to the bytes of `key`: the slot's when it holds them, else
  // what `load` gives (then kept in the slot, replacing what it held).
  // Returns 0, or load's error (nothing kept).
  int Get(uint64_t key, const std::function<int(std::string*)>& load,
          std::shared_ptr<const std::string>* out);

 private:
  struct Slot {
    std::mutex mu;
    uint64_t key = 0;  // guarded by mu, with bytes
    std::shared_ptr<const std::string> bytes;
  };
  const size_t count_;
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace mount
}  // namespace ufspack

#endif  // UFSPACK_MOUNT_RECENT_RECORDS_H_
