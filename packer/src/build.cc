// Copyright 2026 The ufspack Authors.
//
// BuildPack (ufspack/builder.h): the scan runs a class at a time on its own
// thread (ClassQueue), the files are read with many threads in flight
// (ReadAhead) and fed to a PackWriter in the scan's order; a part build
// plans its range first (part_plan.h).
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

#include "archive_build.h"
#include "build_internal.h"
#include "class_queue.h"
#include "pack_writer_impl.h"
#include "part_plan.h"
#include "progress_reporter.h"
#include "publish.h"
#include "scan_entries.h"
#include "scan_order.h"
#include "source_file.h"
#include "spill.h"
#include "ufspack/builder.h"
#include "ufspack/coding.h"
#include "ufspack/format.h"
#include "ufspack/manifest.h"
#include "ufspack/parallel.h"
#include "ufspack/posix_io.h"
#include "ufspack/read_ahead.h"
#include "ufspack/reader.h"

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
using internal::DropPackFiles;
using internal::kChangedDuringPart;
using internal::kSameTree;
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
  UFSPACK_RETURN_IF_ERROR(
      writer->SetMetadata(kMetaLayout, DataLayoutName(options.layout)));
  return writer->SetMetadata(kMetaExtensions, ExtensionSelection(options.scan));
}

std::string ExtensionSelection(const ScanOptions& scan) {
  if (scan.all_files) return "*";
  std::string selection;
  for (const std::string& e : NormalizeExtensions(scan.extensions)) {
    if (!selection.empty()) selection += ',';
    selection += e;
  }
  return selection;
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
  internal::PreparedRecord record;
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
  return internal::PrepareRecord(std::move(bytes), options, &slot->record);
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
    s = internal::PackWriterImpl::Of(writer)->AddPrepared(
        entry.name, entry.label, slot->record);
    if (s.ok()) progress->bytes_in += slot->record.original_length;
    if (s.ok() && slot->record.codec == Codec::kZstd) summary->compressed++;
  }
  return s;
}

// Where each multi-file sample of `entries` starts (consecutive names
// sharing a key, Reader::SplitSampleName), and entries.size() at the end.
std::vector<uint32_t> SampleStarts(const std::vector<ScanEntry>& entries) {
  std::vector<uint32_t> starts;
  std::string_view last;
  for (size_t k = 0; k < entries.size(); ++k) {
    std::string_view key, field;
    Reader::SplitSampleName(entries[k].name, &key, &field);
    if (k == 0 || key != last) starts.push_back(static_cast<uint32_t>(k));
    last = key;
  }
  starts.push_back(static_cast<uint32_t>(entries.size()));
  return starts;
}

// Reads the files `entries` name (under `root`) with options.threads
// threads in flight and adds them to the pack in order.  A source that
// fails is skipped with a warning under skip_unreadable; any other error
// stops the build.
Status AddRecords(const std::string& root,
                  const std::vector<ScanEntry>& entries, uint64_t run,
                  const BuildOptions& options, PackWriter* writer,
                  ProgressReporter* reporter, BuildSummary* summary) {
  // The shuffled layout reads and writes the run in its data order; the
  // writer enters the index entries in record order at EndRun().
  internal::PackWriterImpl* impl = internal::PackWriterImpl::Of(writer);
  std::vector<uint32_t> order;
  if (options.layout.shuffled) {
    if (entries.size() > UINT32_MAX) {
      return Status::InvalidArgument(
          "a run of " + std::to_string(entries.size()) +
          " records is too large for the shuffled layout (at most 2^32 - 1)");
    }
    order = options.layout.samples
                ? ShuffledSampleOrder(SampleStarts(entries),
                                      options.layout.seed, run)
                : ShuffledRunOrder(static_cast<uint32_t>(entries.size()),
                                   options.layout.seed, run);
    UFSPACK_RETURN_IF_ERROR(impl->BeginRun());
  }
  auto entry_at = [&](size_t n) -> size_t {
    return order.empty() ? n : order[n];
  };
  internal::ReadAhead::Options ra;
  ra.count = entries.size();
  ra.threads = options.threads;
  ra.window = std::max<size_t>(64, static_cast<size_t>(options.threads) * 4);
  ra.budget = kInFlightBudget;
  ra.stop_on_error = !options.skip_unreadable;
  ra.cancel = options.cancel;
  auto path_of = [&](size_t k) {
    return root + "/" + entries[entry_at(k)].name;
  };
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
      if (!order.empty()) impl->SetRunPosition(entry_at(k));
      s = AddSlot(entries[entry_at(k)], path_of(k), &slot, writer, &progress,
                  summary);
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
  if (result.ok() && !order.empty()) result = impl->EndRun();
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

namespace {

// One build: Scan -> Plan -> Pack -> Finish.  The scan runs on a thread of
// its own (ScanThread), ahead of the packing by at most scan_ahead_ samples,
// and hands classes over in order through queue_; the building thread packs
// them as they come (PackAsListed).  A part build sizes the whole tree
// first (PlanPart) and then lists only the classes its range touches.
class Builder {
 public:
  Builder(const std::string& src, const BuildOptions& options,
          BuildSummary* summary)
      : t0_(std::chrono::steady_clock::now()),
        src_(src),
        options_(options),
        summary_(summary),
        reporter_(options_),
        scan_ahead_(std::max<size_t>(options.scan_ahead, 4)),
        chunk_samples_(scan_ahead_ / 4),
        queue_(scan_ahead_),
        part_build_(options.parts > 1) {}
  ~Builder() { StopScan(); }
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;

  Status Run(const std::string& out_dir) {
    UFSPACK_RETURN_IF_ERROR(Prepare(out_dir));
    if (part_build_) {
      options_.scan.cancel = options_.cancel;
      UFSPACK_RETURN_IF_ERROR(PlanPart(src_, options_, drop_pack_files_,
                                       &reporter_, &plan_, summary_));
      summary_->scan_seconds = SecondsSince(t0_);
      *reporter_.progress() = BuildProgress();
      reporter_.ResetClock();
    }
    UFSPACK_RETURN_IF_ERROR(StartScan());
    Status s = PackAsListed();
    StopScan();
    CollectWarnings(s);
    UFSPACK_RETURN_IF_ERROR(Finish(s));
    summary_->seconds = SecondsSince(t0_);
    return Status::OK();
  }

 private:
  Status Prepare(const std::string& out_dir);
  // Whether class `label` is listed (a part lists only its range's).
  bool Wanted(uint32_t label) const;
  Status OnClass(ScanClass* cls);
  void ScanThread();
  Status StartScan();
  void StopScan();
  Status PackAsListed();
  void NameClasses();
  void CollectWarnings(const Status& s);
  Status Finish(Status s);

  const std::chrono::steady_clock::time_point t0_;
  const std::string src_;
  BuildOptions options_;
  BuildSummary* const summary_;
  ProgressReporter reporter_;  // reports options_.progress
  const size_t scan_ahead_;
  // Samples packed per read-ahead run: large enough (by default) that the
  // pipeline's drain at the end of a run costs nothing measurable.
  const size_t chunk_samples_;
  ClassQueue queue_;
  const bool part_build_;
  std::unique_ptr<PackWriter> writer_;
  std::string root_;  // src_ as ScanTreeByClass gives it
  bool drop_pack_files_ = false;
  PartPlan plan_;
  std::string changed_classes_;  // the error of a tree changed since pass 1
  // The scanning thread's until it is joined.
  std::thread scanner_;
  std::atomic<bool> scan_stop_{false};
  ScanResult scan_;
  bool dropped_ = false;
  bool first_class_ = true;
  uint64_t units_ = 0;  // classes (flat: directories) handed over
  double walk_seconds_ = 0;
  // The building thread's.
  std::vector<std::string> names_;  // the class table
  bool named_ = false;
  std::vector<std::string> empty_;  // empty classes found
  bool started_ = false;            // records are being packed
  uint64_t runs_ = 0;               // AddRecords runs so far
};

Status Builder::Prepare(const std::string& out_dir) {
  options_.writer.flat = options_.scan.flat;
  if (options_.skip_unreadable) options_.scan.skip_unreadable = true;
  options_.scan.threads = std::min(options_.threads, 64);
  if (options_.threads < 1) {
    return Status::InvalidArgument("--threads must be at least 1");
  }
  if (options_.parts < 1 || options_.part >= options_.parts) {
    return Status::InvalidArgument("part " + std::to_string(options_.part) +
                                   " of " + std::to_string(options_.parts) +
                                   ": expected 0 <= part < parts");
  }
  struct stat src_st;
  UFSPACK_RETURN_IF_ERROR(CheckSourceDir(src_, &src_st));
  UFSPACK_RETURN_IF_ERROR(
      PackWriter::Create(out_dir, options_.writer, &writer_));
  struct stat out_st;
  const bool out_known = ::stat(writer_->out_dir().c_str(), &out_st) == 0;
  if (out_known) {
    // Never descend into the output directory.
    options_.scan.exclude_dev = out_st.st_dev;
    options_.scan.exclude_ino = out_st.st_ino;
  }
  drop_pack_files_ = OutputIsRoot(src_st, out_known ? &out_st : nullptr);
  root_ = src_;
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  options_.scan.max_held_files = scan_ahead_;
  changed_classes_ = root_ + ": " + kChangedDuringPart +
                     " (its class directories differ from those when the "
                     "split was computed); " +
                     kSameTree;
  return Status::OK();
}

// Pass 2 lists the classes from the first cut's to the second's.  (A flat
// tree is listed whole: its directories, the units of pass 1 there, are
// only known as it is walked; OnClass skips those out of range.)
bool Builder::Wanted(uint32_t label) const {
  if (!part_build_) return true;
  if (options_.scan.flat) return plan_.samples > 0;
  return plan_.samples > 0 && label >= plan_.lo.cls && label <= plan_.hi.cls;
}

// The scanning thread's sink: one class (flat: directory), in order.
Status Builder::OnClass(ScanClass* cls) {
  if (first_class_) {
    first_class_ = false;
    if (part_build_ && scan_.classes != plan_.class_names) {
      return Status::IOError(changed_classes_);
    }
    size_t wanted = 0;
    for (size_t c = 0; c < scan_.classes.size(); ++c) {
      if (Wanted(static_cast<uint32_t>(c))) ++wanted;
    }
    queue_.SetClasses(scan_.classes, wanted);
  }
  if (drop_pack_files_ && DropPackFiles(&cls->entries)) dropped_ = true;
  if (part_build_) {
    const uint64_t c = options_.scan.flat ? units_ : cls->label;
    ++units_;
    if (c >= plan_.classes.size()) return Status::IOError(changed_classes_);
    if (c < plan_.lo.cls || c > plan_.hi.cls) return Status::OK();
    UFSPACK_RETURN_IF_ERROR(
        CutClass(root_, static_cast<uint32_t>(c), options_, &plan_, cls));
  }
  if (!queue_.Push(cls)) return Status::Aborted("interrupted");
  return Status::OK();
}

void Builder::ScanThread() {
  const auto walk_t0 = std::chrono::steady_clock::now();
  Status s = ScanTreeByClass(
      src_, options_.scan, [this](uint32_t label) { return Wanted(label); },
      [this](ScanClass* cls) { return OnClass(cls); }, &scan_);
  // A part whose cuts were not both found (a class gone) is not the part
  // the other jobs agree on.
  if (s.ok() && part_build_ &&
      (scan_.classes != plan_.class_names ||
       (options_.scan.flat && plan_.samples > 0 &&
        units_ != plan_.classes.size()) ||
       (!plan_.lo.fixed && !plan_.lo.located) ||
       (!plan_.hi.fixed && !plan_.hi.located))) {
    s = Status::IOError(changed_classes_);
  }
  walk_seconds_ = SecondsSince(walk_t0);
  queue_.Finish(std::move(s));
}

// The scanning thread stops (between directories) when the building thread
// does: on an error, Ctrl-C, or when done.
Status Builder::StartScan() {
  options_.scan.cancel = &scan_stop_;
  try {
    scanner_ = std::thread([this] { ScanThread(); });
  } catch (const std::system_error& e) {
    writer_->Abandon();
    return Status::IOError(std::string("cannot start a thread: ") + e.what());
  }
  reporter_.SetRefresh([this](BuildProgress* p) { queue_.Describe(p); });
  return Status::OK();
}

void Builder::StopScan() {
  scan_stop_ = true;
  queue_.Stop();
  if (scanner_.joinable()) scanner_.join();
}

// The class table: pass 1's, or the scan's (set before its first class).
void Builder::NameClasses() {
  if (named_) return;
  named_ = true;
  names_ = part_build_ ? plan_.class_names : queue_.names();
}

// Packs the classes as they come, chunk_samples_ at a time.  The first run
// waits for chunk_samples_ or the whole scan: a tree that small is listed
// whole first, so its empty classes and scan errors stop the build before
// any file is read and its progress has an exact total from the start.
// While it waits for the scan the building thread still reports (and so
// notices a Ctrl-C the callback raises).
Status Builder::PackAsListed() {
  auto idle = [&] { reporter_.Tick(*writer_); };
  if (!queue_.WaitFor(chunk_samples_, options_.cancel, idle)) {
    return Status::Aborted("interrupted");
  }
  std::vector<ScanEntry> chunk;
  bool more = true;
  while (more) {
    chunk.clear();
    ScanClass cls;
    while (chunk.size() < chunk_samples_) {
      if (!queue_.Pop(&cls, options_.cancel, idle)) {
        more = false;
        break;
      }
      NameClasses();
      if (cls.entries.empty() && !options_.scan.flat && !part_build_ &&
          !options_.scan.allow_empty) {
        empty_.push_back(names_[cls.label]);
      }
      if (!empty_.empty()) continue;  // the build fails: list the rest only
      internal::MoveEntries(&cls.entries, &chunk);
    }
    if (Cancelled(options_)) return Status::Aborted("interrupted");
    if (!more) {
      // The scan's own error comes first (it may be why no class came).
      Status s =
          queue_.done() ? queue_.status() : Status::Aborted("interrupted");
      if (!s.ok()) return s;
    }
    if (!empty_.empty() || chunk.empty()) continue;
    if (!started_) {
      started_ = true;
      UFSPACK_RETURN_IF_ERROR(
          internal::DescribeSource(root_, names_, options_, writer_.get()));
      reporter_.Start();
    }
    UFSPACK_RETURN_IF_ERROR(AddRecords(root_, chunk, runs_++, options_,
                                       writer_.get(), &reporter_, summary_));
  }
  return Status::OK();
}

// The listing time (pass 1, and the scanning thread's time not spent
// waiting for the packing to take what it listed) and the warnings, the
// scan's first, as the scan came first.
void Builder::CollectWarnings(const Status& s) {
  summary_->scan_seconds +=
      std::max(0.0, walk_seconds_ - queue_.blocked_seconds());
  std::vector<std::string> read_warnings = std::move(summary_->warnings);
  summary_->warnings.clear();
  if (!part_build_) {
    for (std::string& w : scan_.warnings) Warn(summary_, std::move(w));
    summary_->skipped += scan_.skipped;
    if (dropped_) {
      Warn(summary_, src_ +
                         ": the output directory is the source root; not "
                         "packing the pack's own files");
    }
  } else if (!s.ok()) {
    // Pass 1 reported the tree's warnings; pass 2's may say why its
    // classes changed (a directory now unreadable, skipped).
    for (std::string& w : scan_.warnings) Warn(summary_, std::move(w));
  }
  for (std::string& w : read_warnings) Warn(summary_, std::move(w));
}

Status Builder::Finish(Status s) {
  if (s.ok() && !empty_.empty()) {
    s = EmptyClassesError(root_, empty_, options_.scan);
  }
  if (s.ok() && !started_) {
    // Nothing to pack (empty classes allowed, or a part with no sample):
    // still a valid pack, with its class table.
    NameClasses();
    s = internal::DescribeSource(root_, names_, options_, writer_.get());
    if (s.ok()) reporter_.Start();
  }
  if (s.ok() && part_build_) {
    s = RecordPart(options_, plan_, writer_.get(), summary_);
  }
  const uint64_t classes = options_.scan.flat ? 0 : names_.size();
  return FinishPack(s, options_, writer_.get(), &reporter_, classes, summary_);
}

}  // namespace

Status BuildPack(const std::string& src, const std::string& out_dir,
                 const BuildOptions& options, BuildSummary* summary) {
  *summary = BuildSummary();
  if (internal::IsArchiveSource(src)) {
    return internal::BuildFromArchives({src}, out_dir, options, summary);
  }
  Builder builder(src, options, summary);
  return builder.Run(out_dir);
}

Status BuildPackFromArchives(const std::vector<std::string>& archives,
                             const std::string& out_dir,
                             const BuildOptions& options,
                             BuildSummary* summary) {
  *summary = BuildSummary();
  return internal::BuildFromArchives(archives, out_dir, options, summary);
}

namespace internal {

Status PackRecords(const ScanResult& scan, const BuildOptions& options,
                   PackWriter* writer, BuildSummary* summary) {
  ProgressReporter reporter(options);
  reporter.progress()->files_total = scan.entries.size();
  reporter.progress()->classes_scanned = scan.classes.size();
  reporter.progress()->classes_total = scan.classes.size();
  reporter.Start();
  Status s = AddRecords(scan.root, scan.entries, 0, options, writer, &reporter,
                        summary);
  return FinishPack(s, options, writer, &reporter, scan.classes.size(),
                    summary);
}

}  // namespace internal

}  // namespace ufspack