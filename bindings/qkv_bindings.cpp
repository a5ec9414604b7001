// Embind surface of the engine: thin wrappers only. Every C++ error is caught here and
// rethrown as a JS Error carrying `code` (bad_model, bad_argument, out_of_memory, ...).
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "common.h"
#include "embed_bindings.h"
#include "cli/args.h"
#include "engine/generate.h"
#include "engine/session.h"
#include "formats/loader.h"
#include "kernels/attention.h"
#include "kernels/simd.h"
#include "model/transformer.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "bindings_common.h"

#include <emscripten/emscripten.h>

EM_JS(void, qkv_throw_js_error, (const char* code, const char* msg), {
  const e = new Error(UTF8ToString(msg));
  e.code = UTF8ToString(code);
  throw e;
});

using namespace emscripten;
using namespace qkv;
using namespace qkv_js;

namespace {

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


class JsSampler {
 public:
  JsSampler(int vocab, val opts) {
    s_ = std::make_unique<Sampler>(vocab, sampler_options(opts));
  }
  Sampler& get() { return *s_; }

 private:
  std::unique_ptr<Sampler> s_;
};

// Milliseconds per call (best of `reps`) of the WASM attention kernel: n_q causal queries (the
// last positions) over n_kv keys, all heads split over the pool's threads.
double bench_attention(ThreadPool& pool, int heads, int kv_heads, int head_dim, int n_kv, int n_q, int reps) {
  return guard([&] {
    if (heads < 1 || kv_heads < 1 || heads % kv_heads || head_dim < 1 || head_dim > 1024 || heads > 1024)
      fail(ErrorCode::BadArgument, "benchAttention: heads a multiple of kvHeads, head_dim 1..1024");
    if (n_kv < 1 || n_kv > (1 << 20) || n_q < 1 || n_q > n_kv || reps < 1 || reps > 1000)
      fail(ErrorCode::BadArgument, "benchAttention: 1 <= nQ <= nKv <= 2^20 and 1 <= reps <= 1000");
    const int qd = heads * head_dim, kvd = kv_heads * head_dim;
    if ((uint64_t)n_kv * kvd > (1ull << 28) || (uint64_t)n_q * qd > (1ull << 28))
      fail(ErrorCode::OutOfMemory, "benchAttention: shape too large");
    std::vector<float> k((size_t)n_kv * kvd), q((size_t)n_q * qd), out(q.size());
    for (size_t i = 0; i < k.size(); i++) k[i] = std::sin(0.37f * (float)i);
    for (size_t i = 0; i < q.size(); i++) q[i] = std::cos(0.11f * (float)i);
    AttentionArgs a;
    a.n_q = n_q;
    a.n_kv = n_kv;
    a.n_heads = heads;
    a.n_kv_heads = kv_heads;
    a.head_dim = head_dim;
    a.q = q.data();
    a.q_stride = qd;
    a.k = a.v = k.data();
    a.kv_stride = kvd;
    a.out = out.data();
    a.out_stride = qd;
    a.scale = 1.0f / std::sqrt((float)head_dim);
    a.q_pos0 = n_kv - n_q;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
      auto t0 = std::chrono::steady_clock::now();
      pool.parallel_for(heads, 1, [&](int h0, int h1, int) { attention_flash(a, h0, h1); });
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  });
}

double bench_attention_threads(int threads, int heads, int kv_heads, int head_dim, int n_kv, int n_q, int reps) {
  if (threads < 1 || threads > 256) throw_js("bad_argument", "benchAttention: threads 1..256");
  ThreadPool pool(threads);
  return bench_attention(pool, heads, kv_heads, head_dim, n_kv, n_q, reps);
}

class JsSession {
  val step_view(float* p, int width) {
    return val(typed_memory_view((size_t)s_.transformer().step_rows() * width, p));
  }

 public:
  JsSession(const LoadedModel& m, int context, std::shared_ptr<ThreadPool> pool) : s_(m, context, std::move(pool)) {}

  int prefill(val ids) {
    return guard([&] { return s_.prefill(vecFromJSArray<int>(ids)); });
  }
  void feed(val ids, bool all_logits) {
    guard([&] {
      std::vector<int> v = vecFromJSArray<int>(ids);
      if (v.empty()) fail(ErrorCode::BadArgument, "feed needs at least one token");
      s_.feed(v.data(), (int)v.size(), all_logits);
      return 0;
    });
  }
  void feedOne(int id) {
    guard([&] {
      s_.feed(&id, 1);
      return 0;
    });
  }
  int sample(JsSampler& sm) {
    return guard([&] { return s_.sample(sm.get()); });
  }
  val logits(int i) const {
    return guard([&] { return float_array(s_.logits_at(i), s_.config().vocab_size); });
  }
  void truncate(int n) {
    guard([&] {
      s_.truncate(n);
      return 0;
    });
  }
  int position() const { return s_.position(); }
  int context() const { return s_.context(); }
  val tokens() const { return int_array(s_.tokens()); }
  double kvCacheBytes() { return (double)s_.transformer().kv_cache_bytes(); }

  // External attention (WebGPU, driven from src/js/gpu-session.js): see Transformer's step API.
  void setExternalAttention(bool on) {
    guard([&] {
      s_.transformer().set_external_attention(on);
      return 0;
    });
  }
  int stepWindow(int l) const { return s_.config().window_of(l); }
  int feedBegin(val ids, bool all_logits) {
    return guard([&] {
      std::vector<int> v = vecFromJSArray<int>(ids);
      return s_.feed_begin(v.data(), (int)v.size(), all_logits);
    });
  }
  int stepChunk(int c) {
    return guard([&] {
      s_.transformer().step_chunk(c);
      return s_.transformer().step_rows();
    });
  }
  int stepPos() { return s_.transformer().step_pos(); }
  void stepQkv(int l) {
    guard([&] {
      s_.transformer().step_qkv(l);
      return 0;
    });
  }
  void stepLayerEnd(int l) {
    guard([&] {
      s_.transformer().step_layer_end(l);
      return 0;
    });
  }
  void stepChunkEnd() {
    guard([&] {
      s_.transformer().step_chunk_end();
      return 0;
    });
  }
  void feedEnd() {
    guard([&] {
      s_.feed_end();
      return 0;
    });
  }
  // Views into the heap for this chunk (invalid once the heap grows: use them at once).
  val stepQ() { return step_view(s_.transformer().step_q(), s_.config().q_dim()); }
  val stepK() { return step_view(s_.transformer().step_k(), s_.config().kv_dim()); }
  val stepV() { return step_view(s_.transformer().step_v(), s_.config().kv_dim()); }
  val stepOut() { return step_view(s_.transformer().step_out(), s_.config().q_dim()); }
  val stepProbs() {
    Transformer& t = s_.transformer();
    if (!t.capture_attention()) return val::null();
    return val(typed_memory_view((size_t)s_.config().n_heads * t.step_rows() * (t.step_pos() + t.step_rows()),
                                 t.step_probs()));
  }
  void setCaptureAttention(bool on) { s_.set_capture_attention(on); }
  val attention(int layer, int head) const {
    return guard([&] {
      std::vector<float> a = s_.attention(layer, head);
      val o = val::object();
      o.set("queries", s_.attention_queries());
      o.set("keys", s_.attention_keys());
      o.set("probs", float_array(a.data(), a.size()));
      return o;
    });
  }

 private:
  Session s_;
};

class JsModel {
 public:
  JsModel(const JsBuffer& model, int threads) {
    if (threads < 0 || threads > 256) fail(ErrorCode::BadArgument, "threads must be 0 (auto) .. 256");
    pool_ = std::make_shared<ThreadPool>(threads > 0 ? threads : ThreadPool::hardware_threads());
    const std::shared_ptr<const Blob> blob = model.model_blob();
    model_ = load_model(blob);
    tok_ = embedded_tokenizer(blob);  // GGUF: the tokenizer is in the file
    chat_ = chat_template_of(tok_.get());
  }

  // llama2.c tokenizer.bin bytes; validated against the model's vocabulary.
  void setTokenizer(const JsBuffer& tok) {
    guard([&] {
      tok_ = std::make_unique<Tokenizer>(
          Tokenizer::from_llama2c(tok.blob()->data(), tok.blob()->size(), model_.config.vocab_size));
      chat_ = chat_template_of(tok_.get());
      return 0;
    });
  }
  bool hasTokenizer() const { return tok_ != nullptr; }

  val info() const {
    const ModelConfig& c = model_.config;
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
    o.set("contextLength", c.seq_len);
    o.set("norm", std::string(norm_kind_name(c.norm)));
    o.set("positional", std::string(pos_kind_name(c.pos)));
    o.set("ffn", std::string(ffn_kind_name(c.ffn)));
    o.set("tiedClassifier", c.tied_classifier);
    o.set("weightBytes", (double)(model_.storage ? model_.storage->size() : 0));
    o.set("threads", pool_->size());
    o.set("simd", std::string(simd_arch_name()));
    o.set("bosId", tok_ ? tok_->bos_id() : 1);
    o.set("eosId", tok_ ? tok_->eos_id() : 2);
    o.set("eogIds", int_array(tok_ ? tok_->eog_ids() : std::vector<int>()));
    o.set("addBos", tok_ ? tok_->add_bos() : true);
    o.set("tokenizer", std::string(!tok_ ? "none" : tok_->is_bpe() ? "bpe" : tok_->is_wordpiece() ? "wordpiece" : "sentencepiece"));
    embed_info(c, o);
    const ChatTemplate& ct = chat_;
    o.set("chatFormat", std::string(chat_format_name(ct.format)));
    o.set("chatFormatGuessed", ct.guessed);
    o.set("chatTemplate", std::string(ct.jinja_ok ? "jinja" : ct.jinja.empty() ? "none" : "builtin"));
    o.set("chatFallbackReason", ct.fallback_reason);
    return o;
  }

  val tokenize(std::string text, bool bos) const {
    return guard([&] { return int_array(tokenizer().encode(text, bos, false)); });
  }
  // special: control tokens spelled in the text (chat markers) become their ids.
  val tokenizeSpecial(std::string text, bool bos, bool special) const {
    return guard([&] { return int_array(tokenizer().encode(text, bos, false, special)); });
  }
  // The model's chat template applied to [{role, content, fields?}, ...] (checked by the JS
  // layer too; fields: the message's other fields as a JSON object), with further template
  // variables as a JSON object (or '').
  std::string renderChat(val messages, bool add_generation_prompt, std::string vars_json) const {
    return guard([&] {
      if (!messages.isArray()) fail(ErrorCode::BadArgument, "chat messages must be an array");
      std::vector<ChatMessage> msgs;
      const unsigned n = messages["length"].as<unsigned>();
      for (unsigned i = 0; i < n; i++) {
        val m = messages[i];
        if (m.typeOf().as<std::string>() != "object" || m.isNull() || m["role"].typeOf().as<std::string>() != "string" ||
            m["content"].typeOf().as<std::string>() != "string" ||
            (!m["fields"].isUndefined() && m["fields"].typeOf().as<std::string>() != "string"))
          fail(ErrorCode::BadArgument, "chat message " + std::to_string(i) + " must be {role: string, content: string}");
        msgs.push_back({m["role"].as<std::string>(), m["content"].as<std::string>(),
                        m["fields"].isUndefined() ? std::string() : m["fields"].as<std::string>()});
      }
      return render_chat(chat_, msgs, add_generation_prompt, vars_json);
    });
  }
  // The bytes of token `id` following `prev` (may be part of a UTF-8 character).
  val piece(int prev, int id) const {
    return guard([&] { return byte_array(tokenizer().decode(prev, id)); });
  }
  // The bytes of a whole id sequence (as if each followed the previous one).
  val detokenize(val ids_js) const {
    return guard([&] {
      std::vector<int> ids = vecFromJSArray<int>(ids_js);
      std::string out;
      int prev = -1;
      for (int id : ids) {
        if (id == tokenizer().bos_id() || id == tokenizer().eos_id()) {
          prev = id;
          continue;
        }
        out += tokenizer().decode(prev, id);
        prev = id;
      }
      return byte_array(out);
    });
  }

  // Sentence embeddings (bindings/embed_bindings.cpp); one encoder Transformer kept for reuse.
  val embed(val texts, val options) {
    return guard([&] {
      if (!enc_) enc_ = std::make_unique<Transformer>(model_, 0, pool_);
      return embed_js(*enc_, tokenizer(), texts, options);
    });
  }

  JsSession* createSession(int context) {
    return guard([&] { return new JsSession(model_, context, pool_); });
  }

  // Logits for every position of `ids` from one batched forward at position 0, (n, vocab):
  // the same computation as the native `qkv logits`, for conformance tests.
  val allLogits(val ids_js, int context) {
    return guard([&] {
      std::vector<int> ids = vecFromJSArray<int>(ids_js);
      if (ids.empty()) fail(ErrorCode::BadArgument, "logits needs at least one token");
      Transformer t(model_, context, pool_);
      t.forward(ids.data(), (int)ids.size(), 0, true);
      return float_array(t.logits(), ids.size() * (size_t)model_.config.vocab_size);
    });
  }

  // Milliseconds per call of this model's CPU attention for one layer (see bench_attention),
  // on the model's threads. For device: 'auto', which compares it with the WebGPU path.
  double benchAttention(int n_kv, int n_q, int reps) {
    const ModelConfig& c = model_.config;
    return bench_attention(*pool_, c.n_heads, c.n_kv_heads, c.head_dim, n_kv, n_q, reps);
  }

  // run.c's generation for the CLI; onPiece(Uint8Array) gets each printed piece (a view: copy it).
  val run(const JsRunArgs& a, val on_piece) {
    return guard([&] {
      Transformer t(model_, a.args().context, pool_);
      RunStats st = run_generate(t, tokenizer(), a.args().run, [&](const std::string& p) {
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
  const Tokenizer& tokenizer() const {
    if (!tok_) fail(ErrorCode::BadArgument, "this model has no tokenizer: load one (options.tokenizer)");
    return *tok_;
  }
  LoadedModel model_;
  std::unique_ptr<Tokenizer> tok_;
  ChatTemplate chat_;  // tok_'s template, parsed and probed once (chat_template_of)
  std::shared_ptr<ThreadPool> pool_;
  std::unique_ptr<Transformer> enc_;
};

std::string simd_arch() { return simd_arch_name(); }
std::string usage() { return run_usage(); }

}  // namespace

EMSCRIPTEN_BINDINGS(qkv) {
  function("simdArch", &simd_arch);
  function("runUsage", &usage);
  function("benchAttention", &bench_attention_threads);
  class_<JsBuffer>("Buffer").constructor<double>().function("view", &JsBuffer::view).function("size", &JsBuffer::size)
      .function("addPart", &JsBuffer::addPart);
  class_<JsRunArgs>("RunArgs")
      .class_function("parse", &JsRunArgs::parse, allow_raw_pointers())
      .function("modelPath", &JsRunArgs::modelPath)
      .function("tokenizerPath", &JsRunArgs::tokenizerPath)
      .function("prompt", &JsRunArgs::prompt)
      .function("logitsOut", &JsRunArgs::logitsOut)
      .function("threads", &JsRunArgs::threads)
      .function("context", &JsRunArgs::context);
  class_<JsSampler>("Sampler").constructor(&construct<JsSampler, int, val>, allow_raw_pointers());
  class_<JsSession>("Session")
      .function("prefill", &JsSession::prefill)
      .function("feed", &JsSession::feed)
      .function("feedOne", &JsSession::feedOne)
      .function("sample", &JsSession::sample)
      .function("logits", &JsSession::logits)
      .function("truncate", &JsSession::truncate)
      .function("position", &JsSession::position)
      .function("context", &JsSession::context)
      .function("tokens", &JsSession::tokens)
      .function("kvCacheBytes", &JsSession::kvCacheBytes)
      .function("setCaptureAttention", &JsSession::setCaptureAttention)
      .function("attention", &JsSession::attention)
      .function("setExternalAttention", &JsSession::setExternalAttention)
      .function("feedBegin", &JsSession::feedBegin)
      .function("stepChunk", &JsSession::stepChunk)
      .function("stepPos", &JsSession::stepPos)
      .function("stepWindow", &JsSession::stepWindow)
      .function("stepQkv", &JsSession::stepQkv)
      .function("stepLayerEnd", &JsSession::stepLayerEnd)
      .function("stepChunkEnd", &JsSession::stepChunkEnd)
      .function("feedEnd", &JsSession::feedEnd)
      .function("stepQ", &JsSession::stepQ)
      .function("stepK", &JsSession::stepK)
      .function("stepV", &JsSession::stepV)
      .function("stepOut", &JsSession::stepOut)
      .function("stepProbs", &JsSession::stepProbs);
  class_<JsModel>("Model")
      .constructor(&construct<JsModel, const JsBuffer&, int>, allow_raw_pointers())
      .function("setTokenizer", &JsModel::setTokenizer)
      .function("hasTokenizer", &JsModel::hasTokenizer)
      .function("info", &JsModel::info)
      .function("tokenize", &JsModel::tokenize)
      .function("tokenizeSpecial", &JsModel::tokenizeSpecial)
      .function("renderChat", &JsModel::renderChat)
      .function("piece", &JsModel::piece)
      .function("detokenize", &JsModel::detokenize)
      .function("createSession", &JsModel::createSession, allow_raw_pointers())
      .function("allLogits", &JsModel::allLogits)
      .function("embed", &JsModel::embed)
      .function("benchAttention", &JsModel::benchAttention)
      .function("run", &JsModel::run);
}
