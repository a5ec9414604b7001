// JPEG decoding from ITU-T T.81 (baseline, extended and progressive Huffman processes, 8-bit) with
// JFIF's YCbCr: coefficients of every scan gathered per component, then an exact IDCT, libjpeg's
// default "fancy" (triangle) upsampling for 2x1 and 2x2 chroma, and its fixed-point colour
// conversion, so the pixels match djpeg -dct float up to the IDCT's rounding.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "../common.h"
#include "image.h"

namespace qkv {

namespace {

[[noreturn]] void bad(const std::string& m) { fail(ErrorCode::BadArgument, "JPEG image: " + m); }

// The zigzag order: kZigzag[k] is the natural (row-major) index of the k-th coefficient.
const uint8_t kZigzag[64] = {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
                             41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
                             30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};

constexpr int kFastBits = 9;
constexpr int kMaxScans = 256;  // a progressive file has about 10; a hostile one could loop over the image

struct Huffman {
  bool defined = false;
  uint8_t symbols[256] = {};
  int maxcode[18] = {}, valptr[17] = {}, mincode[17] = {};
  uint16_t fast[1 << kFastBits] = {};  // (length << 8) | symbol, 0 when the code is longer
};

void build_huffman(Huffman& h, const uint8_t* counts, const uint8_t* symbols, int total) {
  h = Huffman{};
  std::memcpy(h.symbols, symbols, total);
  int code = 0, k = 0;
  for (int len = 1; len <= 16; len++) {
    h.valptr[len] = k;
    h.mincode[len] = code;
    code += counts[len - 1];
    k += counts[len - 1];
    if (code > (1 << len)) bad("a Huffman table is over-subscribed");
    h.maxcode[len] = counts[len - 1] ? code - 1 : -1;
    if (len <= kFastBits)
      for (int c = h.mincode[len]; c < code; c++) {
        const int sym = h.symbols[h.valptr[len] + c - h.mincode[len]];
        for (int f = c << (kFastBits - len); f < (c + 1) << (kFastBits - len); f++)
          h.fast[f] = (uint16_t)((len << 8) | sym);
      }
    code <<= 1;
  }
  h.maxcode[17] = INT32_MAX;
  h.defined = true;
}

// Entropy-coded data, most significant bit first, with 0xFF 0x00 stuffing undone. At a marker it
// supplies zero bits and counts them: consuming any of them means the data was cut short.
struct BitReader {
  const uint8_t* data;
  uint64_t size, pos;
  uint64_t buf = 0;
  int cnt = 0, padding = 0;
  bool at_marker = false;

  void fill() {
    while (cnt <= 56) {
      uint32_t b = 0;
      if (!at_marker && pos < size) {
        b = data[pos];
        if (b == 0xff) {
          if (pos + 1 < size && data[pos + 1] == 0) pos += 2;
          else {
            at_marker = true;
            b = 0;
            padding += 8;
          }
        } else pos++;
      } else padding += 8;
      buf = (buf << 8) | b;
      cnt += 8;
    }
  }
  void consume(int n) {
    cnt -= n;
    if (cnt < padding) bad("the entropy-coded data ends early (truncated or corrupt)");
  }
  int bits(int n) {
    if (n == 0) return 0;
    if (cnt < n) fill();
    const int v = (int)((buf >> (cnt - n)) & ((1u << n) - 1));
    consume(n);
    return v;
  }
  int decode(const Huffman& h) {
    if (cnt < 16) fill();
    const uint32_t peek = (uint32_t)(buf >> (cnt - 16)) & 0xffff;
    const uint16_t e = h.fast[peek >> (16 - kFastBits)];
    if (e) {
      consume(e >> 8);
      return e & 0xff;
    }
    for (int len = kFastBits + 1; len <= 16; len++) {
      const int code = (int)(peek >> (16 - len));
      if (code <= h.maxcode[len]) {
        consume(len);
        const int i = h.valptr[len] + code - h.mincode[len];
        if (i < 0 || i > 255) bad("an invalid Huffman code");
        return h.symbols[i];
      }
    }
    bad("an invalid Huffman code");
  }
  // The value of a magnitude category (T.81 F.2.2.1 EXTEND).
  int receive_extend(int s) {
    if (s == 0) return 0;
    if (s > 16) bad("a coefficient magnitude category over 16");
    const int v = bits(s);
    return v < (1 << (s - 1)) ? v - (1 << s) + 1 : v;
  }
  void reset() {
    buf = 0;
    cnt = padding = 0;
    at_marker = false;
  }
};

struct Component {
  int id = 0, h = 1, v = 1, tq = 0, td = 0, ta = 0;
  int bw = 0, bh = 0;  // blocks stored (whole MCUs)
  int cw = 0, ch = 0;  // samples of the component that are in the image
  int dc_pred = 0;
  std::vector<int16_t> coef;  // bw * bh blocks of 64, natural order, not dequantised
};

uint16_t be16(const uint8_t* p) { return (uint16_t)(p[0] << 8 | p[1]); }

// The orientation tag (0x0112) of an APP1 "Exif" segment's first IFD, 1 (as stored) when absent
// or malformed: a bad EXIF block is metadata, not a reason to refuse the picture.
int exif_orientation(const uint8_t* s, uint32_t n) {
  if (n < 14 || std::memcmp(s, "Exif\0\0", 6) != 0) return 1;
  const uint8_t* t = s + 6;
  const uint32_t tn = n - 6;
  const bool le = t[0] == 'I' && t[1] == 'I';
  if (!le && !(t[0] == 'M' && t[1] == 'M')) return 1;
  auto u16 = [&](uint32_t o) { return le ? (uint32_t)(t[o] | t[o + 1] << 8) : (uint32_t)(t[o] << 8 | t[o + 1]); };
  auto u32 = [&](uint32_t o) { return le ? u16(o) | u16(o + 2) << 16 : u16(o) << 16 | u16(o + 2); };
  if (u16(2) != 42) return 1;
  const uint32_t ifd = u32(4);
  if (ifd > tn || tn - ifd < 2) return 1;
  const uint32_t count = u16(ifd);
  for (uint32_t i = 0; i < count; i++) {
    const uint64_t e = (uint64_t)ifd + 2 + 12ull * i;
    if (e + 12 > tn) return 1;
    if (u16((uint32_t)e) == 0x0112 && u16((uint32_t)e + 2) == 3) {
      const uint32_t v = u16((uint32_t)e + 8);
      return v >= 1 && v <= 8 ? (int)v : 1;
    }
  }
  return 1;
}

// The stored pixels turned upright per an EXIF orientation (2..8): mirrors, rotations by 90, 180
// and 270 degrees clockwise, transpose and transverse; 5..8 swap the sides.
std::vector<uint8_t> orient(const std::vector<uint8_t>& src, int W, int H, int o, int* ow, int* oh) {
  const bool swap = o >= 5;
  *ow = swap ? H : W;
  *oh = swap ? W : H;
  std::vector<uint8_t> dst(src.size());
  for (int y = 0; y < *oh; y++)
    for (int x = 0; x < *ow; x++) {
      int sx = x, sy = y;
      switch (o) {
        case 2: sx = W - 1 - x; break;
        case 3:
          sx = W - 1 - x;
          sy = H - 1 - y;
          break;
        case 4: sy = H - 1 - y; break;
        case 5:
          sx = y;
          sy = x;
          break;
        case 6:
          sx = y;
          sy = H - 1 - x;
          break;
        case 7:
          sx = W - 1 - y;
          sy = H - 1 - x;
          break;
        case 8:
          sx = W - 1 - y;
          sy = x;
          break;
      }
      std::memcpy(&dst[((size_t)y * *ow + x) * 4], &src[((size_t)sy * W + sx) * 4], 4);
    }
  return dst;
}

// libjpeg's fancy upsampling by 2 across (h2v1): each output is 3/4 of the nearer sample and 1/4
// of the next one, rounded alternately; edges copy.
void upsample_h2v1(const uint8_t* in, int n, uint8_t* out) {
  if (n == 1) {
    out[0] = out[1] = in[0];
    return;
  }
  out[0] = in[0];
  out[1] = (uint8_t)((in[0] * 3 + in[1] + 2) >> 2);
  for (int i = 1; i < n - 1; i++) {
    out[2 * i] = (uint8_t)((in[i] * 3 + in[i - 1] + 1) >> 2);
    out[2 * i + 1] = (uint8_t)((in[i] * 3 + in[i + 1] + 2) >> 2);
  }
  out[2 * (n - 1)] = (uint8_t)((in[n - 1] * 3 + in[n - 2] + 1) >> 2);
  out[2 * n - 1] = in[n - 1];
}

// h2v2: vertical 3:1 column sums with the nearer row, then the same 3:1 across, in sixteenths.
void upsample_h2v2(const uint8_t* near_row, const uint8_t* far_row, int n, uint8_t* out) {
  std::vector<int> col(n);
  for (int i = 0; i < n; i++) col[i] = near_row[i] * 3 + far_row[i];
  if (n == 1) {
    out[0] = (uint8_t)((col[0] * 4 + 8) >> 4);
    out[1] = (uint8_t)((col[0] * 4 + 7) >> 4);
    return;
  }
  out[0] = (uint8_t)((col[0] * 4 + 8) >> 4);
  out[1] = (uint8_t)((col[0] * 3 + col[1] + 7) >> 4);
  for (int i = 1; i < n - 1; i++) {
    out[2 * i] = (uint8_t)((col[i] * 3 + col[i - 1] + 8) >> 4);
    out[2 * i + 1] = (uint8_t)((col[i] * 3 + col[i + 1] + 7) >> 4);
  }
  out[2 * (n - 1)] = (uint8_t)((col[n - 1] * 3 + col[n - 2] + 8) >> 4);
  out[2 * n - 1] = (uint8_t)((col[n - 1] * 4 + 7) >> 4);
}

}  // namespace

std::vector<uint8_t> decode_jpeg(const uint8_t* data, uint64_t size, int* width, int* height) {
  if (size < 4 || data[0] != 0xff || data[1] != 0xd8) bad("not a JPEG file (no SOI marker)");
  uint16_t qt[4][64];
  bool qt_defined[4] = {};
  Huffman dc[4], ac[4];
  std::vector<Component> comps;
  int W = 0, H = 0, hmax = 1, vmax = 1, restart = 0, scans = 0, adobe = -1, orientation = 1;
  bool progressive = false, frame = false, eoi = false;
  uint64_t p = 2;
  while (!eoi) {
    // Markers: 0xFF, optional 0xFF fill bytes, then the code.
    if (p >= size) bad(scans ? "truncated (no EOI marker after the image data)" : "truncated before any image data");
    if (data[p] != 0xff) bad("expected a marker at byte " + std::to_string(p));
    while (p < size && data[p] == 0xff) p++;
    if (p >= size) bad("truncated inside a marker");
    const int m = data[p++];
    if (m == 0xd9) {
      eoi = true;
      break;
    }
    if (m == 0xd8 || (m >= 0xd0 && m <= 0xd7) || m == 0x01) bad("an unexpected marker 0xFF" + std::to_string(m));
    if (size - p < 2) bad("truncated inside a marker segment");
    const uint32_t len = be16(data + p);
    if (len < 2 || size - p < len) bad("a marker segment runs past the end of the file");
    const uint8_t* s = data + p + 2;
    const uint32_t n = len - 2;
    p += len;
    if (m == 0xdb) {  // DQT
      for (uint32_t i = 0; i < n;) {
        const int pq = s[i] >> 4, tq = s[i] & 15;
        if (tq > 3) bad("a quantisation table id over 3");
        if (pq > 1) bad("a quantisation table precision over 16 bits");
        const uint32_t need = 1 + 64 * (pq + 1);
        if (n - i < need) bad("a DQT segment shorter than its tables");
        for (int k = 0; k < 64; k++) qt[tq][kZigzag[k]] = pq ? be16(s + i + 1 + 2 * k) : s[i + 1 + k];
        qt_defined[tq] = true;
        i += need;
      }
    } else if (m == 0xc4) {  // DHT
      for (uint32_t i = 0; i < n;) {
        if (n - i < 17) bad("a DHT segment shorter than its tables");
        const int tc = s[i] >> 4, th = s[i] & 15;
        if (tc > 1 || th > 3) bad("a Huffman table of class " + std::to_string(tc) + " id " + std::to_string(th));
        int total = 0;
        for (int k = 0; k < 16; k++) total += s[i + 1 + k];
        if (total > 256 || n - i - 17 < (uint32_t)total) bad("a DHT segment shorter than its tables");
        build_huffman(tc ? ac[th] : dc[th], s + i + 1, s + i + 17, total);
        i += 17 + total;
      }
    } else if (m == 0xdd) {  // DRI
      if (n < 2) bad("a DRI segment too short");
      restart = be16(s);
    } else if (m == 0xe1) {  // APP1: EXIF, for the orientation
      if (orientation == 1) orientation = exif_orientation(s, n);
    } else if (m == 0xee) {  // APP14 "Adobe": its transform flag says YCbCr or RGB
      if (n >= 12 && std::memcmp(s, "Adobe", 5) == 0) adobe = s[11];
    } else if (m == 0xc0 || m == 0xc1 || m == 0xc2) {  // SOF0/1/2: Huffman, sequential or progressive
      if (frame) bad("a second frame header");
      frame = true;
      progressive = m == 0xc2;
      if (n < 6) bad("a frame header too short");
      if (s[0] != 8)
        fail(ErrorCode::Unsupported, "JPEG image: " + std::to_string(s[0]) + "-bit samples (only 8-bit JPEG is read)");
      H = be16(s + 1);
      W = be16(s + 3);
      const int nc = s[5];
      if (H == 0) fail(ErrorCode::Unsupported, "JPEG image: the height is given by a DNL marker (not read)");
      if (W < 1 || W > kMaxImageSide || H > kMaxImageSide)
        bad("size " + std::to_string(W) + "x" + std::to_string(H) + " (sides must be 1.." +
            std::to_string(kMaxImageSide) + ")");
      if ((int64_t)W * H > kMaxImagePixels)
        bad("size " + std::to_string(W) + "x" + std::to_string(H) + " is over " + std::to_string(kMaxImagePixels) +
            " pixels");
      if (nc == 4) fail(ErrorCode::Unsupported, "JPEG image: CMYK / YCCK (4-component) JPEG is not read");
      if (nc != 1 && nc != 3)
        fail(ErrorCode::Unsupported, "JPEG image: " + std::to_string(nc) + " components (1 or 3 are read)");
      if (n < 6 + 3 * (uint32_t)nc) bad("a frame header too short");
      comps.resize(nc);
      for (int c = 0; c < nc; c++) {
        Component& k = comps[c];
        k.id = s[6 + 3 * c];
        k.h = s[7 + 3 * c] >> 4;
        k.v = s[7 + 3 * c] & 15;
        k.tq = s[8 + 3 * c];
        if (k.h < 1 || k.h > 4 || k.v < 1 || k.v > 4) bad("a sampling factor outside 1..4");
        if (k.tq > 3) bad("a quantisation table id over 3");
        for (int d = 0; d < c; d++)
          if (comps[d].id == k.id) bad("two components with the id " + std::to_string(k.id));
        hmax = std::max(hmax, k.h);
        vmax = std::max(vmax, k.v);
      }
      const int mcux = (W + 8 * hmax - 1) / (8 * hmax), mcuy = (H + 8 * vmax - 1) / (8 * vmax);
      for (Component& k : comps) {
        if (hmax % k.h || vmax % k.v)
          fail(ErrorCode::Unsupported, "JPEG image: sampling factors that are not integer ratios");
        k.bw = mcux * k.h;
        k.bh = mcuy * k.v;
        k.cw = (int)(((int64_t)W * k.h + hmax - 1) / hmax);
        k.ch = (int)(((int64_t)H * k.v + vmax - 1) / vmax);
        // k.coef: allocated at the component's first scan, once the file is seen to hold its data.
      }
    } else if (m >= 0xc3 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) {
      const bool arith = m >= 0xc9;
      const bool lossless = m == 0xc3 || m == 0xc7 || m == 0xcb || m == 0xcf;
      fail(ErrorCode::Unsupported, std::string("JPEG image: ") +
                                       (arith      ? "arithmetic coding"
                                        : lossless ? "lossless JPEG"
                                                   : "hierarchical JPEG") +
                                       " is not read (baseline and progressive Huffman JPEG are)");
    } else if (m == 0xdc) {
      fail(ErrorCode::Unsupported, "JPEG image: a DNL marker (not read)");
    } else if (m == 0xda) {  // SOS, then the entropy-coded data
      if (!frame) bad("a scan before the frame header");
      if (++scans > kMaxScans) bad("more than " + std::to_string(kMaxScans) + " scans");
      if (n < 1) bad("a scan header too short");
      const int ns = s[0];
      if (ns < 1 || ns > 4 || n < 4 + 2 * (uint32_t)ns) bad("a scan header with " + std::to_string(ns) + " components");
      std::vector<Component*> sc;
      for (int i = 0; i < ns; i++) {
        Component* k = nullptr;
        for (Component& c : comps)
          if (c.id == s[1 + 2 * i]) k = &c;
        if (!k) bad("a scan names component " + std::to_string(s[1 + 2 * i]) + ", which the frame lacks");
        for (Component* o : sc)
          if (o == k) bad("a scan names a component twice");
        k->td = s[2 + 2 * i] >> 4;
        k->ta = s[2 + 2 * i] & 15;
        if (k->td > 3 || k->ta > 3) bad("a Huffman table id over 3");
        sc.push_back(k);
      }
      const int Ss = s[1 + 2 * ns], Se = s[2 + 2 * ns], Ah = s[3 + 2 * ns] >> 4, Al = s[3 + 2 * ns] & 15;
      if (progressive) {
        if (Ss > Se || Se > 63 || (Ss == 0 && Se != 0) || (Ss > 0 && ns != 1) || Al > 13 || Ah > 13)
          bad("a progressive scan with invalid spectral selection or approximation");
      } else if (Ss != 0 || Se != 63 || Ah || Al) {
        bad("a sequential scan must cover coefficients 0..63");
      }
      int blocks_per_mcu = 0;
      for (Component* k : sc) blocks_per_mcu += k->h * k->v;
      if (ns > 1 && blocks_per_mcu > 10) bad("more than 10 blocks in an MCU");
      const bool dc_scan = Ss == 0;
      for (Component* k : sc) {
        if (dc_scan && !(progressive && Ah) && !dc[k->td].defined) bad("a scan uses an undefined DC Huffman table");
        if (Se > 0 && !ac[k->ta].defined) bad("a scan uses an undefined AC Huffman table");
        k->dc_pred = 0;
      }
      BitReader br{data, size, p};
      int eobrun = 0;
      // Decodes one block of component k at block (bx, by) for this scan.
      auto block = [&](Component& k, int bx, int by) {
        int16_t* c = &k.coef[((size_t)by * k.bw + bx) * 64];
        if (!progressive) {
          const int t = br.decode(dc[k.td]);
          k.dc_pred = (int16_t)(k.dc_pred + br.receive_extend(t));
          c[0] = (int16_t)k.dc_pred;
          const Huffman& a = ac[k.ta];
          for (int z = 1; z < 64;) {
            const int rs = br.decode(a), r = rs >> 4, sz = rs & 15;
            if (sz == 0) {
              if (r != 15) break;
              z += 16;
              continue;
            }
            z += r;
            if (z > 63) bad("a block's coefficients run past 64");
            c[kZigzag[z++]] = (int16_t)br.receive_extend(sz);
          }
          return;
        }
        if (dc_scan) {
          if (Ah == 0) {
            const int t = br.decode(dc[k.td]);
            k.dc_pred = (int16_t)(k.dc_pred + br.receive_extend(t));
            c[0] = (int16_t)(k.dc_pred * (1 << Al));
          } else if (br.bits(1)) {
            c[0] = (int16_t)(c[0] | (1 << Al));
          }
          return;
        }
        const Huffman& a = ac[k.ta];
        if (Ah == 0) {  // first pass over a band
          if (eobrun > 0) {
            eobrun--;
            return;
          }
          for (int z = Ss; z <= Se;) {
            const int rs = br.decode(a), r = rs >> 4, sz = rs & 15;
            if (sz == 0) {
              if (r < 15) {
                eobrun = (1 << r) - 1 + br.bits(r);
                break;
              }
              z += 16;
              continue;
            }
            z += r;
            if (z > Se) bad("a band's coefficients run past its end");
            c[kZigzag[z++]] = (int16_t)(br.receive_extend(sz) * (1 << Al));
          }
          return;
        }
        // Refinement of a band: one more bit of every known coefficient, new ones of +-1.
        const int p1 = 1 << Al, m1 = -(1 << Al);
        auto refine = [&](int16_t& v) {
          if (br.bits(1) && (v & p1) == 0) v = (int16_t)(v + (v >= 0 ? p1 : m1));
        };
        int z = Ss;
        if (eobrun == 0) {
          for (; z <= Se; z++) {
            const int rs = br.decode(a);
            int r = rs >> 4, sz = rs & 15, val = 0;
            if (sz) {
              if (sz != 1) bad("a refinement scan with a magnitude over 1");
              val = br.bits(1) ? p1 : m1;
            } else if (r != 15) {
              eobrun = (1 << r) + br.bits(r);
              break;
            }
            for (; z <= Se; z++) {
              int16_t& v = c[kZigzag[z]];
              if (v) refine(v);
              else if (--r < 0) break;
            }
            if (val) {
              if (z > Se) bad("a refinement runs past its band");
              c[kZigzag[z]] = (int16_t)val;
            }
          }
        }
        if (eobrun > 0) {
          for (; z <= Se; z++)
            if (c[kZigzag[z]]) refine(c[kZigzag[z]]);
          eobrun--;
        }
      };
      // MCUs: interleaved scans walk whole MCUs; a one-component scan walks that component's blocks.
      int64_t units_x, units_y;
      if (ns == 1) {
        units_x = (sc[0]->cw + 7) / 8;
        units_y = (sc[0]->ch + 7) / 8;
      } else {
        units_x = (W + 8 * hmax - 1) / (8 * hmax);
        units_y = (H + 8 * vmax - 1) / (8 * vmax);
      }
      // Every block of a scan with DC coefficients takes at least one bit, and a component's first
      // scan must have them: a few bytes claiming a huge image are refused before its memory is taken.
      for (Component* k : sc) {
        if (!k->coef.empty()) continue;
        if (!dc_scan) bad("an AC scan before the component's first DC scan");
        const int64_t blocks = ns == 1 ? units_x * units_y : units_x * units_y * k->h * k->v;
        if ((int64_t)(size - p) * 8 < blocks)
          bad("truncated: " + std::to_string(size - p) + " bytes of scan data cannot hold " + std::to_string(blocks) +
              " blocks");
        k->coef.assign((size_t)k->bw * k->bh * 64, 0);
      }
      int64_t todo = restart;
      int expect_rst = 0;
      for (int64_t uy = 0; uy < units_y; uy++)
        for (int64_t ux = 0; ux < units_x; ux++) {
          if (restart && todo == 0) {
            // The bits left before the marker are padding; the marker must be the next RSTn.
            if (!br.at_marker) {
              while (br.pos < size && data[br.pos] != 0xff) br.pos++;
            }
            uint64_t q = br.pos;
            while (q < size && data[q] == 0xff) q++;
            if (q >= size || data[q] != 0xd0 + expect_rst)
              bad("a restart marker is missing where the restart interval puts one");
            br.pos = q + 1;
            br.reset();
            expect_rst = (expect_rst + 1) & 7;
            eobrun = 0;
            for (Component* k : sc) k->dc_pred = 0;
            todo = restart;
          }
          if (ns == 1) block(*sc[0], (int)ux, (int)uy);
          else
            for (Component* k : sc)
              for (int v = 0; v < k->v; v++)
                for (int h = 0; h < k->h; h++) block(*k, (int)ux * k->h + h, (int)uy * k->v + v);
          todo--;
        }
      // Past the scan's data: on to the next marker (skipping any padding bytes).
      p = br.pos;
      while (p + 1 < size && !(data[p] == 0xff && data[p + 1] != 0 && (data[p + 1] < 0xd0 || data[p + 1] > 0xd7))) p++;
      if (p + 1 >= size) p = size;
    } else if (m == 0xc8 || m == 0xcc || (m >= 0xe0 && m <= 0xef) || m == 0xfe || m >= 0xf0) {
      // APPn, COM, JPG extensions and DAC without a frame: nothing to use
      if (m == 0xcc) fail(ErrorCode::Unsupported, "JPEG image: arithmetic coding is not read");
    } else {
      bad("an unknown marker 0xFF" + std::to_string(m));
    }
  }
  if (!frame || scans == 0) bad("no image data (frame header and scan)");

  // Each component's samples: dequantise, exact 2-D IDCT, level shift, clamp.
  static double T[8][8];
  static const bool ready = [] {
    for (int x = 0; x < 8; x++)
      for (int u = 0; u < 8; u++)
        T[x][u] = (u ? 0.5 : 0.5 / std::sqrt(2.0)) * std::cos((2 * x + 1) * u * 3.14159265358979323846 / 16);
    return true;
  }();
  (void)ready;
  std::vector<std::vector<uint8_t>> planes(comps.size());
  for (size_t ci = 0; ci < comps.size(); ci++) {
    Component& k = comps[ci];
    if (!qt_defined[k.tq]) bad("a component uses an undefined quantisation table");
    if (k.coef.empty()) bad("component " + std::to_string(k.id) + " has no scan");
    const int pw = k.bw * 8;
    planes[ci].assign((size_t)pw * k.bh * 8, 0);
    double f[64], tmp[64];
    for (int by = 0; by < k.bh; by++)
      for (int bx = 0; bx < k.bw; bx++) {
        const int16_t* c = &k.coef[((size_t)by * k.bw + bx) * 64];
        for (int i = 0; i < 64; i++) f[i] = (double)c[i] * qt[k.tq][i];
        for (int v = 0; v < 8; v++)
          for (int x = 0; x < 8; x++) {
            double a = 0;
            for (int u = 0; u < 8; u++) a += T[x][u] * f[v * 8 + u];
            tmp[v * 8 + x] = a;
          }
        uint8_t* out = &planes[ci][(size_t)by * 8 * pw + bx * 8];
        for (int y = 0; y < 8; y++)
          for (int x = 0; x < 8; x++) {
            double a = 0;
            for (int v = 0; v < 8; v++) a += T[y][v] * tmp[v * 8 + x];
            const double r = std::floor(a + 128.5);
            out[(size_t)y * pw + x] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
          }
      }
    std::vector<int16_t>().swap(k.coef);
  }

  // Upsample each component to the image's size, one output row at a time.
  std::vector<uint8_t> rgba((size_t)W * H * 4);
  std::vector<std::vector<uint8_t>> rows(comps.size(), std::vector<uint8_t>((size_t)W + 8 * hmax));
  const bool rgb = comps.size() == 3 &&
                   (adobe == 0 || (adobe < 0 && comps[0].id == 'R' && comps[1].id == 'G' && comps[2].id == 'B'));
  for (int y = 0; y < H; y++) {
    for (size_t ci = 0; ci < comps.size(); ci++) {
      const Component& k = comps[ci];
      const int fx = hmax / k.h, fy = vmax / k.v, pw = k.bw * 8;
      const uint8_t* plane = planes[ci].data();
      uint8_t* o = rows[ci].data();
      // As libjpeg: the triangle filters need more than 2 samples across, else samples repeat.
      if (fx == 2 && fy == 2 && k.cw > 2) {
        const int sy = y / 2, far = std::clamp(y % 2 ? sy + 1 : sy - 1, 0, k.ch - 1);
        upsample_h2v2(plane + (size_t)sy * pw, plane + (size_t)far * pw, k.cw, o);
      } else if (fx == 2 && fy == 1 && k.cw > 2) {
        upsample_h2v1(plane + (size_t)y * pw, k.cw, o);
      } else if (fx == 1 && fy == 2) {  // vertical triangle, in quarters
        const int sy = y / 2, far = std::clamp(y % 2 ? sy + 1 : sy - 1, 0, k.ch - 1);
        const uint8_t *a = plane + (size_t)sy * pw, *b = plane + (size_t)far * pw;
        for (int x = 0; x < W; x++) o[x] = (uint8_t)((a[x] * 3 + b[x] + 1 + (y % 2)) >> 2);
      } else {
        const uint8_t* in = plane + (size_t)(y / fy) * pw;
        for (int x = 0; x < W; x++) o[x] = in[x / fx];
      }
    }
    uint8_t* out = &rgba[(size_t)y * W * 4];
    if (comps.size() == 1) {
      for (int x = 0; x < W; x++) {
        out[x * 4] = out[x * 4 + 1] = out[x * 4 + 2] = rows[0][x];
        out[x * 4 + 3] = 255;
      }
      continue;
    }
    for (int x = 0; x < W; x++) {
      const int Y = rows[0][x], cb = rows[1][x] - 128, cr = rows[2][x] - 128;
      if (rgb) {
        out[x * 4] = (uint8_t)Y;
        out[x * 4 + 1] = rows[1][x];
        out[x * 4 + 2] = rows[2][x];
      } else {
        // libjpeg's fixed-point JFIF conversion (16 fraction bits, each term rounded as it does).
        const int r = Y + ((91881 * cr + 32768) >> 16);
        const int g = Y + ((-22554 * cb - 46802 * cr + 32768) >> 16);
        const int b = Y + ((116130 * cb + 32768) >> 16);
        out[x * 4] = (uint8_t)std::clamp(r, 0, 255);
        out[x * 4 + 1] = (uint8_t)std::clamp(g, 0, 255);
        out[x * 4 + 2] = (uint8_t)std::clamp(b, 0, 255);
      }
      out[x * 4 + 3] = 255;
    }
  }
  if (orientation > 1) return orient(rgba, W, H, orientation, width, height);
  *width = W;
  *height = H;
  return rgba;
}

}  // namespace qkv
