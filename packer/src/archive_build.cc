// Copyright 2026 The ufspack Authors.
//
// ArchiveBuild: one pass over an archive (ArchiveReader) into a
// SampleWriter, member by member.

#include "archive_build.h"

#include <sys/stat.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "archive_reader.h"
#include "build_internal.h"
#include "progress_reporter.h"
#include "shard_pattern.h"
#include "ufspack/reader.h"
#include "ufspack/sample_writer.h"
#include "ufspack/scan.h"
#include "ufspack/text.h"
#include "ufspack/types.h"

namespace ufspack {
namespace internal {

static bool EndsWithNoCase(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t k = 0; k < suffix.size(); ++k) {
    char c = s[s.size() - suffix.size() + k];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != suffix[k]) return false;
  }
  return true;
}

namespace {

// Members up to this size are read whole and stored as PrepareRecord
// decides (zstd with --compress); larger ones stream raw, in bounded memory.
constexpr uint64_t kInMemoryMax = uint64_t{64} << 20;
// A --label-field member holds a decimal label: anything longer is not one.
constexpr uint64_t kMaxLabelBytes = 4096;

// A member's name as a path in the extracted tree: "./" prefixes and a
// trailing '/' dropped.  Corruption for a name that would extract outside
// the tree (absolute, or with a ".." component) or has no name at all.
Status TreePath(const ArchiveReader& reader, std::string_view stored,
                std::string* path) {
  std::string_view n = stored;
  while (n.size() >= 2 && n[0] == '.' && n[1] == '/') n.remove_prefix(2);
  while (!n.empty() && n.back() == '/') n.remove_suffix(1);
  auto refuse = [&](const char* why) {
    return Status::Corruption(reader.label() + ": member '" +
                              EscapeBytes(stored) + "': " + why +
                              " (refused: it would extract outside the tree)");
  };
  if (!n.empty() && n.front() == '/') return refuse("an absolute name");
  std::string out;
  for (size_t at = 0; at < n.size();) {
    size_t end = n.find('/', at);
    if (end == std::string_view::npos) end = n.size();
    const std::string_view c = n.substr(at, end - at);
    if (c == "..") return refuse("a '..' component");
    if (!c.empty() && c != ".") {  // "a//b" and "a/./b" extract as "a/b"
      if (!out.empty()) out += '/';
      out += c;
    }
    at = end + 1;
  }
  *path = std::move(out);
  return Status::OK();
}

// What the members of the archives are (docs/cli.md, "Building from an
// archive").
enum class Layout {
  kUndecided,  // no member seen yet: decided by the first one
  kTree,       // an ImageFolder tree: top-level directories are classes
  kShards,     // WebDataset shards: top-level samples, no classes
  kFlat,       // --flat: every file, no classes
  kLabels,     // --label-field: samples labelled by one of their fields
};

// The layout the options impose, or kUndecided.
Layout LayoutOf(const BuildOptions& options) {
  if (!options.label_field.empty()) return Layout::kLabels;
  if (options.scan.flat) return Layout::kFlat;
  return Layout::kUndecided;
}

class ArchiveBuild {
 public:
  // `source`: as given (a path or a brace pattern); `archives`: its files.
  // `layout`: kUndecided to take it from the first member.
  ArchiveBuild(const std::string& source, std::vector<std::string> archives,
               const BuildOptions& options, Layout layout,
               BuildSummary* summary)
      : source_(source),
        archives_(std::move(archives)),
        options_(options),
        summary_(summary),
        layout_(layout),
        reporter_(options) {}

  // Builds the pack, or finds that the first member misled the layout's
  // guess (a WebDataset-looking archive with class directories further
  // on): then it leaves nothing behind and returns OK with
  // needs_tree_layout() true, for a build with kTree to start over.
  Status Run(const std::string& out_dir) {
    out_dir_ = out_dir;
    UFSPACK_RETURN_IF_ERROR(CheckOptions());
    if (layout_ != Layout::kUndecided) {
      UFSPACK_RETURN_IF_ERROR(CreateWriter());
    }
    reporter_.progress()->scan_done = false;
    reporter_.Start();
    Status s;
    for (const std::string& a : archives_) {
      s = OpenArchive(a);
      if (s.ok()) s = Walk(reader_.get(), "", /*top=*/true);
      if (!s.ok()) break;
      consumed_ += reader_->bytes_consumed();
    }
    if (s.ok()) s = Finish();
    if (!s.ok() && writer_ != nullptr) writer_->Abandon();
    if (needs_tree_layout_) {
      writer_.reset();  // and its lock on out_dir, for the build that follows
      return Status::OK();
    }
    return s;
  }

  bool needs_tree_layout() const { return needs_tree_layout_; }

 private:
  bool flat() const {
    return layout_ == Layout::kFlat || layout_ == Layout::kShards;
  }
  bool by_label() const { return layout_ == Layout::kLabels; }
  bool tree_classes() const { return layout_ == Layout::kTree; }

  // The files a sample may hold: WebDataset samples keep every field
  // (000123.cls, .json, .txt beside the image) unless --extensions chose
  // some; trees keep the image files unless --all-files.
  ScanOptions Selection() const {
    ScanOptions scan = options_.scan;
    if ((layout_ == Layout::kShards || layout_ == Layout::kLabels) &&
        NormalizeExtensions(scan.extensions) ==
            NormalizeExtensions(DefaultImageExtensions())) {
      scan.all_files = true;
    }
    return scan;
  }

  // The first member decides an undecided layout: a file at the top level
  // (000000.jpg) starts WebDataset shards; a directory, a file in one or a
  // top-level archive (ImageNet's n01440764.tar) an ImageFolder tree.
  // Under kShards, a member of the tree kind means the guess was wrong.
  Status Decide(const ArchiveMember& m, const std::string& path, bool top) {
    const bool tree_member = m.type == ArchiveMember::Type::kDirectory ||
                             path.find('/') != std::string::npos ||
                             (top && m.type == ArchiveMember::Type::kFile &&
                              !ArchiveStem(path).empty());
    if (layout_ == Layout::kUndecided) {
      layout_ = tree_member ? Layout::kTree : Layout::kShards;
      return CreateWriter();
    }
    if (layout_ == Layout::kShards && tree_member) {
      needs_tree_layout_ = true;
      return Status::Aborted("the archive holds class directories");
    }
    return Status::OK();
  }

  Status CheckOptions() {
    if (options_.parts > 1) {
      return Status::InvalidArgument(
          source_ +
          ": an archive is read in one pass and cannot be split into parts "
          "(--part); build it whole, or split its extracted tree");
    }
    if (options_.layout.shuffled) {
      return Status::InvalidArgument(
          source_ +
          ": --layout shuffled needs a tree; an archive's records are "
          "written in archive order (layout \"source\")");
    }
    return Status::OK();
  }

  Status CreateWriter() {
    scan_ = Selection();
    extensions_ = NormalizeExtensions(scan_.extensions);
    SampleWriterOptions wo;
    wo.writer = options_.writer;
    wo.writer.flat = flat();
    wo.labels_given = by_label();
    wo.allow_empty = options_.scan.allow_empty;
    return SampleWriter::Create(out_dir_, wo, &writer_);
  }

  Status OpenArchive(const std::string& path) {
    reader_.reset();
    archive_ = path;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return Status::FromErrno(path, errno);
    archive_bytes_ = static_cast<uint64_t>(st.st_size);
    return ArchiveReader::Open(path, &reader_);
  }

  // Every member of `reader`, named `prefix` + its path.
  Status Walk(ArchiveReader* reader, const std::string& prefix, bool top) {
    ArchiveMember m;
    for (bool more = true;;) {
      UFSPACK_RETURN_IF_ERROR(reader->Next(&m, &more));
      if (!more) return Status::OK();
      if (Cancelled(options_)) return Status::Aborted("interrupted");
      std::string path;
      UFSPACK_RETURN_IF_ERROR(TreePath(*reader, m.name, &path));
      if (path.empty()) continue;  // "./" itself
      path = prefix + path;
      if (prefix.empty()) UFSPACK_RETURN_IF_ERROR(Decide(m, path, top));
      UFSPACK_RETURN_IF_ERROR(Member(reader, m, path, top));
      reporter_.progress()->bytes_in = consumed_ + reader->bytes_consumed();
      reporter_.Tick(writer_->data_bytes());
    }
  }

  Status Member(ArchiveReader* reader, const ArchiveMember& m,
                const std::string& path, bool top) {
    const size_t slash = path.find('/');
    if (m.type == ArchiveMember::Type::kDirectory) {
      if (tree_classes()) classes_.insert(path.substr(0, slash));
      return Status::OK();
    }
    const std::string_view stem = ArchiveStem(path);
    if (top && slash == std::string::npos && !stem.empty() &&
        m.type == ArchiveMember::Type::kFile) {
      return Nested(reader, std::string(stem));
    }
    if (tree_classes() && slash == std::string::npos) {
      // Not in a class: ImageFolder lists only directories at the top (a
      // link to one would be a class; it is not followed).
      top_files_++;
      return m.type == ArchiveMember::Type::kSymlink
                 ? Skip(path, "a symbolic link, not followed")
                 : Status::OK();
    }
    if (tree_classes()) classes_.insert(path.substr(0, slash));
    if (by_label() && m.type == ArchiveMember::Type::kFile) {
      std::string_view key, field;
      Reader::SplitSampleName(path, &key, &field);
      if (field == options_.label_field) return LabelMember(reader, m, path);
    }
    const std::string_view file = std::string_view(path).substr(
        path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
    if (!scan_.all_files && !HasAllowedExtension(file, extensions_)) {
      if (!ArchiveStem(file).empty()) {  // not extracted: say so
        return Skip(path,
                    top ? "an archive below the top level (only top-level "
                          "archives are extracted, as classes)"
                        : "an archive nested more than one level deep");
      }
      ++summary_->not_matching;
      return Status::OK();
    }
    switch (m.type) {
      case ArchiveMember::Type::kFile:
        break;
      case ArchiveMember::Type::kSymlink:
        return Skip(path, "a symbolic link, not followed");
      case ArchiveMember::Type::kHardlink:
        return Skip(path, "a hard link, not followed");
      default:
        return Skip(path, "not a regular file");
    }
    if (m.encrypted) {
      if (!options_.skip_unreadable) {
        return Status::NotSupported(reader->label() + ": member '" +
                                    EscapeBytes(m.name) +
                                    "' is encrypted (--skip-unreadable skips "
                                    "it)");
      }
      return Skip(path, "encrypted");
    }
    return Sample(reader, m, path);
  }

  // A --label-field member: its text is its sample's label; it is packed
  // too when the selection takes it.
  Status LabelMember(ArchiveReader* reader, const ArchiveMember& m,
                     const std::string& path) {
    auto where = [&] {
      return reader->label() + ": member '" + EscapeBytes(m.name) + "'";
    };
    if (m.size_known && m.size > kMaxLabelBytes) {
      return Status::Corruption(where() + ": a label field of " +
                                std::to_string(m.size) +
                                " bytes (expected a decimal label)");
    }
    std::string bytes;
    UFSPACK_RETURN_IF_ERROR(ReadWhole(
        reader, m, kMaxExpansion * archive_bytes_ + (1 << 20), &bytes, where));
    std::string_view text = bytes;
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ' ||
                             text.back() == '\r' || text.back() == '\t')) {
      text.remove_suffix(1);
    }
    uint64_t label = 0;
    bool ok = !text.empty() && text.size() <= 9;
    for (char c : text) {
      ok = ok && c >= '0' && c <= '9';
      label = label * 10 + static_cast<uint64_t>(c - '0');
    }
    if (!ok) {
      return Status::Corruption(where() + ": a label field holds '" +
                                EscapeBytes(bytes.substr(0, 40)) +
                                "', expected a decimal label below 10^9");
    }
    std::string_view key, field;
    Reader::SplitSampleName(path, &key, &field);
    auto [it, added] =
        labels_.emplace(std::string(key), static_cast<uint32_t>(label));
    if (!added && it->second != label) {
      return Status::Corruption(where() + ": sample '" + EscapeBytes(key) +
                                "' has a second label");
    }
    const std::string_view file =
        std::string_view(path).substr(path.rfind('/') + 1);
    if (!scan_.all_files && !HasAllowedExtension(file, extensions_)) {
      ++summary_->not_matching;
      return Status::OK();
    }
    UFSPACK_RETURN_IF_ERROR(writer_->Add(path, bytes));
    CountSample(bytes.size());
    return Status::OK();
  }

  Status Nested(ArchiveReader* outer, const std::string& cls) {
    std::unique_ptr<ArchiveReader> inner;
    UFSPACK_RETURN_IF_ERROR(ArchiveReader::OpenNested(outer, &inner));
    if (tree_classes()) classes_.insert(cls);
    return Walk(inner.get(), cls + "/", /*top=*/false);
  }

  Status Skip(const std::string& path, const std::string& why) {
    summary_->skipped++;
    // As a tree build's: the path in the extracted tree, then why.
    Warn(summary_,
         archive_ + "/" + EscapeBytes(path) + ": " + why + "; skipped");
    return Status::OK();
  }

  Status Sample(ArchiveReader* reader, const ArchiveMember& m,
                const std::string& path) {
    auto where = [&] {
      return reader->label() + ": member '" + EscapeBytes(m.name) + "'";
    };
    const uint64_t limit = kMaxExpansion * archive_bytes_ + (1 << 20);
    if (m.size_known && m.size > limit) {
      return Status::Corruption(
          where() + " declares " + std::to_string(m.size) +
          " bytes, more than " + std::to_string(kMaxExpansion) +
          " times the archive's " + std::to_string(archive_bytes_) +
          " (a zip bomb?)");
    }
    auto check = [&, size = m.size](uint64_t done) -> Status {
      if (done == size) return Status::OK();
      return Status::Corruption(where() + ": declares " + std::to_string(size) +
                                " bytes, holds " +
                                (done > size ? "more" : std::to_string(done)));
    };
    auto read = [reader](char* buf, size_t cap, size_t* got) {
      return reader->Read(buf, cap, got);
    };
    Status s;
    if (m.size_known && m.size > kInMemoryMax) {
      s = writer_->AddStreamed(path, m.size, read, check);
    } else {
      std::string bytes;
      UFSPACK_RETURN_IF_ERROR(ReadWhole(reader, m, limit, &bytes, where));
      if (m.size_known) UFSPACK_RETURN_IF_ERROR(check(bytes.size()));
      s = writer_->Add(path, bytes);
    }
    if (!s.ok()) {
      return s.IsInvalidArgument()
                 ? Status::Corruption(where() + ": " + std::string(s.message()))
                 : s;
    }
    CountSample(m.size_known ? m.size : 0);
    return Status::OK();
  }

  void CountSample(uint64_t bytes) {
    BuildProgress* p = reporter_.progress();
    p->files_done++;
    p->files_total = p->files_done;
    sample_bytes_ += bytes;
  }

  template <class Where>
  Status ReadWhole(ArchiveReader* reader, const ArchiveMember& m,
                   uint64_t limit, std::string* bytes, const Where& where) {
    const uint64_t cap = m.size_known ? m.size + 1 : kInMemoryMax + 1;
    bytes->resize(std::min<uint64_t>(cap, uint64_t{1} << 20));
    size_t have = 0;
    for (;;) {
      if (have == bytes->size()) {
        if (bytes->size() >= cap) break;  // more than declared
        bytes->resize(std::min<uint64_t>(cap, bytes->size() * 2));
      }
      size_t got = 0;
      UFSPACK_RETURN_IF_ERROR(
          reader->Read(bytes->data() + have, bytes->size() - have, &got));
      if (got == 0) break;
      have += got;
    }
    bytes->resize(have);
    if (!m.size_known && have > kInMemoryMax) {
      return Status::NotSupported(where() +
                                  ": a member of undeclared size over 64 MiB");
    }
    if (have > limit) {
      return Status::Corruption(where() + ": expands beyond " +
                                std::to_string(kMaxExpansion) +
                                " times the archive (a zip bomb?)");
    }
    return Status::OK();
  }

  Status Finish() {
    if (writer_ == nullptr) {  // not one member
      return Status::InvalidArgument(
          source_ + ": " +
          (archives_.size() > 1 ? "the archives hold" : "the archive holds") +
          " no member: nothing to pack (an empty directory is refused the "
          "same way)");
    }
    if (!tree_classes() && writer_->sample_count() == 0) {
      return Status::InvalidArgument(
          source_ + ": no file to pack: none of its " +
          std::to_string(summary_->not_matching + summary_->skipped) +
          " members is a regular file matching the selection (" +
          ExtensionSelection(scan_) + ")");
    }
    if (tree_classes() && classes_.empty() && top_files_ > 0) {
      return Status::InvalidArgument(
          source_ +
          ": no class directories (top-level directories or "
          "archives), and the " +
          std::to_string(top_files_) +
          " files at the top level are in none: --flat packs them without "
          "classes; WebDataset shards take --label-field (e.g. cls)");
    }
    for (const std::string& c : classes_) {
      UFSPACK_RETURN_IF_ERROR(writer_->AddClass(c));
    }
    if (by_label()) {
      writer_->SetLabelOf([this](std::string_view name, uint32_t* label) {
        std::string_view key, field;
        Reader::SplitSampleName(name, &key, &field);
        auto it = labels_.find(std::string(key));
        if (it == labels_.end()) {
          return Status::Corruption(source_ + ": sample '" + EscapeBytes(key) +
                                    "' has no '" + options_.label_field +
                                    "' field (--label-field)");
        }
        *label = it->second;
        return Status::OK();
      });
    }
    UFSPACK_RETURN_IF_ERROR(writer_->SetMetadata(kMetaSourceRoot, source_));
    UFSPACK_RETURN_IF_ERROR(writer_->SetMetadata(kMetaLayout, "source"));
    UFSPACK_RETURN_IF_ERROR(
        writer_->SetMetadata(kMetaExtensions, ExtensionSelection(scan_)));
    Status s = writer_->Finish(&summary_->pack_id);
    if (!s.ok()) {
      // SampleWriter's own errors (a name twice, an empty class) name the
      // sample, not where it came from.
      return s.IsInvalidArgument()
                 ? Status::InvalidArgument(source_ + ": " +
                                           std::string(s.message()))
                 : s;
    }
    BuildProgress* p = reporter_.progress();
    p->scan_done = true;
    p->bytes_in = consumed_;
    reporter_.Report(writer_->data_bytes());
    summary_->index_path = writer_->out_dir() + "/" + kIndexFileName;
    summary_->data_path = writer_->out_dir() + "/" + kDataFileName;
    summary_->files = writer_->sample_count();
    summary_->classes = flat() ? 0 : writer_->classes().size();
    summary_->compressed = writer_->compressed_count();
    summary_->bytes_in = sample_bytes_;
    summary_->bytes_out = writer_->data_bytes();
    struct stat ist;
    if (::stat(summary_->index_path.c_str(), &ist) == 0) {
      summary_->index_bytes = static_cast<uint64_t>(ist.st_size);
    }
    return Status::OK();
  }

  const std::string source_;
  const std::vector<std::string> archives_;
  std::string archive_;    // the one being read
  uint64_t consumed_ = 0;  // bytes of the archives read before it
  std::map<std::string, uint32_t> labels_;  // --label-field: key -> label
  const BuildOptions& options_;
  BuildSummary* summary_;
  Layout layout_;
  bool needs_tree_layout_ = false;  // Decide() found the guess wrong
  std::string out_dir_;
  ScanOptions scan_;  // the files taken, for the layout (Selection())
  std::vector<std::string> extensions_;  // scan_'s, normalized
  ProgressReporter reporter_;
  uint64_t archive_bytes_ = 0;
  uint64_t sample_bytes_ = 0;
  uint64_t top_files_ = 0;  // members at the top, outside any class
  std::unique_ptr<ArchiveReader> reader_;
  std::unique_ptr<SampleWriter> writer_;
  std::set<std::string> classes_;  // top-level directories and archives
};

}  // namespace

bool IsArchiveSource(const std::string& src) {
  struct stat st;
  if (::stat(src.c_str(), &st) == 0) return S_ISREG(st.st_mode);
  return src.find('{') != std::string::npos &&
         src.find('}') != std::string::npos;
}

Status BuildFromArchives(const std::vector<std::string>& sources,
                         const std::string& out_dir,
                         const BuildOptions& options, BuildSummary* summary) {
  const auto t0 = std::chrono::steady_clock::now();
  if (sources.empty()) return Status::InvalidArgument("no archive to pack");
  std::vector<std::string> archives;
  for (const std::string& source : sources) {
    std::vector<std::string> some;
    UFSPACK_RETURN_IF_ERROR(ExpandShards(source, &some));
    archives.insert(archives.end(), some.begin(), some.end());
  }
  // Errors and the pack's source metadata name the first archive (and
  // how many follow).
  std::string source = sources[0];
  if (sources.size() > 1) {
    source += " and " + std::to_string(sources.size() - 1) + " more";
  }
  for (const std::string& a : archives) {
    struct stat st;
    if (::stat(a.c_str(), &st) != 0) return Status::FromErrno(a, errno);
    if (!S_ISREG(st.st_mode)) {
      return Status::InvalidArgument(a + ": not an archive file");
    }
  }
  if (!options.label_field.empty() && options.scan.flat) {
    return Status::InvalidArgument(
        "--label-field gives the pack classes; it does not go with --flat");
  }
  ArchiveBuild build(source, archives, options, LayoutOf(options), summary);
  Status s = build.Run(out_dir);
  if (s.ok() && build.needs_tree_layout()) {
    // Read again as a tree: what the first pass counted does not stand.
    *summary = BuildSummary();
    ArchiveBuild tree(source, std::move(archives), options, Layout::kTree,
                      summary);
    s = tree.Run(out_dir);
  }
  summary->seconds = SecondsSince(t0);
  summary->scan_seconds = 0;
  return s;
}

}  // namespace internal

std::string_view ArchiveStem(std::string_view name) {
  static const char* const kSuffixes[] = {
      ".tar.gz", ".tar.bz2", ".tar.xz", ".tar.zst", ".tgz",
      ".tbz2",   ".txz",     ".tzst",   ".tar",     ".zip"};
  for (const char* suffix : kSuffixes) {
    const std::string_view s(suffix);
    if (name.size() > s.size() && internal::EndsWithNoCase(name, s)) {
      return name.substr(0, name.size() - s.size());
    }
  }
  return {};
}

}  // namespace ufspack
