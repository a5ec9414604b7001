// Bad tokenizers: vocabulary sizes that do not match the model, truncated or corrupt files,
// impossible piece lengths, unencodable bytes and bad ids: each a qkv::Error naming the problem.
#include <gtest/gtest.h>

#include "bad_input.h"

using namespace qkv_test;

namespace {

// ---------------------------------------------------------------------------------------------
// Tokenizers: vocabulary mismatches and corruption
// ---------------------------------------------------------------------------------------------

TEST(BadInputTokenizer, MorePiecesThanTheModel) {
  EXPECT_QKV_ERROR(load_tok(tiny_tokenizer(33), 32), ErrorCode::BadTokenizer, "33 pieces", "vocabulary has 32",
                   "do not belong together");
  EXPECT_QKV_ERROR(load_tok(tiny_tokenizer(64), 32), ErrorCode::BadTokenizer, "64 pieces", "vocabulary has 32");
}

TEST(BadInputTokenizer, FewerPiecesThanTheModel) {
  EXPECT_QKV_ERROR(load_tok(tiny_tokenizer(31), 32), ErrorCode::BadTokenizer, "31 pieces", "vocabulary has 32",
                   "do not belong together");
  EXPECT_QKV_ERROR(load_tok(make_tokenizer({}), 32), ErrorCode::BadTokenizer, "0 pieces", "vocabulary has 32");
}

TEST(BadInputTokenizer, RealFixturesMismatch) {
  const std::string big = shared_model("llama2-tokenizer.bin"), small = shared_model("aidreams-tok512.bin");
  REQUIRE_FIXTURE(big);
  REQUIRE_FIXTURE(small);
  auto b = qkv::map_file(big);
  auto s = qkv::map_file(small);
  // 32000-piece Llama 2 tokenizer for a 512-token model, and the other way round.
  EXPECT_QKV_ERROR(qkv::Tokenizer::from_llama2c(b->data(), b->size(), 512), ErrorCode::BadTokenizer, "32000 pieces",
                   "vocabulary has 512");
  EXPECT_QKV_ERROR(qkv::Tokenizer::from_llama2c(s->data(), s->size(), 32000), ErrorCode::BadTokenizer, "512 pieces",
                   "vocabulary has 32000");
}

TEST(BadInputTokenizer, GenerateRefusesMismatchedTokenizer) {
  qkv::Transformer tr(load(tiny_model()), 0, one_thread());
  qkv::Tokenizer tok = load_tok(tiny_tokenizer(40), 40);
  qkv::RunOptions ro;
  ro.prompt = "ab";
  EXPECT_QKV_ERROR(qkv::run_generate(tr, tok, ro, [](const std::string&) {}), ErrorCode::BadArgument, "vocabulary",
                   "40", "32");
}

TEST(BadInputTokenizer, TruncatedOrEmpty) {
  const std::vector<uint8_t> full = tiny_tokenizer();
  EXPECT_QKV_ERROR(load_tok({}, 32), ErrorCode::BadTokenizer, "truncated", "0 bytes");
  EXPECT_QKV_ERROR(load_tok(cut(full, 3), 32), ErrorCode::BadTokenizer, "truncated", "4-byte header");
  // Header only: no pieces at all.
  EXPECT_QKV_ERROR(load_tok(cut(full, 4), 32), ErrorCode::BadTokenizer, "0 pieces");
  // Inside the (score, len) record of piece 0, and in the middle of a later piece's bytes.
  EXPECT_QKV_ERROR(load_tok(cut(full, 9), 32), ErrorCode::BadTokenizer, "truncated inside piece 0");
  EXPECT_QKV_ERROR(load_tok(cut(full, 4 + 8 + 2), 32), ErrorCode::BadTokenizer, "piece 0", "past the end");
  EXPECT_QKV_ERROR(load_tok(cut(full, full.size() - 1), 32), ErrorCode::BadTokenizer, "piece 31", "past the end");
  EXPECT_QKV_ERROR(load_tok(full, 0), ErrorCode::BadTokenizer, "vocabulary size", "positive");
  EXPECT_QKV_ERROR(load_tok(full, -5), ErrorCode::BadTokenizer, "vocabulary size", "-5");
}

TEST(BadInputTokenizer, ImpossibleMaxTokenLength) {
  for (int32_t mtl : {0, -1, 65537, 1 << 30, INT32_MAX, INT32_MIN}) {
    SCOPED_TRACE(mtl);
    EXPECT_QKV_ERROR(load_tok(make_tokenizer(tiny_pieces(32), mtl), 32), ErrorCode::BadTokenizer, "max_token_length",
                     std::to_string(mtl).c_str());
  }
}

TEST(BadInputTokenizer, BadPieceLengths) {
  {
    std::vector<Piece> p = tiny_pieces(32);
    p[5].len = -1;
    EXPECT_QKV_ERROR(load_tok(make_tokenizer(p), 32), ErrorCode::BadTokenizer, "piece 5", "length -1");
  }
  {
    std::vector<Piece> p = tiny_pieces(32);
    p[7].len = INT32_MIN;
    EXPECT_QKV_ERROR(load_tok(make_tokenizer(p), 32), ErrorCode::BadTokenizer, "piece 7", "-2147483648");
  }
  {  // longer than max_token_length (8), with the bytes actually present
    std::vector<Piece> p = tiny_pieces(32);
    p[9].bytes = "abcdefghijk";
    p[9].len = 11;
    EXPECT_QKV_ERROR(load_tok(make_tokenizer(p), 32), ErrorCode::BadTokenizer, "piece 9", "length 11",
                     "max_token_length is 8");
  }
  {  // the last piece claims more bytes than the file has left
    std::vector<Piece> p = tiny_pieces(32);
    p[31].len = 8;  // real bytes: a few
    EXPECT_QKV_ERROR(load_tok(make_tokenizer(p), 32), ErrorCode::BadTokenizer, "piece 31", "past the end");
  }
  {  // a huge length with a huge max_token_length: still bounded by the file
    std::vector<Piece> p = tiny_pieces(32);
    p[3].len = 65536;
    EXPECT_QKV_ERROR(load_tok(make_tokenizer(p, 65536), 32), ErrorCode::BadTokenizer, "piece 3");
  }
}

TEST(BadInputTokenizer, UnencodableBytesAndBadIds) {
  qkv::Tokenizer tok = load_tok(tiny_tokenizer(), 32);
  // No byte-fallback pieces in a 32-piece vocabulary: a character it lacks cannot be encoded.
  EXPECT_QKV_ERROR(tok.encode("Z", true, false), ErrorCode::BadArgument, "cannot encode byte");
  EXPECT_QKV_ERROR(tok.encode("\xc3\xa9", true, false), ErrorCode::BadArgument, "cannot encode byte");
  EXPECT_QKV_ERROR(tok.decode(1, -1), ErrorCode::BadArgument, "token id -1", "outside the vocabulary");
  EXPECT_QKV_ERROR(tok.decode(1, 32), ErrorCode::BadArgument, "token id 32", "0..31");
}

// Arbitrary bytes as a prompt (invalid UTF-8, NUL, lone continuation bytes): a tokenizer with
// byte fallback encodes every one of them, and decoding gives the same bytes back.
TEST(BadInputTokenizer, ArbitraryBytesRoundTrip) {
  const std::string tp = shared_model("aidreams-tok512.bin");
  REQUIRE_FIXTURE(tp);
  auto tb = qkv::map_file(tp);
  qkv::Tokenizer tok = qkv::Tokenizer::from_llama2c(tb->data(), tb->size(), 512);
  std::mt19937 rng(99);
  for (int it = 0; it < 500; it++) {
    std::string text(rng() % 48, '\0');
    for (char& ch : text) ch = (char)(rng() % 256);
    std::vector<int> ids = tok.encode(text, true, false);
    ASSERT_FALSE(ids.empty());
    std::string back;
    for (size_t i = 1; i < ids.size(); i++) {
      ASSERT_GE(ids[i], 0);
      ASSERT_LT(ids[i], 512);
      back += tok.decode(ids[i - 1], ids[i]);
    }
    ASSERT_EQ(back, text) << "iteration " << it;
  }
}

}  // namespace
