// ViT classifier training: the whole model's gradient (patch embedding, class token, positions,
// LayerNorms, attention, GELU, class-token pooling, head, softmax cross-entropy) against central
// differences of its loss; the saved clip GGUF through the mmproj loader, whose pooled embedding
// must equal the trainer's forward; the shapes task; fitting a fixed batch; a miniature run of
// the CLI's loop; the shipped classifier's held-out accuracy; bad configs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common.h"
#include "engine/embed_image.h"
#include "formats/file.h"
#include "formats/gguf.h"
#include "formats/gguf_clip.h"
#include "model/transformer.h"
#include "train/shapes.h"
#include "train/vit_model.h"
#include "train/vit_trainer.h"

namespace {

using namespace qkv;

VitTrainShape tiny_shape() {
  VitTrainShape s;
  s.image_size = 8;
  s.patch_size = 4;
  s.dim = 8;
  s.n_heads = 2;
  s.hidden_dim = 12;
  s.n_layers = 2;
  s.n_classes = 3;
  return s;
}

// max |got - want| <= rel * max|want| (and want not all zero).
::testing::AssertionResult Near(const std::string& what, const std::vector<float>& got, const std::vector<double>& want,
                                double rel) {
  double scale = 0.0, worst = 0.0;
  size_t wi = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  if (scale == 0.0) return ::testing::AssertionFailure() << what << ": expected gradient is all zero (vacuous)";
  for (size_t i = 0; i < got.size(); i++)
    if (std::fabs(got[i] - want[i]) > worst) worst = std::fabs(got[i] - want[i]), wi = i;
  if (worst <= rel * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": worst [" << wi << "] got " << got[wi] << " want " << want[wi]
                                       << " (scale " << scale << ")";
}

TEST(VitTrainModel, GradientMatchesFiniteDifferencesOfTheLoss) {
  ThreadPool pool(2);
  const VitTrainShape s = tiny_shape();
  VitTrainModel m(s, &pool);
  m.init(3);
  // Every parameter away from its initial value (LayerNorm weights not 1, biases and the head
  // not 0), so each gradient is tested at a general point.
  std::mt19937 g(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto [b, e] : m.layout().no_decay)
    for (int64_t i = b; i < e; i++) m.params()[i] += 0.3f * u(g);
  for (int64_t i = 0; i < (int64_t)s.n_classes * s.dim; i++) m.params()[m.layout().head_w + i] = 0.5f * u(g);
  const int B = 3;
  std::vector<float> px((size_t)B * 3 * s.image_size * s.image_size);
  for (float& x : px) x = u(g);
  const std::vector<int> labels = {0, 2, 1};
  m.zero_grads();
  m.forward(px.data(), labels.data(), B);
  m.backward();
  const std::vector<float> grad = m.grads();
  const VitParamLayout& L = m.layout();
  const int64_t d = s.dim, h = s.hidden_dim;
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> tensors = {
      {"patch_w", {L.patch_w, d * s.patch_dim()}},
      {"patch_b", {L.patch_b, d}},
      {"cls", {L.cls, d}},
      {"pos", {L.pos, s.rows() * d}},
      {"pre_w", {L.pre_w, d}},
      {"pre_b", {L.pre_b, d}},
      {"post_w", {L.post_w, d}},
      {"post_b", {L.post_b, d}},
      {"head_w", {L.head_w, s.n_classes * d}},
      {"head_b", {L.head_b, s.n_classes}}};
  for (int l = 0; l < s.n_layers; l++) {
    const auto& Y = L.layers[l];
    const std::string p = "blk" + std::to_string(l) + ".";
    for (auto [n, off, len] : std::vector<std::tuple<std::string, int64_t, int64_t>>{{"ln1_w", Y.ln1_w, d},
                                                                                     {"ln1_b", Y.ln1_b, d},
                                                                                     {"wq", Y.wq, d * d},
                                                                                     {"bq", Y.bq, d},
                                                                                     {"wk", Y.wk, d * d},
                                                                                     {"bk", Y.bk, d},
                                                                                     {"wv", Y.wv, d * d},
                                                                                     {"bv", Y.bv, d},
                                                                                     {"wo", Y.wo, d * d},
                                                                                     {"bo", Y.bo, d},
                                                                                     {"ln2_w", Y.ln2_w, d},
                                                                                     {"ln2_b", Y.ln2_b, d},
                                                                                     {"w_up", Y.w_up, h * d},
                                                                                     {"b_up", Y.b_up, h},
                                                                                     {"w_down", Y.w_down, d * h},
                                                                                     {"b_down", Y.b_down, d}})
      tensors.push_back({p + n, {off, len}});
  }
  // Central differences of the float loss at h and 2h, Richardson-extrapolated (the h^2 error
  // cancels; h large enough that the loss's float rounding stays small against the smallest
  // gradients, the keys').
  auto loss_at = [&](int64_t i, float v) {
    const float p0 = m.params()[i];
    m.params()[i] = v;
    const double l = m.forward(px.data(), labels.data(), B);
    m.params()[i] = p0;
    return l;
  };
  int checked = 0;
  for (const auto& [name, span] : tensors) {
    std::vector<float> got;
    std::vector<double> want;
    const bool all = span.second <= 16;
    for (int k = 0; k < (all ? span.second : 8); k++) {
      const int64_t i = span.first + (all ? k : (int64_t)(g() % span.second));
      const float p0 = m.params()[i], hh = 1e-2f;
      const double d1 = (loss_at(i, p0 + hh) - loss_at(i, p0 - hh)) / (2.0 * hh);
      const double d2 = (loss_at(i, p0 + 2 * hh) - loss_at(i, p0 - 2 * hh)) / (4.0 * hh);
      got.push_back(grad[i]);
      want.push_back((4 * d1 - d2) / 3);
      checked++;
    }
    // A key bias adds the same score to every key of a query: softmax ignores it, its gradient
    // is exactly 0 (the differences then only measure rounding).
    if (name.size() > 2 && name.compare(name.size() - 2, 2, "bk") == 0) {
      for (float x : got) EXPECT_LT(std::fabs(x), 1e-6) << name;
      continue;
    }
    EXPECT_TRUE(Near(name, got, want, 1e-2)) << name;
  }
  EXPECT_GE(checked, 250);
}

// The trainer's pooled vectors against the mmproj loader's model (an independent forward path:
// Transformer::encode_image and embed_pixels) on a GGUF round trip, f32 and f16.
TEST(VitTrainModel, SavedGgufLoadsAndEmbedsAsTheTrainerForward) {
  ThreadPool pool(2);
  VitTrainShape s = tiny_shape();
  s.image_size = 16;
  s.dim = 16;
  s.n_classes = 4;
  VitTrainModel m(s, &pool);
  m.init(11);
  // A few optimizer-free steps of noise on every parameter, so nothing sits at its initial 0 / 1.
  std::mt19937 g(2);
  std::uniform_real_distribution<float> u(-0.2f, 0.2f);
  for (float& p : m.params()) p += u(g);
  const ShapeImages img = generate_shapes(7, ShapeSplit::HeldOut, 0, 3, s.image_size, s.n_classes);
  const std::vector<float> px = vit_pixels(s, img.rgba.data(), 3);
  m.forward(px.data(), nullptr, 3);
  const std::vector<float> pooled = m.pooled(), logits = m.logits();
  const std::vector<std::string> labels = {"circle", "ring", "square", "triangle"};
  for (QType type : {QType::F32, QType::F16}) {
    auto blob = std::make_shared<VectorBlob>(vit_to_gguf(m, labels, "t", type));
    ImageModelData d = load_image_model(blob);
    EXPECT_EQ(d.model.config.pooling, PoolKind::Cls);
    EXPECT_EQ(d.model.config.ffn, FfnKind::GELU);
    EXPECT_FALSE(d.model.weights.projection);
    EXPECT_EQ(d.preprocess.size, s.image_size);
    Transformer t(d.model, 0, std::make_shared<ThreadPool>(1));
    ImageEmbedOptions o;
    o.normalize = false;
    // F16 matrices round the weights: the loaded model's vector moves by about their rounding.
    const double tol = type == QType::F32 ? 1e-4 : 2e-2;
    for (int b = 0; b < 3; b++) {
      // Through the RGBA path (the loader's preprocessing), as embedImage runs it.
      const std::vector<float> e =
          embed_image(t, d.preprocess, img.rgba.data() + (size_t)b * s.image_size * s.image_size * 4,
                      (uint64_t)s.image_size * s.image_size * 4, s.image_size, s.image_size, o);
      ASSERT_EQ((int)e.size(), s.dim);
      for (int i = 0; i < s.dim; i++)
        EXPECT_NEAR(e[i], pooled[(size_t)b * s.dim + i], tol) << "image " << b << " [" << i << "] " << qtype_name(type);
    }
    // The head as the format says: v.head.weight [dim, classes], v.head.bias [classes], labels.
    GgufFile f = GgufFile::parse(blob);
    const GgufTensorInfo* hw = f.find_tensor("v.head.weight");
    const GgufTensorInfo* hb = f.find_tensor("v.head.bias");
    ASSERT_TRUE(hw && hb);
    ASSERT_EQ(hw->dims, (std::vector<uint64_t>{(uint64_t)s.dim, (uint64_t)s.n_classes}));
    ASSERT_EQ(hb->dims, (std::vector<uint64_t>{(uint64_t)s.n_classes}));
    const GgufValue* lv = f.find("clip.vision.labels");
    ASSERT_TRUE(lv && lv->kind == GgufKind::ARRAY);
    ASSERT_EQ(lv->size(), labels.size());
    const float* W = reinterpret_cast<const float*>(f.tensor_data(*hw));
    const float* bias = reinterpret_cast<const float*>(f.tensor_data(*hb));
    for (int b = 0; b < 3; b++)
      for (int c = 0; c < s.n_classes; c++) {
        double z = bias[c];
        for (int i = 0; i < s.dim; i++) z += (double)W[c * s.dim + i] * pooled[(size_t)b * s.dim + i];
        EXPECT_NEAR(z, logits[(size_t)b * s.n_classes + c], 1e-4);
      }
  }
}

TEST(VitShapes, DeterministicLabelledAndSplit) {
  const ShapeImages a = generate_shapes(1, ShapeSplit::Train, 0, 60, 32),
                    b = generate_shapes(1, ShapeSplit::Train, 0, 60, 32);
  EXPECT_EQ(a.rgba, b.rgba);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(generate_shapes(1, ShapeSplit::Train, 1, 60, 32).rgba, a.rgba);
  EXPECT_NE(generate_shapes(1, ShapeSplit::HeldOut, 0, 60, 32).rgba, a.rgba);
  EXPECT_EQ(std::set<int>(a.labels.begin(), a.labels.end()).size(), shape_labels().size());
  for (int l : generate_shapes(2, ShapeSplit::Train, 0, 50, 16, 3).labels) EXPECT_TRUE(l >= 0 && l < 3);
  // Each image has a shape on it: two brightnesses far apart (the shape and its background).
  for (int i = 0; i < 60; i++) {
    const uint8_t* p = a.rgba.data() + (size_t)i * 32 * 32 * 4;
    double lo = 255, hi = 0;
    for (int k = 0; k < 32 * 32; k++) {
      const double luma = 0.299 * p[4 * k] + 0.587 * p[4 * k + 1] + 0.114 * p[4 * k + 2];
      lo = std::min(lo, luma), hi = std::max(hi, luma);
      EXPECT_EQ(p[4 * k + 3], 255);
    }
    EXPECT_GT(hi - lo, 55) << "image " << i;
  }
  EXPECT_THROW(generate_shapes(1, ShapeSplit::Train, 0, 1, 4), Error);
  EXPECT_THROW(generate_shapes(1, ShapeSplit::Train, 0, 1, 16, 9), Error);
}

// AdamW steps on one fixed batch: the model must fit it (the loss falls far below chance).
TEST(VitTrainModel, FitsAFixedBatch) {
  ThreadPool pool(2);
  VitTrainShape s = tiny_shape();
  s.image_size = 16;
  s.dim = 16;
  s.n_classes = 4;
  VitTrainModel m(s, &pool);
  m.init(1);
  const ShapeImages img = generate_shapes(3, ShapeSplit::Train, 0, 16, s.image_size, s.n_classes);
  const std::vector<float> px = vit_pixels(s, img.rgba.data(), 16);
  const std::vector<ParamSegment> segs = optimizer_segments(m.layout().no_decay, m.layout().total);
  std::vector<float> mo(m.layout().total, 0.0f), ve(m.layout().total, 0.0f);
  TrainRunConfig cfg;
  cfg.weight_decay = 0.0f;
  double first = 0, last = 0;
  for (int step = 0; step < 60; step++) {
    m.zero_grads();
    last = m.forward(px.data(), img.labels.data(), 16);
    if (step == 0) first = last;
    m.backward();
    optimizer_step(m.params().data(), m.grads(), mo.data(), ve.data(), segs, cfg, 1e-2f, step);
  }
  EXPECT_GT(first, 1.0);
  EXPECT_LT(last, 0.2) << first << " -> " << last;
}

// The CLI's loop end to end in miniature: finite losses, a held-out evaluation, and a checkpoint
// the mmproj loader reads with the head and labels of the classes asked for.
TEST(VitTrainModel, MiniatureShapesRunSavesALoadableModel) {
  const std::string out = ::testing::TempDir() + "/mini-vit.gguf";
  VitTrainConfig c = parse_vit_train_config(
      "arch = vit\nimage_size = 16\npatch_size = 4\ndim = 16\nn_heads = 2\nhidden_dim = 32\nn_layers = 1\n"
      "classes = 3\nbatch = 8\nsteps = 10\nwarmup = 2\nval_examples = 20\neval_interval = 5\n"
      "threads = 2\nquiet = true\n",
      {"out=" + out});
  VitTrainResult r = run_vit_training(c);
  ASSERT_EQ(r.losses.size(), 10u);
  for (double l : r.losses) EXPECT_TRUE(std::isfinite(l) && l > 0.0);
  EXPECT_TRUE(r.val_accuracy >= 0.0 && r.val_accuracy <= 1.0);
  auto blob = map_file(out);
  ImageModelData d = load_image_model(blob);
  EXPECT_EQ(d.model.config.n_layers, 1);
  EXPECT_EQ(d.model.config.image_size, 16);
  GgufFile f = GgufFile::parse(blob);
  const GgufValue* lv = f.find("clip.vision.labels");
  ASSERT_TRUE(lv && lv->size() == 3);
  EXPECT_EQ(lv->str_at(0), "circle");
  EXPECT_EQ(lv->str_at(2), "square");
}

TEST(VitTrainModel, BadConfigsAreRefusedNamingTheProblem) {
  auto err = [](const std::string& text) {
    try {
      parse_vit_train_config(text);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::BadArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err("arch = vit\nfoo = 1\n").find("unknown key 'foo'"), std::string::npos);
  EXPECT_NE(err("arch = vit\nimage_size = 30\npatch_size = 4\n").find("multiple of patch_size"), std::string::npos);
  EXPECT_NE(err("arch = vit\ndim = 30\nn_heads = 4\n").find("not a multiple"), std::string::npos);
  EXPECT_NE(err("arch = vit\nchannels = 1\n").find("RGB"), std::string::npos);
  EXPECT_NE(err("arch = vit\nclasses = 7\n").find("classes"), std::string::npos);
  EXPECT_NE(err("arch = vit\ntask = digits\n").find("task"), std::string::npos);
  EXPECT_NE(err("arch = vit\nimage_size = 1024\npatch_size = 16\nbatch = 4096\n").find("lower batch"),
            std::string::npos);
  EXPECT_EQ(train_config_arch("# x\narch = vit\n", {}), "vit");
  EXPECT_EQ(train_config_arch("arch = encdec\n", {"arch=vit"}), "vit");
  ThreadPool pool(1);
  VitTrainModel m(tiny_shape(), &pool);
  std::vector<float> px(3 * 8 * 8, 0.0f);
  const int bad = 5;
  EXPECT_THROW(m.forward(px.data(), &bad, 1), Error);
  EXPECT_THROW(m.forward(px.data(), nullptr, 0), Error);
  EXPECT_THROW(m.backward(), Error);  // no forward with labels yet
}

}  // namespace

// ---- the shipped model: models/shapes-vit.gguf ------------------------------------------------

namespace {

using namespace qkv;

// Of 300 fresh held-out images: models/README.md reports 77.5% of 1000 at the recipe's end (232
// of these 300 at the time of writing); at least 215 (71.7%) here.
constexpr int kShippedMinRight = 215;

// Fresh held-out shapes (a seed the recipe never used) through the inference path as any user
// runs it: the mmproj loader, RGBA preprocessing, class-token pooling, then the file's own head
// (v.head.weight [dim, classes], v.head.bias, clip.vision.labels). Held to what models/README.md
// reports at the end of the recipe.
TEST(VitShippedModel, ClassifiesFreshHeldOutShapes) {
  auto blob = map_file(std::string(QKV_MODELS_DIR) + "/shapes-vit.gguf");
  ImageModelData d = load_image_model(blob);
  const ModelConfig& c = d.model.config;
  EXPECT_EQ(c.pooling, PoolKind::Cls);
  EXPECT_FALSE(d.model.weights.projection);
  GgufFile f = GgufFile::parse(blob);
  const GgufValue* lv = f.find("clip.vision.labels");
  ASSERT_TRUE(lv && lv->kind == GgufKind::ARRAY);
  const int K = (int)lv->size();
  ASSERT_EQ(K, (int)shape_labels().size());
  for (int k = 0; k < K; k++) EXPECT_EQ(lv->str_at(k), shape_labels()[k]);
  const GgufTensorInfo *hw = f.find_tensor("v.head.weight"), *hb = f.find_tensor("v.head.bias");
  ASSERT_TRUE(hw && hb && hw->type == 0 && hb->type == 0);
  ASSERT_EQ(hw->dims, (std::vector<uint64_t>{(uint64_t)c.dim, (uint64_t)K}));
  const float* W = reinterpret_cast<const float*>(f.tensor_data(*hw));
  const float* bias = reinterpret_cast<const float*>(f.tensor_data(*hb));
  Transformer t(d.model, 0, std::make_shared<ThreadPool>(2));
  ImageEmbedOptions o;
  o.normalize = false;
  const int n = 300, S = c.image_size;
  const ShapeImages img = generate_shapes(20261126, ShapeSplit::HeldOut, 0, n, S);
  std::vector<int> right(K, 0), seen(K, 0);
  int ok = 0;
  for (int i = 0; i < n; i++) {
    const std::vector<float> e =
        embed_image(t, d.preprocess, img.rgba.data() + (size_t)i * S * S * 4, (uint64_t)S * S * 4, S, S, o);
    int best = 0;
    double best_z = -1e300;
    for (int k = 0; k < K; k++) {
      double z = bias[k];
      for (int j = 0; j < c.dim; j++) z += (double)W[(size_t)k * c.dim + j] * e[j];
      if (z > best_z) best_z = z, best = k;
    }
    seen[img.labels[i]]++;
    if (best == img.labels[i]) ok++, right[img.labels[i]]++;
  }
  std::string per;
  for (int k = 0; k < K; k++)
    per += " " + shape_labels()[k] + " " + std::to_string(right[k]) + "/" + std::to_string(seen[k]);
  EXPECT_GE(ok, kShippedMinRight) << ok << " of " << n << " right:" << per;
}

}  // namespace
