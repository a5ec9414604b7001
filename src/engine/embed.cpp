// Sentence embeddings over Transformer::encode: batching, pooling, normalisation.
#include "embed.h"

#include <cmath>
#include <cstring>

#include "../common.h"
#include "../kernels/quant.h"

namespace qkv {

PoolKind parse_pooling(const std::string& name) {
  if (name == "mean") return PoolKind::Mean;
  if (name == "cls") return PoolKind::Cls;
  if (name == "last") return PoolKind::Last;
  fail(ErrorCode::BadArgument, "pooling '" + name + "' is not one of mean, cls, last");
}

PoolKind embed_pooling(const Transformer& model, const EmbedOptions& o) {
  if (o.pooling != PoolKind::None) return o.pooling;
  const PoolKind p = model.config().pooling;
  if (p == PoolKind::Rank) return PoolKind::Cls;  // a reranker's embedding: the state its head reads
  return p == PoolKind::None ? PoolKind::Mean : p;
}

std::vector<std::vector<int>> embed_tokenize(const Tokenizer& tok, const std::vector<std::string>& texts) {
  std::vector<std::vector<int>> ids;
  ids.reserve(texts.size());
  for (const std::string& t : texts) ids.push_back(tok.encode(t, true, true, true));
  return ids;
}

namespace {
int pass_capacity(const Transformer& model, int max_batch_tokens) {
  return max_batch_tokens > 0 ? std::min(max_batch_tokens, model.encode_capacity()) : model.encode_capacity();
}

// Runs texts through the encoder, consecutive ones sharing a pass while their tokens fit `cap`;
// fn(i, states) sees text i's rows, (texts[i].size(), dim).
template <class Fn>
void encode_texts(Transformer& model, const std::vector<std::vector<int>>& texts, int cap, Fn fn) {
  const int dim = model.config().dim;
  std::vector<int> tokens, lens;
  for (size_t first = 0; first < texts.size();) {
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
      fn(i, h + row * dim);
      row += lens[i - first];
    }
    first = last;
  }
}

// y = W x (+ b), the stored rows decoded one at a time (a head runs once per text).
void head_product(const Tensor& w, const float* b, const std::vector<float>& x, std::vector<float>& y) {
  std::vector<float> row((size_t)w.cols);
  y.assign((size_t)w.rows, 0.0f);
  for (int64_t r = 0; r < w.rows; r++) {
    dequantize_row_ref(w.type, w.row(r), row.data(), (int)w.cols);
    double s = b ? b[r] : 0.0;
    for (int64_t j = 0; j < w.cols; j++) s += (double)row[j] * x[j];
    y[r] = (float)s;
  }
}
}  // namespace

std::vector<std::vector<int>> embed_prepare(const Transformer& model, const std::vector<std::vector<int>>& input,
                                            const EmbedOptions& o) {
  if (input.empty()) fail(ErrorCode::BadArgument, "embed needs at least one text");
  const size_t limit = (size_t)std::min(model.context(), pass_capacity(model, o.max_batch_tokens));
  std::vector<std::vector<int>> texts = input;
  for (size_t i = 0; i < texts.size(); i++) {
    std::vector<int>& t = texts[i];
    const size_t n = t.size();
    if (n == 0) fail(ErrorCode::BadArgument, "text " + std::to_string(i) + " has no tokens");
    if (n <= limit) continue;
    if (!o.truncate)
      fail(ErrorCode::BadArgument, "text " + std::to_string(i) + " is " + std::to_string(n) +
                                       " tokens long; this model takes at most " + std::to_string(limit) +
                                       " (split or shorten it, or truncate)");
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
    const int64_t r = pool == PoolKind::Last ? n - 1 : 0;  // cls (and a reranker's state) is the first row
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
  const std::vector<std::vector<int>> texts = embed_prepare(model, input, o);
  const PoolKind pool = embed_pooling(model, o);
  const int dim = model.config().dim;
  std::vector<float> out(texts.size() * (size_t)dim);
  encode_texts(model, texts, pass_capacity(model, o.max_batch_tokens), [&](size_t i, const float* h) {
    embed_pool(h, (int)texts[i].size(), dim, pool, o.normalize, out.data() + i * (size_t)dim);
  });
  return out;
}

std::vector<int> rerank_pair(const Tokenizer& tok, const std::string& query, const std::string& document) {
  const std::vector<int> q = tok.encode(query, false, false, false), d = tok.encode(document, false, false, false);
  // llama.cpp's flags: a WordPiece tokenizer's closing [SEP] is its separator, not an EOS.
  const bool add_eos = !tok.is_wordpiece() && tok.add_eos();
  const int eos = tok.eos_id() >= 0 ? tok.eos_id() : tok.sep_id();
  std::vector<int> ids;
  ids.reserve(q.size() + d.size() + 4);
  if (tok.add_bos() && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  ids.insert(ids.end(), q.begin(), q.end());
  if (add_eos && eos >= 0) ids.push_back(eos);
  if (tok.add_sep()) ids.push_back(tok.sep_id());
  ids.insert(ids.end(), d.begin(), d.end());
  if (add_eos && eos >= 0) ids.push_back(eos);
  return ids;
}

std::vector<float> rerank_ids(Transformer& model, const std::vector<std::vector<int>>& pairs, int max_batch_tokens) {
  const ModelConfig& c = model.config();
  const ModelWeights::RankHead& head = model.weights().rank_head;
  if (c.pooling != PoolKind::Rank || (!head.cls && !head.out))
    fail(ErrorCode::Unsupported, "this model is not a reranker (its GGUF has no rank pooling and classification head)");
  if (pairs.empty()) fail(ErrorCode::BadArgument, "rerank needs at least one document");
  const int cap = pass_capacity(model, max_batch_tokens);
  const size_t limit = (size_t)std::min(model.context(), cap);
  for (size_t i = 0; i < pairs.size(); i++) {
    if (pairs[i].empty()) fail(ErrorCode::BadArgument, "document " + std::to_string(i) + ": the pair has no tokens");
    if (pairs[i].size() > limit)
      fail(ErrorCode::BadArgument, "document " + std::to_string(i) + " with the query is " +
                                       std::to_string(pairs[i].size()) + " tokens long; this model takes at most " +
                                       std::to_string(limit));
  }
  std::vector<float> scores(pairs.size());
  std::vector<float> x((size_t)c.dim), y;
  encode_texts(model, pairs, cap, [&](size_t i, const float* h) {
    x.assign(h, h + c.dim);  // the first token's state ([CLS])
    if (head.cls) {
      head_product(head.cls, head.cls_b, x, y);
      for (float& v : y) v = std::tanh(v);
      x.swap(y);
    }
    if (head.out) {
      head_product(head.out, head.out_b, x, y);
      x.swap(y);
    }
    scores[i] = x[0];
  });
  return scores;
}

std::vector<float> embed_texts(Transformer& model, const Tokenizer& tok, const std::vector<std::string>& texts,
                               const EmbedOptions& o) {
  if (texts.empty()) fail(ErrorCode::BadArgument, "embed needs at least one text");
  return embed_ids(model, embed_tokenize(tok, texts), o);
}

}  // namespace qkv
