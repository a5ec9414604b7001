// GPU-resident loads' engine side: a GGUF read from a SparseBlob (the header and the vectors in
// memory, the matrices not) gives the same config and vectors as the whole file, marks every
// matrix not resident with the offset its bytes have in the file (fused tensors' row views
// included), refuses any CPU forward with Unsupported, and still checks every tensor against the
// file's length.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "common.h"
#include "formats/gguf.h"
#include "formats/loader.h"
#include "model/transformer.h"
#include "test_models.h"

using namespace qkv;

namespace {

// The file as a GPU-resident load holds it: the header, and the tensors gguf_keeps_in_heap keeps.
std::shared_ptr<SparseBlob> sparse_of(const std::vector<uint8_t>& file, uint64_t size) {
  auto whole = std::make_shared<VectorBlob>(file);
  const GgufFile g = GgufFile::parse(whole);
  auto head = std::make_shared<VectorBlob>(std::vector<uint8_t>(file.begin(), file.begin() + g.data_offset()));
  auto s = std::make_shared<SparseBlob>(head, size);
  for (const GgufTensorInfo& t : g.tensors()) {
    if (!gguf_keeps_in_heap(t)) continue;
    const uint64_t at = g.tensor_file_offset(t);
    s->add(at, std::make_shared<VectorBlob>(std::vector<uint8_t>(file.begin() + at, file.begin() + at + t.bytes)));
  }
  return s;
}

// Where a resident view lies in the file.
int64_t offset_in(const LoadedModel& whole, const Tensor& t) {
  return static_cast<const uint8_t*>(t.data) - whole.storage->data();
}

void expect_same(const LoadedModel& whole, const Tensor& a, const Tensor& b, const char* what) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(a.resident());
  EXPECT_FALSE(b.resident());
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  EXPECT_EQ(b.absent_offset, offset_in(whole, a));
  EXPECT_EQ(b.absent_part, 0u);
}

void expect_vec(const float* a, const float* b, int n, const char* what) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(a && b);
  EXPECT_NE(a, b);
  EXPECT_EQ(std::memcmp(a, b, n * sizeof(float)), 0);
}

TEST(SparseGguf, MatricesAreNotResidentAndVectorsAre) {
  for (const char* arch : {"llama", "phi3"}) {  // phi3: fused qkv and gate/up, views of row ranges
    SCOPED_TRACE(arch);
    TestModelSpec spec;
    spec.arch = arch;
    spec.tied = false;
    spec.rope_freq_factors = std::string(arch) == "llama";
    const std::vector<uint8_t> file = write_test_model(spec);
    const LoadedModel whole = load_model(std::make_shared<VectorBlob>(file));
    const LoadedModel part = load_model(sparse_of(file, file.size()));
    EXPECT_TRUE(whole.weights_resident);
    EXPECT_FALSE(part.weights_resident);
    EXPECT_EQ(part.config.describe(), whole.config.describe());
    const ModelWeights &w = whole.weights, &p = part.weights;
    expect_same(whole, w.tok_embed, p.tok_embed, "tok_embed");
    expect_same(whole, w.classifier, p.classifier, "classifier");
    const int d = whole.config.dim;
    expect_vec(w.final_norm, p.final_norm, d, "final_norm");
    if (spec.rope_freq_factors) expect_vec(w.rope_factors, p.rope_factors, whole.config.rot_dims() / 2, "rope_freqs");
    for (int l = 0; l < whole.config.n_layers; l++) {
      const LayerWeights &a = w.layers[l], &b = p.layers[l];
      expect_same(whole, a.wq, b.wq, "wq");
      expect_same(whole, a.wk, b.wk, "wk");
      expect_same(whole, a.wv, b.wv, "wv");
      expect_same(whole, a.wo, b.wo, "wo");
      expect_same(whole, a.w_up, b.w_up, "w_up");
      expect_same(whole, a.w_down, b.w_down, "w_down");
      if (a.w_gate) expect_same(whole, a.w_gate, b.w_gate, "w_gate");
      expect_vec(a.attn_norm, b.attn_norm, d, "attn_norm");
      expect_vec(a.ffn_norm, b.ffn_norm, d, "ffn_norm");
    }
  }
}

TEST(SparseGguf, CpuForwardIsRefused) {
  const std::vector<uint8_t> file = write_test_model(TestModelSpec());
  Transformer t(load_model(sparse_of(file, file.size())), 16, std::make_shared<ThreadPool>(1));
  const int ids[] = {1, 2, 3};
  try {
    t.forward(ids, 3, 0);
    FAIL() << "a forward over weights that are not in memory ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("weights: 'gpu'"), std::string::npos) << e.what();
  }
}

TEST(SparseGguf, TensorsAreCheckedAgainstTheFileLength) {
  const std::vector<uint8_t> file = write_test_model(TestModelSpec());
  try {
    load_model(sparse_of(file, file.size() - 64));  // the last tensor runs past the end
    FAIL() << "a file shorter than its tensors loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::BadModel);
    EXPECT_NE(std::string(e.what()).find("runs past the end of the file"), std::string::npos) << e.what();
  }
}

}  // namespace
