// GGUF reader. Layout: "GGUF", u32 version, u64 n_tensors, u64 n_kv, n_kv x (string key,
// u32 kind, value), n_tensors x (string name, u32 n_dims, u64 dims[n_dims], u32 type,
// u64 offset), padding to `general.alignment` (default 32), tensor data.
// Strings are u64 length + bytes; arrays are u32 element kind + u64 count + elements.
#include "gguf.h"
#include "hf.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "../common.h"
#include "../kernels/qdot.h"

namespace qkv {

namespace {
[[noreturn]] void bad(const std::string& m) { fail(ErrorCode::BadModel, "GGUF: " + m); }

class Reader {
 public:
  Reader(const uint8_t* p, uint64_t n) : p_(p), n_(n) {}
  uint64_t pos() const { return off_; }
  uint64_t left() const { return n_ - off_; }
  void need(uint64_t k, const char* what) {
    if (k > left())
      bad(std::string("the file is truncated inside ") + what + " (at byte " + std::to_string(off_) + " of " +
          std::to_string(n_) + ")");
  }
  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + off_, sizeof(T));
    off_ += sizeof(T);
    return v;
  }
  // n bytes in place (n already bounded by the file).
  const uint8_t* bytes(uint64_t n, const char* what) {
    need(n, what);
    const uint8_t* p = p_ + off_;
    off_ += n;
    return p;
  }
  std::string str(const char* what) {
    uint64_t len = read<uint64_t>(what);
    if (len > left())
      bad(std::string("the length of ") + what + " (" + std::to_string(len) +
          ") runs past the end of the file; the file is truncated or corrupt");
    std::string s(reinterpret_cast<const char*>(p_ + off_), len);
    off_ += len;
    return s;
  }

 private:
  const uint8_t* p_;
  uint64_t n_, off_ = 0;
};

constexpr uint64_t kMaxKeys = 1u << 16;
constexpr uint64_t kMaxNestedArrays = 1u << 16;

uint64_t scalar_size(GgufKind k) {
  switch (k) {
    case GgufKind::U8:
    case GgufKind::I8:
    case GgufKind::BOOL: return 1;
    case GgufKind::U16:
    case GgufKind::I16: return 2;
    case GgufKind::U32:
    case GgufKind::I32:
    case GgufKind::F32: return 4;
    case GgufKind::U64:
    case GgufKind::I64:
    case GgufKind::F64: return 8;
    default: return 0;
  }
}

GgufValue read_value(Reader& r, GgufKind kind, const std::string& key, int depth) {
  GgufValue v;
  v.kind = kind;
  switch (kind) {
    case GgufKind::U8:
      v.u = r.read<uint8_t>(key.c_str());
      v.i = (int64_t)v.u;
      break;
    case GgufKind::I8: v.i = r.read<int8_t>(key.c_str()); break;
    case GgufKind::U16:
      v.u = r.read<uint16_t>(key.c_str());
      v.i = (int64_t)v.u;
      break;
    case GgufKind::I16: v.i = r.read<int16_t>(key.c_str()); break;
    case GgufKind::U32:
      v.u = r.read<uint32_t>(key.c_str());
      v.i = (int64_t)v.u;
      break;
    case GgufKind::I32: v.i = r.read<int32_t>(key.c_str()); break;
    case GgufKind::U64:
      v.u = r.read<uint64_t>(key.c_str());
      v.i = (int64_t)v.u;
      break;
    case GgufKind::I64: v.i = r.read<int64_t>(key.c_str()); break;
    case GgufKind::F32: v.f = r.read<float>(key.c_str()); break;
    case GgufKind::F64: v.f = r.read<double>(key.c_str()); break;
    case GgufKind::BOOL: {
      uint8_t b = r.read<uint8_t>(key.c_str());
      if (b > 1) bad("key " + key + " is a bool with value " + std::to_string(b));
      v.u = b;
      v.i = b;
      break;
    }
    case GgufKind::STRING: v.s = r.str(key.c_str()); break;
    case GgufKind::ARRAY: {
      if (depth > 2) bad("key " + key + " nests arrays too deeply");
      uint32_t ek = r.read<uint32_t>(key.c_str());
      if (ek > (uint32_t)GgufKind::F64) bad("key " + key + " has arrays of unknown kind " + std::to_string(ek));
      v.elem = (GgufKind)ek;
      uint64_t count = r.read<uint64_t>(key.c_str());
      // Each element takes at least one byte (strings: 8), so the file bounds the count.
      uint64_t min_each = v.elem == GgufKind::STRING ? 8 : v.elem == GgufKind::ARRAY ? 12 : scalar_size(v.elem);
      if (count > r.left() / std::max<uint64_t>(min_each, 1))
        bad("key " + key + " claims " + std::to_string(count) +
            " array elements, more than the file holds; the file is truncated or corrupt");
      if (v.elem == GgufKind::ARRAY) {
        // Each held as a value (~150 bytes): bounded, as no model needs many.
        if (count > kMaxNestedArrays)
          bad("key " + key + " has " + std::to_string(count) + " arrays in an array (at most " +
              std::to_string(kMaxNestedArrays) + ")");
        v.arr.reserve(count);
        for (uint64_t i = 0; i < count; i++) v.arr.push_back(read_value(r, v.elem, key, depth + 1));
      } else if (v.elem == GgufKind::STRING) {
        v.ends.reserve(count);
        for (uint64_t i = 0; i < count; i++) {
          const uint64_t len = r.read<uint64_t>(key.c_str());
          if (len > r.left())
            bad("the length of a string in " + key + " (" + std::to_string(len) +
                ") runs past the end of the file; the file is truncated or corrupt");
          v.chars.append(reinterpret_cast<const char*>(r.bytes(len, key.c_str())), len);
          v.ends.push_back(v.chars.size());
        }
      } else {
        const uint8_t* p = r.bytes(count * scalar_size(v.elem), key.c_str());
        if (v.elem == GgufKind::BOOL)
          for (uint64_t i = 0; i < count; i++)
            if (p[i] > 1) bad("key " + key + " holds a bool with value " + std::to_string(p[i]));
        v.raw.assign(p, p + count * scalar_size(v.elem));
      }
      break;
    }
    default: bad("key " + key + " has unknown value kind " + std::to_string((uint32_t)kind));
  }
  return v;
}
}  // namespace

bool ggml_type_layout(uint32_t type, uint32_t* block, uint32_t* bytes) {
  struct L {
    uint32_t t, b, s;
  };
  static const L table[] = {{0, 1, 4},      {1, 1, 2},      {30, 1, 2},     {2, 32, 18},    {3, 32, 20},
                            {6, 32, 22},    {7, 32, 24},    {8, 32, 34},    {9, 32, 36},    {10, 256, 84},
                            {11, 256, 110}, {12, 256, 144}, {13, 256, 176}, {14, 256, 210}, {15, 256, 292}};
  for (const L& l : table)
    if (l.t == type) {
      *block = l.b;
      *bytes = l.s;
      return true;
    }
  return false;
}

const char* ggml_type_name(uint32_t type) {
  switch (type) {
    case 0: return "F32";
    case 1: return "F16";
    case 30: return "BF16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 6: return "Q5_0";
    case 7: return "Q5_1";
    case 8: return "Q8_0";
    case 9: return "Q8_1";
    case 10: return "Q2_K";
    case 11: return "Q3_K";
    case 12: return "Q4_K";
    case 13: return "Q5_K";
    case 14: return "Q6_K";
    case 15: return "Q8_K";
    default: return "unknown";
  }
}

bool qtype_of_ggml(uint32_t t, QType* out) {
  switch (t) {
    case 0: *out = QType::F32; return true;
    case 1: *out = QType::F16; return true;
    case 30: *out = QType::BF16; return true;
    case 8: *out = QType::Q8_0; return true;
    case 2: *out = QType::Q4_0; return true;
    case 3: *out = QType::Q4_1; return true;
    case 6: *out = QType::Q5_0; return true;
    case 7: *out = QType::Q5_1; return true;
    case 12: *out = QType::Q4_K; return true;
    case 13: *out = QType::Q5_K; return true;
    case 14: *out = QType::Q6_K; return true;
    default: return false;
  }
}

uint32_t ggml_of_qtype(QType t) {
  switch (t) {
    case QType::F32: return 0;
    case QType::F16: return 1;
    case QType::BF16: return 30;
    case QType::Q8_0: return 8;
    case QType::Q4_0: return 2;
    case QType::Q4_1: return 3;
    case QType::Q5_0: return 6;
    case QType::Q5_1: return 7;
    case QType::Q4_K: return 12;
    case QType::Q5_K: return 13;
    case QType::Q6_K: return 14;
  }
  return 0;
}

bool GgufValue::is_int() const {
  switch (kind) {
    case GgufKind::U8:
    case GgufKind::I8:
    case GgufKind::U16:
    case GgufKind::I16:
    case GgufKind::U32:
    case GgufKind::I32:
    case GgufKind::U64:
    case GgufKind::I64:
    case GgufKind::BOOL: return true;
    default: return false;
  }
}

size_t GgufValue::size() const {
  if (kind != GgufKind::ARRAY) return 0;
  if (elem == GgufKind::ARRAY) return arr.size();
  if (elem == GgufKind::STRING) return ends.size();
  return raw.size() / scalar_size(elem);
}

bool GgufValue::elems_int() const {
  GgufValue e;
  e.kind = elem;
  return e.is_int();
}

GgufValue GgufValue::at(size_t i) const {
  if (elem == GgufKind::ARRAY) return arr[i];
  GgufValue v;
  v.kind = elem;
  if (elem == GgufKind::STRING) {
    v.s = str_at(i);
    return v;
  }
  const uint8_t* p = raw.data() + i * scalar_size(elem);
  auto get = [p](auto x) {
    std::memcpy(&x, p, sizeof x);
    return x;
  };
  switch (elem) {
    case GgufKind::U8:
    case GgufKind::BOOL:
      v.u = get(uint8_t());
      v.i = (int64_t)v.u;
      break;
    case GgufKind::I8: v.i = get(int8_t()); break;
    case GgufKind::U16:
      v.u = get(uint16_t());
      v.i = (int64_t)v.u;
      break;
    case GgufKind::I16: v.i = get(int16_t()); break;
    case GgufKind::U32:
      v.u = get(uint32_t());
      v.i = (int64_t)v.u;
      break;
    case GgufKind::I32: v.i = get(int32_t()); break;
    case GgufKind::U64:
      v.u = get(uint64_t());
      v.i = (int64_t)v.u;
      break;
    case GgufKind::I64: v.i = get(int64_t()); break;
    case GgufKind::F32: v.f = get(float()); break;
    case GgufKind::F64: v.f = get(double()); break;
    default: break;
  }
  return v;
}

int64_t GgufValue::int_at(size_t i) const { return at(i).i; }

double GgufValue::num_at(size_t i) const {
  const GgufValue v = at(i);
  return v.is_float() ? v.f : (double)v.i;
}

std::string GgufValue::str_at(size_t i) const {
  const uint64_t b = i ? ends[i - 1] : 0;
  return chars.substr(b, ends[i] - b);
}

uint64_t GgufValue::bytes_held() const {
  uint64_t n = sizeof(GgufValue) + s.size() + raw.size() + chars.size() + 8 * ends.size();
  for (const GgufValue& e : arr) n += e.bytes_held();
  return n;
}

uint64_t GgufTensorInfo::elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;  // bounded at parse time
  return n;
}

bool looks_like_gguf(const uint8_t* data, uint64_t size) { return size >= 4 && std::memcmp(data, "GGUF", 4) == 0; }

bool gguf_keeps_in_heap(const GgufTensorInfo& t) {
  return t.rank() == 1 || t.name == "position_embd.weight" || t.name == "token_types.weight";
}

const uint8_t* GgufFile::tensor_data(const GgufTensorInfo& t) const {
  if (const SparseBlob* s = part_sparse_[t.part]) return s->find(part_offset_[t.part] + t.offset, t.bytes);
  return part_data_[t.part] + t.offset;
}

bool GgufFile::sparse() const {
  for (const SparseBlob* s : part_sparse_)
    if (s) return true;
  return false;
}

// split.no / split.count of one file (0 / 1 when it is not a part of a split model).
static void split_keys(const GgufFile& g, int64_t* no, int64_t* count) {
  *no = g.get_int_or("split.no", 0);
  *count = g.get_int_or("split.count", 1);
  if (*count < 1 || *count > 9999 || *no < 0 || *no >= *count)
    bad("split.no " + std::to_string(*no) + " / split.count " + std::to_string(*count) + " are out of range");
}

std::string gguf_split_suffix(int no, int count) {
  char b[64];
  std::snprintf(b, sizeof b, "-%05d-of-%05d.gguf", no, count);
  return b;
}
static std::string split_name(int64_t no, int64_t count) { return gguf_split_suffix((int)no + 1, (int)count); }

GgufFile GgufFile::parse(std::shared_ptr<const Blob> blob) {
  if (as_hf_files(blob.get())) return hf_as_gguf(std::move(blob));  // read as its conversion
  auto split = std::dynamic_pointer_cast<const SplitBlob>(blob);
  if (!split || split->parts().size() == 1) {
    GgufFile g = parse_one(split ? split->parts()[0] : blob);
    int64_t no, count;
    split_keys(g, &no, &count);
    if (count > 1)
      bad("this file is part " + std::to_string(no + 1) + " of a model split into " + std::to_string(count) +
          " files (NAME" + split_name(no, count) + "); load all of them: pass the first, NAME" + split_name(0, count) +
          ", to qkv run (it finds the rest beside it), or every part, in order, to loadModel");
    g.blob_ = blob;
    return g;
  }
  const auto& parts = split->parts();
  const int64_t n = (int64_t)parts.size();
  GgufFile g;
  for (int64_t i = 0; i < n; i++) {
    GgufFile p = parse_one(parts[(size_t)i]);
    int64_t no, count;
    split_keys(p, &no, &count);
    if (count != n)
      bad("part " + std::to_string(i + 1) + " of the " + std::to_string(n) + " files given says the model has " +
          std::to_string(count) + " parts (split.count)");
    if (no != i)
      bad("the " + std::to_string(n) + " files are out of order: file " + std::to_string(i + 1) + " is part " +
          std::to_string(no + 1) + " (split.no); pass NAME" + split_name(0, n) + " first, then the others in order");
    if (i == 0) {
      g = std::move(p);
      continue;
    }
    for (GgufTensorInfo& t : p.tensors_) {
      t.part = (uint32_t)i;
      if (!g.by_name_.emplace(t.name, g.tensors_.size()).second)
        bad("tensor " + t.name + " appears in more than one part");
      g.tensors_.push_back(std::move(t));
    }
    g.part_data_.push_back(p.part_data_[0]);
    g.part_sparse_.push_back(p.part_sparse_[0]);
    g.part_offset_.push_back(p.part_offset_[0]);
  }
  if (const GgufValue* c = g.find("split.tensors.count"))
    if (!c->is_int() || c->i != (int64_t)g.tensors_.size())
      bad("split.tensors.count says " + std::to_string(c->i) + " tensors; the " + std::to_string(n) + " parts hold " +
          std::to_string(g.tensors_.size()));
  g.blob_ = blob;
  return g;
}

GgufFile GgufFile::from_views(std::shared_ptr<const Blob> owner, std::shared_ptr<const Blob> header,
                              std::vector<GgufTensorInfo> tensors, const std::vector<const uint8_t*>& data) {
  GgufFile g = parse_one(std::move(header));
  if (!g.tensors_.empty() || tensors.size() != data.size()) bad("internal: views given to a header that has tensors");
  g.part_data_.clear();
  g.part_sparse_.assign(tensors.size(), nullptr);
  g.part_offset_.assign(tensors.size(), 0);
  for (size_t i = 0; i < tensors.size(); i++) {
    GgufTensorInfo& t = tensors[i];
    t.part = (uint32_t)i;
    t.offset = 0;
    if (!g.by_name_.emplace(t.name, i).second) bad("tensor " + t.name + " appears twice");
    g.part_data_.push_back(data[i]);
  }
  g.tensors_ = std::move(tensors);
  g.blob_ = std::move(owner);
  return g;
}

GgufFile GgufFile::parse_one(std::shared_ptr<const Blob> blob) {
  GgufFile g;
  g.blob_ = blob;
  // A SparseBlob holds the header only: read within it, check tensors against the whole file.
  const auto* sparse = dynamic_cast<const SparseBlob*>(blob.get());
  Reader r(blob->data(), sparse ? sparse->head_size() : blob->size());
  r.need(4, "the magic");
  if (!looks_like_gguf(blob->data(), blob->size())) bad("not a GGUF file (bad magic)");
  r.read<uint32_t>("the magic");
  g.version_ = r.read<uint32_t>("the version");
  if (g.version_ == 1)
    fail(ErrorCode::Unsupported, "GGUF version 1 is not supported (only 2 and 3); re-convert the model");
  if (g.version_ < 2 || g.version_ > 3)
    fail(ErrorCode::Unsupported, "GGUF version " + std::to_string(g.version_) + " is not supported (only 2 and 3)");
  const uint64_t n_tensors = r.read<uint64_t>("the tensor count");
  const uint64_t n_kv = r.read<uint64_t>("the metadata count");
  if (n_kv > r.left() / 13)
    bad("metadata count " + std::to_string(n_kv) + " is more than the file can hold; the file is truncated or corrupt");
  // Each key is held as a map node with a value (~250 bytes): bounded, as models have tens.
  if (n_kv > kMaxKeys)
    bad("metadata count " + std::to_string(n_kv) + " is more than " + std::to_string(kMaxKeys) + " keys");
  if (n_tensors > r.left() / 28)
    bad("tensor count " + std::to_string(n_tensors) +
        " is more than the file can hold; the file is truncated or corrupt");
  for (uint64_t i = 0; i < n_kv; i++) {
    std::string key = r.str("a metadata key");
    uint32_t kind = r.read<uint32_t>(key.c_str());
    if (kind > (uint32_t)GgufKind::F64) bad("key " + key + " has unknown value kind " + std::to_string(kind));
    GgufValue v = read_value(r, (GgufKind)kind, key, 0);
    g.metadata_bytes_ += v.bytes_held() + key.size() + 64;  // 64: the map's node
    if (!g.kv_.emplace(key, std::move(v)).second) bad("key " + key + " appears twice");
  }
  if (const GgufValue* a = g.find("general.alignment")) {
    if (!a->is_int() || a->u == 0 || a->u > 65536 || (a->u & (a->u - 1)) != 0)
      bad("general.alignment must be a power of two up to 65536");
    g.alignment_ = a->u;
  }
  for (uint64_t i = 0; i < n_tensors; i++) {
    GgufTensorInfo t;
    t.name = r.str("a tensor name");
    const uint32_t nd = r.read<uint32_t>(t.name.c_str());
    if (nd < 1 || nd > 4) bad("tensor " + t.name + " has " + std::to_string(nd) + " dimensions (must be 1..4)");
    uint64_t elems = 1;
    for (uint32_t d = 0; d < nd; d++) {
      uint64_t v = r.read<uint64_t>(t.name.c_str());
      if (v == 0 || v > (1ull << 40)) bad("tensor " + t.name + " has dimension " + std::to_string(v));
      if (mul_overflows(elems, v, &elems) || elems > (1ull << 42)) bad("tensor " + t.name + " has too many elements");
      t.dims.push_back(v);
    }
    t.type = r.read<uint32_t>(t.name.c_str());
    uint32_t block, bytes;
    if (!ggml_type_layout(t.type, &block, &bytes))
      fail(ErrorCode::Unsupported, "GGUF: tensor " + t.name + " has unknown type " + std::to_string(t.type));
    if (t.dims[0] % block != 0)
      bad("tensor " + t.name + " has rows of " + std::to_string(t.dims[0]) + " elements, not a multiple of the " +
          ggml_type_name(t.type) + " block of " + std::to_string(block));
    t.bytes = elems / block * bytes;
    t.offset = r.read<uint64_t>(t.name.c_str());
    if (t.offset % g.alignment_ != 0)
      bad("tensor " + t.name + " data offset " + std::to_string(t.offset) + " is not aligned to " +
          std::to_string(g.alignment_));
    if (!g.by_name_.emplace(t.name, g.tensors_.size()).second) bad("tensor " + t.name + " appears twice");
    g.tensors_.push_back(std::move(t));
  }
  g.data_offset_ = (r.pos() + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  if (g.data_offset_ > blob->size() && !g.tensors_.empty()) bad("file is truncated before its tensor data");
  const uint64_t data_size = blob->size() > g.data_offset_ ? blob->size() - g.data_offset_ : 0;
  std::vector<const GgufTensorInfo*> order;
  for (const auto& t : g.tensors_) {
    if (t.offset > data_size || t.bytes > data_size - t.offset)
      bad("tensor " + t.name + " (" + std::to_string(t.bytes) + " bytes at data offset " + std::to_string(t.offset) +
          ") runs past the end of the file; the file is truncated or corrupt");
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < order.size(); i++)
    if (order[i - 1]->offset + order[i - 1]->bytes > order[i]->offset)
      bad("tensors " + order[i - 1]->name + " and " + order[i]->name + " overlap");
  g.part_data_ = {sparse ? nullptr : blob->data() + std::min<uint64_t>(g.data_offset_, blob->size())};
  g.part_sparse_ = {sparse};
  g.part_offset_ = {g.data_offset_};
  return g;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}
const GgufValue& GgufFile::get(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) bad("required key " + key + " is missing");
  return *v;
}
std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.kind != GgufKind::STRING) bad("key " + key + " must be a string");
  return v.s;
}
int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue& v = get(key);
  if (!v.is_int()) bad("key " + key + " must be an integer");
  return v.i;
}
double GgufFile::get_float(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.is_float()) return v.f;
  if (v.is_int()) return (double)v.i;
  bad("key " + key + " must be a number");
}
int64_t GgufFile::get_int_or(const std::string& key, int64_t def) const { return find(key) ? get_int(key) : def; }
double GgufFile::get_float_or(const std::string& key, double def) const { return find(key) ? get_float(key) : def; }

size_t GgufTensorInfo::rank() const {
  size_t r = dims.size();
  while (r > 1 && dims[r - 1] == 1) r--;
  return r == 0 ? 1 : r;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

[[noreturn]] static void bad_model(const std::string& m) { fail(ErrorCode::BadModel, "GGUF: " + m); }

int gguf_int(int64_t v, const std::string& key) {
  if (v < 0 || v > (1 << 30)) bad_model("key " + key + " = " + std::to_string(v) + " is out of range");
  return (int)v;
}

Tensor gguf_weight(const GgufFile& g, const std::string& name, int64_t rows, int64_t cols, bool required, bool vec,
                   const char* vec_rule) {
  const GgufTensorInfo* t = g.find_tensor(name);
  if (!t) {
    if (required) bad_model("tensor " + name + " is missing");
    return Tensor();
  }
  // [cols] and [cols, 1] (or [cols, rows, 1]) are one shape, as in llama.cpp.
  const bool shape_ok = vec ? (t->rank() == 1 && (int64_t)t->dim(0) == cols)
                            : (t->rank() <= 2 && (int64_t)t->dim(0) == cols && (int64_t)t->dim(1) == rows);
  if (!shape_ok) {
    std::string got;
    for (uint64_t d : t->dims) got += (got.empty() ? "" : " x ") + std::to_string(d);
    bad_model("tensor " + name + " has shape [" + got + "], expected [" + std::to_string(cols) +
              (vec ? "" : " x " + std::to_string(rows)) + "]");
  }
  DType type;
  if (!qtype_of_ggml(t->type, &type))
    fail(ErrorCode::Unsupported, "GGUF: tensor " + name + " is " + ggml_type_name(t->type) +
                                     "; qkv runs F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K");
  if (vec && type != DType::F32)
    fail(ErrorCode::Unsupported, "GGUF: tensor " + name + " is " + ggml_type_name(t->type) + "; " + vec_rule);
  Tensor w;
  w.type = type;
  w.data = g.tensor_data(*t);
  w.rows = rows;
  w.cols = cols;
  if (!w.data) {  // on the GPU only (a GPU-resident load)
    if (vec) fail(ErrorCode::Internal, "GGUF: vector " + name + " is not in memory");
    w.data = absent_placeholder();
    w.absent_offset = (int64_t)g.tensor_file_offset(*t);
    w.absent_part = t->part;
    return w;
  }
  w.finite_scales = qdot_uses_finite_scales() && qdot_scales_finite(type, w.data, rows, (int)cols);
  return w;
}

void gguf_attention_kinds(const GgufFile& g, const std::string& kinds_key, const std::string& prefix, int n,
                          std::vector<AttnKind>& kinds, ModelConfig& c) {
  kinds.clear();
  const std::string& kk = kinds_key;
  const GgufValue* v = g.find(kk);
  if (!v) return;
  if (v->kind != GgufKind::ARRAY || v->elem != GgufKind::STRING || v->size() != (size_t)n)
    bad_model(kk + " must be an array of " + std::to_string(n) + " strings (one per layer)");
  for (size_t i = 0; i < v->size(); i++) {
    const std::string s = v->str_at(i);
    if (s == "softmax") kinds.push_back(AttnKind::Softmax);
    else if (s == "linear") kinds.push_back(AttnKind::Linear);
    else if (s == "additive") kinds.push_back(AttnKind::Additive);
    else if (s == "block_sparse") kinds.push_back(AttnKind::BlockSparse);
    else
      fail(ErrorCode::Unsupported, "GGUF: " + kk + "[" + std::to_string(i) + "] = '" + s +
                                       "' is not an attention kind (softmax, linear, additive, block_sparse)");
  }
  auto has = [&](AttnKind k) { return std::find(kinds.begin(), kinds.end(), k) != kinds.end(); };
  auto need_int = [&](const std::string& k) {
    if (!g.find(prefix + k)) bad_model("key " + prefix + k + " is missing (" + kk + " needs it)");
    return gguf_int(g.get_int(prefix + k), prefix + k);
  };
  if (has(AttnKind::Additive)) c.additive_dim = need_int("additive.length");
  if (has(AttnKind::BlockSparse)) {
    c.sparse.block = need_int("sparse.block_size");
    c.sparse.window_blocks = need_int("sparse.window_blocks");
    c.sparse.global_tokens =
        gguf_int(g.get_int_or(prefix + "sparse.global_tokens", 0), prefix + "sparse.global_tokens");
    c.sparse.random_blocks =
        gguf_int(g.get_int_or(prefix + "sparse.random_blocks", 0), prefix + "sparse.random_blocks");
    const int64_t seed = g.get_int_or(prefix + "sparse.seed", 0);
    if (seed < 0) bad_model("key " + prefix + "sparse.seed = " + std::to_string(seed) + " must not be negative");
    c.sparse.seed = (uint64_t)seed;
  }
}

AdditiveWeights gguf_additive_weights(const GgufFile& g, const std::string& p, const char* name, bool additive,
                                      const ModelConfig& c) {
  AdditiveWeights w;
  const std::string base = p + name + "_add_";
  if (!additive) {
    for (const char* t : {"q", "k", "v"})
      if (g.find_tensor(base + t + ".weight"))
        bad_model("tensor " + base + t +
                  ".weight belongs to additive attention, but this layer's kind is not additive");
    return w;
  }
  const int64_t rows = (int64_t)c.n_heads * c.additive_dim;
  auto f32 = [&](const char* t, int64_t r, int64_t cols) {
    const Tensor x = gguf_weight(g, base + t + ".weight", r, cols, true, false, "");
    if (x.type != DType::F32)
      fail(ErrorCode::Unsupported, "GGUF: tensor " + base + t + ".weight is " + ggml_type_name(ggml_of_qtype(x.type)) +
                                       "; additive attention parameters must be F32");
    return x.f32();
  };
  w.wq = f32("q", rows, c.head_dim);
  w.wk = f32("k", rows, c.head_dim);
  w.v = f32("v", c.n_heads, c.additive_dim);
  return w;
}

bool gguf_flag(const GgufFile& g, const std::string& key, bool def) {
  const GgufValue* v = g.find(key);
  if (!v) return def;
  if (v->kind != GgufKind::BOOL) bad_model(key + " must be a bool");
  return v->u != 0;
}

int gguf_token_id(const GgufFile& g, const std::string& key, int def, size_t n) {
  const GgufValue* v = g.find(key);
  if (!v) return def;
  if (!v->is_int()) bad_model(key + " must be an integer");
  const int64_t id = v->i;  // a huge u64 reads as negative: none
  return id >= 0 && (uint64_t)id < n ? (int)id : -1;
}

}  // namespace qkv
