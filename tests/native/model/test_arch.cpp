// GGUF architectures (llama, qwen2, qwen3, gpt2, phi3, gemma, gemma2, gemma3) as table rows, byte-level BPE tokenizers
// and their pre-tokenizers, chat formats, and refusals of bad metadata. llama.cpp conformance of the same models lives
// in tests/js/wllama.test.mjs; these tests pin the pieces one by one.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <random>

#include "common.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "formats/gguf_writer.h"
#include "formats/loader.h"
#include "formats/quantize.h"
#include "model/transformer.h"
#include "chat/chat.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "test_models.h"

using namespace qkv;

namespace {

std::shared_ptr<const Blob> blob_of(std::vector<uint8_t> v) { return std::make_shared<VectorBlob>(std::move(v)); }

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, Gpt2SplitsLikeItsRegex) {
  EXPECT_EQ(pre_tokenize("Hello world, it's 2024!", PreTokenizer::Gpt2),
            (Pieces{"Hello", " world", ",", " it", "'s", " 2024", "!"}));
  // A whitespace run leaves its last space to the next word; a run at the end stays whole.
  EXPECT_EQ(pre_tokenize("a  b\n\nc ", PreTokenizer::Gpt2), (Pieces{"a", " ", " b", "\n", "\n", "c", " "}));
  EXPECT_EQ(pre_tokenize("IT'S", PreTokenizer::Gpt2), (Pieces{"IT", "'", "S"}));  // contractions are lower case only
  EXPECT_EQ(pre_tokenize("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\xEF\xBC\x8C", PreTokenizer::Gpt2),  // café 日本，
            (Pieces{"caf\xC3\xA9", " \xE6\x97\xA5\xE6\x9C\xAC", "\xEF\xBC\x8C"}));
  EXPECT_EQ(pre_tokenize("", PreTokenizer::Gpt2), Pieces{});
}

TEST(PreTokenizer, Llama3AndQwen2SplitLikeTheirRegexes) {
  EXPECT_EQ(pre_tokenize("Hello world, it's 2024!", PreTokenizer::Llama3),
            (Pieces{"Hello", " world", ",", " it", "'s", " ", "202", "4", "!"}));
  EXPECT_EQ(pre_tokenize("IT'S", PreTokenizer::Llama3), (Pieces{"IT", "'S"}));
  EXPECT_EQ(pre_tokenize("12345", PreTokenizer::Qwen2), (Pieces{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(pre_tokenize("\n\n  x", PreTokenizer::Llama3), (Pieces{"\n\n", " ", " x"}));
  EXPECT_EQ(pre_tokenize("\tword", PreTokenizer::Llama3), (Pieces{"\tword"}));  // any non-letter may lead a word
  EXPECT_EQ(pre_tokenize("a = b;\n", PreTokenizer::Llama3), (Pieces{"a", " =", " b", ";\n"}));
}

TEST(PreTokenizer, SmollmAndDefaultRunTheirStages) {
  EXPECT_EQ(pre_tokenize("a 12", pre_tokenizer_from_name("smollm")), (Pieces{"a", " ", "1", "2"}));
  EXPECT_EQ(pre_tokenize("x+=1;", PreTokenizer::Default), (Pieces{"x", "+=", "1", ";"}));
  EXPECT_EQ(pre_tokenize("12345", PreTokenizer::Default), (Pieces{"123", "45"}));
}

TEST(PreTokenizer, UnicodeClassesAndNames) {
  EXPECT_EQ(unicode_class(U'é'), 1);
  EXPECT_EQ(unicode_class(U'\u0663'), 2);  // ARABIC-INDIC DIGIT THREE
  EXPECT_EQ(unicode_class(U'\u3001'), 3);  // IDEOGRAPHIC COMMA
  EXPECT_EQ(unicode_class(0x1F642), 5);    // emoji: a symbol
  EXPECT_EQ(unicode_class(0x0301), 4);     // COMBINING ACUTE ACCENT: a mark
  EXPECT_EQ(unicode_class(0x0001), 0);     // a control character
  EXPECT_TRUE(unicode_is_space(0x3000));
  EXPECT_EQ(pre_tokenizer_from_name("llama-bpe"), PreTokenizer::Llama3);
  // Other families' names for the same regexes, as llama.cpp maps them (falcon3 against
  // llama.cpp itself: tests/js/wllama.test.mjs).
  for (const char* n : {"falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "llama3", "llama-v3"})
    EXPECT_EQ(pre_tokenizer_from_name(n), PreTokenizer::Llama3) << n;
  for (const char* n : {"deepseek-r1-qwen", "kormo"}) EXPECT_EQ(pre_tokenizer_from_name(n), PreTokenizer::Qwen2) << n;
  for (const char* n : {"phi-2", "mellum", "a.x-4.0", "gigachat", "jina-es", "jina-v2-de"})
    EXPECT_EQ(pre_tokenizer_from_name(n), PreTokenizer::Gpt2) << n;
  try {
    pre_tokenizer_from_name("no-such-pre");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("'no-such-pre'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("qwen2"), std::string::npos) << "the supported names are listed";
  }
  // SentencePiece-style BPE over raw UTF-8 (llama.cpp's byte_encode = false).
  for (const char* n : {"gemma4", "granite-embed-multi-311m"})
    EXPECT_EQ(pre_tokenizer_from_name(n), PreTokenizer::Gemma4);
  for (const char* n : {"gemma4", "sarvam-moe", "whitespace"})
    EXPECT_TRUE(pre_tokenizer_raw_utf8(pre_tokenizer_from_name(n)));
  EXPECT_FALSE(pre_tokenizer_escapes_spaces(PreTokenizer::Whitespace));
  EXPECT_FALSE(pre_tokenizer_raw_utf8(PreTokenizer::Llama3));
  for (int b = 0; b < 256; b++) EXPECT_EQ(gpt2_cp_to_byte(gpt2_byte_to_cp((uint8_t)b)), b);
  EXPECT_EQ(gpt2_byte_to_cp(' '), 0x120u);  // 'Ġ'
}

// A BPE tokenizer as a GGUF would hold it.
Tokenizer small_bpe(PreTokenizer pre, bool ignore_merges = false) {
  LearnedBpe l = learn_bpe("the cat sat on the mat; the cat and the hat. the cat 123 456", pre, 40);
  std::vector<int> types(l.tokens.size(), kTokNormal);
  l.tokens.push_back("<|im_start|>");
  types.push_back(kTokControl);
  l.tokens.push_back("<|user|>");
  types.push_back(kTokUserDefined);
  Tokenizer t = Tokenizer::from_bpe(l.tokens, types, l.merges, pre, ignore_merges);
  t.set_specials(-1, (int)l.tokens.size() - 2, false, false, {});
  return t;
}

std::string decode_all(const Tokenizer& t, const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); i++) s += t.decode(i ? ids[i - 1] : -1, ids[i]);
  return s;
}

TEST(BpeTokenizer, MergesByRankAndRoundTripsAnyText) {
  Tokenizer t = small_bpe(PreTokenizer::Gpt2);
  std::vector<int> ids = t.encode("the cat", false, false);
  ASSERT_EQ(ids.size(), 2u) << "learned merges make 'the' and ' cat' whole";
  EXPECT_EQ(t.piece(ids[1]),
            "\xC4\xA0"
            "cat");  // 'Ġcat'
  for (const char* text : {"the cat sat", "  spaces\t\tand\nlines ", "caf\xC3\xA9 \xF0\x9F\x99\x82", "x", "\xFF\xFE"}) {
    std::vector<int> e = t.encode(text, false, false);
    std::string want = text;
    if (want == "\xFF\xFE") want = "\xEF\xBF\xBD\xEF\xBF\xBD";  // invalid UTF-8 is read as U+FFFD, as llama.cpp does
    EXPECT_EQ(decode_all(t, e), want) << text;
  }
}

TEST(BpeTokenizer, SpecialTokensAreMatchedOnlyWhenAsked) {
  Tokenizer t = small_bpe(PreTokenizer::Llama3);
  const int start = t.find("<|im_start|>"), user = t.find("<|user|>");
  std::vector<int> plain = t.encode("<|im_start|>hi", false, false, false);
  std::vector<int> special = t.encode("<|im_start|>hi", false, false, true);
  EXPECT_EQ(special.front(), start);
  EXPECT_NE(plain.front(), start);
  EXPECT_GT(plain.size(), special.size());
  EXPECT_EQ(t.encode("a<|user|>b", false, false, false)[1], user) << "user-defined tokens are always matched";
  EXPECT_EQ(t.decode(-1, start), "") << "control tokens print nothing";
  EXPECT_EQ(t.decode(-1, user), "<|user|>");
  EXPECT_TRUE(t.is_eog(t.eos_id()));
  EXPECT_TRUE(t.encode("", true, false).empty()) << "no BOS when the model adds none";
  // Phi-3's rule: whitespace after an rstrip special token is dropped.
  const std::vector<int> before = t.encode("<|im_start|>\n  hi", false, false, true);
  t.set_rstrip({start});
  EXPECT_EQ(t.encode("<|im_start|>\n  hi", false, false, true), t.encode("<|im_start|>hi", false, false, true));
  EXPECT_NE(before, t.encode("<|im_start|>\n  hi", false, false, true));
}

TEST(BpeTokenizer, IgnoreMergesTakesVocabularyWordsWhole) {
  // 'ab' is a token but no merge makes it: only ignore_merges (Llama 3) finds it.
  std::vector<std::string> toks;
  for (int b = 0; b < 256; b++) {
    std::string s;
    append_utf8(s, gpt2_byte_to_cp((uint8_t)b));
    toks.push_back(s);
  }
  toks.push_back("ab");
  Tokenizer with = Tokenizer::from_bpe(toks, {}, {}, PreTokenizer::Llama3, true);
  Tokenizer without = Tokenizer::from_bpe(toks, {}, {}, PreTokenizer::Llama3, false);
  EXPECT_EQ(with.encode("ab", false, false), (std::vector<int>{256}));
  EXPECT_EQ(without.encode("ab", false, false), (std::vector<int>{'a', 'b'}));
}

// The built-in renderings of the recognized formats (used when the Jinja subset cannot run a
// template), as llama.cpp's built-in formats render them.
TEST(ChatTemplates, DetectedAndRenderedAsLlamaCppRendersThem) {
  std::vector<ChatMessage> m = {{"system", "Be brief."}, {"user", " Hi "}, {"assistant", "Hello."}, {"user", "Bye"}};
  ChatTemplate chatml = detect_chat_format("{% for m in messages %}<|im_start|>{{ m.role }}...");
  EXPECT_EQ(chatml.format, ChatFormat::ChatML);
  EXPECT_FALSE(chatml.guessed);
  EXPECT_EQ(
      render_chat(chatml, m, true),
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
      "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  ChatTemplate l3 = detect_chat_format("{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}...<|eot_id|>");
  EXPECT_EQ(l3.format, ChatFormat::Llama3);
  EXPECT_EQ(
      render_chat(l3, {{"user", " Hi "}}, true),
      "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  ChatTemplate gemma = detect_chat_format("<start_of_turn>{{ role }}");
  EXPECT_EQ(render_chat(gemma, {{"system", "Be brief."}, {"user", "Hi"}}, true),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  ChatTemplate l2 = detect_chat_format("{{ bos_token + '[INST] ' }} <<SYS>> {{ content.strip() }}");
  EXPECT_EQ(l2.format, ChatFormat::Llama2);
  EXPECT_EQ(render_chat(l2, m, true),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]Hello.</s><s>[INST] Bye [/INST]");
  ChatTemplate phi3 =
      detect_chat_format("{{'<|' + message['role'] + '|>' + '\\n' + message['content'] + '<|end|>\\n'}}");
  EXPECT_EQ(phi3.format, ChatFormat::Phi3);
  EXPECT_EQ(render_chat(phi3, {{"user", "Hi"}}, true), "<|user|>\nHi<|end|>\n<|assistant|>\n");
  ChatTemplate unknown = detect_chat_format("{{ messages }}");
  EXPECT_TRUE(unknown.guessed);
  EXPECT_EQ(unknown.format, ChatFormat::ChatML);
  EXPECT_TRUE(detect_chat_template("").guessed);
  // An unknown template that the Jinja subset cannot run either: ChatML is a guess.
  EXPECT_TRUE(detect_chat_template("{% filter upper %}{{ messages }}{% endfilter %}").guessed);
  try {
    render_chat(chatml, {{"robot", "x"}}, true);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::BadArgument);
    EXPECT_NE(std::string(e.what()).find("'robot'"), std::string::npos);
  }
  // What only a template can render (the tool role, message fields, template variables) is
  // refused by the built-in renderings.
  for (const auto& extra : std::vector<std::pair<std::vector<ChatMessage>, std::string>>{
           {{{"tool", "x"}}, ""}, {{{"user", "x", "{\"name\": \"n\"}"}}, ""}, {{{"user", "x"}}, "{\"tools\": []}"}}) {
    try {
      render_chat(chatml, extra.first, true, extra.second);
      ADD_FAILURE();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Unsupported) << e.what();
    }
  }
}

class Arch : public ::testing::TestWithParam<const char*> {};

TEST_P(Arch, LoadsAsItsTableRowAndRuns) {
  TestModelSpec s;
  s.arch = GetParam();
  s.pre = "qwen2";
  s.merges = 60;
  s.tied = s.arch != "gpt2";
  s.rope_freq_factors = s.arch == "llama";
  auto blob = blob_of(write_test_model(s));
  LoadedModel m = load_model(blob);
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.arch, s.arch);
  const std::string d = c.describe();
  if (s.arch == "gpt2") {
    EXPECT_NE(d.find("layernorm, learned, gelu, separate"), std::string::npos) << d;
    // The fused QKV matrix is three row views of one tensor.
    const LayerWeights& L = m.weights.layers[0];
    EXPECT_EQ((const uint8_t*)L.wk.data, (const uint8_t*)L.wq.data + L.wq.rows * L.wq.row_bytes());
    EXPECT_EQ((const uint8_t*)L.wv.data, (const uint8_t*)L.wk.data + L.wk.rows * L.wk.row_bytes());
    EXPECT_EQ(L.bk, L.bq + c.q_dim());
    EXPECT_TRUE(L.attn_norm_b && L.ffn_norm_b && L.b_up && L.b_down && L.bo && m.weights.pos_embed);
  } else if (s.arch == "gemma2") {
    EXPECT_NE(d.find("rmsnorm, rope-neox, geglu, tied"), std::string::npos) << d;
    EXPECT_FLOAT_EQ(c.attn_softcap, 2.0f);
    EXPECT_FLOAT_EQ(c.logit_softcap, 10.0f);
    EXPECT_EQ(c.layer_window, (std::vector<int>{8, 0})) << "sliding window on the even layers";
    EXPECT_TRUE(m.weights.layers[1].attn_post_norm && m.weights.layers[1].ffn_post_norm);
  } else if (s.arch == "gemma3") {
    EXPECT_NE(d.find("rmsnorm, rope-neox, geglu, tied"), std::string::npos) << d;
    EXPECT_FLOAT_EQ(c.attn_softcap, 0.0f);
    EXPECT_FLOAT_EQ(c.logit_softcap, 0.0f);
    EXPECT_EQ(c.layer_window, (std::vector<int>{8, 8})) << "two layers: both local (the global one is each sixth)";
    EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
    EXPECT_FLOAT_EQ(c.rope_theta_local, 1e4f);
    EXPECT_TRUE(m.weights.layers[1].attn_post_norm && m.weights.layers[1].q_norm && m.weights.layers[1].k_norm);
  } else if (s.arch == "gemma") {
    EXPECT_NE(d.find("rmsnorm, rope-neox, geglu, tied"), std::string::npos) << d;
    EXPECT_EQ(c.head_dim, 32) << "key_length sets the head width";
    EXPECT_EQ(c.q_dim(), 2 * c.dim);
    EXPECT_FLOAT_EQ(c.embed_scale, std::sqrt((float)c.dim));
    EXPECT_TRUE(m.weights.layers[0].w_gate.data != nullptr);
  } else if (s.arch == "granite") {
    EXPECT_NE(d.find("rmsnorm, rope, swiglu"), std::string::npos) << d;
    EXPECT_FLOAT_EQ(c.embed_scale, 3.0f);
    EXPECT_FLOAT_EQ(c.residual_scale, 0.6f);
    EXPECT_FLOAT_EQ(c.attn_scale, 0.45f);
    EXPECT_FLOAT_EQ(c.logit_scale, 2.0f) << "logits are divided by logit_scale";
  } else if (s.arch == "command-r") {
    EXPECT_NE(d.find("layernorm, rope, swiglu"), std::string::npos) << d;
    EXPECT_TRUE(c.parallel_ffn);
    EXPECT_FLOAT_EQ(c.logit_scale, 1.6f);
    EXPECT_EQ(m.weights.layers[1].ffn_norm, nullptr);
  } else if (s.arch == "smollm3" || s.arch == "internlm2") {
    EXPECT_NE(d.find("rmsnorm, rope, swiglu"), std::string::npos) << d;
  } else if (s.arch == "minicpm") {
    EXPECT_NE(d.find("rmsnorm, rope, swiglu"), std::string::npos) << d;
    EXPECT_FLOAT_EQ(c.embed_scale, 3.0f);
    EXPECT_FLOAT_EQ(c.residual_scale, 0.6f);
    EXPECT_FLOAT_EQ(c.attn_scale, 0.0f);
    EXPECT_FLOAT_EQ(c.logit_scale, 2.0f);
  } else if (s.arch == "starcoder2") {
    EXPECT_NE(d.find("layernorm, rope-neox, gelu"), std::string::npos) << d;
    const LayerWeights& L = m.weights.layers[1];
    EXPECT_TRUE(L.attn_norm_b && L.ffn_norm_b && L.bq && L.bk && L.bv && L.bo && L.b_up && L.b_down &&
                m.weights.final_norm_b);
  } else if (s.arch == "stablelm") {
    EXPECT_NE(d.find("layernorm, rope-neox, swiglu"), std::string::npos) << d;
    EXPECT_EQ(c.rot_dims(), c.head_dim / 4) << "partial rotary";
    EXPECT_TRUE(m.weights.layers[1].attn_norm_b && m.weights.layers[1].ffn_norm_b && m.weights.final_norm_b);
  } else if (s.arch == "olmo2") {
    EXPECT_NE(d.find("rmsnorm, rope-neox, swiglu"), std::string::npos) << d;
    EXPECT_TRUE(c.qk_norm_whole);
    const LayerWeights& L = m.weights.layers[1];
    EXPECT_TRUE(!L.attn_norm && !L.ffn_norm && L.attn_post_norm && L.ffn_post_norm) << "post-norms only";
  } else {
    EXPECT_NE(d.find(s.arch == "llama" ? "rmsnorm, rope, swiglu" : "rmsnorm, rope-neox, swiglu"), std::string::npos)
        << d;
    EXPECT_FLOAT_EQ(c.embed_scale, 1.0f);
  }
  EXPECT_EQ(m.weights.layers[0].bq != nullptr,
            s.arch == "qwen2" || s.arch == "gpt2" || s.arch == "stablelm" || s.arch == "starcoder2");
  if (s.arch == "phi3") {  // fused gate+up: two row views
    const LayerWeights& L = m.weights.layers[0];
    EXPECT_EQ((const uint8_t*)L.w_up.data, (const uint8_t*)L.w_gate.data + L.w_gate.rows * L.w_gate.row_bytes());
  }
  EXPECT_EQ(m.weights.layers[0].q_norm != nullptr, s.arch == "qwen3" || s.arch == "gemma3" || s.arch == "olmo2");
  if (s.arch == "qwen3") EXPECT_EQ(c.head_dim, 24) << "key_length sets the head width";
  EXPECT_EQ(m.weights.rope_factors != nullptr, s.rope_freq_factors);
  std::unique_ptr<Tokenizer> tok = embedded_tokenizer(blob);
  ASSERT_TRUE(tok && tok->is_bpe());
  EXPECT_EQ(tok->vocab_size(), c.vocab_size);
  std::vector<int> ids = tok->encode("the little robot dreamed", true, false);
  Transformer t(m, 64, nullptr), t1(m, 64, nullptr);
  const float* l = t.forward(ids.data(), (int)ids.size(), 0);
  std::vector<float> batch(l, l + c.vocab_size);
  if (c.logit_softcap > 0)
    for (float v : batch) ASSERT_LE(std::fabs(v), c.logit_softcap) << "logits are soft-capped";
  for (size_t i = 0; i < ids.size(); i++) t1.forward(&ids[i], 1, (int)i);
  for (int i = 0; i < c.vocab_size; i++) {
    ASSERT_TRUE(std::isfinite(batch[i]));
    ASSERT_NEAR(batch[i], t1.logits()[i], 1e-4) << "batched prefill and one-token decode agree";
  }
}

// LongRoPE (Phi-3.5): the short factors up to the original context, the long ones above it, and
// the attention factor on cos and sin. Each is checked against the same model with that one
// piece set by hand; llama.cpp agreement is tests/js/wllama.test.mjs (phi3-longrope*).
TEST(Arch, LongRopePicksFactorsByContextAndScalesAttention) {
  TestModelSpec s;
  s.arch = "phi3";
  s.merges = 60;
  s.longrope_orig_context = 100;
  s.rope_attn_factor = 1.3f;
  LoadedModel m = load_model(blob_of(write_test_model(s)));
  ASSERT_TRUE(m.weights.rope_factors_long && m.weights.rope_factors_short);
  EXPECT_EQ(m.weights.rope_factors, nullptr);
  EXPECT_FLOAT_EQ(m.config.rope_attn_factor, 1.3f);
  EXPECT_EQ(m.config.rope_orig_context, 100);
  std::vector<int> ids;
  for (int i = 0; i < 40; i++) ids.push_back(3 + (i * 37) % (m.config.vocab_size - 3));
  auto logits = [&](const LoadedModel& model, int context) {
    Transformer t(model, context, nullptr);
    const float* l = t.forward(ids.data(), (int)ids.size(), 0);
    return std::vector<float>(l, l + model.config.vocab_size);
  };
  auto with = [&](const float* factors, float attn) {
    LoadedModel v = m;
    v.weights.rope_factors = factors;  // rope_freqs: used whatever the context
    v.config.rope_attn_factor = attn;
    return v;
  };
  auto max_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
    float d = 0;
    for (size_t i = 0; i < a.size(); i++) d = std::max(d, std::fabs(a[i] - b[i]));
    return d;
  };
  const std::vector<float> at100 = logits(m, 100), at101 = logits(m, 101);
  EXPECT_EQ(max_diff(at100, logits(with(m.weights.rope_factors_short, 1.3f), 100)), 0.0f)
      << "context 100: short factors";
  EXPECT_EQ(max_diff(at101, logits(with(m.weights.rope_factors_long, 1.3f), 101)), 0.0f) << "context 101: long factors";
  EXPECT_GT(max_diff(at100, at101), 1e-3f) << "the two factor sets differ in effect";
  EXPECT_GT(max_diff(at100, logits(with(m.weights.rope_factors_short, 1.0f), 100)), 1e-3f)
      << "the attention factor acts";
}

// The largest change in the last position's logits when `variant` (the model with one option
// changed) runs a fixed 24-token prompt instead of `base`.
static float logit_change(const LoadedModel& base, const LoadedModel& variant) {
  std::vector<int> ids;
  for (int i = 0; i < 24; i++) ids.push_back(3 + (i * 29) % (base.config.vocab_size - 3));
  auto logits = [&](const LoadedModel& mm) {
    Transformer t(mm, 64, nullptr);
    const float* l = t.forward(ids.data(), (int)ids.size(), 0);
    return std::vector<float>(l, l + mm.config.vocab_size);
  };
  const std::vector<float> a = logits(base), b = logits(variant);
  float d = 0;
  for (size_t i = 0; i < a.size(); i++) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// Each Gemma 2 option changes what the model computes on the conformance prompts' lengths (so
// the llama.cpp comparison in tests/js/wllama.test.mjs, where gemma2 must agree token for token,
// checks each of them): dropping one moves the logits by far more than float rounding.
TEST(Gemma2, EveryOptionMattersOnTheTestModel) {
  TestModelSpec s;
  s.arch = "gemma2";
  s.merges = 60;
  auto blob = blob_of(write_test_model(s));
  const LoadedModel m = load_model(blob);
  auto moved = [&](const LoadedModel& variant) { return logit_change(m, variant); };
  LoadedModel a = m;
  a.config.attn_softcap = 0;
  EXPECT_GT(moved(a), 0.05f) << "attention soft-cap";
  LoadedModel b = m;
  b.config.logit_softcap = 0;
  EXPECT_GT(moved(b), 0.05f) << "logit soft-cap";
  LoadedModel c = m;
  c.config.layer_window.clear();
  EXPECT_GT(moved(c), 0.05f) << "sliding window";
  LoadedModel d = m;
  for (auto& L : d.weights.layers) L.attn_post_norm = L.ffn_post_norm = nullptr;
  EXPECT_GT(moved(d), 0.05f) << "post-norms";
  LoadedModel e = m;
  e.config.embed_scale = 1;
  EXPECT_GT(moved(e), 0.05f) << "embedding scale";
}

// Each Granite multiplier and each OLMo 2 option changes the logits of the test models (so the
// llama.cpp comparison, granite and olmo2 in tests/js/wllama.test.mjs, checks each of them but
// the logit scale, which greedy decoding cannot see: its value is checked in Gguf/Arch).
TEST(Granite, EveryMultiplierMatters) {
  TestModelSpec s;
  s.arch = "granite";
  s.merges = 60;
  const LoadedModel m = load_model(blob_of(write_test_model(s)));
  auto moved = [&](void (*change)(ModelConfig&)) {
    LoadedModel v = m;
    change(v.config);
    return logit_change(m, v);
  };
  EXPECT_GT(moved([](ModelConfig& c) { c.embed_scale = 1; }), 0.05f) << "embedding scale";
  EXPECT_GT(moved([](ModelConfig& c) { c.residual_scale = 1; }), 0.05f) << "residual scale";
  EXPECT_GT(moved([](ModelConfig& c) { c.attn_scale = 0; }), 0.05f) << "attention scale";
  EXPECT_GT(moved([](ModelConfig& c) { c.logit_scale = 1; }), 0.05f) << "logit scale";
}

TEST(Olmo2, EveryOptionMatters) {
  TestModelSpec s;
  s.arch = "olmo2";
  s.merges = 60;
  s.tied = false;
  const LoadedModel m = load_model(blob_of(write_test_model(s)));
  LoadedModel a = m;
  for (auto& L : a.weights.layers) L.attn_post_norm = L.ffn_post_norm = nullptr;
  EXPECT_GT(logit_change(m, a), 0.05f) << "post-norms";
  LoadedModel b = m;
  for (auto& L : b.weights.layers) L.q_norm = L.k_norm = nullptr;
  EXPECT_GT(logit_change(m, b), 0.05f) << "Q/K norms";
}

// Gemma 3 on seven layers: five local (window 8, RoPE base 10000), one global (base 1e6, linear
// scaling), one local. Each option changes the logits on a prompt longer than the window, so the
// llama.cpp comparison (tests/js/wllama.test.mjs, gemma3) checks each of them; and the layers'
// pattern and bases are llama.cpp's.
TEST(Gemma3, LayerPatternAndEveryOptionMatter) {
  TestModelSpec s;
  s.arch = "gemma3";
  s.merges = 60;
  s.layers = 7;
  s.rope_linear_factor = 8.0f;
  const LoadedModel m = load_model(blob_of(write_test_model(s)));
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.layer_window, (std::vector<int>{8, 8, 8, 8, 8, 0, 8}));
  for (int l = 0; l < 7; l++) EXPECT_EQ(c.local_rope(l), l != 5) << l;
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 1.0f / 8.0f);
  EXPECT_FLOAT_EQ(c.rope_freq_scale_local, 1.0f);
  EXPECT_FLOAT_EQ(c.logit_softcap, 0.0f);
  auto moved = [&](const LoadedModel& variant) { return logit_change(m, variant); };
  LoadedModel a = m;
  a.config.rope_theta_local = 0;  // every layer on the global base and scale
  EXPECT_GT(moved(a), 0.05f) << "local RoPE base";
  LoadedModel b = m;
  b.config.rope_freq_scale = 1;
  EXPECT_GT(moved(b), 0.05f) << "global layers' RoPE scaling";
  LoadedModel w2 = m;
  for (int& win : w2.config.layer_window) win = win ? 1000 : 0;  // windows wider than the prompt, same RoPE
  EXPECT_GT(moved(w2), 0.05f) << "sliding window";
  LoadedModel q = m;
  for (auto& L : q.weights.layers) L.q_norm = L.k_norm = nullptr;
  EXPECT_GT(moved(q), 0.05f) << "Q/K norms";
  LoadedModel p = m;
  for (auto& L : p.weights.layers) L.attn_post_norm = L.ffn_post_norm = nullptr;
  EXPECT_GT(moved(p), 0.05f) << "post-norms";
  // Without attention.sliding_window every layer is global (llama.cpp's rule).
  s.sliding_window = 0;
  s.layers = 2;
  const LoadedModel g = load_model(blob_of(write_test_model(s)));
  EXPECT_TRUE(g.config.layer_window.empty());
  EXPECT_FALSE(g.config.local_rope(0));
}

// The products run in row chunks across threads, each chunk finishing the columns it wrote (bias,
// per-head norm, RoPE, the activation, the residual add). With 3 heads of q, k and v stacked in
// one section, some chunks hold the end of q and the start of k: threads change nothing but
// float rounding, in prefill and in decode.
// The small shape runs every section on the calling thread (below kMinParallelWork); the
// larger one (f32, and Q8_0 for the integer kernels) splits prefill sections into 16-row chunks and decode sections
// into about two chunks per thread (for_rows), both across heads' row bounds.
class ArchThreads : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(ArchThreads, ThreadCountsGiveTheSameLogits) {
  TestModelSpec s;
  s.arch = std::get<0>(GetParam());
  s.merges = 60;
  const int shape = std::get<1>(GetParam());  // 0: small; 1: larger, f32; 2: larger, Q8_0
  const bool large = shape != 0;
  s.dim = large ? 256 : 48;
  s.heads = large ? 4 : 3;
  s.kv_heads = large ? 2 : 3;
  s.hidden = large ? 544 : 80;
  s.tied = s.arch != "gpt2";
  std::vector<uint8_t> bytes = write_test_model(s);
  if (shape == 2) bytes = quantize_gguf(GgufFile::parse(blob_of(std::move(bytes))), QType::Q8_0).bytes;
  const LoadedModel m = load_model(blob_of(std::move(bytes)));
  std::vector<int> ids;
  for (int i = 0; i < 40; i++) ids.push_back(3 + (i * 31) % (m.config.vocab_size - 3));
  auto run = [&](int threads) {
    Transformer t(m, 64, std::make_shared<ThreadPool>(threads));
    std::vector<float> out;
    const float* l = t.forward(ids.data(), (int)ids.size(), 0);
    out.assign(l, l + m.config.vocab_size);
    for (int i = 0; i < 3; i++) {
      const int next = (ids[i] * 7 + 5) % m.config.vocab_size;
      l = t.forward(&next, 1, (int)ids.size() + i);
      out.insert(out.end(), l, l + m.config.vocab_size);
    }
    return out;
  };
  const std::vector<float> one = run(1);
  for (int threads : {2, 3}) {
    const std::vector<float> many = run(threads);
    ASSERT_EQ(many.size(), one.size());
    for (size_t i = 0; i < one.size(); i++)
      ASSERT_NEAR(many[i], one[i], 1e-4f * (1 + std::fabs(one[i]))) << threads << " threads, logit " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Gguf, Arch,
                         ::testing::Values("llama", "qwen2", "qwen3", "gpt2", "phi3", "gemma", "gemma2", "gemma3",
                                           "granite", "olmo2", "stablelm", "starcoder2", "smollm3", "minicpm", "exaone",
                                           "internlm2", "command-r"));
INSTANTIATE_TEST_SUITE_P(Gguf, ArchThreads,
                         ::testing::Combine(::testing::Values("llama", "qwen2", "qwen3", "gpt2", "phi3", "gemma",
                                                              "gemma2", "gemma3", "granite", "olmo2", "stablelm",
                                                              "starcoder2", "smollm3", "minicpm", "exaone", "internlm2",
                                                              "command-r"),
                                            ::testing::Values(0, 1, 2)));

void expect_load_error(std::vector<uint8_t> bytes, ErrorCode code, const std::string& needle, bool tokenizer = false) {
  try {
    auto b = blob_of(std::move(bytes));
    if (tokenizer) embedded_tokenizer(b);
    else load_model(b);
    ADD_FAILURE() << "loaded; expected an error naming '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// A string literal with its NUL bytes.
#define BYTES(lit) std::string(lit, sizeof(lit) - 1)

// Overwrites the first occurrence of `from` in the file with `to` (same length).
std::vector<uint8_t> patched(std::vector<uint8_t> v, const std::string& from, const std::string& to) {
  auto it = std::search(v.begin(), v.end(), from.begin(), from.end());
  EXPECT_NE(it, v.end()) << from;
  if (it != v.end()) std::copy(to.begin(), to.end(), it);
  return v;
}

TEST(BadInputGguf, ArchitecturesAndTokenizersAreRefusedByName) {
  TestModelSpec s;
  s.arch = "gpt2";
  s.merges = 20;
  const std::vector<uint8_t> gpt2 = write_test_model(s);
  expect_load_error(patched(gpt2, "blk.1.attn_qkv.weight", "blk.1.attn_qkv.weigxt"), ErrorCode::BadModel,
                    "blk.1.attn_qkv.weight is missing");
  expect_load_error(patched(gpt2, "position_embd.weight", "position_embd.weighx"), ErrorCode::BadModel,
                    "position_embd.weight is missing");
  // Tensors that change RoPE in ways qkv does not implement are refused, not ignored.
  expect_load_error(patched(gpt2, "blk.1.attn_output.weight", "blk.1.rope_factors_xy.wt"), ErrorCode::Unsupported,
                    "blk.1.rope_factors_xy.wt (RoPE factors) is not supported");
  expect_load_error(patched(gpt2, BYTES("general.architecture\x08\0\0\0\x04\0\0\0\0\0\0\0gpt2"),
                            BYTES("general.architecture\x08\0\0\0\x04\0\0\0\0\0\0\0gptj")),
                    ErrorCode::Unsupported, "supported: llama, qwen2, qwen3, gpt2, phi3, gemma, gemma2, gemma3");
  expect_load_error(patched(gpt2, BYTES("\x05\0\0\0\0\0\0\0gpt-2"), BYTES("\x05\0\0\0\0\0\0\0blorp")),
                    ErrorCode::Unsupported, "'blorp'", true);
  expect_load_error(patched(gpt2, "tokenizer.ggml.merges", "tokenizer.ggml.merged"), ErrorCode::BadModel,
                    "tokenizer.ggml.merges", true);
  expect_load_error(patched(gpt2, BYTES("tokenizer.ggml.model\x08\0\0\0\x04\0\0\0\0\0\0\0gpt2"),
                            BYTES("tokenizer.ggml.model\x08\0\0\0\x04\0\0\0\0\0\0\0bork")),
                    ErrorCode::Unsupported, "'bork'", true);
  // A merge that is not two symbols.
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_strings("tokenizer.ggml.tokens", {"a", "b"});
  w.add_strings("tokenizer.ggml.merges", {"ab"});
  expect_load_error(w.finish(), ErrorCode::BadTokenizer, "merge 0", true);
}

TEST(CommandR, ParallelBlocksMatter) {
  TestModelSpec s;
  s.arch = "command-r";
  s.merges = 60;
  const LoadedModel m = load_model(blob_of(write_test_model(s)));
  LoadedModel v = m;
  v.config.parallel_ffn = false;  // (the feed-forward then reads the residual after attention, unnormed)
  EXPECT_GT(logit_change(m, v), 0.05f) << "parallel blocks";
}

TEST(SmolLM3, EveryFourthLayerSkipsRope) {
  TestModelSpec s;
  s.arch = "smollm3";
  s.merges = 60;
  s.layers = 8;
  const LoadedModel m = load_model(blob_of(write_test_model(s)));
  EXPECT_EQ(m.config.layer_rope, (std::vector<uint8_t>{1, 1, 1, 0, 1, 1, 1, 0})) << "llama.cpp's (l + 1) % 4 rule";
  LoadedModel v = m;
  v.config.layer_rope.clear();
  EXPECT_GT(logit_change(m, v), 0.05f) << "the layers without RoPE";
}

// Missing keys and tensors of the new rows are named.
TEST(BadInputGguf, GraniteAndOlmo2NameWhatIsMissing) {
  TestModelSpec s;
  s.arch = "granite";
  s.merges = 20;
  const std::vector<uint8_t> granite = write_test_model(s);
  expect_load_error(patched(granite, "granite.logit_scale", "granite.logit_scalx"), ErrorCode::BadModel,
                    "key granite.logit_scale is missing");
  expect_load_error(patched(granite, "blk.1.ffn_gate.weight", "blk.1.ffn_gate.weighx"), ErrorCode::BadModel,
                    "blk.1.ffn_gate.weight is missing");
  s.arch = "olmo2";
  s.tied = false;
  const std::vector<uint8_t> olmo2 = write_test_model(s);
  expect_load_error(patched(olmo2, "blk.0.attn_k_norm.weight", "blk.0.attn_k_norm.weighx"), ErrorCode::BadModel,
                    "blk.0.attn_k_norm.weight is missing");
  expect_load_error(patched(olmo2, "blk.1.post_ffw_norm.weight", "blk.1.post_ffw_norm.weighx"), ErrorCode::BadModel,
                    "blk.1.post_ffw_norm.weight is missing");
}

// YaRN as Qwen's long-context files store it: type, factor and original context are read, the
// ramp and the magnitude each change the logits (so the llama.cpp comparison, qwen3-yarn in
// tests/js/wllama.test.mjs, checks both), and the loader follows llama.cpp where a file leaves
// things out: no factor scales nothing, no type is linear, an unknown type is refused by name.
TEST(Arch, YarnIsReadAndEachPartActs) {
  TestModelSpec s;
  s.arch = "qwen3";
  s.merges = 60;
  s.context = 8192;
  s.rope_yarn_factor = 4.0f;
  s.yarn_orig_context = 2048;
  const std::vector<uint8_t> file = write_test_model(s);
  const LoadedModel m = load_model(blob_of(file));
  EXPECT_TRUE(m.config.rope_yarn);
  EXPECT_FLOAT_EQ(m.config.rope_freq_scale, 0.25f);
  EXPECT_EQ(m.config.rope_orig_context, 2048);
  LoadedModel lin = m;
  lin.config.rope_yarn = false;  // linear scaling of every pair, no magnitude
  EXPECT_GT(logit_change(m, lin), 0.05f) << "YaRN vs linear";
  LoadedModel unscaled = m;
  unscaled.config.rope_freq_scale = 1.0f;  // YaRN with factor 1: nothing to blend, magnitude 1
  EXPECT_GT(logit_change(m, unscaled), 0.05f) << "the factor";
  LoadedModel orig = m;
  orig.config.rope_orig_context = 64;  // another correction range
  EXPECT_GT(logit_change(m, orig), 1e-3f) << "the original context";
  // Without the original context the model's own is the reference (8192 here).
  LoadedModel own = m;
  own.config.rope_orig_context = 0;
  LoadedModel own8192 = m;
  own8192.config.rope_orig_context = 8192;
  EXPECT_EQ(logit_change(own, own8192), 0.0f);

  // The loader where a file leaves things out, as llama.cpp reads it.
  const LoadedModel no_factor = load_model(blob_of(patched(file, "rope.scaling.factor", "rope.scaling.facto_")));
  EXPECT_TRUE(no_factor.config.rope_yarn);
  EXPECT_FLOAT_EQ(no_factor.config.rope_freq_scale, 1.0f) << "no factor: nothing scaled";
  TestModelSpec n = s;
  n.rope_yarn_factor = 0;
  n.rope_linear_factor = 4.0f;
  const std::vector<uint8_t> linear = write_test_model(n);
  const LoadedModel no_type = load_model(blob_of(patched(linear, "rope.scaling.type", "rope.scaling.typ_")));
  EXPECT_FALSE(no_type.config.rope_yarn);
  EXPECT_FLOAT_EQ(no_type.config.rope_freq_scale, 0.25f) << "no type: linear";
  expect_load_error(patched(linear, BYTES("\x06\0\0\0\0\0\0\0linear"), BYTES("\x06\0\0\0\0\0\0\0dynami")),
                    ErrorCode::Unsupported,
                    "rope scaling 'dynami' is not supported (linear, yarn, longrope and none are)");
}

TEST(BadInputGguf, RandomCorruptionOfBpeModelsNeverCrashes) {
  std::mt19937 rng(777);
  for (const char* arch : {"gpt2", "qwen3"}) {
    TestModelSpec s;
    s.arch = arch;
    s.pre = "llama-bpe";
    s.merges = 30;
    s.chat_template = "<|im_start|>";
    const std::vector<uint8_t> full = write_test_model(s);
    const uint64_t head = GgufFile::parse(blob_of(full)).data_offset();
    int loaded = 0, refused = 0;
    for (int it = 0; it < 200; it++) {
      std::vector<uint8_t> b = full;
      for (int f = 0, n = 1 + rng() % 4; f < n; f++) b[rng() % head] = (uint8_t)rng();
      try {
        auto bb = blob_of(std::move(b));
        LoadedModel m = load_model(bb);
        auto tok = embedded_tokenizer(bb);
        std::vector<int> ids = tok->encode("<|im_start|>user\nthe cat 123 \xF0\x9F\x99\x82", true, false, true);
        for (int& id : ids) id = id % m.config.vocab_size;
        Transformer t(m, 8, nullptr);
        t.forward(ids.data(), (int)std::min<size_t>(ids.size(), 8), 0);
        for (size_t i = 0; i < ids.size(); i++) tok->decode(i ? ids[i - 1] : -1, ids[i] % tok->vocab_size());
        loaded++;
      } catch (const Error&) {
        refused++;
      }
    }
    EXPECT_EQ(loaded + refused, 200);
    EXPECT_GT(refused, 0);
  }
}

}  // namespace
