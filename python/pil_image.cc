// Copyright 2026 The ufspack Authors.
#include "pil_image.h"

namespace ufspack {
namespace {

// The leading fields of Pillow's struct ImagingMemoryInstance
// (libImaging/Imaging.h; Pillow 9.4), up to linesize.  Only read after the
// capsule's name says it is one.
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

// Whether `head` is the layout PilRgbRows writes into.
bool IsRgbRows(const PilImagingHead* head, int width, int height) {
  return head != nullptr && head->mode[0] == 'R' && head->mode[1] == 'G' &&
         head->mode[2] == 'B' && head->mode[3] == '\0' && head->bands == 3 &&
         head->xsize == width && head->ysize == height &&
         head->pixelsize == 4 && head->linesize == width * 4 &&
         head->image8 == nullptr && head->image != nullptr &&
         reinterpret_cast<void*>(head->image32) ==
             reinterpret_cast<void*>(head->image);
}

// Pillow < 11: whether ImagingCore.unsafe_ptrs reports the same tables.
bool SameUnsafePtrs(const py::object& core, const PilImagingHead* head) {
  const py::dict ptrs(core.attr("unsafe_ptrs"));
  return ptrs["image"].cast<uintptr_t>() ==
             reinterpret_cast<uintptr_t>(head->image) &&
         ptrs["image32"].cast<uintptr_t>() ==
             reinterpret_cast<uintptr_t>(head->image32) &&
         ptrs["image8"].cast<uintptr_t>() == 0;
}

}  // namespace

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
    if (!IsRgbRows(head, width, height)) return false;
    if (!has_getim && !SameUnsafePtrs(core, head)) return false;
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

}  // namespace ufspack
