// DEFLATE decoding from RFC 1951: canonical Huffman codes decoded through a 9-bit lookup table
// with a bit-by-bit walk for longer codes; every read and back-reference checked.
#include "inflate.h"

#include <algorithm>
#include <cstring>

#include "../common.h"

namespace qkv {

namespace {

constexpr int kMaxBits = 15;
constexpr int kFastBits = 9;

struct BitReader {
  const uint8_t* data;
  size_t size, pos = 0;
  uint64_t buf = 0;
  int cnt = 0;      // bits in buf
  int padding = 0;  // zero bits appended past the end of the input (at the top of buf)
  const std::string& what;

  BitReader(const uint8_t* d, size_t s, const std::string& w) : data(d), size(s), what(w) {}

  void fill(int n) {
    while (cnt < n) {
      if (pos < size) buf |= (uint64_t)data[pos++] << cnt;
      else padding += 8;
      cnt += 8;
    }
  }
  // Called after consuming bits: reading into the padding means the stream was cut short.
  void check() const {
    if (padding > cnt) fail(ErrorCode::BadArgument, what + ": the compressed data is truncated");
  }
  uint32_t bits(int n) {
    if (n == 0) return 0;
    fill(n);
    const uint32_t v = (uint32_t)(buf & ((1ull << n) - 1));
    buf >>= n;
    cnt -= n;
    check();
    return v;
  }
  void align() {
    const int drop = cnt % 8;
    buf >>= drop;
    cnt -= drop;
  }
};

struct Huffman {
  uint16_t count[kMaxBits + 1] = {};
  uint16_t symbol[288] = {};
  uint16_t fast[1 << kFastBits] = {};  // (symbol << 4) | length, 0 when the code is longer
};

uint32_t reverse_bits(uint32_t v, int n) {
  uint32_t r = 0;
  for (int i = 0; i < n; i++) r = (r << 1) | ((v >> i) & 1);
  return r;
}

// Canonical code from code lengths. Over-subscribed sets are an error; incomplete ones are allowed
// (a single distance code is legal) and their unused codes fail when met.
void build(Huffman& h, const uint8_t* lengths, int n, const std::string& what) {
  h = Huffman{};
  for (int i = 0; i < n; i++) h.count[lengths[i]]++;
  h.count[0] = 0;
  int left = 1;
  for (int len = 1; len <= kMaxBits; len++) {
    left = left * 2 - h.count[len];
    if (left < 0) fail(ErrorCode::BadArgument, what + ": a Huffman code is over-subscribed");
  }
  uint16_t offs[kMaxBits + 2] = {};
  for (int len = 1; len <= kMaxBits; len++) offs[len + 1] = offs[len] + h.count[len];
  // The first code of each length: the canonical rule of RFC 1951 3.2.2.
  uint32_t next[kMaxBits + 1] = {};
  uint32_t code = 0;
  for (int len = 1; len <= kMaxBits; len++) {
    code = (code + h.count[len - 1]) << 1;
    next[len] = code;
  }
  for (int i = 0; i < n; i++) {
    const int len = lengths[i];
    if (!len) continue;
    h.symbol[offs[len]++] = (uint16_t)i;
    const uint32_t c = next[len]++;
    if (len <= kFastBits) {
      const uint32_t r = reverse_bits(c, len);
      for (uint32_t k = r; k < (1u << kFastBits); k += 1u << len) h.fast[k] = (uint16_t)((i << 4) | len);
    }
  }
}

int decode(BitReader& br, const Huffman& h) {
  br.fill(kFastBits);
  const uint16_t e = h.fast[br.buf & ((1u << kFastBits) - 1)];
  if (e) {
    br.buf >>= e & 15;
    br.cnt -= e & 15;
    br.check();
    return e >> 4;
  }
  // Codes are packed most significant bit first: walk the lengths, as in RFC 1951's definition.
  int code = 0, first = 0, index = 0;
  for (int len = 1; len <= kMaxBits; len++) {
    code |= (int)br.bits(1);
    const int count = h.count[len];
    if (code - first < count) return h.symbol[index + (code - first)];
    index += count;
    first = (first + count) << 1;
    code <<= 1;
  }
  fail(ErrorCode::BadArgument, br.what + ": an invalid Huffman code in the compressed data");
}

const uint16_t kLenBase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                               31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
const uint8_t kLenExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
const uint16_t kDistBase[30] = {1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
                                193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
const uint8_t kDistExtra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

}  // namespace

uint32_t crc32_update(uint32_t crc, const uint8_t* data, size_t size) {
  static uint32_t table[256];
  static const bool ready = [] {
    for (uint32_t n = 0; n < 256; n++) {
      uint32_t c = n;
      for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      table[n] = c;
    }
    return true;
  }();
  (void)ready;
  crc = ~crc;
  for (size_t i = 0; i < size; i++) crc = table[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

std::vector<uint8_t> zlib_inflate(const uint8_t* data, size_t size, size_t expected, const std::string& what) {
  auto bad = [&](const std::string& m) { fail(ErrorCode::BadArgument, what + ": " + m); };
  if (size < 2) bad("the compressed data is truncated");
  const int cmf = data[0], flg = data[1];
  if ((cmf & 15) != 8 || (cmf >> 4) > 7) bad("not a zlib stream with the deflate method");
  if ((cmf * 256 + flg) % 31) bad("the zlib header check fails");
  if (flg & 0x20) bad("the zlib stream asks for a preset dictionary (not allowed in PNG)");
  // DEFLATE expands at most 1032:1 (a 258-byte copy in 2 bits): a short stream claiming a huge
  // image is refused before the image's memory is taken.
  if ((uint64_t)size * 1032 + 1024 < (uint64_t)expected)
    bad("the compressed data (" + std::to_string(size) + " bytes) is too short for the image's " +
        std::to_string(expected) + " bytes");
  std::vector<uint8_t> out;
  out.reserve(expected);
  auto room = [&](size_t n) {
    if (out.size() + n > expected)
      bad("the compressed data holds more than the image's declared " + std::to_string(expected) + " bytes");
  };
  BitReader br(data + 2, size - 2, what);
  Huffman lit, dist;
  bool last = false;
  while (!last) {
    last = br.bits(1);
    const int type = (int)br.bits(2);
    if (type == 0) {
      br.align();
      const uint32_t len = br.bits(16), nlen = br.bits(16);
      if ((len ^ 0xffff) != nlen) bad("a stored block's length check fails");
      room(len);
      // The bit buffer is byte-aligned here: drain it, then copy the rest straight from the input.
      uint32_t n = len;
      while (n && br.cnt >= 8) {
        out.push_back((uint8_t)br.bits(8));
        n--;
      }
      if (n) {
        if (br.size - br.pos < n) bad("the compressed data is truncated");
        out.insert(out.end(), br.data + br.pos, br.data + br.pos + n);
        br.pos += n;
      }
      continue;
    }
    if (type == 3) bad("a block of the reserved type 3");
    uint8_t lengths[320];
    int nlit = 288, ndist = 30;
    if (type == 1) {
      for (int i = 0; i < 288; i++) lengths[i] = i < 144 ? 8 : i < 256 ? 9 : i < 280 ? 7 : 8;
      for (int i = 0; i < 30; i++) lengths[288 + i] = 5;
    } else {
      nlit = (int)br.bits(5) + 257;
      ndist = (int)br.bits(5) + 1;
      const int ncode = (int)br.bits(4) + 4;
      if (nlit > 286 || ndist > 30) bad("a dynamic block declares too many codes");
      static const uint8_t order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
      uint8_t cl[19] = {};
      for (int i = 0; i < ncode; i++) cl[order[i]] = (uint8_t)br.bits(3);
      Huffman lencode;
      build(lencode, cl, 19, what);
      int i = 0;
      while (i < nlit + ndist) {
        const int sym = decode(br, lencode);
        if (sym < 16) {
          lengths[i++] = (uint8_t)sym;
          continue;
        }
        int rep = 0;
        uint8_t v = 0;
        if (sym == 16) {
          if (i == 0) bad("a code length repeat with nothing before it");
          v = lengths[i - 1];
          rep = 3 + (int)br.bits(2);
        } else if (sym == 17) rep = 3 + (int)br.bits(3);
        else rep = 11 + (int)br.bits(7);
        if (i + rep > nlit + ndist) bad("code lengths run past their count");
        while (rep--) lengths[i++] = v;
      }
      if (lengths[256] == 0) bad("a dynamic block without an end-of-block code");
      // Distances start at index nlit: move them to 288 so both layouts read the same way.
      std::memmove(lengths + 288, lengths + nlit, ndist);
      std::memset(lengths + nlit, 0, 288 - nlit);
    }
    build(lit, lengths, nlit, what);
    build(dist, lengths + 288, ndist, what);
    for (;;) {
      const int sym = decode(br, lit);
      if (sym < 256) {
        room(1);
        out.push_back((uint8_t)sym);
        continue;
      }
      if (sym == 256) break;
      if (sym > 285) bad("an invalid length code");
      const size_t len = kLenBase[sym - 257] + br.bits(kLenExtra[sym - 257]);
      const int d = decode(br, dist);
      if (d >= 30) bad("an invalid distance code");
      const size_t back = kDistBase[d] + br.bits(kDistExtra[d]);
      if (back > out.size()) bad("a back-reference before the start of the data");
      room(len);
      const size_t from = out.size() - back;
      for (size_t k = 0; k < len; k++) out.push_back(out[from + k]);
    }
  }
  if (out.size() != expected)
    bad("the compressed data holds " + std::to_string(out.size()) + " bytes; the image needs " +
        std::to_string(expected));
  br.align();
  uint32_t adler_stored = 0;
  for (int k = 0; k < 4; k++) adler_stored = (adler_stored << 8) | br.bits(8);
  uint32_t a = 1, b = 0;
  for (size_t i = 0; i < out.size();) {
    const size_t end = std::min(out.size(), i + 5552);  // the largest run without overflow before the modulo
    for (; i < end; i++) {
      a += out[i];
      b += a;
    }
    a %= 65521;
    b %= 65521;
  }
  if (((b << 16) | a) != adler_stored) bad("the Adler-32 check of the decompressed data fails");
  return out;
}

}  // namespace qkv
