// Tokenizers against references: the real vocabularies in ../shared/vocab (ids from Hugging
// Face's tokenizers), every pre-tokenizer against llama.cpp's own way of running its regexes
// (std::regex over "collapsed" text, rebuilt here), and linear work on long inputs of each
// path's worst shape (operation counts, not timers).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include "common.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "formats/loader.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/regex.h"
#include "tokenizer/special_matcher.h"
#include "tokenizer/tokenizer.h"
#include "real_vocab.h"

using namespace qkv;

namespace {

Tokenizer vocab_tokenizer(const std::string& bytes) {
  std::vector<uint8_t> v(bytes.begin(), bytes.end());
  return load_gguf_tokenizer(GgufFile::parse(std::make_shared<VectorBlob>(std::move(v))));
}

class RealVocab : public ::testing::TestWithParam<const char*> {};

TEST_P(RealVocab, EveryTestStringGivesHuggingFaceIds) {
  VocabCases v;
  if (!read_real_vocab(GetParam(), &v)) GTEST_SKIP() << GetParam() << " is missing from " << kVocabDir;
  const Tokenizer t = vocab_tokenizer(v.gguf);
  ASSERT_EQ(v.texts.size(), 46u);
  ASSERT_EQ(v.expected.size(), v.texts.size());
  for (size_t i = 0; i < v.texts.size(); i++)
    EXPECT_EQ(t.encode(v.texts[i], false, false, false), v.expected[i])
        << GetParam() << " string " << i << ": '" << v.texts[i] << "'";
}

INSTANTIATE_TEST_SUITE_P(Shared, RealVocab, ::testing::ValuesIn(kRealVocabs),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string n = i.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// ---- llama.cpp's regex split, rebuilt on std::regex as its unicode.cpp does it ----------------
// Regexes that use a Unicode category run over "collapsed" text: ASCII stays, other code points
// become one byte per category (whitespace 0x0B), and \p{X} becomes that byte plus the ASCII
// members of X; the others run as std::wregex over code points, non-ASCII whitespace as 0x0B.

const char* ascii_members(char cat) {
  switch (cat) {
    case 'N': return "0-9";
    case 'L': return "A-Za-z";
    case 'P': return "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}";
    case 'M': return "";
    case 'S': return "\\$\\+<->\\^`\\|~";
  }
  return nullptr;
}
char collapsed_byte(char cat) { return (char)(0xD1 + std::string("NLPMS").find(cat)); }
char collapse(uint32_t cp) {
  if (cp < 128) return (char)cp;
  if (unicode_is_space(cp)) return 0x0B;
  switch (unicode_class(cp)) {
    case 1: return collapsed_byte('L');
    case 2: return collapsed_byte('N');
    case 3: return collapsed_byte('P');
    case 4: return collapsed_byte('M');
    case 5: return collapsed_byte('S');
  }
  return (char)0xD0;
}

// Our patterns write non-ASCII as \uXXXX / \UXXXXXXXX; std::wregex gets the characters.
std::wstring widen_pattern(const std::string& re) {
  std::wstring w;
  for (size_t i = 0; i < re.size(); i++) {
    if (re[i] == '\\' && i + 1 < re.size() && (re[i + 1] == 'u' || re[i + 1] == 'U')) {
      const size_t n = re[i + 1] == 'u' ? 4 : 8;
      w += (wchar_t)std::stoul(re.substr(i + 2, n), nullptr, 16);
      i += 1 + n;
    } else if (re[i] == '\\' && i + 1 < re.size()) {
      w += L'\\';
      w += (wchar_t)re[++i];
    } else {
      w += (wchar_t)(unsigned char)re[i];
    }
  }
  return w;
}

template <class Char, class Re>
std::vector<size_t> stl_split(const std::basic_string<Char>& text, const Re& re, const std::vector<size_t>& lens) {
  std::vector<size_t> out;
  size_t start = 0;
  for (size_t len : lens) {
    using It = std::regex_iterator<const Char*>;
    size_t at = 0;
    for (It it(text.data() + start, text.data() + start + len, re), end; it != end; ++it) {
      if ((size_t)it->position() > at) out.push_back(it->position() - at);
      out.push_back(it->length());
      at = it->position() + it->length();
    }
    if (at < len) out.push_back(len - at);
    start += len;
  }
  return out;
}

// Fragment lengths (empty ones dropped, as they tokenize to nothing); false if std::regex
// cannot run a pattern (llama.cpp could not either).
// llama.cpp's custom AFMoE digit stage (unicode_regex_split_custom_afmoe), as its code reads: in
// each piece, a run of numbers ends a token at len % 3 digits into it (if not 0), then every 3;
// the text before the run belongs to the run's first token.
std::vector<size_t> afmoe_digit_split(const std::vector<uint32_t>& cps, const std::vector<size_t>& lens) {
  std::vector<size_t> out;
  size_t start = 0;
  for (size_t len : lens) {
    const size_t end = start + len;
    size_t prev = start;
    auto add = [&](size_t e) {
      if (e > prev) out.push_back(e - prev);
      prev = e;
    };
    for (size_t pos = start; pos < end;) {
      if (unicode_class(cps[pos]) != 2) {
        pos++;
        continue;
      }
      const size_t first = pos;
      while (pos < end && unicode_class(cps[pos]) == 2) pos++;
      size_t cur = first;
      if ((pos - first) % 3) add(cur += (pos - first) % 3);
      while (cur < pos) add(cur += 3);
    }
    add(end);
    start = end;
  }
  return out;
}

bool llama_cpp_split(const std::vector<uint32_t>& cps, PreTokenizer kind, std::vector<size_t>* lens) {
  std::vector<size_t> cur{cps.size()};
  std::string collapsed;
  std::wstring wide;
  for (uint32_t c : cps) {
    collapsed += collapse(c);
    wide += (wchar_t)(c > 0x7F && unicode_is_space(c) ? 0x0B : c);
  }
  for (const std::string& re : pre_tokenizer_regexes(kind)) {
    if (re == "\\p{AFMoE_digits}") {  // a stage llama.cpp runs by custom code only
      cur = afmoe_digit_split(cps, cur);
      continue;
    }
    const bool cats = re.find("\\p{") != std::string::npos;
    try {
      if (cats) {
        std::string conv;
        bool inside = false;
        for (size_t i = 0; i < re.size(); i++) {
          if (re[i] == '[' && (i == 0 || re[i - 1] != '\\')) inside = true;
          else if (inside && re[i] == ']' && re[i - 1] != '\\') inside = false;
          if (re.compare(i, 3, "\\p{") == 0) {
            // llama.cpp maps only \p{L} \p{N} \p{P} \p{M} \p{S}; std::regex misreads the others.
            const char* m = i + 4 < re.size() && re[i + 4] == '}' ? ascii_members(re[i + 3]) : nullptr;
            if (!m) return false;
            conv += std::string(inside ? "" : "[") + collapsed_byte(re[i + 3]) + m + (inside ? "" : "]");
            i += 4;
            continue;
          }
          conv += re[i];
        }
        cur = stl_split(collapsed, std::regex(conv), cur);
      } else {
        cur = stl_split(wide, std::wregex(widen_pattern(re)), cur);
      }
    } catch (const std::regex_error&) {
      return false;
    }
    cur.erase(std::remove(cur.begin(), cur.end(), 0u), cur.end());
  }
  *lens = cur;
  return true;
}

std::string utf8(const std::vector<uint32_t>& cps) {
  std::string s;
  for (uint32_t c : cps) append_utf8(s, c);
  return s;
}

const PreTokenizer kAllKinds[] = {
    PreTokenizer::Default,  PreTokenizer::Gpt2,        PreTokenizer::Llama3,        PreTokenizer::Dbrx,
    PreTokenizer::Jais2,    PreTokenizer::Qwen2,       PreTokenizer::Qwen35,        PreTokenizer::Starcoder,
    PreTokenizer::Falcon,   PreTokenizer::DeepseekLlm, PreTokenizer::DeepseekCoder, PreTokenizer::Deepseek3,
    PreTokenizer::Spark25,  PreTokenizer::Youtu,       PreTokenizer::Poro,          PreTokenizer::Viking,
    PreTokenizer::Tekken,   PreTokenizer::Chameleon,   PreTokenizer::Gpt4o,         PreTokenizer::GraniteEmbMulti,
    PreTokenizer::Superbpe, PreTokenizer::Bailingmoe,  PreTokenizer::SeedCoder,     PreTokenizer::Ufakzeka,
    PreTokenizer::Laguna,   PreTokenizer::ExaoneMoe,   PreTokenizer::Minicpm5,      PreTokenizer::Afmoe,
    PreTokenizer::TinyAya,
};

TEST(PreTokenizerRegex, EveryKindSplitsAsLlamaCppsStdRegexDoes) {
  // Tricky characters: cases, contractions, digits of several scripts, marks, symbols, CJK,
  // fullwidth forms, Unicode spaces, controls, astral letters; the patterns' own literals.
  const std::vector<std::vector<uint32_t>> pieces = {{'a'},
                                                     {'Z'},
                                                     {'x', 'y'},
                                                     {'H', 'i'},
                                                     {'\'', 's'},
                                                     {'\'', 'S'},
                                                     {'\'', 'l', 'l'},
                                                     {'\'', 'R', 'e'},
                                                     {'\'', 'd'},
                                                     {'\''},
                                                     {'0'},
                                                     {'7'},
                                                     {'1', '2', '3', '4'},
                                                     {' '},
                                                     {' '},
                                                     {' ', ' '},
                                                     {'\t'},
                                                     {'\n'},
                                                     {'\r', '\n'},
                                                     {'\r'},
                                                     {'.'},
                                                     {','},
                                                     {'!'},
                                                     {'$'},
                                                     {'+'},
                                                     {'<'},
                                                     {'='},
                                                     {'^'},
                                                     {'~'},
                                                     {'|'},
                                                     {'`'},
                                                     {'/'},
                                                     {'_'},
                                                     {'-'},
                                                     {'('},
                                                     {')'},
                                                     {0xE9},
                                                     {0xC9},
                                                     {0x1C5},
                                                     {0x2B0},
                                                     {0x65E5},
                                                     {0x672C},
                                                     {0x304B},
                                                     {0x30AB},
                                                     {0xAC00},
                                                     {0x663},
                                                     {0xBD},
                                                     {0x2167},
                                                     {'e', 0x301},
                                                     {0x903},
                                                     {0xA0},
                                                     {0x3000},
                                                     {0x2028},
                                                     {0x85},
                                                     {0x1F642},
                                                     {0x20AC},
                                                     {0xAB},
                                                     {0xFF0C},
                                                     {0x3002},
                                                     {0x2026},
                                                     {0x200B},
                                                     {0x01},
                                                     {0x10400},
                                                     {0xFB00},
                                                     {0xFF21},
                                                     {0x1F7D},
                                                     {0x212A},
                                                     {0x964},
                                                     {'<', 's', 'e', 'n', 't', 'i', 'n', 'e', 'l', ':', '4', '2', '>'},
                                                     {'I', 'M', 'G', 'I', 'M', 'G', 'A', 'B', 'Z'},
                                                     {' ', ' ', ' ', ' '}};
  std::mt19937 rng(1234);
  int compared = 0;
  for (PreTokenizer kind : kAllKinds) {
    int runs = 0;
    for (int n = 0; n < 150; n++) {
      std::vector<uint32_t> cps;
      const int len = 1 + (int)(rng() % 12);
      for (int k = 0; k < len; k++) {
        const auto& p = pieces[rng() % pieces.size()];
        cps.insert(cps.end(), p.begin(), p.end());
      }
      std::vector<size_t> want;
      if (!llama_cpp_split(cps, kind, &want)) break;
      std::vector<std::string> expected;
      size_t at = 0;
      for (size_t l : want) {
        expected.push_back(utf8(std::vector<uint32_t>(cps.begin() + at, cps.begin() + at + l)));
        at += l;
      }
      ASSERT_EQ(pre_tokenize(utf8(cps), kind), expected)
          << "kind " << (int)kind << " on '" << utf8(cps) << "' (" << pre_tokenizer_regexes(kind)[0] << ")";
      runs++;
    }
    compared += runs > 0;
  }
  // Only patterns std::regex cannot run (\p{Lu} and the like: youtu, tiny_aya) are left out.
  EXPECT_GE(compared, (int)(sizeof kAllKinds / sizeof kAllKinds[0]) - 2);
}

TEST(PreTokenizerRegex, HandCheckedSplits) {
  auto pre = [](const char* text, const char* name) { return pre_tokenize(text, pre_tokenizer_from_name(name)); };
  using P = std::vector<std::string>;
  EXPECT_EQ(pre("1234567 12", "superbpe"), (P{"1", "234", "567", " ", "12"}));  // groups of three from the right
  EXPECT_EQ(pre("123456", "superbpe"), (P{"123", "456"}));
  EXPECT_EQ(pre("Hello WORLD", "tekken"), (P{"Hello", " WORLD"}));
  EXPECT_EQ(pre("helloWorld", "gpt-4o"), (P{"hello", "World"}));
  EXPECT_EQ(pre("12345", "falcon"), (P{"123", "45"}));
  EXPECT_EQ(pre("a\n\nb", "deepseek-coder"), (P{"a", "\n", "\n", "b"}));
  EXPECT_EQ(pre("hi, there.", "bloom"), (P{"hi", ",", " there", "."}));
  // AFMoE and Tiny Aya: number runs cut as len % 3, then threes (llama.cpp's custom stage), then
  // AFMoE's script runs (CJK, Thai, Hangul, ...) and its words.
  EXPECT_EQ(pre("abc 12345", "afmoe"), (P{"abc", " ", "12", "345"}));
  EXPECT_EQ(pre("x123456y", "afmoe"), (P{"x", "123", "456", "y"}));
  EXPECT_EQ(pre("\xe6\x97\xa5\xe6\x9c\xac"
                "abc",
                "afmoe"),
            (P{"\xe6\x97\xa5\xe6\x9c\xac", "abc"}));
  EXPECT_EQ(pre("1234567 It's", "tiny_aya"), (P{"1", "234", "567", " It's"}));
  EXPECT_EQ(pre("1234567", "cohere2moe"), (P{"1", "234", "567"}));
  // Kimi K2 (llama.cpp's scanner): Han runs apart, words with contractions, numbers in threes
  // from the left.
  EXPECT_EQ(pre("\xe4\xbd\xa0\xe5\xa5\xbd"
                "world",
                "kimi-k2"),
            (P{"\xe4\xbd\xa0\xe5\xa5\xbd", "world"}));
  EXPECT_EQ(pre("I'LL 12345", "kimi-k2"), (P{"I'LL", " ", "123", "45"}));
  EXPECT_EQ(pre("a  b!!\n\nc", "kimi-k2"), (P{"a", " ", " b", "!!\n\n", "c"}));
}

TEST(RegexEngine, RefusesWhatItCannotRunByName) {
  for (const char* bad : {"(?<=a)b", "a++", "(?=ab)", "\\p{Han}", "[a-", "(a", "a{2000}", "\\q"}) {
    try {
      Regex r(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::BadArgument) << bad;
      EXPECT_NE(std::string(e.what()).find("pre-tokenizer regex"), std::string::npos) << e.what();
    }
  }
}

// ---- linear work ------------------------------------------------------------------------------

std::string repeat(const std::string& unit, size_t bytes) {
  std::string s;
  s.reserve(bytes + unit.size());
  while (s.size() < bytes) s += unit;
  return s;
}

// The worst shapes for a scanner: long runs of one class and alternations of classes.
const char* const kShapes[] = {
    "1",  "a",   "A",  " ",     "\n",       "'s", "a1", " 1", "\xF0\x9F\x99\x82", "\xE6\x97\xA5",
    "! ", " \n", "aB", "\t\t ", "e\xCC\x81"};

TEST(Linearity, EveryPreTokenizerDoesLinearWorkOnEveryShape) {
  for (PreTokenizer kind : kAllKinds)
    for (const char* shape : kShapes) {
      // jais-2's whitespace alternatives (\s*[\r\n]+ before \s{512}(?!\S)) rescan a whitespace
      // run for every 512 characters of it, in llama.cpp's std::regex as here: quadratic by its
      // definition, with a constant of 1/512.
      if (kind == PreTokenizer::Jais2 && (shape[0] == ' ' || shape[0] == '\t')) continue;
      uint64_t small = 0, big = 0;
      pre_tokenize(repeat(shape, 4 << 10), kind, &small);
      pre_tokenize(repeat(shape, 16 << 10), kind, &big);
      ASSERT_GT(small, 0u);
      // Four times the text, at most about four times the work (a quadratic scan gives 16x).
      EXPECT_LE((double)big / (double)small, 4.5) << "kind " << (int)kind << " shape '" << shape << "'";
    }
}

// A byte-level BPE vocabulary (every byte, no merges) with chat markers as control tokens.
Tokenizer byte_bpe(const char* pre) {
  std::vector<std::string> tokens;
  std::vector<int> types;
  for (int b = 0; b < 256; b++) {
    std::string s;
    append_utf8(s, gpt2_byte_to_cp((uint8_t)b));
    tokens.push_back(s);
    types.push_back(kTokNormal);
  }
  for (const char* sp : {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_end|>x", "<|"}) {
    tokens.push_back(sp);
    types.push_back(kTokControl);
  }
  const PreTokenizer kind = pre_tokenizer_from_name(pre);
  return Tokenizer::from_bpe(tokens, types, {}, kind, pre_tokenizer_ignores_merges(kind));
}

TEST(Linearity, MegabyteInputsThroughEncode) {
  struct Case {
    const char* pre;
    const char* unit;
    bool special, mega;  // mega: a megabyte (the cases), else 256 KB
  } cases[] = {{"qwen2", "1", false, true},
               {"llama-bpe", "1", false, true},
               {"llama-bpe", "x<|im_end|>", true, true},
               {"gpt-2", "a", false, false},
               {"qwen2", "\xF0\x9F\x99\x82", false, false},
               {"deepseek-llm", "a1 ", false, false},
               {"qwen2", "<|im_end|>", true, false},
               {"gpt-2", "<|<|im_start", true, false}};
  for (const Case& c : cases) {
    const Tokenizer t = byte_bpe(c.pre);
    uint64_t small = 0, big = 0;
    const size_t n = c.mega ? 256 << 10 : 64 << 10;
    const std::vector<int> a = t.encode(repeat(c.unit, n), false, false, c.special, &small);
    const std::vector<int> b = t.encode(repeat(c.unit, 4 * n), false, false, c.special, &big);
    ASSERT_FALSE(a.empty());
    EXPECT_LE((double)big / (double)small, 4.5) << c.pre << " '" << c.unit << "'";
  }
}

TEST(Linearity, SentencePieceWordPieceAndUnigramOnLongInputs) {
  std::vector<std::pair<std::string, Tokenizer>> toks;
  for (const char* name : {"llama-spm", "bert-bge"}) {
    std::string gguf;
    if (read_file(kVocabDir + "ggml-vocab-" + name + ".gguf", &gguf)) toks.emplace_back(name, vocab_tokenizer(gguf));
  }
  std::vector<std::string> pieces = {"<unk>", "\xE2\x96\x81"};
  for (char c = 'a'; c <= 'z'; c++) pieces.push_back(std::string(1, c)), pieces.push_back(std::string(2, c));
  std::vector<float> scores(pieces.size(), -2.0f);
  toks.emplace_back("unigram", Tokenizer::from_unigram(pieces, scores, {}, 0, true, true, {}));
  for (auto& [name, t] : toks)
    for (const char* shape : {"a", "ab", " ", "1", "\xE6\x97\xA5", "\xF0\x9F\x99\x82", "<s>", "a b "}) {
      uint64_t small = 0, big = 0;
      t.encode(repeat(shape, 64 << 10), false, false, true, &small);
      t.encode(repeat(shape, 256 << 10), false, false, true, &big);
      if (small == 0) continue;  // nothing to merge or look up (the special-token split is counted above)
      EXPECT_LE((double)big / (double)small, 4.5) << name << " shape '" << shape << "'";
    }
}

TEST(SpecialTokens, SplitAsLlamaCppDoesLongestFirst) {
  const Tokenizer t = byte_bpe("gpt-2");
  const int im_end = t.find("<|im_end|>"), im_end_x = t.find("<|im_end|>x"), open = t.find("<|");
  // "<|im_end|>x" (longer) claims before "<|im_end|>"; "<|" takes what is left.
  const std::vector<int> ids = t.encode("<|im_end|>x<|im_end|><|", false, false, true);
  EXPECT_EQ(ids, (std::vector<int>{im_end_x, im_end, open}));
  // Without special parsing the markers are text.
  EXPECT_EQ(t.encode("<|im_end|>", false, false, false).size(), 10u);
  // Occurrences of one token do not overlap: "<|<|" is two.
  EXPECT_EQ(t.encode("<|<|", false, false, true), (std::vector<int>{open, open}));
}

TEST(SpecialMatcher, FindsEveryOccurrenceOfOverlappingPatterns) {
  const SpecialMatcher m({"he", "she", "his", "hers", ""});
  const auto hits = m.find_all("ushers");
  // In order of their end: she@1, he@2 (both end at 4), hers@2 (ends at 6).
  EXPECT_EQ(hits, (std::vector<std::pair<int, size_t>>{{1, 1}, {0, 2}, {3, 2}}));
}

}  // namespace
