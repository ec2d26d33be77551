// Links ufspack::decode from an installed tree: a JPEG header that is not one
// is refused by ProbeJpeg, and a validated spec says its output size.
#include <cstdio>

#include "ufspack/decode.h"
#include "ufspack/transform.h"

int main() {
  const char junk[] = "\xff\xd8\xff not a JPEG";
  int w = 0, h = 0;
  if (ufspack::ProbeJpeg(junk, sizeof(junk) - 1, &w, &h).ok()) return 1;
  ufspack::TransformSpec spec;
  spec.in_width = 8;
  spec.in_height = 6;
  if (!spec.Validate().ok() || spec.output_bytes() != 8 * 6 * 3) return 2;
  std::printf("decode from an installed ufspack\n");
  return 0;
}
