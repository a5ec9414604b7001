// safetensors as the format defines it: little-endian u64 N, N bytes of a JSON object
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data
// section; offsets are relative to its start and every byte of it belongs to one tensor.
#include "safetensors.h"

#include <algorithm>
#include <cstring>

#include "../common.h"
#include "../json.h"

namespace qkv {

namespace {
// A JSON number that must be a non-negative integer below 2^53 (what JSON can hold exactly).
uint64_t json_uint(const Json& v, const std::string& what) {
  if (v.k != Json::Num || v.s.empty() || v.s.size() > 16 || v.s.find_first_not_of("0123456789") != std::string::npos)
    fail(ErrorCode::BadModel, what + " must be a non-negative integer");
  return std::stoull(v.s);
}
}  // namespace

uint64_t SafetensorsTensor::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

std::vector<SafetensorsTensor> parse_safetensors(const Blob& blob, const std::string& what) {
  auto bad = [&](const std::string& m) -> void { fail(ErrorCode::BadModel, what + ": " + m); };
  const uint8_t* d = blob.data();
  const uint64_t size = blob.size();
  if (size < 8) bad("truncated: " + std::to_string(size) + " bytes, less than the 8-byte header length");
  uint64_t n;
  std::memcpy(&n, d, 8);
  if (n > size - 8)
    bad("the header says it is " + std::to_string(n) + " bytes, but the file holds " + std::to_string(size - 8) +
        " after the length");
  if (n > (uint64_t)100 << 20) bad("the header is " + std::to_string(n) + " bytes, over the 100 MB limit");
  const Json h = parse_json(std::string(reinterpret_cast<const char*>(d + 8), (size_t)n), (what + " header").c_str(),
                            ErrorCode::BadModel);
  if (h.k != Json::Obj) bad("the header is not a JSON object");
  const uint8_t* data = d + 8 + n;
  const uint64_t data_size = size - 8 - n;
  std::vector<SafetensorsTensor> out;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const auto& kv : h.obj) {
    if (kv.first == "__metadata__") continue;
    const std::string tn = "tensor " + kv.first;
    const Json& t = kv.second;
    if (t.k != Json::Obj) bad(tn + " is not a JSON object");
    const Json* dt = t.get("dtype");
    const Json* sh = t.get("shape");
    const Json* off = t.get("data_offsets");
    if (!dt || dt->k != Json::Str) bad(tn + " has no dtype string");
    if (!sh || sh->k != Json::Arr) bad(tn + " has no shape array");
    if (!off || off->k != Json::Arr || off->arr.size() != 2) bad(tn + " has no data_offsets [begin, end]");
    SafetensorsTensor st;
    st.name = kv.first;
    uint64_t elem = 0;
    st.dtype = dt->s;
    if (dt->s == "F32") st.type = QType::F32, elem = 4;
    else if (dt->s == "F16") st.type = QType::F16, elem = 2;
    else if (dt->s == "BF16") st.type = QType::BF16, elem = 2;
    else {
      static const std::pair<const char*, uint64_t> kOther[] = {{"BOOL", 1},    {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1},
                                                                {"F8_E5M2", 1}, {"I16", 2}, {"U16", 2}, {"I32", 4},
                                                                {"U32", 4},     {"I64", 8}, {"U64", 8}, {"F64", 8}};
      for (const auto& o : kOther)
        if (dt->s == o.first) elem = o.second;
      if (!elem)
        fail(ErrorCode::Unsupported,
             what + ": " + tn + " has dtype '" + dt->s + "', which safetensors does not define");
      st.supported = false;
    }
    if (sh->arr.size() > 4) bad(tn + " has " + std::to_string(sh->arr.size()) + " dimensions (at most 4)");
    uint64_t count = 1;
    for (const Json& x : sh->arr) {
      const uint64_t v = json_uint(x, what + ": " + tn + " shape");
      if (v > ((uint64_t)1 << 40) || (v && count > ((uint64_t)1 << 40) / v)) bad(tn + " shape is too large");
      st.shape.push_back(v);
      count *= v;
    }
    const uint64_t b = json_uint(off->arr[0], what + ": " + tn + " data_offsets"),
                   e = json_uint(off->arr[1], what + ": " + tn + " data_offsets");
    if (b > e || e > data_size)
      bad(tn + " data_offsets [" + std::to_string(b) + ", " + std::to_string(e) + ") lie outside the " +
          std::to_string(data_size) + "-byte data section");
    if (e - b != count * elem)
      bad(tn + " holds " + std::to_string(e - b) + " bytes; its shape and dtype need " + std::to_string(count * elem));
    st.data = data + b;
    st.bytes = e - b;
    if (st.bytes) spans.emplace_back(b, e);
    out.push_back(std::move(st));
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); i++)
    if (spans[i].first < spans[i - 1].second)
      bad("two tensors overlap in the data section (bytes " + std::to_string(spans[i].first) + " to " +
          std::to_string(std::min(spans[i].second, spans[i - 1].second)) + ")");
  return out;
}

}  // namespace qkv
