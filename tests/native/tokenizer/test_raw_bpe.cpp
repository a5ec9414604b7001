// SentencePiece-style BPE over raw UTF-8 (tokenizer.ggml.model = gemma4, and the pre-tokenizers
// sarvam-moe and whitespace): spaces become U+2581 before the merges, merges run over characters,
// and what no token spells becomes <0xXX> byte tokens. llama.cpp is the reference for the ids in
// tests/js/pretokenizers_wllama.test.mjs (pre-gemma4, pre-sarvam-moe, pre-whitespace); here, the
// properties that follow from the definition.
#include <gtest/gtest.h>

#include <algorithm>

#include "common.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "test_models.h"
#include "tokenizer/tokenizer.h"

using namespace qkv;

namespace {

Tokenizer load(const TestModelSpec& s) {
  return load_gguf_tokenizer(GgufFile::parse(std::make_shared<VectorBlob>(write_test_model(s))));
}

std::string decode_all(const Tokenizer& t, const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); i++) s += t.decode(i ? ids[i - 1] : -1, ids[i]);
  return s;
}

}  // namespace

TEST(RawBpe, Gemma4VocabularyRoundTripsWithSpacesAsU2581AndByteFallback) {
  TestModelSpec s;
  s.pre = "gemma4";
  s.layers = 1;
  const Tokenizer t = load(s);
  EXPECT_STREQ(t.kind(), "bpe");
  EXPECT_TRUE(t.add_bos()) << "llama.cpp always adds BOS for Gemma 4's tokenizer";
  // "\xe2\x82\xac" (the euro sign) and the party popper are not in the corpus: byte tokens.
  const std::string text = "the cat sat on the mat.\n\nHello  world \xe2\x82\xac \xf0\x9f\x8e\x89\n";
  const std::vector<int> ids = t.encode(text, false, false);
  EXPECT_EQ(decode_all(t, ids), text);
  int bytes = 0, spaced = 0;
  for (int id : ids) {
    if (t.byte_value(id) >= 0) bytes++;
    if (t.piece(id).find("\xe2\x96\x81") != std::string::npos) spaced++;
    EXPECT_EQ(t.piece(id).find(' '), std::string::npos) << "a token with a raw space: " << t.piece(id);
  }
  EXPECT_EQ(bytes, 3 + 4);
  EXPECT_GT(spaced, 3);
  size_t longest = 0;  // merged tokens, not characters: some span a space and a word
  for (int id : ids) longest = std::max(longest, utf8_symbols(t.piece(id)).size());
  EXPECT_GE(longest, 4u);
  // A whole newline run that is a token is one id.
  const int nn = t.find("\n\n");
  if (nn >= 0) EXPECT_EQ(t.encode("\n\n", false, false), std::vector<int>{nn});
}

TEST(RawBpe, WhitespaceKindKeepsSpacesAndSplitsAtThem) {
  TestModelSpec s;
  s.pre = "whitespace";
  s.layers = 1;
  const Tokenizer t = load(s);
  const std::string text = "the cat  sat\ton the mat";
  const std::vector<int> ids = t.encode(text, false, false);
  for (int id : ids) {
    const std::string& p = t.piece(id);
    const bool space = p.find_first_of(" \t") != std::string::npos;
    EXPECT_TRUE(!space || p.find_first_not_of(" \t") == std::string::npos) << "a token across a space: " << p;
  }
}
