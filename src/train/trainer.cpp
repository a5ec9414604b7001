// The training loop: config, data, optimizer, schedule, evaluation, checkpoints, resume.
#include "trainer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "../common.h"
#include "../formats/file.h"
#include "../formats/gguf_writer.h"
#include "../formats/loader.h"
#include "../kernels/optim.h"
#include "../tokenizer/tokenizer.h"
#include "bpe.h"
#include "model.h"
#include "rng.h"

namespace qkv {

// ---- config -------------------------------------------------------------------------------

static std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

void ConfigEntry::bad(const std::string& why) const {
  fail(ErrorCode::BadArgument, where + ": " + key + " = '" + value + "': " + why);
}

long long ConfigEntry::i64(long long lo, long long hi) const {
  char* end = nullptr;
  errno = 0;
  long long r = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end || errno) bad("not an integer");
  if (r < lo || r > hi) bad("must be " + std::to_string(lo) + ".." + std::to_string(hi));
  return r;
}

double ConfigEntry::f64(double lo, double hi) const {
  char* end = nullptr;
  double r = std::strtod(value.c_str(), &end);
  if (value.empty() || *end || std::isnan(r)) bad("not a number");
  if (r < lo || r > hi) bad("must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return r;
}

bool ConfigEntry::flag() const {
  if (value == "1" || value == "true" || value == "yes") return true;
  if (value == "0" || value == "false" || value == "no") return false;
  bad("must be true or false");
}

void for_each_config_entry(const std::string& text, const std::vector<std::string>& overrides,
                           const std::string& origin, const std::function<void(const ConfigEntry&)>& f) {
  auto line_kv = [&](const std::string& raw, const std::string& where) {
    std::string line = raw.substr(0, raw.find('#'));
    if (trim(line).empty()) return;
    size_t eq = line.find('=');
    if (eq == std::string::npos)
      fail(ErrorCode::BadArgument, where + ": expected key = value, got '" + trim(raw) + "'");
    const std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    f(ConfigEntry{key, value, where});
  };
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); n++) line_kv(line, origin + " line " + std::to_string(n));
  for (const auto& o : overrides) line_kv(o, "argument '" + o + "'");
}

const char* const kTrainRunKeys =
    "batch steps warmup lr min_lr weight_decay clip beta1 beta2 seed eval_interval log_interval out dtype name threads quiet";

std::string train_config_arch(const std::string& text, const std::vector<std::string>& overrides) {
  std::string arch;
  try {
    for_each_config_entry(text, overrides, "config", [&](const ConfigEntry& e) {
      if (e.key == "arch") arch = e.value;
    });
  } catch (const Error&) {
    return "";
  }
  return arch;
}

bool parse_run_config_entry(TrainRunConfig& c, const ConfigEntry& e) {
  const std::string &k = e.key, &v = e.value;
  if (k == "batch") c.batch = (int)e.i64(1, 4096);
  else if (k == "steps") c.steps = (int)e.i64(1, 100000000);
  else if (k == "warmup") c.warmup = (int)e.i64(0, 100000000);
  else if (k == "lr") c.lr = (float)e.f64(0.0, 10.0);
  else if (k == "min_lr") c.min_lr = (float)e.f64(0.0, 10.0);
  else if (k == "weight_decay") c.weight_decay = (float)e.f64(0.0, 10.0);
  else if (k == "clip") c.clip = (float)e.f64(0.0, 1e9);
  else if (k == "beta1") c.beta1 = (float)e.f64(0.0, 0.999999);
  else if (k == "beta2") c.beta2 = (float)e.f64(0.0, 0.999999);
  else if (k == "seed") c.seed = (uint64_t)e.i64(0, (1LL << 62));
  else if (k == "eval_interval") c.eval_interval = (int)e.i64(0, 100000000);
  else if (k == "log_interval") c.log_interval = (int)e.i64(1, 100000000);
  else if (k == "out") c.out = v;
  else if (k == "dtype") {
    if (v != "f32" && v != "f16") e.bad("must be f32 or f16");
    c.dtype = v;
  } else if (k == "name") c.name = v;
  else if (k == "threads") c.threads = (int)e.i64(0, 256);
  else if (k == "quiet") c.quiet = e.flag();
  else return false;
  return true;
}

void finish_run_config(TrainRunConfig& c) {
  if (c.warmup > c.steps) fail(ErrorCode::BadArgument, "train config: warmup is longer than steps");
  if (c.min_lr < 0) c.min_lr = c.lr / 10;
  if (c.name.empty()) c.name = c.out.substr(c.out.find_last_of('/') + 1);
}

TrainConfig parse_train_config(const std::string& text, const std::vector<std::string>& overrides,
                               const std::string& origin) {
  TrainConfig c;
  c.model.dim = 0;
  int n_heads = 0, n_kv_heads = 0;
  std::string attention;  // attention kinds: one for every layer, or one per layer, comma-separated
  for_each_config_entry(text, overrides, origin, [&](const ConfigEntry& e) {
    const std::string &k = e.key, &v = e.value;
    if (parse_run_config_entry(c, e)) return;
    if (parse_attention_entry(c.model, attention, e)) return;
    if (k == "dim") c.model.dim = (int)e.i64(1, 1 << 14);
    else if (k == "n_layers") c.model.n_layers = (int)e.i64(1, 256);
    else if (k == "n_heads") n_heads = (int)e.i64(1, 1024);
    else if (k == "n_kv_heads") n_kv_heads = (int)e.i64(1, 1024);
    else if (k == "hidden_dim") c.model.hidden_dim = (int)e.i64(1, 1 << 16);
    else if (k == "seq_len") c.model.seq_len = (int)e.i64(2, 1 << 14);
    else if (k == "vocab") c.vocab = (int)e.i64(260, 65536);
    else if (k == "tokenizer") c.tokenizer = v;
    else if (k == "init") c.init = v;
    else if (k == "data") c.data = v;
    else if (k == "val_fraction") c.val_fraction = e.f64(0.0, 0.5);
    else if (k == "eval_batches") c.eval_batches = (int)e.i64(1, 100000);
    else if (k == "state") c.state = v;
    else if (k == "resume") c.resume = e.flag();
    else if (k == "stop_at") c.stop_at = (int)e.i64(0, 100000000);
    else
      fail(ErrorCode::BadArgument,
           e.where + ": unknown key '" + k +
               "' (known: init dim n_layers n_heads n_kv_heads hidden_dim seq_len vocab tokenizer data "
               "val_fraction eval_batches state resume stop_at " +
               kAttentionKeys + " " + kTrainRunKeys + ")");
  });

  ModelConfig& m = c.model;
  auto need = [](bool ok, const std::string& msg) {
    if (!ok) fail(ErrorCode::BadArgument, "train config: " + msg);
  };
  finish_run_config(c);
  if (c.state.empty()) c.state = c.out + ".state";
  if (!c.init.empty()) {  // fine-tuning: the shape and the tokenizer are the model's
    need(m.dim == 0 && m.n_layers == 0 && n_heads == 0 && n_kv_heads == 0 && m.hidden_dim == 0 && c.vocab == 0 &&
             c.tokenizer.empty(),
         "init (a model to fine-tune) brings its own shape and tokenizer: remove dim, n_layers, n_heads, n_kv_heads, "
         "hidden_dim, vocab and tokenizer (seq_len may shorten the training windows)");
    need(!c.data.empty(), "data (a UTF-8 text file) is missing");
    need(attention.empty(), "init brings its own attention kinds: remove attention");
    return c;
  }
  need(m.dim > 0, "dim is missing");
  need(m.n_layers > 0, "n_layers is missing");
  need(n_heads > 0, "n_heads is missing");
  need(m.hidden_dim > 0, "hidden_dim is missing");
  need(m.seq_len > 0, "seq_len is missing");
  need(!c.data.empty(), "data (a UTF-8 text file) is missing");
  need(!c.tokenizer.empty() || c.vocab > 0, "give a tokenizer file or a vocab size to learn one");
  need(m.dim % n_heads == 0,
       "dim " + std::to_string(m.dim) + " is not a multiple of n_heads " + std::to_string(n_heads));
  m.n_heads = n_heads;
  m.n_kv_heads = n_kv_heads > 0 ? n_kv_heads : n_heads;
  need(m.n_kv_heads <= n_heads && n_heads % m.n_kv_heads == 0,
       "n_heads " + std::to_string(n_heads) + " is not a multiple of n_kv_heads " + std::to_string(m.n_kv_heads));
  m.head_dim = m.dim / n_heads;
  need(m.head_dim % 2 == 0, "head dim (dim / n_heads) must be even for RoPE");
  finish_attention_kinds(m, attention, "train config");
  return c;
}

const char* const kAttentionKeys =
    "attention additive_dim sparse_block sparse_window sparse_global sparse_random sparse_seed";

bool parse_attention_entry(ModelConfig& m, std::string& attention, const ConfigEntry& e) {
  const std::string& k = e.key;
  if (k == "attention") attention = e.value;
  else if (k == "additive_dim") m.additive_dim = (int)e.i64(1, 4096);
  else if (k == "sparse_block") m.sparse.block = (int)e.i64(1, 1 << 16);
  else if (k == "sparse_window") m.sparse.window_blocks = (int)e.i64(0, 1 << 16);
  else if (k == "sparse_global") m.sparse.global_tokens = (int)e.i64(0, 1 << 16);
  else if (k == "sparse_random") m.sparse.random_blocks = (int)e.i64(0, 1024);
  else if (k == "sparse_seed") m.sparse.seed = (uint64_t)e.i64(0, 0xffffffffll);
  else return false;
  return true;
}

void finish_attention_kinds(ModelConfig& m, const std::string& attention, const std::string& what) {
  m.layer_attn.clear();
  if (attention.empty()) return;
  std::vector<AttnKind> kinds;
  size_t at = 0;
  while (at <= attention.size()) {
    size_t end = attention.find(',', at);
    if (end == std::string::npos) end = attention.size();
    std::string name = attention.substr(at, end - at);
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    if (name == "softmax") kinds.push_back(AttnKind::Softmax);
    else if (name == "additive") kinds.push_back(AttnKind::Additive);
    else if (name == "block_sparse") kinds.push_back(AttnKind::BlockSparse);
    else
      fail(ErrorCode::BadArgument,
           what + ": attention kind '" + name + "' is not one of softmax, additive, block_sparse");
    at = end + 1;
  }
  if (kinds.size() == 1) kinds.assign(m.n_layers, kinds[0]);
  if ((int)kinds.size() != m.n_layers)
    fail(ErrorCode::BadArgument, what + ": attention lists " + std::to_string(kinds.size()) + " kinds for " +
                                     std::to_string(m.n_layers) + " layers (give one, or one per layer)");
  m.layer_attn = kinds;
  if (m.has_attn(AttnKind::Additive) && m.additive_dim == 0) m.additive_dim = m.head_dim;
}

std::vector<ParamSegment> optimizer_segments(const std::vector<std::pair<int64_t, int64_t>>& norms, int64_t n_params) {
  std::vector<ParamSegment> segs;
  int64_t at = 0;
  for (auto [b, e] : norms) {
    if (b > at) segs.push_back({at, b, true});
    segs.push_back({b, e, false});
    at = e;
  }
  if (at < n_params) segs.push_back({at, n_params, true});
  return segs;
}

double clip_grad_norm(std::vector<float>& G, float clip) {
  double ss = 0.0;
  for (float g : G) ss += (double)g * g;
  const double norm = std::sqrt(ss);
  if (clip > 0 && norm > clip) {
    const float f = (float)(clip / norm);
    for (float& g : G) g *= f;
  }
  return norm;
}

void adamw_segments(float* params, const float* G, float* m, float* v, const std::vector<ParamSegment>& segs,
                    const AdamWParams& h) {
  AdamWParams hs = h;
  for (const ParamSegment& s : segs) {
    hs.weight_decay = s.decay ? h.weight_decay : 0.0f;
    adamw_simd(params + s.b, G + s.b, m + s.b, v + s.b, s.e - s.b, hs);
  }
}

float lr_at(const TrainRunConfig& c, int step) {
  if (step < c.warmup) return c.lr * (float)(step + 1) / (float)c.warmup;
  const double span = c.steps - c.warmup;
  const double t = span > 0 ? std::min(1.0, (step - c.warmup) / span) : 1.0;
  return (float)(c.min_lr + 0.5 * (c.lr - c.min_lr) * (1.0 + std::cos(3.141592653589793 * t)));
}

// ---- data ---------------------------------------------------------------------------------

static std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(ErrorCode::Io, "cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Documents are separated by blank lines; each is encoded with BOS and the dummy prefix, as a
// prompt is encoded at generation time.
static std::vector<int> encode_documents(const Tokenizer& tok, const std::string& text) {
  std::vector<int> ids;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find("\n\n", pos);
    if (end == std::string::npos) end = text.size();
    std::string doc = text.substr(pos, end - pos);
    while (!doc.empty() && (doc.back() == '\n' || doc.back() == '\r')) doc.pop_back();
    size_t b = doc.find_first_not_of('\n');
    if (b != std::string::npos) {
      std::vector<int> d = tok.encode(doc.substr(b), true, false);
      ids.insert(ids.end(), d.begin(), d.end());
    }
    pos = end + 2;
  }
  return ids;
}

// ---- the trainer ----------------------------------------------------------------------------

// Refuses what TrainModel cannot represent, naming it, before anything is copied.
static void check_base(const LoadedModel& m) {
  const ModelConfig& c = m.config;
  auto no = [](const std::string& why) { fail(ErrorCode::Unsupported, "cannot fine-tune this model: " + why); };
  if (c.arch != "llama") no("architecture '" + c.arch + "' (training supports llama models)");
  if (!c.tied_classifier) no("its classifier is separate from the token embedding (training supports tied ones)");
  for (int l = 0; l < c.n_layers; l++)
    if ((c.attn_of(l) != AttnKind::Softmax && c.attn_of(l) != AttnKind::BlockSparse) || c.window_of(l) != 0)
      no("layer " + std::to_string(l) + " uses " + (c.window_of(l) ? "sliding-window" : attn_kind_name(c.attn_of(l))) +
         " attention (fine-tuning takes softmax and block-sparse layers)");
  const ModelWeights& w = m.weights;
  if (w.pos_embed || w.rope_factors || w.rope_factors_long || w.rope_factors_short || c.rope_attn_factor != 1.0f ||
      c.rope_yarn || w.final_norm_b)
    no("it has position embeddings, RoPE factors, YaRN scaling or norm biases");
  auto weight = [&](const Tensor& t, const std::string& name) {
    if (t.type != QType::F32 && t.type != QType::F16 && t.type != QType::BF16)
      no(name + " is stored as " + qtype_name(t.type) +
         " (quantized); fine-tuning needs f32 or f16 weights: use the unquantized model");
  };
  weight(w.tok_embed, "the token embedding");
  for (size_t l = 0; l < w.layers.size(); l++) {
    const LayerWeights& L = w.layers[l];
    const std::string n = "layer " + std::to_string(l) + " ";
    if (L.bq || L.bk || L.bv || L.bo || L.b_up || L.b_down || L.attn_norm_b || L.ffn_norm_b) no(n + "has biases");
    if (L.q_norm || L.k_norm) no(n + "normalises q and k per head (Qwen3-style)");
    weight(L.wq, n + "wq");
    weight(L.wk, n + "wk");
    weight(L.wv, n + "wv");
    weight(L.wo, n + "wo");
    weight(L.w_gate, n + "w_gate");
    weight(L.w_up, n + "w_up");
    weight(L.w_down, n + "w_down");
  }
}

static void copy_tensor(float* dst, const Tensor& t) {
  for (int64_t r = 0; r < t.rows; r++) dequantize_row_ref(t.type, t.row(r), dst + r * t.cols, (int)t.cols);
}

double Trainer::memory_bytes(const ModelConfig& c, int batch, int T) {
  const double P = (double)ParamLayout(c).total, N = (double)batch * T;
  const double d = c.dim, q = c.q_dim(), kv = c.kv_dim(), h = c.hidden_dim, V = c.vocab_size;
  const double per_layer = N * (4 * d + 2 * q + 2 * kv + 3 * h) + (double)batch * c.n_heads * T * T;
  const double scratch = N * (2 * d + 2 * q + 2 * kv + 3 * h) + N * (3 * d + V);
  // linear_backward's transposes: the largest weight matrix and a 256-token block of both sides.
  const double transposed = std::max({V * d, h * d, q * d}) + 256.0 * (std::max({V, h, q, d}) + std::max({d, h, q}));
  return 4.0 * (4 * P + c.n_layers * per_layer + scratch + transposed);
}

Trainer::Trainer(const TrainConfig& cfg, const std::string& text, std::unique_ptr<Tokenizer> tok,
                 const LoadedModel* base, std::shared_ptr<ThreadPool> pool)
    : cfg_(cfg), tok_(std::move(tok)), pool_(std::move(pool)) {
  if (!pool_) pool_ = std::make_shared<ThreadPool>(cfg.threads > 0 ? cfg.threads : ThreadPool::hardware_threads());
  if (cfg_.min_lr < 0) cfg_.min_lr = cfg_.lr / 10;
  if (text.empty()) fail(ErrorCode::BadArgument, "the training text is empty");
  auto need = [](bool ok, const std::string& msg) {
    if (!ok) fail(ErrorCode::BadArgument, "training options: " + msg);
  };
  need(cfg_.batch >= 1 && cfg_.steps >= 1, "batch and steps must be at least 1");
  need(cfg_.warmup >= 0 && cfg_.warmup <= cfg_.steps, "warmup must be in 0..steps");
  need(cfg_.val_fraction >= 0 && cfg_.val_fraction <= 0.5, "val_fraction must be in [0, 0.5]");
  need(cfg_.eval_batches >= 1, "eval_batches must be at least 1");
  need(std::isfinite(cfg_.lr) && cfg_.lr >= 0 && std::isfinite(cfg_.min_lr) && cfg_.beta1 >= 0 && cfg_.beta1 < 1 &&
           cfg_.beta2 >= 0 && cfg_.beta2 < 1 && cfg_.weight_decay >= 0 && cfg_.clip >= 0,
       "lr, min_lr, weight_decay, clip must be finite and non-negative, beta1 and beta2 in [0, 1)");
  if (base) check_base(*base);
  if (!tok_) {
    if (base) fail(ErrorCode::BadArgument, "fine-tuning needs the model's tokenizer");
    tok_ = std::make_unique<Tokenizer>(bpe_tokenizer(train_bpe(text, cfg_.vocab)));
  }
  ModelConfig mc = cfg_.model;
  if (base) {
    mc = base->config;
    if (tok_->vocab_size() != mc.vocab_size)
      fail(ErrorCode::BadArgument, "the tokenizer has " + std::to_string(tok_->vocab_size()) + " pieces, the model " +
                                       std::to_string(mc.vocab_size));
    T_ = cfg_.model.seq_len > 0 ? std::min(cfg_.model.seq_len, mc.seq_len) : mc.seq_len;
  } else {
    mc.vocab_size = tok_->vocab_size();
    T_ = mc.seq_len;
  }
  cfg_.model = mc;
  ids_ = encode_documents(*tok_, text);
  const int T = T_;
  n_val_ = (int64_t)(ids_.size() * cfg_.val_fraction);
  n_train_ = (int64_t)ids_.size() - n_val_;
  if (n_train_ < T + 1)
    fail(ErrorCode::BadArgument, "training data has " + std::to_string(n_train_) + " training tokens; seq_len " +
                                     std::to_string(T) + " needs at least " + std::to_string(T + 1));
  if (n_val_ > 0 && n_val_ < T + 1)
    fail(ErrorCode::BadArgument, "validation split has " + std::to_string(n_val_) +
                                     " tokens, fewer than seq_len + 1 = " + std::to_string(T + 1) +
                                     "; raise val_fraction or set it to 0");
  model_ = std::make_unique<TrainModel>(mc, pool_.get());
  const int64_t P = model_->layout().total;
  m_.assign(P, 0.0f);
  v_.assign(P, 0.0f);
  rng_ = Rng(cfg_.seed * 0x9E3779B97F4A7C15ull + 1).state();
  if (base) {
    const ParamLayout& lay = model_->layout();
    float* p = model_->params().data();
    const ModelWeights& w = base->weights;
    const int D = mc.dim;
    copy_tensor(p + lay.tok_embed, w.tok_embed);
    for (int l = 0; l < mc.n_layers; l++) {
      const auto& L = lay.layers[l];
      const LayerWeights& W = w.layers[l];
      std::memcpy(p + L.attn_norm, W.attn_norm, D * sizeof(float));
      copy_tensor(p + L.wq, W.wq);
      copy_tensor(p + L.wk, W.wk);
      copy_tensor(p + L.wv, W.wv);
      copy_tensor(p + L.wo, W.wo);
      std::memcpy(p + L.ffn_norm, W.ffn_norm, D * sizeof(float));
      copy_tensor(p + L.w_gate, W.w_gate);
      copy_tensor(p + L.w_down, W.w_down);
      copy_tensor(p + L.w_up, W.w_up);
    }
    std::memcpy(p + lay.final_norm, w.final_norm, D * sizeof(float));
  } else {
    model_->init(cfg_.seed);
  }
  segs_ = optimizer_segments(model_->layout().norms, P);
  in_.resize((size_t)cfg_.batch * T);
  tg_.resize((size_t)cfg_.batch * T);
}

Trainer::~Trainer() = default;

const ModelConfig& Trainer::model_config() const { return model_->config(); }
int64_t Trainer::n_params() const { return model_->layout().total; }

Trainer::Step Trainer::step() {
  using clk = std::chrono::steady_clock;
  if (step_ >= cfg_.steps)
    fail(ErrorCode::BadArgument, "the run is complete: all " + std::to_string(cfg_.steps) + " steps are done");
  const auto t0 = clk::now();
  const int B = cfg_.batch, T = T_;
  Rng rng(1);
  rng.set_state(rng_);
  for (int b = 0; b < B; b++) {
    const int64_t s = (int64_t)rng.below((uint64_t)(n_train_ - T));
    for (int t = 0; t < T; t++) {
      in_[(size_t)b * T + t] = ids_[s + t];
      tg_[(size_t)b * T + t] = ids_[s + t + 1];
    }
  }
  TrainModel& model = *model_;
  model.zero_grads();
  const double loss = model.forward(in_.data(), tg_.data(), B, T);
  if (!std::isfinite(loss))
    fail(ErrorCode::Internal,
         "the loss became " + std::to_string(loss) + " at step " + std::to_string(step_) + "; lower lr");
  model.backward();
  const float lr = lr_at(cfg_, step_);
  const double norm =
      optimizer_step(model.params().data(), model.grads(), m_.data(), v_.data(), segs_, cfg_, lr, step_);
  rng_ = rng.state();  // committed only once the step succeeded
  step_++;
  Step r;
  r.step = step_;
  r.loss = loss;
  r.lr = lr;
  r.grad_norm = norm;
  r.tokens = (int64_t)B * T;
  r.seconds = std::chrono::duration<double>(clk::now() - t0).count();
  return r;
}

double Trainer::evaluate() {
  if (n_val_ == 0) return std::nan("");
  const int B = cfg_.batch, T = T_;
  const int64_t windows = std::min<int64_t>((n_val_ - 1) / T, (int64_t)cfg_.eval_batches * B);
  double sum = 0.0;
  int64_t done = 0;
  while (done < windows) {
    const int b = (int)std::min<int64_t>(B, windows - done);
    for (int i = 0; i < b; i++) {
      const int64_t s = n_train_ + (done + i) * T;
      for (int t = 0; t < T; t++) {
        in_[(size_t)i * T + t] = ids_[s + t];
        tg_[(size_t)i * T + t] = ids_[s + t + 1];
      }
    }
    sum += model_->forward(in_.data(), tg_.data(), b, T) * b;
    done += b;
  }
  return sum / windows;
}

std::vector<uint8_t> Trainer::to_gguf(const std::string& name, QType type) const {
  if (type != QType::F32 && type != QType::F16 && type != QType::BF16)
    fail(ErrorCode::BadArgument, std::string("checkpoints are written as f32, f16 or bf16, not ") + qtype_name(type));
  LoadedModel view = model_->view();
  return llama2c_to_gguf(view, *tok_, name, type);
}

// ---- state: everything needed to continue exactly -------------------------------------------

static constexpr char kStateMagic[8] = {'Q', 'K', 'V', 'T', 'R', 'N', '0', '1'};

std::string Trainer::fingerprint() const {
  ModelConfig fc = cfg_.model;
  fc.vocab_size = 0;  // as written by earlier versions (states stay compatible)
  return fc.describe() + " | batch " + std::to_string(cfg_.batch) + " | seed " + std::to_string(cfg_.seed) +
         " | params " + std::to_string(n_params());
}

std::vector<uint8_t> Trainer::save_state() const {
  const std::string fp = fingerprint();
  const std::vector<float>& p = model_->params();
  std::vector<uint8_t> o;
  o.reserve(32 + fp.size() + p.size() * 12);
  auto put = [&](const void* d, size_t n) { o.insert(o.end(), (const uint8_t*)d, (const uint8_t*)d + n); };
  put(kStateMagic, 8);
  const uint32_t fl = (uint32_t)fp.size();
  put(&fl, 4);
  put(fp.data(), fp.size());
  const int32_t step = step_;
  put(&step, 4);
  put(&rng_, 8);
  const int64_t n = (int64_t)p.size();
  put(&n, 8);
  put(p.data(), p.size() * 4);
  put(m_.data(), m_.size() * 4);
  put(v_.data(), v_.size() * 4);
  return o;
}

void Trainer::load_state(const uint8_t* bytes, size_t size, const std::string& origin) {
  size_t off = 0;
  auto get = [&](void* d, size_t n) {
    if (size - off < n) fail(ErrorCode::BadModel, origin + " is truncated");
    std::memcpy(d, bytes + off, n);
    off += n;
  };
  char magic[8];
  get(magic, 8);
  if (std::memcmp(magic, kStateMagic, 8) != 0) fail(ErrorCode::BadModel, origin + " is not a qkv training state");
  uint32_t fl;
  get(&fl, 4);
  if (fl > 4096) fail(ErrorCode::BadModel, origin + " is corrupt");
  std::string got(fl, '\0');
  get(got.data(), fl);
  const std::string fp = fingerprint();
  if (got != fp)
    fail(ErrorCode::BadArgument, origin + " belongs to another run:\n  state:  " + got + "\n  config: " + fp +
                                     "\n(delete it or point `state` elsewhere to start over)");
  int32_t step;
  uint64_t rng;
  int64_t n;
  get(&step, 4);
  get(&rng, 8);
  get(&n, 8);
  const int64_t P = n_params();
  if (n != P) fail(ErrorCode::BadModel, origin + " has the wrong parameter count");
  if (step < 0 || step > cfg_.steps)
    fail(ErrorCode::BadModel,
         origin + " is at step " + std::to_string(step) + ", outside 0.." + std::to_string(cfg_.steps));
  if (size - off != (size_t)P * 12)
    fail(ErrorCode::BadModel, origin + (size - off < (size_t)P * 12 ? " is truncated" : " has trailing bytes"));
  std::memcpy(model_->params().data(), bytes + off, P * 4);
  std::memcpy(m_.data(), bytes + off + P * 4, P * 4);
  std::memcpy(v_.data(), bytes + off + P * 8, P * 4);
  step_ = step;
  rng_ = rng ? rng : 1;
}

// ---- the CLI's loop -----------------------------------------------------------------------

static std::string clock_text(double s) {
  char b[32];
  const int t = (int)(s + 0.5);
  if (t >= 3600) snprintf(b, sizeof b, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  else snprintf(b, sizeof b, "%d:%02d", t / 60, t % 60);
  return b;
}

void write_file_atomic(const std::string& path, const void* data, size_t n) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(static_cast<const char*>(data), (std::streamsize)n);
    if (!f) fail(ErrorCode::Io, "cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(ErrorCode::Io, "cannot rename " + tmp + " to " + path);
}

TrainResult run_training(const TrainConfig& cfg) {
  using clk = std::chrono::steady_clock;
  const bool tty = !cfg.quiet && isatty(2);
  auto say = [&](const char* fmt, auto... args) {
    if (cfg.quiet) return;
    if (tty) fprintf(stderr, "\r\033[K");
    fprintf(stderr, fmt, args...);
    fflush(stderr);
  };

  // Tokenizer: from a file, or learned from the data (by the Trainer).
  const std::string text = read_text(cfg.data);
  if (text.empty()) fail(ErrorCode::BadArgument, "training data " + cfg.data + " is empty");
  std::unique_ptr<Tokenizer> tok;
  std::shared_ptr<const Blob> init_blob;
  LoadedModel base;
  if (!cfg.init.empty()) {
    init_blob = map_file(cfg.init);
    base = load_model(init_blob);
    tok = embedded_tokenizer(init_blob);
    if (!tok)
      fail(ErrorCode::BadArgument, "init model " + cfg.init + " carries no tokenizer (fine-tuning needs a GGUF)");
    say("fine-tuning %s\n", cfg.init.c_str());
  } else if (!cfg.tokenizer.empty()) {
    auto blob = map_file(cfg.tokenizer);
    tok = embedded_tokenizer(blob);
    if (!tok) {
      if (cfg.vocab <= 0)
        fail(ErrorCode::BadArgument,
             "tokenizer " + cfg.tokenizer + " is not a GGUF; a llama2.c tokenizer.bin also needs vocab = N");
      tok = std::make_unique<Tokenizer>(Tokenizer::from_llama2c(blob->data(), blob->size(), cfg.vocab));
    }
  } else {
    say("learning a %d-piece BPE tokenizer from %s\n", cfg.vocab, cfg.data.c_str());
  }
  auto pool = std::make_shared<ThreadPool>(cfg.threads > 0 ? cfg.threads : ThreadPool::hardware_threads());
  Trainer tr(cfg, text, std::move(tok), cfg.init.empty() ? nullptr : &base, pool);
  const TrainConfig& c = tr.config();
  if (cfg.resume) {
    std::ifstream f(cfg.state, std::ios::binary);
    if (f) {
      std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      tr.load_state(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "training state " + cfg.state);
      say("resuming from %s at step %d\n", cfg.state.c_str(), tr.steps_done());
    }
  }
  say("model: %s\n%.2fM parameters | %lld tokens (%lld train, %lld validation) | batch %d x %d | %d threads, %s\n",
      tr.model_config().describe().c_str(), tr.n_params() / 1e6, (long long)(tr.train_tokens() + tr.val_tokens()),
      (long long)tr.train_tokens(), (long long)tr.val_tokens(), c.batch, tr.window(), tr.threads(), "f32");

  auto checkpoint = [&]() {
    std::vector<uint8_t> g = tr.to_gguf(c.name, parse_qtype(c.dtype));
    write_file_atomic(c.out, g.data(), g.size());
    std::vector<uint8_t> s = tr.save_state();
    write_file_atomic(c.state, s.data(), s.size());
  };

  TrainResult res;
  res.params = tr.n_params();
  res.start_step = tr.steps_done();
  double train_seconds = 0.0, last_val = std::nan("");
  int64_t tokens = 0;
  const auto t_start = clk::now();
  const int stop = c.stop_at > 0 ? std::min(c.stop_at, c.steps) : c.steps;
  int saved_at = -1;
  while (tr.steps_done() < stop) {
    const Trainer::Step s = tr.step();
    train_seconds += s.seconds;
    tokens += s.tokens;
    res.losses.push_back(s.loss);
    const int step = s.step;  // 1-based
    const double tps = tokens / std::max(train_seconds, 1e-9);
    const int done = step - res.start_step, left = c.steps - step;
    const double eta = train_seconds / done * left;
    const bool eval_now = c.eval_interval > 0 && (step % c.eval_interval == 0 || step == c.steps);
    if (eval_now) {
      last_val = tr.evaluate();
      say("step %6d/%d | loss %.4f | val %.4f (ppl %.2f) | lr %.2e | grad norm %.3f | %.0f tok/s | %s elapsed, ETA %s\n",
          step, c.steps, s.loss, last_val, std::exp(last_val), s.lr, s.grad_norm, tps,
          clock_text(std::chrono::duration<double>(clk::now() - t_start).count()).c_str(), clock_text(eta).c_str());
      checkpoint();
      saved_at = step;
    } else if (tty) {
      const int w = 30, fill = (int)((double)step / c.steps * w);
      fprintf(stderr, "\r\033[K[%s%s] %d/%d | loss %.4f | lr %.2e | %.0f tok/s | ETA %s",
              std::string(fill, '#').c_str(), std::string(w - fill, '.').c_str(), step, c.steps, s.loss, s.lr, tps,
              clock_text(eta).c_str());
      fflush(stderr);
    } else if (step % c.log_interval == 0) {
      say("step %6d/%d | loss %.4f | lr %.2e | grad norm %.3f | %.0f tok/s | ETA %s\n", step, c.steps, s.loss, s.lr,
          s.grad_norm, tps, clock_text(eta).c_str());
    }
  }
  const int end = tr.steps_done();
  if (saved_at != end) {
    last_val = tr.evaluate();
    checkpoint();
  }
  res.end_step = end;
  res.val_loss = last_val;
  res.seconds = train_seconds;
  res.tokens_per_s = tokens / std::max(train_seconds, 1e-9);
  say("done: %d steps in %s (%.0f tok/s) | final val loss %.4f (ppl %.2f) | wrote %s and %s\n", end - res.start_step,
      clock_text(train_seconds).c_str(), res.tokens_per_s, last_val, std::exp(last_val), c.out.c_str(),
      c.state.c_str());
  return res;
}

}  // namespace qkv
