// Pre-tokenizers: llama.cpp's regex lists by tokenizer.ggml.pre name (each stage splits every
// fragment into its matches and the unmatched text between them, as llama.cpp's regex split
// does), Unicode tables, UTF-8 and GPT-2's byte alphabet.
#include "pretokenize.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "../common.h"
#include "regex.h"

namespace qkv {

namespace {
struct Range {
  uint32_t first, last;
  uint8_t cls;
};
const Range kRanges[] = {
#include "unicode_table.inc"
};

}  // namespace

int unicode_category(uint32_t cp) {
  const Range* end = kRanges + sizeof kRanges / sizeof kRanges[0];
  const Range* r = std::upper_bound(kRanges, end, cp, [](uint32_t c, const Range& x) { return c < x.first; });
  if (r == kRanges) return 0;
  --r;
  return cp <= r->last ? r->cls : 0;
}

int unicode_class(uint32_t cp) {
  static const int kClass[10] = {0, 1, 1, 1, 1, 1, 4, 2, 3, 5};
  return kClass[unicode_category(cp)];
}

bool unicode_is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::vector<uint32_t> utf8_to_codepoints(const std::string& s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = s[i];
    size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; ok && k < len; k++) {
      const unsigned char c = s[i + k];
      if ((c & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      i++;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

uint32_t gpt2_byte_to_cp(uint8_t b) {
  static const std::vector<uint32_t> table = [] {
    std::vector<uint32_t> t(256);
    uint32_t next = 256;
    for (int i = 0; i < 256; i++) {
      const bool printable = (i >= 0x21 && i <= 0x7E) || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF);
      t[i] = printable ? (uint32_t)i : next++;
    }
    return t;
  }();
  return table[b];
}

int gpt2_cp_to_byte(uint32_t cp) {
  static const std::vector<int> inverse = [] {
    std::vector<int> v(512, -1);
    for (int b = 0; b < 256; b++) v[gpt2_byte_to_cp((uint8_t)b)] = b;
    return v;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

// llama.cpp's pre-tokenizer regexes (src/llama-vocab.cpp, llm_tokenizer_bpe), by kind, and the
// tokenizer.ggml.pre names that select each kind (the first is the kind's name in messages).
namespace {
#define QKV_CONTRACTIONS R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))re"
const char* const kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
const char* const kLlama3 =
    QKV_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kQwen2 =
    QKV_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kCjkHangul = R"re([\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+)re";
const char* const kCjkKana = R"re([\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+)re";
const char* const kAsciiPunctWord =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+)re";
const char* const kPoro = R"re( ?[^(\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+)re";
#define QKV_CASED(LOOK)                                                                                          \
  R"re([^\r\n\p{L}\p{N}]?((?=[)re" LOOK R"re(])([^a-z]))*((?=[)re" LOOK R"re(])([^A-Z]))+)re" QKV_CONTRACTIONS   \
  R"re(?|[^\r\n\p{L}\p{N}]?((?=[)re" LOOK R"re(])([^a-z]))+((?=[)re" LOOK R"re(])([^A-Z]))*)re" QKV_CONTRACTIONS \
  R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"
// superbpe's second stage, (?=(\d{3})+(?!\d)), has an unbounded lookahead: it runs as the
// custom split below (as in llama.cpp, which runs some stages by custom code too).
const char* const kDigitGroups = R"re((?=(\d{3})+(?!\d)))re";
// AFMoE's and Tiny Aya's digit stage, which llama.cpp runs by custom code (split_leading_digits).
const char* const kAfmoeDigits = R"re(\p{AFMoE_digits})re";
// Kimi K2's whole list, which llama.cpp runs by custom code only (split_kimi_k2), under its name
// there.
const char* const kKimiK2 = R"re(\p{Han}+)re";

struct PreSpec {
  PreTokenizer kind;
  std::vector<const char*> names;
  std::vector<std::string> regexes;
  bool ignore_merges = false, add_bos = false;
};

const std::vector<PreSpec>& pre_specs() {
  static const std::vector<PreSpec> t = {
      {PreTokenizer::Default, {"default"}, {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}},
      {PreTokenizer::Gpt2,
       {"gpt-2",      "gpt2",    "phi-2",  "jina-es",     "jina-de",    "gigachat",       "jina-v2-es",
        "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "jina-v1-en", "jina-v2-code",   "roberta-bpe",
        "mpt",        "olmo",    "jais",   "exaone4",     "trillion",   "granite-docling"},
       {kGpt2}},
      {PreTokenizer::Llama3,
       {"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
       {kLlama3},
       true,
       true},
      {PreTokenizer::Dbrx, {"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {kLlama3}},
      {PreTokenizer::Jais2,
       {"jais-2"},
       {QKV_CONTRACTIONS
        R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re"}},
      {PreTokenizer::Qwen2,
       {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"},
       {kQwen2}},
      {PreTokenizer::Qwen35,
       {"qwen35"},
       {QKV_CONTRACTIONS
        R"re(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {PreTokenizer::Starcoder,
       {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"},
       {R"re(\p{N})re", kGpt2}},
      {PreTokenizer::Falcon, {"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"}},
      {PreTokenizer::DeepseekLlm,
       {"deepseek-llm"},
       {R"re([\r\n])re",
        // Its cased letters (Lu, Ll, Lt as of its Unicode version), written out as the model has them.
        R"re(\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+)re",
        R"re(\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+)re", R"re(\s+$)re", kCjkHangul,
        R"re(\p{N}+)re"}},
      {PreTokenizer::DeepseekCoder,
       {"deepseek-coder"},
       {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kCjkHangul, R"re(\p{N})re"}},
      {PreTokenizer::Deepseek3,
       {"deepseek-v3", "hunyuan-dense", "hy_v4", "joyai-llm"},
       {R"re(\p{N}{1,3})re", kCjkKana, std::string(kAsciiPunctWord) + R"re([\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {PreTokenizer::Spark25,
       {"spark2_5"},
       {R"re(\p{N}{1,3})re", kCjkKana, std::string(kAsciiPunctWord) + R"re(|[\r\n]|\s+(?!\S)|\s+)re", R"re(\p{N})re"}},
      {PreTokenizer::Youtu,
       {"youtu"},
       {R"re([\uAC00-\uD7A3\u3131-\u318E]+|[\uFF01\u2026\u201C\u201D\u2018\u2019\u2014\uFF1A\uFF1B\uFF0C\u3001-\u303F\uFE30-\uFE4F]+|[\u3105-\u312F]+|[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+)re",
        R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)re" QKV_CONTRACTIONS
        R"re(?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)re" QKV_CONTRACTIONS
        R"re(?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
       true},
      {PreTokenizer::Poro, {"poro-chat", "bloom", "gpt3-finnish"}, {kPoro}},
      {PreTokenizer::Viking, {"viking"}, {kPoro, R"re(\p{N})re"}},
      {PreTokenizer::Tekken,
       {"tekken"},
       {R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
       true,
       true},
      {PreTokenizer::Chameleon,
       {"chameleon"},
       {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", R"re(([\t\n]|    |  ))re", R"re(\p{N})re",
        R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2},
       false,
       true},
      {PreTokenizer::Gpt4o, {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {QKV_CASED(R"re(\p{L})re")}},
      {PreTokenizer::GraniteEmbMulti, {"granite-embed-multi-97m"}, {QKV_CASED(R"re(\p{L}\p{M})re")}, true},
      {PreTokenizer::Superbpe, {"superbpe"}, {R"re(\p{N}+)re", kDigitGroups}},
      {PreTokenizer::Bailingmoe,
       {"bailingmoe", "bailingmoe2", "llada-moe"},
       {R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re"}},
      {PreTokenizer::SeedCoder,
       {"seed-coder"},
       {QKV_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {PreTokenizer::Ufakzeka,
       {"ufakzeka"},
       {R"re([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {PreTokenizer::Laguna, {"laguna"}, {R"re([^\n]+|[\n]+)re", kQwen2}},
      {PreTokenizer::ExaoneMoe,
       {"exaone-moe"},
       {QKV_CONTRACTIONS
        R"re(|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re"}},
      {PreTokenizer::Afmoe,
       {"afmoe"},
       {kAfmoeDigits,
        R"re([\u4E00-\u9FFF\u3400-\u4DBF\uF900-\uFAFF\u3040-\u309F\u30A0-\u30FF\uFF65-\uFF9F\u2F00-\u2FDF\u0E00-\u0E7F\u0E80-\u0EFF\u1780-\u17FF\u1000-\u109F\uAA60-\uAA7F\uA9E0-\uA9FF\uAC00-\uD7AF\u1100-\u11FF]+)re",
        std::string(kAsciiPunctWord) + R"re([\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {PreTokenizer::TinyAya,
       {"tiny_aya", "cohere2moe"},
       {kAfmoeDigits,
        R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)re" QKV_CONTRACTIONS
        R"re(?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)re" QKV_CONTRACTIONS
        R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {PreTokenizer::KimiK2, {"kimi-k2"}, {kKimiK2}},
      // llama.cpp forces BOS on for Gemma 4's vocabularies, whatever the file says.
      {PreTokenizer::Gemma4, {"gemma4", "granite-embed-multi-311m"}, {R"re([^\n]+|[\n]+)re"}, false, true},
      {PreTokenizer::SarvamMoe, {"sarvam-moe"}, {R"re([^\n]+|[\n]+)re"}},
      {PreTokenizer::Whitespace, {"whitespace"}, {R"re(\S+)re"}},
      {PreTokenizer::Minicpm5,
       {"minicpm5"},
       {R"re(\p{N}{1,3})re",
        QKV_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
       true},
  };
  return t;
}

const PreSpec& spec_of(PreTokenizer kind) {
  for (const PreSpec& p : pre_specs())
    if (p.kind == kind) return p;
  fail(ErrorCode::Internal, "pre-tokenizer kind without a table row");
}

// A stage: a compiled regex, or (re null) one of the custom splits named by its regex.
struct Stage {
  std::shared_ptr<const Regex> re;
  bool leading_digits = false;  // kAfmoeDigits
  bool kimi_k2 = false;         // kKimiK2; neither: kDigitGroups
};

// Each kind's stages, built once.
const std::vector<Stage>& stages_of(PreTokenizer kind) {
  static const std::vector<std::vector<Stage>> all = [] {
    std::vector<std::vector<Stage>> v;
    for (const PreSpec& p : pre_specs()) {
      if ((size_t)p.kind >= v.size()) v.resize((size_t)p.kind + 1);
      for (const std::string& r : p.regexes)
        v[(size_t)p.kind].push_back(r == kDigitGroups   ? Stage{}
                                    : r == kAfmoeDigits ? Stage{nullptr, true}
                                    : r == kKimiK2      ? Stage{nullptr, false, true}
                                                        : Stage{std::make_shared<const Regex>(r)});
    }
    return v;
  }();
  return all.at((size_t)kind);
}

using Frags = std::vector<std::pair<size_t, size_t>>;

// Splits each fragment at the matches of re: matches and the text between them become fragments.
Frags split(const std::vector<uint32_t>& s, const std::vector<uint16_t>& props, const Frags& in, const Regex& re,
            uint64_t* steps) {
  Frags out;
  out.reserve(in.size());
  for (auto [b, e] : in) {
    size_t p = b, pending = b, ms, me;
    while (p <= e && re.find(s.data(), props.data(), b, e, p, &ms, &me, steps)) {
      if (me == ms) {  // an empty match only marks a boundary
        if (ms > pending) out.emplace_back(pending, ms), pending = ms;
        p = ms + 1;
        continue;
      }
      if (ms > pending) out.emplace_back(pending, ms);
      out.emplace_back(ms, me);
      p = pending = me;
    }
    if (pending < e) out.emplace_back(pending, e);
  }
  return out;
}

// (?=(\d{3})+(?!\d)): a boundary before every ASCII digit whose run to its end is 3k long.
Frags split_digit_groups(const std::vector<uint32_t>& s, const Frags& in, uint64_t* steps) {
  auto digit = [&](size_t i) { return s[i] >= '0' && s[i] <= '9'; };
  Frags out;
  out.reserve(in.size());
  for (auto [b, e] : in) {
    std::vector<size_t> cuts;  // from the right
    size_t run = 0;
    for (size_t i = e; i > b; i--) {
      run = digit(i - 1) ? run + 1 : 0;
      if (run > 0 && run % 3 == 0 && i - 1 > b) cuts.push_back(i - 1);
    }
    if (steps) *steps += e - b;
    size_t pending = b;
    for (size_t k = cuts.size(); k-- > 0;) {
      out.emplace_back(pending, cuts[k]);
      pending = cuts[k];
    }
    if (pending < e) out.emplace_back(pending, e);
  }
  return out;
}
// llama.cpp's AFMoE digit split (also Tiny Aya's \d{1,3}(?=(?:\d{3})*\b)): each run of numbers
// (\p{N}) is cut into len % 3 leading digits, then threes; the text before a run joins the run's
// first piece, as llama.cpp's code emits it (its later stages split them apart again).
Frags split_leading_digits(const std::vector<uint16_t>& props, const Frags& in, uint64_t* steps) {
  auto number = [&](size_t i) { return (props[i] & kPropN) != 0; };
  Frags out;
  out.reserve(in.size());
  for (auto [b, e] : in) {
    size_t pending = b;
    for (size_t p = b; p < e;) {
      if (!number(p)) {
        p++;
        continue;
      }
      const size_t start = p;
      while (p < e && number(p)) p++;
      size_t cut = start + (p - start) % 3;
      if (cut == start) cut += 3;
      for (; cut <= p; cut += 3) {
        out.emplace_back(pending, cut);
        pending = cut;
      }
    }
    if (steps) *steps += e - b;
    if (pending < e) out.emplace_back(pending, e);
  }
  return out;
}
// Han characters as llama.cpp's unicode_cpt_is_han lists them (CJK ideographs and extensions).
bool is_han(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2EBEF) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// Kimi K2's pre-tokenizer as llama.cpp's scanner runs it (its regex is
// [\p{Han}]+|[^\r\n\p{L}\p{N}]?[letters but Han]+ with contractions|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+, where the scanner's letters are \p{L} only and case is not told apart).
Frags split_kimi_k2(const std::vector<uint32_t>& s, const std::vector<uint16_t>& props, const Frags& in,
                    uint64_t* steps) {
  Frags out;
  out.reserve(in.size());
  for (const auto& frag : in) {
    const size_t b = frag.first, e = frag.second;  // (lambdas cannot capture structured bindings in C++17)
    auto cp = [&](size_t i) { return i < e ? s[i] : 0xFFFFFFFFu; };
    auto prop = [&](size_t i) { return i < e ? props[i] : (uint16_t)0; };
    auto letter = [&](size_t i) { return i < e && (props[i] & kPropL) && !is_han(s[i]); };
    auto number = [&](size_t i) { return (prop(i) & kPropN) != 0; };
    auto space = [&](size_t i) { return (prop(i) & kPropSpace) != 0; };
    auto newline = [&](size_t i) { return cp(i) == '\r' || cp(i) == '\n'; };
    auto lower = [&](size_t i) { return cp(i) >= 'A' && cp(i) <= 'Z' ? cp(i) + 32 : cp(i); };
    size_t prev = b;
    auto add = [&](size_t end) {
      if (end > prev) out.emplace_back(prev, end);
      prev = end;
    };
    for (size_t p = b; p < e;) {
      if (is_han(s[p])) {  // a run of Han
        while (p < e && is_han(s[p])) p++;
        add(p);
        continue;
      }
      // A word: one optional leading character that is no letter, number or line break, then
      // letters (not Han), then an optional contraction.
      const bool lead = !newline(p) && !(props[p] & kPropL) && !number(p);
      if (letter(p) || (lead && letter(p + 1))) {
        if (lead) p++;
        while (letter(p)) p++;
        if (cp(p) == '\'' && p + 1 < e) {
          const uint32_t c1 = lower(p + 1);
          if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
            p += 2;
          } else if (p + 2 < e) {
            const uint32_t c2 = lower(p + 2);
            if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) p += 3;
          }
        }
        add(p);
        continue;
      }
      if (number(p)) {  // numbers, three at a time from the left
        size_t from = p;
        while (number(p))
          if (++p - from >= 3) add(p), from = p;
        add(p);
        continue;
      }
      // An optional space, then characters that are no space, letter or number, then line breaks.
      const size_t q = cp(p) == ' ' ? p + 1 : p;
      auto other = [&](size_t i) { return i < e && !space(i) && !(props[i] & kPropL) && !number(i); };
      if (other(q)) {
        p = q;
        while (other(p)) p++;
        while (newline(p)) p++;
        add(p);
        continue;
      }
      size_t n = 0, last_break = 0;
      while (space(p + n)) {
        if (newline(p + n)) last_break = p + n + 1;
        n++;
      }
      if (last_break > 0) {  // \s*[\r\n]+
        p = last_break;
      } else if (n > 1 && p + n < e) {  // \s+(?!\S)
        p += n - 1;
      } else if (n > 0) {  // \s+
        p += n;
      } else {
        p++;
      }
      add(p);
    }
    if (steps) *steps += e - b;
  }
  return out;
}
}  // namespace

const char* pre_tokenizer_names() {
  static const std::string text = [] {
    std::string r;
    for (const PreSpec& p : pre_specs())
      for (const char* n : p.names) r += (r.empty() ? "" : ", ") + std::string(n);
    return r;
  }();
  return text.c_str();
}

PreTokenizer pre_tokenizer_from_name(const std::string& n) {
  if (n.empty()) return PreTokenizer::Default;
  for (const PreSpec& p : pre_specs())
    for (const char* m : p.names)
      if (n == m) return p.kind;
  fail(ErrorCode::Unsupported,
       "GGUF pre-tokenizer '" + n +
           "' (tokenizer.ggml.pre) is unknown (llama.cpp refuses it too); known: " + pre_tokenizer_names());
}

bool pre_tokenizer_ignores_merges(PreTokenizer kind) { return spec_of(kind).ignore_merges; }
bool pre_tokenizer_adds_bos(PreTokenizer kind) { return spec_of(kind).add_bos; }
bool pre_tokenizer_raw_utf8(PreTokenizer kind) {
  return kind == PreTokenizer::Gemma4 || kind == PreTokenizer::SarvamMoe || kind == PreTokenizer::Whitespace;
}
bool pre_tokenizer_escapes_spaces(PreTokenizer kind) {
  return kind == PreTokenizer::Gemma4 || kind == PreTokenizer::SarvamMoe;
}
const std::vector<std::string>& pre_tokenizer_regexes(PreTokenizer kind) { return spec_of(kind).regexes; }

std::vector<std::string> pre_tokenize(const std::string& text, PreTokenizer kind, uint64_t* steps) {
  const std::vector<uint32_t> s = utf8_to_codepoints(text);
  if (s.empty()) return {};
  std::vector<uint16_t> props(s.size());
  for (size_t i = 0; i < s.size(); i++) props[i] = unicode_props(s[i]);
  Frags f{{0, s.size()}};
  for (const Stage& st : stages_of(kind))
    f = st.re               ? split(s, props, f, *st.re, steps)
        : st.leading_digits ? split_leading_digits(props, f, steps)
        : st.kimi_k2        ? split_kimi_k2(s, props, f, steps)
                            : split_digit_groups(s, f, steps);
  std::vector<std::string> out;
  out.reserve(f.size());
  for (auto [b, e] : f) {
    std::string w;
    for (size_t i = b; i < e; i++) append_utf8(w, s[i]);
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace qkv
