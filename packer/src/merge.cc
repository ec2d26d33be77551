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
#include "merge_internal.h"
#include "publish.h"
#include "scan_entries.h"
#include "ufspack/builder.h"
#include "ufspack/file.h"
#include "ufspack/format.h"
#include "ufspack/manifest.h"
#include "ufspack/parallel.h"
#include "ufspack/posix_io.h"
#include "ufspack/reader.h"
#include "ufspack/scan.h"
#include "ufspack/text.h"

namespace ufspack {

namespace internal {

Status RealDir(const std::string& path, std::string* out) {
  char* p = ::realpath(path.c_str(), nullptr);
  if (p == nullptr) return Status::FromErrno(path, errno);
  *out = p;
  ::free(p);
  return Status::OK();
}

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

}  // namespace internal

namespace {

using internal::PublishManifest;
using internal::RealDir;

// Locks `out_dir` (created if missing) for a manifest, clears a crashed
// writer's temporary files, and refuses a directory holding a single pack.
// Sets *dir_fd, which the caller closes (the lock goes with it).
Status OpenManifestDir(const std::string& out_dir, int* dir_fd) {
  bool locked = false;
  UFSPACK_RETURN_IF_ERROR(internal::LockPackDir(out_dir, dir_fd, &locked));
  if (locked) internal::RecoverPackDir(*dir_fd);
  struct stat st;
  if (::fstatat(*dir_fd, kIndexFileName, &st, 0) == 0) {
    ::close(*dir_fd);
    *dir_fd = -1;
    return Status::InvalidArgument(out_dir + ": holds a single pack (" +
                                   kIndexFileName +
                                   "); merge into a directory of its own");
  }
  return Status::OK();
}

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
  UFSPACK_RETURN_IF_ERROR(OpenManifestDir(out_dir, &dir_fd));
  struct DirCloser {
    int fd;
    ~DirCloser() { ::close(fd); }
  } closer{dir_fd};
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

Status PublishMergedManifest(const std::string& out_dir,
                             const std::string& manifest) {
  int dir_fd = -1;
  UFSPACK_RETURN_IF_ERROR(OpenManifestDir(out_dir, &dir_fd));
  Status s = PublishManifest(dir_fd, out_dir, manifest);
  ::close(dir_fd);
  return s;
}

}  // namespace ufspack
