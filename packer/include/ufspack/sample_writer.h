// Copyright 2026 The ufspack Authors.
//
// SampleWriter: packs samples added in any order (an archive's members as
// they stream by, samples a program generates) into the pack a build of
// the same files as a directory tree would give: the same records, names,
// classes, labels and bytes, in ImageFolder order (ufspack/scan.h).  Each
// record's bytes go to data.ufs as it is added, in the order added (the
// data file's order is not the index's; reading never depends on it); the
// index is sorted and written by Finish(), which publishes the pack as
// PackWriter does (atomically: until then, and after an error or
// Abandon(), the output directory keeps what it had).
//
// A name is a '/'-separated relative path, as a tree's file would be
// named: no empty, "." or ".." component, no leading '/', no NUL.  With
// classes, its first component is its class: the classes are the sorted
// first components (Python's str order, as ImageFolder sorts its
// directories) unless SampleWriterOptions::classes fixes them.
//
// Memory: about 100 bytes plus the name per sample until Finish().
//
// Thread safety: not thread-safe (one writer thread).
//
// fork(): as PackWriter (ufspack/builder.h), a SampleWriter belongs to the
// process that created it: in a fork() child every call fails with
// InvalidArgument naming both processes, before anything is written, and
// Abandon() and the destructor leave the creator's files alone.
#ifndef UFSPACK_SAMPLE_WRITER_H_
#define UFSPACK_SAMPLE_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ufspack/builder.h"
#include "ufspack/export.h"
#include "ufspack/status.h"
#include "ufspack/types.h"

namespace ufspack {

struct SampleWriterOptions {
  // compress, zstd_level; writer.flat: a pack without classes, whose
  // samples take no label.
  PackWriterOptions writer;
  // The class names in label order, fixed up front; every sample's first
  // component must be one of them.  Empty: derived from the names.
  std::vector<std::string> classes;
  // A class with no sample (only possible with `classes`) is kept, empty,
  // instead of failing Finish(), as BuildOptions::scan.allow_empty.
  bool allow_empty = false;
  // Labels come from the caller instead of the names' first components
  // (a WebDataset shard's "cls" fields): a name needs no class directory;
  // each sample's label is the one given to Add, else what SetLabelOf's
  // function says at Finish(); the classes are `classes` if given, else
  // "0", "1", ... up to the largest label (a label no sample has is an
  // empty class); the index is ordered by label, then by name.
  bool labels_given = false;
};

class UFSPACK_EXPORT SampleWriter {
 public:
  // Creates (and locks) `out_dir` as PackWriter::Create does.
  // InvalidArgument for a class list with an empty, duplicate or
  // '/'-holding name.
  static Status Create(const std::string& out_dir,
                       const SampleWriterOptions& options,
                       std::unique_ptr<SampleWriter>* writer);

  // Abandons the pack unless Finish() succeeded.
  ~SampleWriter();
  SampleWriter(const SampleWriter&) = delete;
  SampleWriter& operator=(const SampleWriter&) = delete;

  // Adds sample `name` with `bytes`.  `label`: kNoLabel, or the label the
  // sample must end up with (checked here when the classes are fixed, else
  // by Finish()).  InvalidArgument for a bad name or label; the writer
  // stays usable after one.
  Status Add(std::string_view name, std::string_view bytes,
             uint32_t label = kNoLabel);

  // Add() of a sample of `size` bytes pulled from `read` in bounded memory
  // (stored raw): PackWriterImpl::AddStreamed's contract.  A failed read or
  // check leaves the pack without the sample and returns that error.
  using ChunkReader = std::function<Status(char* buf, size_t cap, size_t* got)>;
  Status AddStreamed(std::string_view name, uint64_t size,
                     const ChunkReader& read,
                     const std::function<Status(uint64_t done)>& check,
                     uint32_t label = kNoLabel);

  // Declares a class that may have no sample (an empty directory), when the
  // classes are derived from the names: it takes its place among them in
  // sorted order, and Finish() fails if it stays empty (unless
  // allow_empty).  With fixed classes: InvalidArgument unless one of them.
  Status AddClass(std::string_view name);

  // With labels_given: the label of each sample added without one, asked
  // at Finish() (an error there fails Finish(), naming the sample).
  void SetLabelOf(
      std::function<Status(std::string_view name, uint32_t* label)> label_of);

  // As PackWriter::SetMetadata.
  Status SetMetadata(std::string_view key, std::string_view value);

  // Sorts the index, checks what only the whole set can show (a name added
  // twice, a label that disagrees with its class's, an empty class) and
  // publishes the pack.  Sets *pack_id if non-null.  On error the writer
  // is abandoned: its temporary files go, the directory stays as it was.
  Status Finish(PackId* pack_id = nullptr);
  // Removes the temporary files; the directory keeps its previous pack.
  void Abandon();

  // The first error that broke the writer (sticky); a refused Add() does
  // not.
  const Status& status() const;
  uint64_t sample_count() const;
  uint64_t compressed_count() const;  // samples stored as zstd
  uint64_t data_bytes() const;
  const std::string& out_dir() const;
  // The classes in label order: those fixed, else (after Finish()) those
  // derived from the names.
  const std::vector<std::string>& classes() const;

 private:
  class Rep;
  explicit SampleWriter(std::unique_ptr<Rep> rep);
  std::unique_ptr<Rep> rep_;
};

}  // namespace ufspack

#endif  // UFSPACK_SAMPLE_WRITER_H_
