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

class ArchiveBuild {
 public:
  // `source`: as given (a path or a brace pattern); `archives`: its files.
  ArchiveBuild(const std::string& source, std::vector<std::string> archives,
               const BuildOptions& options, BuildSummary* summary)
      : source_(source),
        archives_(std::move(archives)),
        options_(options),
        summary_(summary),
        flat_(options.scan.flat),
        by_label_(!options.label_field.empty()),
        tree_classes_(!flat_ && !by_label_),
        extensions_(NormalizeExtensions(options.scan.extensions)),
        reporter_(options) {}

  Status Run(const std::string& out_dir) {
    UFSPACK_RETURN_IF_ERROR(Prepare(out_dir));
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
    if (!s.ok()) writer_->Abandon();
    return s;
  }

 private:
  Status Prepare(const std::string& out_dir) {
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
    SampleWriterOptions wo;
    wo.writer = options_.writer;
    wo.writer.flat = flat_;
    wo.labels_given = by_label_;
    wo.allow_empty = options_.scan.allow_empty;
    return SampleWriter::Create(out_dir, wo, &writer_);
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
      UFSPACK_RETURN_IF_ERROR(Member(reader, m, path, top));
      reporter_.progress()->bytes_in = consumed_ + reader->bytes_consumed();
      reporter_.Tick(writer_->data_bytes());
    }
  }

  Status Member(ArchiveReader* reader, const ArchiveMember& m,
                const std::string& path, bool top) {
    const size_t slash = path.find('/');
    if (m.type == ArchiveMember::Type::kDirectory) {
      if (tree_classes_) classes_.insert(path.substr(0, slash));
      return Status::OK();
    }
    const std::string_view stem = ArchiveStem(path);
    if (top && slash == std::string::npos && !stem.empty() &&
        m.type == ArchiveMember::Type::kFile) {
      return Nested(reader, std::string(stem));
    }
    if (tree_classes_ && slash == std::string::npos) {
      // Not in a class: ImageFolder lists only directories at the top (a
      // link to one would be a class; it is not followed).
      top_files_++;
      return m.type == ArchiveMember::Type::kSymlink
                 ? Skip(path, "a symbolic link, not followed")
                 : Status::OK();
    }
    if (tree_classes_) classes_.insert(path.substr(0, slash));
    if (by_label_ && m.type == ArchiveMember::Type::kFile) {
      std::string_view key, field;
      Reader::SplitSampleName(path, &key, &field);
      if (field == options_.label_field) return LabelMember(reader, m, path);
    }
    const std::string_view file = std::string_view(path).substr(
        path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
    if (!options_.scan.all_files && !HasAllowedExtension(file, extensions_)) {
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
    if (!options_.scan.all_files && !HasAllowedExtension(file, extensions_)) {
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
    if (tree_classes_) classes_.insert(cls);
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
    if (tree_classes_ && classes_.empty() && top_files_ > 0) {
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
    if (by_label_) {
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
    UFSPACK_RETURN_IF_ERROR(writer_->SetMetadata(
        kMetaExtensions, ExtensionSelection(options_.scan)));
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
    summary_->classes = flat_ ? 0 : writer_->classes().size();
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
  const bool flat_;
  const bool by_label_;      // --label-field: labels from a field
  const bool tree_classes_;  // classes are top-level directories
  const std::vector<std::string> extensions_;
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

Status ExpandShards(const std::string& pattern, std::vector<std::string>* out) {
  out->clear();
  const size_t open = pattern.find('{');
  const size_t close =
      open == std::string::npos ? open : pattern.find('}', open);
  if (close == std::string::npos) {
    out->push_back(pattern);
    return Status::OK();
  }
  const std::string head = pattern.substr(0, open);
  const std::string body = pattern.substr(open + 1, close - open - 1);
  std::vector<std::string> tails;
  UFSPACK_RETURN_IF_ERROR(ExpandShards(pattern.substr(close + 1), &tails));
  std::vector<std::string> items;
  const size_t dots = body.find("..");
  if (dots != std::string::npos) {
    const std::string a = body.substr(0, dots), b = body.substr(dots + 2);
    auto digits = [](const std::string& x) {
      return !x.empty() && x.size() <= 18 &&
             x.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!digits(a) || !digits(b) || std::stoull(a) > std::stoull(b) ||
        std::stoull(b) - std::stoull(a) >= 10000000) {
      return Status::InvalidArgument(
          pattern + ": '{" + body +
          "}' is not a range of shard numbers (expected {FIRST..LAST}, "
          "FIRST <= LAST, e.g. {000000..000099})");
    }
    const size_t width = a.size();  // zero padded to FIRST's digits
    for (uint64_t v = std::stoull(a); v <= std::stoull(b); ++v) {
      std::string n = std::to_string(v);
      if (n.size() < width) n.insert(0, width - n.size(), '0');
      items.push_back(n);
    }
  } else {
    for (size_t at = 0;;) {
      const size_t comma = body.find(',', at);
      items.push_back(body.substr(at, comma - at));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }
  for (const std::string& i : items) {
    for (const std::string& t : tails) out->push_back(head + i + t);
  }
  return Status::OK();
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
  ArchiveBuild build(source, std::move(archives), options, summary);
  Status s = build.Run(out_dir);
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
