// libFuzzer target over the image decoders (PNG with its inflate, JPEG, PPM/PGM) through
// decode_image, as the CLIs and the JS API call it on untrusted files. A decoded image is then
// preprocessed a little (a 16 x 16 input), so its sides and buffer are used. Any crash,
// sanitizer report, leak, timeout or oversized allocation fails the run; a qkv::Error is the
// expected outcome for bad bytes.
//
// Seeds: run with QKV_FUZZ_WRITE_SEEDS=DIR to write small valid files built here (PNGs of several
// colour types, baseline and progressive JPEGs, a PPM) into DIR and exit.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common.h"
#include "vision/image.h"
#include "vision/inflate.h"

using namespace qkv;

namespace {

using Bytes = std::vector<uint8_t>;

void be32(Bytes& o, uint32_t v) {
  for (int k = 3; k >= 0; k--) o.push_back((uint8_t)(v >> (8 * k)));
}

void chunk(Bytes& o, const char* type, const Bytes& body) {
  be32(o, (uint32_t)body.size());
  Bytes tb(type, type + 4);
  tb.insert(tb.end(), body.begin(), body.end());
  o.insert(o.end(), tb.begin(), tb.end());
  be32(o, crc32_update(0, tb.data(), tb.size()));
}

// A PNG whose rows (filter byte + samples) go in one stored deflate block.
Bytes png(uint32_t w, uint32_t h, int depth, int ctype, const Bytes& rows, const Bytes& plte = {}) {
  Bytes o = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}, ihdr;
  be32(ihdr, w);
  be32(ihdr, h);
  ihdr.insert(ihdr.end(), {(uint8_t)depth, (uint8_t)ctype, 0, 0, 0});
  chunk(o, "IHDR", ihdr);
  if (!plte.empty()) chunk(o, "PLTE", plte);
  Bytes z = {0x78,
             0x01,
             0x01,
             (uint8_t)rows.size(),
             (uint8_t)(rows.size() >> 8),
             (uint8_t)~rows.size(),
             (uint8_t)(~rows.size() >> 8)};
  z.insert(z.end(), rows.begin(), rows.end());
  uint32_t a = 1, b = 0;
  for (uint8_t x : rows) {
    a = (a + x) % 65521;
    b = (b + a) % 65521;
  }
  be32(z, b << 16 | a);
  chunk(o, "IDAT", z);
  chunk(o, "IEND", {});
  return o;
}

void segment(Bytes& o, uint8_t marker, const Bytes& body) {
  o.insert(o.end(), {0xff, marker, (uint8_t)((body.size() + 2) >> 8), (uint8_t)(body.size() + 2)});
  o.insert(o.end(), body.begin(), body.end());
}

// A JPEG of flat 8 x 8 blocks: one-code Huffman tables (DC category 0, AC end-of-block), so each
// block is 2 bits of zeros (baseline) and the data is zero bytes padded with ones.
Bytes jpeg(int w, int h, int comps, int hs, bool progressive) {
  Bytes o = {0xff, 0xd8}, dqt = {0};
  for (int i = 0; i < 64; i++) dqt.push_back(1);
  segment(o, 0xdb, dqt);
  Bytes sof = {8, (uint8_t)(h >> 8), (uint8_t)h, (uint8_t)(w >> 8), (uint8_t)w, (uint8_t)comps};
  for (int c = 0; c < comps; c++) sof.insert(sof.end(), {(uint8_t)(c + 1), (uint8_t)(c == 0 ? hs << 4 | hs : 0x11), 0});
  segment(o, progressive ? 0xc2 : 0xc0, sof);
  for (int tc = 0; tc < 2; tc++) {
    Bytes dht = {(uint8_t)(tc << 4), 1};
    for (int i = 1; i < 16; i++) dht.push_back(0);
    dht.push_back(0);
    segment(o, 0xc4, dht);
  }
  const int mcus = ((w + 8 * hs - 1) / (8 * hs)) * ((h + 8 * hs - 1) / (8 * hs));
  auto scan = [&](const Bytes& head, int bits) {
    segment(o, 0xda, head);
    for (int i = 0; i < (bits + 7) / 8; i++)
      o.push_back(i == (bits + 7) / 8 - 1 && bits % 8 ? (uint8_t)(0xff >> (bits % 8)) : 0);
  };
  const int blocks = mcus * (hs * hs + comps - 1);
  if (!progressive) {
    Bytes head = {(uint8_t)comps};
    for (int c = 0; c < comps; c++) head.insert(head.end(), {(uint8_t)(c + 1), 0x00});
    head.insert(head.end(), {0, 63, 0});
    scan(head, blocks * 2);
  } else {
    Bytes head = {(uint8_t)comps};
    for (int c = 0; c < comps; c++) head.insert(head.end(), {(uint8_t)(c + 1), 0x00});
    head.insert(head.end(), {0, 0, 0});
    scan(head, blocks);
    scan({1, 1, 0x00, 1, 63, 0}, mcus * hs * hs);  // the first component's AC band: an end-of-band per block
  }
  o.insert(o.end(), {0xff, 0xd9});
  return o;
}

void write_seeds(const std::string& dir) {
  const std::vector<Bytes> seeds = {
      png(3, 2, 8, 2, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 255, 0, 128, 64, 32, 16, 8, 4, 2}),
      png(4, 2, 1, 3, {0, 0x50, 2, 0xa0}, {255, 0, 0, 0, 0, 255}),
      png(2, 2, 16, 4, {0, 1, 2, 3, 4, 5, 6, 7, 8, 4, 1, 2, 3, 4, 5, 6, 7, 8}),
      png(2, 1, 8, 6, {3, 10, 20, 30, 40, 50, 60, 70, 80}),
      jpeg(8, 8, 1, 1, false),
      jpeg(17, 9, 3, 2, false),
      jpeg(16, 16, 1, 1, true),
      {'P', '6', '\n', '2', ' ', '1', '\n', '2', '5', '5', '\n', 1, 2, 3, 4, 5, 6},
  };
  for (size_t i = 0; i < seeds.size(); i++) {
    std::ofstream f(dir + "/seed-" + std::to_string(i), std::ios::binary);
    f.write(reinterpret_cast<const char*>(seeds[i].data()), (std::streamsize)seeds[i].size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("QKV_FUZZ_WRITE_SEEDS")) {
    write_seeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    int w = 0, h = 0;
    const std::vector<uint8_t> rgba = decode_image(data, size, &w, &h);
    if ((int64_t)w * h <= 1 << 16) {  // preprocessing huge images would only measure the resampler
      ImagePreprocess p;
      p.size = 16;
      preprocess_image(rgba.data(), rgba.size(), w, h, p);
    }
  } catch (const Error&) {
  }
  return 0;
}
