// Images in chat: the mmproj's 'mlp' projector against a float64 computation from its definition
// (linear, tanh GELU, linear over the tower's second-to-last layer), the decoder's embedding-row
// input against token ids, the session's prefix rule for image rows, and the loader's refusals.
// The whole path against llama.cpp's mtmd: tests/js/vlm_wllama.test.mjs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/session.h"
#include "engine/vision_chat.h"
#include "formats/gguf_clip.h"
#include "formats/loader.h"
#include "kernels/quant.h"
#include "test_models.h"

using namespace qkv;

namespace {

std::shared_ptr<const Blob> blob_of(std::vector<uint8_t> v) { return std::make_shared<VectorBlob>(std::move(v)); }

TestClipSpec llava_spec(int layers, int out) {
  TestClipSpec s;
  s.projector = out > 0 ? "mlp" : "";
  s.class_token = false;
  s.use_gelu = true;
  s.post_ln = false;
  s.layers = layers;
  s.mlp_hidden = out > 0 ? 24 : 0;
  s.mlp_out = out;
  s.seed = 31;
  return s;
}

std::vector<uint8_t> random_rgba(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v((size_t)w * h * 4);
  for (uint8_t& b : v) b = (uint8_t)(rng() & 255);
  return v;
}

template <typename F>
void expect_error(ErrorCode code, F&& f, std::vector<std::string> words) {
  try {
    f();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(VisionChat, MlpProjectorReadsTheSecondToLastLayer) {
  // The tensors of blocks 0 and 1 are written before block 2's, so a 2-layer file holds the
  // same first two layers as the 3-layer one: its states are what the projector must read.
  const std::vector<uint8_t> three = write_test_clip_model(llava_spec(3, 40));
  auto pool = std::make_shared<ThreadPool>(2);
  ImageTokenizer images(blob_of(three), 40, pool);
  EXPECT_EQ(images.vision_config().n_layers, 2);
  ASSERT_EQ(images.tokens_per_image(), 16);
  const int side = images.image_size();
  const std::vector<uint8_t> rgba = random_rgba(side, side, 3);
  const std::vector<float> got = images.encode(rgba.data(), rgba.size(), side, side);
  ASSERT_EQ(got.size(), (size_t)16 * 40);

  ImageModelData two = load_image_model(blob_of(write_test_clip_model(llava_spec(2, 0))));
  Transformer tower(std::move(two.model), 0, pool);
  two.preprocess.mode = ResizeMode::Squash;
  const std::vector<float> pixels = preprocess_image(rgba.data(), rgba.size(), side, side, two.preprocess);
  const float* h = tower.encode_image(pixels.data(), side, side);
  const int vd = tower.config().dim;
  VisionLanguageData d = load_vision_language(blob_of(three), 40);
  const VisionProjector& p = d.projector;
  const int hid = (int)p.w0.rows;
  std::vector<float> w0((size_t)hid * vd), w2((size_t)40 * hid);
  for (int r = 0; r < hid; r++) dequantize_row_ref(p.w0.type, p.w0.row(r), &w0[(size_t)r * vd], vd);
  for (int r = 0; r < 40; r++) dequantize_row_ref(p.w2.type, p.w2.row(r), &w2[(size_t)r * hid], hid);
  double worst = 0.0;
  for (int t = 0; t < 16; t++) {
    std::vector<double> mid(hid);
    for (int j = 0; j < hid; j++) {
      double s = p.b0[j];
      for (int k = 0; k < vd; k++) s += (double)w0[(size_t)j * vd + k] * h[(size_t)t * vd + k];
      mid[j] = 0.5 * s * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (s + 0.044715 * s * s * s)));
    }
    for (int o = 0; o < 40; o++) {
      double s = p.b2[o];
      for (int j = 0; j < hid; j++) s += (double)w2[(size_t)o * hid + j] * mid[j];
      worst = std::max(worst, std::fabs(s - got[(size_t)t * 40 + o]));
    }
  }
  EXPECT_LT(worst, 1e-4);
}

TEST(VisionChat, NonSquareImagesArePaddedToASquare) {
  auto pool = std::make_shared<ThreadPool>(1);
  ImageTokenizer images(blob_of(write_test_clip_model(llava_spec(3, 40))), 40, pool);
  // A 16 x 8 image centred on a 16 x 16 square of LLaVA's background colour.
  const std::vector<uint8_t> wide = random_rgba(16, 8, 4);
  std::vector<uint8_t> square((size_t)16 * 16 * 4);
  for (size_t i = 0; i < square.size(); i += 4) {
    square[i] = 122;
    square[i + 1] = 116;
    square[i + 2] = 104;
    square[i + 3] = 255;
  }
  std::copy(wide.begin(), wide.end(), square.begin() + (size_t)4 * 16 * 4);
  EXPECT_EQ(images.encode(wide.data(), wide.size(), 16, 8), images.encode(square.data(), square.size(), 16, 16));
  expect_error(ErrorCode::BadArgument, [&] { images.encode(wide.data(), 100, 16, 8); }, {"512"});
  expect_error(ErrorCode::BadArgument, [&] { images.encode(wide.data(), wide.size(), 0, 8); }, {"0x8"});
}

TEST(VisionChat, EmbeddingRowsEnterAsTokenEmbeddings) {
  TestModelSpec s;
  s.seed = 5;
  LoadedModel m = load_model(blob_of(write_test_model(s)));
  const ModelConfig& c = m.config;
  auto pool = std::make_shared<ThreadPool>(2);
  const std::vector<int> ids = {1, 17, 42, 99, 7, 250, 3, 64};
  Transformer a(m, 0, pool), b(m, 0, pool);
  a.forward(ids.data(), (int)ids.size(), 0, true);
  // Positions 2..4 as rows: the token embeddings themselves, so the logits must not move.
  std::vector<int> mixed = ids;
  std::vector<float> rows;
  for (int i = 2; i <= 4; i++) {
    std::vector<float> r(c.dim);
    dequantize_row_ref(m.weights.tok_embed.type, m.weights.tok_embed.row(ids[i]), r.data(), c.dim);
    rows.insert(rows.end(), r.begin(), r.end());
    mixed[i] = Transformer::kEmbeddingRow;
  }
  b.forward(mixed.data(), (int)mixed.size(), 0, true, rows.data());
  for (size_t i = 0; i < ids.size() * c.vocab_size; i++) ASSERT_EQ(a.logits()[i], b.logits()[i]) << i;
  // Without rows, a -1 id is a token outside the vocabulary.
  expect_error(ErrorCode::BadArgument, [&] { b.forward(mixed.data(), (int)mixed.size(), 0); }, {"-1"});
}

TEST(VisionChat, SessionPrefixStopsAtImageRows) {
  TestModelSpec s;
  s.seed = 6;
  LoadedModel m = load_model(blob_of(write_test_model(s)));
  const int dim = m.config.dim;
  auto pool = std::make_shared<ThreadPool>(1);
  Session sess(m, 0, pool);
  const std::vector<int> ids = {1, 20, -1, -1, 30, 31};
  std::vector<float> r1(2 * dim), r2(2 * dim);
  for (int i = 0; i < 2 * dim; i++) {
    r1[i] = std::sin(0.1f * i);
    r2[i] = std::cos(0.3f * i);
  }
  EXPECT_EQ(sess.prefill(ids, r1.data(), r1.size()), 6);
  const std::vector<float> l1(sess.logits(), sess.logits() + m.config.vocab_size);
  // The same ids with another image: recomputed from the first image row on, not reused.
  EXPECT_EQ(sess.prefill(ids, r2.data(), r2.size()), 4);
  const std::vector<float> l2(sess.logits(), sess.logits() + m.config.vocab_size);
  EXPECT_NE(l1, l2);
  EXPECT_EQ(sess.prefill(ids, r1.data(), r1.size()), 4);
  EXPECT_EQ(std::vector<float>(sess.logits(), sess.logits() + m.config.vocab_size), l1);
  expect_error(ErrorCode::BadArgument, [&] { sess.prefill(ids, r1.data(), dim); }, {"2 image positions"});
}

TEST(VisionChat, LoaderRefusals) {
  expect_error(ErrorCode::BadModel, [] { load_vision_language(blob_of(write_test_clip_model(llava_spec(3, 48))), 64); },
               {"48", "64"});
  TestClipSpec other = llava_spec(3, 64);
  other.projector = "gemma3";
  expect_error(ErrorCode::Unsupported, [&] { load_vision_language(blob_of(write_test_clip_model(other)), 64); },
               {"gemma3"});
  expect_error(ErrorCode::Unsupported,
               [] { load_vision_language(blob_of(write_test_clip_model(llava_spec(3, 0))), 64); }, {"projector"});
  expect_error(ErrorCode::BadModel, [] { load_vision_language(blob_of(write_test_clip_model(llava_spec(1, 64))), 64); },
               {"second-to-last"});
  TestClipSpec no_mm = llava_spec(3, 64);
  no_mm.mlp_hidden = 0;
  no_mm.projector = "mlp";
  expect_error(ErrorCode::BadModel, [&] { load_vision_language(blob_of(write_test_clip_model(no_mm)), 64); },
               {"mm.0.weight"});
  TestModelSpec text;
  expect_error(ErrorCode::BadModel, [&] { load_vision_language(blob_of(write_test_model(text)), 64); },
               {"not an mmproj"});
  expect_error(ErrorCode::BadModel, [] { load_vision_language(blob_of({}), 64); }, {"empty"});
  std::vector<uint8_t> cut = write_test_clip_model(llava_spec(3, 64));
  cut.resize(cut.size() / 2);
  EXPECT_THROW(load_vision_language(blob_of(cut), 64), Error);
}
