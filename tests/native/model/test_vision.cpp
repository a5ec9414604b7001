// Vision Transformers: the bicubic resamplers and preprocessing against their definitions, the
// mmproj (clip) loader's refusals, and the encoder's options each changing the embedding. The
// float64 reference of the whole forward lives in tests/js/vision.test.mjs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "bad_input.h"
#include "engine/embed_image.h"
#include "formats/gguf_clip.h"
#include "formats/gguf_writer.h"
#include "formats/loader.h"
#include "test_models.h"
#include "vision/image.h"

using namespace qkv;
using namespace qkv_test;

namespace {

std::shared_ptr<const Blob> blob_of(std::vector<uint8_t> v) { return std::make_shared<VectorBlob>(std::move(v)); }

std::unique_ptr<Transformer> load(const TestClipSpec& s, ImagePreprocess* pp = nullptr) {
  ImageModelData d = load_image_model(blob_of(write_test_clip_model(s)));
  if (pp) *pp = d.preprocess;
  return std::make_unique<Transformer>(std::move(d.model), 0, std::make_shared<ThreadPool>(1));
}

std::vector<uint8_t> random_rgba(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v((size_t)w * h * 4);
  for (uint8_t& b : v) b = (uint8_t)(rng() & 255);
  return v;
}

std::vector<float> embed(Transformer& m, const ImagePreprocess& p, int w, int h, ImageEmbedOptions o = {}) {
  const std::vector<uint8_t> img = random_rgba(w, h, 5);
  return embed_image(m, p, img.data(), img.size(), w, h, o);
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); i++) d = std::max(d, (double)std::fabs(a[i] - b[i]));
  return d;
}

// A GGUF rebuilt from `bytes` with one tensor left out and/or one key replaced (by an integer, or
// by `strings` when given).
std::vector<uint8_t> rewrite(const std::vector<uint8_t>& bytes, const std::string& drop, const std::string& key = "",
                             int64_t value = 0, const std::vector<std::string>* strings = nullptr) {
  const GgufFile g = GgufFile::parse(blob_of(bytes));
  GgufWriter w;
  for (const auto& [k, v] : g.metadata()) {
    if (k == "general.alignment") continue;  // the writer adds its own
    if (k == key && strings) w.add_strings(k, *strings);
    else if (k == key) w.add_u32(k, (uint32_t)value);
    else w.add_value(k, v);
  }
  for (const GgufTensorInfo& t : g.tensors()) {
    if (t.name == drop) continue;
    QType q;
    if (!qtype_of_ggml(t.type, &q)) ADD_FAILURE() << t.name;
    const int64_t cols = t.dims[0], rows = (int64_t)(t.elements() / cols);
    std::vector<float> f((size_t)t.elements());
    for (int64_t r = 0; r < rows; r++)
      dequantize_row_ref(q, g.tensor_data(t) + (size_t)r * qtype_row_bytes(q, (int)cols), f.data() + r * cols,
                         (int)cols);
    w.add_tensor(t.name, t.dims, f.data(), q);
  }
  return w.finish();
}

TEST(VisionResize, TorchBicubicKeepsSizeAndLinearRamps) {
  const int n = 6;
  std::vector<float> src(n * n), same(n * n);
  for (int i = 0; i < n * n; i++) src[i] = (float)(i * 7 % 11);
  resize_bicubic_torch(src.data(), 1, n, n, same.data(), n, n);
  for (int i = 0; i < n * n; i++) EXPECT_NEAR(same[i], src[i], 1e-5) << i;  // taps at integer offsets: 0, 1, 0, 0
  // Halving puts every output centre midway between two samples (t = 0.5): the four weights are
  // then symmetric, so a linear ramp maps to the midpoints wherever no tap is clamped.
  const int in = 12, out = 6;
  std::vector<float> ramp(in), half(out);
  for (int i = 0; i < in; i++) ramp[i] = 3.0f * i - 2.0f;
  resize_bicubic_torch(ramp.data(), 1, 1, in, half.data(), 1, out);
  for (int i = 1; i < out - 1; i++) EXPECT_NEAR(half[i], 3.0 * (2 * i + 0.5) - 2.0, 1e-5) << i;
  // At the edge the clamped tap repeats sample 0: (i = 0: source 0.5, taps -1, 0, 1, 2 -> 0, 0, 1, 2).
  const double a = -0.75, w0 = ((a * 1.5 - 5 * a) * 1.5 + 8 * a) * 1.5 - 4 * a;  // |x| = 1.5
  const double w1 = ((a + 2) * 0.5 - (a + 3)) * 0.25 + 1;                        // |x| = 0.5
  EXPECT_NEAR(half[0], (w0 + w1) * ramp[0] + w1 * ramp[1] + w0 * ramp[2], 1e-5);
}

TEST(VisionResize, PilBicubicIsNormalisedAndAntialiased) {
  std::vector<float> flat(40 * 30, 77.0f), out(7 * 9);
  resize_bicubic_pil(flat.data(), 1, 30, 40, out.data(), 7, 9);
  for (float v : out) EXPECT_NEAR(v, 77.0f, 1e-4);
  // Shrinking 2:1 a stripe pattern (0, 255, 0, 255, ...): the widened kernel averages it to the
  // middle grey away from the edges, where plain 4-tap bicubic would alias.
  std::vector<float> stripes(64), half(32);
  for (int i = 0; i < 64; i++) stripes[i] = i % 2 ? 255.0f : 0.0f;
  resize_bicubic_pil(stripes.data(), 1, 1, 64, half.data(), 1, 32);
  for (int i = 4; i < 28; i++) EXPECT_NEAR(half[i], 127.5f, 2.0f) << i;
}

TEST(VisionPreprocess, NormalisesCropsAndRefusesBadImages) {
  ImagePreprocess p;
  p.size = 8;
  p.mean[0] = 0.25f;
  p.std[0] = 0.5f;
  std::vector<uint8_t> img(20 * 10 * 4);
  for (size_t i = 0; i < img.size(); i += 4) img[i] = 51;  // red 0.2
  const std::vector<float> x = preprocess_image(img.data(), img.size(), 20, 10, p);
  ASSERT_EQ(x.size(), 3u * 8 * 8);
  EXPECT_NEAR(x[0], (0.2f - 0.25f) / 0.5f, 1e-5);
  EXPECT_NEAR(x[64], (0.0f - 0.5f) / 0.5f, 1e-5);
  // Crop: the centre of the resized 16 x 8 image; a left half black, right half white image
  // therefore shows both halves (squash too), a top/bottom one only its middle rows.
  std::vector<uint8_t> lr(20 * 10 * 4, 255);
  for (int y = 0; y < 10; y++)
    for (int x2 = 0; x2 < 10; x2++)
      for (int c = 0; c < 3; c++) lr[(y * 20 + x2) * 4 + c] = 0;
  const std::vector<float> c = preprocess_image(lr.data(), lr.size(), 20, 10, p);
  EXPECT_LT(c[0], c[7]);
  EXPECT_QKV_ERROR(preprocess_image(img.data(), img.size(), 0, 10, p), ErrorCode::BadArgument, "0x10");
  EXPECT_QKV_ERROR(preprocess_image(img.data(), img.size(), 100000, 1, p), ErrorCode::BadArgument, "16384");
  EXPECT_QKV_ERROR(preprocess_image(img.data(), 100, 20, 10, p), ErrorCode::BadArgument, "needs 800");
}

TEST(VisionPreprocess, DecodesPnmAndNamesCorruptFiles) {
  const std::string ppm = std::string("P6\n# a comment\n2 1\n255\n") + "\x01\x02\x03\x04\x05\x06";
  int w = 0, h = 0;
  const std::vector<uint8_t> rgba = decode_pnm((const uint8_t*)ppm.data(), ppm.size(), &w, &h);
  EXPECT_EQ(w, 2);
  EXPECT_EQ(h, 1);
  EXPECT_EQ(rgba, (std::vector<uint8_t>{1, 2, 3, 255, 4, 5, 6, 255}));
  const std::string pgm = std::string("P5 1 1 255 ") + "\x09";
  EXPECT_EQ(decode_pnm((const uint8_t*)pgm.data(), pgm.size(), &w, &h), (std::vector<uint8_t>{9, 9, 9, 255}));
  auto bad = [&](const std::string& s) { return decode_pnm((const uint8_t*)s.data(), s.size(), &w, &h); };
  EXPECT_QKV_ERROR(bad("P6\n2 1\n255\n\x01\x02"), ErrorCode::BadArgument, "truncated");
  EXPECT_QKV_ERROR(bad("P6\n2 1\n65535\n"), ErrorCode::BadArgument, "maxval");
  EXPECT_QKV_ERROR(bad("P6\n0 1\n255\n"), ErrorCode::BadArgument, "size");
  EXPECT_QKV_ERROR(bad("P6\n99999999999 1\n255\n"), ErrorCode::BadArgument, "size");
  EXPECT_QKV_ERROR(bad("\x89PNG\r\n"), ErrorCode::BadArgument, "not a binary PPM");
  EXPECT_QKV_ERROR(bad("P6\n2"), ErrorCode::BadArgument, "header");
}

TEST(VisionModel, LoadsMmprojAndEmbeds) {
  ImagePreprocess p;
  TestClipSpec s;
  auto m = load(s, &p);
  EXPECT_TRUE(m->config().is_vision());
  EXPECT_EQ(m->config().ffn, FfnKind::QuickGELU);
  EXPECT_EQ(m->config().pooling, PoolKind::Cls);
  EXPECT_EQ(p.size, 16);
  EXPECT_EQ(p.mode, ResizeMode::Crop);
  EXPECT_NEAR(p.std[2], 0.27577711f, 1e-7);
  const std::vector<float> e = embed(*m, p, 23, 17);
  ASSERT_EQ(e.size(), 32u);
  double ss = 0;
  for (float v : e) ss += (double)v * v;
  EXPECT_NEAR(ss, 1.0, 1e-5);
  // Not an image encoder: tokens are refused, and so is forward().
  const int ids[1] = {0}, lens[1] = {1};
  EXPECT_QKV_ERROR(m->encode(ids, nullptr, lens, 1), ErrorCode::Unsupported, "image encoder");
  EXPECT_QKV_ERROR(m->forward(ids, 1, 0), ErrorCode::Unsupported);
}

TEST(VisionModel, EachOptionChangesTheEmbedding) {
  ImagePreprocess p;
  TestClipSpec s;
  auto base = load(s, &p);
  const std::vector<float> e0 = embed(*base, p, 16, 16, {PoolKind::None, false});
  ImageEmbedOptions mean;
  mean.pooling = PoolKind::Mean;
  mean.normalize = false;
  EXPECT_GT(max_diff(e0, embed(*base, p, 16, 16, mean)), 1e-3);  // pooling
  TestClipSpec g = s;
  g.use_gelu = true;
  EXPECT_GT(max_diff(e0, embed(*load(g), p, 16, 16, {PoolKind::None, false})), 1e-4);  // GELU vs quick GELU
  TestClipSpec nopre = s;
  nopre.pre_ln = false;
  EXPECT_GT(max_diff(e0, embed(*load(nopre), p, 16, 16, {PoolKind::None, false})), 1e-3);  // pre-norm
  ImagePreprocess squash = p;
  squash.mode = ResizeMode::Squash;
  EXPECT_GT(max_diff(embed(*base, p, 24, 16), embed(*base, squash, 24, 16)), 1e-3);  // crop vs squash
  ImagePreprocess bigger = p;
  bigger.size = 24;  // a 6 x 6 grid: positions interpolated from the trained 4 x 4
  EXPECT_EQ(embed(*base, bigger, 16, 16).size(), 32u);
  TestClipSpec proj = s;
  proj.projection = 10;
  auto pm = load(proj);
  EXPECT_EQ(embed(*pm, p, 16, 16).size(), 10u);
  ImageEmbedOptions raw;
  raw.project = false;
  EXPECT_EQ(embed(*pm, p, 16, 16, raw).size(), 32u);
}

TEST(VisionModel, LegacyFfnNamesReadByShape) {
  ImagePreprocess p;
  TestClipSpec s;
  s.hidden = 48;
  TestClipSpec legacy = s;
  legacy.legacy_ffn_names = true;  // same random draws, the up/down names swapped
  auto plain = load(s, &p), swapped = load(legacy);
  const std::vector<float> a = embed(*plain, p, 16, 16), b = embed(*swapped, p, 16, 16);
  EXPECT_EQ(max_diff(a, b), 0.0);
}

TEST(VisionModel, CapturesAttentionWithoutChangingTheEmbedding) {
  ImagePreprocess p;
  auto m = load(TestClipSpec{}, &p);
  const std::vector<float> plain = embed(*m, p, 16, 16);
  EXPECT_TRUE(m->attention().empty());
  m->set_capture_attention(true);
  const std::vector<float> seen = embed(*m, p, 16, 16);
  EXPECT_EQ(max_diff(plain, seen), 0.0);
  const int rows = 17, L = m->config().n_layers, H = m->config().n_heads;
  ASSERT_EQ(m->attention().size(), (size_t)L * H * rows * rows);
  double lo = 1e9, hi = 0;
  for (int r = 0; r < L * H * rows; r++) {
    double sum = 0;
    for (int j = 0; j < rows; j++) sum += m->attention()[(size_t)r * rows + j];
    lo = std::min(lo, sum);
    hi = std::max(hi, sum);
  }
  EXPECT_NEAR(lo, 1.0, 1e-5);
  EXPECT_NEAR(hi, 1.0, 1e-5);
  m->set_capture_attention(false);
  embed(*m, p, 16, 16);
  EXPECT_TRUE(m->attention().empty());
}

TEST(VisionModel, SiglipHasNoClassToken) {
  TestClipSpec s;
  s.class_token = false;
  s.pre_ln = false;
  ImagePreprocess p;
  auto m = load(s, &p);
  EXPECT_EQ(m->config().pooling, PoolKind::Mean);
  EXPECT_EQ(p.mode, ResizeMode::Squash);
  ImageEmbedOptions cls;
  cls.pooling = PoolKind::Cls;
  EXPECT_QKV_ERROR(embed(*m, p, 16, 16, cls), ErrorCode::BadArgument, "no class token");
}

TEST(VisionModel, ClassifierHeadGivesSoftmaxOfThePooledState) {
  TestClipSpec s;
  s.labels = {"a", "b", "c"};
  s.projection = 8;  // the head reads the pooled state before it
  ImageModelData d = load_image_model(blob_of(write_test_clip_model(s)));
  ASSERT_TRUE(d.head);
  EXPECT_EQ(d.head.classes(), 3);
  EXPECT_EQ(d.head.labels, s.labels);
  const ImagePreprocess pp = d.preprocess;
  ImageClassifierHead head = d.head;
  Transformer m(std::move(d.model), 0, std::make_shared<ThreadPool>(1));
  const std::vector<uint8_t> img = random_rgba(19, 23, 3);
  const std::vector<float> p = classify_image(m, head.weight, head.bias, pp, img.data(), img.size(), 19, 23);
  ImageEmbedOptions raw;
  raw.normalize = raw.project = false;
  const std::vector<float> e = embed_image(m, pp, img.data(), img.size(), 19, 23, raw);
  // softmax(W e + b) from the definition, in double, over the f32 weights.
  std::vector<double> z(3);
  double sum = 0;
  for (int c = 0; c < 3; c++) {
    z[c] = head.bias[c];
    for (int j = 0; j < m.config().dim; j++) z[c] += (double)head.weight.f32()[c * m.config().dim + j] * e[j];
  }
  const double top = std::max({z[0], z[1], z[2]});
  for (double& v : z) sum += (v = std::exp(v - top));
  ASSERT_EQ(p.size(), 3u);
  for (int c = 0; c < 3; c++) EXPECT_NEAR(p[c], z[c] / sum, 1e-6);
  // A model without a head says so.
  TestClipSpec plain;
  auto bare = load(plain);
  EXPECT_QKV_ERROR(classify_image(*bare, Tensor{}, nullptr, pp, img.data(), img.size(), 19, 23), ErrorCode::Unsupported,
                   "classifier head");
}

TEST(VisionModel, RefusesMismatchedClassifierHead) {
  TestClipSpec s;
  s.labels = {"a", "b", "c"};
  const std::vector<uint8_t> good = write_test_clip_model(s);
  auto loads = [](const std::vector<uint8_t>& b) { load_image_model(blob_of(b)); };
  EXPECT_QKV_ERROR(loads(rewrite(good, "v.head.bias")), ErrorCode::BadModel, "v.head.bias", "missing");
  EXPECT_QKV_ERROR(loads(rewrite(good, "v.head.weight")), ErrorCode::BadModel, "clip.vision.labels", "v.head.weight");
  const std::vector<std::string> two = {"a", "b"};
  EXPECT_QKV_ERROR(loads(rewrite(good, "", "clip.vision.labels", 0, &two)), ErrorCode::BadModel, "clip.vision.labels",
                   "holds 2", "3 classes");
  EXPECT_QKV_ERROR(loads(rewrite(good, "", "clip.vision.labels", 7)), ErrorCode::BadModel, "clip.vision.labels",
                   "array of strings");
  // A head without labels, and labels without a head.
  {
    const GgufFile g = GgufFile::parse(blob_of(good));
    GgufWriter w;
    for (const auto& [k, v] : g.metadata())
      if (k != "general.alignment" && k != "clip.vision.labels") w.add_value(k, v);
    for (const GgufTensorInfo& t : g.tensors())
      w.add_tensor(t.name, t.dims, (const float*)g.tensor_data(t), QType::F32);
    EXPECT_QKV_ERROR(loads(w.finish()), ErrorCode::BadModel, "v.head.weight", "no clip.vision.labels");
  }
  {  // a head whose rows are not n_embd wide
    const GgufFile g = GgufFile::parse(blob_of(good));
    GgufWriter w;
    for (const auto& [k, v] : g.metadata())
      if (k != "general.alignment") w.add_value(k, v);
    for (const GgufTensorInfo& t : g.tensors())
      if (t.name != "v.head.weight") w.add_tensor(t.name, t.dims, (const float*)g.tensor_data(t), QType::F32);
    const std::vector<float> wide((size_t)(s.dim + 1) * 3, 0.1f);
    w.add_tensor("v.head.weight", {(uint64_t)s.dim + 1, 3}, wide.data(), QType::F32);
    EXPECT_QKV_ERROR(loads(w.finish()), ErrorCode::BadModel, "v.head.weight", "has shape [33 x 3]",
                     "expected [32 x n_classes]");
  }
}

TEST(VisionModel, RefusesBrokenMmproj) {
  const std::vector<uint8_t> good = write_test_clip_model(TestClipSpec{});
  auto loads = [](const std::vector<uint8_t>& b) { load_image_model(blob_of(b)); };
  EXPECT_QKV_ERROR(loads(rewrite(good, "v.blk.1.attn_q.weight")), ErrorCode::BadModel, "v.blk.1.attn_q.weight",
                   "missing");
  EXPECT_QKV_ERROR(loads(rewrite(good, "v.patch_embd.weight")), ErrorCode::BadModel, "v.patch_embd.weight");
  // The position table no longer matches the grid of the image size.
  EXPECT_QKV_ERROR(loads(rewrite(good, "", "clip.vision.image_size", 20)), ErrorCode::BadModel,
                   "v.position_embd.weight");
  EXPECT_QKV_ERROR(loads(rewrite(good, "", "clip.vision.embedding_length", 0)), ErrorCode::BadModel);
  EXPECT_QKV_ERROR(loads(rewrite(good, "", "clip.vision.block_count", 1 << 20)), ErrorCode::BadModel, "n_layers");
  EXPECT_QKV_ERROR(loads(rewrite(good, "", "clip.vision.patch_size", 0)), ErrorCode::BadModel, "patch_size");
  EXPECT_QKV_ERROR(loads(rewrite(good, "", "clip.vision.image_size", 18)), ErrorCode::BadModel, "multiple");
  EXPECT_QKV_ERROR(loads(rewrite(good, "", "clip.vision.attention.head_count", 5)), ErrorCode::BadModel, "head_count");
  // A patch kernel of the wrong shape (embedding_length changed: every tensor then mismatches).
  EXPECT_QKV_ERROR(loads(rewrite(good, "", "clip.vision.embedding_length", 16)), ErrorCode::BadModel, "shape");
  // A language model is not an image encoder, and the other way round.
  TestModelSpec llama;
  EXPECT_FALSE(is_image_model(blob_of(write_test_model(llama))));
  EXPECT_TRUE(is_image_model(blob_of(good)));
  // The one-parse kind the JS loader branches on agrees.
  EXPECT_EQ(model_kind(blob_of(good)), ModelKind::ImageEncoder);
  EXPECT_EQ(model_kind(blob_of(write_test_model(llama))), ModelKind::Decoder);
  EXPECT_QKV_ERROR(load_model(blob_of(good)), ErrorCode::Unsupported, "image encoder", "embed-image");
  std::vector<uint8_t> cut(good.begin(), good.begin() + good.size() / 2);
  EXPECT_THROW(loads(cut), Error);
}

}  // namespace
