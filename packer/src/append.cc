// Copyright 2026 The ufspack Authors.
//
// AppendPack (ufspack/merge.h): a tree's new files packed as a new part of
// the pack and a manifest that lists every record in ImageFolder's order of
// the grown tree.  An Appender runs the steps in order: open and lock the
// pack, list the candidates (scan the tree, or a file list), merge the
// class tables, place each new file, pack the new part, order the records,
// publish the manifest.
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "build_internal.h"
#include "merge_internal.h"
#include "progress_reporter.h"
#include "publish.h"
#include "scan_entries.h"
#include "scan_order.h"
#include "ufspack/builder.h"
#include "ufspack/file.h"
#include "ufspack/format.h"
#include "ufspack/manifest.h"
#include "ufspack/merge.h"
#include "ufspack/parallel.h"
#include "ufspack/posix_io.h"
#include "ufspack/reader.h"
#include "ufspack/scan.h"
#include "ufspack/text.h"

namespace ufspack {
namespace {

using internal::PublishManifest;
using internal::RealDir;
using internal::SecondsSince;

constexpr char kAppendPrefix[] = "append-";

// Removes PACK/append-* directories that `referenced` does not name: parts
// of appends that died before publishing their manifest.
void RemoveStaleAppends(const std::string& pack_dir,
                        const std::vector<std::string>& referenced) {
  DIR* d = ::opendir(pack_dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(kAppendPrefix, 0) != 0) continue;
    if (std::find(referenced.begin(), referenced.end(), name) !=
        referenced.end()) {
      continue;
    }
    stale.push_back(name);
  }
  ::closedir(d);
  for (const std::string& name : stale)
    internal::RemoveTree(pack_dir + "/" + name);
}

// The pack's structure as a manifest would list it: its parts (a single
// pack is one part, ".", the directory itself) and segments.
Status BaseContents(const std::string& pack_dir, const Reader& base,
                    ManifestContents* out, std::vector<uint64_t>* starts) {
  if (base.info().part_count == 0) {
    ManifestContents::Part p;
    p.pack_id = base.info().pack_id;
    p.record_count = base.size();
    p.data_size = base.info().data_size;
    p.index_size = base.info().index_size;
    p.path = ".";
    out->parts.push_back(std::move(p));
    if (base.size() > 0) {
      out->segments.push_back(SegmentEntry{0, 0, base.size()});
      starts->push_back(0);
    }
    return Status::OK();
  }
  std::unique_ptr<Region> region;
  UFSPACK_RETURN_IF_ERROR(
      LoadFile(pack_dir + "/" + kManifestFileName, &region));
  Manifest m;
  UFSPACK_RETURN_IF_ERROR(DecodeManifest(region->bytes(), region->name(), &m));
  if (m.header.pack_id != base.info().pack_id) {
    return Status::Aborted(region->name() + ": replaced while appending");
  }
  ManifestContents contents;
  UFSPACK_RETURN_IF_ERROR(ManifestContentsOf(m, region->name(), &contents));
  for (ManifestContents::Part& p : contents.parts) {
    out->parts.push_back(std::move(p));
  }
  out->segments = m.segments;
  *starts = m.segment_starts;
  return Status::OK();
}

// Merges two class lists sorted in Python's order into their sorted union.
std::vector<std::string> UnionClasses(const std::vector<std::string>& a,
                                      const std::vector<std::string>& b) {
  std::vector<std::string> out;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && PyFsLess(a[i], b[j]))) {
      out.push_back(a[i++]);
    } else if (i == a.size() || PyFsLess(b[j], a[i])) {
      out.push_back(b[j++]);
    } else {
      out.push_back(a[i++]);
      ++j;
    }
  }
  return out;
}

uint32_t IndexIn(const std::vector<std::string>& sorted,
                 const std::string& name) {
  return static_cast<uint32_t>(
      std::lower_bound(sorted.begin(), sorted.end(), name, PyFsLess) -
      sorted.begin());
}

// AppendOptions::files as a scan of `dir` would give them: the listed names
// that `so` selects, without duplicates, in ImageFolder's order, labelled
// by their classes (the listed files' first components, sorted).
Status ListedFiles(const std::string& dir_in,
                   const std::vector<std::string>& files, const ScanOptions& so,
                   const std::string& pack_dir, ScanResult* out,
                   std::vector<std::string>* warnings) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  *out = ScanResult();
  out->root = dir;
  const std::vector<std::string> extensions =
      NormalizeExtensions(so.extensions);
  // Names may come as `dir`/name (find's output), with or without "./".
  std::string_view bare_dir = dir;
  while (bare_dir.size() > 2 && bare_dir.substr(0, 2) == "./")
    bare_dir.remove_prefix(2);
  const std::string prefix = std::string(bare_dir) + "/";
  // The pack's own directory, when it lies inside the tree (as a build's
  // scan leaves it out): its path relative to `dir`, plus '/'.
  std::string own;
  {
    std::string real_dir, real_pack;
    if (RealDir(dir, &real_dir).ok() && RealDir(pack_dir, &real_pack).ok() &&
        real_pack.size() > real_dir.size() + 1 &&
        real_pack.compare(0, real_dir.size() + 1, real_dir + "/") == 0) {
      own = real_pack.substr(real_dir.size() + 1) + "/";
    }
  }
  uint64_t in_pack = 0;
  struct Listed {
    std::string_view cls;
    std::string_view name;
  };
  std::vector<Listed> picked;
  uint64_t unselected = 0;
  std::string first_unselected;
  for (size_t k = 0; k < files.size(); ++k) {
    std::string_view name = files[k];
    while (name.substr(0, 2) == "./") name.remove_prefix(2);
    if (name.size() > prefix.size() &&
        name.substr(0, prefix.size()) == prefix) {
      name.remove_prefix(prefix.size());
    }
    while (name.substr(0, 2) == "./") name.remove_prefix(2);
    if (!own.empty() && name.substr(0, own.size()) == own) {
      ++in_pack;  // the pack's own files
      continue;
    }
    const std::string why = internal::UnsafeRelativePath(name);
    if (!why.empty()) {
      return Status::InvalidArgument("listed file " + std::to_string(k + 1) +
                                     " '" + EscapeBytes(files[k]) +
                                     "': not a path relative to " + dir + " (" +
                                     why + ")");
    }
    const size_t slash = name.find('/');
    const bool selected =
        (so.all_files || HasAllowedExtension(name, extensions)) &&
        (so.flat || slash != std::string_view::npos);
    if (!selected) {
      if (unselected++ == 0) first_unselected = std::string(name);
      continue;
    }
    picked.push_back(
        Listed{so.flat ? std::string_view() : name.substr(0, slash), name});
  }
  if (in_pack > 0) {
    warnings->push_back(dir + ": " + std::to_string(in_pack) +
                        " listed files lie in the pack's own directory " +
                        pack_dir + ": skipped");
  }
  if (unselected > 0) {
    warnings->push_back(
        dir + ": " + std::to_string(unselected) +
        " listed files are not samples under the pack's file selection (" +
        (so.all_files ? std::string("every file") : "its extensions") +
        (so.flat ? "" : ", in a class directory") + "), e.g. '" +
        first_unselected + "': skipped");
  }
  std::sort(picked.begin(), picked.end(), [](const Listed& a, const Listed& b) {
    if (a.cls != b.cls) return PyFsLess(a.cls, b.cls);
    return ImageFolderLess(a.name, b.name);
  });
  picked.erase(std::unique(picked.begin(), picked.end(),
                           [](const Listed& a, const Listed& b) {
                             return a.name == b.name;
                           }),
               picked.end());
  for (const Listed& l : picked) {
    if (!so.flat && (out->classes.empty() || out->classes.back() != l.cls))
      out->classes.emplace_back(l.cls);
    out->entries.push_back(ScanEntry{
        std::string(l.name),
        so.flat ? kNoLabel : static_cast<uint32_t>(out->classes.size() - 1)});
  }
  return Status::OK();
}

// Checks that the pack's records [lo, hi) (one class's, or a flat pack's)
// are in ImageFolder's order, as a list append's binary search needs.
// O(hi - lo), sequential.
Status CheckImageFolderOrder(const Reader& base, const std::string& pack_dir,
                             uint64_t lo, uint64_t hi) {
  constexpr uint64_t kChunk = 1024;
  std::vector<uint64_t> indices(kChunk);
  std::vector<Record> records(kChunk);
  std::string previous;
  for (uint64_t at = lo; at < hi; at += kChunk) {
    const uint64_t n = std::min(kChunk, hi - at);
    for (uint64_t k = 0; k < n; ++k) indices[k] = at + k;
    UFSPACK_RETURN_IF_ERROR(base.GetRecords(indices.data(), n, records.data()));
    for (uint64_t k = 0; k < n; ++k) {
      const std::string_view name = records[k].name;
      if (at + k > lo && !ImageFolderLess(previous, name)) {
        return Status::InvalidArgument(
            pack_dir + ": record " + std::to_string(at + k) + " '" +
            EscapeBytes(name) + "' comes after '" + EscapeBytes(previous) +
            "', out of ImageFolder's order (kept records of files deleted "
            "before an earlier append, or a merge of separately built "
            "packs): appending a list of files needs a pack in that order; "
            "append by scanning the tree, or rebuild");
      }
      previous.assign(name);
    }
    base.ReleaseRecords(at, n);  // bounded resident set at any pack size
  }
  return Status::OK();
}

// The place of `name` among the pack's records [lo, hi), which are in
// ImageFolder's order: the first record after it.
Status InsertionPoint(const Reader& base, uint64_t lo, uint64_t hi,
                      const std::string& name, uint64_t* pos) {
  uint64_t a = lo, b = hi;
  while (a < b) {
    const uint64_t mid = a + (b - a) / 2;
    Record r;
    UFSPACK_RETURN_IF_ERROR(base.GetRecord(mid, &r));
    if (ImageFolderLess(r.name, name)) {
      a = mid + 1;
    } else {
      b = mid;
    }
  }
  *pos = a;
  return Status::OK();
}

// Appends run (part, first, count) to `segments`, extending the last one
// when it continues it.
void PushRun(std::vector<SegmentEntry>* segments, uint32_t part, uint64_t first,
             uint64_t count) {
  if (count == 0) return;
  if (!segments->empty()) {
    SegmentEntry& last = segments->back();
    if (last.part == part && last.first + last.count == first) {
      last.count += count;
      return;
    }
  }
  segments->push_back(SegmentEntry{part, first, count});
}

// One append.  Each method is a step of Run(), in order; the state the
// steps hand on is in the members.
class Appender {
 public:
  Appender(const std::string& dir, const AppendOptions& options,
           AppendSummary* summary)
      : t0_(std::chrono::steady_clock::now()),
        dir_(dir),
        options_(options),
        summary_(summary) {}
  ~Appender() {
    // A part not published is removed (an error, Ctrl-C, nothing added).
    if (!part_dir_.empty() && !published_) internal::RemoveTree(part_dir_);
    if (dir_fd_ >= 0) ::close(dir_fd_);
  }
  Appender(const Appender&) = delete;
  Appender& operator=(const Appender&) = delete;

  Status Run(const std::string& pack_in) {
    UFSPACK_RETURN_IF_ERROR(OpenPack(pack_in));
    SelectAsThePackWas();
    UFSPACK_RETURN_IF_ERROR(options_.files ? ListListedFiles() : ScanTree());
    UFSPACK_RETURN_IF_ERROR(MergeClasses());
    UFSPACK_RETURN_IF_ERROR(PlaceNewFiles());
    summary_->records = n_;
    summary_->parts = contents_.parts.size();
    summary_->segments = contents_.segments.size();
    summary_->manifest_path =
        base_->info().part_count > 0 ? pack_dir_ + "/" + kManifestFileName : "";
    summary_->pack_id = base_->info().pack_id;
    bool packed = false;
    if (!delta_.entries.empty()) UFSPACK_RETURN_IF_ERROR(PackNewPart(&packed));
    if (packed) {
      UFSPACK_RETURN_IF_ERROR(DescribeContents());
      UFSPACK_RETURN_IF_ERROR(Publish());
    }
    summary_->seconds = SecondsSince(t0_);
    return Status::OK();
  }

 private:
  Status OpenPack(const std::string& pack_in);
  void SelectAsThePackWas();
  Status Lookup(const std::vector<ScanEntry>& entries,
                std::vector<uint64_t>* found_at);
  Status ListListedFiles();
  Status ScanTree();
  Status MergeClasses();
  Status PlaceNewFiles();
  Status PlaceAfterScannedRecords();
  Status PlaceBySearch();
  Status PackNewPart(bool* packed);
  std::vector<SegmentEntry> Order() const;
  Status DescribeContents();
  Status Publish();

  const std::chrono::steady_clock::time_point t0_;
  const std::string dir_;
  const AppendOptions& options_;
  AppendSummary* const summary_;
  // The pack: its directory (locked), its reader, its parts and segments
  // as a manifest lists them, and where each segment starts.
  std::string pack_dir_;
  int dir_fd_ = -1;
  struct stat pack_st_ = {};
  std::unique_ptr<Reader> base_;
  bool flat_ = false;
  uint64_t n_ = 0;
  ManifestContents contents_;
  std::vector<uint64_t> base_starts_;
  // The candidates: the tree's selection, its classes (no entries), which
  // tree classes have files, and the new files labelled as in the tree;
  // scanning: 1 + the pack record found last before each new file.
  ScanOptions so_;
  ScanResult scan_;
  std::vector<char> has_files_;
  std::vector<ScanEntry> fresh_;
  std::vector<uint64_t> after_;
  // The class tables: the pack's, the union, and each old label's new one.
  std::vector<std::string> base_classes_;
  std::vector<std::string> classes_;
  std::vector<uint32_t> base_map_;
  // The new files (labelled in the union) and, for each, the pack record
  // it goes before (n_: at the end), nondecreasing.
  ScanResult delta_;
  std::vector<uint64_t> insert_at_;
  // The new part, its reader, and each new file's record in it (-1:
  // skipped as unreadable).
  std::string part_dir_;
  bool published_ = false;
  std::unique_ptr<Reader> added_;
  std::vector<int64_t> delta_index_;
};

Status Appender::OpenPack(const std::string& pack_in) {
  if (IsUrl(pack_in)) {
    return Status::InvalidArgument(pack_in +
                                   ": append takes a local pack (append "
                                   "locally, then upload)");
  }
  pack_dir_ = pack_in;
  while (pack_dir_.size() > 1 && pack_dir_.back() == '/') pack_dir_.pop_back();
  struct stat st;
  if (::stat(pack_dir_.c_str(), &st) != 0) {
    return Status::FromErrno(pack_dir_, errno);
  }
  if (!S_ISDIR(st.st_mode)) pack_dir_ = DirName(pack_dir_);  // index/manifest
  if (::stat(dir_.c_str(), &st) != 0) return Status::FromErrno(dir_, errno);
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(dir_ + ": not a directory");
  }
  bool locked = false;
  UFSPACK_RETURN_IF_ERROR(internal::LockPackDir(pack_dir_, &dir_fd_, &locked));
  if (locked) internal::RecoverPackDir(dir_fd_);
  if (::fstat(dir_fd_, &pack_st_) != 0) {
    return Status::FromErrno(pack_dir_, errno);
  }
  UFSPACK_RETURN_IF_ERROR(Reader::Open(pack_dir_, {}, &base_));
  flat_ = base_->info().flat;
  n_ = base_->size();
  UFSPACK_RETURN_IF_ERROR(
      BaseContents(pack_dir_, *base_, &contents_, &base_starts_));
  std::vector<std::string> referenced;
  for (const auto& p : contents_.parts) referenced.push_back(p.path);
  RemoveStaleAppends(pack_dir_, referenced);
  return Status::OK();
}

// The tree, selected as the pack was.
void Appender::SelectAsThePackWas() {
  so_.flat = flat_;
  so_.allow_empty = true;
  so_.skip_unreadable = options_.build.skip_unreadable;
  so_.max_held_files = options_.build.scan_ahead;  // as a build's scan
  so_.cancel = options_.build.cancel;
  so_.exclude_dev = pack_st_.st_dev;
  so_.exclude_ino = pack_st_.st_ino;
  std::string_view selection;
  if (!base_->GetMetadata(kMetaExtensions, &selection).ok()) return;
  if (selection == "*") {
    so_.all_files = true;
    return;
  }
  so_.extensions.clear();
  size_t start = 0;
  while (start <= selection.size()) {
    size_t comma = selection.find(',', start);
    if (comma == std::string_view::npos) comma = selection.size();
    if (comma > start) {
      so_.extensions.emplace_back(selection.substr(start, comma - start));
    }
    start = comma + 1;
  }
}

// Looks each candidate up in the pack, in batches, on the build's threads.
// The index pages the lookups touched (random ones) are released after
// each batch, so the resident set stays bounded whatever the pack's size.
// (A page fault on the mapped index may map a large folio of the page cache
// around it, ~120 KiB measured, so each lookup's few random accesses can
// add hundreds of KiB: 64 lookups at a time in a large pack.  Below 4M
// records the whole index is under ~400 MB: larger batches, nothing
// released.)
Status Appender::Lookup(const std::vector<ScanEntry>& entries,
                        std::vector<uint64_t>* found_at) {
  const bool release = n_ > (uint64_t{1} << 22);
  const size_t kChunk = release ? 64 : 4096;
  std::vector<std::string_view> names;
  names.reserve(entries.size());
  for (const ScanEntry& e : entries) names.push_back(e.name);
  found_at->assign(names.size(), Reader::kNoRecord);
  const size_t chunks = (names.size() + kChunk - 1) / kChunk;
  std::vector<Status> lookups(chunks);
  ParallelFor(
      chunks, std::max(1, std::min(options_.build.threads, 64)), [&](size_t c) {
        const size_t lo = c * kChunk;
        lookups[c] = base_->FindMany(names.data() + lo,
                                     std::min(kChunk, names.size() - lo),
                                     found_at->data() + lo);
        if (release) base_->ReleaseIndex();
      });
  for (const Status& s : lookups) UFSPACK_RETURN_IF_ERROR(s);
  return Status::OK();
}

// The candidates are the listed files (AppendOptions::files).
Status Appender::ListListedFiles() {
  UFSPACK_RETURN_IF_ERROR(ListedFiles(dir_, *options_.files, so_, pack_dir_,
                                      &scan_, &summary_->warnings));
  has_files_.assign(scan_.classes.size(), 0);
  std::vector<uint64_t> found_at;
  UFSPACK_RETURN_IF_ERROR(Lookup(scan_.entries, &found_at));
  for (size_t k = 0; k < scan_.entries.size(); ++k) {
    if (!flat_) has_files_[scan_.entries[k].label] = 1;
    if (found_at[k] != Reader::kNoRecord) {
      ++summary_->already_packed;
    } else {
      fresh_.push_back(std::move(scan_.entries[k]));
    }
  }
  scan_.entries = std::vector<ScanEntry>();
  return Status::OK();
}

// The candidates are every selected file of the tree, listed a class at a
// time: only the new files are kept.  The pack's records found under the
// tree must come in the pack's order (both are ImageFolder orders).
Status Appender::ScanTree() {
  int64_t last = -1;
  std::vector<ScanEntry> batch;
  std::vector<uint64_t> found_at;
  auto sift = [&]() -> Status {
    UFSPACK_RETURN_IF_ERROR(Lookup(batch, &found_at));
    for (size_t k = 0; k < batch.size(); ++k) {
      const uint64_t found = found_at[k];
      if (found == Reader::kNoRecord) {
        fresh_.push_back(std::move(batch[k]));
        after_.push_back(static_cast<uint64_t>(last + 1));
        continue;
      }
      if (static_cast<int64_t>(found) <= last) {
        return Status::InvalidArgument(
            dir_ + ": '" + batch[k].name + "' is record " +
            std::to_string(found) + " of the pack, out of the order of " +
            dir_ +
            " (was the pack built from another tree or with other "
            "options?); rebuild instead");
      }
      last = static_cast<int64_t>(found);
      ++summary_->already_packed;
    }
    batch.clear();
    return Status::OK();
  };
  constexpr size_t kBatch = size_t{1} << 16;
  Status s = ScanTreeByClass(
      dir_, so_, nullptr,
      [&](ScanClass* cls) -> Status {
        if (!flat_) {
          has_files_.resize(scan_.classes.size(), 0);
          has_files_[cls->label] = !cls->entries.empty();
        }
        internal::MoveEntries(&cls->entries, &batch);
        return batch.size() >= kBatch ? sift() : Status::OK();
      },
      &scan_);
  if (s.ok()) s = sift();
  for (const std::string& w : scan_.warnings) summary_->warnings.push_back(w);
  UFSPACK_RETURN_IF_ERROR(s);
  summary_->kept = n_ - summary_->already_packed;
  return Status::OK();
}

// Classes: the union in ImageFolder's order.  A class directory of the
// tree with no file in it is not a new class (ImageFolder refuses it).  An
// old class whose label would change needs AppendOptions::relabel.
Status Appender::MergeClasses() {
  for (uint64_t c = 0; c < base_->class_count(); ++c) {
    ClassInfo ci;
    UFSPACK_RETURN_IF_ERROR(base_->GetClass(c, &ci));
    base_classes_.emplace_back(ci.name);
  }
  has_files_.resize(scan_.classes.size(), 0);
  std::vector<std::string> tree_classes;
  for (size_t c = 0; c < scan_.classes.size(); ++c) {
    if (has_files_[c]) {
      tree_classes.push_back(scan_.classes[c]);
    } else if (!std::binary_search(base_classes_.begin(), base_classes_.end(),
                                   scan_.classes[c], PyFsLess)) {
      summary_->warnings.push_back(dir_ + "/" + scan_.classes[c] +
                                   ": no file to pack; not a new class");
    }
  }
  classes_ = UnionClasses(base_classes_, tree_classes);
  base_map_.resize(base_classes_.size());
  std::string moved;
  for (size_t c = 0; c < base_classes_.size(); ++c) {
    base_map_[c] = IndexIn(classes_, base_classes_[c]);
    if (base_map_[c] != c && summary_->relabeled_classes++ == 0) {
      moved = "'" + base_classes_[c] + "' " + std::to_string(c) + " -> " +
              std::to_string(base_map_[c]);
    }
  }
  summary_->new_classes = classes_.size() - base_classes_.size();
  if (summary_->relabeled_classes == 0 || options_.relabel) {
    return Status::OK();
  }
  std::string first_new;
  for (const std::string& c : classes_) {
    if (IndexIn(base_classes_, c) == base_classes_.size() ||
        base_classes_[IndexIn(base_classes_, c)] != c) {
      first_new = c;
      break;
    }
  }
  return Status::InvalidArgument(
      dir_ + ": new class '" + first_new +
      "' sorts before existing classes: appending it would change the "
      "labels of " +
      std::to_string(summary_->relabeled_classes) + " existing classes (" +
      moved +
      ", as ImageFolder on the grown tree labels them).  Pass --relabel "
      "to accept that (models trained on the old labels no longer match), "
      "or name new classes so that they sort after '" +
      (base_classes_.empty() ? std::string() : base_classes_.back()) + "'");
}

// Where each new file goes: before pack record insert_at_[j].
Status Appender::PlaceNewFiles() {
  delta_.root = scan_.root;
  delta_.classes = flat_ ? std::vector<std::string>() : classes_;
  delta_.entries = std::move(fresh_);
  if (!flat_) {
    for (ScanEntry& d : delta_.entries) {
      d.label = IndexIn(classes_, scan_.classes[d.label]);
    }
  }
  insert_at_.reserve(delta_.entries.size());
  return options_.files ? PlaceBySearch() : PlaceAfterScannedRecords();
}

// Scanned: a new file goes after the record found before it, and after any
// record of an earlier class.
Status Appender::PlaceAfterScannedRecords() {
  uint64_t next = 0;
  for (size_t j = 0; j < delta_.entries.size(); ++j) {
    if (j == 0 || after_[j] != after_[j - 1]) next = after_[j];
    if (!flat_) {
      while (next < n_) {
        Record r;
        UFSPACK_RETURN_IF_ERROR(base_->GetRecord(next, &r));
        if (base_map_[r.label] >= delta_.entries[j].label) break;
        ++next;
      }
    }
    insert_at_.push_back(next);
  }
  return Status::OK();
}

// Listed: each new file's place among its class's records, by binary
// search: the records of every class it joins must be in ImageFolder's
// order (checked: one pass over those records).
Status Appender::PlaceBySearch() {
  uint32_t range_label = 0;
  uint64_t lo = 0, hi = n_;
  bool have_range = false;
  std::vector<ClassInfo> base_info(base_classes_.size());
  for (size_t c = 0; c < base_classes_.size(); ++c)
    UFSPACK_RETURN_IF_ERROR(base_->GetClass(c, &base_info[c]));
  for (const ScanEntry& d : delta_.entries) {
    if (flat_ && !have_range) {
      have_range = true;
      UFSPACK_RETURN_IF_ERROR(CheckImageFolderOrder(*base_, pack_dir_, 0, n_));
    } else if (!flat_ && (!have_range || d.label != range_label)) {
      // The class's records, or for a new class the place of its first
      // record: before the first old class labelled after it.  (The
      // previous class's pages, touched by its binary searches, are
      // released.)
      if (have_range) base_->ReleaseRecords(lo, hi - lo);
      range_label = d.label;
      lo = hi = n_;
      for (size_t c = 0; c < base_classes_.size(); ++c) {
        if (base_map_[c] == d.label) {
          lo = base_info[c].first_record;
          hi = lo + base_info[c].record_count;
          break;
        }
        if (base_map_[c] > d.label) {
          lo = hi = base_info[c].first_record;
          break;
        }
      }
      have_range = true;
      UFSPACK_RETURN_IF_ERROR(CheckImageFolderOrder(*base_, pack_dir_, lo, hi));
    }
    uint64_t pos = 0;
    UFSPACK_RETURN_IF_ERROR(InsertionPoint(*base_, lo, hi, d.name, &pos));
    insert_at_.push_back(pos);
  }
  return Status::OK();
}

// Packs the new files into PACK/append-XXXXXX; *packed is false when every
// one was skipped as unreadable (the pack then stays as it was: no part,
// no class of skipped files).
Status Appender::PackNewPart(bool* packed) {
  part_dir_ = pack_dir_ + "/" + kAppendPrefix + "XXXXXX";
  if (::mkdtemp(part_dir_.data()) == nullptr) {
    const int e = errno;
    const std::string failed = part_dir_;
    part_dir_.clear();
    return Status::FromErrno(failed, e);
  }
  BuildOptions bo = options_.build;
  bo.layout = DataLayout();
  if (options_.layout) {
    bo.layout = *options_.layout;
  } else if (std::string_view l; base_->GetMetadata(kMetaLayout, &l).ok()) {
    // A layout this build cannot parse (a later version's) gives sorted.
    if (!ParseDataLayout(l, &bo.layout).ok()) bo.layout = DataLayout();
  }
  bo.scan = so_;
  bo.writer.flat = flat_;
  bo.part = 0;
  bo.parts = 1;
  if (bo.threads < 1) bo.threads = 1;
  std::unique_ptr<PackWriter> writer;
  UFSPACK_RETURN_IF_ERROR(PackWriter::Create(part_dir_, bo.writer, &writer));
  UFSPACK_RETURN_IF_ERROR(internal::DescribeSource(delta_, bo, writer.get()));
  BuildSummary built;
  UFSPACK_RETURN_IF_ERROR(
      internal::PackRecords(delta_, bo, writer.get(), &built));
  writer.reset();
  for (const std::string& w : built.warnings) summary_->warnings.push_back(w);
  UFSPACK_RETURN_IF_ERROR(Reader::Open(part_dir_, {}, &added_));
  *packed = added_->size() > 0;
  if (!*packed) return Status::OK();
  // Records skipped as unreadable are not in the part: map names to the
  // part's records.
  uint64_t j = 0;
  for (const ScanEntry& e : delta_.entries) {
    uint64_t found = 0;
    if (j < added_->size() && added_->Find(e.name, &found).ok()) {
      delta_index_.push_back(static_cast<int64_t>(found));
      j = found + 1;
    } else {
      delta_index_.push_back(-1);
    }
  }
  return Status::OK();
}

// The order: the pack's records, with each new record before record
// insert_at_[j] (the records of files gone from the tree stay where they
// were: after the record before them, and before any new record of a later
// class).
std::vector<SegmentEntry> Appender::Order() const {
  const uint32_t delta_part = static_cast<uint32_t>(contents_.parts.size());
  std::vector<SegmentEntry> segments;
  auto emit_base = [&](uint64_t lo, uint64_t hi) {
    if (lo >= hi) return;
    size_t s = static_cast<size_t>(
        std::upper_bound(base_starts_.begin(), base_starts_.end(), lo) -
        base_starts_.begin() - 1);
    while (lo < hi) {
      const SegmentEntry& g = contents_.segments[s];
      const uint64_t off = lo - base_starts_[s];
      const uint64_t take = std::min(hi - lo, g.count - off);
      PushRun(&segments, g.part, g.first + off, take);
      lo += take;
      ++s;
    }
  };
  uint64_t next = 0;  // the first record of the pack not yet placed
  for (size_t j = 0; j < delta_.entries.size(); ++j) {
    if (delta_index_[j] < 0) continue;  // skipped while reading
    emit_base(next, insert_at_[j]);
    next = std::max(next, insert_at_[j]);
    PushRun(&segments, delta_part, static_cast<uint64_t>(delta_index_[j]), 1);
  }
  emit_base(next, n_);
  return segments;
}

// The grown pack's manifest contents: the new part and the order, the old
// parts' label maps, the class ranges and the metadata.
Status Appender::DescribeContents() {
  std::vector<SegmentEntry> segments = Order();
  const size_t delta_part = contents_.parts.size();
  {
    ManifestContents::Part p;
    p.pack_id = added_->info().pack_id;
    p.record_count = added_->size();
    p.data_size = added_->info().data_size;
    p.index_size = added_->info().index_size;
    p.path = part_dir_.substr(pack_dir_.size() + 1);
    contents_.parts.push_back(std::move(p));
  }
  // Labels of the old parts in the new class table (an identity map is
  // implicit only when the part has every class).
  if (classes_.size() != base_classes_.size()) {
    for (size_t k = 0; k < delta_part; ++k) {
      ManifestContents::Part& p = contents_.parts[k];
      if (p.label_map.empty()) {
        p.label_map = base_map_;
      } else {
        for (uint32_t& g : p.label_map) g = base_map_[g];
      }
    }
  }
  // Class ranges: the order above keeps each class's records together.
  std::vector<uint64_t> counts(classes_.size(), 0);
  for (uint64_t c = 0; c < base_classes_.size(); ++c) {
    ClassInfo ci;
    UFSPACK_RETURN_IF_ERROR(base_->GetClass(c, &ci));
    counts[base_map_[c]] += ci.record_count;
  }
  for (uint64_t c = 0; c < added_->class_count(); ++c) {
    ClassInfo ci;
    UFSPACK_RETURN_IF_ERROR(added_->GetClass(c, &ci));
    counts[c] += ci.record_count;
  }
  uint64_t first = 0;
  for (size_t c = 0; c < classes_.size(); ++c) {
    contents_.classes.push_back({classes_[c], first, counts[c]});
    first += counts[c];
  }
  contents_.flat = flat_;
  contents_.segments = std::move(segments);
  std::vector<std::pair<std::string_view, std::string_view>> meta;
  UFSPACK_RETURN_IF_ERROR(base_->ListMetadata(&meta));
  for (const auto& [k, v] : meta) contents_.meta.emplace(k, v);
  auto root = contents_.meta.find(kMetaSourceRoot);
  if (root != contents_.meta.end()) {
    std::string a, b;
    if (!RealDir(root->second, &a).ok() || !RealDir(dir_, &b).ok() || a != b) {
      summary_->warnings.push_back(
          dir_ + ": not the directory the pack was built from (" +
          root->second +
          "); the merged pack records no source_root (MyImageFolder's "
          "samples then hold names relative to the tree)");
      contents_.meta.erase(root);
    }
  }
  return Status::OK();
}

Status Appender::Publish() {
  std::string bytes;
  PackId pack_id;
  EncodeManifest(contents_, &bytes, &pack_id);
  UFSPACK_RETURN_IF_ERROR(PublishManifest(dir_fd_, pack_dir_, bytes));
  published_ = true;
  summary_->manifest_path = pack_dir_ + "/" + kManifestFileName;
  summary_->part_dir = part_dir_;
  summary_->pack_id = pack_id;
  summary_->appended = added_->size();
  summary_->records = n_ + added_->size();
  summary_->parts = contents_.parts.size();
  summary_->segments = contents_.segments.size();
  return Status::OK();
}

}  // namespace

Status AppendPack(const std::string& pack, const std::string& dir,
                  const AppendOptions& options, AppendSummary* summary) {
  *summary = AppendSummary();
  Appender appender(dir, options, summary);
  return appender.Run(pack);
}

}  // namespace ufspack
