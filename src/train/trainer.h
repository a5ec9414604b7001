// `qkv train CONFIG`: the training loop (data, AdamW, clipping, warm-up + cosine schedule,
// evaluation, GGUF checkpoints with the tokenizer embedded, resumable state).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../model/config.h"

namespace qkv {

struct TrainConfig {
  ModelConfig model;          // dim, n_layers, n_heads, n_kv_heads, hidden_dim, seq_len (vocab from the tokenizer)
  std::string tokenizer;      // a tokenizer GGUF / tokenizer.bin; empty: learn one of `vocab` pieces from the data
  int vocab = 0;
  std::string data;           // UTF-8 text; blank lines separate documents (each starts with BOS)
  double val_fraction = 0.05; // the tail of the token stream held out for validation
  int batch = 8, steps = 1000, warmup = 100;
  float lr = 1e-3f, min_lr = -1.0f;  // min_lr < 0: lr / 10
  float weight_decay = 0.1f, clip = 1.0f, beta1 = 0.9f, beta2 = 0.95f;
  uint64_t seed = 1;
  int eval_interval = 100, eval_batches = 8, log_interval = 10;
  std::string out = "model.gguf";  // checkpoint (GGUF, llama arch, tokenizer embedded)
  std::string state;               // optimizer state for resuming; default out + ".state"
  std::string dtype = "f32";       // checkpoint weight type: f32 or f16
  std::string name;                // general.name in the GGUF (default: out's file name)
  int threads = 0;                 // 0 = all cores
  bool resume = false;             // continue from `state` if it exists
  int stop_at = 0;                 // > 0: stop (with a checkpoint) after this step; resume later
  bool quiet = false;              // no progress output (tests)
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

TrainResult run_training(const TrainConfig& cfg);

// The learning rate at `step` (0-based): linear warm-up to lr over `warmup` steps, then a
// cosine from lr down to min_lr at `steps`.
float lr_at(const TrainConfig& cfg, int step);

}  // namespace qkv
