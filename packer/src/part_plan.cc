// Copyright 2026 The ufspack Authors.
#include "part_plan.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "build_internal.h"
#include "scan_order.h"
#include "ufspack/coding.h"
#include "ufspack/parallel.h"
#include "xxh3.h"

namespace ufspack {
namespace internal {
namespace {

// Sizes of `entries` (under `root`), stat'ed with `threads` in flight.  A
// file no job can stat weighs nothing (its read fails later and is skipped
// or fatal) under skip_unreadable, reported in *warnings if not null;
// otherwise it is an error.
Status SizeEntries(const std::string& root,
                   const std::vector<ScanEntry>& entries,
                   const BuildOptions& options, std::vector<uint64_t>* sizes,
                   std::vector<std::string>* warnings) {
  const size_t n = entries.size();
  sizes->assign(n, 0);
  std::vector<int> errnos(n, 0);
  ParallelFor(n, options.threads, [&](size_t k) {
    struct stat st;
    const std::string path = root + "/" + entries[k].name;
    if (::stat(path.c_str(), &st) == 0) {
      (*sizes)[k] = static_cast<uint64_t>(st.st_size);
    } else {
      errnos[k] = errno;
    }
  });
  for (size_t k = 0; k < n; ++k) {
    if (errnos[k] == 0) continue;
    Status e = Status::FromErrno(root + "/" + entries[k].name, errnos[k]);
    if (!options.skip_unreadable) {
      return e.WithContext("--part needs every file's size");
    }
    if (warnings != nullptr) {
      warnings->push_back(e.ToString() + "; weighs 0 in the part split");
    }
  }
  return Status::OK();
}

class Hasher {
 public:
  Hasher() : state_(XXH3_createState()) { Reset(); }
  ~Hasher() { XXH3_freeState(state_); }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  bool ok() const { return state_ != nullptr; }
  void Reset() {
    if (state_ != nullptr) XXH3_64bits_reset(state_);
  }
  void Put(const void* p, size_t len) {
    if (state_ != nullptr) UFSPACK_XXH3_UPDATE(state_, p, len);
  }
  void Put64(uint64_t v) {
    char b[8];
    EncodeFixed64(b, v);
    Put(b, 8);
  }
  void PutSample(const ScanEntry& e, uint64_t size) {
    Put64(e.name.size());
    Put(e.name.data(), e.name.size());
    Put64(e.label);
    Put64(size);
  }
  uint64_t Digest() const { return XXH3_64bits_digest(state_); }

 private:
  XXH3_state_t* state_;
};

}  // namespace

// Pass 1: lists and sizes the whole tree, computes the split's hash and
// where this part's cuts fall.
Status PlanPart(const std::string& src, const BuildOptions& options,
                bool drop_pack_files, ProgressReporter* reporter,
                PartPlan* plan, BuildSummary* summary) {
  Hasher split, cls_hash;
  if (!split.ok() || !cls_hash.ok()) return Status::IOError("out of memory");
  static constexpr char kDomain[] = "ufspack-split";
  split.Put(kDomain, sizeof(kDomain));
  split.Put64(options.parts);
  std::vector<std::string> empty, weightless;
  std::vector<uint64_t> sizes;
  bool dropped = false;
  ScanResult scan;
  BuildProgress& progress = *reporter->progress();
  progress.splitting = true;
  progress.scan_done = false;
  // The first class is reported at once, then four times a second.
  auto last_report = std::chrono::steady_clock::time_point();
  // The class table, hashed before the first sample (flat: none).
  bool hashed_classes = false;
  auto hash_classes = [&] {
    hashed_classes = true;
    split.Put64(scan.classes.size());
    for (const std::string& c : scan.classes) {
      split.Put64(c.size());
      split.Put(c.data(), c.size());
    }
  };
  Status s = ScanTreeByClass(
      src, options.scan, nullptr,
      [&](ScanClass* cls) -> Status {
        if (Cancelled(options)) return Status::Aborted("interrupted");
        if (!hashed_classes) {
          hash_classes();
          progress.classes_total = scan.classes.size();
        }
        if (drop_pack_files && DropPackFiles(&cls->entries)) dropped = true;
        UFSPACK_RETURN_IF_ERROR(
            SizeEntries(scan.root, cls->entries, options, &sizes, &weightless));
        ClassWeight w;
        cls_hash.Reset();
        for (size_t k = 0; k < cls->entries.size(); ++k) {
          split.PutSample(cls->entries[k], sizes[k]);
          cls_hash.PutSample(cls->entries[k], sizes[k]);
          w.weight += sizes[k] + 1;
        }
        w.count = cls->entries.size();
        w.hash = cls_hash.Digest();
        if (w.count == 0 && !options.scan.flat) {
          empty.push_back(scan.classes[cls->label]);
        }
        plan->classes.push_back(w);
        plan->samples += w.count;
        progress.files_total = plan->samples;
        if (!options.scan.flat) progress.classes_scanned = plan->classes.size();
        auto now = std::chrono::steady_clock::now();
        if (options.progress &&
            now - last_report >= std::chrono::milliseconds(250)) {
          last_report = now;
          options.progress(progress);
        }
        return Status::OK();
      },
      &scan);
  summary->skipped += scan.skipped;
  for (std::string& w : scan.warnings) Warn(summary, std::move(w));
  for (std::string& w : weightless) Warn(summary, std::move(w));
  if (dropped) {
    Warn(summary, src +
                      ": the output directory is the source root; not packing "
                      "the pack's own files");
  }
  UFSPACK_RETURN_IF_ERROR(s);
  if (!empty.empty() && !options.scan.allow_empty) {
    return EmptyClassesError(scan.root, empty, options.scan);
  }
  progress.scan_done = true;  // the tree is sized
  if (options.progress) options.progress(progress);
  if (!hashed_classes) hash_classes();  // a flat tree with no file
  // The sample count goes last: it is known only now.
  split.Put64(plan->samples);
  plan->split = split.Digest();
  plan->class_names = std::move(scan.classes);
  progress.splitting = false;

  // The cuts b[part] and b[part + 1] (SplitSamples): the class holding the
  // first sample whose preceding weights reach ceil(W * i / N).
  unsigned __int128 total = 0;
  for (const ClassWeight& w : plan->classes) total += w.weight;
  auto place = [&](uint32_t i, Cut* cut) {
    if (i == 0 || i == options.parts || total == 0) {
      cut->fixed = true;
      cut->index = i == 0 || total == 0 ? 0 : plan->samples;
      cut->cls = i == 0 || total == 0
                     ? 0
                     : static_cast<uint32_t>(plan->classes.size() - 1);
      return;
    }
    cut->target =
        static_cast<uint64_t>((total * i + options.parts - 1) / options.parts);
    uint64_t before = 0, start = 0;
    for (size_t c = 0; c < plan->classes.size(); ++c) {
      const ClassWeight& w = plan->classes[c];
      if (before + w.weight >= cut->target) {
        cut->cls = static_cast<uint32_t>(c);
        cut->start = start;
        cut->before = before;
        return;
      }
      before += w.weight;
      start += w.count;
    }
  };
  place(options.part, &plan->lo);
  place(options.part + 1, &plan->hi);
  return Status::OK();
}

// Pass 2, for one re-listed class: checks it against pass 1 and cuts it to
// the part's range.
Status CutClass(const std::string& root, uint32_t c,
                const BuildOptions& options, PartPlan* plan, ScanClass* cls) {
  std::vector<uint64_t> sizes;
  UFSPACK_RETURN_IF_ERROR(
      SizeEntries(root, cls->entries, options, &sizes, nullptr));
  Hasher h;
  if (!h.ok()) return Status::IOError("out of memory");
  for (size_t k = 0; k < cls->entries.size(); ++k) {
    h.PutSample(cls->entries[k], sizes[k]);
  }
  const ClassWeight& w = plan->classes[c];
  if (cls->entries.size() != w.count || h.Digest() != w.hash) {
    const std::string where =
        options.scan.flat ? root : root + "/" + plan->class_names[c];
    return Status::IOError(
        where + ": " + kChangedDuringPart + " (" +
        std::to_string(cls->entries.size()) + " files now, " +
        std::to_string(w.count) +
        " with other names or sizes when the split was computed); " +
        kSameTree);
  }
  // The first sample of the class whose preceding weights reach the cut.
  auto locate = [&](Cut* cut) -> size_t {
    uint64_t sum = cut->before;
    size_t j = 0;
    while (j < sizes.size() && sum < cut->target) sum += sizes[j++] + 1;
    cut->index = cut->start + j;
    cut->located = true;
    return j;
  };
  size_t end = cls->entries.size(), begin = 0;
  if (!plan->hi.fixed && plan->hi.cls == c) end = locate(&plan->hi);
  if (!plan->lo.fixed && plan->lo.cls == c) begin = locate(&plan->lo);
  cls->entries.erase(cls->entries.begin() + static_cast<ptrdiff_t>(end),
                     cls->entries.end());
  cls->entries.erase(cls->entries.begin(),
                     cls->entries.begin() + static_cast<ptrdiff_t>(begin));
  return Status::OK();
}

Status RecordPart(const BuildOptions& options, const PartPlan& plan,
                  PackWriter* writer, BuildSummary* summary) {
  const uint64_t first = plan.lo.index, count = plan.hi.index - plan.lo.index;
  summary->part_first = first;
  summary->part_samples = count;
  summary->split_samples = plan.samples;
  UFSPACK_RETURN_IF_ERROR(writer->SetMetadata(
      kMetaPart,
      std::to_string(options.part) + "/" + std::to_string(options.parts)));
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(plan.split));
  UFSPACK_RETURN_IF_ERROR(writer->SetMetadata(kMetaPartSplit, hex));
  return writer->SetMetadata(kMetaPartRange, std::to_string(first) + " " +
                                                 std::to_string(count) + " " +
                                                 std::to_string(plan.samples));
}

}  // namespace internal

std::vector<uint64_t> SplitSamples(const std::vector<uint64_t>& sizes,
                                   uint32_t parts) {
  const uint64_t n = sizes.size();
  std::vector<uint64_t> prefix(n + 1, 0);  // weights of samples [0, k)
  for (uint64_t k = 0; k < n; ++k) prefix[k + 1] = prefix[k] + sizes[k] + 1;
  const unsigned __int128 total = prefix[n];
  std::vector<uint64_t> bounds(parts + 1, n);
  bounds[0] = 0;
  for (uint32_t i = 1; i < parts; ++i) {
    // The first k with prefix[k] >= ceil(total * i / parts).
    const uint64_t target =
        static_cast<uint64_t>((total * i + parts - 1) / parts);
    bounds[i] = static_cast<uint64_t>(
        std::lower_bound(prefix.begin(), prefix.end(), target) -
        prefix.begin());
  }
  return bounds;
}

}  // namespace ufspack
