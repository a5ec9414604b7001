// PNG and JPEG decoding against Debian's decoders: images generated here (random and structured
// pixels in PAM/PPM/PGM), encoded by netpbm (pnmtopng, pamtopng) and libjpeg-turbo (cjpeg) in
// every variant the decoders claim, then decoded by ImageMagick (through libpng) and libjpeg
// (djpeg) as the references. PNG must match exactly; JPEG within the IDCT's rounding (see kJpegTolerance). Bad
// input (every truncation, flipped bytes, oversized or hostile headers, a decompression bomb)
// must give a qkv::Error, never a crash. The tools come from scripts/setup.sh.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common.h"
#include "vision/image.h"
#include "vision/inflate.h"

using namespace qkv;

namespace {

const char* kMissing = "netpbm, libjpeg-turbo-progs or imagemagick missing (scripts/setup.sh installs them)";

bool have_tools() { return std::system("command -v pnmtopng pamtopng cjpeg djpeg convert >/dev/null 2>&1") == 0; }

// ImageMagick's own binary where Debian puts it (a wrapper earlier in PATH may be slower).
std::string convert() { return std::system("test -x /usr/bin/convert") == 0 ? "/usr/bin/convert" : "convert"; }

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/qkv-image-XXXXXX";
    path = mkdtemp(t) ? t : "";
  }
  ~TempDir() {
    if (!path.empty()) std::system(("rm -rf " + path).c_str());
  }
  std::string operator/(const std::string& f) const { return path + "/" + f; }
};

void write_file(const std::string& p, const std::vector<uint8_t>& d) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(d.data()), (std::streamsize)d.size());
}

std::vector<uint8_t> read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

void run(const std::string& cmd) { ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd; }

// A netpbm PAM (P7) file: depth channels of maxval (<= 255: one byte, else two bytes big-endian).
std::vector<uint8_t> pam(int w, int h, int depth, int maxval, const char* tupltype, const std::vector<int>& v) {
  std::string head = "P7\nWIDTH " + std::to_string(w) + "\nHEIGHT " + std::to_string(h) + "\nDEPTH " +
                     std::to_string(depth) + "\nMAXVAL " + std::to_string(maxval) + "\nTUPLTYPE " + tupltype +
                     "\nENDHDR\n";
  std::vector<uint8_t> out(head.begin(), head.end());
  for (int x : v) {
    if (maxval > 255) out.push_back((uint8_t)(x >> 8));
    out.push_back((uint8_t)x);
  }
  return out;
}

// Samples: smooth gradients, flat areas and noise, so every filter and code length gets used.
std::vector<int> samples(int w, int h, int depth, int maxval, uint32_t seed, int colours = 0) {
  std::mt19937 rng(seed);
  std::vector<int> pal;
  for (int i = 0; i < colours * depth; i++) pal.push_back((int)(rng() % (maxval + 1)));
  std::vector<int> v;
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      const int pick = colours ? (int)(rng() % colours) : 0;
      for (int c = 0; c < depth; c++) {
        if (colours) v.push_back(pal[pick * depth + c]);
        else if ((x / 8 + y / 8) % 3 == 0) v.push_back((int)(rng() % (maxval + 1)));
        else if ((x / 8 + y / 8) % 3 == 1) v.push_back((int)((int64_t)maxval * ((x * (c + 1) + y * 2) % 64) / 63));
        else v.push_back(maxval * (c & 1));
      }
    }
  return v;
}

// A binary PPM/PGM (as djpeg writes them) read to RGBA.
std::vector<uint8_t> read_netpbm_rgba(const std::vector<uint8_t>& f, int* w, int* h) {
  std::string text(f.begin(), f.begin() + std::min<size_t>(f.size(), 512));
  int depth = 0, maxval = 0;
  size_t data = 0;
  if (text.compare(0, 2, "P7") == 0) {
    auto field = [&](const std::string& k) {
      const size_t at = text.find("\n" + k + " ");
      return at == std::string::npos ? -1 : std::atoi(text.c_str() + at + k.size() + 2);
    };
    *w = field("WIDTH");
    *h = field("HEIGHT");
    depth = field("DEPTH");
    maxval = field("MAXVAL");
    data = text.find("ENDHDR\n") + 7;
  } else {
    int n = 0;
    char kind = 0;
    EXPECT_EQ(std::sscanf(text.c_str(), "P%c %d %d %d%n", &kind, w, h, &maxval, &n), 4);
    depth = kind == '6' ? 3 : 1;
    data = (size_t)n + 1;
  }
  const int bps = maxval > 255 ? 2 : 1;
  EXPECT_EQ(f.size(), data + (size_t)*w * *h * depth * bps);
  std::vector<uint8_t> rgba((size_t)*w * *h * 4);
  for (size_t i = 0; i < (size_t)*w * *h; i++) {
    int s[4];
    for (int c = 0; c < depth; c++) {
      const uint8_t* q = &f[data + (i * depth + c) * bps];
      const int v = bps == 2 ? q[0] << 8 | q[1] : q[0];
      s[c] = bps == 2 ? v >> 8 : v * 255 / maxval;
    }
    const bool grey = depth <= 2;
    for (int c = 0; c < 3; c++) rgba[i * 4 + c] = (uint8_t)s[grey ? 0 : c];
    rgba[i * 4 + 3] = (uint8_t)(depth == 2 ? s[1] : depth == 4 ? s[3] : 255);
  }
  return rgba;
}

struct PngCase {
  const char* name;
  int depth, maxval, colours;
  const char* tupltype;
  std::string encode;  // the command, IN and OUT substituted
  int bit_depth, colour_type, interlace;
};

std::string subst(std::string cmd, const std::string& in, const std::string& out) {
  cmd.replace(cmd.find("IN"), 2, in);
  cmd.replace(cmd.find("OUT"), 3, out);
  return cmd;
}

TEST(ImageCodecs, PngMatchesLibpngInEveryColourTypeAndDepth) {
  if (!have_tools()) GTEST_SKIP() << kMissing;
  TempDir dir;
  const std::vector<PngCase> cases = {
      {"grey 1-bit", 1, 1, 0, "GRAYSCALE", "pnmtopng IN > OUT", 1, 0, 0},
      {"grey 2-bit interlaced", 1, 3, 0, "GRAYSCALE", "pnmtopng -interlace IN > OUT", 2, 0, 1},
      {"grey 4-bit", 1, 15, 0, "GRAYSCALE", "pnmtopng -sub IN > OUT", 4, 0, 0},
      {"grey 8-bit", 1, 255, 0, "GRAYSCALE", "pnmtopng -paeth IN > OUT", 8, 0, 0},
      {"grey 16-bit interlaced", 1, 65535, 0, "GRAYSCALE", "pnmtopng -interlace -avg IN > OUT", 16, 0, 1},
      {"grey 8-bit transparent key", 1, 255, 0, "GRAYSCALE", "pnmtopng -transparent=rgb:ff/ff/ff IN > OUT", 8, 0, 0},
      {"grey+alpha 8-bit", 2, 255, 0, "GRAYSCALE_ALPHA", "pamtopng IN > OUT", 8, 4, 0},
      {"grey+alpha 16-bit interlaced", 2, 65535, 0, "GRAYSCALE_ALPHA", "pamtopng -interlace IN > OUT", 16, 4, 1},
      {"rgb 8-bit stored blocks", 3, 255, 0, "RGB", "pnmtopng -force -compression=0 IN > OUT", 8, 2, 0},
      {"rgb 8-bit up filter", 3, 255, 0, "RGB", "pnmtopng -force -up IN > OUT", 8, 2, 0},
      {"rgb 8-bit interlaced, fastest", 3, 255, 0, "RGB", "pnmtopng -force -interlace -compression=1 IN > OUT", 8, 2,
       1},
      {"rgb 16-bit", 3, 65535, 0, "RGB", "pnmtopng -force IN > OUT", 16, 2, 0},
      {"rgb 8-bit transparent key", 3, 255, 0, "RGB", "pnmtopng -force -transparent=rgb:00/ff/00 IN > OUT", 8, 2, 0},
      {"rgba 8-bit", 4, 255, 0, "RGB_ALPHA", "pamtopng IN > OUT", 8, 6, 0},
      {"rgba 16-bit interlaced", 4, 65535, 0, "RGB_ALPHA", "pamtopng -interlace IN > OUT", 16, 6, 1},
      {"palette 1-bit", 3, 255, 2, "RGB", "pnmtopng IN > OUT", 1, 3, 0},
      {"palette 2-bit interlaced", 3, 255, 4, "RGB", "pnmtopng -interlace IN > OUT", 2, 3, 1},
      {"palette 4-bit", 3, 255, 13, "RGB", "pnmtopng IN > OUT", 4, 3, 0},
      {"palette 8-bit with tRNS", 3, 255, 200, "RGB", "pnmtopng -transparent=rgb:00/00/00 IN > OUT", 8, 3, 0},
  };
  const int sizes[][2] = {{1, 1}, {37, 29}, {64, 3}, {5, 70}};
  int n = 0;
  for (const PngCase& c : cases)
    for (const auto& wh : sizes) {
      const int w = wh[0], h = wh[1];
      std::vector<int> v = samples(w, h, c.depth, c.maxval, 1000 + n++, c.colours);
      if (std::string(c.name).find("transparent") != std::string::npos ||
          std::string(c.name).find("tRNS") != std::string::npos)
        for (size_t i = 0; i < v.size(); i += (size_t)c.depth * 5)  // some pixels take the key colour
          for (int k = 0; k < c.depth; k++) v[i + k] = c.depth == 1 ? 255 : k == 1 && c.colours == 0 ? 255 : 0;
      const std::string in = dir / "in.pam", png = dir / "out.png", ref = dir / "ref.rgba";
      write_file(in, pam(w, h, c.depth, c.maxval, c.tupltype, v));
      run(subst(c.encode, in, png) + " 2>/dev/null");
      run(convert() + " " + png + " -depth 16 -endian MSB rgba:" + ref);
      const std::vector<uint8_t> file = read_file(png);
      ASSERT_GT(file.size(), 29u);
      SCOPED_TRACE(std::string(c.name) + " " + std::to_string(w) + "x" + std::to_string(h));
      // The encoder made the variant this case is about (tiny images may get a smaller depth).
      if (w > 1) {
        EXPECT_EQ(file[24], c.bit_depth);
        EXPECT_EQ(file[25], c.colour_type);
      }
      EXPECT_EQ(file[28], c.interlace);
      // ImageMagick's raw 16-bit RGBA: 16-bit samples keep their high byte, smaller depths were
      // scaled by 65535 / maxval, which the high byte turns into 255 / maxval exactly.
      const std::vector<uint8_t> ref16 = read_file(ref);
      int dw = 0, dh = 0;
      const std::vector<uint8_t> got = decode_image(file.data(), file.size(), &dw, &dh);
      ASSERT_EQ(dw, w);
      ASSERT_EQ(dh, h);
      ASSERT_EQ(ref16.size(), got.size() * 2);
      std::vector<uint8_t> want(got.size());
      for (size_t i = 0; i < want.size(); i++) want[i] = ref16[i * 2];
      size_t diff = 0;
      for (size_t i = 0; i < got.size(); i++) diff += got[i] != want[i];
      EXPECT_EQ(diff, 0u) << "bytes that differ from libpng's decode";
    }
}

// djpeg -dct float computes the IDCT in single precision; ours is exact (double), so a sample can
// round the other way at a .5 tie, and upsampling and colour conversion can carry that 1 to 2.
constexpr int kJpegTolerance = 2;

TEST(ImageCodecs, JpegMatchesDjpegWithinIdctRounding) {
  if (!have_tools()) GTEST_SKIP() << kMissing;
  TempDir dir;
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"4:4:4 baseline", "cjpeg -sample 1x1 -quality 90"},
      {"4:2:2 baseline", "cjpeg -sample 2x1 -quality 75"},
      {"4:2:0 baseline", "cjpeg -sample 2x2 -quality 50"},
      {"4:2:0 optimised Huffman, restart every MCU", "cjpeg -sample 2x2 -optimize -restart 1B"},
      {"4:2:2 restart every row", "cjpeg -sample 2x1 -restart 1"},
      {"greyscale", "cjpeg -grayscale -quality 95"},
      {"greyscale progressive", "cjpeg -grayscale -progressive"},
      {"4:4:4 progressive", "cjpeg -sample 1x1 -progressive -quality 85"},
      {"4:2:0 progressive, restarts", "cjpeg -sample 2x2 -progressive -restart 2B"},
      {"4:2:2 progressive, quality 100", "cjpeg -sample 2x1 -progressive -quality 100"},
      {"4:4:0", "cjpeg -sample 1x2"},
  };
  const int sizes[][2] = {{1, 1}, {8, 8}, {37, 29}, {64, 17}, {3, 50}};
  int n = 0;
  for (const auto& [name, cmd] : cases)
    for (const auto& wh : sizes) {
      const int w = wh[0], h = wh[1];
      const std::vector<int> v = samples(w, h, 3, 255, 77 + n++);
      const std::string in = dir / "in.ppm", jpg = dir / "out.jpg", ref = dir / "ref.pnm";
      std::string head = "P6\n" + std::to_string(w) + " " + std::to_string(h) + "\n255\n";
      std::vector<uint8_t> ppm(head.begin(), head.end());
      for (int x : v) ppm.push_back((uint8_t)x);
      write_file(in, ppm);
      run(cmd + " " + in + " > " + jpg);
      run("djpeg -dct float -pnm " + jpg + " > " + ref);
      SCOPED_TRACE(std::string(name) + " " + std::to_string(w) + "x" + std::to_string(h));
      const std::vector<uint8_t> file = read_file(jpg);
      int rw = 0, rh = 0, dw = 0, dh = 0;
      const std::vector<uint8_t> want = read_netpbm_rgba(read_file(ref), &rw, &rh);
      const std::vector<uint8_t> got = decode_image(file.data(), file.size(), &dw, &dh);
      ASSERT_EQ(dw, rw);
      ASSERT_EQ(dh, rh);
      int worst = 0;
      size_t off = 0;
      for (size_t i = 0; i < got.size(); i++) {
        const int d = std::abs((int)got[i] - want[i]);
        worst = std::max(worst, d);
        off += d != 0;
      }
      EXPECT_LE(worst, kJpegTolerance);
      EXPECT_LE(off, got.size() / 200 + 4) << "more than 0.5% of the bytes differ from djpeg's";
    }
}

// An APP1 EXIF segment holding only the orientation tag, in either byte order (TIFF 6.0, EXIF 2.3).
std::vector<uint8_t> exif_app1(int orientation, bool little_endian) {
  std::vector<uint8_t> t;
  auto u16 = [&](uint32_t v) {
    if (little_endian) t.insert(t.end(), {(uint8_t)v, (uint8_t)(v >> 8)});
    else t.insert(t.end(), {(uint8_t)(v >> 8), (uint8_t)v});
  };
  auto u32 = [&](uint32_t v) {
    if (little_endian) {
      u16(v & 0xffff);
      u16(v >> 16);
    } else {
      u16(v >> 16);
      u16(v & 0xffff);
    }
  };
  t.insert(t.end(), {(uint8_t)(little_endian ? 'I' : 'M'), (uint8_t)(little_endian ? 'I' : 'M')});
  u16(42);
  u32(8);  // IFD0 right after the header
  u16(2);  // two entries: XResolution-like filler first, then Orientation
  u16(0x011a), u16(5), u32(1), u32(0);
  u16(0x0112), u16(3), u32(1), u16((uint32_t)orientation), u16(0);
  u32(0);
  std::vector<uint8_t> seg = {0xff, 0xe1, 0, 0, 'E', 'x', 'i', 'f', 0, 0};
  seg.insert(seg.end(), t.begin(), t.end());
  seg[2] = (uint8_t)((seg.size() - 2) >> 8);
  seg[3] = (uint8_t)(seg.size() - 2);
  return seg;
}

TEST(ImageCodecs, JpegExifOrientationTurnsThePictureUpright) {
  if (!have_tools()) GTEST_SKIP() << kMissing;
  TempDir dir;
  const int w = 13, h = 7;
  const std::vector<int> v = samples(w, h, 3, 255, 21);
  std::string head = "P6\n13 7\n255\n";
  std::vector<uint8_t> ppm(head.begin(), head.end());
  for (int x : v) ppm.push_back((uint8_t)x);
  write_file(dir / "in.ppm", ppm);
  run("cjpeg -quality 95 " + (dir / "in.ppm") + " > " + (dir / "a.jpg"));
  run("djpeg -dct float -pnm " + (dir / "a.jpg") + " > " + (dir / "a.ppm"));
  int rw = 0, rh = 0;
  const std::vector<uint8_t> stored = read_netpbm_rgba(read_file(dir / "a.ppm"), &rw, &rh);
  const std::vector<uint8_t> plain = read_file(dir / "a.jpg");
  // Where the displayed pixel (x, y) comes from, per the EXIF table (row 0 / column 0 placement).
  auto source = [&](int o, int x, int y, int* sx, int* sy) {
    const int tw = o >= 5 ? h : w, th = o >= 5 ? w : h;                      // displayed sides
    const int fx = (o == 2 || o == 3 || o == 6 || o == 7) ? tw - 1 - x : x;  // undo the horizontal flip
    const int fy = (o == 3 || o == 4 || o == 7 || o == 8) ? th - 1 - y : y;  // undo the vertical flip
    // Orientations 5..8 store the picture transposed (after the flips above).
    *sx = o >= 5 ? fy : fx;
    *sy = o >= 5 ? fx : fy;
  };
  for (int o = 1; o <= 8; o++)
    for (bool le : {false, true}) {
      SCOPED_TRACE("orientation " + std::to_string(o) + (le ? " II" : " MM"));
      std::vector<uint8_t> f = {0xff, 0xd8};
      const std::vector<uint8_t> app1 = exif_app1(o, le);
      f.insert(f.end(), app1.begin(), app1.end());
      f.insert(f.end(), plain.begin() + 2, plain.end());
      int dw = 0, dh = 0;
      const std::vector<uint8_t> got = decode_image(f.data(), f.size(), &dw, &dh);
      ASSERT_EQ(dw, o >= 5 ? h : w);
      ASSERT_EQ(dh, o >= 5 ? w : h);
      int worst = 0;
      for (int y = 0; y < dh; y++)
        for (int x = 0; x < dw; x++) {
          int sx = 0, sy = 0;
          source(o, x, y, &sx, &sy);
          for (int c = 0; c < 4; c++)
            worst = std::max(worst,
                             std::abs((int)got[((size_t)y * dw + x) * 4 + c] - stored[((size_t)sy * w + sx) * 4 + c]));
        }
      EXPECT_LE(worst, kJpegTolerance);
    }
}

std::string error_of(const std::vector<uint8_t>& f, ErrorCode* code = nullptr) {
  try {
    int w = 0, h = 0;
    decode_image(f.data(), f.size(), &w, &h);
  } catch (const Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "";
}

TEST(ImageCodecs, UnsupportedJpegKindsAreNamed) {
  if (!have_tools()) GTEST_SKIP() << kMissing;
  TempDir dir;
  const std::vector<int> v = samples(16, 16, 3, 255, 5);
  std::string head = "P6\n16 16\n255\n";
  std::vector<uint8_t> ppm(head.begin(), head.end());
  for (int x : v) ppm.push_back((uint8_t)x);
  write_file(dir / "in.ppm", ppm);
  run("cjpeg -arithmetic " + (dir / "in.ppm") + " > " + (dir / "a.jpg"));
  ErrorCode code = ErrorCode::Internal;
  EXPECT_NE(error_of(read_file(dir / "a.jpg"), &code).find("arithmetic coding"), std::string::npos);
  EXPECT_EQ(code, ErrorCode::Unsupported);
  {
    run(convert() + " " + (dir / "in.ppm") + " -colorspace CMYK " + (dir / "c.jpg"));
    EXPECT_NE(error_of(read_file(dir / "c.jpg"), &code).find("CMYK"), std::string::npos);
    EXPECT_EQ(code, ErrorCode::Unsupported);
  }
}

// A PNG made of chunks (CRCs computed), to build hostile files by hand.
void chunk(std::vector<uint8_t>& out, const char* type, const std::vector<uint8_t>& body) {
  const uint32_t n = (uint32_t)body.size();
  for (int k = 3; k >= 0; k--) out.push_back((uint8_t)(n >> (8 * k)));
  std::vector<uint8_t> tb(type, type + 4);
  tb.insert(tb.end(), body.begin(), body.end());
  out.insert(out.end(), tb.begin(), tb.end());
  const uint32_t crc = crc32_update(0, tb.data(), tb.size());
  for (int k = 3; k >= 0; k--) out.push_back((uint8_t)(crc >> (8 * k)));
}

std::vector<uint8_t> png_file(uint32_t w, uint32_t h, int depth, int ctype, const std::vector<uint8_t>& zlib) {
  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr;
  for (uint32_t v : {w, h})
    for (int k = 3; k >= 0; k--) ihdr.push_back((uint8_t)(v >> (8 * k)));
  ihdr.insert(ihdr.end(), {(uint8_t)depth, (uint8_t)ctype, 0, 0, 0});
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", zlib);
  chunk(out, "IEND", {});
  return out;
}

// A zlib stream of one fixed-Huffman block: a literal 0, then `copies` back-references of 258
// bytes at distance 1 (each 13 bits: a 1 KB stream stands for ~160 KB).
std::vector<uint8_t> zlib_bomb(size_t copies) {
  std::vector<uint8_t> out = {0x78, 0x01};
  uint32_t acc = 0;
  int n = 0;
  auto put = [&](uint32_t v, int bits) {  // LSB first
    acc |= v << n;
    n += bits;
    while (n >= 8) {
      out.push_back((uint8_t)acc);
      acc >>= 8;
      n -= 8;
    }
  };
  auto huff = [&](uint32_t code, int len) {  // Huffman codes go most significant bit first
    for (int i = len - 1; i >= 0; i--) put((code >> i) & 1, 1);
  };
  put(1, 1);
  put(1, 2);
  huff(0x30, 8);  // literal 0
  for (size_t i = 0; i < copies; i++) {
    huff(0xc5, 8);  // length code 285 (258 bytes): 11000101
    huff(0, 5);     // distance code 0 (1 byte)
  }
  huff(0, 7);  // end of block
  put(0, 7);
  return out;
}

TEST(ImageCodecs, HostilePngHeadersAndStreamsGiveClearErrors) {
  ErrorCode code = ErrorCode::Internal;
  // Sides and pixel count limits, before any allocation.
  EXPECT_NE(error_of(png_file(20000, 1, 8, 0, zlib_bomb(1)), &code).find("sides must be 1..16384"), std::string::npos);
  EXPECT_EQ(code, ErrorCode::BadArgument);
  EXPECT_NE(error_of(png_file(16384, 16384, 8, 0, zlib_bomb(1))).find("pixels"), std::string::npos);
  EXPECT_NE(error_of(png_file(0, 5, 8, 0, zlib_bomb(1))).find("sides"), std::string::npos);
  EXPECT_NE(error_of(png_file(4, 4, 3, 2, zlib_bomb(1))).find("bit depth 3"), std::string::npos);
  // A bomb: a 16x16 grey image (272 bytes of rows) whose stream would expand to ~26 MB.
  EXPECT_NE(error_of(png_file(16, 16, 8, 0, zlib_bomb(100000))).find("more than the image's declared 272 bytes"),
            std::string::npos);
  // A few bytes claiming 8192 x 8192 RGBA: refused before 256 MiB are taken.
  EXPECT_NE(error_of(png_file(8192, 8192, 8, 6, zlib_bomb(1))).find("too short for the image's"), std::string::npos);
  // Too little data for the declared rows.
  EXPECT_NE(error_of(png_file(64, 64, 8, 0, zlib_bomb(1))).find("the image needs"), std::string::npos);
  // A broken CRC names its chunk.
  std::vector<uint8_t> f = png_file(2, 2, 8, 0, zlib_bomb(0));
  f[30] ^= 1;
  EXPECT_NE(error_of(f).find("CRC of chunk IHDR"), std::string::npos);
  // Neither format.
  EXPECT_NE(error_of({'G', 'I', 'F', '8', '9', 'a'}, &code).find("PNG, JPEG"), std::string::npos);
  EXPECT_EQ(code, ErrorCode::BadArgument);
  EXPECT_NE(error_of({}).find("empty"), std::string::npos);
}

TEST(ImageCodecs, EveryTruncationAndFlippedByteIsAnErrorNotACrash) {
  if (!have_tools()) GTEST_SKIP() << kMissing;
  TempDir dir;
  const std::vector<int> v = samples(19, 13, 3, 255, 9);
  std::string head = "P6\n19 13\n255\n";
  std::vector<uint8_t> ppm(head.begin(), head.end());
  for (int x : v) ppm.push_back((uint8_t)x);
  write_file(dir / "in.ppm", ppm);
  run("pnmtopng -force -interlace " + (dir / "in.ppm") + " > " + (dir / "a.png") + " 2>/dev/null");
  run("cjpeg -sample 2x2 -restart 1B " + (dir / "in.ppm") + " > " + (dir / "b.jpg"));
  run("cjpeg -progressive " + (dir / "in.ppm") + " > " + (dir / "c.jpg"));
  std::mt19937 rng(3);
  for (const char* name : {"a.png", "b.jpg", "c.jpg"}) {
    const std::vector<uint8_t> file = read_file(dir / name);
    SCOPED_TRACE(name);
    for (size_t n = 0; n < file.size(); n++) {
      std::vector<uint8_t> cut(file.begin(), file.begin() + n);
      ErrorCode code = ErrorCode::Internal;
      const std::string e = error_of(cut, &code);
      EXPECT_FALSE(e.empty()) << "a " << n << "-byte prefix decoded";
      EXPECT_EQ(code, ErrorCode::BadArgument) << e;
    }
    for (int t = 0; t < 300; t++) {
      std::vector<uint8_t> bad = file;
      bad[rng() % bad.size()] ^= (uint8_t)(1 + rng() % 255);
      try {
        int w = 0, h = 0;
        decode_image(bad.data(), bad.size(), &w, &h);
      } catch (const Error&) {
      }
    }
  }
}

TEST(ImageCodecs, JpegClaimingAHugeImageIsRefusedBeforeItsMemory) {
  if (!have_tools()) GTEST_SKIP() << kMissing;
  TempDir dir;
  std::string head = "P6\n16 16\n255\n";
  std::vector<uint8_t> ppm(head.begin(), head.end());
  for (int x : samples(16, 16, 3, 255, 4)) ppm.push_back((uint8_t)x);
  write_file(dir / "in.ppm", ppm);
  for (const char* opts : {"-sample 2x2", "-progressive"}) {
    run(std::string("cjpeg ") + opts + " " + (dir / "in.ppm") + " > " + (dir / "a.jpg"));
    std::vector<uint8_t> f = read_file(dir / "a.jpg");
    size_t sof = 2;
    while (sof + 9 < f.size() && !(f[sof] == 0xff && (f[sof + 1] == 0xc0 || f[sof + 1] == 0xc2))) sof++;
    ASSERT_LT(sof + 9, f.size());
    f[sof + 5] = 0x10, f[sof + 6] = 0x00;  // height 4096
    f[sof + 7] = 0x40, f[sof + 8] = 0x00;  // width 16384
    ErrorCode code = ErrorCode::Internal;
    EXPECT_NE(error_of(f, &code).find("cannot hold"), std::string::npos) << opts;
    EXPECT_EQ(code, ErrorCode::BadArgument);
  }
}

}  // namespace
