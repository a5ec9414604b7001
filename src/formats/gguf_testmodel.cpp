// Random-weight GGUF models of every supported architecture, with a SentencePiece vocabulary
// or a byte-level BPE one learned here from a small built-in corpus. Deterministic per seed.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "../common.h"
#include "gguf_writer.h"
#include "../tokenizer/wordpiece.h"

namespace qkv {

namespace {
// Text the BPE vocabularies are learned from: English, code, numbers, contractions, CJK, emoji.
const char* kCorpus =
    "Once upon a time, there was a little robot who dreamed of the stars. It's a dream that we'll share; "
    "they're sure you've seen it, I'm told, and she'd agree. The quick brown fox jumps over the lazy dog.\n"
    "In 2024, 12345 people read 3.14159 pages; 1,000,000 more will read 42 tomorrow at 10:30.\n"
    "def main(argv):\n    for i in range(10):\n        print(f\"value {i}: {argv[i]}\")\n    return 0\n\n"
    "int add(int a, int b) { return a + b; }  // sum\nconst x = [1, 2, 3].map((v) => v * 2);\n"
    "Hello world! Hello again, world. HELLO WORLD? hello-world_test.\n"
    "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88 "  // 日本語のテキスト
    "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C "                                      // 你好，世界
    "caf\xC3\xA9 na\xC3\xAF" "ve \xC3\xBC" "ber \xF0\x9F\x99\x82 \xF0\x9F\x9A\x80\n"                    // café naïve über 🙂 🚀
    "the cat sat on the mat. the dog sat on the log. a bird sang in the tree, and the sun rose again.\n";

const char* kSpecials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>",
                           "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};

std::string byte_symbol(uint8_t b) {
  std::string s;
  append_utf8(s, gpt2_byte_to_cp(b));
  return s;
}

struct Rand {
  std::mt19937 rng;
  explicit Rand(uint32_t seed) : rng(seed) {}
  float uniform(float lo, float hi) { return lo + (hi - lo) * (float)((rng() >> 8) * (1.0 / 16777216.0)); }
  std::vector<float> fill(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (float& x : v) x = uniform(lo, hi);
    return v;
  }
};
}  // namespace

LearnedBpe learn_bpe(const std::string& corpus, PreTokenizer pre, int n_merges) {
  std::map<std::vector<std::string>, int> words;  // word as symbols -> count
  for (const std::string& w : pre_tokenize(corpus, pre)) {
    std::vector<std::string> sym;
    for (unsigned char b : w) sym.push_back(byte_symbol(b));
    words[sym]++;
  }
  LearnedBpe out;
  for (int b = 0; b < 256; b++) out.tokens.push_back(byte_symbol((uint8_t)b));
  std::map<std::string, bool> known;
  for (const std::string& t : out.tokens) known[t] = true;
  for (int m = 0; m < n_merges; m++) {
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (const auto& [sym, count] : words)
      for (size_t i = 0; i + 1 < sym.size(); i++) pairs[{sym[i], sym[i + 1]}] += count;
    const std::pair<std::string, std::string>* best = nullptr;
    int best_count = 1;  // a pair seen once is not worth a token
    for (const auto& [p, count] : pairs)
      if (count > best_count) best = &p, best_count = count;
    if (!best) break;
    const std::string a = best->first, b = best->second, ab = a + b;
    out.merges.push_back(a + " " + b);
    if (!known[ab]) out.tokens.push_back(ab), known[ab] = true;
    std::map<std::vector<std::string>, int> next;
    for (const auto& [sym, count] : words) {
      std::vector<std::string> s;
      for (size_t i = 0; i < sym.size(); i++) {
        if (i + 1 < sym.size() && sym[i] == a && sym[i + 1] == b) s.push_back(ab), i++;
        else s.push_back(sym[i]);
      }
      next[s] += count;
    }
    words.swap(next);
  }
  return out;
}

namespace {
// A BERT-style WordPiece vocabulary as llama.cpp's converter writes it: [PAD] 0, [unused*],
// [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103; then every character of the built-in corpus (and
// a-z, 0-9) as a word start ("\u2581c") and a continuation ("c"), the corpus's repeated words
// whole, and 2-3 character word starts and word ends, so that words split into several pieces.
// Emoji stay out, so texts with them exercise [UNK].
int add_wordpiece_tokenizer(GgufWriter& w, int vocab_size) {
  std::vector<std::string> tokens{"[PAD]"};
  for (int i = 0; i < 99; i++) tokens.push_back("[unused" + std::to_string(i) + "]");
  for (const char* sp : {"[UNK]", "[CLS]", "[SEP]", "[MASK]"}) tokens.push_back(sp);
  std::vector<int32_t> types(tokens.size(), 1);
  types[0] = types[101] = types[102] = types[103] = 3;
  types[100] = 2;
  std::map<std::string, bool> seen;
  for (const std::string& t : tokens) seen[t] = true;
  auto add = [&](const std::string& t) {
    if (t.empty() || seen[t]) return;
    seen[t] = true;
    tokens.push_back(t);
    types.push_back(1);
  };
  const std::string mark = "\xE2\x96\x81";
  std::string alnum = "abcdefghijklmnopqrstuvwxyz0123456789";
  const std::vector<std::string> words = wordpiece_words(std::string(kCorpus) + " " + alnum);
  std::map<std::string, int> count;
  for (const std::string& wd : words) count[wd]++;
  std::vector<std::string> chars;
  for (const std::string& wd : words)
    for (uint32_t cp : utf8_to_codepoints(wd)) {
      if (cp >= 0x1F000) continue;
      std::string c;
      append_utf8(c, cp);
      chars.push_back(c);
    }
  for (char ch : alnum) chars.push_back(std::string(1, ch));
  for (const std::string& c : chars) add(mark + c);
  for (const std::string& c : chars) add(c);
  for (const std::string& wd : words) {
    const std::vector<uint32_t> cps = utf8_to_codepoints(wd);
    if (cps.size() < 2 || cps[0] >= 0x1F000) continue;
    auto span = [&](size_t b, size_t e) {
      std::string o;
      for (size_t i = b; i < e && i < cps.size(); i++) append_utf8(o, cps[i]);
      return o;
    };
    if (count[wd] >= 2) add(mark + wd);
    if (cps.size() >= 4) {
      add(mark + span(0, 2));
      add(mark + span(0, 3));
      add(span(cps.size() - 2, cps.size()));
      add(span(cps.size() - 3, cps.size()));
    }
  }
  for (int i = 99; (int)tokens.size() < vocab_size; i++) {  // BERT-sized vocabularies for benchmarks
    tokens.push_back("[unused" + std::to_string(i) + "]");
    types.push_back(1);
  }
  w.add_string("tokenizer.ggml.model", "bert");
  w.add_strings("tokenizer.ggml.tokens", tokens);
  w.add_i32s("tokenizer.ggml.token_type", types);
  w.add_u32("tokenizer.ggml.token_type_count", 2);
  w.add_u32("tokenizer.ggml.bos_token_id", 101);
  w.add_u32("tokenizer.ggml.cls_token_id", 101);
  w.add_u32("tokenizer.ggml.seperator_token_id", 102);
  w.add_u32("tokenizer.ggml.unknown_token_id", 100);
  w.add_u32("tokenizer.ggml.padding_token_id", 0);
  w.add_u32("tokenizer.ggml.mask_token_id", 103);
  return (int)tokens.size();
}

// BERT (learned positions, separate Q/K/V with biases, GELU) or Nomic BERT (fused QKV, RoPE,
// SwiGLU): post-norm encoder layers with llama.cpp's tensor names.
std::vector<uint8_t> write_encoder_model(const TestModelSpec& s) {
  const std::string& A = s.arch;
  const bool nomic = A == "nomic-bert";
  GgufWriter w;
  w.add_string("general.architecture", A);
  w.add_string("general.name", s.name.empty() ? "qkv test " + A : s.name);
  const int V = add_wordpiece_tokenizer(w, s.vocab_size);
  const uint64_t d = s.dim, h = s.hidden, kvd = (uint64_t)s.kv_heads * (s.dim / s.heads);
  auto key = [&](const char* k) { return A + "." + k; };
  w.add_u32(key("context_length"), s.context);
  w.add_u32(key("embedding_length"), s.dim);
  w.add_u32(key("feed_forward_length"), s.hidden);
  w.add_u32(key("block_count"), s.layers);
  w.add_u32(key("attention.head_count"), s.heads);
  w.add_u32(key("attention.head_count_kv"), s.kv_heads);
  w.add_f32(key("attention.layer_norm_epsilon"), 1e-12f);
  w.add_bool(key("attention.causal"), false);
  w.add_u32(key("pooling_type"), s.pooling);
  if (nomic) w.add_f32(key("rope.freq_base"), 1000.0f);
  Rand r(s.seed);
  auto matrix = [&](const std::string& name, uint64_t rows, uint64_t cols, float gain = 1.0f) {
    const float a = gain * 1.7f / std::sqrt((float)cols);
    std::vector<float> v = r.fill(rows * cols, -a, a);
    w.add_tensor_f32(name, {cols, rows}, v.data());
  };
  auto vector = [&](const std::string& name, uint64_t n, float center, float spread) {
    std::vector<float> v = r.fill(n, center - spread, center + spread);
    w.add_tensor_f32(name, {n}, v.data());
  };
  auto table = [&](const std::string& name, uint64_t rows) {
    std::vector<float> e = r.fill(rows * d, -0.5f, 0.5f);
    w.add_tensor_f32(name, {d, rows}, e.data());
  };
  table("token_embd.weight", (uint64_t)V);
  table("token_types.weight", 2);
  if (!nomic) table("position_embd.weight", (uint64_t)s.context);
  vector("token_embd_norm.weight", d, 1.0f, 0.2f);
  vector("token_embd_norm.bias", d, 0.0f, 0.1f);
  for (int l = 0; l < s.layers; l++) {
    const std::string p = "blk." + std::to_string(l) + ".";
    if (nomic) {
      matrix(p + "attn_qkv.weight", d + 2 * kvd, d, 2.0f);
    } else {
      matrix(p + "attn_q.weight", d, d, 2.0f);
      vector(p + "attn_q.bias", d, 0.0f, 0.2f);
      matrix(p + "attn_k.weight", kvd, d, 2.0f);
      vector(p + "attn_k.bias", kvd, 0.0f, 0.2f);
      matrix(p + "attn_v.weight", kvd, d);
      vector(p + "attn_v.bias", kvd, 0.0f, 0.2f);
    }
    matrix(p + "attn_output.weight", d, d, 3.0f);
    if (!nomic) vector(p + "attn_output.bias", d, 0.0f, 0.1f);
    vector(p + "attn_output_norm.weight", d, 1.0f, 0.2f);
    vector(p + "attn_output_norm.bias", d, 0.0f, 0.1f);
    if (nomic) matrix(p + "ffn_gate.weight", h, d);
    matrix(p + "ffn_up.weight", h, d);
    if (!nomic) vector(p + "ffn_up.bias", h, 0.0f, 0.2f);
    matrix(p + "ffn_down.weight", d, h, 3.0f);
    if (!nomic) vector(p + "ffn_down.bias", d, 0.0f, 0.1f);
    vector(p + "layer_output_norm.weight", d, 1.0f, 0.2f);
    vector(p + "layer_output_norm.bias", d, 0.0f, 0.1f);
  }
  return w.finish();
}
}  // namespace

std::vector<uint8_t> write_test_model(const TestModelSpec& s) {
  const std::string& A = s.arch;
  if (A == "bert" || A == "nomic-bert") return write_encoder_model(s);
  // Mixture of experts: Qwen3-MoE's attention is Qwen3's, OLMoE's has OLMo 2's whole-projection
  // Q/K norms (with pre-norms), Granite-MoE's Granite's multipliers.
  const bool qwen3moe = A == "qwen3moe", olmoe = A == "olmoe", granitemoe = A == "granitemoe",
             moe = qwen3moe || olmoe || granitemoe;
  const bool gpt2 = A == "gpt2", qwen2 = A == "qwen2", qwen3 = A == "qwen3" || qwen3moe, phi3 = A == "phi3", gemma2 = A == "gemma2",
             gemma3 = A == "gemma3", gemma = A == "gemma" || gemma2 || gemma3, post_norms = gemma2 || gemma3,
             head_norms = qwen3 || gemma3, granite = A == "granite" || granitemoe, olmo2 = A == "olmo2",
             stablelm = A == "stablelm", starcoder2 = A == "starcoder2", smollm3 = A == "smollm3", minicpm = A == "minicpm", cohere2 = A == "cohere2", command_r = A == "command-r" || cohere2,
             llama_like = A == "exaone" || A == "internlm2" || minicpm || smollm3 || granite, norm_bias = gpt2 || stablelm || starcoder2,
             all_bias = gpt2 || starcoder2;
  if (A != "llama" && !gpt2 && !qwen2 && !qwen3 && !phi3 && !gemma && !granite && !olmo2 && !stablelm && !starcoder2 && !llama_like && !command_r && !moe) fail(ErrorCode::BadArgument, "no test model for architecture '" + A + "'");
  GgufWriter w;
  w.add_string("general.architecture", A);
  w.add_string("general.name", s.name.empty() ? "qkv test " + A : s.name);
  // Tokenizer.
  int V = 0;
  if (s.spm) {
    add_spm_tokenizer(w, *s.spm, s.spm_specials);
    V = s.spm->vocab_size() + (int)s.spm_specials.size();
  } else {
    const PreTokenizer pre = pre_tokenizer_from_name(s.pre);
    LearnedBpe bpe = learn_bpe(kCorpus, pre, s.merges);
    std::vector<int32_t> types(bpe.tokens.size(), 1);
    auto special = [&](const char* text) {
      bpe.tokens.push_back(text);
      types.push_back(3);
      return (uint32_t)bpe.tokens.size() - 1;
    };
    std::map<std::string, uint32_t> id;
    for (const char* sp : kSpecials) id[sp] = special(sp);
    for (const std::string& sp : s.bpe_specials) special(sp.c_str());
    V = (int)bpe.tokens.size();
    const bool llama3 = pre == PreTokenizer::Llama3;
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", s.pre);
    w.add_strings("tokenizer.ggml.tokens", bpe.tokens);
    w.add_i32s("tokenizer.ggml.token_type", types);
    w.add_strings("tokenizer.ggml.merges", bpe.merges);
    w.add_u32("tokenizer.ggml.bos_token_id", llama3 ? id["<|begin_of_text|>"] : id["<|endoftext|>"]);
    w.add_u32("tokenizer.ggml.eos_token_id", id["<|endoftext|>"]);
    w.add_u32("tokenizer.ggml.eot_token_id", llama3 ? id["<|eot_id|>"] : id["<|im_end|>"]);
    w.add_bool("tokenizer.ggml.add_bos_token", llama3);
    w.add_bool("tokenizer.ggml.add_eos_token", false);
  }
  if (!s.chat_template.empty()) w.add_string("tokenizer.chat_template", s.chat_template);

  // Hyperparameters.
  // Qwen3 and Gemma: head width from attention.key_length, not dim / heads.
  const int head_dim = qwen3 ? 24 : gemma ? 32 : s.dim / s.heads;
  const uint64_t d = s.dim, h = s.hidden, q = (uint64_t)s.heads * head_dim, kv = (uint64_t)s.kv_heads * head_dim;
  auto key = [&](const char* k) { return A + "." + k; };
  w.add_u32(key("context_length"), s.context);
  w.add_u32(key("embedding_length"), s.dim);
  w.add_u32(key("feed_forward_length"), s.hidden);
  w.add_u32(key("block_count"), s.layers);
  w.add_u32(key("attention.head_count"), s.heads);
  w.add_u32(key("attention.head_count_kv"), s.kv_heads);
  if (norm_bias || command_r) w.add_f32(key("attention.layer_norm_epsilon"), 1e-5f);
  else w.add_f32(key("attention.layer_norm_rms_epsilon"), 1e-6f);
  if (!gpt2) {
    // (Gemma 3: the global layers' base; its local layers take 10000)
    w.add_f32(key("rope.freq_base"), qwen2 || qwen3 || gemma3 ? 1000000.0f : 10000.0f);
    // StableLM rotates a quarter of each head (partial_rotary_factor 0.25).
    w.add_u32(key("rope.dimension_count"), stablelm ? head_dim / 4 : head_dim);
    if (s.rope_linear_factor > 0) {
      w.add_string(key("rope.scaling.type"), "linear");
      w.add_f32(key("rope.scaling.factor"), s.rope_linear_factor);
    }
    if (s.rope_yarn_factor > 0) {
      w.add_string(key("rope.scaling.type"), "yarn");
      w.add_f32(key("rope.scaling.factor"), s.rope_yarn_factor);
      if (s.yarn_orig_context > 0) w.add_u32(key("rope.scaling.original_context_length"), s.yarn_orig_context);
    }
    if (s.longrope_orig_context > 0) w.add_u32(key("rope.scaling.original_context_length"), s.longrope_orig_context);
    if (s.rope_attn_factor > 0) w.add_f32(key("rope.scaling.attn_factor"), s.rope_attn_factor);
  }
  // Small caps and window so that the test prompts reach them (logits span about +-7 here; a
  // final cap much nearer that leaves greedy margins of 0.02, near-ties for two engines).
  if (gemma2) {
    w.add_f32(key("attn_logit_softcapping"), 2.0f);
    w.add_f32(key("final_logit_softcapping"), 10.0f);
  }
  if (post_norms && s.sliding_window != 0) w.add_u32(key("attention.sliding_window"), s.sliding_window > 0 ? s.sliding_window : 8);
  // Granite's multipliers, each far from 1 (and the attention scale from 1/sqrt(head_dim)) so
  // that one misapplied changes the text.
  if (granite || minicpm) {
    w.add_f32(key("embedding_scale"), 3.0f);
    w.add_f32(key("residual_scale"), 0.6f);
    if (granite) w.add_f32(key("attention.scale"), 0.45f);
    w.add_f32(key("logit_scale"), 0.5f);
  }
  if (command_r) w.add_f32(key("logit_scale"), 1.6f);  // (multiplies the logits)
  if (cohere2) w.add_u32(key("attention.sliding_window"), s.sliding_window > 0 ? s.sliding_window : 8);
  // Expert width: Qwen3-MoE's from its own key, unlike its dense feed_forward_length.
  const uint64_t he = qwen3moe ? h / 2 : h;
  if (moe) {
    w.add_u32(key("expert_count"), s.experts);
    w.add_u32(key("expert_used_count"), s.experts_used);
    if (qwen3moe) w.add_u32(key("expert_feed_forward_length"), (uint32_t)he);
  }
  if (qwen3 || gemma) {
    w.add_u32(key("attention.key_length"), head_dim);
    w.add_u32(key("attention.value_length"), head_dim);
  }

  // Weights: O(1) activations (matrices scaled by 1/sqrt(fan-in)), decisive logits.
  Rand r(s.seed);
  // Output projections are scaled up so the blocks, not the token's own embedding, dominate the
  // residual stream: otherwise a tied classifier just repeats the last token.
  auto matrix = [&](const std::string& name, uint64_t rows, uint64_t cols, float gain = 1.0f) {
    const float a = gain * 1.7f / std::sqrt((float)cols);
    std::vector<float> v = r.fill(rows * cols, -a, a);
    w.add_tensor_f32(name, {cols, rows}, v.data());
  };
  auto vector = [&](const std::string& name, uint64_t n, float center, float spread) {
    std::vector<float> v = r.fill(n, center - spread, center + spread);
    w.add_tensor_f32(name, {n}, v.data());
  };
  {  // (Gemma multiplies these rows by sqrt(dim) at run time)
    std::vector<float> e = r.fill((uint64_t)V * d, -0.5f, 0.5f);
    w.add_tensor_f32("token_embd.weight", {d, (uint64_t)V}, e.data());
  }
  if (s.rope_freq_factors && !gpt2) vector("rope_freqs.weight", head_dim / 2, 4.5f, 3.5f);
  if (s.longrope_orig_context > 0 && !gpt2) {
    vector("rope_factors_long.weight", head_dim / 2, 4.5f, 3.5f);
    vector("rope_factors_short.weight", head_dim / 2, 1.5f, 0.5f);
  }
  if (gpt2) {
    std::vector<float> pe = r.fill(d * s.context, -0.5f, 0.5f);
    w.add_tensor_f32("position_embd.weight", {d, (uint64_t)s.context}, pe.data());
  }
  for (int l = 0; l < s.layers; l++) {
    const std::string p = "blk." + std::to_string(l) + ".";
    if (!olmo2) vector(p + "attn_norm.weight", d, 1.0f, 0.2f);  // (OLMo 2: no pre-norms)
    if (norm_bias) vector(p + "attn_norm.bias", d, 0.0f, 0.1f);
    if (gpt2 || phi3) {
      matrix(p + "attn_qkv.weight", q + 2 * kv, d, 2.0f);
      if (gpt2) vector(p + "attn_qkv.bias", q + 2 * kv, 0.0f, 0.2f);
    } else {
      matrix(p + "attn_q.weight", q, d, 2.0f);
      matrix(p + "attn_k.weight", kv, d, 2.0f);
      matrix(p + "attn_v.weight", kv, d);
      if (qwen2 || stablelm || starcoder2) {
        vector(p + "attn_q.bias", q, 0.0f, 0.2f);
        vector(p + "attn_k.bias", kv, 0.0f, 0.2f);
        vector(p + "attn_v.bias", kv, 0.0f, 0.2f);
      }
      if (head_norms) {
        vector(p + "attn_q_norm.weight", head_dim, 1.0f, 0.3f);
        vector(p + "attn_k_norm.weight", head_dim, 1.0f, 0.3f);
      }
      if (olmo2 || olmoe) {  // over the whole projections
        vector(p + "attn_q_norm.weight", q, 1.0f, 0.3f);
        vector(p + "attn_k_norm.weight", kv, 1.0f, 0.3f);
      }
    }
    matrix(p + "attn_output.weight", d, q, 3.0f);
    // Post-norms (Gemma 2, 3) set the blocks' output scale whatever the matrices' gains: weights
    // near 6 keep the blocks, not the token's own (sqrt(dim)-scaled) embedding, dominant, else
    // greedy decoding repeats one token and no option changes the text compared with llama.cpp.
    if (all_bias) vector(p + "attn_output.bias", d, 0.0f, 0.1f);
    if (post_norms) vector(p + "post_attention_norm.weight", d, 6.0f, 0.2f);
    if (olmo2) vector(p + "post_attention_norm.weight", d, 1.5f, 0.3f);
    if (!olmo2 && !command_r) vector(p + "ffn_norm.weight", d, 1.0f, 0.2f);  // (Command-R: one norm for both blocks)
    if (norm_bias) vector(p + "ffn_norm.bias", d, 0.0f, 0.1f);
    if (moe) {
      // A router with a wide spread of scores (no near-ties between the engines' choices), and
      // each expert's three matrices stacked along the third dimension.
      const uint64_t E = (uint64_t)s.experts;
      matrix(p + "ffn_gate_inp.weight", E, d, 4.0f);
      auto experts = [&](const std::string& name, uint64_t rows, uint64_t cols, float gain) {
        const float a = gain * 1.7f / std::sqrt((float)cols);
        std::vector<float> v = r.fill(E * rows * cols, -a, a);
        w.add_tensor_f32(name, {cols, rows, E}, v.data());
      };
      experts(p + "ffn_gate_exps.weight", he, d, 1.0f);
      experts(p + "ffn_up_exps.weight", he, d, 1.0f);
      experts(p + "ffn_down_exps.weight", d, he, 3.0f);
      continue;
    }
    if (!gpt2 && !phi3 && !starcoder2) matrix(p + "ffn_gate.weight", h, d, gemma ? 2.0f : 1.0f);
    matrix(p + "ffn_up.weight", phi3 ? 2 * h : h, d);  // Phi-3: gate rows, then up rows
    if (all_bias) vector(p + "ffn_up.bias", h, 0.0f, 0.2f);
    matrix(p + "ffn_down.weight", d, h, 3.0f);
    if (post_norms) vector(p + "post_ffw_norm.weight", d, 6.0f, 0.2f);
    if (olmo2) vector(p + "post_ffw_norm.weight", d, 1.5f, 0.3f);
    if (all_bias) vector(p + "ffn_down.bias", d, 0.0f, 0.1f);
  }
  vector("output_norm.weight", d, 1.0f, 0.2f);
  if (norm_bias) vector("output_norm.bias", d, 0.0f, 0.1f);
  if (!s.tied) matrix("output.weight", (uint64_t)V, d);
  return w.finish();
}

}  // namespace qkv
