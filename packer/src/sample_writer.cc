// Copyright 2026 The ufspack Authors.
//
// SampleWriter over a PackWriter in one deferred run: bytes are appended as
// samples come; at Finish() the held index entries get their ImageFolder
// positions and labels (pack_writer_impl.h, BeginDeferredRun).

#include "ufspack/sample_writer.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <utility>

#include "pack_writer_impl.h"
#include "scan_order.h"
#include "ufspack/text.h"

namespace ufspack {

namespace {

std::string_view ClassOf(std::string_view name) {
  return name.substr(0, name.find('/'));
}

// InvalidArgument unless `name` is a relative path a tree could hold (and,
// with classes, one below a class directory).
Status CheckName(std::string_view name, bool flat) {
  auto bad = [&](const char* why) {
    return Status::InvalidArgument("sample name '" + EscapeBytes(name) +
                                   "': " + why);
  };
  if (name.empty()) return bad("empty");
  if (name.find('\0') != std::string_view::npos) return bad("holds a NUL");
  if (name.front() == '/') return bad("absolute (starts with '/')");
  size_t components = 0;
  for (size_t at = 0; at <= name.size();) {
    size_t end = name.find('/', at);
    if (end == std::string_view::npos) end = name.size();
    const std::string_view c = name.substr(at, end - at);
    if (c.empty())
      return bad("has an empty component ('//' or a trailing '/')");
    if (c == "." || c == "..") return bad("has a '.' or '..' component");
    ++components;
    at = end + 1;
  }
  if (!flat && components < 2) {
    return bad("not below a class (expected 'class/file')");
  }
  return Status::OK();
}

}  // namespace

class SampleWriter::Rep {
 public:
  Rep(std::unique_ptr<PackWriter> writer, const SampleWriterOptions& options)
      : writer_(std::move(writer)),
        impl_(internal::PackWriterImpl::Of(writer_.get())),
        options_(options),
        classes_(options.classes) {
    for (size_t k = 0; k < classes_.size(); ++k) {
      fixed_[classes_[k]] = static_cast<uint32_t>(k);
    }
  }

  Status Begin() {
    if (!options_.writer.flat) {
      for (const std::string& c : classes_) {
        UFSPACK_RETURN_IF_ERROR(writer_->AddClass(c));
      }
    }
    return impl_->BeginDeferredRun();
  }

  // Checks the name and label before anything is written.
  Status Admit(std::string_view name, uint32_t label) {
    UFSPACK_RETURN_IF_ERROR(impl_->CheckOwner());
    UFSPACK_RETURN_IF_ERROR(writer_->status());
    if (finished_) return Status::InvalidArgument("the writer is closed");
    UFSPACK_RETURN_IF_ERROR(
        CheckName(name, options_.writer.flat || options_.labels_given));
    if (options_.labels_given) {
      if (label != kNoLabel &&
          (label >= kNoLabel - 1 ||
           (!classes_.empty() && label >= classes_.size()))) {
        return Status::InvalidArgument(
            EscapeBytes(name) + ": label " + std::to_string(label) +
            " out of range" +
            (classes_.empty()
                 ? std::string()
                 : " (" + std::to_string(classes_.size()) + " classes given)"));
      }
      return Status::OK();
    }
    if (options_.writer.flat) {
      if (label != kNoLabel) {
        return Status::InvalidArgument(EscapeBytes(name) +
                                       ": a pack without classes takes no "
                                       "label (given " +
                                       std::to_string(label) + ")");
      }
      return Status::OK();
    }
    if (fixed_.empty()) return Status::OK();  // checked by Finish()
    auto it = fixed_.find(std::string(ClassOf(name)));
    if (it == fixed_.end()) {
      return Status::InvalidArgument(
          EscapeBytes(name) + ": class '" + EscapeBytes(ClassOf(name)) +
          "' is not one of the " + std::to_string(classes_.size()) +
          " classes given");
    }
    if (label != kNoLabel && label != it->second) {
      return Status::InvalidArgument(
          EscapeBytes(name) + ": label " + std::to_string(label) +
          " given, but class '" + it->first + "' is label " +
          std::to_string(it->second));
    }
    return Status::OK();
  }

  Status Add(std::string_view name, std::string_view bytes, uint32_t label) {
    UFSPACK_RETURN_IF_ERROR(Admit(name, label));
    internal::PreparedRecord r;
    Status s = internal::PrepareRecord(std::string(bytes), options_.writer, &r);
    if (!s.ok()) return s;
    impl_->SetRunPosition(labels_.size());
    UFSPACK_RETURN_IF_ERROR(impl_->AddPrepared(name, kNoLabel, r));
    labels_.push_back(label);
    if (r.codec == Codec::kZstd) compressed_++;
    return Status::OK();
  }

  Status AddClass(std::string_view name) {
    UFSPACK_RETURN_IF_ERROR(impl_->CheckOwner());
    UFSPACK_RETURN_IF_ERROR(writer_->status());
    if (finished_) return Status::InvalidArgument("the writer is closed");
    if (options_.writer.flat) {
      return Status::InvalidArgument("a pack without classes has no class '" +
                                     EscapeBytes(name) + "'");
    }
    if (!options_.classes.empty()) {
      if (fixed_.count(std::string(name)) > 0) return Status::OK();
      return Status::InvalidArgument("class '" + EscapeBytes(name) +
                                     "' is not one of the classes given");
    }
    if (name.empty() || name.find('/') != std::string_view::npos ||
        name == "." || name == "..") {
      return Status::InvalidArgument("class name '" + EscapeBytes(name) +
                                     "' is not a directory name");
    }
    declared_.emplace(name);
    return Status::OK();
  }

  Status AddStreamed(std::string_view name, uint64_t size,
                     const ChunkReader& read,
                     const std::function<Status(uint64_t)>& check,
                     uint32_t label) {
    UFSPACK_RETURN_IF_ERROR(Admit(name, label));
    impl_->SetRunPosition(labels_.size());
    UFSPACK_RETURN_IF_ERROR(
        impl_->AddStreamed(name, kNoLabel, size, read, check));
    labels_.push_back(label);
    return Status::OK();
  }

  Status Finish(PackId* pack_id) {
    UFSPACK_RETURN_IF_ERROR(impl_->CheckOwner());
    UFSPACK_RETURN_IF_ERROR(writer_->status());
    if (finished_) return Status::InvalidArgument("Finish() called twice");
    finished_ = true;
    Status s = impl_->EndRun([this](const std::vector<std::string_view>& names,
                                    std::vector<uint64_t>* positions,
                                    std::vector<uint32_t>* labels) {
      return Assign(names, positions, labels);
    });
    if (s.ok()) s = writer_->Finish(pack_id);
    if (!s.ok()) writer_->Abandon();  // nothing left behind
    return s;
  }

  void Abandon() {
    finished_ = true;
    writer_->Abandon();
  }

  PackWriter* writer() { return writer_.get(); }
  void SetLabelOf(std::function<Status(std::string_view, uint32_t*)> f) {
    label_of_ = std::move(f);
  }
  const std::string& out_dir() const { return writer_->out_dir(); }
  const Status& status() const { return writer_->status(); }
  uint64_t sample_count() const { return labels_.size(); }
  uint64_t compressed_count() const { return compressed_; }
  uint64_t data_bytes() const { return writer_->data_bytes(); }
  const std::vector<std::string>& classes() const { return classes_; }

 private:
  // The derived classes (the sorted first components), declared.
  Status DeriveClasses(const std::vector<std::string_view>& names) {
    std::vector<std::string_view> seen(declared_.begin(), declared_.end());
    seen.reserve(names.size() + declared_.size());
    for (std::string_view n : names) seen.push_back(ClassOf(n));
    std::sort(seen.begin(), seen.end(), PyFsLess);
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (std::string_view c : seen) {
      fixed_[std::string(c)] = static_cast<uint32_t>(classes_.size());
      classes_.emplace_back(c);
      UFSPACK_RETURN_IF_ERROR(writer_->AddClass(c));
    }
    return Status::OK();
  }

  // Every sample's label: its class's, checked against the one given.
  Status LabelSamples(const std::vector<std::string_view>& names,
                      std::vector<uint32_t>* labels) const {
    std::vector<uint64_t> per_class(classes_.size());
    for (size_t k = 0; k < names.size(); ++k) {
      const uint32_t l = fixed_.at(std::string(ClassOf(names[k])));
      if (labels_[k] != kNoLabel && labels_[k] != l) {
        return Status::InvalidArgument(
            EscapeBytes(names[k]) + ": label " + std::to_string(labels_[k]) +
            " given, but its class '" + classes_[l] + "' is label " +
            std::to_string(l) + " (the classes in sorted order)");
      }
      (*labels)[k] = l;
      per_class[l]++;
    }
    if (options_.allow_empty) return Status::OK();
    std::vector<std::string> empty;
    for (size_t c = 0; c < classes_.size(); ++c) {
      if (per_class[c] == 0) empty.push_back(classes_[c]);
    }
    if (empty.empty()) return Status::OK();
    std::string list;
    for (size_t k = 0; k < empty.size() && k < 10; ++k) {
      list += (k ? ", '" : "'") + EscapeBytes(empty[k]) + "'";
    }
    return Status::InvalidArgument(
        std::to_string(empty.size()) + " class(es) with no sample: " + list +
        (empty.size() > 10 ? ", ..." : "") +
        " (allow_empty keeps them, as ImageFolder's allow_empty)");
  }

  // labels_given: the caller's labels, and classes "0".."max" unless fixed.
  Status GivenLabels(const std::vector<std::string_view>& names,
                     std::vector<uint32_t>* labels) {
    uint32_t top = 0;
    for (size_t k = 0; k < names.size(); ++k) {
      uint32_t l = labels_[k];
      if (l == kNoLabel && label_of_) {
        UFSPACK_RETURN_IF_ERROR(label_of_(names[k], &l));
      }
      if (l == kNoLabel) {
        return Status::InvalidArgument(EscapeBytes(names[k]) +
                                       ": no label given");
      }
      if (!classes_.empty() && l >= classes_.size()) {
        return Status::InvalidArgument(EscapeBytes(names[k]) + ": label " +
                                       std::to_string(l) + " out of range (" +
                                       std::to_string(classes_.size()) +
                                       " classes given)");
      }
      (*labels)[k] = l;
      top = std::max(top, l + 1);
    }
    if (classes_.empty()) {
      for (uint32_t c = 0; c < top; ++c) classes_.push_back(std::to_string(c));
    }
    for (const std::string& c : classes_) {
      if (options_.classes.empty())
        UFSPACK_RETURN_IF_ERROR(writer_->AddClass(c));
    }
    return Status::OK();
  }

  Status Assign(const std::vector<std::string_view>& names,
                std::vector<uint64_t>* positions,
                std::vector<uint32_t>* labels) {
    const bool flat = options_.writer.flat;
    if (options_.labels_given) {
      UFSPACK_RETURN_IF_ERROR(GivenLabels(names, labels));
    } else if (!flat) {
      if (classes_.empty()) UFSPACK_RETURN_IF_ERROR(DeriveClasses(names));
      UFSPACK_RETURN_IF_ERROR(LabelSamples(names, labels));
    }
    // ImageFolder order: by label, then ImageFolderLess within a class.
    std::vector<uint64_t> order(names.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) {
      if (!flat && (*labels)[a] != (*labels)[b]) {
        return (*labels)[a] < (*labels)[b];
      }
      return ImageFolderLess(names[a], names[b]);
    });
    for (size_t k = 0; k < order.size(); ++k) {
      if (k > 0 && names[order[k]] == names[order[k - 1]]) {
        return Status::InvalidArgument(
            "sample '" + EscapeBytes(names[order[k]]) + "' added twice");
      }
      (*positions)[order[k]] = k;
    }
    return Status::OK();
  }

  std::unique_ptr<PackWriter> writer_;
  internal::PackWriterImpl* impl_;
  SampleWriterOptions options_;
  std::vector<std::string> classes_;
  std::map<std::string, uint32_t> fixed_;  // class name -> label
  std::vector<uint32_t> labels_;           // as given, in the order added
  std::set<std::string> declared_;         // AddClass() of derived classes
  std::function<Status(std::string_view, uint32_t*)> label_of_;
  uint64_t compressed_ = 0;
  bool finished_ = false;
};

Status SampleWriter::Create(const std::string& out_dir,
                            const SampleWriterOptions& options,
                            std::unique_ptr<SampleWriter>* writer) {
  if (options.writer.flat &&
      (!options.classes.empty() || options.labels_given)) {
    return Status::InvalidArgument("a pack without classes takes no classes");
  }
  std::map<std::string, int> seen;
  for (const std::string& c : options.classes) {
    if (c.empty() || c.find('/') != std::string::npos || c == "." ||
        c == ".." || c.find('\0') != std::string::npos) {
      return Status::InvalidArgument("class name '" + EscapeBytes(c) +
                                     "' is not a directory name");
    }
    if (seen[c]++ > 0) {
      return Status::InvalidArgument("class '" + EscapeBytes(c) +
                                     "' given twice");
    }
  }
  std::unique_ptr<PackWriter> w;
  UFSPACK_RETURN_IF_ERROR(PackWriter::Create(out_dir, options.writer, &w));
  auto rep = std::make_unique<Rep>(std::move(w), options);
  UFSPACK_RETURN_IF_ERROR(rep->Begin());
  writer->reset(new SampleWriter(std::move(rep)));
  return Status::OK();
}

SampleWriter::SampleWriter(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}
SampleWriter::~SampleWriter() = default;

Status SampleWriter::Add(std::string_view name, std::string_view bytes,
                         uint32_t label) {
  return rep_->Add(name, bytes, label);
}
Status SampleWriter::AddStreamed(
    std::string_view name, uint64_t size, const ChunkReader& read,
    const std::function<Status(uint64_t done)>& check, uint32_t label) {
  return rep_->AddStreamed(name, size, read, check, label);
}
void SampleWriter::SetLabelOf(
    std::function<Status(std::string_view name, uint32_t* label)> label_of) {
  rep_->SetLabelOf(std::move(label_of));
}
Status SampleWriter::AddClass(std::string_view name) {
  return rep_->AddClass(name);
}
Status SampleWriter::SetMetadata(std::string_view key, std::string_view value) {
  return rep_->writer()->SetMetadata(key, value);
}
Status SampleWriter::Finish(PackId* pack_id) { return rep_->Finish(pack_id); }
void SampleWriter::Abandon() { rep_->Abandon(); }
const Status& SampleWriter::status() const { return rep_->status(); }
uint64_t SampleWriter::sample_count() const { return rep_->sample_count(); }
uint64_t SampleWriter::compressed_count() const {
  return rep_->compressed_count();
}
uint64_t SampleWriter::data_bytes() const { return rep_->data_bytes(); }
const std::string& SampleWriter::out_dir() const { return rep_->out_dir(); }
const std::vector<std::string>& SampleWriter::classes() const {
  return rep_->classes();
}

}  // namespace ufspack
