// RWKV World tokenization (tokenizer.ggml.model = rwkv) against its definition: tokens are Python
// bytes reprs, and the text is cut greedily into the longest token it starts with. The greedy cut
// is checked against a brute-force search over the whole vocabulary; llama.cpp itself is the
// reference in tests/js/pretokenizers_wllama.test.mjs (the pre-rwkv model).
#include <gtest/gtest.h>

#include <random>

#include "common.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "test_models.h"
#include "tokenizer/rwkv.h"
#include "tokenizer/tokenizer.h"

using namespace qkv;

namespace {

// The longest token text[pos..] starts with (the last of equal duplicates), or -1.
int brute_longest(const std::vector<std::string>& bytes, const std::string& text, size_t pos, size_t* len) {
  int best = -1;
  *len = 0;
  for (size_t id = 0; id < bytes.size(); id++) {
    const std::string& b = bytes[id];
    if (b.empty() || b.size() < *len || text.compare(pos, b.size(), b) != 0) continue;
    best = (int)id, *len = b.size();
  }
  return best;
}

}  // namespace

TEST(Rwkv, UnescapeReadsPythonBytesReprs) {
  EXPECT_EQ(rwkv_unescape("abc"), "abc");
  EXPECT_EQ(rwkv_unescape("\\n\\t\\r"), "\n\t\r");
  EXPECT_EQ(rwkv_unescape("\\x00\\xff\\x7f"), std::string("\x00\xff\x7f", 3));
  EXPECT_EQ(rwkv_unescape("\\\\"), "\\");
  EXPECT_EQ(rwkv_unescape("it\\'s"), "it's");
  EXPECT_EQ(rwkv_unescape("\\xe6\\x97\\xa5"), "\xe6\x97\xa5");
  EXPECT_EQ(rwkv_unescape("end\\"), "end");  // a lone trailing backslash stands for nothing
  // Every byte string survives its Python repr (the fixture writes what RWKV's converter writes).
  std::mt19937 rng(5);
  for (int i = 0; i < 2000; i++) {
    std::string b(rng() % 9, '\0');
    for (char& c : b) c = (char)(rng() % 256);
    if (i < 256) b = std::string(1, (char)i);
    ASSERT_EQ(rwkv_unescape(python_bytes_repr(b)), b) << python_bytes_repr(b);
  }
}

TEST(Rwkv, GreedyLongestMatchEqualsBruteForce) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; trial++) {
    // A small alphabet makes long shared prefixes and duplicates common.
    const std::string alphabet = trial % 2 ? "ab\n\\'" : "abc";
    std::vector<std::string> bytes, escaped;
    const bool all_bytes = trial % 3 != 0;  // else some bytes start no token: the unknown token
    if (all_bytes)
      for (char c : alphabet) bytes.push_back(std::string(1, c));
    for (int i = 0; i < 30; i++) {
      std::string t(1 + rng() % 5, 'a');
      for (char& c : t) c = alphabet[rng() % alphabet.size()];
      bytes.push_back(t);
    }
    bytes.push_back("<unk>");
    const int unk = (int)bytes.size() - 1;
    for (const std::string& b : bytes) escaped.push_back(python_bytes_repr(b));
    RwkvTrie trie(escaped);
    for (int k = 0; k < 20; k++) {
      std::string text(rng() % 40, 'a');
      for (char& c : text) c = (alphabet + "z")[rng() % (alphabet.size() + 1)];
      std::vector<int> got, want;
      trie.encode(text, unk, got);
      for (size_t pos = 0; pos < text.size();) {
        size_t len = 0;
        const int id = brute_longest(bytes, text, pos, &len);
        want.push_back(id >= 0 ? id : unk);
        pos += id >= 0 ? len : 1;
      }
      ASSERT_EQ(got, want) << "text " << text;
    }
  }
}

TEST(Rwkv, ByteWithoutTokenOrUnknownIsATypedError) {
  RwkvTrie trie({"a", "ab"});
  std::vector<int> ids;
  trie.encode("aab", -1, ids);
  EXPECT_EQ(ids, (std::vector<int>{0, 1}));
  try {
    trie.encode("a\x01", -1, ids);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::BadArgument);
    EXPECT_NE(std::string(e.what()).find("0x01"), std::string::npos) << e.what();
  }
}

TEST(Rwkv, GgufVocabularyLoadsAndRoundTrips) {
  TestModelSpec s;
  s.rwkv = true;
  s.layers = 1;
  const std::vector<uint8_t> file = write_test_model(s);
  const Tokenizer t = load_gguf_tokenizer(GgufFile::parse(std::make_shared<VectorBlob>(std::vector<uint8_t>(file))));
  EXPECT_STREQ(t.kind(), "rwkv");
  EXPECT_FALSE(t.add_bos());
  const std::string text = "Hello world! caf\xc3\xa9 \xf0\x9f\x99\x82\n\tit's \"quoted\" \\ back";
  const std::vector<int> plain = t.encode(text, true, true, false);
  std::string back;
  int prev = -1;
  for (int id : plain) back += t.decode(prev, id), prev = id;
  EXPECT_EQ(back, text);
  EXPECT_LT(plain.size(), text.size());  // merged tokens, not bytes
  // With special: true the control token is one id, and prints nothing.
  const std::vector<int> special = t.encode("x<|im_end|>", false, false, true);
  ASSERT_EQ(special.size(), 2u);
  EXPECT_EQ(special[1], t.find("<|im_end|>"));
  EXPECT_EQ(t.decode(special[0], special[1]), "");
}
