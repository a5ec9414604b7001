// GGUF (v2, v3): metadata of every type, tensor infos, alignment; every count, string, offset
// and size validated against the file before anything points into it.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../model/weights.h"

namespace qkv {

// Tensor element types as GGUF numbers them.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  BF16 = 30,
};
// Elements per block and bytes per block; false for a type number qkv does not know.
bool ggml_type_layout(uint32_t type, uint32_t* block, uint32_t* bytes);
const char* ggml_type_name(uint32_t type);
// GGUF type number <-> the engine's storage type, for the types qkv reads (false: it cannot).
bool qtype_of_ggml(uint32_t ggml_type, QType* out);
uint32_t ggml_of_qtype(QType t);

enum class GgufKind : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

struct GgufValue {
  GgufKind kind = GgufKind::U8;
  // Scalars: integers in i/u, floats in f, bool in u.
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string s;
  GgufKind elem = GgufKind::U8;  // arrays: element kind
  // Arrays, held compactly (an element of a 10 MB u8 array takes one byte, not a GgufValue):
  // numbers and bools as the file's little-endian bytes, strings as one buffer and where each
  // ends, arrays of arrays (small, bounded when read) as values.
  std::vector<uint8_t> raw;
  std::string chars;
  std::vector<uint64_t> ends;
  std::vector<GgufValue> arr;

  bool is_int() const;
  bool is_float() const { return kind == GgufKind::F32 || kind == GgufKind::F64; }
  // Arrays: the element count, whether elements are integers (or bools), and element i (i < size()).
  size_t size() const;
  bool elems_int() const;
  int64_t int_at(size_t i) const;
  double num_at(size_t i) const;  // an integer or float element as a double
  std::string str_at(size_t i) const;
  GgufValue at(size_t i) const;
  // The bytes this value holds in memory (what a hostile file can make the parser keep).
  uint64_t bytes_held() const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ne[0] (fastest) first
  uint32_t type = 0;
  uint64_t offset = 0;  // from the start of the data section (of its part's)
  uint64_t bytes = 0;
  uint32_t part = 0;  // which file of a split model holds it
  uint64_t elements() const;
  // Shapes as llama.cpp reads them: trailing dimensions of 1 are the same tensor ([n, 1] = [n]).
  size_t rank() const;  // dims without trailing 1s (at least 1)
  uint64_t dim(size_t i) const { return i < dims.size() ? dims[i] : 1; }
};

class GgufFile {
 public:
  // Parses and validates; throws Error(BadModel / Unsupported) naming the problem. A SplitBlob
  // is read as one model: metadata from its first file, the tensors of every file. A single
  // file that says it is one of several (split.count > 1) is refused, naming what to load.
  static GgufFile parse(std::shared_ptr<const Blob> blob);
  // One file by itself, a part of a split model or not (a GPU-resident load plans each part).
  static GgufFile parse_part(std::shared_ptr<const Blob> blob) { return parse_one(std::move(blob)); }
  // A model whose metadata is `header` (a GGUF without tensors) and whose tensors lie elsewhere,
  // each at its own pointer (Hugging Face checkpoints: views into safetensors data, kept alive
  // by `owner`, which becomes blob()). Tensor offsets and parts are set here.
  static GgufFile from_views(std::shared_ptr<const Blob> owner, std::shared_ptr<const Blob> header,
                             std::vector<GgufTensorInfo> tensors, const std::vector<const uint8_t*>& data);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const std::shared_ptr<const Blob>& blob() const { return blob_; }
  // The bytes the metadata holds in memory: about the size of the file's metadata section,
  // whatever its arrays hold.
  uint64_t metadata_bytes() const { return metadata_bytes_; }

  const GgufValue* find(const std::string& key) const;
  // Required keys: a missing one is reported by name.
  const GgufValue& get(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  int64_t get_int_or(const std::string& key, int64_t def) const;
  double get_float_or(const std::string& key, double def) const;

  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // The tensor's bytes; null when they are not in memory (a SparseBlob part that does not hold them).
  const uint8_t* tensor_data(const GgufTensorInfo& t) const;
  // Where the tensor's bytes start in its part's file.
  uint64_t tensor_file_offset(const GgufTensorInfo& t) const { return part_offset_[t.part] + t.offset; }
  // Whether some part is a SparseBlob (a GPU-resident load).
  bool sparse() const;

 private:
  static GgufFile parse_one(std::shared_ptr<const Blob> blob);
  std::vector<const uint8_t*> part_data_;       // each part's data section
  std::vector<const SparseBlob*> part_sparse_;  // each part's SparseBlob, or null
  std::vector<uint64_t> part_offset_;           // each part's data section offset in its file
  std::shared_ptr<const Blob> blob_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  uint64_t metadata_bytes_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> by_name_;
};

bool looks_like_gguf(const uint8_t* data, uint64_t size);

// Whether a GPU-resident load keeps a tensor in the heap: vectors (norms, biases, RoPE factors)
// and the f32 tables the forward adds as floats (learned positions, token types). Every matrix
// goes to the GPU, so the heap does not grow with the weights.
bool gguf_keeps_in_heap(const GgufTensorInfo& t);

// The name ending of part `no` (from 1) of a model split into `count` files by llama.cpp's
// gguf-split: "-00002-of-00003.gguf".
std::string gguf_split_suffix(int no, int count);

// Reading a model out of a parsed file (gguf_model.cpp, gguf_encdec.cpp). Errors are
// Error(BadModel) "GGUF: ..." but where said.
// A header integer that must be 0..2^30.
int gguf_int(int64_t v, const std::string& key);
// A (rows, cols) weight (GGUF lists dims fastest first: ne = [cols, rows]) of a type qkv runs,
// or with vec a (cols,) F32 vector; an absent one that is not required is an empty Tensor. A
// type qkv does not run, or a vec that is not F32, is Error(Unsupported); vec_rule ends the
// latter's message.
Tensor gguf_weight(const GgufFile& g, const std::string& name, int64_t rows, int64_t cols, bool required, bool vec,
                   const char* vec_rule);
// Attention kinds (docs/attention-kinds.md): key kinds_key, one string per layer (softmax, linear,
// additive, block_sparse; absent: all softmax), into kinds (n entries); the additive width
// (`prefix`additive.length) and the block-sparse pattern (`prefix`sparse.*) into c when a kind
// needs them. prefix is e.g. "llama.attention.".
void gguf_attention_kinds(const GgufFile& g, const std::string& kinds_key, const std::string& prefix, int n,
                          std::vector<AttnKind>& kinds, ModelConfig& c);
// Layer tensors `p`NAME_add_{q,k,v}.weight (NAME e.g. attn): additive attention's F32 parameters
// when additive, else refused if present.
AdditiveWeights gguf_additive_weights(const GgufFile& g, const std::string& p, const char* name, bool additive,
                                      const ModelConfig& c);
// A bool key, def when absent.
bool gguf_flag(const GgufFile& g, const std::string& key, bool def);
// A token id key: def when absent, -1 (none) when out of 0..n-1 (some files write -1 or
// 0xFFFFFFFF, which reads as negative).
int gguf_token_id(const GgufFile& g, const std::string& key, int def, size_t n);

}  // namespace qkv
