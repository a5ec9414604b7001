// Cohere 2 (Command R7B) as a row of the options table: its local layers (sliding window, RoPE)
// and global layers (no RoPE) from llama.cpp's pattern, Command-R's parallel blocks, the keys it
// requires; each option changes the logits of the test model, so the llama.cpp comparison
// (tests/js/wllama.test.mjs, cohere2) checks each of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common.h"
#include "formats/gguf_writer.h"
#include "formats/loader.h"
#include "model/transformer.h"
#include "test_models.h"

using namespace qkv;

namespace {

std::shared_ptr<const Blob> blob_of(std::vector<uint8_t> v) { return std::make_shared<VectorBlob>(std::move(v)); }

std::vector<float> logits_of(const LoadedModel& m, const std::vector<int>& ids, bool batched) {
  Transformer t(m, 64, nullptr);
  const float* l = nullptr;
  if (batched) l = t.forward(ids.data(), (int)ids.size(), 0);
  else
    for (size_t i = 0; i < ids.size(); i++) l = t.forward(&ids[i], 1, (int)i);
  return std::vector<float>(l, l + m.config.vocab_size);
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); i++) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

TEST(Cohere2, LocalAndGlobalLayersAsLlamaCppReadsThem) {
  TestModelSpec s;
  s.arch = "cohere2";
  s.merges = 60;
  s.layers = 5;
  const LoadedModel m = load_model(blob_of(write_test_model(s)));
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.layer_window, (std::vector<int>{8, 8, 8, 0, 8})) << "three local layers of each four";
  EXPECT_EQ(c.layer_rope, (std::vector<uint8_t>{1, 1, 1, 0, 1})) << "global layers without RoPE";
  EXPECT_TRUE(c.parallel_ffn && c.tied_classifier);
  EXPECT_FLOAT_EQ(c.logit_scale, 1.6f);
  EXPECT_EQ(c.norm, NormKind::LayerNorm);
  std::vector<int> ids;
  for (int i = 0; i < 24; i++) ids.push_back(3 + (i * 29) % (c.vocab_size - 3));  // longer than the window
  const std::vector<float> base = logits_of(m, ids, true);
  EXPECT_LT(max_diff(base, logits_of(m, ids, false)), 1e-4f) << "batched prefill and one-token decode agree";
  LoadedModel a = m;
  a.config.layer_window.assign(c.n_layers, 0);
  EXPECT_GT(max_diff(base, logits_of(a, ids, true)), 0.05f) << "sliding windows";
  LoadedModel b = m;
  b.config.layer_rope.assign(c.n_layers, 1);
  EXPECT_GT(max_diff(base, logits_of(b, ids, true)), 0.05f) << "global layers without RoPE";
}

// llama.cpp's Cohere 2 graph rotates the local layers with rope.freq_base, whatever
// rope.freq_base_swa says: a file with that key runs as one without it.
TEST(Cohere2, LocalLayersTakeTheModelsRopeBase) {
  TestModelSpec s;
  s.arch = "cohere2";
  s.merges = 60;
  s.layers = 4;
  const LoadedModel plain = load_model(blob_of(write_test_model(s)));
  s.rope_freq_base_swa = 50.0f;
  const LoadedModel swa = load_model(blob_of(write_test_model(s)));
  std::vector<int> ids;
  for (int i = 0; i < 16; i++) ids.push_back(3 + (i * 31) % (plain.config.vocab_size - 3));
  EXPECT_EQ(swa.config.rope_theta_local, 0.0f);
  EXPECT_EQ(max_diff(logits_of(plain, ids, true), logits_of(swa, ids, true)), 0.0f);
}

TEST(BadInputGguf, Cohere2NamesWhatIsMissing) {
  TestModelSpec s;
  s.arch = "cohere2";
  s.merges = 20;
  std::vector<uint8_t> v = write_test_model(s);
  for (const std::string k : {"cohere2.attention.sliding_window", "cohere2.logit_scale"}) {
    std::vector<uint8_t> bad = v;
    auto it = std::search(bad.begin(), bad.end(), k.begin(), k.end());
    ASSERT_NE(it, bad.end());
    *(it + k.size() - 1) = 'x';
    try {
      load_model(blob_of(bad));
      ADD_FAILURE() << "loaded without " << k;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::BadModel);
      EXPECT_NE(std::string(e.what()).find("key " + k + " is missing"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
