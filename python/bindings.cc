// Copyright 2026 The ufspack Authors.
//
// ufspack._core: a thin pybind11 layer over the C++ reader, packer and
// decoder.  All dataset behaviour lives in python/ufspack/*.py.
//
// Conventions:
//   * arguments are converted while holding the GIL; every pread, decode and
//     build runs inside a gil_scoped_release touching no Python object;
//   * paths and record names cross as bytes (os.fsencode / os.fsdecode are
//     the Python side's business), so non-UTF-8 names survive;
//   * decoded images become numpy arrays that own the decoder's buffer (no
//     copy); record bytes are read straight into a new bytes object;
//   * Status codes map to Python exceptions: NotFound -> FileNotFoundError,
//     InvalidArgument/NotSupported -> ValueError, OutOfRange -> IndexError,
//     Corruption -> CorruptPackError (an OSError), IOError -> OSError,
//     Aborted -> KeyboardInterrupt.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ufspack/builder.h"
#include "ufspack/cache.h"
#include "ufspack/decode.h"
#include "ufspack/format.h"
#include "ufspack/merge.h"
#include "ufspack/parallel.h"
#include "ufspack/reader.h"
#include "ufspack/remote.h"  // registers s3://, http://, https://
#include "ufspack/transform.h"
#include "ufspack/version.h"

namespace py = pybind11;

namespace ufspack {
namespace {

PyObject* g_corrupt_pack_error = nullptr;

// Raises the Python exception for a failed Status.  REQUIRES: GIL held.
[[noreturn]] void Raise(const Status& s) {
  const std::string msg(s.message());
  PyObject* type = PyExc_RuntimeError;
  switch (s.code()) {
    case Status::Code::kNotFound:
      type = PyExc_FileNotFoundError;
      break;
    case Status::Code::kInvalidArgument:
    case Status::Code::kNotSupported:
      type = PyExc_ValueError;
      break;
    case Status::Code::kOutOfRange:
      type = PyExc_IndexError;
      break;
    case Status::Code::kCorruption:
      type = g_corrupt_pack_error;
      break;
    case Status::Code::kIOError:
      if (s.errno_value() != 0) {
        // OSError(errno, msg) returns the errno's subclass (ENOENT:
        // FileNotFoundError, EISDIR: IsADirectoryError, ...): raised as
        // that type, the exception pybind11 and Python see is the one made.
        py::object err =
            py::reinterpret_steal<py::object>(PyObject_CallFunction(
                PyExc_OSError, "is", s.errno_value(), msg.c_str()));
        if (!err) throw py::error_already_set();
        PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.ptr())),
                        err.ptr());
        throw py::error_already_set();
      }
      type = PyExc_OSError;
      break;
    case Status::Code::kAborted:
      type = PyExc_KeyboardInterrupt;
      break;
    case Status::Code::kOk:
      break;  // not an error; reported as RuntimeError below
  }
  PyErr_SetString(type, msg.c_str());
  throw py::error_already_set();
}

void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

py::array_t<uint8_t> ToArray(RgbImage* img) {
  const py::ssize_t h = img->height, w = img->width;
  uint8_t* p = img->pixels.release();
  py::capsule owner(p, [](void* q) { delete[] static_cast<uint8_t*>(q); });
  return py::array_t<uint8_t>({h, w, py::ssize_t{3}},
                              {w * 3, py::ssize_t{3}, py::ssize_t{1}}, p,
                              owner);
}

// Result of reading and decoding one record without the GIL.
struct Decoded {
  Status status;         // read error, or decode error other than NotSupported
  RgbImage image;        // set when the fast decoder handled it
  std::string fallback;  // the encoded bytes, when PIL must decode
};

// Reads record `i` into *out (one pread; a zstd record grown as its frame
// produces bytes, see Reader::Read).
Status ReadRecordBytes(const Reader& reader, uint64_t i, std::string* out) {
  Record rec;
  UFSPACK_RETURN_IF_ERROR(reader.GetRecord(i, &rec));
  if (rec.codec == Codec::kZstd) return reader.Read(rec, out);
  out->resize(rec.original_length);
  return reader.Read(rec, out->data(), out->size());
}

// The bytes of a batch's records.  From a remote pack they are fetched up
// front with one Reader::ReadBatch (every request in flight at once,
// neighbours merged); from a local one each worker reads its record with
// one pread, as before.
class Prefetched {
 public:
  Prefetched(const Reader& reader, const std::vector<uint64_t>& indices,
             int threads)
      : reader_(reader), indices_(indices) {
    if (reader.prefers_batches() && indices.size() > 1) {
      active_ = true;
      status_ =
          reader.ReadBatch(indices.data(), indices.size(), &batch_, threads);
    }
  }
  // Record indices_[k]'s bytes.
  Status Get(size_t k, std::string* out) const {
    if (!active_) return ReadRecordBytes(reader_, indices_[k], out);
    if (!status_.ok()) return status_;
    const std::string_view b = batch_.get(k);
    out->assign(b.data(), b.size());
    return Status::OK();
  }

 private:
  const Reader& reader_;
  const std::vector<uint64_t>& indices_;
  bool active_ = false;
  Status status_;
  Batch batch_;
};

// Reads record `i` (or takes it from `pre`) into a per-thread buffer and
// decodes it.
void ReadAndDecode(const Reader& reader, uint64_t i, Decoded* out,
                   const Prefetched* pre = nullptr, size_t k = 0) {
  thread_local std::string buffer;
  out->status =
      pre ? pre->Get(k, &buffer) : ReadRecordBytes(reader, i, &buffer);
  if (!out->status.ok()) return;
  // NotSupported (PIL's pixels need PIL) or a decode error: either way PIL
  // decodes the bytes, and raises what ImageFolder would raise.
  if (!DecodeRgb(buffer.data(), buffer.size(), &out->image).ok()) {
    out->fallback = buffer;
  }
}

// (array, None) from the fast path, or (None, bytes) for PIL.
py::tuple DecodedToPython(Decoded* d) {
  if (!d->status.ok()) Raise(d->status);
  if (d->image.pixels) return py::make_tuple(ToArray(&d->image), py::none());
  return py::make_tuple(py::none(), py::bytes(d->fallback));
}

// --- Fused decode + transforms (MyImageFolder(fast_transforms=...)) --------
//
// A sample goes through two C++ phases with the GIL released around each,
// and Python in between (which draws the random parameters from torch's RNG
// for the image's size, as torchvision would):
//   1. read + probe: the record's bytes and its image size (the JPEG header
//      only; other formats the fast decoder handles are decoded in full;
//      anything else is left for PIL, which Python runs, then hands the
//      pixels back with set_pixels);
//   2. transform: TransformJpeg on the bytes, or TransformRgb on the pixels,
//      straight into an output buffer Python allocated (a tensor's memory).

// One record prepared for phase 2.
struct Prepared {
  enum Kind { kJpeg, kPixels, kNeedsPil };
  Status status;  // read error
  Kind kind = kNeedsPil;
  std::string data;  // the encoded bytes
  RgbImage pixels;   // kPixels
  int width = 0, height = 0;
};

void ReadAndPrepare(const Reader& reader, uint64_t i, Prepared* out,
                    const Prefetched* pre = nullptr, size_t k = 0) {
  out->status =
      pre ? pre->Get(k, &out->data) : ReadRecordBytes(reader, i, &out->data);
  if (!out->status.ok()) return;
  if (ProbeJpeg(out->data.data(), out->data.size(), &out->width, &out->height)
          .ok()) {
    out->kind = Prepared::kJpeg;
    return;
  }
  if (SniffImageFormat(out->data.data(), out->data.size()) !=
          ImageFormat::kJpeg &&
      DecodeRgb(out->data.data(), out->data.size(), &out->pixels).ok()) {
    out->kind = Prepared::kPixels;
    out->width = out->pixels.width;
    out->height = out->pixels.height;
    return;
  }
  out->kind = Prepared::kNeedsPil;  // PIL decodes (and raises what it raises)
}

// Phase 2 for one sample.  NotSupported: PIL must decode (a JPEG libjpeg
// warned about); the caller retries with set_pixels.
Status RunPrepared(const Prepared& p, const TransformSpec& spec, void* out) {
  switch (p.kind) {
    case Prepared::kJpeg:
      return TransformJpeg(p.data.data(), p.data.size(), spec, out);
    case Prepared::kPixels:
      return TransformRgb(p.pixels.pixels.get(), p.pixels.width,
                          p.pixels.height,
                          static_cast<size_t>(p.pixels.width) * 3, spec, out);
    case Prepared::kNeedsPil:
      break;
  }
  return Status::NotSupported("needs PIL");
}

std::shared_ptr<Prepared> CheckedPrepared(std::shared_ptr<Prepared> p) {
  if (!p->status.ok()) Raise(p->status);
  return p;
}

// transform_batch(prepared, specs, outputs, threads) -> [None | "pil"]
py::list TransformBatch(const std::vector<std::shared_ptr<Prepared>>& items,
                        const std::vector<TransformSpec>& specs,
                        const py::list& outputs, int threads) {
  const size_t n = items.size();
  if (specs.size() != n || static_cast<size_t>(py::len(outputs)) != n) {
    throw py::value_error("transform_batch: " + std::to_string(n) +
                          " images, " + std::to_string(specs.size()) +
                          " specs and " + std::to_string(py::len(outputs)) +
                          " outputs");
  }
  std::vector<py::buffer_info> bufs;
  bufs.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    if (!items[k]) throw py::value_error("transform_batch: None image");
    Check(specs[k].Validate());
    py::buffer b = outputs[k].cast<py::buffer>();
    py::buffer_info info = b.request(/*writable=*/true);
    const size_t bytes = static_cast<size_t>(info.size) * info.itemsize;
    bool contiguous = true;
    py::ssize_t expect = info.itemsize;
    for (int d = info.ndim - 1; d >= 0; --d) {
      if (info.shape[d] != 1 && info.strides[d] != expect) contiguous = false;
      expect *= info.shape[d];
    }
    if (!contiguous || bytes != specs[k].output_bytes()) {
      throw py::value_error(
          "transform_batch: output " + std::to_string(k) + " has " +
          std::to_string(bytes) + (contiguous ? "" : " non-contiguous") +
          " bytes, the spec writes " + std::to_string(specs[k].output_bytes()));
    }
    bufs.push_back(std::move(info));
  }
  std::vector<Status> results(n);
  {
    py::gil_scoped_release nogil;
    ParallelFor(n, threads, [&](size_t k) {
      results[k] = RunPrepared(*items[k], specs[k], bufs[k].ptr);
    });
  }
  py::list out;
  for (size_t k = 0; k < n; ++k) {
    if (results[k].ok()) {
      out.append(py::none());
    } else if (results[k].IsNotSupported()) {
      out.append(py::str("pil"));
    } else {
      Raise(results[k]);
    }
  }
  return out;
}

class PyReader {
 public:
  // `cache`: the node-local cache to read through (None: none).
  PyReader(const py::bytes& path, bool verify_checksums,
           std::shared_ptr<Cache> cache) {
    const std::string p = path;
    ReaderOptions o;
    o.verify_checksums = verify_checksums;
    o.cache = std::move(cache);
    std::unique_ptr<Reader> r;
    Status s;
    {
      py::gil_scoped_release nogil;
      s = Reader::Open(p, o, &r);
    }
    Check(s);
    reader_ = std::move(r);
  }

  uint64_t size() const { return reader_->size(); }
  bool offline() const { return reader_->offline(); }

  Record GetRecord(uint64_t i) const {
    Record r;
    Check(reader_->GetRecord(i, &r));
    return r;
  }

  py::bytes Name(uint64_t i) const {
    Record r = GetRecord(i);
    return py::bytes(r.name.data(), r.name.size());
  }

  int64_t Label(uint64_t i) const {
    Record r = GetRecord(i);
    return r.label == kNoLabel ? -1 : static_cast<int64_t>(r.label);
  }

  py::dict RecordInfo(uint64_t i) const {
    Record r = GetRecord(i);
    py::dict d;
    d["index"] = r.index;
    d["name"] = py::bytes(r.name.data(), r.name.size());
    d["label"] = r.label == kNoLabel ? -1 : static_cast<int64_t>(r.label);
    d["size"] = r.original_length;
    d["stored_size"] = r.stored_length;
    d["offset"] = r.offset;
    d["codec"] = CodecName(r.codec);
    d["checksum"] = r.checksum;
    return d;
  }

  // Labels of all records as int64 (-1 in a flat pack), computed in C++.
  py::array_t<int64_t> Labels() const {
    const uint64_t n = reader_->size();
    py::array_t<int64_t> out(static_cast<py::ssize_t>(n));
    int64_t* p = out.mutable_data();
    Status s;
    {
      py::gil_scoped_release nogil;
      for (uint64_t i = 0; i < n && s.ok(); ++i) {
        Record r;
        s = reader_->GetRecord(i, &r);
        p[i] = r.label == kNoLabel ? -1 : static_cast<int64_t>(r.label);
      }
    }
    Check(s);
    return out;
  }

  std::vector<py::bytes> ClassNames() const {
    std::vector<py::bytes> out;
    for (uint64_t c = 0; c < reader_->class_count(); ++c) {
      ClassInfo ci;
      Check(reader_->GetClass(c, &ci));
      out.emplace_back(ci.name.data(), ci.name.size());
    }
    return out;
  }

  uint64_t Find(const py::bytes& name) const {
    const std::string n = name;
    uint64_t i = 0;
    Check(reader_->Find(n, &i));
    return i;
  }

  py::bytes Read(uint64_t i) const {
    Record r = GetRecord(i);
    if (r.codec == Codec::kZstd) return ReadGrown(r);
    py::bytes out = py::reinterpret_steal<py::bytes>(PyBytes_FromStringAndSize(
        nullptr, static_cast<py::ssize_t>(r.original_length)));
    if (!out) throw py::error_already_set();
    char* dst = PyBytes_AS_STRING(out.ptr());
    Status s;
    {
      py::gil_scoped_release nogil;
      s = reader_->Read(r, dst, r.original_length);
    }
    Check(s);
    return out;
  }

  // A zstd record: decoded into a string grown as its frame produces bytes
  // (original_length sizes nothing), then copied into the bytes object.
  py::bytes ReadGrown(const Record& r) const {
    std::string bytes;
    Status s;
    {
      py::gil_scoped_release nogil;
      s = reader_->Read(r, &bytes);
    }
    Check(s);
    return py::bytes(bytes);
  }

  // Reads the records `indices` on up to `threads` threads (one pread each,
  // several in flight: what hides a network file system's round trips),
  // with one GIL release: raw records straight into the returned bytes
  // objects, zstd records into strings grown as their frames produce bytes
  // (original_length sizes nothing), copied into bytes objects afterwards.
  py::list ReadBatch(const std::vector<uint64_t>& indices, int threads) const {
    const size_t n = indices.size();
    std::vector<Record> recs(n);
    std::vector<char*> dst(n, nullptr);
    std::vector<std::string> grown(n);
    py::list out(n);
    for (size_t k = 0; k < n; ++k) {
      recs[k] = GetRecord(indices[k]);
      if (recs[k].codec == Codec::kZstd) continue;  // filled in below
      PyObject* b = PyBytes_FromStringAndSize(
          nullptr, static_cast<py::ssize_t>(recs[k].original_length));
      if (b == nullptr) throw py::error_already_set();
      dst[k] = PyBytes_AS_STRING(b);
      PyList_SET_ITEM(out.ptr(), static_cast<py::ssize_t>(k), b);  // steals
    }
    // Raw records straight into their bytes objects with one ReadMany
    // (threads over a local pack; every request in flight over a remote
    // one); zstd records one by one.
    std::vector<Record> raw;
    std::vector<char*> raw_dst;
    std::vector<size_t> zstd;
    for (size_t k = 0; k < n; ++k) {
      if (dst[k] != nullptr) {
        raw.push_back(recs[k]);
        raw_dst.push_back(dst[k]);
      } else {
        zstd.push_back(k);
      }
    }
    Status raw_status;
    std::vector<Status> status(zstd.size());
    {
      py::gil_scoped_release nogil;
      raw_status =
          reader_->ReadMany(raw.data(), raw_dst.data(), raw.size(), threads);
      if (raw_status.ok()) {
        std::atomic<bool> failed{false};
        ParallelFor(zstd.size(), threads, [&](size_t j) {
          if (failed.load(std::memory_order_relaxed)) return;
          status[j] = reader_->Read(recs[zstd[j]], &grown[zstd[j]]);
          if (!status[j].ok()) failed = true;
        });
      }
    }
    Check(raw_status);
    for (const Status& s : status) Check(s);  // the first failure, in order
    for (size_t k = 0; k < n; ++k) {
      if (dst[k] != nullptr) continue;
      PyObject* b = PyBytes_FromStringAndSize(
          grown[k].data(), static_cast<py::ssize_t>(grown[k].size()));
      if (b == nullptr) throw py::error_already_set();
      PyList_SET_ITEM(out.ptr(), static_cast<py::ssize_t>(k), b);  // steals
      std::string().swap(grown[k]);
    }
    return out;
  }

  // Reads record i into a writable buffer; returns the byte count.
  size_t ReadInto(uint64_t i, py::buffer buffer) const {
    py::buffer_info b = buffer.request(true);
    if (b.ndim != 1 || b.itemsize != 1 || b.strides[0] != 1) {
      Raise(
          Status::InvalidArgument("read_into needs a contiguous byte buffer"));
    }
    Record r = GetRecord(i);
    Status s;
    {
      py::gil_scoped_release nogil;
      s = reader_->Read(r, static_cast<char*>(b.ptr),
                        static_cast<size_t>(b.size));
    }
    Check(s);
    return r.original_length;
  }

  py::tuple ReadDecode(uint64_t i) const {
    Decoded d;
    {
      py::gil_scoped_release nogil;
      ReadAndDecode(*reader_, i, &d);
    }
    return DecodedToPython(&d);
  }

  // Reads and decodes many records on up to `threads` threads, releasing
  // the GIL once for the whole batch.
  py::list ReadDecodeBatch(const std::vector<uint64_t>& indices,
                           int threads) const {
    std::vector<Decoded> results(indices.size());
    {
      py::gil_scoped_release nogil;
      const Prefetched pre(*reader_, indices, threads);
      ParallelFor(indices.size(), threads, [&](size_t k) {
        ReadAndDecode(*reader_, indices[k], &results[k], &pre, k);
      });
    }
    py::list out;
    for (Decoded& d : results) out.append(DecodedToPython(&d));
    return out;
  }

  std::shared_ptr<Prepared> ReadPrepare(uint64_t i) const {
    auto p = std::make_shared<Prepared>();
    {
      py::gil_scoped_release nogil;
      ReadAndPrepare(*reader_, i, p.get());
    }
    return CheckedPrepared(std::move(p));
  }

  std::vector<std::shared_ptr<Prepared>> ReadPrepareBatch(
      const std::vector<uint64_t>& indices, int threads) const {
    std::vector<std::shared_ptr<Prepared>> out(indices.size());
    for (auto& p : out) p = std::make_shared<Prepared>();
    {
      py::gil_scoped_release nogil;
      const Prefetched pre(*reader_, indices, threads);
      ParallelFor(indices.size(), threads, [&](size_t k) {
        ReadAndPrepare(*reader_, indices[k], out[k].get(), &pre, k);
      });
    }
    for (auto& p : out) CheckedPrepared(p);
    return out;
  }

  py::dict Info() const {
    const PackInfo& i = reader_->info();
    py::dict d;
    d["index_path"] = py::bytes(i.index_path);
    d["data_path"] = py::bytes(i.data_path);
    d["version"] = i.version;
    d["pack_id"] = i.pack_id.ToHex();
    d["records"] = i.record_count;
    d["classes"] = i.class_count;
    d["data_size"] = i.data_size;
    d["index_size"] = i.index_size;
    d["flat"] = i.flat;
    d["parts"] = i.part_count;
    return d;
  }

  py::object Metadata(const py::bytes& key) const {
    const std::string k = key;
    std::string_view v;
    Status s = reader_->GetMetadata(k, &v);
    if (s.IsNotFound()) return py::none();
    Check(s);
    return py::bytes(v.data(), v.size());
  }

  void CheckIndex() const {
    Status s;
    {
      py::gil_scoped_release nogil;
      s = reader_->CheckIndex();
    }
    Check(s);
  }

  const Reader& reader() const { return *reader_; }

 private:
  std::shared_ptr<const Reader> reader_;
};

// ---------------------------------------------------------------------------
// Decoding straight into PIL images: read_decode_pil, read_decode_pil_batch
// ---------------------------------------------------------------------------
//
// PIL holds an "RGB" image as rows of 4 bytes per pixel (R, G, B, X = 255).
// Decoding into a new image's rows (RgbxDecoder) saves the HxWx3 array and
// Image.fromarray's copy of it, which unpacks RGB to RGBX.  Three steps per
// batch, the GIL released for the first and the last:
//   1. read each record and RgbxDecoder::Prepare it (the size);
//   2. with the GIL: new_image(width, height) makes each PIL image, and
//      PilRgbRows finds its rows;
//   3. RgbxDecoder::DecodeInto the rows.
// The images are referenced from PilDecode::image until the results are
// built, so none is freed while step 3 writes into it.

// The leading fields of Pillow's struct ImagingMemoryInstance
// (libImaging/Imaging.h; Pillow 9.4), up to linesize.  Only read after the
// capsule's name says it is one, and trusted only as far as PilRgbRows
// checks it.
struct PilImagingHead {
  char mode[7];  // IMAGING_MODE_LENGTH
  int type;
  int depth;
  int bands;
  int xsize;
  int ysize;
  void* palette;
  uint8_t** image8;
  int32_t** image32;
  char** image;  // the row pointers
  char* block;
  void* blocks;
  int pixelsize;
  int linesize;
};

// The rows of `image`, which new_image(width, height) returned, into *rows.
// Pillow's memory layout is not an API, so the rows are used only if the
// image is exactly what this code writes: mode "RGB" with 3 bands, the
// size asked for, 4 bytes a pixel, rows of width * 4 bytes, the 32-bit row
// table and no 8-bit one, and (Pillow < 11, where ImagingCore.unsafe_ptrs
// is not deprecated) the same row table as unsafe_ptrs reports.  Anything
// else, a missing attribute included, returns false: the caller then takes
// the array path (DecodeRgb and Image.fromarray).  REQUIRES: GIL held.
bool PilRgbRows(const py::object& image, int width, int height,
                std::vector<uint8_t*>* rows) {
  static constexpr const char* kCapsule = "PIL Imaging";  // IMAGING_MAGIC
  try {
    const bool has_getim = py::hasattr(image, "getim");  // Pillow >= 11
    py::object core = image.attr("im");
    py::object capsule = has_getim ? image.attr("getim")() : core.attr("ptr");
    if (!PyCapsule_IsValid(capsule.ptr(), kCapsule)) return false;
    const auto* head = static_cast<const PilImagingHead*>(
        PyCapsule_GetPointer(capsule.ptr(), kCapsule));
    if (head == nullptr || head->mode[0] != 'R' || head->mode[1] != 'G' ||
        head->mode[2] != 'B' || head->mode[3] != '\0' || head->bands != 3 ||
        head->xsize != width || head->ysize != height || head->pixelsize != 4 ||
        head->linesize != width * 4 || head->image8 != nullptr ||
        head->image == nullptr ||
        reinterpret_cast<void*>(head->image32) !=
            reinterpret_cast<void*>(head->image)) {
      return false;
    }
    if (!has_getim) {
      const py::dict ptrs(core.attr("unsafe_ptrs"));
      if (ptrs["image"].cast<uintptr_t>() !=
              reinterpret_cast<uintptr_t>(head->image) ||
          ptrs["image32"].cast<uintptr_t>() !=
              reinterpret_cast<uintptr_t>(head->image32) ||
          ptrs["image8"].cast<uintptr_t>() != 0) {
        return false;
      }
    }
    rows->resize(static_cast<size_t>(height));
    for (int y = 0; y < height; ++y) {
      (*rows)[y] = reinterpret_cast<uint8_t*>(head->image[y]);
      if ((*rows)[y] == nullptr) return false;
    }
    return true;
  } catch (const py::error_already_set&) {  // fetched, so cleared
    return false;
  } catch (const py::cast_error&) {
    return false;
  }
}

// One record through the three steps.
struct PilDecode {
  Status status;      // reading the record
  std::string bytes;  // the record
  RgbxDecoder decoder;
  Status prepared;             // Prepare's
  py::object image;            // step 2's image; touched only with the GIL
  std::vector<uint8_t*> rows;  // its rows, or empty: use `array`
  Status decoded;              // DecodeInto's, or DecodeRgb's into `array`
  RgbImage array;
};

// Reads and decodes `indices` into PIL images made by new_image(width,
// height): a list of (image, None); (array, None) where the image's layout
// was not the expected one; (None, bytes) where PIL must decode (as
// read_decode_batch).  Raises the first read error, in order.
py::list ReadDecodePilBatch(const PyReader& self,
                            const std::vector<uint64_t>& indices,
                            const py::function& new_image, int threads) {
  const Reader& reader = self.reader();
  const size_t n = indices.size();
  std::vector<PilDecode> items(n);
  {
    py::gil_scoped_release nogil;
    const Prefetched pre(reader, indices, threads);
    ParallelFor(n, threads, [&](size_t k) {
      PilDecode& d = items[k];
      d.status = pre.Get(k, &d.bytes);
      if (d.status.ok()) {
        d.prepared = d.decoder.Prepare(d.bytes.data(), d.bytes.size());
      }
    });
  }
  for (PilDecode& d : items) {
    if (!d.status.ok() || !d.prepared.ok()) continue;
    const int w = d.decoder.width(), h = d.decoder.height();
    d.image = new_image(w, h);
    if (!PilRgbRows(d.image, w, h, &d.rows)) {
      d.image = py::object();
      d.rows.clear();
    }
  }
  {
    py::gil_scoped_release nogil;
    ParallelFor(n, threads, [&](size_t k) {
      PilDecode& d = items[k];
      if (!d.status.ok() || !d.prepared.ok()) return;
      d.decoded = d.rows.empty()
                      ? DecodeRgb(d.bytes.data(), d.bytes.size(), &d.array)
                      : d.decoder.DecodeInto(d.rows.data());
    });
  }
  py::list out(n);
  for (size_t k = 0; k < n; ++k) {
    PilDecode& d = items[k];
    if (!d.status.ok()) Raise(d.status);
    py::tuple t;
    if (d.prepared.ok() && d.decoded.ok()) {
      t = d.rows.empty() ? py::make_tuple(ToArray(&d.array), py::none())
                         : py::make_tuple(d.image, py::none());
    } else {  // NotSupported, or an error PIL reports its own way
      t = py::make_tuple(py::none(), py::bytes(d.bytes));
    }
    PyList_SET_ITEM(out.ptr(), static_cast<py::ssize_t>(k), t.release().ptr());
  }
  return out;
}

py::tuple ReadDecodePil(const PyReader& self, uint64_t i,
                        const py::function& new_image) {
  py::list one = ReadDecodePilBatch(self, {i}, new_image, 1);
  return one[0].cast<py::tuple>();
}

// --- The node-local cache (ufspack/cache.h)
// -----------------------------------

py::dict TierStatsToDict(const CacheTierStats& s) {
  py::dict d;
  d["dir"] = py::bytes(s.dir);
  d["limit"] = s.limit;
  d["charged_bytes"] = s.charged_bytes;
  d["disk_bytes"] = s.disk_bytes;
  d["entries"] = s.entries;
  d["tables"] = s.tables;
  d["hits"] = s.hits;
  d["misses"] = s.misses;
  d["inserts"] = s.inserts;
  d["refused"] = s.refused;
  d["dropped"] = s.dropped;
  d["errors"] = s.errors;
  d["evicted_tables"] = s.evicted_tables;
  return d;
}

std::shared_ptr<Cache> OpenCache(const py::bytes& dir, uint64_t limit,
                                 const py::bytes& ram_dir, uint64_t ram_limit) {
  CacheOptions o;
  o.dir = dir;
  o.limit = limit;
  o.ram_dir = ram_dir;
  o.ram_limit = ram_limit;
  std::shared_ptr<Cache> cache;
  Status s;
  {
    py::gil_scoped_release nogil;
    s = Cache::Open(o, &cache);
  }
  Check(s);
  return cache;
}

py::dict Build(
    const py::bytes& src, const py::bytes& dst, int threads,
    const std::string& compress, int level,
    const std::optional<std::vector<std::string>>& extensions, bool all_files,
    bool flat, bool allow_empty, bool skip_unreadable,
    const std::function<void(uint64_t, uint64_t, uint64_t, uint64_t)>& progress,
    uint32_t part, uint32_t parts) {
  BuildOptions o;
  o.threads = threads;
  o.part = part;
  o.parts = parts;
  if (compress == "zstd") {
    o.writer.compress = true;
    o.writer.zstd_level = level;
  } else if (compress != "none") {
    Raise(Status::InvalidArgument("compress must be 'none' or 'zstd', not '" +
                                  compress + "'"));
  }
  if (extensions) o.scan.extensions = *extensions;
  o.scan.all_files = all_files;
  o.scan.flat = flat;
  o.scan.allow_empty = allow_empty;
  o.skip_unreadable = skip_unreadable;
  std::atomic<bool> cancel{false};
  o.cancel = &cancel;
  // A Python error raised while building (Ctrl-C, or from the progress
  // callback) cancels the build and is re-raised afterwards.
  std::shared_ptr<py::error_already_set> saved_error;
  o.progress = [&](const BuildProgress& p) {
    py::gil_scoped_acquire gil;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      // (Not while a part build sizes the whole tree: files_total would
      // count the tree's files, then the part's.)
      if (progress && !p.splitting)
        progress(p.files_done, p.files_total, p.bytes_in, p.bytes_out);
    } catch (py::error_already_set& e) {
      saved_error = std::make_shared<py::error_already_set>(std::move(e));
      cancel = true;
    }
  };
  BuildSummary summary;
  Status s;
  const std::string src_s = src, dst_s = dst;
  {
    py::gil_scoped_release nogil;
    s = BuildPack(src_s, dst_s, o, &summary);
  }
  if (saved_error) {
    saved_error->restore();
    throw py::error_already_set();
  }
  Check(s);
  py::dict d;
  d["files"] = summary.files;
  d["classes"] = summary.classes;
  d["skipped"] = summary.skipped;
  d["compressed"] = summary.compressed;
  d["bytes_in"] = summary.bytes_in;
  d["bytes_out"] = summary.bytes_out;
  d["index_bytes"] = summary.index_bytes;
  d["seconds"] = summary.seconds;
  d["pack_id"] = summary.pack_id.ToHex();
  if (parts > 1) {
    d["part"] = part;
    d["parts"] = parts;
    d["part_first"] = summary.part_first;
    d["part_samples"] = summary.part_samples;
    d["split_samples"] = summary.split_samples;
  }
  py::list warnings;
  for (const auto& w : summary.warnings) warnings.append(py::bytes(w));
  d["warnings"] = warnings;
  return d;
}

py::dict Merge(const std::vector<py::bytes>& parts_in, const py::bytes& out) {
  std::vector<std::string> parts(parts_in.begin(), parts_in.end());
  const std::string out_s = out;
  MergeSummary summary;
  Status s;
  {
    py::gil_scoped_release nogil;
    s = MergePacks(parts, out_s, &summary);
  }
  Check(s);
  py::dict d;
  d["manifest"] = py::bytes(summary.manifest_path);
  d["pack_id"] = summary.pack_id.ToHex();
  d["parts"] = summary.parts;
  d["split"] = summary.split;
  d["records"] = summary.records;
  d["classes"] = summary.classes;
  d["data_bytes"] = summary.data_bytes;
  d["manifest_bytes"] = summary.manifest_bytes;
  d["seconds"] = summary.seconds;
  return d;
}

py::dict Append(const py::bytes& pack, const py::bytes& dir, bool relabel,
                int threads, bool skip_unreadable,
                std::optional<std::vector<py::bytes>> files) {
  AppendOptions o;
  o.relabel = relabel;
  if (files) {
    o.files.emplace();
    o.files->reserve(files->size());
    for (const py::bytes& f : *files) o.files->emplace_back(f);
  }
  o.build.threads = threads;
  o.build.skip_unreadable = skip_unreadable;
  std::atomic<bool> cancel{false};
  o.build.cancel = &cancel;
  bool interrupted = false;
  o.build.progress = [&](const BuildProgress&) {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {
      interrupted = true;
      cancel = true;
    }
  };
  const std::string pack_s = pack, dir_s = dir;
  AppendSummary summary;
  Status s;
  {
    py::gil_scoped_release nogil;
    s = AppendPack(pack_s, dir_s, o, &summary);
  }
  if (interrupted) throw py::error_already_set();
  Check(s);
  py::dict d;
  d["manifest"] = py::bytes(summary.manifest_path);
  d["part"] = py::bytes(summary.part_dir);
  d["pack_id"] = summary.pack_id.ToHex();
  d["appended"] = summary.appended;
  d["records"] = summary.records;
  d["new_classes"] = summary.new_classes;
  d["relabeled_classes"] = summary.relabeled_classes;
  d["kept"] = summary.kept;
  d["already_packed"] = summary.already_packed;
  d["parts"] = summary.parts;
  d["segments"] = summary.segments;
  d["seconds"] = summary.seconds;
  py::list warnings;
  for (const auto& w : summary.warnings) warnings.append(py::bytes(w));
  d["warnings"] = warnings;
  return d;
}

// UploadPack with Ctrl-C (or an error from `progress`) cancelling it,
// re-raised afterwards.
void UploadPackPy(const py::bytes& local, const std::string& url,
                  const std::function<void(uint64_t, uint64_t)>& progress) {
  UploadOptions o;
  std::atomic<bool> cancel{false};
  o.cancel = &cancel;
  std::shared_ptr<py::error_already_set> saved_error;
  o.progress = [&](uint64_t done, uint64_t total) {
    py::gil_scoped_acquire gil;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (progress) progress(done, total);
    } catch (py::error_already_set& e) {
      if (!saved_error) {
        saved_error = std::make_shared<py::error_already_set>(std::move(e));
      }
      cancel = true;
    }
  };
  Status s;
  const std::string local_s = local;
  {
    py::gil_scoped_release nogil;
    s = UploadPack(local_s, url, o);
  }
  if (saved_error && !s.ok()) {
    saved_error->restore();
    throw py::error_already_set();
  }
  Check(s);
}

}  // namespace
}  // namespace ufspack

PYBIND11_MODULE(_core, m) {
  using namespace ufspack;
  m.doc() =
      "ufspack C++ core: pack reader, builder and image decoder (private; use "
      "ufspack)";
  static py::exception<std::runtime_error> corrupt(m, "CorruptPackError",
                                                   PyExc_OSError);
  g_corrupt_pack_error = corrupt.ptr();
  m.attr("__version__") = UFSPACK_VERSION_STRING;
  m.attr("NO_LABEL") = -1;

  py::class_<SampleTable, std::shared_ptr<SampleTable>>(m, "SampleTable")
      .def_property_readonly("slot_count", &SampleTable::slot_count)
      .def(
          "get",
          [](SampleTable& t, uint64_t slot) -> py::object {
            std::string bytes;
            bool hit;
            {
              py::gil_scoped_release nogil;
              hit = t.Get(slot, &bytes);
            }
            if (!hit) return py::none();
            return py::bytes(bytes);
          },
          py::arg("slot"))
      .def(
          "put",
          [](SampleTable& t, uint64_t slot, const py::buffer& data) {
            py::buffer_info b = data.request();
            const size_t bytes = static_cast<size_t>(b.size) * b.itemsize;
            bool contiguous = true;
            py::ssize_t expect = b.itemsize;
            for (int d = b.ndim - 1; d >= 0; --d) {
              if (b.shape[d] != 1 && b.strides[d] != expect) contiguous = false;
              expect *= b.shape[d];
            }
            if (!contiguous) {
              throw py::value_error("put: the data must be contiguous");
            }
            py::gil_scoped_release nogil;
            return t.Put(slot, static_cast<const char*>(b.ptr), bytes);
          },
          py::arg("slot"), py::arg("data"));

  py::class_<Cache, std::shared_ptr<Cache>>(m, "Cache")
      .def(py::init(&OpenCache), py::arg("dir"), py::arg("limit") = 0,
           py::arg("ram_dir") = py::bytes(""), py::arg("ram_limit") = 0)
      .def("flush_stats", &Cache::FlushStats)
      .def("stats",
           [](const Cache& c) {
             std::vector<CacheTierStats> tiers;
             {
               py::gil_scoped_release nogil;
               tiers = c.Stats();
             }
             py::list out;
             for (const CacheTierStats& t : tiers) {
               out.append(TierStatsToDict(t));
             }
             return out;
           })
      .def(
          "open_sample_table",
          [](Cache& c, const py::bytes& name, uint64_t slot_count) {
            const std::string n = name;
            std::unique_ptr<SampleTable> t;
            Status s;
            {
              py::gil_scoped_release nogil;
              s = c.OpenSampleTable(n, slot_count, &t);
            }
            Check(s);
            return std::shared_ptr<SampleTable>(std::move(t));
          },
          py::arg("name"), py::arg("slot_count"),
          py::keep_alive<0, 1>())  // its tables point into the Cache
      .def_static(
          "stat",
          [](const py::bytes& dir) {
            const std::string d = dir;
            CacheTierStats st;
            Status s;
            {
              py::gil_scoped_release nogil;
              s = Cache::Stat(d, &st);
            }
            Check(s);
            return TierStatsToDict(st);
          },
          py::arg("dir"))
      .def_static(
          "clear",
          [](const py::bytes& dir) {
            const std::string d = dir;
            uint64_t kept = 0;
            Status s;
            {
              py::gil_scoped_release nogil;
              s = Cache::Clear(d, &kept);
            }
            Check(s);
            return kept;
          },
          py::arg("dir"));

  py::class_<PyReader>(m, "Reader")
      .def(py::init<const py::bytes&, bool, std::shared_ptr<Cache>>(),
           py::arg("path"), py::arg("verify_checksums") = true,
           py::arg("cache") = py::none())
      .def_property_readonly("offline", &PyReader::offline)
      .def("__len__", &PyReader::size)
      .def("name", &PyReader::Name, py::arg("i"))
      .def("label", &PyReader::Label, py::arg("i"))
      .def("record", &PyReader::RecordInfo, py::arg("i"))
      .def("labels", &PyReader::Labels)
      .def("class_names", &PyReader::ClassNames)
      .def("find", &PyReader::Find, py::arg("name"))
      .def("read", &PyReader::Read, py::arg("i"))
      .def("read_into", &PyReader::ReadInto, py::arg("i"), py::arg("buffer"))
      .def("read_batch", &PyReader::ReadBatch, py::arg("indices"),
           py::arg("threads") = 4)
      .def("read_decode", &PyReader::ReadDecode, py::arg("i"))
      .def("read_decode_batch", &PyReader::ReadDecodeBatch, py::arg("indices"),
           py::arg("threads") = 4)
      .def("read_prepare", &PyReader::ReadPrepare, py::arg("i"))
      .def("read_prepare_batch", &PyReader::ReadPrepareBatch,
           py::arg("indices"), py::arg("threads") = 4)
      .def("read_decode_pil", &ReadDecodePil, py::arg("i"),
           py::arg("new_image"))
      .def("read_decode_pil_batch", &ReadDecodePilBatch, py::arg("indices"),
           py::arg("new_image"), py::arg("threads") = 4)
      .def("info", &PyReader::Info)
      .def("metadata", &PyReader::Metadata, py::arg("key"))
      .def("check_index", &PyReader::CheckIndex);

  py::class_<Prepared, std::shared_ptr<Prepared>>(m, "Prepared")
      .def(py::init<>())  // empty: set_pixels gives it an image
      .def_property_readonly("width", [](const Prepared& p) { return p.width; })
      .def_property_readonly("height",
                             [](const Prepared& p) { return p.height; })
      .def_property_readonly(
          "kind",
          [](const Prepared& p) {
            return p.kind == Prepared::kJpeg
                       ? "jpeg"
                       : (p.kind == Prepared::kPixels ? "pixels" : "pil");
          })
      .def_property_readonly(
          "data", [](const Prepared& p) { return py::bytes(p.data); })
      .def(
          "set_pixels",
          [](Prepared& p,
             py::array_t<uint8_t, py::array::c_style | py::array::forcecast>
                 a) {
            if (a.ndim() != 3 || a.shape(2) != 3 || a.shape(0) < 1 ||
                a.shape(1) < 1) {
              throw py::value_error("set_pixels: expected HxWx3 uint8 RGB");
            }
            RgbImage img;
            img.width = static_cast<int>(a.shape(1));
            img.height = static_cast<int>(a.shape(0));
            img.pixels.reset(new uint8_t[img.size()]);
            std::memcpy(img.pixels.get(), a.data(), img.size());
            p.pixels = std::move(img);
            p.kind = Prepared::kPixels;
            p.width = p.pixels.width;
            p.height = p.pixels.height;
          },
          py::arg("pixels"));

  py::class_<TransformSpec>(m, "TransformSpec")
      .def(py::init<>())
      .def_readwrite("in_width", &TransformSpec::in_width)
      .def_readwrite("in_height", &TransformSpec::in_height)
      .def("set_resize_before",
           [](TransformSpec& s, int w, int h, int filter) {
             s.has_resize_before = true;
             s.resize_before = {w, h, static_cast<Resample>(filter)};
           })
      .def("set_crop",
           [](TransformSpec& s, std::array<int, 4> pad, std::array<int, 3> fill,
              std::array<int, 4> box) {
             s.has_crop = true;
             for (int i = 0; i < 4; ++i) s.pad[i] = pad[i];
             for (int i = 0; i < 3; ++i) {
               if (fill[i] < 0 || fill[i] > 255) {
                 throw py::value_error("set_crop: fill outside 0..255");
               }
               s.fill[i] = static_cast<uint8_t>(fill[i]);
             }
             for (int i = 0; i < 4; ++i) s.box[i] = box[i];
           })
      .def("set_resize_after",
           [](TransformSpec& s, int w, int h, int filter) {
             s.has_resize_after = true;
             s.resize_after = {w, h, static_cast<Resample>(filter)};
           })
      .def_readwrite("hflip", &TransformSpec::hflip)
      .def_readwrite("dct_scaling", &TransformSpec::dct_scaling)
      .def(
          "set_output",
          [](TransformSpec& s, const std::string& kind,
             std::array<float, 3> mean, std::array<float, 3> std) {
            if (kind == "rgb") {
              s.output = TransformOutput::kRgb;
            } else if (kind == "chw_u8") {
              s.output = TransformOutput::kChwU8;
            } else if (kind == "chw_f32") {
              s.output = TransformOutput::kChwF32;
            } else {
              throw py::value_error("set_output: unknown kind " + kind);
            }
            for (int i = 0; i < 3; ++i) {
              s.mean[i] = mean[i];
              s.std[i] = std[i];
            }
          },
          py::arg("kind"), py::arg("mean") = std::array<float, 3>{0, 0, 0},
          py::arg("std") = std::array<float, 3>{1, 1, 1})
      .def_property_readonly("out_width", &TransformSpec::out_width)
      .def_property_readonly("out_height", &TransformSpec::out_height)
      .def("validate", [](const TransformSpec& s) { Check(s.Validate()); });

  m.def("transform_batch", &TransformBatch, py::arg("images"), py::arg("specs"),
        py::arg("outputs"), py::arg("threads") = 1,
        "Runs each spec on its prepared image into its output buffer, on "
        "`threads` threads with the GIL released; per image None (done) or "
        "'pil' (decode with PIL, set_pixels, and run again).");
  m.def(
      "decode_rgb",
      [](const py::bytes& data) -> py::object {
        const std::string bytes = data;
        RgbImage img;
        Status s;
        {
          py::gil_scoped_release nogil;
          s = DecodeRgb(bytes.data(), bytes.size(), &img);
        }
        if (!s.ok()) return py::none();
        return ToArray(&img);
      },
      py::arg("data"),
      "Decodes to an HxWx3 uint8 RGB array with PIL's pixels, or None when PIL "
      "must decode it.");
  m.def(
      "sniff_format",
      [](const py::bytes& data) {
        const std::string bytes = data;
        return std::string(
            ImageFormatName(SniffImageFormat(bytes.data(), bytes.size())));
      },
      py::arg("data"));
  m.def("upload_pack", &UploadPackPy, py::arg("local"), py::arg("url"),
        py::arg("progress") = nullptr,
        "Uploads the local pack directory `local` to the s3:// pack URL "
        "`url`: data.ufs first, index.ufs last (see docs/remote.md).");
  m.def(
      "remote_stats",
      [] {
        const ufspack::RemoteStats st = ufspack::GetRemoteStats();
        py::dict d;
        d["requests"] = st.requests;
        d["bytes"] = st.bytes;
        d["retries"] = st.retries;
        d["coalesced"] = st.coalesced;
        return d;
      },
      "Process-wide counters of remote reads: requests sent (retries "
      "included), response body bytes, retries, and ranges served by a "
      "merged request.");
  m.def("build", &Build, py::arg("src"), py::arg("dst"),
        py::arg("threads") = 32, py::arg("compress") = "none",
        py::arg("level") = 3, py::arg("extensions") = py::none(),
        py::arg("all_files") = false, py::arg("flat") = false,
        py::arg("allow_empty") = false, py::arg("skip_unreadable") = false,
        py::arg("progress") = nullptr, py::arg("part") = 0,
        py::arg("parts") = 1);
  m.def("append", &Append, py::arg("pack"), py::arg("dir"),
        py::arg("relabel") = false, py::arg("threads") = 32,
        py::arg("skip_unreadable") = false, py::arg("files") = py::none(),
        "AppendPack: add the files of `dir` that `pack` lacks (or the listed "
        "`files`, relative to `dir`).");
  m.def("merge", &Merge, py::arg("parts"), py::arg("out"),
        "MergePacks: one pack over `parts` (manifest.ufs in `out`).");
}
