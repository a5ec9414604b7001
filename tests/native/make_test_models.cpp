// qkv_test_models OUTDIR [SHARED_MODELS_DIR]: writes the random-weight GGUF models that the
// llama.cpp conformance test (tests/js/wllama.test.mjs) loads in both engines, and a JSON list;
// also t5.gguf (encoder-decoder) and unigram-echo.gguf (its tokenizer in a model that repeats
// the last token), not listed, for the encoder-decoder tests.
// qkv_test_models --encoders OUTDIR: the encoder models (BERT, Nomic BERT) of tests/js/embed_wllama.test.mjs.
// qkv_test_models --encoder-shape OUT.gguf ARCH DIM HIDDEN LAYERS HEADS VOCAB: one random encoder
// of that shape (bench/bench-embed.mjs).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common.h"
#include "formats/file.h"
#include "formats/gguf_writer.h"
#include "formats/quantize.h"
#include "tokenizer/tokenizer.h"
#include "chat_templates.h"

using namespace qkv;

static const char* kChatml =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
static const char* kLlama3 =
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
    "message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

static const char* kPhi3 =
    "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\\n' + message['content'] + '<|end|>\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

// Gemma's turns; the system text opens the first user turn (what llama.cpp's built-in Gemma
// format and qkv's renderer do).
static const char* kGemma =
    "{% set sys = namespace(t='') %}{% for message in messages %}{% if message['role'] == 'system' %}"
    "{% set sys.t = sys.t + message['content'] | trim + '\n\n' %}{% else %}"
    "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else 'user') + '\n' }}"
    "{% if message['role'] == 'user' %}{{ sys.t }}{% set sys.t = '' %}{% endif %}"
    "{{ message['content'] | trim + '<end_of_turn>\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}";

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: qkv_test_models OUTDIR [SHARED_MODELS_DIR]\n");
    return 2;
  }
  if (std::string(argv[1]) == "--encoder-shape") {
    if (argc < 9) {
      fprintf(stderr, "usage: qkv_test_models --encoder-shape OUT.gguf ARCH DIM HIDDEN LAYERS HEADS VOCAB\n");
      return 2;
    }
    try {
      TestModelSpec s;
      s.arch = argv[3];
      s.dim = atoi(argv[4]);
      s.hidden = atoi(argv[5]);
      s.layers = atoi(argv[6]);
      s.heads = s.kv_heads = atoi(argv[7]);
      s.vocab_size = atoi(argv[8]);
      s.context = 512;
      s.seed = 31;
      std::vector<uint8_t> bytes = write_test_model(s);
      FILE* f = fopen(argv[2], "wb");
      if (!f || fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) fail(ErrorCode::Io, std::string("cannot write ") + argv[2]);
      fclose(f);
    } catch (const Error& e) {
      fprintf(stderr, "qkv_test_models: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  if (std::string(argv[1]) == "--encoders") {
    if (argc < 3) {
      fprintf(stderr, "usage: qkv_test_models --encoders OUTDIR\n");
      return 2;
    }
    try {
      struct Enc {
        const char* name;
        const char* arch;
        int pooling, dim, hidden, layers, heads, kv_heads;
        uint32_t seed;
      };
      const Enc encs[] = {
          {"bert", "bert", 1, 64, 128, 2, 4, 4, 21},
          {"bert-cls", "bert", 2, 48, 96, 3, 3, 3, 22},
          {"nomic-bert", "nomic-bert", 1, 64, 96, 2, 4, 4, 23},
      };
      std::string list = "[";
      for (const Enc& e : encs) {
        TestModelSpec s;
        s.arch = e.arch;
        s.pooling = e.pooling;
        s.dim = e.dim;
        s.hidden = e.hidden;
        s.layers = e.layers;
        s.heads = e.heads;
        s.kv_heads = e.kv_heads;
        s.context = 128;
        s.seed = e.seed;
        std::vector<uint8_t> bytes = write_test_model(s);
        const std::string path = std::string(argv[2]) + "/" + e.name + ".gguf";
        FILE* f = fopen(path.c_str(), "wb");
        if (!f || fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) fail(ErrorCode::Io, "cannot write " + path);
        fclose(f);
        list += std::string(list.size() > 1 ? "," : "") + "\"" + e.name + "\"";
      }
      printf("%s]\n", list.c_str());
    } catch (const Error& e) {
      fprintf(stderr, "qkv_test_models: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  const std::string out = argv[1];
  const std::string shared = argc > 2 ? argv[2] : "../shared/models";
  try {
    auto tb = map_file(shared + "/aidreams-tok512.bin");
    Tokenizer spm = Tokenizer::from_llama2c(tb->data(), tb->size(), 512);
    struct Case {
      const char* name;
      TestModelSpec spec;
      QType quant = QType::F32;  // other than F32: the file as `qkv quantize --type` writes it
    };
    auto spec = [](const char* arch, const char* pre, bool tied, uint32_t seed) {
      TestModelSpec s;
      s.arch = arch;
      s.pre = pre;
      s.tied = tied;
      s.seed = seed;
      return s;
    };
    Case cases[] = {
        {"llama-spm", spec("llama", "", false, 11)},
        {"llama-bpe", spec("llama", "llama-bpe", true, 12)},
        {"qwen2", spec("qwen2", "qwen2", true, 13)},
        {"qwen3", spec("qwen3", "qwen2", false, 14)},
        {"gpt2", spec("gpt2", "gpt-2", false, 15)},
        {"gpt2-default", spec("gpt2", "default", true, 16)},
        {"smollm", spec("llama", "smollm", true, 17)},
        {"phi3", spec("phi3", "", false, 18)},
        {"gemma", spec("gemma", "", true, 19)},
        {"llama-q5_k", spec("llama", "", false, 20), QType::Q5_K},
        {"gemma2", spec("gemma2", "", true, 21)},
        {"phi3-longrope", spec("phi3", "", false, 22)},
        {"phi3-longrope-short", spec("phi3", "", false, 23)},
        {"gemma3", spec("gemma3", "", true, 24)},
        {"qwen3-yarn", spec("qwen3", "qwen2", false, 25)},
        {"falcon3", spec("llama", "falcon3", true, 26)},  // Falcon 3: llama with its own name for Llama 3's pre-tokenizer
        // Every other stored type qkv writes, so that llama.cpp reads each block layout as qkv
        // does (the K types on rows of 256; the 32-blocks also on BPE models with biases and
        // with GPT-2's fused QKV and learned positions).
        {"llama-q8_0", spec("llama", "", false, 27), QType::Q8_0},
        {"llama-q4_0", spec("llama", "", true, 28), QType::Q4_0},
        {"llama-q4_k", spec("llama", "", false, 29), QType::Q4_K},
        {"llama-f16", spec("llama", "", false, 30), QType::F16},
        {"llama-bf16", spec("llama", "", true, 31), QType::BF16},
        {"qwen2-q4_1", spec("qwen2", "qwen2", true, 32), QType::Q4_1},
        {"gpt2-q5_0", spec("gpt2", "gpt-2", false, 33), QType::Q5_0},
        {"qwen3-q5_1", spec("qwen3", "qwen2", false, 34), QType::Q5_1},
        // Chat templates that only run as Jinja (see above).
        {"tinyllama-zephyr", spec("llama", "", true, 40)},
        {"qwen2-default-system", spec("qwen2", "qwen2", true, 36)},
        {"llama3-dated", spec("llama", "llama-bpe", true, 37)},
        {"deepseek-r1-qwen", spec("qwen2", "deepseek-r1-qwen", true, 38)},
        {"mistral-v7", spec("llama", "", false, 39)},
        {"qwen2-macros", spec("qwen2", "qwen2", true, 41)},
        {"qwen2-tools", spec("qwen2", "qwen2", true, 42)},
        // Architectures that are rows of the options table over Llama's forward pass.
        {"granite", spec("granite", "gpt-2", true, 43)},
        {"olmo2", spec("olmo2", "gpt-2", false, 44)},
        {"stablelm", spec("stablelm", "gpt-2", false, 45)},
        {"starcoder2", spec("starcoder2", "gpt-2", true, 46)},
        {"smollm3", spec("smollm3", "llama-bpe", true, 47)},
        {"minicpm", spec("minicpm", "", true, 48)},
        {"exaone", spec("exaone", "gpt-2", false, 49)},
        {"internlm2", spec("internlm2", "", false, 50)},
        {"command-r", spec("command-r", "gpt-2", true, 51)},
        // Mixture-of-experts feed-forwards (8 experts, 2 per token), one stored as Q8_0. wip-: left
        // out of CI's llama.cpp comparison while 2 of its 10 prompts part from llama.cpp at margins
        // above the near-tie threshold (docs/architectures.md).
        {"wip-qwen3moe", spec("qwen3moe", "qwen2", false, 75)},
        {"olmoe", spec("olmoe", "gpt-2", false, 76)},
        {"granitemoe", spec("granitemoe", "gpt-2", true, 77)},
        {"qwen3moe-q8_0", spec("qwen3moe", "qwen2", true, 78), QType::Q8_0},
        {"wip-cohere2", spec("cohere2", "gpt-2", true, 79)},
        // One model per further pre-tokenizer kind (tests/js/pretokenizers_wllama.test.mjs).
        {"pre-deepseek-llm", spec("llama", "deepseek-llm", true, 50)},
        {"pre-deepseek-coder", spec("llama", "deepseek-coder", true, 51)},
        {"pre-deepseek-v3", spec("llama", "deepseek-v3", true, 52)},
        {"pre-falcon", spec("llama", "falcon", true, 53)},
        {"pre-starcoder", spec("llama", "starcoder", true, 54)},
        {"pre-command-r", spec("llama", "command-r", true, 55)},
        {"pre-mpt", spec("llama", "mpt", true, 56)},
        {"pre-dbrx", spec("llama", "dbrx", true, 57)},
        {"pre-jais-2", spec("llama", "jais-2", true, 58)},
        {"pre-qwen35", spec("llama", "qwen35", true, 59)},
        {"pre-bloom", spec("llama", "bloom", true, 60)},
        {"pre-viking", spec("llama", "viking", true, 61)},
        {"pre-tekken", spec("llama", "tekken", true, 62)},
        {"pre-chameleon", spec("llama", "chameleon", true, 63)},
        {"pre-gpt-4o", spec("llama", "gpt-4o", true, 64)},
        {"pre-superbpe", spec("llama", "superbpe", true, 65)},
        {"pre-bailingmoe", spec("llama", "bailingmoe", true, 66)},
        {"pre-seed-coder", spec("llama", "seed-coder", true, 67)},
        {"pre-spark2_5", spec("llama", "spark2_5", true, 68)},
        {"pre-ufakzeka", spec("llama", "ufakzeka", true, 69)},
        {"pre-laguna", spec("llama", "laguna", true, 70)},
        {"pre-exaone-moe", spec("llama", "exaone-moe", true, 71)},
        {"pre-minicpm5", spec("llama", "minicpm5", true, 72)},
        {"pre-granite-embed-multi-97m", spec("llama", "granite-embed-multi-97m", true, 73)},
        {"pre-youtu", spec("llama", "youtu", true, 74)},
    };
    cases[24].spec.spm = &spm;
    cases[24].spec.spm_specials = {"<|user|>", "<|assistant|>", "<|system|>"};
    cases[24].spec.chat_template = kZephyr;
    cases[25].spec.chat_template = kChatmlDefaultSystem;
    cases[26].spec.chat_template = kLlama3Dated;
    cases[27].spec.bpe_specials = {"<\xef\xbd\x9c" "User\xef\xbd\x9c>", "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"};
    cases[27].spec.chat_template = kDeepSeekR1;
    cases[28].spec.spm = &spm;
    cases[28].spec.spm_specials = {"[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"};
    cases[28].spec.chat_template = kMistralV7;
    cases[29].spec.chat_template = kChatmlMacros;
    cases[30].spec.chat_template = kChatmlTools;
    // The quantized llama models: rows of 256, so that the K types write real Q4_K, Q5_K and
    // Q6_K blocks.
    for (int i : {9, 16, 17, 18, 19, 20}) {
      cases[i].spec.spm = &spm;
      cases[i].spec.dim = 256;
      cases[i].spec.hidden = 512;
      cases[i].spec.layers = 3;
    }
    // Qwen3 with YaRN as its long-context files store it (factor 4 over a 2048-token original
    // context, here 8192 in all): of the 8 RoPE pairs, pair 0 keeps its unscaled angle, pairs 1-3
    // ramp between, 4-7 are scaled; cos and sin take 1 + 0.1 ln 4.
    cases[14].spec.rope_yarn_factor = 4.0f;
    cases[14].spec.yarn_orig_context = 2048;
    cases[14].spec.context = 8192;
    cases[14].spec.chat_template = kChatml;
    // Gemma 3 on seven layers (five local, window 8 and RoPE base 10000; one global, base 1e6 with
    // linear scaling 8; one local), SentencePiece plus its turn markers.
    cases[13].spec.spm = &spm;
    cases[13].spec.spm_specials = {"<start_of_turn>", "<end_of_turn>"};
    cases[13].spec.chat_template = kGemma;
    cases[13].spec.layers = 7;
    cases[13].spec.rope_linear_factor = 8.0f;
    // Phi-3.5-style LongRoPE with an attention factor. Both engines run these at contexts of
    // 256 (qkv: the model's) and 512 (llama.cpp): above 128 (the long factors) and below 1024
    // (the short ones).
    for (int i : {11, 12}) {
      cases[i].spec.spm = &spm;
      cases[i].spec.spm_specials = {"<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>", "<s>", "</s>"};
      cases[i].spec.chat_template = kPhi3;
      cases[i].spec.longrope_orig_context = i == 11 ? 128 : 1024;
      cases[i].spec.rope_attn_factor = 1.19f;
    }
    cases[10].spec.spm = &spm;
    cases[10].spec.spm_specials = {"<start_of_turn>", "<end_of_turn>"};
    cases[10].spec.chat_template = kGemma;
    cases[8].spec.spm = &spm;  // Gemma: SentencePiece plus its turn markers, tied classifier
    cases[8].spec.spm_specials = {"<start_of_turn>", "<end_of_turn>"};
    cases[8].spec.chat_template = kGemma;
    cases[7].spec.spm = &spm;  // Phi-3: SentencePiece plus its turn markers, whose trailing whitespace llama.cpp strips
    cases[7].spec.spm_specials = {"<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>", "<s>", "</s>"};
    cases[7].spec.name = "qkv test Phi-3";
    cases[7].spec.chat_template = kPhi3;
    cases[0].spec.spm = &spm;
    cases[0].spec.rope_linear_factor = 4.0f;
    cases[1].spec.chat_template = kLlama3;
    cases[1].spec.rope_freq_factors = true;  // Llama 3.1-style per-frequency RoPE factors
    cases[2].spec.chat_template = kChatml;
    cases[3].spec.kv_heads = 4;
    cases[4].spec.kv_heads = 4;
    cases[5].spec.kv_heads = 4;
    cases[35].spec.layers = 4;  // SmolLM3: layer 3 without RoPE
    cases[36].spec.spm = &spm;  // MiniCPM and InternLM 2: SentencePiece, as theirs are
    cases[38].spec.spm = &spm;
    cases[41].spec.kv_heads = cases[41].spec.heads;  // OLMoE: its Q and K norms span n_embd both
    cases[43].spec.experts = 4;  // Q8_0 Qwen3-MoE: 4 experts, 3 per token
    cases[43].spec.experts_used = 3;
    cases[44].spec.layers = 4;  // Cohere 2: layers 0-2 local (window 8, RoPE), layer 3 global without RoPE
    std::string list = "[";
    for (const Case& c : cases) {
      std::vector<uint8_t> bytes = write_test_model(c.spec);
      if (c.quant != QType::F32)
        bytes = quantize_gguf(GgufFile::parse(std::make_shared<VectorBlob>(std::move(bytes))), c.quant).bytes;
      const std::string path = out + "/" + c.name + ".gguf";
      FILE* f = fopen(path.c_str(), "wb");
      if (!f || fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) fail(ErrorCode::Io, "cannot write " + path);
      fclose(f);
      list += std::string(list.size() > 1 ? "," : "") + "\"" + c.name + "\"";
    }
    {  // The encoder-decoder model (t5), apart from the list: llama.cpp's WASM server cannot run it
      TestModelSpec t5;
      t5.arch = "t5";
      t5.spm = &spm;
      t5.heads = 2;
      t5.tied = false;
      t5.seed = 19;
      std::vector<uint8_t> bytes = write_test_encdec_model(t5);
      const std::string path = out + "/t5.gguf";
      FILE* f = fopen(path.c_str(), "wb");
      if (!f || fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) fail(ErrorCode::Io, "cannot write " + path);
      fclose(f);
      // Its tokenizer in a model that echoes the last token (the tokenizer comparison).
      const std::vector<uint8_t> echo = write_unigram_echo_model(spm);
      const std::string epath = out + "/unigram-echo.gguf";
      FILE* g = fopen(epath.c_str(), "wb");
      if (!g || fwrite(echo.data(), 1, echo.size(), g) != echo.size()) fail(ErrorCode::Io, "cannot write " + epath);
      fclose(g);
    }
    printf("%s]\n", list.c_str());
  } catch (const Error& e) {
    fprintf(stderr, "qkv_test_models: %s\n", e.what());
    return 1;
  }
  return 0;
}
