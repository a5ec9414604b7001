// Model.embed for JS: argument checks, tokenization and pooling (engine/embed.h), typed arrays out.
#include "embed_bindings.h"

#include <algorithm>

#include "common.h"
#include "engine/embed.h"

using emscripten::typed_memory_view;
using emscripten::val;

namespace qkv {

static std::vector<std::string> texts_of(val texts) {
  if (!texts.isArray()) fail(ErrorCode::BadArgument, "embed takes an array of strings");
  const unsigned n = texts["length"].as<unsigned>();
  if (n == 0) fail(ErrorCode::BadArgument, "embed needs at least one text");
  std::vector<std::string> list;
  list.reserve(n);
  for (unsigned i = 0; i < n; i++) {
    val t = texts[i];
    if (!t.isString()) fail(ErrorCode::BadArgument, "embed: text " + std::to_string(i) + " is not a string");
    list.push_back(t.as<std::string>());
  }
  return list;
}

static EmbedOptions options_of(val options) {
  EmbedOptions o;
  if (options.isUndefined() || options.isNull()) return o;
  val p = options["pooling"];
  if (!p.isUndefined() && !p.isNull()) {
    if (!p.isString()) fail(ErrorCode::BadArgument, "embed: pooling must be 'mean', 'cls' or 'last'");
    o.pooling = parse_pooling(p.as<std::string>());
  }
  val norm = options["normalize"];
  if (!norm.isUndefined() && !norm.isNull()) {
    if (!norm.isTrue() && !norm.isFalse()) fail(ErrorCode::BadArgument, "embed: normalize must be a boolean");
    o.normalize = norm.isTrue();
  }
  val trunc = options["truncate"];
  if (!trunc.isUndefined() && !trunc.isNull()) {
    if (!trunc.isTrue() && !trunc.isFalse()) fail(ErrorCode::BadArgument, "embed: truncate must be a boolean");
    o.truncate = trunc.isTrue();
  }
  return o;
}

val embed_js(Transformer& model, const Tokenizer& tok, val texts, val options) {
  const std::vector<std::string> list = texts_of(texts);
  const EmbedOptions o = options_of(options);
  const std::vector<std::vector<int>> ids = embed_tokenize(tok, list);
  const std::vector<float> e = embed_ids(model, ids, o);
  std::vector<int> counts;  // tokens embedded (after any truncation)
  const size_t limit = (size_t)std::min(model.context(), model.encode_capacity());
  for (const auto& s : ids) counts.push_back((int)std::min(s.size(), limit));
  val out = val::object();
  out.set("data", val::global("Float32Array").new_(val(typed_memory_view(e.size(), e.data()))));
  out.set("dim", model.config().dim);
  out.set("tokens", val::global("Int32Array").new_(val(typed_memory_view(counts.size(), counts.data()))));
  out.set("pooling", std::string(pool_kind_name(embed_pooling(model, o))));
  return out;
}

val rerank_js(Transformer& model, const Tokenizer& tok, val query, val documents) {
  if (!query.isString()) fail(ErrorCode::BadArgument, "rerank: the query must be a string");
  if (!documents.isArray()) fail(ErrorCode::BadArgument, "rerank takes an array of document strings");
  const unsigned n = documents["length"].as<unsigned>();
  const std::string q = query.as<std::string>();
  std::vector<std::vector<int>> pairs;
  pairs.reserve(n);
  for (unsigned i = 0; i < n; i++) {
    val d = documents[i];
    if (!d.isString()) fail(ErrorCode::BadArgument, "rerank: document " + std::to_string(i) + " is not a string");
    pairs.push_back(rerank_pair(tok, q, d.as<std::string>()));
  }
  const std::vector<float> scores = rerank_ids(model, pairs);
  std::vector<int> counts;
  for (const auto& p : pairs) counts.push_back((int)p.size());
  val out = val::object();
  out.set("scores", val::global("Float32Array").new_(val(typed_memory_view(scores.size(), scores.data()))));
  out.set("tokens", val::global("Int32Array").new_(val(typed_memory_view(counts.size(), counts.data()))));
  return out;
}

val embed_prepare_js(const Transformer& model, const Tokenizer& tok, val texts, val options) {
  const EmbedOptions o = options_of(options);
  const std::vector<std::vector<int>> ids = embed_prepare(model, embed_tokenize(tok, texts_of(texts)), o);
  val list = val::array();
  for (const auto& t : ids)
    list.call<void>("push", val::global("Int32Array").new_(val(typed_memory_view(t.size(), t.data()))));
  val out = val::object();
  out.set("texts", list);
  out.set("dim", model.config().dim);
  out.set("pooling", std::string(pool_kind_name(embed_pooling(model, o))));
  return out;
}

val embed_pool_js(const Transformer& model, val hidden, int n, val options) {
  const EmbedOptions o = options_of(options);
  const int dim = model.config().dim;
  std::vector<float> h = emscripten::convertJSArrayToNumberVector<float>(hidden);
  if (n < 1 || h.size() != (size_t)n * dim) fail(ErrorCode::BadArgument, "embedPool: hidden must hold n x dim values");
  std::vector<float> e(dim);
  embed_pool(h.data(), n, dim, embed_pooling(model, o), o.normalize, e.data());
  return val::global("Float32Array").new_(val(typed_memory_view(e.size(), e.data())));
}

void embed_info(const ModelConfig& c, val& info) {
  info.set("encoder", c.is_encoder());
  info.set("reranker", c.pooling == PoolKind::Rank);
  info.set("pooling", std::string(pool_kind_name(c.pooling == PoolKind::None ? PoolKind::Mean : c.pooling)));
}

}  // namespace qkv
