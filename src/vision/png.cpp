// PNG decoding from the W3C PNG specification: chunks with their CRCs, every colour type and bit
// depth, palettes and tRNS transparency, the five row filters and Adam7 interlacing, into RGBA8.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "../common.h"
#include "image.h"
#include "inflate.h"

namespace qkv {

namespace {

uint32_t be32(const uint8_t* p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

int paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

// Adam7: the start and step of each pass, x then y.
const int kAdam7[7][4] = {{0, 8, 0, 8}, {4, 8, 0, 8}, {0, 4, 4, 8}, {2, 4, 0, 4},
                          {0, 2, 2, 4}, {1, 2, 0, 2}, {0, 1, 1, 2}};

}  // namespace

std::vector<uint8_t> decode_png(const uint8_t* data, uint64_t size, int* width, int* height) {
  auto bad = [](const std::string& m) { fail(ErrorCode::BadArgument, "PNG image: " + m); };
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size < 8 || std::memcmp(data, sig, 8) != 0) bad("not a PNG file (no PNG signature)");
  uint64_t p = 8;
  uint32_t w = 0, h = 0;
  int depth = 0, ctype = -1, interlace = 0;
  uint8_t palette[256][4];
  int palette_size = 0;
  bool have_trns = false, seen_idat = false, seen_end = false;
  uint16_t trns_key[3] = {0, 0, 0};
  std::vector<uint8_t> idat;
  for (int n = 0; !seen_end; n++) {
    if (size - p < 12) bad(n == 0 ? "truncated before its IHDR chunk" : "truncated (no IEND chunk)");
    const uint32_t len = be32(data + p);
    if (len > 0x7fffffffu) bad("a chunk length over 2^31-1");
    if (size - p - 12 < len) bad("truncated inside a chunk");
    const uint8_t* type = data + p + 4;
    const uint8_t* body = data + p + 8;
    const std::string name(reinterpret_cast<const char*>(type), 4);
    for (char c : name)
      if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))) bad("a chunk type that is not four letters");
    if (crc32_update(0, type, (size_t)len + 4) != be32(body + len)) bad("the CRC of chunk " + name + " does not match");
    p += 12 + (uint64_t)len;
    if (n == 0 && name != "IHDR") bad("the first chunk is " + name + ", not IHDR");
    if (name == "IHDR") {
      if (n != 0) bad("a second IHDR chunk");
      if (len != 13) bad("an IHDR chunk of " + std::to_string(len) + " bytes (13 expected)");
      w = be32(body);
      h = be32(body + 4);
      depth = body[8];
      ctype = body[9];
      interlace = body[12];
      if (body[10] != 0 || body[11] != 0) bad("an unknown compression or filter method");
      if (interlace > 1) bad("an unknown interlace method " + std::to_string(interlace));
      const bool ok = (ctype == 0 && (depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16)) ||
                      (ctype == 3 && (depth == 1 || depth == 2 || depth == 4 || depth == 8)) ||
                      ((ctype == 2 || ctype == 4 || ctype == 6) && (depth == 8 || depth == 16));
      if (!ok)
        bad("colour type " + std::to_string(ctype) + " with bit depth " + std::to_string(depth) + " is not valid");
      if (w < 1 || h < 1 || w > (uint32_t)kMaxImageSide || h > (uint32_t)kMaxImageSide)
        bad("size " + std::to_string(w) + "x" + std::to_string(h) + " (sides must be 1.." +
            std::to_string(kMaxImageSide) + ")");
      if ((uint64_t)w * h > (uint64_t)kMaxImagePixels)
        bad("size " + std::to_string(w) + "x" + std::to_string(h) + " is over " + std::to_string(kMaxImagePixels) +
            " pixels");
    } else if (name == "PLTE") {
      if (seen_idat) bad("a PLTE chunk after the image data");
      if (len % 3 || len == 0 || len > 768) bad("a PLTE chunk of " + std::to_string(len) + " bytes");
      palette_size = (int)len / 3;
      for (int i = 0; i < palette_size; i++) {
        for (int c = 0; c < 3; c++) palette[i][c] = body[i * 3 + c];
        palette[i][3] = 255;
      }
    } else if (name == "tRNS") {
      if (ctype == 3) {
        if (len > (uint32_t)palette_size) bad("a tRNS chunk longer than the palette");
        for (uint32_t i = 0; i < len; i++) palette[i][3] = body[i];
      } else if (ctype == 0 || ctype == 2) {
        const uint32_t want = ctype == 0 ? 2 : 6;
        if (len != want)
          bad("a tRNS chunk of " + std::to_string(len) + " bytes (" + std::to_string(want) + " expected)");
        for (uint32_t c = 0; c < want / 2; c++) trns_key[c] = (uint16_t)(body[c * 2] << 8 | body[c * 2 + 1]);
        have_trns = true;
      } else bad("a tRNS chunk in an image that has an alpha channel");
    } else if (name == "IDAT") {
      seen_idat = true;
      idat.insert(idat.end(), body, body + len);
    } else if (name == "IEND") {
      seen_end = true;
    } else if (name[0] >= 'A' && name[0] <= 'Z') {
      fail(ErrorCode::Unsupported, "PNG image: the critical chunk " + name + " is not understood");
    }
  }
  if (!seen_idat) bad("no image data (IDAT chunk)");
  if (ctype == 3 && palette_size == 0) bad("a palette image without a PLTE chunk");

  const int channels = ctype == 0 || ctype == 3 ? 1 : ctype == 2 ? 3 : ctype == 4 ? 2 : 4;
  const int bits_pp = channels * depth;
  const int bytes_pp = std::max(1, bits_pp / 8);  // the filters' left neighbour distance
  struct Pass {
    uint32_t x0, dx, y0, dy, w, h;
    uint64_t stride;
  };
  std::vector<Pass> passes;
  uint64_t total = 0;
  for (int k = 0; k < (interlace ? 7 : 1); k++) {
    Pass ps = interlace ? Pass{(uint32_t)kAdam7[k][0],
                               (uint32_t)kAdam7[k][1],
                               (uint32_t)kAdam7[k][2],
                               (uint32_t)kAdam7[k][3],
                               0,
                               0,
                               0}
                        : Pass{0, 1, 0, 1, 0, 0, 0};
    ps.w = w > ps.x0 ? (w - ps.x0 + ps.dx - 1) / ps.dx : 0;
    ps.h = h > ps.y0 ? (h - ps.y0 + ps.dy - 1) / ps.dy : 0;
    ps.stride = ((uint64_t)ps.w * bits_pp + 7) / 8;
    if (ps.w && ps.h) total += ps.h * (1 + ps.stride);
    passes.push_back(ps);
  }
  std::vector<uint8_t> raw = zlib_inflate(idat.data(), idat.size(), (size_t)total, "PNG image");
  std::vector<uint8_t>().swap(idat);

  std::vector<uint8_t> rgba((size_t)w * h * 4);
  uint8_t* q = raw.data();
  std::vector<uint8_t> prev, cur;
  for (const Pass& ps : passes) {
    if (!ps.w || !ps.h) continue;
    prev.assign(ps.stride, 0);
    for (uint32_t y = 0; y < ps.h; y++) {
      const int filter = *q++;
      cur.assign(q, q + ps.stride);
      q += ps.stride;
      const size_t n = ps.stride;
      switch (filter) {
        case 0: break;
        case 1:
          for (size_t i = bytes_pp; i < n; i++) cur[i] = (uint8_t)(cur[i] + cur[i - bytes_pp]);
          break;
        case 2:
          for (size_t i = 0; i < n; i++) cur[i] = (uint8_t)(cur[i] + prev[i]);
          break;
        case 3:
          for (size_t i = 0; i < n; i++)
            cur[i] = (uint8_t)(cur[i] + ((i >= (size_t)bytes_pp ? cur[i - bytes_pp] : 0) + prev[i]) / 2);
          break;
        case 4:
          for (size_t i = 0; i < n; i++) {
            const int a = i >= (size_t)bytes_pp ? cur[i - bytes_pp] : 0,
                      c = i >= (size_t)bytes_pp ? prev[i - bytes_pp] : 0;
            cur[i] = (uint8_t)(cur[i] + paeth(a, prev[i], c));
          }
          break;
        default: bad("an unknown row filter " + std::to_string(filter));
      }
      // Samples of this row -> RGBA; 16-bit samples keep their high byte, low depths scale to 0..255.
      auto sample = [&](uint32_t x, int c) -> uint32_t {
        if (depth == 8) return cur[(size_t)x * channels + c];
        if (depth == 16)
          return (uint32_t)cur[((size_t)x * channels + c) * 2] << 8 | cur[((size_t)x * channels + c) * 2 + 1];
        const size_t bit = (size_t)x * depth;
        return (cur[bit / 8] >> (8 - depth - bit % 8)) & ((1u << depth) - 1);
      };
      const uint32_t maxv = (1u << depth) - 1;
      for (uint32_t x = 0; x < ps.w; x++) {
        uint8_t* o = &rgba[(((size_t)(ps.y0 + y * ps.dy)) * w + ps.x0 + x * ps.dx) * 4];
        auto to8 = [&](uint32_t v) { return (uint8_t)(depth == 16 ? v >> 8 : v * 255 / maxv); };
        if (ctype == 3) {
          const uint32_t i = sample(x, 0);
          if ((int)i >= palette_size) bad("a pixel indexes past the palette");
          std::memcpy(o, palette[i], 4);
        } else if (ctype == 0) {
          const uint32_t v = sample(x, 0);
          o[0] = o[1] = o[2] = to8(v);
          o[3] = have_trns && v == trns_key[0] ? 0 : 255;
        } else if (ctype == 2) {
          const uint32_t r = sample(x, 0), g = sample(x, 1), b = sample(x, 2);
          o[0] = to8(r);
          o[1] = to8(g);
          o[2] = to8(b);
          o[3] = have_trns && r == trns_key[0] && g == trns_key[1] && b == trns_key[2] ? 0 : 255;
        } else if (ctype == 4) {
          o[0] = o[1] = o[2] = to8(sample(x, 0));
          o[3] = to8(sample(x, 1));
        } else {
          for (int c = 0; c < 4; c++) o[c] = to8(sample(x, c));
        }
      }
      prev.swap(cur);
    }
  }
  *width = (int)w;
  *height = (int)h;
  return rgba;
}

}  // namespace qkv
