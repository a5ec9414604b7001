// zlib / DEFLATE decompression (RFC 1950, RFC 1951) for PNG image data: stored, fixed and dynamic
// Huffman blocks, the Adler-32 check, and an output bound so a decompression bomb stops at once.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qkv {

// A zlib stream -> exactly `expected` bytes. Throws Error(BadArgument) "<what>: ..." when the
// stream is corrupt or truncated, fails its Adler-32 check, or decompresses to more or fewer bytes
// than expected (decoding stops as soon as the output would exceed `expected`).
std::vector<uint8_t> zlib_inflate(const uint8_t* data, size_t size, size_t expected, const std::string& what);

// The CRC-32 of ISO 3309 / PNG (polynomial 0xedb88320) of `size` bytes, continuing from `crc`.
uint32_t crc32_update(uint32_t crc, const uint8_t* data, size_t size);

}  // namespace qkv
