// `qkv train CONFIG`: the training loop (data, AdamW, clipping, warm-up + cosine schedule,
// evaluation, GGUF checkpoints with the tokenizer embedded, resumable state).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../kernels/optim.h"
#include "../kernels/quant.h"
#include "../model/config.h"
#include "../model/weights.h"
#include "../threadpool.h"

namespace qkv {

struct ConfigEntry;

// What both trainers read the same way: the optimizer (AdamW with clipping) and its warm-up +
// cosine schedule, the evaluation cadence, the checkpoint written and the run. The defaults are
// the decoder's; EncDecTrainConfig sets its own.
struct TrainRunConfig {
  int batch = 8, steps = 1000, warmup = 100;
  float lr = 1e-3f, min_lr = -1.0f;  // min_lr < 0: lr / 10
  float weight_decay = 0.1f, clip = 1.0f, beta1 = 0.9f, beta2 = 0.95f;
  uint64_t seed = 1;
  int eval_interval = 100, log_interval = 10;
  std::string out = "model.gguf";  // the GGUF checkpoint
  std::string dtype = "f32";       // checkpoint weight type: f32 or f16
  std::string name;                // general.name in the GGUF (default: out's file name)
  int threads = 0;                 // 0 = all cores
  bool quiet = false;              // no progress output (tests)
};
// Reads a TrainRunConfig key into c; false for any other key (the trainer's own, or unknown).
bool parse_run_config_entry(TrainRunConfig& c, const ConfigEntry& e);
// The keys parse_run_config_entry reads, space-separated (for unknown-key errors).
extern const char* const kTrainRunKeys;
// After parsing: refuses a warm-up longer than the run; fills min_lr (lr / 10) and name.
void finish_run_config(TrainRunConfig& c);

struct TrainConfig : TrainRunConfig {
  ModelConfig model;      // dim, n_layers, n_heads, n_kv_heads, hidden_dim, seq_len (vocab from the tokenizer)
  std::string init;       // a GGUF model to fine-tune (its shape and tokenizer); empty: a fresh model
  std::string tokenizer;  // a tokenizer GGUF / tokenizer.bin; empty: learn one of `vocab` pieces from the data
  int vocab = 0;
  std::string data;            // UTF-8 text; blank lines separate documents (each starts with BOS)
  double val_fraction = 0.05;  // the tail of the token stream held out for validation
  int eval_batches = 8;
  std::string state;    // optimizer state for resuming; default out + ".state"
  bool resume = false;  // continue from `state` if it exists
  int stop_at = 0;      // > 0: stop (with a checkpoint) after this step; resume later
};

// key = value lines ('#' comments); later `overrides` ("key=value") win. Unknown keys, bad
// numbers and impossible values throw Error(BadArgument) naming the key (and the line).
TrainConfig parse_train_config(const std::string& text, const std::vector<std::string>& overrides = {},
                               const std::string& origin = "config");

struct TrainResult {
  std::vector<double> losses;  // training loss per step run by this call
  double val_loss = 0.0;       // at the end (NaN if there is no validation data)
  double tokens_per_s = 0.0, seconds = 0.0;
  int64_t params = 0;
  int start_step = 0, end_step = 0;
};

// Runs cfg through a Trainer: reads the data and tokenizer files, writes checkpoints and the
// optimizer state (cfg.out, cfg.state), resumes from the state when asked.
TrainResult run_training(const TrainConfig& cfg);

// AdamW over a model's flat f32 parameters, as both trainers step: a range of parameters with or
// without weight decay (the norm weights get none).
struct ParamSegment {
  int64_t b, e;
  bool decay;
};

class Tokenizer;
class TrainModel;

// One training run driven step by step: the encoded data, the model, AdamW's moments and the
// schedule. run_training (the CLI) and the JS API (bindings/train_bindings.cpp) both drive it,
// so there is one loop. Deterministic for a seed and a thread count.
class Trainer {
 public:
  // text: UTF-8, blank lines separate documents (each starts with BOS); the last
  // cfg.val_fraction of the token stream is held out. tok: the tokenizer, or null to learn a
  // BPE of cfg.vocab pieces from text. base: a model to fine-tune (llama layout, f32/f16/bf16
  // weights, tied classifier; its shape replaces cfg.model and training windows are
  // min(cfg.model.seq_len, its context) tokens), or null for a fresh model of cfg.model's shape
  // initialised from cfg.seed. Only the hyperparameters of cfg are used (not its file paths).
  // Throws Error(BadArgument / Unsupported) naming what is wrong.
  Trainer(const TrainConfig& cfg, const std::string& text, std::unique_ptr<Tokenizer> tok, const LoadedModel* base,
          std::shared_ptr<ThreadPool> pool);
  ~Trainer();

  struct Step {
    int step = 0;       // 1-based index of the step just run
    double loss = 0.0;  // mean cross-entropy of its batch (nats per token)
    float lr = 0.0f;
    double grad_norm = 0.0;  // before clipping
    int64_t tokens = 0;      // tokens in its batch
    double seconds = 0.0;
  };
  // One optimizer step on a random batch. Throws Error(BadArgument) past cfg.steps and
  // Error(Internal) if the loss is not finite.
  Step step();
  // Mean loss over up to eval_batches x batch windows of the held-out tokens (NaN if none).
  double evaluate();

  // The model as a llama GGUF with the tokenizer embedded (matrices as `type`: F32/F16/BF16).
  std::vector<uint8_t> to_gguf(const std::string& name, QType type = QType::F32) const;
  // Everything needed to continue exactly: step, data-sampling RNG, parameters, moments.
  std::vector<uint8_t> save_state() const;
  // Throws Error(BadModel) for a corrupt state and Error(BadArgument) for one of another run.
  void load_state(const uint8_t* data, size_t n, const std::string& origin = "training state");

  int steps_done() const { return step_; }
  const TrainConfig& config() const { return cfg_; }
  const ModelConfig& model_config() const;
  int64_t n_params() const;
  int64_t train_tokens() const { return n_train_; }
  int64_t val_tokens() const { return n_val_; }
  int window() const { return T_; }  // tokens per training sequence
  const Tokenizer& tokenizer() const { return *tok_; }
  int threads() const { return pool_->size(); }
  // Bytes a run of this shape allocates (parameters, gradients, moments, transposed operands,
  // activations), for memory caps checked before anything is allocated.
  static double memory_bytes(const ModelConfig& c, int batch, int T);

 private:
  std::string fingerprint() const;

  TrainConfig cfg_;
  std::unique_ptr<Tokenizer> tok_;
  std::shared_ptr<ThreadPool> pool_;
  std::unique_ptr<TrainModel> model_;
  std::vector<int> ids_;
  int64_t n_train_ = 0, n_val_ = 0;
  int T_ = 0, step_ = 0;
  uint64_t rng_ = 0;
  std::vector<float> m_, v_;
  std::vector<ParamSegment> segs_;  // optimizer segments: norms get no weight decay
  std::vector<int> in_, tg_;
};

// One `key = value` of a training config, with parsers whose errors (Error(BadArgument)) name
// where it came from, the key and the value. Both trainers' configs read through these.
struct ConfigEntry {
  const std::string& key;
  const std::string& value;
  const std::string& where;  // "config line 3", "argument 'lr=1'"
  [[noreturn]] void bad(const std::string& why) const;
  long long i64(long long lo, long long hi) const;  // an integer in lo..hi
  double f64(double lo, double hi) const;           // a number in [lo, hi]
  bool flag() const;                                // 1/true/yes or 0/false/no
};
// Calls f for each key = value line of text ('#' starts a comment, blank lines are skipped),
// then for each override ("key=value"); a line without '=' throws Error(BadArgument).
// The attention keys both trainers read (kAttentionKeys): `attention` (softmax, additive or
// block_sparse: one for every layer or a comma-separated list, one per layer) is kept as text
// until the layer count is known; the others set m's additive width and sparse pattern.
extern const char* const kAttentionKeys;
bool parse_attention_entry(ModelConfig& m, std::string& attention, const ConfigEntry& e);
// m.layer_attn from the `attention` text (n_layers known); additive width defaults to head_dim.
void finish_attention_kinds(ModelConfig& m, const std::string& attention, const std::string& what);
void for_each_config_entry(const std::string& text, const std::vector<std::string>& overrides,
                           const std::string& origin, const std::function<void(const ConfigEntry&)>& f);
// The config's `arch` value ("" if none, or if the text does not parse: the trainer that reads it
// reports the malformed line); picks the trainer (decoder, encdec, vit).
std::string train_config_arch(const std::string& text, const std::vector<std::string>& overrides);

// The segments of n_params parameters given the norm ranges (ascending, disjoint).
std::vector<ParamSegment> optimizer_segments(const std::vector<std::pair<int64_t, int64_t>>& norms, int64_t n_params);
// Scales the gradient G down to L2 norm `clip` when it is larger (clip 0: never); returns the
// norm before clipping.
double clip_grad_norm(std::vector<float>& G, float clip);
// One AdamW update of params (moments m, v) by G, segment by segment: h.weight_decay where a
// segment decays, 0 elsewhere.
void adamw_segments(float* params, const float* G, float* m, float* v, const std::vector<ParamSegment>& segs,
                    const AdamWParams& h);

// The optimizer half of a training step, shared by both trainers: clips G to cfg.clip, then one
// AdamW update at lr with cfg's betas and weight decay (step: 0-based). Returns the gradient norm
// before clipping.
inline double optimizer_step(float* params, std::vector<float>& G, float* m, float* v,
                             const std::vector<ParamSegment>& segs, const TrainRunConfig& cfg, float lr, int step) {
  const double norm = clip_grad_norm(G, cfg.clip);
  AdamWParams h;
  h.lr = lr;
  h.beta1 = cfg.beta1;
  h.beta2 = cfg.beta2;
  h.weight_decay = cfg.weight_decay;
  h.step = step + 1;
  adamw_segments(params, G.data(), m, v, segs, h);
  return norm;
}

// Writes path's bytes through path + ".tmp" and a rename, so a reader never sees half a file.
void write_file_atomic(const std::string& path, const void* data, size_t n);

// The learning rate at `step` (0-based): linear warm-up to lr over `warmup` steps, then a
// cosine from lr down to min_lr at `steps`.
float lr_at(const TrainRunConfig& cfg, int step);

}  // namespace qkv
