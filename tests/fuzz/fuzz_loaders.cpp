// libFuzzer target over everything that reads untrusted model bytes: the GGUF reader (header,
// metadata, tensor table), the GGUF model and tokenizer loaders, the llama2.c checkpoint loader,
// the llama2.c tokenizer.bin parser, the encoder-decoder (t5) loader with its Unigram
// tokenizer, the image encoder (mmproj / clip) loader with one small image, the safetensors reader and the
// tokenizer.json reader. A file that loads is then used a little (a tokenizer round trip, a 2-token forward pass; for
// t5 an encode and a 2-token decode), so views that point outside the file are caught too. Any crash, sanitizer report,
// leak, timeout or oversized allocation fails the run; a qkv::Error is the expected outcome for bad bytes.
//
// Seeds: run with QKV_FUZZ_WRITE_SEEDS=DIR to write a seed corpus made by qkv's own writers
// (llama2.c checkpoints and tokenizer, GGUF in every writable type) into DIR and exit.
// scripts/fuzz.sh builds this with clang (-fsanitize=fuzzer,address,undefined) and runs it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common.h"
#include "formats/gguf.h"
#include "formats/gguf_clip.h"
#include "formats/gguf_encdec.h"
#include "engine/embed_image.h"
#include "formats/gguf_model.h"
#include "formats/gguf_writer.h"
#include "formats/hf.h"
#include "formats/safetensors.h"
#include "formats/loader.h"
#include "formats/quantize.h"
#include "model/encdec.h"
#include "model/transformer.h"
#include "chat/chat.h"
#include "tokenizer/tokenizer.h"

using namespace qkv;

namespace {

constexpr int kVocab = 320;  // the seeds' vocabulary: 3 specials, 256 bytes, 61 pieces

// Encoder-decoder GGUF (t5): its loader, its Unigram tokenizer, one encode and a 2-token decode.
void exercise_encdec(const std::shared_ptr<const Blob>& blob) {
  EncoderDecoder t(load_encdec_model(blob), 0, nullptr);
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = embedded_tokenizer(blob);
  } catch (const Error&) {
  }
  const int V = t.config().vocab_size;
  std::vector<int> src = {0, V - 1};
  if (tok) {
    std::vector<int> ids = tok->encode("I dream of caf\xC3\xA9 \xF0\x9F\x99\x82 x", true, true);
    for (int id : ids) src.push_back(id >= 0 && id < V ? id : 0);
  }
  if ((int)src.size() > t.context()) src.resize(t.context());
  t.encode(src.data(), (int)src.size());
  int ids[2] = {t.encdec().decoder_start_id, V - 1};
  if (t.context() >= 2) t.decode(ids, 2, 0, true);
}

// Image encoder GGUF (mmproj / clip): its loader and one 3 x 2 image through the encoder.
void exercise_image(const std::shared_ptr<const Blob>& blob) {
  ImageModelData d = load_image_model(blob);
  const ImagePreprocess p = d.preprocess;
  Transformer t(std::move(d.model), 0, nullptr);
  const uint8_t rgba[24] = {0,  10,  20,  255, 30,  40, 50, 255, 60, 70,  80, 255,
                            90, 100, 110, 255, 255, 0,  0,  255, 0,  255, 0,  255};
  embed_image(t, p, rgba, sizeof rgba, 3, 2, ImageEmbedOptions{});
}

void exercise(const std::shared_ptr<const Blob>& blob) {
  if (is_encdec_model(blob)) return exercise_encdec(blob);
  if (is_image_model(blob)) return exercise_image(blob);
  LoadedModel m = load_model(blob);
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = embedded_tokenizer(blob);
  } catch (const Error&) {
  }
  if (tok) {
    std::vector<int> ids = tok->encode("I dream of caf\xC3\xA9 \xF0\x9F\x99\x82 x", true, false);
    std::string s;
    for (size_t i = 1; i < ids.size(); i++) s += tok->decode(ids[i - 1], ids[i]);
  }
  Transformer t(std::move(m), 0, nullptr);
  const int V = t.config().vocab_size;
  int ids[2] = {1 % V, (V - 1)};
  int lens[2] = {1, 1};  // encoders: two texts of one token, packed
  if (t.config().is_encoder()) t.encode(ids, nullptr, lens, 2);
  else if (t.context() >= 2) t.forward(ids, 2, 0, true);
}

void write(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), (std::streamsize)b.size());
  if (!f) {
    fprintf(stderr, "cannot write %s\n", path.c_str());
    exit(1);
  }
}

template <class T>
void put(std::vector<uint8_t>& o, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  o.insert(o.end(), b, b + sizeof(T));
}

std::vector<uint8_t> tokenizer_bin() {
  std::vector<uint8_t> o;
  put<int32_t>(o, 8);
  auto piece = [&](const std::string& s, float score) {
    put<float>(o, score);
    put<int32_t>(o, (int32_t)s.size());
    o.insert(o.end(), s.begin(), s.end());
  };
  piece("<unk>", 0);
  piece("\n<s>\n", 0);
  piece("\n</s>\n", 0);
  char buf[8];
  for (int b = 0; b < 256; b++) {
    snprintf(buf, sizeof buf, "<0x%02X>", b);
    piece(buf, 0);
  }
  const char* words[] = {" ", "e", "a", "r", "m", " d", " I", "re", "am", " of", " dream", " a", " c", "at", " cat"};
  int i = 0;
  for (; i < (int)(sizeof words / sizeof *words); i++) piece(words[i], -(float)i);
  for (; 259 + i < kVocab; i++) piece(std::string(1, (char)('f' + i % 20)) + std::to_string(i), -100.0f - i);
  return o;
}

std::vector<uint8_t> llama2c_bin(int dim, int hidden, int layers, int heads, int kv_heads, int seq, bool tied,
                                 uint32_t seed) {
  std::vector<uint8_t> o;
  for (int32_t v : {dim, hidden, layers, heads, kv_heads, tied ? kVocab : -kVocab, seq}) put<int32_t>(o, v);
  const int64_t kvd = (int64_t)dim / heads * kv_heads;
  const int64_t n = (int64_t)kVocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * dim * kvd + 3 * dim * hidden) +
                    dim + (tied ? 0 : (int64_t)kVocab * dim);
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 0.3f);
  for (int64_t i = 0; i < n; i++) put<float>(o, g(rng));
  return o;
}

// A small llama GGUF with an embedded 8-piece tokenizer: small seeds let mutations land in the
// header, metadata and tensor table rather than in weight bytes.
std::vector<uint8_t> tiny_gguf(QType type, bool with_tensors) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.context_length", 8);
  w.add_u32("llama.embedding_length", 32);
  w.add_u32("llama.feed_forward_length", 32);
  w.add_u32("llama.block_count", 1);
  w.add_u32("llama.attention.head_count", 2);
  w.add_u32("llama.attention.head_count_kv", 1);
  w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0x0A>", "\xE2\x96\x81", "a",
                                          "\xE2\x96\x81"
                                          "a",
                                          "b"});
  w.add_f32s("tokenizer.ggml.scores", {0, 0, 0, 0, -1, -2, -3, -4});
  w.add_i32s("tokenizer.ggml.token_type", {2, 3, 3, 6, 1, 1, 1, 1});
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
  w.add_bool("tokenizer.ggml.add_space_prefix", true);
  if (with_tensors) {
    std::vector<float> v(32 * 32);
    for (size_t i = 0; i < v.size(); i++) v[i] = 0.01f * (float)((i * 7919) % 13) - 0.06f;
    std::vector<float> ones(32, 1.0f);
    w.add_tensor("token_embd.weight", {32, 8}, v.data(), type);
    w.add_tensor_f32("blk.0.attn_norm.weight", {32}, ones.data());
    w.add_tensor("blk.0.attn_q.weight", {32, 32}, v.data(), type);
    w.add_tensor("blk.0.attn_k.weight", {32, 16}, v.data(), type);
    w.add_tensor("blk.0.attn_v.weight", {32, 16}, v.data(), type);
    w.add_tensor("blk.0.attn_output.weight", {32, 32}, v.data(), type);
    w.add_tensor_f32("blk.0.ffn_norm.weight", {32}, ones.data());
    w.add_tensor("blk.0.ffn_gate.weight", {32, 32}, v.data(), type);
    w.add_tensor("blk.0.ffn_down.weight", {32, 32}, v.data(), type);
    w.add_tensor("blk.0.ffn_up.weight", {32, 32}, v.data(), type);
    w.add_tensor_f32("output_norm.weight", {32}, ones.data());
  }
  return w.finish();
}

void write_seeds(const std::string& dir) {
  // Chat templates (the bytes are also run as one).
  auto text = [](const char* t) { return std::vector<uint8_t>(t, t + strlen(t)); };
  write(
      dir + "/template-chatml.jinja",
      text(
          "{%- if messages[0]['role'] != 'system' %}{{- '<|im_start|>system\nHelpful.<|im_end|>\n' }}{%- endif %}\n"
          "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\n' + m.content | trim + '<|im_end|>\n' }}{%- endfor %}\n"
          "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"));
  write(
      dir + "/template-ns.jinja",
      text(
          "{% set ns = namespace(s='', n=0) %}{% for m in messages if m.role != 'x' %}{% set ns.n = ns.n + 1 %}"
          "{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('alternate') }}{% endif %}"
          "{{ bos_token ~ m.content.split('</think>')[-1][::-1] | upper }}{{ loop.length if loop.last else '' }}{% else %}none"
          "{% endfor %}{{ [1, 2][1:] | tojson }}{{ {'a': none}.get('a') is none }}{{ range(3) | join(',') }}{{ strftime_now('%Y') }}"));
  write(
      dir + "/template-macro.jinja",
      text(
          "{%- macro turn(r, t, close='<|end|>') -%}<|{{ r }}|>{{ t }}{{ close }}{{ varargs | length }}{%- endmacro -%}"
          "{%- macro wrap(tag) %}<{{ tag }}>{{ caller(tag) }}</{{ tag }}>{% endmacro -%}"
          "{%- set head %}{{ messages | length }} turns\n{% endset -%}{{ head }}"
          "{%- for m in messages %}{% if loop.index > 9 %}{% break %}{% endif %}{% if not m.content %}{% continue %}{% endif %}"
          "{{ turn(m.role, m.content, close=loop.cycle('a', 'b')) }}{% call(t) wrap('x') %}{{ t }}: '}}' \\x41{% endcall %}"
          "{% endfor %}{{ ('a', 'b') | join }}"));
  write(dir + "/tiny-meta-only.gguf", tiny_gguf(QType::F32, false));
  write(dir + "/tiny-f32.gguf", tiny_gguf(QType::F32, true));
  write(dir + "/tiny-q8_0.gguf", tiny_gguf(QType::Q8_0, true));
  write(dir + "/tiny-q4_0.gguf", tiny_gguf(QType::Q4_0, true));
  const std::vector<uint8_t> tb = tokenizer_bin();
  write(dir + "/tokenizer.bin", tb);
  const std::vector<uint8_t> bin = llama2c_bin(32, 64, 2, 4, 2, 16, false, 1);
  write(dir + "/model-untied.bin", bin);
  write(dir + "/model-tied.bin", llama2c_bin(16, 24, 1, 2, 2, 8, true, 2));
  auto mblob = std::make_shared<VectorBlob>(bin);
  LoadedModel m = load_model(mblob);
  Tokenizer tok = Tokenizer::from_llama2c(tb.data(), tb.size(), kVocab);
  auto f32 = std::make_shared<VectorBlob>(llama2c_to_gguf(m, tok, "fuzz-seed", QType::F32));
  write(dir + "/model-f32.gguf", std::vector<uint8_t>(f32->data(), f32->data() + f32->size()));
  GgufFile g = GgufFile::parse(f32);
  for (const char* t : {"f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"})
    write(dir + "/model-" + t + ".gguf", quantize_gguf(g, parse_qtype(t)).bytes);
  // Rows of 256 so Q4_K is really used; no tokenizer metadata (the model loads without it).
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.context_length", 8);
  w.add_u32("llama.embedding_length", 256);
  w.add_u32("llama.feed_forward_length", 32);
  w.add_u32("llama.block_count", 1);
  w.add_u32("llama.attention.head_count", 8);
  w.add_u32("llama.attention.head_count_kv", 1);
  w.add_f32("llama.rope.freq_base", 10000.0f);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  std::vector<float> v;
  auto add = [&](const std::string& name, std::vector<uint64_t> dims) {
    v.resize(dims.size() == 1 ? dims[0] : dims[0] * dims[1]);
    for (float& x : v) x = nd(rng);
    w.add_tensor_f32(name, dims, v.data());
  };
  add("token_embd.weight", {256, 8});
  add("blk.0.attn_norm.weight", {256});
  add("blk.0.attn_q.weight", {256, 256});
  add("blk.0.attn_k.weight", {256, 32});
  add("blk.0.attn_v.weight", {256, 32});
  add("blk.0.attn_output.weight", {256, 256});
  add("blk.0.ffn_norm.weight", {256});
  add("blk.0.ffn_gate.weight", {256, 32});
  add("blk.0.ffn_down.weight", {32, 256});
  add("blk.0.ffn_up.weight", {256, 32});
  add("output_norm.weight", {256});
  auto wide = std::make_shared<VectorBlob>(w.finish());
  write(dir + "/wide-q4_k.gguf", quantize_gguf(GgufFile::parse(wide), QType::Q4_K).bytes);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = getenv("QKV_FUZZ_WRITE_SEEDS")) {
    try {
      write_seeds(dir);
    } catch (const Error& e) {
      fprintf(stderr, "seed writing failed: %s\n", e.what());
      exit(1);
    }
    fprintf(stderr, "seeds written to %s\n", dir);
    exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto blob = std::make_shared<VectorBlob>(std::vector<uint8_t>(data, data + size));
  try {
    exercise(blob);
  } catch (const Error&) {
  }
  if (!looks_like_gguf(data, size)) {
    try {  // the bytes as a safetensors file: every view it lists must lie inside it
      uint64_t sum = 0;
      for (const SafetensorsTensor& t : parse_safetensors(*blob, "fuzz.safetensors"))
        for (uint64_t i = 0; i < t.bytes; i += 4096) sum += t.data[i];
      (void)sum;
    } catch (const Error&) {
    }
    try {  // the bytes as tokenizer.json
      HfFiles files({{"tokenizer.json", blob}});
      GgufWriter w;
      add_hf_tokenizer(w, files);
      load_gguf_tokenizer(GgufFile::parse(std::make_shared<VectorBlob>(w.finish())))
          .encode("I dream of a cat \xE2\x82\xAC", true, true);
    } catch (const Error&) {
    }
    try {  // the bytes as a chat template (tokenizer.chat_template is untrusted text too)
      const ChatTemplate ct =
          detect_chat_template(std::string(reinterpret_cast<const char*>(data), size), "<s>", "</s>", true, false);
      render_chat(ct, {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}}, true);
    } catch (const Error&) {
    }
    try {
      Tokenizer t = Tokenizer::from_llama2c(data, size, kVocab);
      std::vector<int> ids = t.encode("I dream of a cat \xE2\x82\xAC", true, true);
      std::string s;
      for (size_t i = 1; i < ids.size(); i++) s += t.decode(ids[i - 1], ids[i]);
    } catch (const Error&) {
    }
  }
  return 0;
}
