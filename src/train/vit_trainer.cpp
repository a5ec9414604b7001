// The ViT training loop: config, generated images, AdamW, evaluation, clip GGUF export.
#include "vit_trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "../common.h"
#include "../vision/image.h"
#include "shapes.h"

namespace qkv {

VitTrainConfig parse_vit_train_config(const std::string& text, const std::vector<std::string>& overrides,
                                      const std::string& origin) {
  VitTrainConfig c;
  int classes = 0;
  for_each_config_entry(text, overrides, origin, [&](const ConfigEntry& e) {
    const std::string &k = e.key, &v = e.value;
    VitTrainShape& s = c.shape;
    if (parse_run_config_entry(c, e)) return;
    if (k == "arch") {
      if (v != "vit") e.bad("this trainer takes arch = vit");
    } else if (k == "image_size") s.image_size = (int)e.i64(1, 1024);
    else if (k == "patch_size") s.patch_size = (int)e.i64(1, 64);
    else if (k == "channels") s.channels = (int)e.i64(1, 4);
    else if (k == "classes") classes = (int)e.i64(2, (long long)shape_labels().size());
    else if (k == "dim") s.dim = (int)e.i64(1, 4096);
    else if (k == "n_heads") s.n_heads = (int)e.i64(1, 256);
    else if (k == "hidden_dim") s.hidden_dim = (int)e.i64(1, 16384);
    else if (k == "n_layers") s.n_layers = (int)e.i64(1, 64);
    else if (k == "task") {
      if (v != "shapes") e.bad("the only generated image task is 'shapes'");
      c.task = v;
    } else if (k == "val_examples") c.val_examples = (int)e.i64(1, 1 << 20);
    else if (k == "data_seed") c.data_seed = (uint64_t)e.i64(0, 1LL << 62);
    else
      fail(ErrorCode::BadArgument,
           e.where + ": unknown key '" + k +
               "' for arch = vit (known: arch task image_size patch_size channels classes dim n_heads hidden_dim "
               "n_layers val_examples data_seed " +
               kTrainRunKeys + ")");
  });
  finish_run_config(c);
  c.shape.n_classes = classes > 0 ? classes : (int)shape_labels().size();
  if (c.shape.image_size < 8) fail(ErrorCode::BadArgument, "train config: image_size must be at least 8 for shapes");
  c.shape.model_config();  // shape errors now, before any work
  // Activations kept for backward, per image and layer: x, the norms, q, k, v, attention output,
  // residual (8 x dim), fc1 before and after GELU (2 x hidden), probabilities (heads x rows);
  // plus the held-out images' pixels, kept for every evaluation.
  const VitTrainShape& s = c.shape;
  const double per_image = (double)s.rows() * s.n_layers * (8.0 * s.dim + 2.0 * s.hidden_dim + s.n_heads * s.rows()) +
                           2.0 * 3 * s.image_size * s.image_size;
  const double bytes = 4.0 * (per_image * c.batch + 3.0 * s.image_size * s.image_size * c.val_examples);
  if (bytes > 16e9)
    fail(ErrorCode::BadArgument,
         "train config: batch " + std::to_string(c.batch) + " of " + std::to_string(s.image_size) +
             "-pixel images with " + std::to_string(c.val_examples) + " held-out images needs about " +
             std::to_string((long long)(bytes / 1e9)) + " GB; lower batch, val_examples or image_size");
  return c;
}

ImagePreprocess vit_preprocess(const VitTrainShape& s) {
  ImagePreprocess p;
  p.size = s.image_size;
  p.mode = ResizeMode::Crop;
  return p;  // mean and std 0.5: pixels in -1..1
}

std::vector<float> vit_pixels(const VitTrainShape& s, const uint8_t* rgba, int B) {
  const ImagePreprocess p = vit_preprocess(s);
  const int S = s.image_size;
  const size_t plane = (size_t)3 * S * S, bytes = (size_t)S * S * 4;
  std::vector<float> out((size_t)B * plane);
  for (int b = 0; b < B; b++) {
    const std::vector<float> x = preprocess_image(rgba + b * bytes, bytes, S, S, p);
    std::copy(x.begin(), x.end(), out.begin() + b * plane);
  }
  return out;
}

std::vector<uint8_t> vit_to_gguf(const VitTrainModel& m, const std::vector<std::string>& labels,
                                 const std::string& name, QType type) {
  const VitTrainShape& s = m.shape();
  const VitParamLayout& L = m.layout();
  if ((int)labels.size() != s.n_classes)
    fail(ErrorCode::BadArgument,
         std::to_string(labels.size()) + " labels for " + std::to_string(s.n_classes) + " classes");
  const float* P = m.params().data();
  const ImagePreprocess pp = vit_preprocess(s);
  GgufWriter w;
  w.add_string("general.architecture", "clip");
  w.add_string("general.name", name);
  w.add_string("general.license", "MIT");
  w.add_bool("clip.has_vision_encoder", true);
  w.add_bool("clip.has_text_encoder", false);
  w.add_bool("clip.use_gelu", true);
  w.add_u32("clip.vision.image_size", s.image_size);
  w.add_u32("clip.vision.patch_size", s.patch_size);
  w.add_u32("clip.vision.embedding_length", s.dim);
  w.add_u32("clip.vision.feed_forward_length", s.hidden_dim);
  w.add_u32("clip.vision.block_count", s.n_layers);
  w.add_u32("clip.vision.attention.head_count", s.n_heads);
  w.add_f32("clip.vision.attention.layer_norm_epsilon", s.norm_eps);
  w.add_f32s("clip.vision.image_mean", {pp.mean[0], pp.mean[1], pp.mean[2]});
  w.add_f32s("clip.vision.image_std", {pp.std[0], pp.std[1], pp.std[2]});
  w.add_strings("clip.vision.labels", labels);
  const uint64_t d = s.dim, h = s.hidden_dim, p = s.patch_size;
  auto mat = [&](const std::string& n, int64_t off, uint64_t rows, uint64_t cols) {
    w.add_tensor(n, {cols, rows}, P + off, type);
  };
  auto vec = [&](const std::string& n, int64_t off, uint64_t len) { w.add_tensor_f32(n, {len}, P + off); };
  // The convolution kernel [patch, patch, channels, dim]: the same bytes as the (dim, K) matrix.
  w.add_tensor("v.patch_embd.weight", {p, p, (uint64_t)s.channels, d}, P + L.patch_w, type);
  vec("v.patch_embd.bias", L.patch_b, d);
  vec("v.class_embd", L.cls, d);
  w.add_tensor("v.position_embd.weight", {d, (uint64_t)s.rows()}, P + L.pos, type);
  vec("v.pre_ln.weight", L.pre_w, d);
  vec("v.pre_ln.bias", L.pre_b, d);
  for (int l = 0; l < s.n_layers; l++) {
    const auto& Y = L.layers[l];
    const std::string b = "v.blk." + std::to_string(l) + ".";
    vec(b + "ln1.weight", Y.ln1_w, d);
    vec(b + "ln1.bias", Y.ln1_b, d);
    mat(b + "attn_q.weight", Y.wq, d, d);
    vec(b + "attn_q.bias", Y.bq, d);
    mat(b + "attn_k.weight", Y.wk, d, d);
    vec(b + "attn_k.bias", Y.bk, d);
    mat(b + "attn_v.weight", Y.wv, d, d);
    vec(b + "attn_v.bias", Y.bv, d);
    mat(b + "attn_out.weight", Y.wo, d, d);
    vec(b + "attn_out.bias", Y.bo, d);
    vec(b + "ln2.weight", Y.ln2_w, d);
    vec(b + "ln2.bias", Y.ln2_b, d);
    mat(b + "ffn_up.weight", Y.w_up, h, d);
    vec(b + "ffn_up.bias", Y.b_up, h);
    mat(b + "ffn_down.weight", Y.w_down, d, h);
    vec(b + "ffn_down.bias", Y.b_down, d);
  }
  vec("v.post_ln.weight", L.post_w, d);
  vec("v.post_ln.bias", L.post_b, d);
  // The head in f32 whatever `type`: it is small, and the class scores are read as trained.
  w.add_tensor_f32("v.head.weight", {d, (uint64_t)s.n_classes}, P + L.head_w);
  vec("v.head.bias", L.head_b, (uint64_t)s.n_classes);
  return w.finish();
}

VitTrainResult run_vit_training(const VitTrainConfig& cfg) {
  using clk = std::chrono::steady_clock;
  auto say = [&](const char* fmt, auto... args) {
    if (cfg.quiet) return;
    fprintf(stderr, fmt, args...);
    fflush(stderr);
  };
  const VitTrainShape& s = cfg.shape;
  const std::vector<std::string> labels(shape_labels().begin(), shape_labels().begin() + s.n_classes);
  auto pool = std::make_shared<ThreadPool>(cfg.threads > 0 ? cfg.threads : ThreadPool::hardware_threads());
  VitTrainModel model(s, pool.get());
  model.init(cfg.seed);
  const int64_t P = model.layout().total;
  say("ViT: %dx%d images, patch %d (%d patches + class token), dim %d, %d heads, ffn %d, %d layers, %d classes | "
      "%.3fM parameters | batch %d | %d threads\n",
      s.image_size, s.image_size, s.patch_size, s.patches(), s.dim, s.n_heads, s.hidden_dim, s.n_layers, s.n_classes,
      P / 1e6, cfg.batch, pool->size());

  const ShapeImages val =
      generate_shapes(cfg.data_seed, ShapeSplit::HeldOut, 0, cfg.val_examples, s.image_size, s.n_classes);
  const std::vector<float> val_px = vit_pixels(s, val.rgba.data(), cfg.val_examples);
  const std::vector<ParamSegment> segs = optimizer_segments(model.layout().no_decay, P);
  std::vector<float> m(P, 0.0f), v(P, 0.0f);

  auto evaluate = [&](double* accuracy) {
    double sum = 0.0;
    int right = 0;
    const size_t plane = (size_t)3 * s.image_size * s.image_size;
    for (int i = 0; i < cfg.val_examples; i += cfg.batch) {
      const int n = std::min(cfg.batch, cfg.val_examples - i);
      sum += model.forward(val_px.data() + i * plane, val.labels.data() + i, n) * n;
      const std::vector<float>& lg = model.logits();
      for (int b = 0; b < n; b++) {
        int best = 0;
        for (int c = 1; c < s.n_classes; c++)
          if (lg[(size_t)b * s.n_classes + c] > lg[(size_t)b * s.n_classes + best]) best = c;
        right += best == val.labels[i + b];
      }
    }
    *accuracy = (double)right / cfg.val_examples;
    return sum / cfg.val_examples;
  };
  auto save = [&]() {
    std::vector<uint8_t> g = vit_to_gguf(model, labels, cfg.name, parse_qtype(cfg.dtype));
    write_file_atomic(cfg.out, g.data(), g.size());
  };

  VitTrainResult res;
  res.params = P;
  const auto t_start = clk::now();
  for (int step = 0; step < cfg.steps; step++) {
    const ShapeImages batch =
        generate_shapes(cfg.data_seed, ShapeSplit::Train, (uint64_t)step, cfg.batch, s.image_size, s.n_classes);
    const std::vector<float> px = vit_pixels(s, batch.rgba.data(), cfg.batch);
    model.zero_grads();
    const double loss = model.forward(px.data(), batch.labels.data(), cfg.batch);
    if (!std::isfinite(loss))
      fail(ErrorCode::Internal,
           "the loss became " + std::to_string(loss) + " at step " + std::to_string(step) + "; lower lr");
    model.backward();
    const float lr = lr_at(cfg, step);
    const double norm = optimizer_step(model.params().data(), model.grads(), m.data(), v.data(), segs, cfg, lr, step);
    res.losses.push_back(loss);
    const double el = std::chrono::duration<double>(clk::now() - t_start).count();
    if (cfg.eval_interval > 0 && (step + 1) % cfg.eval_interval == 0 && step + 1 < cfg.steps) {
      double acc = 0;
      const double vl = evaluate(&acc);
      say("step %5d/%d | loss %.4f | val %.4f | accuracy %.1f%% | lr %.2e | %.0f s\n", step + 1, cfg.steps, loss, vl,
          100 * acc, lr, el);
      save();
    } else if (cfg.log_interval > 0 && (step + 1) % cfg.log_interval == 0) {
      say("step %5d/%d | loss %.4f | lr %.2e | grad norm %.3f | %.0f s\n", step + 1, cfg.steps, loss, lr, norm, el);
    }
  }
  res.seconds = std::chrono::duration<double>(clk::now() - t_start).count();
  res.val_loss = evaluate(&res.val_accuracy);
  save();
  say("done: %d steps in %.0f s | held-out loss %.4f | accuracy %.2f%% of %d held-out images | wrote %s\n", cfg.steps,
      res.seconds, res.val_loss, 100 * res.val_accuracy, cfg.val_examples, cfg.out.c_str());
  return res;
}

}  // namespace qkv
