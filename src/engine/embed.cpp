// Sentence embeddings over Transformer::encode: batching, pooling, normalisation.
#include "embed.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "../common.h"

namespace qkv {

PoolKind parse_pooling(const std::string& name) {
  if (name == "mean") return PoolKind::Mean;
  if (name == "cls") return PoolKind::Cls;
  if (name == "last") return PoolKind::Last;
  fail(ErrorCode::BadArgument, "pooling '" + name + "' is not one of mean, cls, last");
}

PoolKind embed_pooling(const Transformer& model, const EmbedOptions& o) {
  if (o.pooling != PoolKind::None) return o.pooling;
  return model.config().pooling == PoolKind::None ? PoolKind::Mean : model.config().pooling;
}

std::vector<std::vector<int>> embed_tokenize(const Tokenizer& tok, const std::vector<std::string>& texts) {
  std::vector<std::vector<int>> ids;
  ids.reserve(texts.size());
  for (const std::string& t : texts) ids.push_back(tok.encode(t, true, true, true));
  return ids;
}

static int embed_pass_tokens(const Transformer& model, const EmbedOptions& o) {
  return o.max_batch_tokens > 0 ? std::min(o.max_batch_tokens, model.encode_capacity()) : model.encode_capacity();
}

std::vector<std::vector<int>> embed_prepare(const Transformer& model, const std::vector<std::vector<int>>& input,
                                            const EmbedOptions& o) {
  if (input.empty()) fail(ErrorCode::BadArgument, "embed needs at least one text");
  const size_t limit = (size_t)std::min(model.context(), embed_pass_tokens(model, o));
  std::vector<std::vector<int>> texts = input;
  for (size_t i = 0; i < texts.size(); i++) {
    std::vector<int>& t = texts[i];
    const size_t n = t.size();
    if (n == 0) fail(ErrorCode::BadArgument, "text " + std::to_string(i) + " has no tokens");
    if (n <= limit) continue;
    if (!o.truncate)
      fail(ErrorCode::BadArgument, "text " + std::to_string(i) + " is " + std::to_string(n) + " tokens long; this model takes at most " +
                                       std::to_string(limit) + " (split or shorten it, or truncate)");
    const int last = t.back();
    t.resize(limit);
    t.back() = last;  // keep the closing token ([SEP])
  }
  return texts;
}

void embed_pool(const float* h, int n, int dim, PoolKind pool, bool normalize, float* e) {
  if (pool == PoolKind::Mean) {
    std::vector<double> acc(dim, 0.0);
    for (int t = 0; t < n; t++)
      for (int d = 0; d < dim; d++) acc[d] += h[(int64_t)t * dim + d];
    for (int d = 0; d < dim; d++) e[d] = (float)(acc[d] / n);
  } else {
    const int64_t r = pool == PoolKind::Cls ? 0 : n - 1;
    std::memcpy(e, h + r * dim, sizeof(float) * dim);
  }
  if (normalize) {
    double ss = 0.0;
    for (int d = 0; d < dim; d++) ss += (double)e[d] * e[d];
    const float inv = ss > 0.0 ? (float)(1.0 / std::sqrt(ss)) : 0.0f;
    for (int d = 0; d < dim; d++) e[d] *= inv;
  }
}

std::vector<float> embed_ids(Transformer& model, const std::vector<std::vector<int>>& input, const EmbedOptions& o) {
  const int cap = embed_pass_tokens(model, o);
  const std::vector<std::vector<int>> texts = embed_prepare(model, input, o);
  const PoolKind pool = embed_pooling(model, o);
  const int dim = model.config().dim;
  std::vector<float> out(texts.size() * (size_t)dim);
  std::vector<int> tokens, lens;
  for (size_t first = 0; first < texts.size();) {
    // The longest run of texts whose tokens fit one pass.
    size_t last = first;
    int64_t total = 0;
    tokens.clear();
    lens.clear();
    while (last < texts.size() && total + (int64_t)texts[last].size() <= cap) {
      total += (int64_t)texts[last].size();
      tokens.insert(tokens.end(), texts[last].begin(), texts[last].end());
      lens.push_back((int)texts[last].size());
      last++;
    }
    const float* h = model.encode(tokens.data(), nullptr, lens.data(), (int)lens.size());
    int64_t row = 0;
    for (size_t i = first; i < last; i++) {
      const int n = lens[i - first];
      embed_pool(h + row * dim, n, dim, pool, o.normalize, out.data() + i * (size_t)dim);
      row += n;
    }
    first = last;
  }
  return out;
}

std::vector<float> embed_texts(Transformer& model, const Tokenizer& tok, const std::vector<std::string>& texts,
                               const EmbedOptions& o) {
  if (texts.empty()) fail(ErrorCode::BadArgument, "embed needs at least one text");
  return embed_ids(model, embed_tokenize(tok, texts), o);
}

}  // namespace qkv
