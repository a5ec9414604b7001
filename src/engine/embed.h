// Sentence embeddings: texts -> tokens -> encoder states (batched, several texts per pass) ->
// one pooled, optionally L2-normalised vector per text.
#pragma once
#include <string>
#include <vector>

#include "../model/transformer.h"
#include "../tokenizer/tokenizer.h"

namespace qkv {

struct EmbedOptions {
  // Mean: the average of every token's state (the added [CLS]/[SEP] included, as llama.cpp does);
  // Cls: the first token's; Last: the last token's. None: the model's own (GGUF *.pooling_type),
  // mean when it names none.
  PoolKind pooling = PoolKind::None;
  bool normalize = true;     // divide each vector by its L2 norm
  int max_batch_tokens = 0;  // tokens per encoder pass (0 = the model's encode_capacity())
  // A text longer than the model takes: an error naming it (false), or cut to its first
  // tokens plus its last one (the [SEP] a BERT tokenizer adds) (true).
  bool truncate = false;
};

PoolKind parse_pooling(const std::string& name);  // "mean" | "cls" | "last"; Error(BadArgument) otherwise

// The pooling `o` resolves to for this model.
PoolKind embed_pooling(const Transformer& model, const EmbedOptions& o);

// Embeds pre-tokenized texts: (texts.size(), dim), row i for texts[i]. Consecutive texts share
// an encoder pass while their tokens fit. Throws Error(BadArgument) for an empty list, an empty
// text, a text longer than the context (naming it; unless o.truncate), or an id outside the
// vocabulary.
std::vector<float> embed_ids(Transformer& model, const std::vector<std::vector<int>>& texts, const EmbedOptions& o);

// The texts as embed_ids encodes them: each within the model's limit, cut (o.truncate) or
// refused as embed_ids does. For engines that encode elsewhere (WebGPU) and pool here.
std::vector<std::vector<int>> embed_prepare(const Transformer& model, const std::vector<std::vector<int>>& texts,
                                            const EmbedOptions& o);
// One text's vector (dim,) from its n encoder states h (n, dim): pooled, L2-normalised if asked.
void embed_pool(const float* h, int n, int dim, PoolKind pool, bool normalize, float* out);

// Tokenizes each text as llama.cpp does for embeddings (with the tokenizer's added tokens, special
// tokens written in the text recognised), then embed_ids.
std::vector<float> embed_texts(Transformer& model, const Tokenizer& tok, const std::vector<std::string>& texts,
                               const EmbedOptions& o);
std::vector<std::vector<int>> embed_tokenize(const Tokenizer& tok, const std::vector<std::string>& texts);

// Rerankers (config().pooling == Rank). A (query, document) pair as llama.cpp's server lays it
// out: each text tokenized without special tokens, then BOS query EOS SEP document EOS, each
// marker where the tokenizer adds it (WordPiece: [CLS] query [SEP] document; XLM-RoBERTa's:
// <s> query </s></s> document </s>).
std::vector<int> rerank_pair(const Tokenizer& tok, const std::string& query, const std::string& document);

// The relevance score of each pre-built pair: the first token's state through the model's
// classification head, its first output (what llama.cpp's /rerank reports). Pairs share encoder
// passes as embed_ids' texts do. Throws Error(Unsupported) for a model without a head,
// Error(BadArgument) for an empty list or a pair longer than the context (naming it).
std::vector<float> rerank_ids(Transformer& model, const std::vector<std::vector<int>>& pairs, int max_batch_tokens = 0);

}  // namespace qkv
