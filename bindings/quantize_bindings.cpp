// Embind surface of `qkv quantize` (the Node CLI's command and the JS `quantize()`): thin
// wrappers over src/cli/quantize_cmd.h and formats/quantize.h. The output streams to a JS
// callback chunk by chunk, so the heap holds the input and one chunk, never the output.
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <memory>

#include "cli/quantize_cmd.h"
#include "bindings_common.h"
#include "common.h"
#include "engine/perplexity.h"
#include "formats/gguf.h"
#include "formats/hf.h"
#include "formats/gguf_writer.h"
#include "formats/loader.h"
#include "model/transformer.h"
#include "threadpool.h"
#include "tokenizer/tokenizer.h"

using namespace emscripten;
using namespace qkv;
using qkv_js::guard;
using qkv_js::throw_js;

namespace {

// The bytes of a `Buffer` (qkv_bindings.cpp's heap buffer) for the length of one call: the JS
// object keeps them alive, so nothing is copied.
class BorrowedBlob : public Blob {
 public:
  BorrowedBlob(const uint8_t* p, uint64_t n) : p_(p), n_(n) {}
  const uint8_t* data() const override { return p_; }
  uint64_t size() const override { return n_; }

 private:
  const uint8_t* p_;
  uint64_t n_;
};

void check_buffer(const val& buf, const char* what) {
  if (buf.isNull() || buf.isUndefined() || buf["view"].typeOf().as<std::string>() != "function")
    fail(ErrorCode::BadArgument, std::string(what) + " must be a heap Buffer");
}

std::shared_ptr<const Blob> borrow(val buf, const char* what) {
  check_buffer(buf, what);
  val view = buf.call<val>("view");
  const uintptr_t p = (uintptr_t)view["byteOffset"].as<double>();
  const uint64_t n = (uint64_t)view["length"].as<double>();
  return std::make_shared<BorrowedBlob>(reinterpret_cast<const uint8_t*>(p), n);
}

// A model's Buffer: with the other files of a split model attached (Buffer.addPart), all of them.
std::shared_ptr<const Blob> model_of(val buf) {
  check_buffer(buf, "the model");
  const qkv_js::JsBuffer* b = buf.as<qkv_js::JsBuffer*>(allow_raw_pointers());
  return b->model_blob();
}

// `IN OUT --type T [...]` -> {model, out, type, tokenizer, text, context, threads}.
val quantize_parse_args(val argv) {
  return guard([&] {
    const QuantizeArgs q = parse_quantize_args(vecFromJSArray<std::string>(argv));
    val o = val::object();
    o.set("model", q.run.model_path);
    o.set("out", q.out_path);
    o.set("type", q.run.weight_type);
    o.set("tokenizer", q.run.tokenizer_path);
    o.set("text", q.run.text_path);
    o.set("context", q.run.context);
    o.set("threads", q.run.threads);
    o.set("allowRequantize", q.run.allow_requantize);
    return o;
  });
}

// Re-encodes `model` (GGUF, or llama2.c with `tok`) to `type`; onChunk(Uint8Array view of the
// heap, valid during the call only) receives the file in order; onProgress(done, total) counts
// values. Returns {fromGguf, inBytes, outBytes, tensors: [{name, from, to, note}]}.
val quantize_model(val model, val tok, std::string name, std::string type, bool allow_requantize, val on_chunk,
                   val on_progress) {
  return guard([&] {
    const QType t = parse_qtype(type);
    if (on_chunk.typeOf().as<std::string>() != "function") fail(ErrorCode::BadArgument, "onChunk must be a function");
    const bool progress = on_progress.typeOf().as<std::string>() == "function";
    auto in = model_of(model);
    std::shared_ptr<const Blob> tb;
    if (!tok.isNull() && !tok.isUndefined()) tb = borrow(tok, "the tokenizer");
    const bool from_gguf = looks_like_gguf(in->data(), in->size());
    std::shared_ptr<const Blob> gguf = quantize_input(in, tb.get(), name);
    const GgufFile parsed = GgufFile::parse(gguf);
    check_requantize(parsed, t, allow_requantize);
    uint64_t out_bytes = 0;
    std::vector<QuantizedTensor> tensors = quantize_gguf_stream(
        parsed, t,
        [&](const std::vector<uint8_t>& b) {
          out_bytes += b.size();
          on_chunk(val(typed_memory_view(b.size(), b.data())));
        },
        [&](uint64_t done, uint64_t total) {
          if (progress) on_progress((double)done, (double)total);
        });
    val list = val::array();
    for (const QuantizedTensor& q : tensors) {
      val e = val::object();
      e.set("name", q.name);
      e.set("from", std::string(ggml_type_name(q.from)));
      e.set("to", std::string(ggml_type_name(q.to)));
      e.set("note", q.note);
      list.call<void>("push", e);
    }
    val o = val::object();
    o.set("fromGguf", from_gguf);
    o.set("fromHuggingFace", as_hf_files(in.get()) != nullptr);
    o.set("inBytes", (double)input_bytes(*in));
    o.set("outBytes", (double)out_bytes);
    o.set("tensors", list);
    return o;
  });
}

std::vector<QuantizedTensor> tensors_of(val report) {
  std::vector<QuantizedTensor> out;
  val list = report["tensors"];
  const int n = list["length"].as<int>();
  for (int i = 0; i < n; i++) {
    val e = list[i];
    QuantizedTensor q;
    q.name = e["name"].as<std::string>();
    const std::string to = e["to"].as<std::string>();
    for (uint32_t k = 0; k < 64; k++)
      if (to == ggml_type_name(k)) q.to = k;
    q.note = e["note"].as<std::string>();
    out.push_back(std::move(q));
  }
  return out;
}

// The native CLI's report lines for `argv` and a quantizeModel result.
std::string quantize_summary_of(val argv, val report) {
  return guard([&] {
    const QuantizeArgs q = parse_quantize_args(vecFromJSArray<std::string>(argv));
    const bool hf = report["fromHuggingFace"].as<bool>();
    return quantize_summary(q, report["fromGguf"].as<bool>(), (uint64_t)report["inBytes"].as<double>(),
                            (uint64_t)report["outBytes"].as<double>(), tensors_of(report),
                            hf ? "Hugging Face" : nullptr);
  });
}

PerplexityStats stats_of(val s) {
  PerplexityStats st;
  st.nll = s["nll"].as<double>();
  st.predicted = (int64_t)s["predicted"].as<double>();
  st.tokens = (int64_t)s["tokens"].as<double>();
  st.windows = s["windows"].as<int>();
  return st;
}
val stats_val(const PerplexityStats& s) {
  val o = val::object();
  o.set("nll", s.nll);
  o.set("predicted", (double)s.predicted);
  o.set("tokens", (double)s.tokens);
  o.set("windows", s.windows);
  o.set("perplexity", s.perplexity());
  return o;
}

// The native `measure`: perplexity of `model` (GGUF, or llama2.c with `tok`) on `text`, windows
// of `context` tokens (0 = the model's); onWindow(window stats, running stats) after each.
val perplexity_of(val model, val tok, std::string text, int context, int threads, val on_window) {
  return guard([&] {
    if (threads < 0 || threads > 256) fail(ErrorCode::BadArgument, "threads must be 0 (auto) .. 256");
    auto blob = model_of(model);
    Transformer m(load_model(blob), context,
                  std::make_shared<ThreadPool>(threads > 0 ? threads : ThreadPool::hardware_threads()));
    std::unique_ptr<Tokenizer> t = embedded_tokenizer(blob);
    if (!t) {
      if (tok.isNull() || tok.isUndefined())
        fail(ErrorCode::BadArgument,
             "a llama2.c checkpoint needs its tokenizer (-z TOKENIZER in the CLIs, options.tokenizer in JS)");
      auto tb = borrow(tok, "the tokenizer");
      t = std::make_unique<Tokenizer>(Tokenizer::from_llama2c(tb->data(), tb->size(), m.config().vocab_size));
    }
    const std::vector<int> ids = t->encode(text, true, false);
    const bool cb = on_window.typeOf().as<std::string>() == "function";
    PerplexityStats st = perplexity(m, ids, m.context(), [&](const PerplexityStats& w, const PerplexityStats& total) {
      if (cb) on_window(stats_val(w), stats_val(total));
    });
    return stats_val(st);
  });
}

std::string perplexity_change_of(std::string text_path, val before, val after) {
  return guard([&] { return perplexity_change(text_path, stats_of(before), stats_of(after)); });
}

}  // namespace

EMSCRIPTEN_BINDINGS(qkv_quantize) {
  function("quantizeParseArgs", &quantize_parse_args);
  function("quantizeModel", &quantize_model);
  function("quantizeSummary", &quantize_summary_of);
  function("perplexityOf", &perplexity_of);
  function("perplexityChange", &perplexity_change_of);
}
