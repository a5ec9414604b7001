// Embedding calls of the Embind Model (bindings/qkv_bindings.cpp forwards Model.embed here).
#pragma once
#include <emscripten/val.h>

#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace qkv {

// texts: a JS array of strings; options: {pooling: 'mean' | 'cls' | 'last' (default: the
// model's), normalize: boolean (default true), truncate: boolean (default false)}. Returns {data: Float32Array (n *
// dim), dim, tokens: Int32Array (each text's token count)}. Throws qkv::Error (the caller's guard turns it into a JS
// Error with a code).
emscripten::val embed_js(Transformer& model, const Tokenizer& tok, emscripten::val texts, emscripten::val options);

// query: a string; documents: a JS array of strings. Returns {scores: Float32Array (one per
// document, in order), tokens: Int32Array (each pair's token count)}.
emscripten::val rerank_js(Transformer& model, const Tokenizer& tok, emscripten::val query, emscripten::val documents);

// The texts embed_js would encode, for an encoder on WebGPU (src/js/gpu-model.js): {texts:
// [Int32Array of each text's ids, cut as embed_js cuts them], dim, pooling}.
emscripten::val embed_prepare_js(const Transformer& model, const Tokenizer& tok, emscripten::val texts,
                                 emscripten::val options);
// One text's embedding (Float32Array(dim)) from its n encoder states (n x dim), pooled and
// normalised as embed_js does (options as embed_js's).
emscripten::val embed_pool_js(const Transformer& model, emscripten::val hidden, int n, emscripten::val options);

// The model's embedding facts for Model.info(): {encoder, pooling, reranker}.
void embed_info(const ModelConfig& c, emscripten::val& info);

}  // namespace qkv
