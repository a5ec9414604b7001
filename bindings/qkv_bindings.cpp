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
#include "cli/inspect.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "engine/generate.h"
#include "engine/session.h"
#include "engine/vision_chat.h"
#include "formats/loader.h"
#include "kernels/attention.h"
#include "kernels/simd.h"
#include "model/transformer.h"
#include "grammar/json_schema.h"
#include "grammar/vocab.h"
#include "chat/chat.h"
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
  // --grammar / --json-schema name files; the Node CLI reads them and hands the text back.
  std::string grammarPath() const { return a_.grammar_path; }
  std::string jsonSchemaPath() const { return a_.json_schema_path; }
  void setGrammar(std::string gbnf) { a_.run.grammar = std::move(gbnf); }
  void setJsonSchema(std::string schema) { a_.run.json_schema = std::move(schema); }

 private:
  explicit JsRunArgs(RunArgs a) : a_(std::move(a)) {}
  RunArgs a_;
};

class JsSampler {
 public:
  JsSampler(int vocab, val opts) { s_ = std::make_unique<Sampler>(vocab, sampler_options(opts)); }
  Sampler& get() { return *s_; }
  // The last sample's log-probabilities (options.logprobs >= 0): {logprob, top: [[id, logprob], ...]}.
  val lastLogprobs() const {
    val o = val::object();
    o.set("logprob", s_->last_logprob());
    val top = val::array();
    for (const auto& p : s_->last_top()) {
      val e = val::array();
      e.call<void>("push", p.first, p.second);
      top.call<void>("push", e);
    }
    o.set("top", top);
    return o;
  }
  void constrain(std::unique_ptr<GrammarMatcher> g) {
    s_->set_grammar(g.get());
    g_ = std::move(g);
  }

 private:
  std::unique_ptr<Sampler> s_;
  std::unique_ptr<GrammarMatcher> g_;
};

std::string json_schema_to_grammar(std::string schema) {
  return guard([&] { return json_schema_to_gbnf(schema); });
}

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
 public:
  JsSession(const LoadedModel& m, int context, std::shared_ptr<ThreadPool> pool) : s_(m, context, std::move(pool)) {}

  int prefill(val ids) {
    return guard([&] { return s_.prefill(vecFromJSArray<int>(ids)); });
  }
  // A prompt with images: ids hold -1 at the image tokens' positions, rows (a Float32Array)
  // their embedding rows in order (Model.imageTokens).
  int prefillRows(val ids, val rows) {
    return guard([&] {
      const std::vector<float> r = convertJSArrayToNumberVector<float>(rows);
      return s_.prefill(vecFromJSArray<int>(ids), r.data(), r.size());
    });
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

  // A feed computed on WebGPU (src/js/gpu-model.js): the tokens with their logits, (rows, vocab).
  void feedLogits(val ids, val logits, int rows) {
    guard([&] {
      std::vector<int> v = vecFromJSArray<int>(ids);
      std::vector<float> l = convertJSArrayToNumberVector<float>(logits);
      if (rows < 1 || l.size() != (size_t)rows * s_.config().vocab_size)
        fail(ErrorCode::BadArgument, "feedLogits: logits must hold rows x vocab values");
      s_.feed_logits(v.data(), (int)v.size(), l.data(), rows);
      return 0;
    });
  }
  // Partial offload: tokens whose states entering layer `first` came from WebGPU, hidden
  // (ids.length, dim); WASM runs the remaining layers and the classifier.
  void feedHidden(val ids, val hidden, int first, bool all_logits) {
    guard([&] {
      std::vector<int> v = vecFromJSArray<int>(ids);
      std::vector<float> x = convertJSArrayToNumberVector<float>(hidden);
      if (v.empty()) fail(ErrorCode::BadArgument, "feedHidden needs at least one token");
      if (x.size() != v.size() * (size_t)s_.config().dim)
        fail(ErrorCode::BadArgument, "feedHidden: hidden must hold tokens x dim values");
      s_.feed_hidden(v.data(), (int)v.size(), x.data(), first, all_logits);
      return 0;
    });
  }
  int hiddenPosition() const { return s_.hidden_position(); }
  // RoPE's cos and sin for every position of this session's context, (context, rot/2) each;
  // local: the sliding-window layers' table.
  val ropeTable(bool local) {
    return guard([&] {
      const Transformer& t = s_.transformer();
      const size_t n = (size_t)t.context() * (t.config().rot_dims() / 2);
      std::vector<float> cs(n), sn(n);
      t.rope_table(0, t.context(), local, cs.data(), sn.data());
      val o = val::object();
      o.set("cos", float_array(cs.data(), n));
      o.set("sin", float_array(sn.data(), n));
      return o;
    });
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

// The shape fields Model.info() and gpuModel() share.
static val shape_info(const ModelConfig& c) {
  val o = val::object();
  o.set("arch", c.arch);
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
  return o;
}

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
      trie_.reset();
      tok_ = std::make_unique<Tokenizer>(
          Tokenizer::from_llama2c(tok.blob()->data(), tok.blob()->size(), model_.config.vocab_size));
      chat_ = chat_template_of(tok_.get());
      return 0;
    });
  }
  bool hasTokenizer() const { return tok_ != nullptr; }

  val info() const {
    const ModelConfig& c = model_.config;
    val o = shape_info(c);
    o.set("description", c.describe());
    o.set("tiedClassifier", c.tied_classifier);
    o.set("weightBytes", (double)(model_.storage ? model_.storage->size() : 0));
    o.set("threads", pool_->size());
    o.set("simd", std::string(simd_arch_name()));
    o.set("bosId", tok_ ? tok_->bos_id() : 1);
    o.set("eosId", tok_ ? tok_->eos_id() : 2);
    o.set("eogIds", int_array(tok_ ? tok_->eog_ids() : std::vector<int>()));
    o.set("addBos", tok_ ? tok_->add_bos() : true);
    o.set("tokenizer", std::string(tok_ ? tok_->kind() : "none"));
    embed_info(c, o);
    o.set("attentionKinds", attention_kind_names(c.layer_attn, c.n_layers));
    attention_kind_params(c, c.has_attn(AttnKind::Additive), c.has_attn(AttnKind::BlockSparse), o);
    const ChatTemplate& ct = chat_;
    o.set("chatFormat", std::string(chat_format_name(ct.format)));
    o.set("chatFormatGuessed", ct.guessed);
    o.set("chatTemplate", std::string(ct.jinja_ok ? "jinja" : ct.jinja.empty() ? "none" : "builtin"));
    o.set("chatFallbackReason", ct.fallback_reason);
    return o;
  }

  val sparseMask(int q0, int n_q, int n_kv) const {
    return guard([&] { return sparse_mask(model_.config, q0, n_q, n_kv, model_.config.causal); });
  }

  val tokenize(std::string text, bool bos) const {
    return guard([&] { return int_array(tokenizer().encode(text, bos, false)); });
  }
  // special: control tokens spelled in the text (chat markers) become their ids.
  val tokenizeSpecial(std::string text, bool bos, bool special) const {
    return guard([&] { return int_array(tokenizer().encode(text, bos, false, special)); });
  }
  // The work tokenizeSpecial does (scan and regex steps), for the linearity tests.
  double tokenizeWork(std::string text, bool bos, bool special) const {
    return guard([&] {
      uint64_t work = 0;
      tokenizer().encode(text, bos, false, special, &work);
      return (double)work;
    });
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
        if (m.typeOf().as<std::string>() != "object" || m.isNull() ||
            m["role"].typeOf().as<std::string>() != "string" || m["content"].typeOf().as<std::string>() != "string" ||
            (!m["fields"].isUndefined() && m["fields"].typeOf().as<std::string>() != "string"))
          fail(ErrorCode::BadArgument,
               "chat message " + std::to_string(i) + " must be {role: string, content: string}");
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
    return guard([&] { return embed_js(encoder(), tokenizer(), texts, options); });
  }

  // Reranker scores (bindings/embed_bindings.cpp), on the same encoder Transformer.
  val rerank(val query, val documents) {
    return guard([&] { return rerank_js(encoder(), tokenizer(), query, documents); });
  }

  // Model.embed on WebGPU: the texts' ids as embed() encodes them, and the pooling of one
  // text's encoder states (bindings/embed_bindings.cpp).
  val embedPrepare(val texts, val options) {
    return guard([&] { return embed_prepare_js(encoder(), tokenizer(), texts, options); });
  }
  val embedPool(val hidden, int n, val options) {
    return guard([&] { return embed_pool_js(encoder(), hidden, n, options); });
  }

  // Images in chat: the mmproj of this (text) model, checked against its embedding width.
  void attachMmproj(const JsBuffer& buf) {
    guard([&] {
      images_ = std::make_unique<ImageTokenizer>(buf.model_blob(), model_.config.dim, pool_);
      return 0;
    });
  }
  bool hasMmproj() const { return images_ != nullptr; }
  val mmprojInfo() const {
    return guard([&] {
      if (!images_) fail(ErrorCode::BadArgument, "this model was loaded without an mmproj");
      const ModelConfig& v = images_->vision_config();
      val o = val::object();
      o.set("projector", images_->projector());
      o.set("imageSize", images_->image_size());
      o.set("patchSize", v.patch_size);
      o.set("imageTokens", images_->tokens_per_image());
      o.set("visionLayers", v.n_layers);
      o.set("visionDim", v.dim);
      o.set("dim", images_->dim());
      return o;
    });
  }
  // RGBA bytes in a heap buffer -> the image's token rows, a Float32Array (imageTokens, dim).
  val imageTokens(const JsBuffer& rgba, int width, int height) {
    return guard([&] {
      if (!images_) fail(ErrorCode::BadArgument, "this model was loaded without an mmproj: images need one");
      const std::vector<float> r = images_->encode(rgba.blob()->data(), rgba.blob()->size(), width, height);
      return float_array(r.data(), r.size());
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

  // What a WebGPU forward needs (src/js/gpu-model.js decides what it can run): the options of
  // ModelConfig and the weights as stored, each {layer (-1: model-wide), role, type, rows, cols,
  // bytes: a Uint8Array view into the heap (valid while the model lives and the heap does not grow)}.
  val gpuModel() const {
    return guard([&] {
      const ModelConfig& c = model_.config;
      const ModelWeights& w = model_.weights;
      val o = shape_info(c);
      o.set("normEps", c.norm_eps);
      o.set("rotDims", c.rot_dims());
      o.set("causal", c.causal);
      o.set("postNorm", c.post_norm);
      o.set("embedScale", c.embed_scale);
      o.set("attnScale", c.attn_scale > 0.0f ? c.attn_scale : 1.0f / std::sqrt((float)c.head_dim));
      o.set("attnSoftcap", c.attn_softcap);
      o.set("logitSoftcap", c.logit_softcap);
      o.set("tokenTypes", c.n_token_types);
      o.set("embedNorm", w.embed_norm != nullptr);
      val attn = val::array(), window = val::array(), local = val::array(), rope = val::array();
      for (int l = 0; l < c.n_layers; l++) {
        attn.call<void>("push", std::string(attn_kind_name(c.attn_of(l))));
        window.call<void>("push", c.window_of(l));
        local.call<void>("push", c.local_rope(l));
        rope.call<void>("push", c.rope_at(l));
      }
      o.set("layerAttn", attn);
      o.set("layerWindow", window);
      o.set("localRope", local);
      o.set("layerRope", rope);
      o.set("residualScale", c.residual_scale);
      o.set("logitScale", c.logit_scale);
      o.set("qkNormWhole", c.qk_norm_whole);
      o.set("parallelFfn", c.parallel_ffn);
      o.set("experts", c.n_experts);
      o.set("expertsUsed", c.n_experts_used);
      o.set("expertNormTopk", c.expert_norm_topk);
      val tensors = val::array();
      auto mat = [&](int layer, const char* role, const Tensor& t) {
        if (!t) return;
        val e = val::object();
        e.set("layer", layer);
        e.set("role", std::string(role));
        e.set("type", std::string(qtype_name(t.type)));
        e.set("rows", (double)t.rows);
        e.set("cols", (double)t.cols);
        e.set("byteLength", (double)t.rows * (double)t.row_bytes());
        if (!t.resident()) {  // a GPU-resident load: where its bytes lie in the source (part, offset)
          e.set("part", t.absent_part);
          e.set("offset", (double)t.absent_offset);
          tensors.call<void>("push", e);
          return;
        }
        e.set("bytes", val(typed_memory_view((size_t)t.rows * t.row_bytes(), static_cast<const uint8_t*>(t.data))));
        tensors.call<void>("push", e);
      };
      auto vec = [&](int layer, const char* role, const float* p, int64_t rows, int64_t cols) {
        if (!p) return;
        mat(layer, role, Tensor{QType::F32, p, rows, cols});
      };
      mat(-1, "tok_embed", w.tok_embed);
      vec(-1, "pos_embed", w.pos_embed, c.seq_len, c.dim);
      vec(-1, "type_embed", w.type_embed, c.n_token_types, c.dim);
      vec(-1, "embed_norm", w.embed_norm, 1, c.dim);
      vec(-1, "embed_norm_b", w.embed_norm_b, 1, c.dim);
      vec(-1, "final_norm", w.final_norm, 1, c.dim);
      vec(-1, "final_norm_b", w.final_norm_b, 1, c.dim);
      const bool tied =
          w.classifier.data == w.tok_embed.data && w.classifier.absent_offset == w.tok_embed.absent_offset;
      if (!tied) mat(-1, "classifier", w.classifier);
      o.set("tiedClassifier", tied);
      o.set("hasClassifier", (bool)w.classifier);
      const int d = c.dim, qd = c.q_dim(), kvd = c.kv_dim(), hid = c.hidden_dim, hd = c.head_dim;
      for (int l = 0; l < c.n_layers; l++) {
        const LayerWeights& L = w.layers[l];
        vec(l, "attn_norm", L.attn_norm, 1, d);
        vec(l, "attn_norm_b", L.attn_norm_b, 1, d);
        mat(l, "wq", L.wq);
        mat(l, "wk", L.wk);
        mat(l, "wv", L.wv);
        mat(l, "wo", L.wo);
        vec(l, "bq", L.bq, 1, qd);
        vec(l, "bk", L.bk, 1, kvd);
        vec(l, "bv", L.bv, 1, kvd);
        vec(l, "bo", L.bo, 1, d);
        vec(l, "attn_post_norm", L.attn_post_norm, 1, d);
        vec(l, "ffn_post_norm", L.ffn_post_norm, 1, d);
        vec(l, "q_norm", L.q_norm, 1, c.qk_norm_whole ? qd : hd);  // OLMo 2: over the whole projection
        vec(l, "k_norm", L.k_norm, 1, c.qk_norm_whole ? kvd : hd);
        vec(l, "ffn_norm", L.ffn_norm, 1, d);
        vec(l, "ffn_norm_b", L.ffn_norm_b, 1, d);
        mat(l, "w_gate", L.w_gate);
        mat(l, "w_up", L.w_up);
        mat(l, "w_down", L.w_down);
        vec(l, "b_up", L.b_up, 1, hid);
        vec(l, "b_down", L.b_down, 1, d);
        mat(l, "router", L.router);  // mixture of experts: (experts, dim) and the stacked experts
        mat(l, "gate_exps", L.gate_exps);
        mat(l, "up_exps", L.up_exps);
        mat(l, "down_exps", L.down_exps);
      }
      o.set("tensors", tensors);
      return o;
    });
  }

  // Milliseconds per call of this model's CPU attention for one layer (see bench_attention),
  // on the model's threads. For device: 'auto', which compares it with the WebGPU path.
  double benchAttention(int n_kv, int n_q, int reps) {
    const ModelConfig& c = model_.config;
    return bench_attention(*pool_, c.n_heads, c.n_kv_heads, c.head_dim, n_kv, n_q, reps);
  }

  // Constrains a sampler to GBNF text or a JSON Schema (one of them non-empty) over this
  // model's vocabulary (its token trie is built once per tokenizer).
  void constrain(JsSampler& s, std::string gbnf, std::string schema) {
    guard([&] {
      if (!trie_) trie_ = token_trie(tokenizer());
      s.constrain(std::make_unique<GrammarMatcher>(compile_grammar(gbnf, schema), trie_));
      return 0;
    });
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
      val notes = val::array();
      for (const std::string& n : st.notes) notes.call<void>("push", n);
      o.set("notes", notes);
      return o;
    });
  }

 private:
  const Tokenizer& tokenizer() const {
    if (!tok_) fail(ErrorCode::BadArgument, "this model has no tokenizer: load one (options.tokenizer)");
    return *tok_;
  }
  // The encoder Transformer of embed(), made on first use and kept.
  Transformer& encoder() {
    if (!enc_) enc_ = std::make_unique<Transformer>(model_, 0, pool_);
    return *enc_;
  }
  LoadedModel model_;
  std::unique_ptr<Tokenizer> tok_;
  ChatTemplate chat_;  // tok_'s template, parsed and probed once (chat_template_of)
  std::shared_ptr<ThreadPool> pool_;
  std::unique_ptr<ImageTokenizer> images_;  // the mmproj (attachMmproj), if any
  std::unique_ptr<Transformer> enc_;
  std::shared_ptr<TokenTrie> trie_;
};

// A GPU-resident load's plan for one GGUF file from its first bytes (`head`) and its length:
// {dataOffset, tensors: [{name, offset (in the file), bytes, heap}]}, heap: kept in the heap
// (gguf_keeps_in_heap), else streamed to the GPU. Null while `head` is too short to hold the
// whole header (read more); other errors are the parser's, with offsets checked against `size`.
val gguf_layout(const JsBuffer& head, double size) {
  return guard([&] {
    if (!(size >= head.size()) || size > 9007199254740991.0) fail(ErrorCode::BadArgument, "ggufLayout: bad file size");
    auto sparse = std::make_shared<SparseBlob>(head.blob(), (uint64_t)size);
    GgufFile g;
    try {
      g = GgufFile::parse_part(sparse);
    } catch (const Error& e) {
      if (head.size() < size && e.code() == ErrorCode::BadModel) return val::null();
      throw;
    }
    val tensors = val::array();
    for (const GgufTensorInfo& t : g.tensors()) {
      val e = val::object();
      e.set("name", t.name);
      e.set("offset", (double)g.tensor_file_offset(t));
      e.set("bytes", (double)t.bytes);
      e.set("heap", gguf_keeps_in_heap(t));
      tensors.call<void>("push", e);
    }
    val o = val::object();
    o.set("dataOffset", (double)g.data_offset());
    o.set("tensors", tensors);
    return o;
  });
}

std::string simd_arch() { return simd_arch_name(); }
std::string usage() { return run_usage(); }
std::string qtypes() { return qtype_names(); }
std::string version() { return QKV_VERSION; }
std::string did_you_mean_js(std::string word, val known) {
  return did_you_mean(word, vecFromJSArray<std::string>(known));
}
std::string unknown_option(std::string flag, val known) {
  return unknown_option_message(flag, vecFromJSArray<std::string>(known));
}

// `qkv info` / `qkv tokenize` for the Node CLI: src/cli/inspect.h, the native command's code.
val inspect_parse_args(std::string cmd, val argv) {
  return guard([&] {
    const InspectArgs a = parse_inspect_args(cmd, vecFromJSArray<std::string>(argv));
    val o = val::object();
    o.set("model", a.model_path);
    o.set("tokenizer", a.tokenizer_path);
    o.set("text", a.text);
    return o;
  });
}
bool inspect_needs_tokenizer(const JsBuffer& model) { return needs_separate_tokenizer(*model.model_blob()); }
std::string inspect_run(std::string cmd, const JsBuffer& model, val tok, std::string text) {
  return guard([&] {
    std::shared_ptr<const Blob> tb;
    if (!tok.isNull() && !tok.isUndefined()) tb = tok.as<JsBuffer*>(allow_raw_pointers())->blob();
    return cmd == "info" ? model_info_json(model.model_blob(), tb.get())
                         : tokenize_lines(model.model_blob(), tb.get(), text);
  });
}

// Which class loads these bytes ('decoder', 'encdec', 'image'): one parse of the header.
std::string model_kind_of(const JsBuffer& buf) {
  return guard([&] {
    switch (model_kind(buf.model_blob())) {
      case ModelKind::EncoderDecoder: return std::string("encdec");
      case ModelKind::ImageEncoder: return std::string("image");
      default: return std::string("decoder");
    }
  });
}

}  // namespace

EMSCRIPTEN_BINDINGS(qkv) {
  function("modelKind", &model_kind_of);
  function("simdArch", &simd_arch);
  function("runUsage", &usage);
  function("qtypeNames", &qtypes);
  function("version", &version);
  function("unknownOptionMessage", &unknown_option);
  function("didYouMean", &did_you_mean_js);
  function("inspectParseArgs", &inspect_parse_args);
  function("inspectNeedsTokenizer", &inspect_needs_tokenizer);
  function("inspect", &inspect_run);
  function("benchAttention", &bench_attention_threads);
  function("ggufLayout", &gguf_layout);
  class_<JsBuffer>("Buffer")
      .constructor<double>()
      .function("view", &JsBuffer::view)
      .function("size", &JsBuffer::size)
      .function("addPart", &JsBuffer::addPart)
      .function("setSparse", &JsBuffer::setSparse)
      .function("clearParts", &JsBuffer::clearParts)
      .function("addRange", &JsBuffer::addRange)
      .function("heldBytes", &JsBuffer::heldBytes)
      .function("setName", &JsBuffer::setName);
  class_<JsRunArgs>("RunArgs")
      .class_function("parse", &JsRunArgs::parse, allow_raw_pointers())
      .function("modelPath", &JsRunArgs::modelPath)
      .function("tokenizerPath", &JsRunArgs::tokenizerPath)
      .function("prompt", &JsRunArgs::prompt)
      .function("logitsOut", &JsRunArgs::logitsOut)
      .function("threads", &JsRunArgs::threads)
      .function("context", &JsRunArgs::context)
      .function("grammarPath", &JsRunArgs::grammarPath)
      .function("jsonSchemaPath", &JsRunArgs::jsonSchemaPath)
      .function("setGrammar", &JsRunArgs::setGrammar)
      .function("setJsonSchema", &JsRunArgs::setJsonSchema);
  function("jsonSchemaToGrammar", &json_schema_to_grammar);
  class_<JsSampler>("Sampler")
      .constructor(&construct<JsSampler, int, val>, allow_raw_pointers())
      .function("lastLogprobs", &JsSampler::lastLogprobs);
  class_<JsSession>("Session")
      .function("prefill", &JsSession::prefill)
      .function("prefillRows", &JsSession::prefillRows)
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
      .function("feedLogits", &JsSession::feedLogits)
      .function("feedHidden", &JsSession::feedHidden)
      .function("hiddenPosition", &JsSession::hiddenPosition)
      .function("ropeTable", &JsSession::ropeTable);
  class_<JsModel>("Model")
      .constructor(&construct<JsModel, const JsBuffer&, int>, allow_raw_pointers())
      .function("setTokenizer", &JsModel::setTokenizer)
      .function("hasTokenizer", &JsModel::hasTokenizer)
      .function("info", &JsModel::info)
      .function("sparseMask", &JsModel::sparseMask)
      .function("tokenize", &JsModel::tokenize)
      .function("tokenizeSpecial", &JsModel::tokenizeSpecial)
      .function("tokenizeWork", &JsModel::tokenizeWork)
      .function("renderChat", &JsModel::renderChat)
      .function("piece", &JsModel::piece)
      .function("detokenize", &JsModel::detokenize)
      .function("createSession", &JsModel::createSession, allow_raw_pointers())
      .function("attachMmproj", &JsModel::attachMmproj)
      .function("hasMmproj", &JsModel::hasMmproj)
      .function("mmprojInfo", &JsModel::mmprojInfo)
      .function("imageTokens", &JsModel::imageTokens)
      .function("allLogits", &JsModel::allLogits)
      .function("embed", &JsModel::embed)
      .function("rerank", &JsModel::rerank)
      .function("benchAttention", &JsModel::benchAttention)
      .function("gpuModel", &JsModel::gpuModel)
      .function("embedPrepare", &JsModel::embedPrepare)
      .function("embedPool", &JsModel::embedPool)
      .function("constrain", &JsModel::constrain)
      .function("run", &JsModel::run);
}
