// Helpers shared by the Embind files (qkv, encdec, quantize, train): C++ errors to JS
// errors with a code, heap buffers that JS fills in place, typed-array copies, sampler options.
#pragma once
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "formats/hf.h"
#include "model/config.h"
#include "model/weights.h"
#include "sampler/sampler.h"

namespace qkv_js {
using namespace emscripten;
using namespace qkv;

// Throws a JS Error with a code. The JS exception passes over the C++ frames between here and
// JS without running their destructors, so nothing may own memory there: the message is taken
// from a thread-local buffer, and the error is made and thrown in JS (no val handle is left).
// Defined (EM_JS) in qkv_bindings.cpp.
extern "C" void qkv_throw_js_error(const char* code, const char* msg);
inline std::string& js_error_message() {
  thread_local std::string m;
  return m;
}
[[noreturn]] inline void throw_js(const char* code, const std::string& msg) {
  if (&msg != &js_error_message()) js_error_message() = msg;
  qkv_throw_js_error(code, js_error_message().c_str());
  __builtin_unreachable();
}

// Runs f, turning a C++ exception into a JS error. The JS error is thrown after the handler has
// ended (the C++ exception is then freed and f's frames are unwound): thrown inside it, the
// exception object and what the unwinding had not reached would leak with every error.
template <class F>
auto guard(F&& f) -> decltype(f()) {
  const char* code = "internal";
  try {
    return f();
  } catch (const Error& e) {
    code = error_code_name(e.code());
    js_error_message() = e.what();
  } catch (const std::bad_alloc&) {
    code = "out_of_memory";
    js_error_message() = "the WASM heap is exhausted";
  } catch (const std::exception& e) {
    js_error_message() = e.what();
  }
  throw_js(code, js_error_message());
}

// An Embind constructor for T whose C++ constructor throws C++ exceptions: a construction that
// fails frees what it had made (thread pool, model, the object itself) before the error becomes a
// JS one. (A JS error thrown from inside the constructor left all of it behind: after 8 failed
// loads the multi-threaded build had no thread left for a pool, and dispose() hung.)
template <class T, class... A>
T* construct(A... a) {
  return guard([&] { return new T(std::forward<A>(a)...); });
}

// Bytes in the WASM heap that JS fills in place (one copy of a model, never two).
class HeapBlob : public Blob {
 public:
  explicit HeapBlob(uint64_t n) : n_(n) {
    p_ = static_cast<uint8_t*>(std::malloc(n ? n : 1));
    if (!p_) fail(ErrorCode::OutOfMemory, "cannot allocate " + format_bytes(n) + " in the WASM heap");
  }
  ~HeapBlob() override { std::free(p_); }
  const uint8_t* data() const override { return p_; }
  uint64_t size() const override { return n_; }
  uint8_t* mutable_data() { return p_; }

 private:
  uint8_t* p_;
  uint64_t n_;
};

class JsBuffer {
 public:
  explicit JsBuffer(double size) {
    guard([&] {
      if (!(size >= 0) || size > 4294967295.0) fail(ErrorCode::BadArgument, "buffer size out of range");
      blob_ = std::make_shared<HeapBlob>((uint64_t)size);
      return 0;
    });
  }
  val view() const { return val(typed_memory_view((size_t)blob_->size(), blob_->mutable_data())); }
  double size() const { return (double)blob_->size(); }
  std::shared_ptr<HeapBlob> blob() const { return blob_; }
  // A GPU-resident load: this buffer is the header of a file of `size` bytes; setSparse makes it
  // a SparseBlob, and addRange gives it the bytes of the tensors kept in the heap.
  void setSparse(double size) {
    guard([&] {
      if (!(size >= (double)blob_->size()) || size > 9007199254740991.0)
        fail(ErrorCode::BadArgument, "setSparse: the file size must be at least the header's");
      // Again once a source of unknown length has ended (its size known): the ranges carry over.
      sparse_ = std::make_shared<SparseBlob>(blob_, (uint64_t)size);
      for (const auto& r : ranges_) sparse_->add(r.first, r.second);
      return 0;
    });
  }
  void addRange(double offset, const JsBuffer& bytes) {
    guard([&] {
      if (!sparse_) fail(ErrorCode::BadArgument, "addRange: not a sparse buffer (setSparse first)");
      if (!(offset >= 0) || offset + bytes.size() > (double)sparse_->size())
        fail(ErrorCode::BadArgument, "addRange: the range runs past the end of the file");
      sparse_->add((uint64_t)offset, bytes.blob_);
      ranges_.emplace_back((uint64_t)offset, bytes.blob_);
      return 0;
    });
  }
  // Bytes in the heap: the buffer, or a sparse file's header and ranges.
  double heldBytes() const { return (double)(sparse_ ? sparse_->held_bytes() : blob_->size()); }
  // Forgets the parts added (a GPU-resident load adds them again once their sizes are known).
  void clearParts() {
    parts_.clear();
    part_names_.clear();
  }
  // The next file of a split GGUF model, read into its own buffer (this one is the first).
  void addPart(const JsBuffer& next) {
    guard([&] {
      if (next.blob_ == blob_) fail(ErrorCode::BadArgument, "a buffer cannot be its own next part");
      parts_.push_back(next.file());
      part_names_.push_back(next.name_);
      return 0;
    });
  }
  // The file's name: named buffers are the files of a Hugging Face checkpoint (formats/hf.h).
  void setName(std::string name) { name_ = std::move(name); }
  // What a model loads: this buffer, or with parts added a SplitBlob of all of them (HfFiles when named).
  std::shared_ptr<const Blob> model_blob() const {
    if (!name_.empty()) {
      std::vector<std::pair<std::string, std::shared_ptr<const Blob>>> files{{name_, blob_}};
      for (size_t i = 0; i < parts_.size(); i++) files.emplace_back(part_names_[i], parts_[i]);
      return std::make_shared<HfFiles>(std::move(files));
    }
    if (parts_.empty()) return file();
    std::vector<std::shared_ptr<const Blob>> all{file()};
    all.insert(all.end(), parts_.begin(), parts_.end());
    return std::make_shared<SplitBlob>(std::move(all));
  }

 private:
  // This file: the buffer, or the SparseBlob it heads.
  std::shared_ptr<const Blob> file() const {
    if (sparse_) return sparse_;
    return blob_;
  }
  std::shared_ptr<HeapBlob> blob_;
  std::shared_ptr<SparseBlob> sparse_;
  std::vector<std::pair<uint64_t, std::shared_ptr<const Blob>>> ranges_;  // sparse_'s
  std::vector<std::shared_ptr<const Blob>> parts_;
  std::vector<std::string> part_names_;
  std::string name_;
};

inline SamplerOptions sampler_options(val o) {
  SamplerOptions s;
  auto num = [&](const char* key, double def) {
    val v = o[key];
    if (v.isUndefined() || v.isNull()) return def;
    if (v.typeOf().as<std::string>() != "number")
      fail(ErrorCode::BadArgument, std::string("option ") + key + " must be a number");
    return v.as<double>();
  };
  s.temperature = (float)num("temperature", 1.0);
  s.top_p = (float)num("topP", 1.0);
  s.top_k = (int)num("topK", 0);
  s.min_p = (float)num("minP", 0.0);
  s.repetition_penalty = (float)num("repetitionPenalty", 1.0);
  s.repetition_window = (int)num("repetitionWindow", 64);
  double seed = num("seed", 0);
  if (!(seed >= 0) || seed > 18446744073709551615.0 || seed != (double)(uint64_t)seed)
    fail(ErrorCode::BadArgument, "seed must be a non-negative integer");
  s.seed = (uint64_t)seed;
  s.presence_penalty = (float)num("presencePenalty", 0.0);
  s.frequency_penalty = (float)num("frequencyPenalty", 0.0);
  s.logprobs = (int)num("logprobs", -1);
  val bias = o["logitBias"];  // {tokenId: bias}, as OpenAI's logit_bias
  if (!bias.isUndefined() && !bias.isNull()) {
    if (bias.typeOf().as<std::string>() != "object")
      fail(ErrorCode::BadArgument, "option logitBias must be an object {token id: bias}");
    val keys = val::global("Object").call<val>("keys", bias);
    const unsigned n = keys["length"].as<unsigned>();
    for (unsigned i = 0; i < n; i++) {
      const std::string k = keys[i].as<std::string>();
      val v = bias[k];
      char* end = nullptr;
      const long id = std::strtol(k.c_str(), &end, 10);
      if (k.empty() || *end != '\0' || id < 0 || v.typeOf().as<std::string>() != "number")
        fail(ErrorCode::BadArgument, "logitBias: '" + k + "' must be a token id with a number");
      s.logit_bias.push_back({(int)id, (float)v.as<double>()});
    }
  }
  s.validate();
  return s;
}

inline val int_array(const std::vector<int>& v) {
  return val::global("Int32Array").new_(val(typed_memory_view(v.size(), v.data())));
}
inline val float_array(const float* p, size_t n) {
  return val::global("Float32Array").new_(val(typed_memory_view(n, p)));
}
inline val byte_array(const std::string& s) {
  return val::global("Uint8Array").new_(val(typed_memory_view(s.size(), reinterpret_cast<const uint8_t*>(s.data()))));
}

// Attention kinds of n layers (empty: all softmax) as names, for info().
inline val attention_kind_names(const std::vector<qkv::AttnKind>& kinds, int n) {
  val a = val::array();
  for (int l = 0; l < n; l++)
    a.call<void>("push", std::string(qkv::attn_kind_name(kinds.empty() ? qkv::AttnKind::Softmax : kinds[l])));
  return a;
}
// The parameters of the kinds: additiveLength (0: no additive layer) and sparsePattern (null: no
// block-sparse layer) on o.
inline void attention_kind_params(const qkv::ModelConfig& c, bool additive, bool sparse, val& o) {
  o.set("additiveLength", additive ? c.additive_dim : 0);
  if (!sparse) {
    o.set("sparsePattern", val::null());
    return;
  }
  val p = val::object();
  p.set("blockSize", c.sparse.block);
  p.set("windowBlocks", c.sparse.window_blocks);
  p.set("globalTokens", c.sparse.global_tokens);
  p.set("randomBlocks", c.sparse.random_blocks);
  p.set("seed", (double)c.sparse.seed);
  o.set("sparsePattern", p);
}
// Which keys the block-sparse pattern lets queries q0..q0+n_q-1 see among n_kv keys: a Uint8Array
// (n_q, n_kv), 1 visible (the explorer draws the pattern as this mask).
inline val sparse_mask(const qkv::ModelConfig& c, int q0, int n_q, int n_kv, bool causal) {
  if (q0 < 0 || n_q < 0 || n_kv < 0 || (int64_t)n_q * n_kv > (1 << 24))
    qkv::fail(qkv::ErrorCode::BadArgument, "sparse mask: queries and keys must be 0..4096 each");
  std::vector<uint8_t> m((size_t)n_q * n_kv);
  for (int i = 0; i < n_q; i++)
    for (int j = 0; j < n_kv; j++) m[(size_t)i * n_kv + j] = c.sparse.visible(q0 + i, j, n_kv, causal) ? 1 : 0;
  return val::global("Uint8Array").new_(val(typed_memory_view(m.size(), m.data())));
}

}  // namespace qkv_js
