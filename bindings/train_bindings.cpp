// Embind surface of the trainer (src/train/trainer.h): thin wrappers only. Options arrive
// validated by src/js/trainer.js and are checked again by the Trainer; every C++ error is
// rethrown as a JS Error carrying `code`, as in qkv_bindings.cpp.
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cmath>
#include <memory>

#include "bindings_common.h"
#include "common.h"
#include "formats/gguf_writer.h"
#include "formats/loader.h"
#include "tokenizer/tokenizer.h"
#include "train/trainer.h"

using namespace emscripten;
using namespace qkv;
using qkv_js::construct;
using qkv_js::guard;
using qkv_js::throw_js;

namespace {

// A JS Uint8Array copied into the heap (model and tokenizer files, state).
std::shared_ptr<const Blob> blob_of(const val& bytes) {
  if (bytes.isNull() || bytes.isUndefined()) return nullptr;
  return std::make_shared<VectorBlob>(convertJSArrayToNumberVector<uint8_t>(bytes));
}

val byte_array(const std::vector<uint8_t>& v) {
  return val::global("Uint8Array").new_(val(typed_memory_view(v.size(), v.data())));
}

double num(const val& o, const char* key, double def) {
  val v = o[key];
  if (v.isUndefined() || v.isNull()) return def;
  if (v.typeOf().as<std::string>() != "number" || std::isnan(v.as<double>()))
    fail(ErrorCode::BadArgument, std::string("option ") + key + " must be a number");
  return v.as<double>();
}

int integer(const val& o, const char* key, int def, int lo, int hi) {
  const double d = num(o, key, def);
  if (d != std::floor(d) || d < lo || d > hi)
    fail(ErrorCode::BadArgument, std::string("option ") + key + " must be an integer in [" + std::to_string(lo) + ", " +
                                     std::to_string(hi) + "]");
  return (int)d;
}

// opts: {dim, layers, heads, kvHeads, hiddenDim, seq, vocab, batch, steps, warmup, lr, minLr,
// weightDecay, clip, beta1, beta2, seed, valFraction, evalBatches, attention, additiveDim,
// sparsePattern} (the JS layer fills defaults).
TrainConfig train_config(const val& o) {
  TrainConfig c;
  ModelConfig& m = c.model;
  m.dim = integer(o, "dim", 0, 0, 1 << 14);
  m.n_layers = integer(o, "layers", 0, 0, 256);
  m.n_heads = integer(o, "heads", 0, 0, 1024);
  m.n_kv_heads = integer(o, "kvHeads", m.n_heads, 0, 1024);
  m.hidden_dim = integer(o, "hiddenDim", 0, 0, 1 << 16);
  m.seq_len = integer(o, "seq", 0, 0, 1 << 14);
  m.head_dim = m.n_heads > 0 ? m.dim / m.n_heads : 0;
  c.vocab = integer(o, "vocab", 0, 0, 65536);
  c.batch = integer(o, "batch", 8, 1, 4096);
  c.steps = integer(o, "steps", 100, 1, 100000000);
  c.warmup = integer(o, "warmup", 0, 0, 100000000);
  c.lr = (float)num(o, "lr", 1e-3);
  c.min_lr = (float)num(o, "minLr", -1.0);
  c.weight_decay = (float)num(o, "weightDecay", 0.1);
  c.clip = (float)num(o, "clip", 1.0);
  c.beta1 = (float)num(o, "beta1", 0.9);
  c.beta2 = (float)num(o, "beta2", 0.95);
  const double seed = num(o, "seed", 1);
  if (!(seed >= 0) || seed > 9007199254740991.0 || seed != std::floor(seed))
    fail(ErrorCode::BadArgument, "option seed must be a non-negative integer");
  c.seed = (uint64_t)seed;
  c.val_fraction = num(o, "valFraction", 0.05);
  c.eval_batches = integer(o, "evalBatches", 4, 1, 100000);
  // Attention kinds of a fresh model: the native config's attention / additive_dim / sparse_* keys.
  std::string attention;
  const val a = o["attention"];
  if (!a.isUndefined() && !a.isNull()) {
    if (a.typeOf().as<std::string>() != "string")
      fail(ErrorCode::BadArgument, "option attention must be a comma-separated string of kinds");
    attention = a.as<std::string>();
  }
  m.additive_dim = integer(o, "additiveDim", 0, 0, 4096);
  const val sp = o["sparsePattern"];
  if (!sp.isUndefined() && !sp.isNull()) {
    if (sp.typeOf().as<std::string>() != "object")
      fail(ErrorCode::BadArgument, "option sparsePattern must be an object");
    m.sparse.block = integer(sp, "blockSize", m.sparse.block, 1, 1 << 16);
    m.sparse.window_blocks = integer(sp, "windowBlocks", m.sparse.window_blocks, 0, 1 << 16);
    m.sparse.global_tokens = integer(sp, "globalTokens", 0, 0, 1 << 16);
    m.sparse.random_blocks = integer(sp, "randomBlocks", 0, 0, 1024);
    const double s = num(sp, "seed", 0);
    if (!(s >= 0) || s > 4294967295.0 || s != std::floor(s))
      fail(ErrorCode::BadArgument, "option sparsePattern.seed must be an integer in [0, 4294967295]");
    m.sparse.seed = (uint64_t)s;
  }
  if (!attention.empty() && m.n_layers > 0) finish_attention_kinds(m, attention, "createTrainer");
  return c;
}

class JsTrainer {
 public:
  // model: GGUF (or llama2.c) bytes to fine-tune, or null for a fresh model of the options' shape.
  // tokenizer: GGUF bytes holding a tokenizer, or null (the model's, or learn opts.vocab pieces).
  JsTrainer(val opts, std::string text, val model, val tokenizer, int threads) {
    if (threads < 0 || threads > 256) fail(ErrorCode::BadArgument, "threads must be 0 (auto) .. 256");
    TrainConfig c = train_config(opts);
    auto pool = std::make_shared<ThreadPool>(threads > 0 ? threads : ThreadPool::hardware_threads());
    std::unique_ptr<Tokenizer> tok;
    if (auto tb = blob_of(tokenizer)) {
      tok = embedded_tokenizer(tb);
      if (!tok) fail(ErrorCode::BadTokenizer, "the tokenizer must be a GGUF file with tokenizer.ggml.* keys");
    }
    // Memory is checked against the cap before anything of the run is allocated.
    const double cap = num(opts, "maxMemory", 2147483648.0);
    auto check_memory = [&](ModelConfig mc, int T) {
      const double need = Trainer::memory_bytes(mc, c.batch, T);
      if (need > cap)
        fail(ErrorCode::OutOfMemory, "training " + mc.describe() + " on batches of " + std::to_string(c.batch) + " x " +
                                         std::to_string(T) + " tokens needs about " + format_bytes((uint64_t)need) +
                                         ", over the cap of " + format_bytes((uint64_t)cap) +
                                         " (maxMemory): use a smaller model, batch or seq");
    };
    if (auto mb = blob_of(model)) {
      LoadedModel base = load_model(mb);
      if (!tok) tok = embedded_tokenizer(mb);
      if (!tok) fail(ErrorCode::BadTokenizer, "this model file has no tokenizer: pass one (a tokenizer GGUF)");
      check_memory(base.config,
                   c.model.seq_len > 0 ? std::min(c.model.seq_len, base.config.seq_len) : base.config.seq_len);
      t_ = std::make_unique<Trainer>(c, text, std::move(tok), &base, pool);
    } else {
      ModelConfig mc = c.model;
      mc.vocab_size = tok ? tok->vocab_size() : c.vocab;
      check_memory(mc, mc.seq_len);
      t_ = std::make_unique<Trainer>(c, text, std::move(tok), nullptr, pool);
    }
  }

  val info() const {
    const ModelConfig& c = t_->model_config();
    const TrainConfig& tc = t_->config();
    val o = val::object();
    o.set("dim", c.dim);
    o.set("hiddenDim", c.hidden_dim);
    o.set("layers", c.n_layers);
    o.set("heads", c.n_heads);
    o.set("kvHeads", c.n_kv_heads);
    o.set("vocabSize", c.vocab_size);
    o.set("contextLength", c.seq_len);
    o.set("seq", t_->window());
    o.set("batch", tc.batch);
    o.set("steps", tc.steps);
    o.set("params", (double)t_->n_params());
    o.set("trainTokens", (double)t_->train_tokens());
    o.set("valTokens", (double)t_->val_tokens());
    o.set("threads", t_->threads());
    o.set("description", c.describe());
    o.set("attentionKinds", qkv_js::attention_kind_names(c.layer_attn, c.n_layers));
    qkv_js::attention_kind_params(c, c.has_attn(AttnKind::Additive), c.has_attn(AttnKind::BlockSparse), o);
    return o;
  }

  int stepsDone() const { return t_->steps_done(); }

  val step() {
    return guard([&] {
      const Trainer::Step s = t_->step();
      val o = val::object();
      o.set("step", s.step);
      o.set("loss", s.loss);
      o.set("lr", s.lr);
      o.set("gradNorm", s.grad_norm);
      o.set("tokens", (double)s.tokens);
      o.set("ms", s.seconds * 1000.0);
      return o;
    });
  }

  double evaluate() {
    return guard([&] { return t_->evaluate(); });
  }

  val toGGUF(std::string name, std::string dtype) const {
    return guard([&] { return byte_array(t_->to_gguf(name, parse_qtype(dtype))); });
  }
  val saveState() const {
    return guard([&] { return byte_array(t_->save_state()); });
  }
  void loadState(val bytes) {
    guard([&] {
      auto b = blob_of(bytes);
      if (!b) fail(ErrorCode::BadArgument, "loadState takes the bytes of saveState()");
      t_->load_state(b->data(), b->size());
      return 0;
    });
  }

 private:
  std::unique_ptr<Trainer> t_;
};

}  // namespace

EMSCRIPTEN_BINDINGS(qkv_train) {
  class_<JsTrainer>("Trainer")
      .constructor(&construct<JsTrainer, val, std::string, val, val, int>, allow_raw_pointers())
      .function("info", &JsTrainer::info)
      .function("stepsDone", &JsTrainer::stepsDone)
      .function("step", &JsTrainer::step)
      .function("evaluate", &JsTrainer::evaluate)
      .function("toGGUF", &JsTrainer::toGGUF)
      .function("saveState", &JsTrainer::saveState)
      .function("loadState", &JsTrainer::loadState);
}
