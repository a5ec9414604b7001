// `qkv train CONFIG` with `arch = encdec`: trains the encoder-decoder model (encdec_model.h) on
// a generated sequence-to-sequence task (task = dates: dates.h) with a character vocabulary,
// AdamW with clipping and the warm-up + cosine schedule of trainer.h, and writes a `t5` GGUF
// that qkv's encoder-decoder loader (and llama.cpp's t5 loader) reads.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../model/encdec.h"
#include "../tokenizer/tokenizer.h"
#include "dates.h"
#include "encdec_model.h"
#include "trainer.h"

namespace qkv {

// The shared keys (TrainRunConfig: optimizer, schedule, checkpoint) with this trainer's defaults.
struct EncDecTrainConfig : TrainRunConfig {
  EncDecTrainConfig() {
    batch = 32;
    warmup = 50;
    lr = 3e-3f;
    weight_decay = 0.01f;
    beta2 = 0.98f;
    eval_interval = 200;
    log_interval = 20;
  }
  EncDecTrainShape shape;  // vocab from the task's alphabet
  std::string task = "dates";
  int val_examples = 512;  // held-out examples for validation loss and exact match
  uint64_t data_seed = 1;  // training examples; validation uses data_seed + 1; seed: initialisation
};

// key = value lines as parse_train_config; unknown keys and bad values throw Error(BadArgument).
EncDecTrainConfig parse_encdec_train_config(const std::string& text, const std::vector<std::string>& overrides = {},
                                            const std::string& origin = "config");

struct EncDecTrainResult {
  std::vector<double> losses;
  double val_loss = 0.0, val_exact = 0.0;  // exact-match fraction of greedy translations
  double seconds = 0.0;
  int64_t params = 0;
};
EncDecTrainResult run_encdec_training(const EncDecTrainConfig& cfg);

// The character vocabulary as a Unigram tokenizer (<pad> 0 = decoder start, </s> 1, <unk> 2,
// then one piece per character, spaces as U+2581; no space prefix; EOS appended), written into
// a GGUF's tokenizer.ggml.* keys by encdec_to_gguf.
std::vector<std::string> char_vocab_pieces(const std::string& alphabet);
Tokenizer char_unigram_tokenizer(const std::string& alphabet);
// The model and its character vocabulary as a `t5` GGUF (matrices stored as `type`).
std::vector<uint8_t> encdec_to_gguf(const EncDecModelData& m, const std::string& alphabet, const std::string& name,
                                    QType type = QType::F32);

// Greedy translation: encode the source, decode until EOS or max_len target tokens.
std::string encdec_greedy(EncoderDecoder& model, const Tokenizer& tok, const std::string& source, int max_len);

}  // namespace qkv
