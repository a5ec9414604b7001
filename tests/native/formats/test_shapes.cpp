// Tensor shapes as llama.cpp reads them: trailing dimensions of 1 are the same tensor
// ([n, 1] = [n], [d, V, 1] = [d, V]). Each GGUF loader (decoder, encoder, encoder-decoder,
// quantize) gets a model whose tensors are stored with such dimensions and must compute exactly
// what the plainly stored model computes.
#include <gtest/gtest.h>

#include <functional>

#include "common.h"
#include "formats/gguf.h"
#include "formats/gguf_encdec.h"
#include "formats/gguf_writer.h"
#include "formats/loader.h"
#include "formats/quantize.h"
#include "model/encdec.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#include "test_models.h"

using namespace qkv;

namespace {

std::shared_ptr<const Blob> blob_of(std::vector<uint8_t> v) { return std::make_shared<VectorBlob>(std::move(v)); }

// The same file with each tensor's dims (and optionally its data: a prefix) rewritten.
using Reshape = std::function<std::vector<uint64_t>(const GgufTensorInfo&)>;
std::vector<uint8_t> reshaped(const std::vector<uint8_t>& bytes, const Reshape& dims_of) {
  const GgufFile g = GgufFile::parse(blob_of(bytes));
  GgufWriter w;
  for (const auto& [k, v] : g.metadata())
    if (k != "general.alignment") w.add_value(k, v);
  for (const GgufTensorInfo& t : g.tensors()) {
    EXPECT_EQ(t.type, 0u) << t.name << ": the test models are F32";
    w.add_tensor_f32(t.name, dims_of(t), reinterpret_cast<const float*>(g.tensor_data(t)));
  }
  return w.finish();
}

// Vectors as [n, 1], matrices as [cols, rows, 1].
std::vector<uint64_t> with_trailing_ones(const GgufTensorInfo& t) {
  std::vector<uint64_t> d = t.dims;
  d.push_back(1);
  return d;
}

TEST(TensorShapes, DecoderLoaderTakesTrailingOnes) {
  TestModelSpec s;
  s.arch = "qwen2";  // has biases (1-D) besides the norms
  const std::vector<uint8_t> plain = write_test_model(s);
  const std::vector<uint8_t> odd = reshaped(plain, with_trailing_ones);
  ASSERT_NE(GgufFile::parse(blob_of(odd)).find_tensor("output_norm.weight")->dims.size(), 1u);
  LoadedModel a = load_model(blob_of(plain)), b = load_model(blob_of(odd));
  ASSERT_EQ(a.config.vocab_size, b.config.vocab_size);
  const std::vector<int> ids = {1, 5, 9, 2, 40};
  Transformer ta(a, 32, nullptr), tb(b, 32, nullptr);
  const float* la = ta.forward(ids.data(), (int)ids.size(), 0);
  const float* lb = tb.forward(ids.data(), (int)ids.size(), 0);
  for (int i = 0; i < a.config.vocab_size; i++) ASSERT_EQ(la[i], lb[i]) << i;
}

TEST(TensorShapes, BertLoaderTakesOneTokenTypeRowStoredAsAColumn) {
  TestModelSpec s;
  s.arch = "bert";
  s.kv_heads = s.heads;
  const std::vector<uint8_t> plain = write_test_model(s);
  // The file: a single token-type row stored as [dim, 1], vectors as [n, 1].
  const std::vector<uint8_t> odd = reshaped(plain, [](const GgufTensorInfo& t) {
    if (t.name == "token_types.weight") return std::vector<uint64_t>{t.dims[0], 1};  // row 0 only
    return t.rank() == 1 ? with_trailing_ones(t) : t.dims;
  });
  LoadedModel a = load_model(blob_of(plain)), b = load_model(blob_of(odd));
  EXPECT_EQ(a.config.n_token_types, 2);
  EXPECT_EQ(b.config.n_token_types, 1);
  const std::vector<int> ids = {101, 7, 8, 9, 102}, types(ids.size(), 0);
  const int lens[1] = {(int)ids.size()};
  Transformer ta(a, 32, nullptr), tb(b, 32, nullptr);
  const float* ea = ta.encode(ids.data(), types.data(), lens, 1);
  const float* eb = tb.encode(ids.data(), types.data(), lens, 1);
  for (size_t i = 0; i < ids.size() * (size_t)a.config.dim; i++) ASSERT_EQ(ea[i], eb[i]) << i;
}

TEST(TensorShapes, EncoderDecoderLoaderTakesTrailingOnes) {
  std::vector<std::string> pieces = {"<pad>", "</s>", "<unk>"};
  std::vector<float> scores = {0, 0, 0};
  for (char c = 'a'; c <= 'z'; c++) pieces.push_back(std::string("\xE2\x96\x81") + c), scores.push_back(-1);
  const Tokenizer spm = Tokenizer::from_spm_pieces(pieces, scores, {}, 1, 1, 2, true);
  TestModelSpec s;
  s.arch = "t5";
  s.spm = &spm;
  s.heads = 2;
  s.layers = 1;
  const std::vector<uint8_t> plain = write_test_encdec_model(s);
  EncDecModelData a = load_encdec_model(blob_of(plain)),
                  b = load_encdec_model(blob_of(reshaped(plain, with_trailing_ones)));
  EncoderDecoder ma(std::move(a), 16, nullptr), mb(std::move(b), 16, nullptr);
  const int src[4] = {5, 9, 12, 1}, tgt[1] = {0};
  ma.encode(src, 4);
  mb.encode(src, 4);
  const float* la = ma.decode(tgt, 1, 0);
  const float* lb = mb.decode(tgt, 1, 0);
  for (int i = 0; i < (int)pieces.size(); i++) ASSERT_EQ(la[i], lb[i]) << i;
}

TEST(TensorShapes, QuantizeKeepsVectorsStoredWithTrailingOnesInF32) {
  TestModelSpec s;
  const std::vector<uint8_t> odd = reshaped(write_test_model(s), with_trailing_ones);
  const QuantizeResult q = quantize_gguf(GgufFile::parse(blob_of(odd)), QType::Q8_0);
  const GgufFile out = GgufFile::parse(blob_of(q.bytes));
  EXPECT_EQ(out.find_tensor("output_norm.weight")->type, 0u) << "a [n, 1] norm is a vector: it stays F32";
  EXPECT_NO_THROW(load_model(blob_of(q.bytes)));
}

}  // namespace
