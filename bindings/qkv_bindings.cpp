// Embind surface of the engine: thin wrappers only. Every C++ error is caught here and
// rethrown as a JS Error carrying `code` (bad_model, bad_argument, out_of_memory, ...).
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cstdlib>
#include <memory>

#include "common.h"
#include "cli/args.h"
#include "engine/generate.h"
#include "formats/loader.h"
#include "kernels/simd.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

using namespace emscripten;
using namespace qkv;

namespace {

[[noreturn]] void throw_js(const char* code, const std::string& msg) {
  val err = val::global("Error").new_(val(msg));
  err.set("code", val(code));
  err.throw_();
}

template <class F>
auto guard(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw_js(error_code_name(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    throw_js("out_of_memory", "the WASM heap is exhausted");
  } catch (const std::exception& e) {
    throw_js("internal", e.what());
  }
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

 private:
  std::shared_ptr<HeapBlob> blob_;
};

class JsRunArgs {
 public:
  static JsRunArgs* parse(val argv) {
    return guard([&] { return new JsRunArgs(parse_run_args(vecFromJSArray<std::string>(argv))); });
  }
  std::string modelPath() const { return a_.model_path; }
  std::string tokenizerPath() const { return a_.tokenizer_path; }
  std::string prompt() const { return a_.run.prompt; }
  std::string logitsOut() const { return a_.logits_out; }
  int threads() const { return a_.threads; }
  int context() const { return a_.context; }
  const RunArgs& args() const { return a_; }

 private:
  explicit JsRunArgs(RunArgs a) : a_(std::move(a)) {}
  RunArgs a_;
};

class JsEngine {
 public:
  JsEngine(const JsBuffer& model, int threads, int context) {
    guard([&] {
      auto pool = std::make_shared<ThreadPool>(threads > 0 ? threads : ThreadPool::hardware_threads());
      model_ = std::make_unique<Transformer>(load_model(model.blob()), context, pool);
      return 0;
    });
  }

  // llama2.c tokenizer.bin bytes; validated against the model's vocabulary.
  void setTokenizer(const JsBuffer& tok) {
    guard([&] {
      tok_ = std::make_unique<Tokenizer>(
          Tokenizer::from_llama2c(tok.blob()->data(), tok.blob()->size(), model_->config().vocab_size));
      return 0;
    });
  }

  val info() const {
    const ModelConfig& c = model_->config();
    val o = val::object();
    o.set("arch", c.arch);
    o.set("description", c.describe());
    o.set("dim", c.dim);
    o.set("hiddenDim", c.hidden_dim);
    o.set("layers", c.n_layers);
    o.set("heads", c.n_heads);
    o.set("kvHeads", c.n_kv_heads);
    o.set("headDim", c.head_dim);
    o.set("vocabSize", c.vocab_size);
    o.set("contextLength", model_->context());
    o.set("weightBytes", (double)model_->weight_bytes());
    o.set("kvCacheBytes", (double)model_->kv_cache_bytes());
    o.set("threads", model_->pool().size());
    o.set("simd", std::string(simd_arch_name()));
    return o;
  }

  val tokenize(std::string text, bool bos) const {
    return guard([&] {
      need_tokenizer();
      std::vector<int> ids = tok_->encode(text, bos, false);
      return val::global("Int32Array").new_(val(typed_memory_view(ids.size(), ids.data())));
    });
  }

  // Logits for every position of `ids` (one batched forward from position 0), (n, vocab).
  val logits(val ids_js) {
    return guard([&] {
      std::vector<int> ids = vecFromJSArray<int>(ids_js);
      if (ids.empty()) fail(ErrorCode::BadArgument, "logits needs at least one token");
      model_->forward(ids.data(), (int)ids.size(), 0, true);
      size_t n = ids.size() * (size_t)model_->config().vocab_size;
      return val::global("Float32Array").new_(val(typed_memory_view(n, model_->logits())));
    });
  }

  // run.c's generation; onPiece(Uint8Array) gets each printed piece (a view: copy it).
  val run(const JsRunArgs& a, val on_piece) {
    return guard([&] {
      need_tokenizer();
      RunStats st = run_generate(*model_, *tok_, a.args().run, [&](const std::string& p) {
        on_piece(val(typed_memory_view(p.size(), reinterpret_cast<const uint8_t*>(p.data()))));
      });
      val o = val::object();
      o.set("promptTokens", st.prompt_tokens);
      o.set("generatedTokens", st.generated_tokens);
      o.set("prefillMs", st.prefill_ms);
      o.set("decodeMs", st.decode_ms);
      return o;
    });
  }

 private:
  void need_tokenizer() const {
    if (!tok_) fail(ErrorCode::BadArgument, "no tokenizer loaded: call setTokenizer first");
  }
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<Tokenizer> tok_;
};

std::string simd_arch() { return simd_arch_name(); }
std::string usage() { return run_usage(); }

}  // namespace

EMSCRIPTEN_BINDINGS(qkv) {
  function("simdArch", &simd_arch);
  function("runUsage", &usage);
  class_<JsBuffer>("Buffer").constructor<double>().function("view", &JsBuffer::view).function("size", &JsBuffer::size);
  class_<JsRunArgs>("RunArgs")
      .class_function("parse", &JsRunArgs::parse, allow_raw_pointers())
      .function("modelPath", &JsRunArgs::modelPath)
      .function("tokenizerPath", &JsRunArgs::tokenizerPath)
      .function("prompt", &JsRunArgs::prompt)
      .function("logitsOut", &JsRunArgs::logitsOut)
      .function("threads", &JsRunArgs::threads)
      .function("context", &JsRunArgs::context);
  class_<JsEngine>("Engine")
      .constructor<const JsBuffer&, int, int>()
      .function("setTokenizer", &JsEngine::setTokenizer)
      .function("info", &JsEngine::info)
      .function("tokenize", &JsEngine::tokenize)
      .function("logits", &JsEngine::logits)
      .function("run", &JsEngine::run);
}
