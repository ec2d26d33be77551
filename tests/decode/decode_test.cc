// Copyright 2026 The ufspack Authors.
//
// Tests for ufspack::DecodeRgb.  The parity tests generate every variant of
// each format with PIL (and hand-written PNG/BMP/PNM encoders for what PIL
// does not write) into a scratch directory, together with PIL's own
// Image.open(...).convert("RGB") output, and require the fast path to give
// exactly those bytes, or NotSupported where the variant is marked as left
// to PIL.  They need Debian's /usr/bin/python3 with PIL and skip without it.
#include "ufspack/decode.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "decoders.h"
#include "testutil.h"

namespace ufspack {
namespace {

using test::TempDir;

using test::kPython;

// Writes <name>.img (the encoded file) and, where PIL opens it, <name>.rgb
// (PIL's convert("RGB") bytes) for each case, and manifest.txt with lines
//   <name> <fast|fallback|any> <width> <height> <PIL mode>
// (width -1: PIL refuses the file).  fast: DecodeRgb must decode it and
// match; fallback: it must return NotSupported; any: either.
constexpr const char* kGenerateScript = R"PY(
import io, os, random, struct, sys, zlib
from PIL import Image

out = sys.argv[1]
manifest = []


def rnd(n, seed):
    return random.Random(seed).randbytes(n)


def add(name, data, expect):
    with open(os.path.join(out, name + '.img'), 'wb') as f:
        f.write(data)
    try:
        im = Image.open(io.BytesIO(data))
        mode = im.mode
        rgb = im.convert('RGB')
        with open(os.path.join(out, name + '.rgb'), 'wb') as f:
            f.write(rgb.tobytes())
        manifest.append('%s %s %d %d %s' % (name, expect, rgb.width, rgb.height, mode))
    except Exception as e:
        manifest.append('%s %s -1 -1 error' % (name, expect))


def save(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


W, H = 37, 23


def noise_rgb(w, h, seed):
    # Smooth gradient plus noise: JPEG-friendly but not trivial.
    r = rnd(w * h * 3, seed)
    px = bytearray(w * h * 3)
    for y in range(h):
        for x in range(w):
            i = (y * w + x) * 3
            px[i] = (x * 7 + r[i] // 4) & 255
            px[i + 1] = (y * 11 + r[i + 1] // 4) & 255
            px[i + 2] = ((x + y) * 5 + r[i + 2] // 2) & 255
    return Image.frombytes('RGB', (w, h), bytes(px))


def chunk(t, d):
    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)


def pack_row(vals, bits):
    if bits == 8:
        return bytes(vals)
    if bits == 16:
        return b''.join(struct.pack('>H', v) for v in vals)
    per = 8 // bits
    outb = bytearray()
    for i in range(0, len(vals), per):
        b = 0
        grp = vals[i:i + per]
        for j, v in enumerate(grp):
            b |= v << (8 - bits * (j + 1))
        outb.append(b)
    return bytes(outb)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def png(w, h, ctype, bits, samples, plte=None, trns=None, interlace=False, extra=b''):
    # samples: list of rows, each a list of per-pixel sample values (flattened channels)
    ch = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[ctype]
    raw = bytearray()
    if not interlace:
        for y in range(h):
            raw += b'\0' + pack_row(samples[y], bits)
    else:
        for (x0, y0, dx, dy) in ADAM7:
            xs = list(range(x0, w, dx))
            if not xs:
                continue
            for y in range(y0, h, dy):
                vals = []
                for x in xs:
                    vals += samples[y][x * ch:(x + 1) * ch]
                raw += b'\0' + pack_row(vals, bits)
    d = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, bits, ctype, 0, 0, 1 if interlace else 0))
    d += extra
    if plte is not None:
        d += chunk(b'PLTE', plte)
    if trns is not None:
        d += chunk(b'tRNS', trns)
    d += chunk(b'IDAT', zlib.compress(bytes(raw))) + chunk(b'IEND', b'')
    return d


def rand_samples(w, h, ch, maxv, seed):
    r = random.Random(seed)
    return [[r.randrange(maxv + 1) for _ in range(w * ch)] for _ in range(h)]


# ---- PNG ----
img = noise_rgb(W, H, 1)
add('png_rgb', save(img, 'PNG'), 'fast')
add('png_rgba', save(Image.frombytes('RGBA', (W, H), rnd(W * H * 4, 2)), 'PNG'), 'fast')
add('png_l', save(Image.frombytes('L', (W, H), rnd(W * H, 3)), 'PNG'), 'fast')
add('png_la', save(Image.frombytes('LA', (W, H), rnd(W * H * 2, 4)), 'PNG'), 'fast')
pal = Image.frombytes('P', (W, H), bytes(b % 200 for b in rnd(W * H, 5)))
pal.putpalette(rnd(600, 6))
add('png_p', save(pal, 'PNG'), 'fast')
add('png_p_trns1', save(pal, 'PNG', transparency=5), 'fast')
add('png_p_trns_many', png(W, H, 3, 8, rand_samples(W, H, 1, 199, 7), plte=rnd(600, 6), trns=rnd(150, 8)), 'fast')
add('png_1bit_mode1', save(Image.frombytes('L', (W, H), rnd(W * H, 9)).convert('1'), 'PNG'), 'fast')
for bits in (1, 2, 4):
    add('png_gray%d' % bits, png(W, H, 0, bits, rand_samples(W, H, 1, (1 << bits) - 1, 10 + bits)), 'fast')
    add('png_pal%d' % bits, png(W, H, 3, bits, rand_samples(W, H, 1, (1 << bits) - 1, 20 + bits), plte=rnd(3 << bits, 30 + bits)), 'fast')
add('png_gray8_trns', png(W, H, 0, 8, rand_samples(W, H, 1, 255, 40), trns=struct.pack('>H', 7)), 'fast')
add('png_rgb_trns', save(img, 'PNG', transparency=(1, 2, 3)), 'fast')
for ct, ch in ((0, 1), (2, 3), (3, 1), (4, 2), (6, 4)):
    for bits in ((1, 2, 4, 8) if ct in (0, 3) else (8,)):
        add('png_interlaced_c%d_b%d' % (ct, bits),
            png(W, H, ct, bits, rand_samples(W, H, ch, (1 << bits) - 1, 50 + ct * 10 + bits),
                plte=rnd(768, 60) if ct == 3 else None, interlace=True), 'fast')
add('png_tiny_1x1', png(1, 1, 2, 8, [[1, 2, 3]]), 'fast')
add('png_wide', png(301, 2, 2, 8, rand_samples(301, 2, 3, 255, 70)), 'fast')
add('png_gamma_srgb', png(W, H, 2, 8, rand_samples(W, H, 3, 255, 71),
                          extra=chunk(b'gAMA', struct.pack('>I', 45455)) + chunk(b'sRGB', b'\0')), 'fast')
# 16-bit: NotSupported (PIL keeps the high byte or makes mode I).
for ct, ch in ((0, 1), (2, 3), (4, 2), (6, 4)):
    add('png16_c%d' % ct, png(W, H, ct, 16, rand_samples(W, H, ch, 65535, 80 + ct)), 'fallback')
# Palette shorter than the indices used (invalid, but seen in the wild).
add('png_pal_short', png(W, H, 3, 8, rand_samples(W, H, 1, 255, 90), plte=rnd(3 * 16, 91)), 'any')

# ---- BMP ----
add('bmp24', save(img, 'BMP'), 'fast')
add('bmp24_w1', save(noise_rgb(1, 5, 92), 'BMP'), 'fast')
add('bmp32_rgba', save(Image.frombytes('RGBA', (W, H), rnd(W * H * 4, 93)), 'BMP'), 'fast')
add('bmp_p8', save(pal, 'BMP'), 'fast')
add('bmp_l8', save(Image.frombytes('L', (W, H), rnd(W * H, 94)), 'BMP'), 'fast')
add('bmp_1bit', save(Image.frombytes('L', (W, H), rnd(W * H, 95)).convert('1'), 'BMP'), 'fast')


def bmp(w, h, bpp, rows, palette=b'', compression=0, topdown=False, hdr=40, masks=None, clrused=0, data=None):
    # rows: top-to-bottom list of already-packed row bytes (no padding), unless data given
    if data is None:
        stride = ((w * bpp + 31) // 32) * 4
        order = rows if topdown else rows[::-1]
        data = b''.join(r + b'\0' * (stride - len(r)) for r in order)
    if hdr == 12:
        ih = struct.pack('<IHHHH', 12, w, h, 1, bpp)
    else:
        ih = struct.pack('<IiiHHIIiiII', hdr, w, -h if topdown else h, 1, bpp, compression, len(data), 2835, 2835, clrused, 0)
        if hdr > 40:
            m = masks or (0, 0, 0, 0)
            ih += struct.pack('<IIII', *m) + b'\0' * (hdr - 56)
    extra = b''
    if masks is not None and hdr == 40:
        extra = struct.pack('<III', *masks[:3])
    off = 14 + len(ih) + len(extra) + len(palette)
    fh = b'BM' + struct.pack('<IHHI', off + len(data), 0, 0, off)
    return fh + ih + extra + palette + data


def pal4(colors, seed):  # BGRX palette
    r = rnd(colors * 4, seed)
    return bytes(b if i % 4 != 3 else 0 for i, b in enumerate(r))


rr = rand_samples(W, H, 1, 15, 100)
add('bmp4', bmp(W, H, 4, [pack_row(r, 4) for r in rr], palette=pal4(16, 101)), 'fast')
rr2 = rand_samples(W, H, 1, 1, 102)
add('bmp1_color', bmp(W, H, 1, [pack_row(r, 1) for r in rr2], palette=pal4(2, 103)), 'fast')
rr8 = rand_samples(W, H, 1, 255, 104)
add('bmp8_topdown', bmp(W, H, 8, [bytes(r) for r in rr8], palette=pal4(256, 105), topdown=True), 'fast')
add('bmp24_topdown', bmp(W, H, 24, [bytes(r) for r in rand_samples(W, H, 3, 255, 106)], topdown=True), 'fast')
add('bmp8_clrused', bmp(W, H, 8, [bytes(v % 20 for v in r) for r in rr8], palette=pal4(20, 107), clrused=20), 'fast')
add('bmp8_clrused_oob', bmp(W, H, 8, [bytes(r) for r in rr8], palette=pal4(20, 107), clrused=20), 'fast')
add('bmp4_clrused_oob', bmp(W, H, 4, [pack_row(r, 4) for r in rr], palette=pal4(5, 108), clrused=5), 'fast')
ramp = b''.join(bytes([i, i, i, 0]) for i in range(20))
add('bmp8_clrused_grayramp', bmp(W, H, 8, [bytes(r) for r in rr8], palette=ramp, clrused=20), 'fast')
add('bmp8_clrused2', bmp(W, H, 8, [bytes(v % 2 for v in r) for r in rr8], palette=pal4(2, 109), clrused=2), 'fallback')
add('bmp8_clrused2_bw', bmp(W, H, 8, [bytes(v % 2 for v in r) for r in rr8], palette=b'\0\0\0\0\xff\xff\xff\0',
                            clrused=2), 'fallback')
add('bmp24_os2', bmp(W, H, 24, [bytes(r) for r in rand_samples(W, H, 3, 255, 108)], hdr=12), 'any')
add('bmp_v4_24', bmp(W, H, 24, [bytes(r) for r in rand_samples(W, H, 3, 255, 109)], hdr=108), 'fast')
add('bmp_v5_24', bmp(W, H, 24, [bytes(r) for r in rand_samples(W, H, 3, 255, 110)], hdr=124), 'fast')
# 32-bit BI_RGB with arbitrary 4th byte
add('bmp32_xrgb', bmp(W, H, 32, [bytes(r) for r in rand_samples(W, H, 4, 255, 111)]), 'fast')
# 32-bit BI_BITFIELDS standard masks, with alpha mask in a V4 header
add('bmp32_bitfields_v4', bmp(W, H, 32, [bytes(r) for r in rand_samples(W, H, 4, 255, 112)], compression=3, hdr=108,
                              masks=(0xff0000, 0xff00, 0xff, 0xff000000)), 'any')
add('bmp32_bitfields_noalpha', bmp(W, H, 32, [bytes(r) for r in rand_samples(W, H, 4, 255, 113)], compression=3,
                                   masks=(0xff0000, 0xff00, 0xff, 0)), 'any')
add('bmp32_bitfields_odd', bmp(W, H, 32, [bytes(r) for r in rand_samples(W, H, 4, 255, 114)], compression=3,
                               masks=(0xff, 0xff00, 0xff0000, 0)), 'fallback')
# 16-bit 555 and 565
r16 = rand_samples(W, H, 1, 65535, 115)
rows16 = [b''.join(struct.pack('<H', v & 0x7fff) for v in r) for r in r16]
add('bmp16_555', bmp(W, H, 16, rows16), 'fallback')
rows565 = [b''.join(struct.pack('<H', v) for v in r) for r in r16]
add('bmp16_565', bmp(W, H, 16, rows565, compression=3, masks=(0xf800, 0x7e0, 0x1f, 0)), 'fallback')


def rle8(rows_tb, w, absolute=False):
    outb = bytearray()
    for row in rows_tb[::-1]:
        x = 0
        while x < w:
            if absolute and x + 5 <= w:
                outb += bytes([0, 5]) + bytes(row[x:x + 5]) + b'\0'
                x += 5
                continue
            n = 1
            while x + n < w and n < 255 and row[x + n] == row[x]:
                n += 1
            outb += bytes([n, row[x]])
            x += n
        outb += b'\0\0'
    outb += b'\0\1'
    return bytes(outb)


rl = [[(x // 5 + y) % 7 for x in range(W)] for y in range(H)]
add('bmp_rle8', bmp(W, H, 8, None, palette=pal4(256, 120), compression=1, data=rle8(rl, W)), 'fallback')
add('bmp_rle8_abs', bmp(W, H, 8, None, palette=pal4(256, 121), compression=1, data=rle8(rl, W, True)), 'fallback')


def rle4(rows_tb, w):
    outb = bytearray()
    for row in rows_tb[::-1]:
        x = 0
        while x < w:
            n = min(w - x, 2 if x + 1 < w and row[x] != row[x + 1] else 1)
            if n == 2:
                outb += bytes([2, (row[x] << 4) | row[x + 1]])
            else:
                k = 1
                while x + k < w and k < 255 and row[x + k] == row[x]:
                    k += 1
                outb += bytes([k, (row[x] << 4) | row[x]])
                n = k
            x += n
        outb += b'\0\0'
    outb += b'\0\1'
    return bytes(outb)


add('bmp_rle4', bmp(W, H, 4, None, palette=pal4(16, 122), compression=2, data=rle4(rl, W)), 'fallback')

# ---- PNM ----
gray = Image.frombytes('L', (W, H), rnd(W * H, 130))
add('ppm_p6', save(img, 'PPM'), 'fast')
add('pgm_p5', save(gray, 'PPM'), 'fast')
add('pbm_p4', save(gray.convert('1'), 'PPM'), 'fast')
rgbb = img.tobytes()
gb = gray.tobytes()
bits = [1 if v < 128 else 0 for v in gb]


def lines(vals, per=12):
    return '\n'.join(' '.join(str(v) for v in vals[i:i + per]) for i in range(0, len(vals), per)) + '\n'


add('ppm_p3', ('P3\n# comment\n%d %d\n255\n' % (W, H) + lines(list(rgbb))).encode(), 'fast')
add('pgm_p2', ('P2\n%d %d\n255\n' % (W, H) + lines(list(gb))).encode(), 'fast')
add('pbm_p1', ('P1\n%d %d\n' % (W, H) + lines(bits, 35)).encode(), 'fast')
add('pbm_p1_packed', ('P1\n%d %d\n' % (W, H) + ''.join(str(b) for b in bits) + '\n').encode(), 'fast')
add('pgm_p2_comment', ('P2\n%d %d\n255\n# c\n' % (W, H) + lines(list(gb))).encode(), 'any')
add('pgm_p2_short', ('P2\n%d %d\n255\n' % (W, H) + lines(list(gb)[:-5])).encode(), 'fallback')
add('pgm_p2_over255', ('P2\n%d %d\n255\n' % (W, H) + lines([300] + list(gb)[1:])).encode(), 'any')
add('ppm_p6_comment', b'P6\n# a comment\n%d %d\n# another\n255\n' % (W, H) + rgbb, 'fast')
add('ppm_p6_max100', b'P6 %d %d 100\n' % (W, H) + bytes(v * 100 // 255 for v in rgbb), 'fallback')
add('pgm_p5_max15', b'P5 %d %d 15\n' % (W, H) + bytes(v >> 4 for v in gb), 'fallback')
add('pgm_p5_16bit', b'P5 %d %d 65535\n' % (W, H) + b''.join(struct.pack('>H', v * 257) for v in gb), 'fallback')
add('ppm_p6_16bit', b'P6 %d %d 65535\n' % (W, H) + b''.join(struct.pack('>H', v * 257) for v in rgbb), 'fallback')
add('ppm_p3_max1000', ('P3\n%d %d\n1000\n' % (W, H) + lines([v * 3 for v in rgbb])).encode(), 'fallback')
add('pgm_p2_max100', ('P2\n%d %d\n100\n' % (W, H) + lines([v * 100 // 255 for v in gb])).encode(), 'fallback')

# ---- JPEG ----
big = noise_rgb(W, H, 140)
for q in (50, 95):
    for ss in (0, 1, 2):
        add('jpeg_q%d_ss%d' % (q, ss), save(big, 'JPEG', quality=q, subsampling=ss), 'fast')
add('jpeg_progressive', save(big, 'JPEG', quality=90, progressive=True), 'fast')
add('jpeg_optimize', save(big, 'JPEG', quality=90, optimize=True), 'fast')
add('jpeg_gray', save(gray, 'JPEG', quality=90), 'fast')
add('jpeg_gray_progressive', save(gray, 'JPEG', quality=90, progressive=True), 'fast')
add('jpeg_1x1', save(noise_rgb(1, 1, 141), 'JPEG'), 'fast')
add('jpeg_odd_333x17', save(noise_rgb(333, 17, 142), 'JPEG', quality=80), 'fast')
add('jpeg_cmyk', save(Image.frombytes('CMYK', (W, H), rnd(W * H * 4, 143)), 'JPEG'), 'fallback')
# ICC profile (PIL does not apply it in convert('RGB'))
icc = b'\0' * 128 + b'acsp' + rnd(300, 144)
add('jpeg_icc', save(big, 'JPEG', quality=90, icc_profile=icc), 'fast')
# EXIF orientation 6 (rotate): must be ignored, as PIL's convert ignores it.
exif = Image.Exif()
exif[0x0112] = 6
add('jpeg_exif_rot', save(noise_rgb(41, 19, 145), 'JPEG', exif=exif.tobytes()), 'fast')
base444 = save(big, 'JPEG', quality=90, subsampling=0)


def adobe(transform):
    body = b'Adobe' + struct.pack('>HHHB', 100, 0, 0, transform)
    return b'\xff\xee' + struct.pack('>H', len(body) + 2) + body


add('jpeg_adobe_rgb', base444[:2] + adobe(0) + base444[2:], 'fast')
add('jpeg_adobe_ycc', base444[:2] + adobe(1) + base444[2:], 'fast')
add('jpeg_truncated', base444[:len(base444) // 2], 'fallback')
add('jpeg_extraneous_before_eoi', base444[:-2] + b'\0\0\0' + base444[-2:], 'any')
# Junk between header markers: libjpeg warns (fallback); PIL reads it.
add('jpeg_junk_between_markers', base444[:20] + b'junk' + base444[20:], 'fallback')
add('jpeg_corrupt_scan', base444[:-40] + b'\xff\xd0' * 5 + base444[-30:], 'fallback')

# ---- formats left to PIL, and odd corners ----
add('tiff', save(img, 'TIFF'), 'fallback')
add('gif', save(pal, 'GIF'), 'fallback')
try:
    add('webp', save(img, 'WEBP', lossless=True), 'fallback')
except Exception:
    pass
add('png_exif_rot', save(img, 'PNG', exif=exif.tobytes()), 'fast')
add('pnm_crlf', b'P6\r\n%d %d\r\n255\r\n' % (W, H) + rgbb, 'any')
add('bmp24_gap', bmp(W, H, 24, None, data=b'\0' * 10 + bmp(W, H, 24, [bytes(r) for r in rand_samples(W, H, 3, 255, 150)])[54:])
    .replace(struct.pack('<I', 54), struct.pack('<I', 64), 1), 'any')
png_ok = png(W, H, 2, 8, rand_samples(W, H, 3, 255, 151), extra=chunk(b'tEXt', b'Comment\0hello'))
i = png_ok.find(b'tEXt')
add('png_bad_ancillary_crc', png_ok[:i + 10] + b'X' + png_ok[i + 11:], 'fallback')
add('png_no_iend', png_ok[:-12], 'fallback')

with open(os.path.join(out, 'manifest.txt'), 'w') as f:
    f.write('\n'.join(manifest) + '\n')
)PY";

// Writes the first `n` photos (evenly spaced, sorted by name) of a tar as
// <i>.img and PIL's RGB as <i>.rgb; manifest lines "<i> <w> <h> <name>".
constexpr const char* kPhotosScript = R"PY(
import io, os, sys, tarfile
from PIL import Image
tar, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lines = []
with tarfile.open(tar) as t:
    names = sorted(m.name for m in t.getmembers()
                   if m.isfile() and m.name.lower().endswith('.jpg'))
    step = max(1, len(names) // n)
    for i, name in enumerate(names[::step][:n]):
        data = t.extractfile(name).read()
        im = Image.open(io.BytesIO(data)).convert('RGB')
        with open(os.path.join(out, '%d.img' % i), 'wb') as f:
            f.write(data)
        with open(os.path.join(out, '%d.rgb' % i), 'wb') as f:
            f.write(im.tobytes())
        lines.append('%d %d %d %s' % (i, im.width, im.height, name))
with open(os.path.join(out, 'manifest.txt'), 'w') as f:
    f.write('\n'.join(lines) + '\n')
)PY";

bool HavePil() { return test::PythonHas("PIL.Image"); }

struct Case {
  std::string name;
  std::string expect;  // fast, fallback, any
  int width = -1;      // -1: PIL refuses the file
  int height = -1;
  std::string mode;  // PIL's mode before convert("RGB")
  std::string data;  // the encoded file
  std::string rgb;   // PIL's RGB bytes
};

// The generated cases, made once for the whole suite.
class DecodeParityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!HavePil()) return;
    dir_ = new TempDir();
    test::WriteFile(*dir_ / "gen.py", kGenerateScript);
    test::MakeDirs(*dir_ / "out");
    auto r = test::Run({kPython, *dir_ / "gen.py", *dir_ / "out"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream manifest(test::ReadFile(*dir_ / "out/manifest.txt"));
    cases_ = new std::vector<Case>();
    std::string line;
    while (std::getline(manifest, line)) {
      if (line.empty()) continue;
      Case c;
      std::istringstream fields(line);
      fields >> c.name >> c.expect >> c.width >> c.height >> c.mode;
      c.data = test::ReadFile(*dir_ / ("out/" + c.name + ".img"));
      if (c.width >= 0)
        c.rgb = test::ReadFile(*dir_ / ("out/" + c.name + ".rgb"));
      cases_->push_back(std::move(c));
    }
  }
  static void TearDownTestSuite() {
    delete cases_;
    cases_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!HavePil()) GTEST_SKIP() << kPython << " with PIL is not available";
    ASSERT_NE(cases_, nullptr);
  }

  static const Case& Get(const std::string& name) {
    for (const Case& c : *cases_) {
      if (c.name == name) return c;
    }
    ADD_FAILURE() << "no generated case " << name;
    static const Case empty;
    return empty;
  }

  // Checks every case whose name starts with `prefix`; returns how many.
  static int CheckPrefix(const std::string& prefix) {
    int n = 0;
    for (const Case& c : *cases_) {
      if (c.name.compare(0, prefix.size(), prefix) != 0) continue;
      ++n;
      CheckCase(c);
    }
    EXPECT_GT(n, 0) << prefix;
    return n;
  }

  static void CheckCase(const Case& c) {
    SCOPED_TRACE(c.name + " (PIL mode " + c.mode + ", expect " + c.expect +
                 ")");
    RgbImage img;
    Status s = DecodeRgb(c.data.data(), c.data.size(), &img);
    if (c.expect == "fast") {
      ASSERT_TRUE(s.ok()) << s.ToString();
    } else if (c.expect == "fallback") {
      EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
      EXPECT_FALSE(s.message().empty());
    }
    if (!s.ok()) {
      EXPECT_EQ(img.pixels, nullptr);
      return;
    }
    // Whatever the fast path decodes, PIL must decode to the same bytes.
    ASSERT_GE(c.width, 0) << "decoded a file PIL refuses";
    ExpectSamePixels(img, c.width, c.height, c.rgb);
  }

  static void ExpectSamePixels(const RgbImage& img, int width, int height,
                               const std::string& rgb) {
    ASSERT_EQ(img.width, width);
    ASSERT_EQ(img.height, height);
    ASSERT_EQ(img.size(), rgb.size());
    ASSERT_NE(img.pixels, nullptr);
    const uint8_t* got = img.pixels.get();
    const auto* want = reinterpret_cast<const uint8_t*>(rgb.data());
    auto diff = std::mismatch(got, got + img.size(), want);
    if (diff.first != got + img.size()) {
      size_t i = static_cast<size_t>(diff.first - got);
      size_t px = i / 3;
      int different = 0;
      for (size_t j = 0; j < img.size(); ++j) different += got[j] != want[j];
      ADD_FAILURE() << different << " bytes differ from PIL; first at x="
                    << px % static_cast<size_t>(width)
                    << " y=" << px / static_cast<size_t>(width) << " channel "
                    << i % 3 << ": got " << int{got[i]} << ", PIL "
                    << int{want[i]};
    }
  }

  static TempDir* dir_;
  static std::vector<Case>* cases_;
};

TempDir* DecodeParityTest::dir_ = nullptr;
std::vector<Case>* DecodeParityTest::cases_ = nullptr;

// ---------------------------------------------------------------------------
// Format sniffing
// ---------------------------------------------------------------------------

ImageFormat Sniff(const std::string& s) {
  return SniffImageFormat(s.data(), s.size());
}

TEST(SniffImageFormatTest, Magics) {
  EXPECT_EQ(Sniff(std::string("\xff\xd8\xff\xe0", 4)), ImageFormat::kJpeg);
  EXPECT_EQ(Sniff(std::string("\xff\xd8\xff", 3)), ImageFormat::kJpeg);
  EXPECT_EQ(Sniff(std::string("\x89PNG\r\n\x1a\n\0\0", 10)), ImageFormat::kPng);
  EXPECT_EQ(Sniff("BM\x36\x10"), ImageFormat::kBmp);
  for (char k = '1'; k <= '6'; ++k) {
    EXPECT_EQ(Sniff(std::string("P") + k + "\n3 2\n"), ImageFormat::kPnm) << k;
    EXPECT_EQ(Sniff(std::string("P") + k + " 3 2"), ImageFormat::kPnm) << k;
    EXPECT_EQ(Sniff(std::string("P") + k + "#c\n3 2"), ImageFormat::kPnm) << k;
  }
  EXPECT_EQ(Sniff(std::string("II*\0", 4)), ImageFormat::kTiff);
  EXPECT_EQ(Sniff(std::string("MM\0*", 4)), ImageFormat::kTiff);
  EXPECT_EQ(Sniff(std::string("II+\0", 4)), ImageFormat::kTiff);
  EXPECT_EQ(Sniff(std::string("RIFF\x10\0\0\0WEBPVP8 ", 16)),
            ImageFormat::kWebp);
  EXPECT_EQ(Sniff("GIF87a\x01\0"), ImageFormat::kGif);
  EXPECT_EQ(Sniff("GIF89a\x01\0"), ImageFormat::kGif);
}

TEST(SniffImageFormatTest, NotMagics) {
  EXPECT_EQ(SniffImageFormat(nullptr, 0), ImageFormat::kUnknown);
  EXPECT_EQ(Sniff(""), ImageFormat::kUnknown);
  EXPECT_EQ(Sniff(std::string("\xff\xd8", 2)), ImageFormat::kUnknown);
  EXPECT_EQ(Sniff(std::string("\x89PNG\r\n\x1a", 7)), ImageFormat::kUnknown);
  EXPECT_EQ(Sniff("B"), ImageFormat::kUnknown);
  EXPECT_EQ(Sniff("P7\n3 2"), ImageFormat::kUnknown);  // PAM
  EXPECT_EQ(Sniff("P0\n"), ImageFormat::kUnknown);
  EXPECT_EQ(Sniff("P6x"), ImageFormat::kUnknown);
  EXPECT_EQ(Sniff("P6"), ImageFormat::kUnknown);
  EXPECT_EQ(Sniff("RIFF\x10\0\0\0WAVE"), ImageFormat::kUnknown);
  EXPECT_EQ(Sniff("GIF90a"), ImageFormat::kUnknown);
  EXPECT_EQ(Sniff("hello, world"), ImageFormat::kUnknown);
}

TEST(SniffImageFormatTest, Names) {
  EXPECT_STREQ(ImageFormatName(ImageFormat::kUnknown), "unknown");
  EXPECT_STREQ(ImageFormatName(ImageFormat::kJpeg), "JPEG");
  EXPECT_STREQ(ImageFormatName(ImageFormat::kPng), "PNG");
  EXPECT_STREQ(ImageFormatName(ImageFormat::kBmp), "BMP");
  EXPECT_STREQ(ImageFormatName(ImageFormat::kPnm), "PNM");
  EXPECT_STREQ(ImageFormatName(ImageFormat::kTiff), "TIFF");
  EXPECT_STREQ(ImageFormatName(ImageFormat::kWebp), "WebP");
  EXPECT_STREQ(ImageFormatName(ImageFormat::kGif), "GIF");
}

// ---------------------------------------------------------------------------
// Images built here (no PIL needed)
// ---------------------------------------------------------------------------

std::string Ppm(int w, int h, uint64_t seed) {
  return "P6\n" + std::to_string(w) + " " + std::to_string(h) + "\n255\n" +
         test::RandomBytes(static_cast<size_t>(w) * h * 3, seed);
}

void PutLe32(std::string* s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*s)[at + i] = static_cast<char>(v >> (8 * i));
}

// A bottom-up 24-bit BMP (BITMAPINFOHEADER) of random pixels.
std::string Bmp24(int w, int h, uint64_t seed) {
  size_t stride = (static_cast<size_t>(w) * 3 + 3) / 4 * 4;
  std::string s(54, '\0');
  s[0] = 'B';
  s[1] = 'M';
  PutLe32(&s, 2, static_cast<uint32_t>(54 + stride * h));
  PutLe32(&s, 10, 54);
  PutLe32(&s, 14, 40);
  PutLe32(&s, 18, static_cast<uint32_t>(w));
  PutLe32(&s, 22, static_cast<uint32_t>(h));
  s[26] = 1;
  s[28] = 24;
  return s + test::RandomBytes(stride * h, seed);
}

TEST(DecodeRgbTest, PpmExact) {
  std::string ppm = Ppm(37, 23, 1);
  RgbImage img;
  ASSERT_TRUE(DecodeRgb(ppm.data(), ppm.size(), &img).ok());
  EXPECT_EQ(img.width, 37);
  EXPECT_EQ(img.height, 23);
  ASSERT_EQ(img.size(), 37u * 23 * 3);
  EXPECT_EQ(std::memcmp(img.pixels.get(), ppm.data() + ppm.size() - img.size(),
                        img.size()),
            0);
}

TEST(DecodeRgbTest, BmpExact) {
  const int w = 5, h = 3;
  std::string bmp = Bmp24(w, h, 2);
  RgbImage img;
  ASSERT_TRUE(DecodeRgb(bmp.data(), bmp.size(), &img).ok());
  ASSERT_EQ(img.width, w);
  ASSERT_EQ(img.height, h);
  const size_t stride = 16;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const char* bgr = bmp.data() + 54 + (h - 1 - y) * stride + x * 3;
      const uint8_t* rgb = img.pixels.get() + (y * w + x) * 3;
      EXPECT_EQ(rgb[0], static_cast<uint8_t>(bgr[2]));
      EXPECT_EQ(rgb[1], static_cast<uint8_t>(bgr[1]));
      EXPECT_EQ(rgb[2], static_cast<uint8_t>(bgr[0]));
    }
  }
}

TEST(DecodeRgbTest, MaxPixelsPnmAndBmp) {
  for (const std::string& data : {Ppm(37, 23, 3), Bmp24(37, 23, 4)}) {
    RgbImage img;
    EXPECT_TRUE(DecodeRgb(data.data(), data.size(), &img, 37 * 23).ok());
    Status s = DecodeRgb(data.data(), data.size(), &img, 37 * 23 - 1);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find("37x23"), std::string::npos) << s.ToString();
    EXPECT_EQ(img.pixels, nullptr);
  }
}

TEST(DecodeRgbTest, HugeHeadersRefusedBeforeDecoding) {
  // Headers only: the limit is checked before any pixel is allocated.
  std::string ppm = "P6\n100000 100000\n255\n";
  RgbImage img;
  Status s = DecodeRgb(ppm.data(), ppm.size(), &img);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("100000x100000"), std::string::npos);

  std::string bmp = Bmp24(1, 1, 5);
  PutLe32(&bmp, 18, 200000);
  PutLe32(&bmp, 22, 200000);
  s = DecodeRgb(bmp.data(), bmp.size(), &img);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("200000x200000"), std::string::npos);

  std::string png(
      "\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\1\0\0\0\1\0\0\x08\x02\0\0\0", 29);
  png += std::string(4, '\0');  // CRC
  png += std::string("\0\0\0\0IEND\xae\x42\x60\x82", 12);
  s = DecodeRgb(png.data(), png.size(), &img);
  EXPECT_TRUE(s.IsNotSupported() || s.IsInvalidArgument()) << s.ToString();
  s = DecodeRgb(png.data(), png.size(), &img, 1000);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("65536x65536"), std::string::npos) << s.ToString();
}

TEST(DecodeRgbTest, PnmVariantsLeftToPil) {
  RgbImage img;
  for (std::string pnm :
       {std::string("P6\n2 2\n100\n") + std::string(12, '\x10'),
        std::string("P5\n2 2\n65535\n") + std::string(8, '\x10'),
        std::string("P6\n2 2\n255\n") + std::string(11, '\x10'),  // short
        std::string("P5 2 2 255#c\n") + std::string(4, '\x10'),
        std::string("P2\n2 2\n15\n1 2 3 4\n")}) {
    Status s = DecodeRgb(pnm.data(), pnm.size(), &img);
    EXPECT_TRUE(s.IsNotSupported()) << pnm << ": " << s.ToString();
  }
}

TEST(DecodeRgbTest, BmpVariantsLeftToPil) {
  RgbImage img;
  std::string bmp = Bmp24(4, 4, 6);
  std::string b = bmp;
  b[28] = 16;  // 16-bit
  EXPECT_TRUE(DecodeRgb(b.data(), b.size(), &img).IsNotSupported());
  b = bmp;
  b[30] = 1;  // RLE8
  EXPECT_TRUE(DecodeRgb(b.data(), b.size(), &img).IsNotSupported());
  b = bmp;
  PutLe32(&b, 14, 12);  // OS/2 header size
  EXPECT_TRUE(DecodeRgb(b.data(), b.size(), &img).IsNotSupported());
  b = bmp.substr(0, bmp.size() - 1);  // truncated pixel data
  EXPECT_TRUE(DecodeRgb(b.data(), b.size(), &img).IsNotSupported());
}

TEST(DecodeRgbTest, OtherFormatsAreNotSupported) {
  RgbImage img;
  for (std::string data :
       {std::string("II*\0\x08\0\0\0", 8), std::string("MM\0*\0\0\0\x08", 8),
        std::string("RIFF\x10\0\0\0WEBPVP8 \0\0\0\0", 20),
        std::string("GIF89a\x01\0\x01\0\0\0\0", 13), std::string("hello"),
        std::string()}) {
    Status s = DecodeRgb(data.data(), data.size(), &img);
    EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
    EXPECT_FALSE(s.message().empty());
    EXPECT_EQ(img.pixels, nullptr);
  }
  Status s = DecodeRgb("GIF89a\x01\0\x01\0", 10, &img);
  EXPECT_NE(s.message().find("GIF"), std::string::npos) << s.ToString();
}

// Random bytes behind every magic, at many lengths: an error, never a crash
// (and never a successful decode of noise).
TEST(DecodeRgbTest, GarbageIsAnErrorNotACrash) {
  const std::vector<std::string> magics = {
      std::string("\xff\xd8\xff", 3),
      std::string("\xff\xd8\xff\xe0\0\x10JFIF\0", 11),
      std::string("\x89PNG\r\n\x1a\n", 8),
      std::string("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", 16),
      "BM",
      "P6\n",
      "P6\n4 4\n255\n",
      "P3\n4 4\n255\n",
      "P1\n4 4\n",
      "P4\n4 4\n",
      std::string("II*\0", 4),
      ""};
  uint64_t seed = 100;
  for (const std::string& magic : magics) {
    for (size_t n : {0, 1, 2, 7, 16, 64, 300, 5000}) {
      std::string data = magic + test::RandomBytes(n, ++seed);
      RgbImage img;
      Status s = DecodeRgb(data.data(), data.size(), &img);
      if (magic.rfind("P6\n4 4\n255\n", 0) == 0 && n >= 48) {
        EXPECT_TRUE(s.ok()) << s.ToString();  // any 48 bytes are pixels
        continue;
      }
      if (magic.rfind("P4\n4 4\n", 0) == 0 && n >= 4) continue;
      EXPECT_FALSE(s.ok()) << "magic " << magic.size() << " bytes + " << n;
      EXPECT_EQ(img.pixels, nullptr);
    }
  }
}

TEST(DecodeRgbTest, ForcedDecodersRejectOtherInput) {
  RgbImage img;
  std::string ppm = Ppm(3, 2, 7);
  EXPECT_TRUE(
      DecodeRgbTurboJpeg(ppm.data(), ppm.size(), &img).IsInvalidArgument());
  ASSERT_TRUE(DecodeRgbOpenCv(ppm.data(), ppm.size(), &img).ok());
  EXPECT_EQ(img.width, 3);
  EXPECT_EQ(img.height, 2);
  std::string junk = test::RandomBytes(1000, 8);
  Status s = DecodeRgbOpenCv(junk.data(), junk.size(), &img);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  std::string jpeg = std::string("\xff\xd8\xff", 3) + junk;
  s = DecodeRgbTurboJpeg(jpeg.data(), jpeg.size(), &img);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(img.pixels, nullptr);
}

// ---------------------------------------------------------------------------
// Parity with PIL on generated variants
// ---------------------------------------------------------------------------

TEST_F(DecodeParityTest, Png) { CheckPrefix("png"); }
TEST_F(DecodeParityTest, Bmp) { CheckPrefix("bmp"); }
TEST_F(DecodeParityTest, Pnm) {
  CheckPrefix("ppm");
  CheckPrefix("pgm");
  CheckPrefix("pbm");
  CheckPrefix("pnm");
}
TEST_F(DecodeParityTest, Jpeg) { CheckPrefix("jpeg"); }
TEST_F(DecodeParityTest, OtherFormats) {
  CheckPrefix("tiff");
  CheckPrefix("gif");
}

TEST_F(DecodeParityTest, EveryCaseIsChecked) {
  const char* prefixes[] = {"png", "bmp",  "ppm",  "pgm", "pbm",
                            "pnm", "jpeg", "tiff", "gif", "webp"};
  int fast = 0;
  for (const Case& c : *cases_) {
    bool known = false;
    for (const char* p : prefixes) known |= c.name.rfind(p, 0) == 0;
    EXPECT_TRUE(known) << c.name;
    if (c.name.rfind("webp", 0) == 0) CheckCase(c);
    fast += c.expect == "fast";
  }
  EXPECT_GT(fast, 70);
}

TEST_F(DecodeParityTest, KeyVariantsTakeTheFastPath) {
  // The rows of the compatibility table in decode.h, by PIL mode.
  std::map<std::string, std::string> want = {
      {"png_rgb", "RGB"},      {"png_rgba", "RGBA"},
      {"png_l", "L"},          {"png_la", "LA"},
      {"png_p", "P"},          {"png_p_trns1", "P"},
      {"png_1bit_mode1", "1"}, {"png_gray2", "L"},
      {"png_gray4", "L"},      {"png_interlaced_c2_b8", "RGB"},
      {"png_pal_short", "P"},  {"bmp24", "RGB"},
      {"bmp32_rgba", "RGB"},   {"bmp_p8", "P"},
      {"bmp_1bit", "1"},       {"bmp4", "P"},
      {"ppm_p6", "RGB"},       {"pgm_p5", "L"},
      {"pbm_p4", "1"},         {"ppm_p3", "RGB"},
      {"pgm_p2", "L"},         {"pbm_p1", "1"},
      {"jpeg_q95_ss2", "RGB"}, {"jpeg_progressive", "RGB"},
      {"jpeg_gray", "L"},      {"jpeg_adobe_rgb", "RGB"},
      {"jpeg_icc", "RGB"},     {"jpeg_exif_rot", "RGB"}};
  for (const auto& [name, mode] : want) {
    const Case& c = Get(name);
    EXPECT_EQ(c.mode, mode) << name;
    RgbImage img;
    Status s = DecodeRgb(c.data.data(), c.data.size(), &img);
    EXPECT_TRUE(s.ok()) << name << ": " << s.ToString();
  }
}

TEST_F(DecodeParityTest, FallbackMessagesSayWhy) {
  struct {
    const char* name;
    const char* words;
  } want[] = {{"png16_c2", "16-bit"},
              {"jpeg_cmyk", "CMYK"},
              {"jpeg_truncated", "warning"},
              {"bmp16_565", "16-bit"},
              {"bmp_rle8", "RLE"},
              {"ppm_p6_max100", "maxval 100"},
              {"png_bad_ancillary_crc", "CRC"},
              {"tiff", "TIFF"},
              {"gif", "GIF"}};
  for (const auto& w : want) {
    const Case& c = Get(w.name);
    RgbImage img;
    Status s = DecodeRgb(c.data.data(), c.data.size(), &img);
    EXPECT_TRUE(s.IsNotSupported()) << w.name << ": " << s.ToString();
    EXPECT_NE(s.message().find(w.words), std::string::npos)
        << w.name << ": " << s.ToString();
  }
}

TEST_F(DecodeParityTest, MaxPixels) {
  for (const char* name : {"jpeg_q95_ss2", "png_rgb", "bmp_p8", "pgm_p2"}) {
    const Case& c = Get(name);
    uint64_t pixels = static_cast<uint64_t>(c.width) * c.height;
    RgbImage img;
    EXPECT_TRUE(DecodeRgb(c.data.data(), c.data.size(), &img, pixels).ok())
        << name;
    Status s = DecodeRgb(c.data.data(), c.data.size(), &img, pixels - 1);
    EXPECT_TRUE(s.IsInvalidArgument()) << name << ": " << s.ToString();
    EXPECT_NE(s.message().find(std::to_string(c.width) + "x" +
                               std::to_string(c.height)),
              std::string::npos)
        << s.ToString();
    EXPECT_EQ(img.pixels, nullptr);
  }
}

TEST_F(DecodeParityTest, JpegHugeSofRefusedBeforeDecoding) {
  std::string jpeg = Get("jpeg_q95_ss2").data;
  size_t sof = jpeg.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  // SOF0: FF C0, length(2), precision(1), height(2), width(2).
  // 60000x60000 (libjpeg's own limit is 65500).
  jpeg[sof + 5] = jpeg[sof + 7] = '\xea';
  jpeg[sof + 6] = jpeg[sof + 8] = '\x60';
  RgbImage img;
  Status s = DecodeRgb(jpeg.data(), jpeg.size(), &img);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("60000x60000"), std::string::npos) << s.ToString();
}

// Every prefix of a small file of each format: falls back or fails, never
// crashes, and never decodes what PIL would not.
TEST_F(DecodeParityTest, EveryTruncationFallsBack) {
  for (const char* name :
       {"jpeg_q50_ss2", "jpeg_progressive", "png_rgb", "png_interlaced_c3_b4",
        "bmp_p8", "ppm_p6", "pbm_p4"}) {
    const std::string& data = Get(name).data;
    int ok = 0;
    for (size_t n = 0; n < data.size(); ++n) {
      RgbImage img;
      Status s = DecodeRgb(data.data(), n, &img);
      if (s.ok()) {
        ++ok;
      } else {
        EXPECT_EQ(img.pixels, nullptr);
      }
    }
    EXPECT_EQ(ok, 0) << name;
  }
}

// Flipped bytes: any result is fine except a crash, and JPEG errors are
// left to PIL.
TEST_F(DecodeParityTest, CorruptBytesNeverCrash) {
  for (const char* name : {"jpeg_q95_ss1", "jpeg_progressive", "jpeg_gray"}) {
    std::string data = Get(name).data;
    std::string noise = test::RandomBytes(400, 9);
    for (size_t i = 0; i < 200; ++i) {
      std::string d = data;
      size_t at = (static_cast<uint8_t>(noise[2 * i]) * 131u +
                   static_cast<uint8_t>(noise[2 * i + 1])) %
                  d.size();
      d[at] = static_cast<char>(d[at] ^ (1 << (i % 8)));
      RgbImage img;
      Status s = DecodeRgb(d.data(), d.size(), &img);
      if (!s.ok()) {
        EXPECT_TRUE(s.IsNotSupported() || s.IsInvalidArgument())
            << s.ToString();
      } else {
        EXPECT_EQ(img.size(), static_cast<size_t>(img.width) * img.height * 3);
      }
    }
  }
}

TEST_F(DecodeParityTest, ForcedDecodersMatchPil) {
  for (const char* name : {"jpeg_q50_ss0", "jpeg_q95_ss1", "jpeg_q95_ss2",
                           "jpeg_progressive", "jpeg_gray"}) {
    SCOPED_TRACE(name);
    const Case& c = Get(name);
    RgbImage img;
    ASSERT_TRUE(DecodeRgbTurboJpeg(c.data.data(), c.data.size(), &img).ok());
    ExpectSamePixels(img, c.width, c.height, c.rgb);
    ASSERT_TRUE(DecodeRgbOpenCv(c.data.data(), c.data.size(), &img).ok());
    ExpectSamePixels(img, c.width, c.height, c.rgb);
  }
  for (const char* name : {"png_rgba", "png_p", "bmp24", "pgm_p5"}) {
    SCOPED_TRACE(name);
    const Case& c = Get(name);
    RgbImage img;
    ASSERT_TRUE(DecodeRgbOpenCv(c.data.data(), c.data.size(), &img).ok());
    ExpectSamePixels(img, c.width, c.height, c.rgb);
  }
  const Case& trunc = Get("jpeg_truncated");
  RgbImage img;
  EXPECT_TRUE(DecodeRgbTurboJpeg(trunc.data.data(), trunc.data.size(), &img)
                  .IsNotSupported());
}

TEST_F(DecodeParityTest, ConcurrentDecodes) {
  std::vector<const Case*> fast;
  for (const Case& c : *cases_) {
    if (c.expect == "fast") fast.push_back(&c);
  }
  std::vector<int> failures(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = t; i < fast.size() * 2; i += 3) {
          const Case& c = *fast[i % fast.size()];
          RgbImage img;
          Status s = DecodeRgb(c.data.data(), c.data.size(), &img);
          if (!s.ok() || img.size() != c.rgb.size() ||
              std::memcmp(img.pixels.get(), c.rgb.data(), img.size()) != 0) {
            ++failures[t];
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

// ---------------------------------------------------------------------------
// RgbxDecoder (decoding into caller-provided RGBX rows)
// ---------------------------------------------------------------------------

struct RgbxResult {
  Status status;
  int width = 0;
  int height = 0;
  std::string rgb;  // the R, G, B bytes of every pixel, as RgbImage holds them
};

// Decodes `data` with RgbxDecoder into rows `pad` bytes apart beyond
// width * 4, in one buffer top to bottom or, `scattered`, bottom to top (not
// evenly spaced: DecodeInto's scratch-buffer path).  Checks every X byte is
// 255 and the bytes between rows are untouched.
RgbxResult DecodeRgbxForTest(const std::string& data, size_t pad,
                             bool scattered) {
  RgbxResult r;
  RgbxDecoder d;
  r.status = d.Prepare(data.data(), data.size());
  if (!r.status.ok()) {
    EXPECT_EQ(d.width(), 0);
    return r;
  }
  r.width = d.width();
  r.height = d.height();
  EXPECT_GT(r.width, 0);
  EXPECT_GT(r.height, 0);
  const size_t w = static_cast<size_t>(r.width),
               h = static_cast<size_t>(r.height);
  const size_t pitch = w * 4 + pad;
  constexpr uint8_t kCanary = 0xab;
  std::vector<uint8_t> buf(pitch * h, kCanary);
  std::vector<uint8_t*> rows(h);
  for (size_t y = 0; y < h; ++y) {
    rows[y] = buf.data() + pitch * (scattered ? h - 1 - y : y);
  }
  r.status = d.DecodeInto(rows.data());
  if (!r.status.ok()) return r;
  r.rgb.resize(w * h * 3);
  int bad_x = 0, bad_pad = 0;
  for (size_t y = 0; y < h; ++y) {
    const uint8_t* row = rows[y];
    for (size_t x = 0; x < w; ++x) {
      std::memcpy(&r.rgb[(y * w + x) * 3], row + 4 * x, 3);
      bad_x += row[4 * x + 3] != 255;
    }
    for (size_t i = w * 4; i < pitch; ++i) bad_pad += row[i] != kCanary;
  }
  EXPECT_EQ(bad_x, 0) << "X bytes other than 255";
  EXPECT_EQ(bad_pad, 0) << "bytes written between rows";
  return r;
}

std::string RgbBytes(const RgbImage& img) {
  return std::string(reinterpret_cast<const char*>(img.pixels.get()),
                     img.size());
}

TEST(RgbxDecoderTest, PpmAndBmpMatchDecodeRgb) {
  for (const std::string& data : {Ppm(7, 5, 1), Ppm(1, 1, 2), Bmp24(9, 4, 3)}) {
    RgbImage ref;
    ASSERT_TRUE(DecodeRgb(data.data(), data.size(), &ref).ok());
    for (bool scattered : {false, true}) {
      RgbxResult x = DecodeRgbxForTest(data, 8, scattered);
      ASSERT_TRUE(x.status.ok()) << x.status.ToString();
      EXPECT_EQ(x.width, ref.width);
      EXPECT_EQ(x.height, ref.height);
      EXPECT_EQ(x.rgb, RgbBytes(ref)) << "scattered " << scattered;
    }
  }
}

TEST(RgbxDecoderTest, RefusesWhatDecodeRgbRefuses) {
  for (const std::string& data :
       {std::string("II*\0garbage", 11), std::string("hello, world"),
        std::string("\xff\xd8\xff\xe0 not really", 16), std::string()}) {
    RgbImage ref;
    Status want = DecodeRgb(data.data(), data.size(), &ref);
    ASSERT_FALSE(want.ok());
    RgbxDecoder d;
    Status got = d.Prepare(data.data(), data.size());
    EXPECT_EQ(got.code(), want.code()) << got.ToString();
    EXPECT_EQ(d.width(), 0);
    EXPECT_EQ(d.height(), 0);
  }
  // Over max_pixels: InvalidArgument, as DecodeRgb.
  const std::string ppm = Ppm(10, 10, 4);
  RgbxDecoder d;
  EXPECT_TRUE(d.Prepare(ppm.data(), ppm.size(), 99).IsInvalidArgument());
}

TEST(RgbxDecoderTest, DecodeIntoWithoutPrepareIsAnError) {
  RgbxDecoder d;
  uint8_t row[4];
  uint8_t* rows[1] = {row};
  EXPECT_TRUE(d.DecodeInto(rows).IsInvalidArgument());
}

TEST_F(DecodeParityTest, RgbxMatchesDecodeRgbOnEveryCase) {
  int fast = 0;
  for (const Case& c : *cases_) {
    SCOPED_TRACE(c.name);
    RgbImage ref;
    Status want = DecodeRgb(c.data.data(), c.data.size(), &ref);
    RgbxResult x = DecodeRgbxForTest(c.data, 12, /*scattered=*/false);
    ASSERT_EQ(x.status.code(), want.code())
        << "RgbxDecoder: " << x.status.ToString()
        << "; DecodeRgb: " << want.ToString();
    if (!want.ok()) continue;
    ++fast;
    EXPECT_EQ(x.width, ref.width);
    EXPECT_EQ(x.height, ref.height);
    EXPECT_EQ(x.rgb, RgbBytes(ref));
    EXPECT_EQ(x.rgb, c.rgb);  // PIL's
  }
  EXPECT_GT(fast, 40);
}

TEST_F(DecodeParityTest, RgbxScatteredRowsMatchPil) {
  for (const char* name :
       {"jpeg_q50_ss0", "jpeg_q95_ss2", "jpeg_progressive", "jpeg_gray",
        "png_rgba", "png_la", "png_p", "bmp24", "pgm_p5"}) {
    SCOPED_TRACE(name);
    const Case& c = Get(name);
    RgbxResult x = DecodeRgbxForTest(c.data, 0, /*scattered=*/true);
    ASSERT_TRUE(x.status.ok()) << x.status.ToString();
    EXPECT_GT(x.height, 1);
    EXPECT_EQ(x.rgb, c.rgb);
  }
}

// The two steps on different threads, many decoders at once.
TEST_F(DecodeParityTest, RgbxStepsOnDifferentThreads) {
  std::vector<const Case*> fast;
  for (const Case& c : *cases_) {
    if (c.expect == "fast") fast.push_back(&c);
  }
  std::vector<RgbxDecoder> decoders(fast.size());
  std::vector<std::vector<uint8_t>> pixels(fast.size());
  std::vector<Status> prepared(fast.size()), decoded(fast.size());
  std::thread([&] {
    for (size_t i = 0; i < fast.size(); ++i) {
      prepared[i] =
          decoders[i].Prepare(fast[i]->data.data(), fast[i]->data.size());
    }
  }).join();
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < fast.size(); i += 4) {
        if (!prepared[i].ok()) continue;
        const size_t w = decoders[i].width(), h = decoders[i].height();
        pixels[i].resize(w * h * 4);
        std::vector<uint8_t*> rows(h);
        for (size_t y = 0; y < h; ++y) rows[y] = pixels[i].data() + y * w * 4;
        decoded[i] = decoders[i].DecodeInto(rows.data());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < fast.size(); ++i) {
    SCOPED_TRACE(fast[i]->name);
    ASSERT_TRUE(prepared[i].ok()) << prepared[i].ToString();
    ASSERT_TRUE(decoded[i].ok()) << decoded[i].ToString();
    std::string rgb;
    for (size_t p = 0; p < pixels[i].size(); p += 4) {
      rgb.append(reinterpret_cast<const char*>(&pixels[i][p]), 3);
    }
    EXPECT_EQ(rgb, fast[i]->rgb);
  }
}

// ---------------------------------------------------------------------------
// Real photos
// ---------------------------------------------------------------------------

TEST(DecodeRealPhotosTest, MatchPilExactly) {
  if (!HavePil()) GTEST_SKIP() << kPython << " with PIL is not available";
  std::string tar = test::SharedPhotosTar();
  if (tar.empty())
    GTEST_SKIP() << "../shared/data/cats_and_dogs_filtered.tar absent";
  TempDir dir;
  test::WriteFile(dir / "photos.py", kPhotosScript);
  auto r = test::Run({kPython, dir / "photos.py", tar, "200", dir.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream manifest(test::ReadFile(dir / "manifest.txt"));
  std::string line;
  int checked = 0;
  while (std::getline(manifest, line)) {
    std::istringstream fields(line);
    std::string index, name;
    int w = 0, h = 0;
    fields >> index >> w >> h >> name;
    SCOPED_TRACE(name);
    std::string data = test::ReadFile(dir / (index + ".img"));
    std::string rgb = test::ReadFile(dir / (index + ".rgb"));
    RgbImage img;
    Status s = DecodeRgb(data.data(), data.size(), &img);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(img.width, w);
    ASSERT_EQ(img.height, h);
    ASSERT_EQ(img.size(), rgb.size());
    ASSERT_EQ(std::memcmp(img.pixels.get(), rgb.data(), rgb.size()), 0);
    RgbxResult x = DecodeRgbxForTest(data, /*pad=*/0, /*scattered=*/false);
    ASSERT_TRUE(x.status.ok()) << x.status.ToString();
    ASSERT_EQ(x.rgb, rgb);
    ++checked;
  }
  EXPECT_EQ(checked, 200);
}

}  // namespace
}  // namespace ufspack
