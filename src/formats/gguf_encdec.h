// Encoder-decoder GGUF models (llama.cpp's `t5` architecture) and the Unigram tokenizer they
// carry (tokenizer.ggml.model = "t5").
#pragma once
#include <memory>

#include "../model/encdec.h"
#include "../tokenizer/tokenizer.h"
#include "gguf.h"

namespace qkv {

// Whether the file's architecture is an encoder-decoder one (t5).
bool gguf_is_encdec(const GgufFile& g);
// T5 as llama.cpp reads it: enc.blk.N.* and dec.blk.N.* (attn_q/k/v/o, attn_rel_b,
// cross_attn_*, ffn_gate (gated GELU; without it ReLU)/up/down, norms), enc/dec.output_norm,
// token_embd shared, output (else tied). Throws Error(BadModel / Unsupported) naming the problem.
EncDecModelData load_gguf_encdec(const GgufFile& g);
// tokenizer.ggml.model = t5: Unigram pieces, scores, types, precompiled_charsmap, EOS appended.
Tokenizer load_gguf_unigram(const GgufFile& g);

// From bytes: whether they are an encoder-decoder GGUF, and the model.
bool is_encdec_model(const std::shared_ptr<const Blob>& blob);
EncDecModelData load_encdec_model(std::shared_ptr<const Blob> blob);

}  // namespace qkv
