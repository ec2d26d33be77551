// Copyright 2026 The ufspack Authors.
//
// ArchiveBuild: one pass over an archive (ArchiveReader) into a
// SampleWriter, member by member.

#include "archive_build.h"

#include <sys/stat.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "archive_reader.h"
#include "build_internal.h"
#include "progress_reporter.h"
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
  ArchiveBuild(const std::string& archive, const BuildOptions& options,
               BuildSummary* summary)
      : archive_(archive),
        options_(options),
        summary_(summary),
        flat_(options.scan.flat),
        extensions_(NormalizeExtensions(options.scan.extensions)),
        reporter_(options) {}

  Status Run(const std::string& out_dir) {
    UFSPACK_RETURN_IF_ERROR(Prepare(out_dir));
    reporter_.progress()->scan_done = false;
    reporter_.Start();
    Status s = Walk(reader_.get(), "", /*top=*/true);
    if (s.ok()) s = Finish();
    if (!s.ok()) writer_->Abandon();
    return s;
  }

 private:
  Status Prepare(const std::string& out_dir) {
    if (options_.parts > 1) {
      return Status::InvalidArgument(
          archive_ +
          ": an archive is read in one pass and cannot be split into parts "
          "(--part); build it whole, or split its extracted tree");
    }
    if (options_.layout.shuffled) {
      return Status::InvalidArgument(
          archive_ +
          ": --layout shuffled needs a tree; an archive's records are "
          "written in archive order (layout \"source\")");
    }
    struct stat st;
    if (::stat(archive_.c_str(), &st) != 0) {
      return Status::FromErrno(archive_, errno);
    }
    archive_bytes_ = static_cast<uint64_t>(st.st_size);
    UFSPACK_RETURN_IF_ERROR(ArchiveReader::Open(archive_, &reader_));
    SampleWriterOptions wo;
    wo.writer = options_.writer;
    wo.writer.flat = flat_;
    wo.allow_empty = options_.scan.allow_empty;
    return SampleWriter::Create(out_dir, wo, &writer_);
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
      reporter_.progress()->bytes_in = reader->bytes_consumed();
      reporter_.Tick(writer_->data_bytes());
    }
  }

  Status Member(ArchiveReader* reader, const ArchiveMember& m,
                const std::string& path, bool top) {
    const size_t slash = path.find('/');
    if (m.type == ArchiveMember::Type::kDirectory) {
      if (!flat_) classes_.insert(path.substr(0, slash));
      return Status::OK();
    }
    const std::string_view stem = ArchiveStem(path);
    if (top && slash == std::string::npos && !stem.empty() &&
        m.type == ArchiveMember::Type::kFile) {
      return Nested(reader, std::string(stem));
    }
    if (!flat_ && slash == std::string::npos) {
      // Not in a class: ImageFolder lists only directories at the top (a
      // link to one would be a class; it is not followed).
      return m.type == ArchiveMember::Type::kSymlink
                 ? Skip(path, "a symbolic link, not followed")
                 : Status::OK();
    }
    if (!flat_) classes_.insert(path.substr(0, slash));
    const std::string_view file = std::string_view(path).substr(
        path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
    if (!options_.scan.all_files && !HasAllowedExtension(file, extensions_)) {
      if (!ArchiveStem(file).empty()) {  // not extracted: say so
        return Skip(path,
                    top ? "an archive below the top level (only top-level "
                          "archives are extracted, as classes)"
                        : "an archive nested more than one level deep");
      }
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

  Status Nested(ArchiveReader* outer, const std::string& cls) {
    std::unique_ptr<ArchiveReader> inner;
    UFSPACK_RETURN_IF_ERROR(ArchiveReader::OpenNested(outer, &inner));
    if (!flat_) classes_.insert(cls);
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
    BuildProgress* p = reporter_.progress();
    p->files_done++;
    p->files_total = p->files_done;
    sample_bytes_ += m.size_known ? m.size : 0;
    return Status::OK();
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
    for (const std::string& c : classes_) {
      UFSPACK_RETURN_IF_ERROR(writer_->AddClass(c));
    }
    UFSPACK_RETURN_IF_ERROR(writer_->SetMetadata(kMetaSourceRoot, archive_));
    UFSPACK_RETURN_IF_ERROR(writer_->SetMetadata(kMetaLayout, "source"));
    UFSPACK_RETURN_IF_ERROR(writer_->SetMetadata(
        kMetaExtensions, ExtensionSelection(options_.scan)));
    Status s = writer_->Finish(&summary_->pack_id);
    if (!s.ok()) {
      // SampleWriter's own errors (a name twice, an empty class) name the
      // sample, not where it came from.
      return s.IsInvalidArgument()
                 ? Status::InvalidArgument(archive_ + ": " +
                                           std::string(s.message()))
                 : s;
    }
    BuildProgress* p = reporter_.progress();
    p->scan_done = true;
    p->bytes_in = reader_->bytes_consumed();
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

  const std::string archive_;
  const BuildOptions& options_;
  BuildSummary* summary_;
  const bool flat_;
  const std::vector<std::string> extensions_;
  ProgressReporter reporter_;
  uint64_t archive_bytes_ = 0;
  uint64_t sample_bytes_ = 0;
  std::unique_ptr<ArchiveReader> reader_;
  std::unique_ptr<SampleWriter> writer_;
  std::set<std::string> classes_;  // top-level directories and archives
};

}  // namespace

bool IsArchiveSource(const std::string& src) {
  struct stat st;
  return ::stat(src.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Status BuildFromArchive(const std::string& archive, const std::string& out_dir,
                        const BuildOptions& options, BuildSummary* summary) {
  const auto t0 = std::chrono::steady_clock::now();
  ArchiveBuild build(archive, options, summary);
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
