// Copyright 2026 The ufspack Authors.
//
// BuildPack (ufspack/builder.h): the scan runs a class at a time on its own
// thread (ClassQueue), the files are read with many threads in flight
// (ReadAhead) and fed to a PackWriter in the scan's order; a part build
// plans its range first (part_plan.h).
#include "ufspack/builder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "build_internal.h"
#include "class_queue.h"
#include "part_plan.h"
#include "posix_io.h"
#include "progress_reporter.h"
#include "publish.h"
#include "read_ahead.h"
#include "scan_entries.h"
#include "source_file.h"
#include "spill.h"
#include "ufspack/coding.h"
#include "ufspack/format.h"
#include "ufspack/manifest.h"
#include "ufspack/parallel.h"

namespace ufspack {
namespace {

// Files larger than this are streamed by the writer instead of being read
// whole by a worker.
constexpr uint64_t kStreamThreshold = 64ull << 20;
// Source bytes buffered between the reading threads and the writer.
constexpr uint64_t kInFlightBudget = 256ull << 20;

using internal::Cancelled;
using internal::ClassQueue;
using internal::CutClass;
using internal::kChangedDuringPart;
using internal::kSameTree;
using internal::DropPackFiles;
using internal::PartPlan;
using internal::PlanPart;
using internal::ProgressReporter;
using internal::RecordPart;
using internal::SecondsSince;
using internal::Warn;

Status CheckSourceDir(const std::string& src, struct stat* st) {
  if (::stat(src.c_str(), st) != 0) return Status::FromErrno(src, errno);
  if (!S_ISDIR(st->st_mode)) {
    return Status::InvalidArgument(src + ": not a directory");
  }
  return Status::OK();
}

// Whether the pack's own files can show up among the samples: when the
// output directory is the source root, a previous data.ufs / index.ufs and
// this build's temporary files lie at the top of the tree (only listed in
// flat mode).
bool OutputIsRoot(const struct stat& src_st, const struct stat* out_st) {
  return out_st != nullptr && out_st->st_dev == src_st.st_dev &&
         out_st->st_ino == src_st.st_ino;
}

}  // namespace

namespace internal {

bool Cancelled(const BuildOptions& options) {
  return options.cancel != nullptr &&
         options.cancel->load(std::memory_order_relaxed);
}

void Warn(BuildSummary* summary, std::string w) {
  if (summary->warnings.size() < BuildSummary::kMaxWarnings) {
    summary->warnings.push_back(std::move(w));
  }
}

// Leaves the pack's own files out of `entries` (see OutputIsRoot); true if
// any was.
bool DropPackFiles(std::vector<ScanEntry>* entries) {
  auto end = std::remove_if(
      entries->begin(), entries->end(),
      [](const ScanEntry& e) { return internal::IsPackFileName(e.name); });
  if (end == entries->end()) return false;
  entries->erase(end, entries->end());
  return true;
}

// Declares the classes, and the metadata that says where the records came
// from and how they were selected.
Status DescribeSource(const std::string& root,
                      const std::vector<std::string>& classes,
                      const BuildOptions& options, PackWriter* writer) {
  for (const std::string& c : classes) {
    UFSPACK_RETURN_IF_ERROR(writer->AddClass(c));
  }
  // Where the files came from, so readers can give the original paths
  // (MyImageFolder.samples).  As given, without trailing slashes.
  UFSPACK_RETURN_IF_ERROR(writer->SetMetadata(kMetaSourceRoot, root));
  // Which files were selected: "*" (all) or the extension list.  Readers
  // that filter like ImageFolder use it to know whether they must.
  std::string selection = "*";
  if (!options.scan.all_files) {
    selection.clear();
    for (const std::string& e : NormalizeExtensions(options.scan.extensions)) {
      if (!selection.empty()) selection += ',';
      selection += e;
    }
  }
  return writer->SetMetadata(kMetaExtensions, selection);
}

Status DescribeSource(const ScanResult& scan, const BuildOptions& options,
                      PackWriter* writer) {
  return DescribeSource(scan.root, scan.classes, options, writer);
}

}  // namespace internal

namespace {

// One source file on its way from a reading thread to the writer: read
// and encoded for storage, or (a large file) open for the writer to
// stream.
struct Slot {
  PreparedRecord record;
  int stream_fd = -1;
  uint64_t stream_size = 0;
};

// Reads the source at `path` into *slot.  Runs on the read-ahead threads.
Status ReadSlot(const std::string& path, const PackWriterOptions& options,
                const internal::ReadAhead::Reserve& reserve, Slot* slot) {
  int fd;
  struct stat st;
  UFSPACK_RETURN_IF_ERROR(internal::OpenSource(path, &fd, &st));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > kStreamThreshold) {
    slot->stream_fd = fd;
    slot->stream_size = size;
    return Status::OK();
  }
  reserve(size);
  std::string bytes;
  UFSPACK_RETURN_IF_ERROR(internal::ReadSource(fd, path, st, &bytes));
  return PrepareRecord(std::move(bytes), options, &slot->record);
}

// Appends the record read into *slot (closing a streamed source).
Status AddSlot(const ScanEntry& entry, const std::string& path, Slot* slot,
               PackWriter* writer, BuildProgress* progress,
               BuildSummary* summary) {
  Status s;
  if (slot->stream_fd >= 0) {
    s = writer->AddFromFd(entry.name, entry.label, slot->stream_fd,
                          slot->stream_size, path);
    ::close(slot->stream_fd);
    slot->stream_fd = -1;
    if (s.ok()) progress->bytes_in += slot->stream_size;
  } else {
    s = writer->AddPrepared(entry.name, entry.label, slot->record);
    if (s.ok()) progress->bytes_in += slot->record.original_length;
    if (s.ok() && slot->record.codec == Codec::kZstd) summary->compressed++;
  }
  return s;
}

// Reads the files `entries` name (under `root`) with options.threads
// threads in flight and adds them to the pack in order.  A source that
// fails is skipped with a warning under skip_unreadable; any other error
// stops the build.
Status AddRecords(const std::string& root,
                  const std::vector<ScanEntry>& entries,
                  const BuildOptions& options, PackWriter* writer,
                  ProgressReporter* reporter, BuildSummary* summary) {
  internal::ReadAhead::Options ra;
  ra.count = entries.size();
  ra.threads = options.threads;
  ra.window = std::max<size_t>(64, static_cast<size_t>(options.threads) * 4);
  ra.budget = kInFlightBudget;
  ra.stop_on_error = !options.skip_unreadable;
  ra.cancel = options.cancel;
  auto path_of = [&](size_t k) { return root + "/" + entries[k].name; };
  std::vector<Slot> slots(internal::ReadAhead::SlotsFor(ra));
  internal::ReadAhead ahead(
      ra, [&](size_t k, const internal::ReadAhead::Reserve& reserve) {
        return ReadSlot(path_of(k), options.writer, reserve,
                        &slots[k % slots.size()]);
      });

  BuildProgress& progress = *reporter->progress();
  Status result;
  if (Cancelled(options)) result = Status::Aborted("interrupted");
  size_t k;
  Status item;
  for (size_t n = 0; result.ok() && n < ra.count; ++n) {
    if (!ahead.Next(&k, &item)) {
      result = Status::Aborted("interrupted");
      break;
    }
    Slot slot = std::move(slots[k % slots.size()]);
    slots[k % slots.size()] = Slot();
    Status s = item;
    if (s.ok()) {
      s = AddSlot(entries[k], path_of(k), &slot, writer, &progress, summary);
    }
    if (!s.ok()) {
      if (!writer->status().ok() || !options.skip_unreadable) {
        result = s;
        break;
      }
      summary->skipped++;
      Warn(summary, std::string(s.message()) + "; skipped");
    } else {
      progress.files_done++;
    }
    ahead.Done();
    if (Cancelled(options)) {
      result = Status::Aborted("interrupted");
      break;
    }
    reporter->Tick(*writer);
  }
  ahead.Stop();
  for (Slot& slot : slots) {
    if (slot.stream_fd >= 0) ::close(slot.stream_fd);
  }
  return result;
}

// Fills in the summary of a build that published its pack.
void Summarize(uint64_t classes, const PackWriter& writer,
               const BuildProgress& progress, BuildSummary* summary) {
  summary->index_path = writer.out_dir() + "/" + kIndexFileName;
  summary->data_path = writer.out_dir() + "/" + kDataFileName;
  summary->files = progress.files_done;
  summary->classes = classes;
  summary->bytes_in = progress.bytes_in;
  summary->bytes_out = writer.data_bytes();
  struct stat ist;
  if (::stat(summary->index_path.c_str(), &ist) == 0) {
    summary->index_bytes = static_cast<uint64_t>(ist.st_size);
  }
  if (summary->warnings.size() >= BuildSummary::kMaxWarnings) {
    summary->warnings.push_back("(more warnings not shown)");
  }
}

// Publishes the pack written so far (or abandons it on error).
Status FinishPack(Status s, const BuildOptions& options, PackWriter* writer,
                  ProgressReporter* reporter, uint64_t classes,
                  BuildSummary* summary) {
  // A writer-side failure may also be sticky without having been returned.
  if (s.ok()) s = writer->status();
  if (s.ok() && Cancelled(options)) s = Status::Aborted("interrupted");
  if (!s.ok()) {
    writer->Abandon();
    return s;
  }
  UFSPACK_RETURN_IF_ERROR(writer->Finish(&summary->pack_id));
  reporter->Report(*writer);
  Summarize(classes, *writer, *reporter->progress(), summary);
  return Status::OK();
}

}  // namespace

Status BuildPack(const std::string& src, const std::string& out_dir,
                 const BuildOptions& options_in, BuildSummary* summary) {
  const auto t0 = std::chrono::steady_clock::now();
  BuildOptions options = options_in;
  options.writer.flat = options.scan.flat;
  if (options.skip_unreadable) options.scan.skip_unreadable = true;
  options.scan.threads = std::min(options.threads, 64);
  if (options.threads < 1) {
    return Status::InvalidArgument("--threads must be at least 1");
  }
  if (options.parts < 1 || options.part >= options.parts) {
    return Status::InvalidArgument("part " + std::to_string(options.part) +
                                   " of " + std::to_string(options.parts) +
                                   ": expected 0 <= part < parts");
  }
  *summary = BuildSummary();
  struct stat src_st;
  UFSPACK_RETURN_IF_ERROR(CheckSourceDir(src, &src_st));

  std::unique_ptr<PackWriter> writer;
  UFSPACK_RETURN_IF_ERROR(PackWriter::Create(out_dir, options.writer, &writer));
  struct stat out_st;
  const bool out_known = ::stat(writer->out_dir().c_str(), &out_st) == 0;
  if (out_known) {
    // Never descend into the output directory.
    options.scan.exclude_dev = out_st.st_dev;
    options.scan.exclude_ino = out_st.st_ino;
  }
  const bool drop_pack_files =
      OutputIsRoot(src_st, out_known ? &out_st : nullptr);
  std::string root = src;  // as ScanTreeByClass gives it
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  ProgressReporter reporter(options);
  BuildProgress& progress = *reporter.progress();
  const size_t scan_ahead = std::max<size_t>(options.scan_ahead, 4);
  options.scan.max_held_files = scan_ahead;

  // A part build sizes the whole tree first (pass 1), then lists only the
  // classes its range touches.
  const bool part_build = options.parts > 1;
  PartPlan plan;
  if (part_build) {
    options.scan.cancel = options.cancel;
    UFSPACK_RETURN_IF_ERROR(
        PlanPart(src, options, drop_pack_files, &reporter, &plan, summary));
    summary->scan_seconds = SecondsSince(t0);
    progress = BuildProgress();
    reporter.ResetClock();
  }
  // The scanning thread stops (between directories) when the building
  // thread does: on an error, Ctrl-C, or when done.
  std::atomic<bool> scan_stop{false};
  options.scan.cancel = &scan_stop;
  // Pass 2 lists the classes from the first cut's to the second's.  (A flat
  // tree is listed whole: its directories, the units of pass 1 there, are
  // only known as it is walked; the sink skips those out of range.)
  auto want = [&](uint32_t label) {
    if (!part_build) return true;
    if (options.scan.flat) return plan.samples > 0;
    return plan.samples > 0 && label >= plan.lo.cls && label <= plan.hi.cls;
  };
  uint64_t units = 0;  // classes (flat: directories) handed over

  // The scan runs on a thread of its own, ahead of the packing by at most
  // options.scan_ahead samples, and hands classes over in order.
  // Samples packed per read-ahead run: large enough (by default) that the
  // pipeline's drain at the end of a run costs nothing measurable.
  const size_t chunk_samples = scan_ahead / 4;
  ClassQueue queue(scan_ahead);
  ScanResult scan;       // the scanning thread's until it is joined
  bool dropped = false;  // likewise
  const std::string changed_classes =
      root + ": " + kChangedDuringPart +
      " (its class directories differ from those when the split was "
      "computed); " +
      kSameTree;
  double walk_seconds = 0;  // the scanning thread's until it is joined
  auto scan_body = [&] {
    const auto walk_t0 = std::chrono::steady_clock::now();
    bool first = true;
    Status s = ScanTreeByClass(
        src, options.scan, want,
        [&](ScanClass* cls) -> Status {
          if (first) {
            first = false;
            if (part_build && scan.classes != plan.class_names) {
              return Status::IOError(changed_classes);
            }
            size_t wanted = 0;
            for (size_t c = 0; c < scan.classes.size(); ++c) {
              if (want(static_cast<uint32_t>(c))) ++wanted;
            }
            queue.SetClasses(scan.classes, wanted);
          }
          if (drop_pack_files && DropPackFiles(&cls->entries)) {
            dropped = true;
          }
          if (part_build) {
            const uint64_t c = options.scan.flat ? units : cls->label;
            ++units;
            if (c >= plan.classes.size()) {
              return Status::IOError(changed_classes);
            }
            if (c < plan.lo.cls || c > plan.hi.cls) return Status::OK();
            UFSPACK_RETURN_IF_ERROR(
                CutClass(root, static_cast<uint32_t>(c), options, &plan, cls));
          }
          if (!queue.Push(cls)) return Status::Aborted("interrupted");
          return Status::OK();
        },
        &scan);
    // A part whose cuts were not both found (a class gone) is not the
    // part the other jobs agree on.
    if (s.ok() && part_build &&
        (scan.classes != plan.class_names ||
         (options.scan.flat && plan.samples > 0 &&
          units != plan.classes.size()) ||
         (!plan.lo.fixed && !plan.lo.located) ||
         (!plan.hi.fixed && !plan.hi.located))) {
      s = Status::IOError(changed_classes);
    }
    walk_seconds = SecondsSince(walk_t0);
    queue.Finish(std::move(s));
  };
  std::thread scanner;
  try {
    scanner = std::thread(scan_body);
  } catch (const std::system_error& e) {
    writer->Abandon();
    return Status::IOError(std::string("cannot start a thread: ") + e.what());
  }
  struct Joiner {
    ClassQueue& queue;
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Joiner() {
      stop = true;
      queue.Stop();
      if (thread.joinable()) thread.join();
    }
  } joiner{queue, scan_stop, scanner};
  reporter.SetRefresh([&](BuildProgress* p) { queue.Describe(p); });

  // Pack the classes as they come, chunk_samples at a time.  The first run
  // waits for chunk_samples or the whole scan: a tree that small is listed
  // whole first, so its empty classes and scan errors stop the build before
  // any file is read and its progress has an exact total from the start.
  // While it waits for the scan the building thread still reports (and
  // so notices a Ctrl-C the callback raises).
  auto idle = [&] { reporter.Tick(*writer); };
  Status s;
  if (!queue.WaitFor(chunk_samples, options.cancel, idle)) {
    s = Status::Aborted("interrupted");
  }
  // The class table: pass 1's, or the scan's (set before its first class).
  std::vector<std::string> names;
  bool named = false;
  auto name_classes = [&] {
    if (named) return;
    named = true;
    names = part_build ? plan.class_names : queue.names();
  };
  std::vector<std::string> empty;
  std::vector<ScanEntry> chunk;
  bool started = false, more = true;
  while (s.ok() && more) {
    chunk.clear();
    ScanClass cls;
    while (chunk.size() < chunk_samples) {
      if (!queue.Pop(&cls, options.cancel, idle)) {
        more = false;
        break;
      }
      name_classes();
      if (cls.entries.empty() && !options.scan.flat && !part_build &&
          !options.scan.allow_empty) {
        empty.push_back(names[cls.label]);
      }
      if (!empty.empty()) continue;  // the build fails: list the rest only
      internal::MoveEntries(&cls.entries, &chunk);
    }
    if (Cancelled(options)) {
      s = Status::Aborted("interrupted");
      break;
    }
    if (!more) {
      // The scan's own error comes first (it may be why no class came).
      if (queue.done()) {
        s = queue.status();
      } else {
        s = Status::Aborted("interrupted");
      }
      if (!s.ok()) break;
    }
    if (!empty.empty() || chunk.empty()) continue;
    if (!started) {
      started = true;
      s = internal::DescribeSource(root, names, options, writer.get());
      if (!s.ok()) break;
      reporter.Start();
    }
    s = AddRecords(root, chunk, options, writer.get(), &reporter, summary);
  }
  scan_stop = true;
  queue.Stop();
  scanner.join();
  // Listing time: pass 1, and the scanning thread's time not spent waiting
  // for the packing to take what it listed.
  summary->scan_seconds +=
      std::max(0.0, walk_seconds - queue.blocked_seconds());
  // The scan's warnings go first, as the scan came first.
  {
    std::vector<std::string> read_warnings = std::move(summary->warnings);
    summary->warnings.clear();
    if (!part_build) {
      for (std::string& w : scan.warnings) Warn(summary, std::move(w));
      summary->skipped += scan.skipped;
      if (dropped) {
        Warn(summary, src +
                          ": the output directory is the source root; not "
                          "packing the pack's own files");
      }
    } else if (!s.ok()) {
      // Pass 1 reported the tree's warnings; pass 2's may say why its
      // classes changed (a directory now unreadable, skipped).
      for (std::string& w : scan.warnings) Warn(summary, std::move(w));
    }
    for (std::string& w : read_warnings) Warn(summary, std::move(w));
  }
  if (s.ok() && !empty.empty()) {
    s = EmptyClassesError(root, empty, options.scan);
  }
  if (s.ok() && !started) {
    // Nothing to pack (empty classes allowed, or a part with no sample):
    // still a valid pack, with its class table.
    name_classes();
    s = internal::DescribeSource(root, names, options, writer.get());
    if (s.ok()) reporter.Start();
  }
  if (s.ok() && part_build)
    s = RecordPart(options, plan, writer.get(), summary);
  const uint64_t classes = options.scan.flat ? 0 : names.size();
  UFSPACK_RETURN_IF_ERROR(
      FinishPack(s, options, writer.get(), &reporter, classes, summary));
  summary->seconds = SecondsSince(t0);
  return Status::OK();
}

namespace internal {

Status PackRecords(const ScanResult& scan, const BuildOptions& options,
                   PackWriter* writer, BuildSummary* summary) {
  ProgressReporter reporter(options);
  reporter.progress()->files_total = scan.entries.size();
  reporter.progress()->classes_scanned = scan.classes.size();
  reporter.progress()->classes_total = scan.classes.size();
  reporter.Start();
  Status s =
      AddRecords(scan.root, scan.entries, options, writer, &reporter, summary);
  return FinishPack(s, options, writer, &reporter, scan.classes.size(),
                    summary);
}

}  // namespace internal

}  // namespace ufspack