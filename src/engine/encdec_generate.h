// Generation for encoder-decoder models: the source is encoded once (with the EOS the tokenizer
// appends), the decoder starts from the model's decoder start token and samples until an
// end-of-generation id or `steps` target tokens.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "../model/encdec.h"
#include "../tokenizer/tokenizer.h"
#include "generate.h"

namespace qkv {

// The source's ids as the model's encoder takes them (BOS/EOS as the tokenizer asks).
std::vector<int> encdec_source_ids(const Tokenizer& tok, const std::string& source);

// opt.prompt is the source; opt.steps bounds the target tokens (0 or > context: the context).
// emit receives each generated piece (the first without its leading space); the source is not
// echoed. Chat options are refused (encoder-decoder models have no chat template).
RunStats run_encdec_generate(EncoderDecoder& model, const Tokenizer& tok, const RunOptions& opt,
                             const std::function<void(const std::string&)>& emit,
                             const std::function<bool()>& should_stop = nullptr);

}  // namespace qkv
