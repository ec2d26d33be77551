// Copyright 2026 The ufspack Authors.
// See ufspack/merge.h and docs/format.md, "Merged packs".
#include "ufspack/merge.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "build_internal.h"
#include "posix_io.h"
#include "publish.h"
#include "scan_entries.h"
#include "ufspack/builder.h"
#include "ufspack/file.h"
#include "ufspack/format.h"
#include "ufspack/manifest.h"
#include "ufspack/parallel.h"
#include "ufspack/reader.h"
#include "ufspack/scan.h"
#include "ufspack/text.h"

namespace ufspack {
namespace {

// What merge needs from one part, read with the part open and kept after
// it is closed (a merge of thousands of parts holds one open at a time).
struct PartFacts {
  std::string given;  // as on the command line
  std::string dir;    // real path of the part's directory
  PackInfo info;
  std::map<std::string, std::string> meta;
  uint32_t first_label = kNoLabel;  // of its first and last records
  uint32_t last_label = kNoLabel;
  // From kMetaPart / kMetaPartRange, when it is a part of a split.
  bool in_split = false;
  uint64_t part = 0, parts = 0;
  uint64_t range_first = 0, range_count = 0, range_total = 0;
};

Status RealDir(const std::string& path, std::string* out) {
  char* p = ::realpath(path.c_str(), nullptr);
  if (p == nullptr) return Status::FromErrno(path, errno);
  *out = p;
  ::free(p);
  return Status::OK();
}

// `to` relative to `from`, both absolute and normalised (realpath).
std::string RelativePath(const std::string& from, const std::string& to) {
  auto split = [](const std::string& p) {
    std::vector<std::string> out;
    size_t s = 1;
    while (s <= p.size()) {
      size_t e = p.find('/', s);
      if (e == std::string::npos) e = p.size();
      if (e > s) out.push_back(p.substr(s, e - s));
      s = e + 1;
    }
    return out;
  };
  const std::vector<std::string> a = split(from), b = split(to);
  size_t common = 0;
  while (common < a.size() && common < b.size() && a[common] == b[common]) {
    ++common;
  }
  std::string rel;
  for (size_t k = common; k < a.size(); ++k) rel += rel.empty() ? ".." : "/..";
  for (size_t k = common; k < b.size(); ++k) {
    if (!rel.empty()) rel += "/";
    rel += b[k];
  }
  return rel.empty() ? "." : rel;
}

double SecondsSinceStart(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

bool ParseU64(std::string_view s, uint64_t* v) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t x = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    x = x * 10 + static_cast<uint64_t>(c - '0');
  }
  *v = x;
  return true;
}

// Reads kMetaPart and kMetaPartRange into `f`.
Status ParseSplit(PartFacts* f) {
  auto part = f->meta.find(kMetaPart);
  if (part == f->meta.end()) return Status::OK();
  auto range = f->meta.find(kMetaPartRange);
  auto split = f->meta.find(kMetaPartSplit);
  const std::string& v = part->second;
  const size_t slash = v.find('/');
  bool ok = range != f->meta.end() && split != f->meta.end() &&
            slash != std::string::npos &&
            ParseU64(std::string_view(v).substr(0, slash), &f->part) &&
            ParseU64(std::string_view(v).substr(slash + 1), &f->parts) &&
            f->part < f->parts;
  if (ok) {
    const std::string& r = range->second;
    const size_t s1 = r.find(' ');
    const size_t s2 = s1 == std::string::npos ? s1 : r.find(' ', s1 + 1);
    ok = s2 != std::string::npos &&
         ParseU64(std::string_view(r).substr(0, s1), &f->range_first) &&
         ParseU64(std::string_view(r).substr(s1 + 1, s2 - s1 - 1),
                  &f->range_count) &&
         ParseU64(std::string_view(r).substr(s2 + 1), &f->range_total) &&
         f->range_count <= f->range_total &&
         f->range_first <= f->range_total - f->range_count;
  }
  if (!ok) {
    return Status::Corruption(f->info.index_path +
                              ": malformed part metadata (part '" + v + "')");
  }
  f->in_split = true;
  return Status::OK();
}

// Opens part `given` and collects its facts; compares its classes with
// `classes` (filled from the first part).
Status ReadPart(const std::string& given, std::vector<std::string>* classes,
                bool first, PartFacts* f) {
  f->given = given;
  std::unique_ptr<Reader> r;
  UFSPACK_RETURN_IF_ERROR(Reader::Open(given, {}, &r));
  f->info = r->info();
  if (f->info.part_count != 0) {
    return Status::InvalidArgument(
        given + ": is a merged pack; merge its parts instead");
  }
  if (IsUrl(f->info.index_path)) {
    return Status::InvalidArgument(given +
                                   ": merge takes local packs only (upload "
                                   "the parts and the manifest together)");
  }
  UFSPACK_RETURN_IF_ERROR(RealDir(DirName(f->info.index_path), &f->dir));
  std::vector<std::pair<std::string_view, std::string_view>> meta;
  UFSPACK_RETURN_IF_ERROR(r->ListMetadata(&meta));
  for (const auto& [k, v] : meta) f->meta.emplace(k, v);
  UFSPACK_RETURN_IF_ERROR(ParseSplit(f));
  if (r->size() > 0) {
    Record rec;
    UFSPACK_RETURN_IF_ERROR(r->GetRecord(0, &rec));
    f->first_label = rec.label;
    UFSPACK_RETURN_IF_ERROR(r->GetRecord(r->size() - 1, &rec));
    f->last_label = rec.label;
  }
  if (first) {
    classes->clear();
    for (uint64_t c = 0; c < r->class_count(); ++c) {
      ClassInfo ci;
      UFSPACK_RETURN_IF_ERROR(r->GetClass(c, &ci));
      classes->emplace_back(ci.name);
    }
    return Status::OK();
  }
  if (r->class_count() != classes->size()) {
    return Status::InvalidArgument(
        given + ": has " + std::to_string(r->class_count()) +
        " classes, the first part " + std::to_string(classes->size()) +
        " (the parts of a merge share one class table)");
  }
  for (uint64_t c = 0; c < r->class_count(); ++c) {
    ClassInfo ci;
    UFSPACK_RETURN_IF_ERROR(r->GetClass(c, &ci));
    if (ci.name != (*classes)[c]) {
      return Status::InvalidArgument(
          given + ": class " + std::to_string(c) + " is '" +
          EscapeBytes(ci.name) + "', in the first part '" +
          EscapeBytes((*classes)[c]) +
          "' (the parts of a merge share one class table)");
    }
  }
  return Status::OK();
}

// Puts the parts of a split in part order and checks that they are all
// of one split, each part once.
Status OrderSplit(std::vector<PartFacts>* facts) {
  const PartFacts& a = facts->front();
  const std::string& split = a.meta.at(kMetaPartSplit);
  for (const PartFacts& f : *facts) {
    if (f.meta.at(kMetaPartSplit) != split || f.parts != a.parts ||
        f.range_total != a.range_total) {
      return Status::InvalidArgument(
          f.given + ": part " + std::to_string(f.part) + "/" +
          std::to_string(f.parts) + " of split " + f.meta.at(kMetaPartSplit) +
          ", but " + a.given + " is of split " + split + " (" +
          std::to_string(a.parts) +
          " parts): the parts come from different splits or trees (did the "
          "source change between the part builds?)");
    }
  }
  std::stable_sort(
      facts->begin(), facts->end(),
      [](const PartFacts& x, const PartFacts& y) { return x.part < y.part; });
  uint64_t next = 0;
  for (size_t k = 0; k < facts->size(); ++k) {
    const PartFacts& f = (*facts)[k];
    if (f.part != k) {
      return Status::InvalidArgument(
          (f.part < k
               ? "part " + std::to_string(f.part) + "/" +
                     std::to_string(a.parts) + " given twice (" + f.given + ")"
               : "part " + std::to_string(k) + "/" + std::to_string(a.parts) +
                     " is missing"));
    }
    if (f.range_first != next) {
      return Status::Corruption(f.given + ": part range starts at sample " +
                                std::to_string(f.range_first) + ", expected " +
                                std::to_string(next));
    }
    next += f.range_count;
  }
  if (facts->size() != a.parts) {
    return Status::InvalidArgument("part " + std::to_string(facts->size()) +
                                   "/" + std::to_string(a.parts) +
                                   " is missing (" +
                                   std::to_string(facts->size()) + " of " +
                                   std::to_string(a.parts) + " parts given)");
  }
  if (next != a.range_total) {
    return Status::Corruption("the parts' ranges cover " +
                              std::to_string(next) + " of " +
                              std::to_string(a.range_total) + " samples");
  }
  return Status::OK();
}

// Writes `bytes` as out_dir/manifest.ufs: a temporary, synced, renamed.
Status PublishManifest(int dir_fd, const std::string& out_dir,
                       const std::string& bytes) {
  int fd = -1;
  std::string tmp;
  UFSPACK_RETURN_IF_ERROR(
      internal::CreateTemp(out_dir, internal::kManifestTmpPrefix, &fd, &tmp));
  Status s = internal::WriteAll(fd, bytes.data(), bytes.size(), tmp);
  if (s.ok()) s = internal::SyncFile(fd, tmp);
  Status c = internal::CloseFile(&fd, tmp);
  if (s.ok()) s = c;
  const std::string final_path = out_dir + "/" + kManifestFileName;
  if (s.ok() && ::rename(tmp.c_str(), final_path.c_str()) != 0) {
    s = Status::FromErrno(final_path, errno).WithContext("rename");
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return internal::SyncDir(dir_fd, out_dir);
}

}  // namespace

Status MergePacks(const std::vector<std::string>& given,
                  const std::string& out_dir_in, MergeSummary* summary) {
  const auto t0 = std::chrono::steady_clock::now();
  *summary = MergeSummary();
  if (given.empty()) return Status::InvalidArgument("merge: no parts given");
  std::string out_dir = out_dir_in;
  while (out_dir.size() > 1 && out_dir.back() == '/') out_dir.pop_back();

  // Pass 1: every part's facts, one part open at a time.
  std::vector<PartFacts> facts(given.size());
  std::vector<std::string> classes;
  for (size_t k = 0; k < given.size(); ++k) {
    UFSPACK_RETURN_IF_ERROR(ReadPart(given[k], &classes, k == 0, &facts[k]));
    if (facts[k].info.flat != facts[0].info.flat) {
      return Status::InvalidArgument(given[k] + " and " + given[0] +
                                     ": flat and classed packs cannot merge");
    }
  }
  size_t in_split = 0;
  for (const PartFacts& f : facts) in_split += f.in_split ? 1 : 0;
  if (in_split != 0 && in_split != facts.size()) {
    const PartFacts& odd =
        *std::find_if(facts.begin(), facts.end(),
                      [](const PartFacts& f) { return !f.in_split; });
    return Status::InvalidArgument(
        odd.given +
        ": not built with --part, but other parts are; merge either the "
        "parts of one split or separately built packs");
  }
  if (in_split != 0) UFSPACK_RETURN_IF_ERROR(OrderSplit(&facts));

  // Records of a class must be contiguous: labels never decrease from one
  // non-empty part to the next.
  const PartFacts* prev = nullptr;
  uint64_t total = 0;
  std::vector<uint64_t> firsts(facts.size());
  for (size_t k = 0; k < facts.size(); ++k) {
    firsts[k] = total;
    total += facts[k].info.record_count;
    if (facts[k].info.record_count == 0) continue;
    if (prev != nullptr && !facts[k].info.flat &&
        prev->last_label > facts[k].first_label) {
      return Status::InvalidArgument(
          facts[k].given + " starts with class " +
          std::to_string(facts[k].first_label) + " but " + prev->given +
          " before it ends with class " + std::to_string(prev->last_label) +
          ": give the parts in class order (a class's records must be "
          "contiguous)");
    }
    prev = &facts[k];
  }

  // The output directory: locked, never a single pack, never a part.
  int dir_fd = -1;
  bool locked = false;
  UFSPACK_RETURN_IF_ERROR(internal::LockPackDir(out_dir, &dir_fd, &locked));
  struct DirCloser {
    int fd;
    ~DirCloser() { ::close(fd); }
  } closer{dir_fd};
  if (locked) internal::RecoverPackDir(dir_fd);
  struct stat st;
  if (::fstatat(dir_fd, kIndexFileName, &st, 0) == 0) {
    return Status::InvalidArgument(out_dir + ": holds a single pack (" +
                                   kIndexFileName +
                                   "); merge into a directory of its own");
  }
  std::string out_real;
  UFSPACK_RETURN_IF_ERROR(RealDir(out_dir, &out_real));

  // Pass 2: the global class table.  Class c starts where the first part
  // whose records reach label c puts it (its local first record of c, which
  // for a class it lacks is where it would be); later classes start at the
  // end.
  std::vector<uint64_t> class_first(classes.size() + 1, total);
  size_t c = 0;
  for (size_t k = 0; k < facts.size() && c < classes.size(); ++k) {
    const PartFacts& f = facts[k];
    if (f.info.record_count == 0 || f.last_label < c) continue;
    std::unique_ptr<Reader> r;
    UFSPACK_RETURN_IF_ERROR(Reader::Open(f.given, {}, &r));
    if (r->info().pack_id != f.info.pack_id) {
      return Status::InvalidArgument(f.given + ": changed during the merge");
    }
    for (; c <= f.last_label && c < classes.size(); ++c) {
      ClassInfo ci;
      UFSPACK_RETURN_IF_ERROR(r->GetClass(c, &ci));
      class_first[c] = firsts[k] + ci.first_record;
    }
  }

  // The manifest: one segment per non-empty part, in order.
  ManifestContents contents;
  contents.flat = facts[0].info.flat;
  uint64_t data_bytes = 0;
  for (size_t k = 0; k < facts.size(); ++k) {
    const PartFacts& f = facts[k];
    if (f.dir == out_real) {
      return Status::InvalidArgument(f.given +
                                     ": a part cannot be the merge's output "
                                     "directory");
    }
    ManifestContents::Part p;
    p.pack_id = f.info.pack_id;
    p.record_count = f.info.record_count;
    p.data_size = f.info.data_size;
    p.index_size = f.info.index_size;
    p.path = RelativePath(out_real, f.dir);
    contents.parts.push_back(std::move(p));
    if (f.info.record_count > 0) {
      SegmentEntry g;
      g.part = static_cast<uint32_t>(k);
      g.first = 0;
      g.count = f.info.record_count;
      contents.segments.push_back(g);
    }
    data_bytes += f.info.data_size;
  }
  for (size_t j = 0; j < classes.size(); ++j) {
    contents.classes.push_back(
        {classes[j], class_first[j], class_first[j + 1] - class_first[j]});
  }
  contents.meta = facts[0].meta;
  for (auto it = contents.meta.begin(); it != contents.meta.end();) {
    bool keep = it->first != kMetaPart && it->first != kMetaPartSplit &&
                it->first != kMetaPartRange;
    for (size_t k = 1; keep && k < facts.size(); ++k) {
      auto other = facts[k].meta.find(it->first);
      keep = other != facts[k].meta.end() && other->second == it->second;
    }
    it = keep ? std::next(it) : contents.meta.erase(it);
  }
  std::string bytes;
  PackId pack_id;
  EncodeManifest(contents, &bytes, &pack_id);
  UFSPACK_RETURN_IF_ERROR(PublishManifest(dir_fd, out_dir, bytes));

  summary->manifest_path = out_dir + "/" + kManifestFileName;
  summary->pack_id = pack_id;
  summary->parts = facts.size();
  summary->records = total;
  summary->classes = classes.size();
  summary->data_bytes = data_bytes;
  summary->manifest_bytes = bytes.size();
  summary->split = in_split != 0;
  summary->seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return Status::OK();
}

// --- AppendPack
// ---------------------------------------------------------------

namespace {

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
  for (size_t k = 0; k < m.parts.size(); ++k) {
    const PartEntry& e = m.parts[k];
    ManifestContents::Part p;
    p.pack_id = e.pack_id;
    p.record_count = e.record_count;
    p.data_size = e.data_size;
    p.index_size = e.index_size;
    p.path = std::string(m.part_paths[k]);
    for (uint32_t c = 0; c < e.label_map_length; ++c) {
      p.label_map.push_back(m.GlobalLabel(k, c));
    }
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

}  // namespace

Status AppendPack(const std::string& pack_in, const std::string& dir,
                  const AppendOptions& options, AppendSummary* summary) {
  const auto t0 = std::chrono::steady_clock::now();
  *summary = AppendSummary();
  if (IsUrl(pack_in)) {
    return Status::InvalidArgument(pack_in +
                                   ": append takes a local pack (append "
                                   "locally, then upload)");
  }
  std::string pack_dir = pack_in;
  while (pack_dir.size() > 1 && pack_dir.back() == '/') pack_dir.pop_back();
  struct stat st;
  if (::stat(pack_dir.c_str(), &st) != 0) {
    return Status::FromErrno(pack_dir, errno);
  }
  if (!S_ISDIR(st.st_mode)) pack_dir = DirName(pack_dir);  // index/manifest
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno(dir, errno);
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(dir + ": not a directory");
  }

  int dir_fd = -1;
  bool locked = false;
  UFSPACK_RETURN_IF_ERROR(internal::LockPackDir(pack_dir, &dir_fd, &locked));
  struct DirCloser {
    int fd;
    ~DirCloser() { ::close(fd); }
  } closer{dir_fd};
  if (locked) internal::RecoverPackDir(dir_fd);
  struct stat pack_st;
  if (::fstat(dir_fd, &pack_st) != 0) return Status::FromErrno(pack_dir, errno);

  std::unique_ptr<Reader> base;
  UFSPACK_RETURN_IF_ERROR(Reader::Open(pack_dir, {}, &base));
  const bool flat = base->info().flat;
  ManifestContents contents;
  std::vector<uint64_t> base_starts;
  UFSPACK_RETURN_IF_ERROR(
      BaseContents(pack_dir, *base, &contents, &base_starts));
  std::vector<std::string> referenced;
  for (const auto& p : contents.parts) referenced.push_back(p.path);
  RemoveStaleAppends(pack_dir, referenced);

  // The tree, selected as the pack was.
  ScanOptions so;
  so.flat = flat;
  so.allow_empty = true;
  so.skip_unreadable = options.build.skip_unreadable;
  so.max_held_files = options.build.scan_ahead;  // as a build's scan
  so.cancel = options.build.cancel;
  so.exclude_dev = pack_st.st_dev;
  so.exclude_ino = pack_st.st_ino;
  std::string_view selection;
  if (base->GetMetadata(kMetaExtensions, &selection).ok()) {
    if (selection == "*") {
      so.all_files = true;
    } else {
      so.extensions.clear();
      size_t start = 0;
      while (start <= selection.size()) {
        size_t comma = selection.find(',', start);
        if (comma == std::string_view::npos) comma = selection.size();
        if (comma > start) {
          so.extensions.emplace_back(selection.substr(start, comma - start));
        }
        start = comma + 1;
      }
    }
  }
  // The candidates, in ImageFolder's order: every selected file of the
  // tree (listed a class at a time: only the new files are kept), or the
  // listed ones.  Each is looked up in the pack, in batches, on the build's
  // threads; the index pages the lookups touched (random ones) are released
  // after each batch, so the resident set stays bounded whatever the
  // pack's size.  (A page fault on the mapped index may map a large folio
  // of the page cache around it, ~120 KiB measured, so each lookup's few
  // random accesses can add hundreds of KiB: 64 lookups at a time in a
  // large pack.  Below 4M records the whole index is under ~400 MB: larger
  // batches, nothing released.)
  const uint64_t n = base->size();
  auto lookup = [&](const std::vector<ScanEntry>& entries,
                    std::vector<uint64_t>* found_at) -> Status {
    const bool release = n > (uint64_t{1} << 22);
    const size_t kChunk = release ? 64 : 4096;
    std::vector<std::string_view> names;
    names.reserve(entries.size());
    for (const ScanEntry& e : entries) names.push_back(e.name);
    found_at->assign(names.size(), Reader::kNoRecord);
    const size_t chunks = (names.size() + kChunk - 1) / kChunk;
    std::vector<Status> lookups(chunks);
    ParallelFor(chunks, std::max(1, std::min(options.build.threads, 64)),
                [&](size_t c) {
                  const size_t lo = c * kChunk;
                  lookups[c] = base->FindMany(
                      names.data() + lo, std::min(kChunk, names.size() - lo),
                      found_at->data() + lo);
                  if (release) base->ReleaseIndex();
                });
    for (const Status& s : lookups) UFSPACK_RETURN_IF_ERROR(s);
    return Status::OK();
  };
  ScanResult scan;               // root, classes, warnings (no entries)
  std::vector<char> has_files;   // per tree class
  std::vector<ScanEntry> fresh;  // the new files, labelled as in the tree
  // Scanning: 1 + the pack record found last before each new file (0: none).
  std::vector<uint64_t> after;
  std::vector<uint64_t> found_at;
  if (options.files) {
    UFSPACK_RETURN_IF_ERROR(ListedFiles(dir, *options.files, so, pack_dir,
                                        &scan, &summary->warnings));
    has_files.assign(scan.classes.size(), 0);
    UFSPACK_RETURN_IF_ERROR(lookup(scan.entries, &found_at));
    for (size_t k = 0; k < scan.entries.size(); ++k) {
      if (!flat) has_files[scan.entries[k].label] = 1;
      if (found_at[k] != Reader::kNoRecord) {
        ++summary->already_packed;
      } else {
        fresh.push_back(std::move(scan.entries[k]));
      }
    }
    scan.entries = std::vector<ScanEntry>();
  } else {
    // The pack's records found under `dir` must come in the pack's order
    // (both are ImageFolder orders).
    int64_t last = -1;
    std::vector<ScanEntry> batch;
    auto sift = [&]() -> Status {
      UFSPACK_RETURN_IF_ERROR(lookup(batch, &found_at));
      for (size_t k = 0; k < batch.size(); ++k) {
        const uint64_t found = found_at[k];
        if (found == Reader::kNoRecord) {
          fresh.push_back(std::move(batch[k]));
          after.push_back(static_cast<uint64_t>(last + 1));
          continue;
        }
        if (static_cast<int64_t>(found) <= last) {
          return Status::InvalidArgument(
              dir + ": '" + batch[k].name + "' is record " +
              std::to_string(found) + " of the pack, out of the order of " +
              dir +
              " (was the pack built from another tree or with other "
              "options?); rebuild instead");
        }
        last = static_cast<int64_t>(found);
        ++summary->already_packed;
      }
      batch.clear();
      return Status::OK();
    };
    constexpr size_t kBatch = size_t{1} << 16;
    Status s = ScanTreeByClass(
        dir, so, nullptr,
        [&](ScanClass* cls) -> Status {
          if (!flat) {
            has_files.resize(scan.classes.size(), 0);
            has_files[cls->label] = !cls->entries.empty();
          }
          internal::MoveEntries(&cls->entries, &batch);
          return batch.size() >= kBatch ? sift() : Status::OK();
        },
        &scan);
    if (s.ok()) s = sift();
    for (const std::string& w : scan.warnings) summary->warnings.push_back(w);
    UFSPACK_RETURN_IF_ERROR(s);
    summary->kept = n - summary->already_packed;
  }
  found_at = std::vector<uint64_t>();

  // Classes: the union in ImageFolder's order.  A class directory of the
  // tree with no file in it is not a new class (ImageFolder refuses it).
  std::vector<std::string> base_classes;
  for (uint64_t c = 0; c < base->class_count(); ++c) {
    ClassInfo ci;
    UFSPACK_RETURN_IF_ERROR(base->GetClass(c, &ci));
    base_classes.emplace_back(ci.name);
  }
  has_files.resize(scan.classes.size(), 0);
  std::vector<std::string> tree_classes;
  for (size_t c = 0; c < scan.classes.size(); ++c) {
    if (has_files[c]) {
      tree_classes.push_back(scan.classes[c]);
    } else if (!std::binary_search(base_classes.begin(), base_classes.end(),
                                   scan.classes[c], PyFsLess)) {
      summary->warnings.push_back(dir + "/" + scan.classes[c] +
                                  ": no file to pack; not a new class");
    }
  }
  const std::vector<std::string> classes =
      UnionClasses(base_classes, tree_classes);
  std::vector<uint32_t> base_map(base_classes.size());
  std::string moved;
  for (size_t c = 0; c < base_classes.size(); ++c) {
    base_map[c] = IndexIn(classes, base_classes[c]);
    if (base_map[c] != c) {
      if (summary->relabeled_classes++ == 0) {
        moved = "'" + base_classes[c] + "' " + std::to_string(c) + " -> " +
                std::to_string(base_map[c]);
      }
    }
  }
  summary->new_classes = classes.size() - base_classes.size();
  if (summary->relabeled_classes > 0 && !options.relabel) {
    std::string first_new;
    for (const std::string& c : classes) {
      if (IndexIn(base_classes, c) == base_classes.size() ||
          base_classes[IndexIn(base_classes, c)] != c) {
        first_new = c;
        break;
      }
    }
    return Status::InvalidArgument(
        dir + ": new class '" + first_new +
        "' sorts before existing classes: appending it would change the "
        "labels of " +
        std::to_string(summary->relabeled_classes) + " existing classes (" +
        moved +
        ", as ImageFolder on the grown tree labels them).  Pass --relabel "
        "to accept that (models trained on the old labels no longer match), "
        "or name new classes so that they sort after '" +
        (base_classes.empty() ? std::string() : base_classes.back()) + "'");
  }

  // Where each new file goes: before pack record insert_at[j] (n: at the
  // end), nondecreasing.
  ScanResult delta;
  delta.root = scan.root;
  delta.classes = flat ? std::vector<std::string>() : classes;
  delta.entries = std::move(fresh);
  if (!flat) {
    for (ScanEntry& d : delta.entries) {
      d.label = IndexIn(classes, scan.classes[d.label]);
    }
  }
  std::vector<uint64_t> insert_at;
  insert_at.reserve(delta.entries.size());
  if (!options.files) {
    // A new file goes after the record found before it, and after any
    // record of an earlier class.
    uint64_t next = 0;
    for (size_t j = 0; j < delta.entries.size(); ++j) {
      if (j == 0 || after[j] != after[j - 1]) next = after[j];
      if (!flat) {
        while (next < n) {
          Record r;
          UFSPACK_RETURN_IF_ERROR(base->GetRecord(next, &r));
          if (base_map[r.label] >= delta.entries[j].label) break;
          ++next;
        }
      }
      insert_at.push_back(next);
    }
  } else {
    // Each new file's place among its class's records, by binary search:
    // the records of every class it joins must be in ImageFolder's order
    // (checked: one pass over those records).
    uint32_t range_label = 0;
    uint64_t lo = 0, hi = n;
    bool have_range = false;
    std::vector<ClassInfo> base_info(base_classes.size());
    for (size_t c = 0; c < base_classes.size(); ++c)
      UFSPACK_RETURN_IF_ERROR(base->GetClass(c, &base_info[c]));
    for (const ScanEntry& d : delta.entries) {
      if (flat && !have_range) {
        have_range = true;
        UFSPACK_RETURN_IF_ERROR(CheckImageFolderOrder(*base, pack_dir, 0, n));
      } else if (!flat && (!have_range || d.label != range_label)) {
        // The class's records, or for a new class the place of its first
        // record: before the first old class labelled after it.  (The
        // previous class's pages, touched by its binary searches, are
        // released.)
        if (have_range) base->ReleaseRecords(lo, hi - lo);
        range_label = d.label;
        lo = hi = n;
        for (size_t c = 0; c < base_classes.size(); ++c) {
          if (base_map[c] == d.label) {
            lo = base_info[c].first_record;
            hi = lo + base_info[c].record_count;
            break;
          }
          if (base_map[c] > d.label) {
            lo = hi = base_info[c].first_record;
            break;
          }
        }
        have_range = true;
        UFSPACK_RETURN_IF_ERROR(CheckImageFolderOrder(*base, pack_dir, lo, hi));
      }
      uint64_t pos = 0;
      UFSPACK_RETURN_IF_ERROR(InsertionPoint(*base, lo, hi, d.name, &pos));
      insert_at.push_back(pos);
    }
  }
  summary->records = n;
  summary->parts = contents.parts.size();
  summary->segments = contents.segments.size();
  summary->manifest_path =
      base->info().part_count > 0 ? pack_dir + "/" + kManifestFileName : "";
  summary->pack_id = base->info().pack_id;
  if (delta.entries.empty()) {
    summary->seconds = SecondsSinceStart(t0);
    return Status::OK();  // nothing to append
  }

  // The new part.
  std::string part_dir = pack_dir + "/" + kAppendPrefix + "XXXXXX";
  if (::mkdtemp(part_dir.data()) == nullptr) {
    return Status::FromErrno(part_dir, errno);
  }
  bool published = false;
  struct PartRemover {
    const std::string& dir;
    const bool& keep;
    ~PartRemover() {
      if (!keep) internal::RemoveTree(dir);
    }
  } remover{part_dir, published};
  BuildOptions bo = options.build;
  bo.scan = so;
  bo.writer.flat = flat;
  bo.part = 0;
  bo.parts = 1;
  if (bo.threads < 1) bo.threads = 1;
  std::unique_ptr<PackWriter> writer;
  UFSPACK_RETURN_IF_ERROR(PackWriter::Create(part_dir, bo.writer, &writer));
  UFSPACK_RETURN_IF_ERROR(internal::DescribeSource(delta, bo, writer.get()));
  BuildSummary built;
  UFSPACK_RETURN_IF_ERROR(
      internal::PackRecords(delta, bo, writer.get(), &built));
  writer.reset();
  for (const std::string& w : built.warnings) summary->warnings.push_back(w);
  std::unique_ptr<Reader> added;
  UFSPACK_RETURN_IF_ERROR(Reader::Open(part_dir, {}, &added));
  if (added->size() == 0) {
    // Every new file was skipped as unreadable: the pack stays as it was
    // (no part, no class of skipped files).
    summary->seconds = SecondsSinceStart(t0);
    return Status::OK();
  }
  const uint32_t delta_part = static_cast<uint32_t>(contents.parts.size());
  {
    ManifestContents::Part p;
    p.pack_id = added->info().pack_id;
    p.record_count = added->size();
    p.data_size = added->info().data_size;
    p.index_size = added->info().index_size;
    p.path = part_dir.substr(pack_dir.size() + 1);
    contents.parts.push_back(std::move(p));
  }
  // Records skipped as unreadable are not in the part: map names to the
  // part's records.
  std::vector<int64_t> delta_index;  // per scan entry that is new
  {
    uint64_t j = 0;
    for (const ScanEntry& e : delta.entries) {
      uint64_t found = 0;
      if (j < added->size() && added->Find(e.name, &found).ok()) {
        delta_index.push_back(static_cast<int64_t>(found));
        j = found + 1;
      } else {
        delta_index.push_back(-1);
      }
    }
  }

  // The order: the pack's records, with each new record before record
  // insert_at[j] (the records of files gone from `dir` stay where they
  // were: after the record before them, and before any new record of a
  // later class).
  std::vector<SegmentEntry> segments;
  auto emit_base = [&](uint64_t lo, uint64_t hi) {
    if (lo >= hi) return;
    size_t s = static_cast<size_t>(
        std::upper_bound(base_starts.begin(), base_starts.end(), lo) -
        base_starts.begin() - 1);
    while (lo < hi) {
      const SegmentEntry& g = contents.segments[s];
      const uint64_t off = lo - base_starts[s];
      const uint64_t take = std::min(hi - lo, g.count - off);
      PushRun(&segments, g.part, g.first + off, take);
      lo += take;
      ++s;
    }
  };
  uint64_t next = 0;  // the first record of the pack not yet placed
  for (size_t j = 0; j < delta.entries.size(); ++j) {
    if (delta_index[j] < 0) continue;  // skipped while reading
    emit_base(next, insert_at[j]);
    next = std::max(next, insert_at[j]);
    PushRun(&segments, delta_part, static_cast<uint64_t>(delta_index[j]), 1);
  }
  emit_base(next, n);

  // Labels of the old parts in the new class table (an identity map is
  // implicit only when the part has every class).
  if (classes.size() != base_classes.size()) {
    for (size_t k = 0; k < delta_part; ++k) {
      ManifestContents::Part& p = contents.parts[k];
      if (p.label_map.empty()) {
        p.label_map = base_map;
      } else {
        for (uint32_t& g : p.label_map) g = base_map[g];
      }
    }
  }
  // Class ranges: the order above keeps each class's records together.
  std::vector<uint64_t> counts(classes.size(), 0);
  for (uint64_t c = 0; c < base_classes.size(); ++c) {
    ClassInfo ci;
    UFSPACK_RETURN_IF_ERROR(base->GetClass(c, &ci));
    counts[base_map[c]] += ci.record_count;
  }
  for (uint64_t c = 0; c < added->class_count(); ++c) {
    ClassInfo ci;
    UFSPACK_RETURN_IF_ERROR(added->GetClass(c, &ci));
    counts[c] += ci.record_count;
  }
  uint64_t first = 0;
  for (size_t c = 0; c < classes.size(); ++c) {
    contents.classes.push_back({classes[c], first, counts[c]});
    first += counts[c];
  }
  contents.flat = flat;
  contents.segments = std::move(segments);
  std::vector<std::pair<std::string_view, std::string_view>> meta;
  UFSPACK_RETURN_IF_ERROR(base->ListMetadata(&meta));
  for (const auto& [k, v] : meta) contents.meta.emplace(k, v);
  auto root = contents.meta.find(kMetaSourceRoot);
  if (root != contents.meta.end()) {
    std::string a, b;
    if (!RealDir(root->second, &a).ok() || !RealDir(dir, &b).ok() || a != b) {
      summary->warnings.push_back(
          dir + ": not the directory the pack was built from (" + root->second +
          "); the merged pack records no source_root (MyImageFolder's "
          "samples then hold names relative to the tree)");
      contents.meta.erase(root);
    }
  }

  std::string bytes;
  PackId pack_id;
  EncodeManifest(contents, &bytes, &pack_id);
  UFSPACK_RETURN_IF_ERROR(PublishManifest(dir_fd, pack_dir, bytes));
  published = true;

  summary->manifest_path = pack_dir + "/" + kManifestFileName;
  summary->part_dir = part_dir;
  summary->pack_id = pack_id;
  summary->appended = added->size();
  summary->records = n + added->size();
  summary->parts = contents.parts.size();
  summary->segments = contents.segments.size();
  summary->seconds = SecondsSinceStart(t0);
  return Status::OK();
}

}  // namespace ufspack
