// Training: the whole model's loss gradient against central differences of an independent
// float64 forward; a short training run whose loss must fall; determinism and exact resume;
// checkpoints that load and generate; the BPE tokenizer learner. The backward kernels are in
// test_train_kernels.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "common.h"
#include "engine/generate.h"
#include "formats/file.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "formats/gguf_writer.h"
#include "formats/loader.h"
#include "kernels/activation_backward.h"
#include "kernels/attention.h"
#include "kernels/attention_backward.h"
#include "kernels/matmul.h"
#include "kernels/matmul_backward.h"
#include "kernels/norm_backward.h"
#include "kernels/optim.h"
#include "kernels/rope.h"
#include "kernels/rope_backward.h"
#include "kernels/simd.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#include "train/bpe.h"
#include "train/model.h"
#include "train/trainer.h"
#include "grad_checks.h"

namespace {

using namespace qkv;
using namespace qkv_test;

// ---- the whole model ---------------------------------------------------------------------

ModelConfig tiny_config(int vocab = 23) {
  ModelConfig c;
  c.dim = 16;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 4;
  c.hidden_dim = 20;
  c.vocab_size = vocab;
  c.seq_len = 8;
  return c;
}

// Block-sparse (dense scores under the pattern's mask) or additive attention of layer L in
// float64, from the definitions; the layout of attention_d.
std::vector<double> kinds_attention_d(const ModelConfig& c, AttnKind kind, const ParamLayout::Layer& L,
                                      const std::vector<double>& P, const std::vector<double>& q,
                                      const std::vector<double>& k, const std::vector<double>& v, int n) {
  const int H = c.n_heads, KVH = c.n_kv_heads, hd = c.head_dim, da = c.additive_dim;
  std::vector<double> out((size_t)n * H * hd, 0.0);
  for (int h = 0; h < H; h++) {
    const int gk = h / (H / KVH);
    for (int i = 0; i < n; i++) {
      std::vector<double> s(i + 1, -INFINITY);
      double mx = -INFINITY;
      for (int j = 0; j <= i; j++) {
        const double* qi = &q[(i * H + h) * hd];
        const double* kj = &k[(j * KVH + gk) * hd];
        double d = 0;
        if (kind == AttnKind::Additive) {
          for (int a = 0; a < da; a++) {
            double u = 0;
            for (int e = 0; e < hd; e++)
              u += P[L.add_wq + ((int64_t)h * da + a) * hd + e] * qi[e] +
                   P[L.add_wk + ((int64_t)h * da + a) * hd + e] * kj[e];
            d += P[L.add_v + (int64_t)h * da + a] * std::tanh(u);
          }
        } else {
          if (!c.sparse.visible(i, j, n, true)) continue;
          for (int e = 0; e < hd; e++) d += qi[e] * kj[e];
          d /= std::sqrt((double)hd);
        }
        s[j] = d;
        mx = std::max(mx, d);
      }
      double z = 0;
      for (int j = 0; j <= i; j++) z += (s[j] = std::exp(s[j] - mx));
      for (int j = 0; j <= i; j++)
        for (int e = 0; e < hd; e++) out[(i * H + h) * hd + e] += s[j] / z * v[(j * KVH + gk) * hd + e];
    }
  }
  return out;
}

// The model's mean cross-entropy in float64, written from the formulas (not from the kernels).
double ref_loss(const ModelConfig& c, const ParamLayout& lay, const std::vector<double>& P, const std::vector<int>& in,
                const std::vector<int>& tg, int B, int T) {
  const int D = c.dim, H = c.hidden_dim, qd = c.q_dim(), kvd = c.kv_dim(), hd = c.head_dim, V = c.vocab_size;
  auto rms = [&](const double* x, int64_t w) {
    std::vector<double> y(D);
    double ss = 0;
    for (int i = 0; i < D; i++) ss += x[i] * x[i];
    const double r = 1.0 / std::sqrt(ss / D + c.norm_eps);
    for (int i = 0; i < D; i++) y[i] = P[w + i] * x[i] * r;
    return y;
  };
  auto mv = [&](const std::vector<double>& x, int64_t w, int rows, int cols) {
    std::vector<double> y(rows, 0.0);
    for (int r = 0; r < rows; r++)
      for (int k = 0; k < cols; k++) y[r] += P[w + (int64_t)r * cols + k] * x[k];
    return y;
  };
  auto rope = [&](double* v, int heads, int pos) {
    for (int h = 0; h < heads; h++)
      for (int p = 0; p < hd / 2; p++) {
        const double a = pos / std::pow((double)c.rope_theta, 2.0 * p / hd);
        double* x = v + h * hd + 2 * p;
        const double x0 = x[0], x1 = x[1];
        x[0] = x0 * std::cos(a) - x1 * std::sin(a);
        x[1] = x0 * std::sin(a) + x1 * std::cos(a);
      }
  };
  double total = 0;
  for (int b = 0; b < B; b++) {
    std::vector<std::vector<double>> x(T);
    for (int t = 0; t < T; t++)
      x[t].assign(&P[lay.tok_embed + (int64_t)in[b * T + t] * D], &P[lay.tok_embed + (int64_t)in[b * T + t] * D] + D);
    for (int l = 0; l < (int)lay.layers.size(); l++) {
      const auto& L = lay.layers[l];
      std::vector<double> q(T * qd), k(T * kvd), v(T * kvd);
      for (int t = 0; t < T; t++) {
        auto xn = rms(x[t].data(), L.attn_norm);
        auto qq = mv(xn, L.wq, qd, D), kk = mv(xn, L.wk, kvd, D), vv = mv(xn, L.wv, kvd, D);
        rope(qq.data(), c.n_heads, t);
        rope(kk.data(), c.n_kv_heads, t);
        std::copy(qq.begin(), qq.end(), q.begin() + t * qd);
        std::copy(kk.begin(), kk.end(), k.begin() + t * kvd);
        std::copy(vv.begin(), vv.end(), v.begin() + t * kvd);
      }
      auto att = c.attn_of(l) == AttnKind::Softmax ? attention_d(q, k, v, T, c.n_heads, c.n_kv_heads, hd)
                                                   : kinds_attention_d(c, c.attn_of(l), L, P, q, k, v, T);
      for (int t = 0; t < T; t++) {
        auto o = mv(std::vector<double>(att.begin() + t * qd, att.begin() + (t + 1) * qd), L.wo, D, qd);
        for (int i = 0; i < D; i++) x[t][i] += o[i];
        auto xn = rms(x[t].data(), L.ffn_norm);
        auto gg = mv(xn, L.w_gate, H, D), uu = mv(xn, L.w_up, H, D);
        for (int i = 0; i < H; i++) gg[i] = gg[i] / (1 + std::exp(-gg[i])) * uu[i];
        auto dn = mv(gg, L.w_down, D, H);
        for (int i = 0; i < D; i++) x[t][i] += dn[i];
      }
    }
    for (int t = 0; t < T; t++) {
      auto xf = rms(x[t].data(), lay.final_norm);
      auto lg = mv(xf, lay.tok_embed, V, D);
      double mx = -1e300, z = 0;
      for (double l : lg) mx = std::max(mx, l);
      for (double l : lg) z += std::exp(l - mx);
      total += std::log(z) + mx - lg[tg[b * T + t]];
    }
  }
  return total / (B * T);
}

TEST(TrainModel, LossGradientMatchesFiniteDifferencesOfAFloat64Forward) {
  ModelConfig c = tiny_config();
  ThreadPool pool(2);
  qkv::TrainModel m(c, &pool);
  m.init(5);
  // Larger weights than the init, and non-unit norms, so every path carries real gradient.
  std::mt19937 g(10);
  for (auto& p : m.params()) p *= 12.0f;
  for (auto [b, e] : m.layout().norms)
    for (int64_t i = b; i < e; i++) m.params()[i] = 0.5f + (float)(g() % 1000) / 1000.0f;
  const int B = 2, T = 6;
  std::vector<int> in(B * T), tg(B * T);
  for (auto& t : in) t = (int)(g() % c.vocab_size);
  for (auto& t : tg) t = (int)(g() % c.vocab_size);
  in[1] = in[4];  // a repeated token: its embedding gradient sums two rows

  m.zero_grads();
  const double loss = m.forward(in.data(), tg.data(), B, T);
  m.backward();
  const double want_loss = ref_loss(c, m.layout(), to_d(m.params()), in, tg, B, T);
  EXPECT_NEAR(loss, want_loss, 1e-4 * std::fabs(want_loss));
  auto fd =
      fd_grad(to_d(m.params()), [&](const std::vector<double>& p) { return ref_loss(c, m.layout(), p, in, tg, B, T); });
  const auto& lay = m.layout();
  auto part = [&](const std::string& what, int64_t off, int64_t n) {
    std::vector<float> a(m.grads().begin() + off, m.grads().begin() + off + n);
    std::vector<double> f(fd.begin() + off, fd.begin() + off + n);
    EXPECT_TRUE(GradNear(what, a, f, 5e-3, 1e-6));
  };
  const int64_t d = c.dim, q = c.q_dim(), kv = c.kv_dim(), h = c.hidden_dim;
  part("token embedding (tied classifier)", lay.tok_embed, c.vocab_size * d);
  for (int l = 0; l < c.n_layers; l++) {
    const auto& L = lay.layers[l];
    const std::string p = "layer " + std::to_string(l) + " ";
    part(p + "attn_norm", L.attn_norm, d);
    part(p + "wq", L.wq, q * d);
    part(p + "wk", L.wk, kv * d);
    part(p + "wv", L.wv, kv * d);
    part(p + "wo", L.wo, d * q);
    part(p + "ffn_norm", L.ffn_norm, d);
    part(p + "w_gate", L.w_gate, h * d);
    part(p + "w_down", L.w_down, d * h);
    part(p + "w_up", L.w_up, h * d);
  }
  part("final_norm", lay.final_norm, d);
}

// A block-sparse layer (block 2, its own block only, one global token, one random block: keys
// hidden at T = 8) and an additive one, against the float64 forward.
TEST(TrainModel, SparseAndAdditiveLayersGradientsMatchFiniteDifferences) {
  ModelConfig c = tiny_config();
  c.layer_attn = {AttnKind::BlockSparse, AttnKind::Additive};
  c.additive_dim = 3;
  c.sparse.block = 2;
  c.sparse.window_blocks = 0;
  c.sparse.global_tokens = 1;
  c.sparse.random_blocks = 1;
  c.sparse.seed = 3;
  ThreadPool pool(2);
  qkv::TrainModel m(c, &pool);
  m.init(7);
  std::mt19937 g(11);
  for (auto& p : m.params()) p *= 12.0f;
  for (auto [b, e] : m.layout().norms)
    for (int64_t i = b; i < e; i++) m.params()[i] = 0.5f + (float)(g() % 1000) / 1000.0f;
  const auto& lay = m.layout();
  for (int64_t i = 0; i < (int64_t)c.n_heads * c.additive_dim * c.head_dim; i++) {  // tanh off its flat ends
    m.params()[lay.layers[1].add_wq + i] *= 0.1f;
    m.params()[lay.layers[1].add_wk + i] *= 0.1f;
  }
  const int B = 2, T = 8;
  int hidden = 0;
  for (int i = 0; i < T; i++)
    for (int j = 0; j <= i; j++) hidden += !c.sparse.visible(i, j, T, true);
  ASSERT_GT(hidden, 4) << "the pattern must hide keys";
  std::vector<int> in(B * T), tg(B * T);
  for (auto& t : in) t = (int)(g() % c.vocab_size);
  for (auto& t : tg) t = (int)(g() % c.vocab_size);
  m.zero_grads();
  const double loss = m.forward(in.data(), tg.data(), B, T);
  m.backward();
  const double want_loss = ref_loss(c, lay, to_d(m.params()), in, tg, B, T);
  EXPECT_NEAR(loss, want_loss, 1e-4 * std::fabs(want_loss));
  auto fd = fd_grad(to_d(m.params()), [&](const std::vector<double>& p) { return ref_loss(c, lay, p, in, tg, B, T); });
  auto part = [&](const std::string& what, int64_t off, int64_t n) {
    std::vector<float> a(m.grads().begin() + off, m.grads().begin() + off + n);
    std::vector<double> f(fd.begin() + off, fd.begin() + off + n);
    EXPECT_TRUE(GradNear(what, a, f, 5e-3, 1e-6));
  };
  const int64_t d = c.dim, q = c.q_dim(), kv = c.kv_dim(), na = (int64_t)c.n_heads * c.additive_dim;
  part("token embedding", lay.tok_embed, c.vocab_size * d);
  for (int l = 0; l < 2; l++) {
    const auto& L = lay.layers[l];
    const std::string p = std::string(attn_kind_name(c.attn_of(l))) + " layer ";
    part(p + "wq", L.wq, q * d);
    part(p + "wk", L.wk, kv * d);
    part(p + "wv", L.wv, kv * d);
    part(p + "wo", L.wo, d * q);
  }
  part("additive W_q", lay.layers[1].add_wq, na * c.head_dim);
  part("additive W_k", lay.layers[1].add_wk, na * c.head_dim);
  part("additive v", lay.layers[1].add_v, na);
  EXPECT_EQ(lay.layers[0].add_wq, -1);
  EXPECT_EQ(lay.total, lay.layers[1].add_v + na + d) << "the additive parameters sit in the flat array";
}

TEST(TrainModel, RefusesWhatItCannotTrain) {
  ThreadPool pool(1);
  ModelConfig c = tiny_config();
  c.ffn = FfnKind::GELU;
  EXPECT_THROW(qkv::TrainModel(c, &pool), Error);
  c = tiny_config();
  c.norm = NormKind::LayerNorm;
  EXPECT_THROW(qkv::TrainModel(c, &pool), Error);
  c = tiny_config();
  qkv::TrainModel m(c, &pool);
  std::vector<int> bad = {0, 1, 99}, ok = {0, 1, 2};
  EXPECT_THROW(m.forward(bad.data(), ok.data(), 1, 3), Error);
  std::vector<int> long_in(20, 0);
  EXPECT_THROW(m.forward(long_in.data(), long_in.data(), 1, 20), Error);  // > seq_len
}

// ---- export: the checkpoint is the same function for the inference engine ---------------

Tokenizer toy_tokenizer(int vocab) {
  std::string text;
  for (int i = 0; i < 200; i++) text += "in the beginning was the word and the word was with god. ";
  return bpe_tokenizer(train_bpe(text, vocab));
}

class TrainExport : public ::testing::TestWithParam<bool> {};

// Plain, then with a block-sparse and an additive layer (their keys and tensors in the file).
TEST_P(TrainExport, GgufCheckpointGivesTheSameLossThroughTheInferenceEngine) {
  Tokenizer tok = toy_tokenizer(300);
  ModelConfig c = tiny_config(tok.vocab_size());
  if (GetParam()) {
    c.layer_attn = {AttnKind::Additive, AttnKind::BlockSparse};
    c.additive_dim = 5;
    c.sparse.block = 2;
    c.sparse.window_blocks = 0;
    c.sparse.global_tokens = 1;
    c.sparse.random_blocks = 1;
    c.sparse.seed = 9;
  }
  ThreadPool pool(2);
  qkv::TrainModel m(c, &pool);
  m.init(3);
  for (auto& p : m.params()) p *= 10.0f;  // a sharper function than the init's
  const int T = 7;
  std::mt19937 g(11);
  std::vector<int> in(T), tg(T);
  for (int t = 0; t < T; t++) in[t] = (int)(g() % c.vocab_size);
  for (int t = 0; t + 1 < T; t++) tg[t] = in[t + 1];
  tg[T - 1] = 5;
  const double loss = m.forward(in.data(), tg.data(), 1, T);
  for (QType type : {QType::F32, QType::F16}) {
    std::vector<uint8_t> bytes = llama2c_to_gguf(m.view(), tok, "test", type);
    auto blob = std::make_shared<VectorBlob>(bytes);
    auto tr = std::make_unique<Transformer>(load_model(blob), 0, std::make_shared<ThreadPool>(1));
    auto etok = embedded_tokenizer(blob);
    ASSERT_TRUE(etok);
    EXPECT_EQ(etok->encode("the word was god", true, false), tok.encode("the word was god", true, false));
    EXPECT_EQ(tr->config().layer_attn, c.layer_attn);
    tr->forward(in.data(), T, 0, true);
    double l = 0;
    for (int t = 0; t < T; t++) {
      std::vector<float> row(tr->logits() + (size_t)t * c.vocab_size, tr->logits() + (size_t)(t + 1) * c.vocab_size);
      l += cross_entropy_ref(row.data(), c.vocab_size, tg[t], 1.0f);
    }
    l /= T;
    EXPECT_NEAR(l, loss, type == QType::F32 ? 1e-4 * loss : 2e-2 * loss) << (type == QType::F32 ? "f32" : "f16");
  }
}
INSTANTIATE_TEST_SUITE_P(Kinds, TrainExport, ::testing::Values(false, true));

// ---- the trainer -------------------------------------------------------------------------

// ctest runs each test in its own process, several at once, and they share TempDir(): the file
// is written under a name of this process's and renamed into place, so no test ever reads one
// that another is in the middle of rewriting (same content either way).
std::string write_temp(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + name, tmp = path + "." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f << content;
  }
  std::rename(tmp.c_str(), path.c_str());
  return path;
}

// Short sentences in a seeded random order: structure a small model learns in a few dozen steps.
std::string toy_corpus() {
  const char* s[] = {"the cat sat on the mat.",     "the dog ran to the park.",   "a bird sang in the tree.",
                     "the sun rose over the hill.", "we walked along the river.", "she read a book by the fire."};
  std::mt19937 g(12);
  std::string text;
  for (int i = 0; i < 1500; i++) {
    text += s[g() % 6];
    text += (i % 8 == 7) ? "\n\n" : " ";
  }
  return text;
}

TrainConfig toy_train_config(const std::string& tag) {
  static const std::string data = write_temp("qkv_train_corpus.txt", toy_corpus());
  std::string conf =
      "dim = 32\nn_layers = 2\nn_heads = 4\nn_kv_heads = 2\nhidden_dim = 64\nseq_len = 32\n"
      "vocab = 300\nbatch = 4\nsteps = 40\nwarmup = 5\nlr = 1e-2\neval_interval = 20\n"
      "eval_batches = 2\nseed = 7\nquiet = true\nval_fraction = 0.1\n";
  return parse_train_config(conf, {"data=" + data, "out=" + ::testing::TempDir() + "qkv_train_" + tag + ".gguf"});
}

TEST(Trainer, LossFallsOnAShortText) {
  TrainConfig c = toy_train_config("falls");
  c.threads = 2;
  TrainResult r = run_training(c);
  ASSERT_EQ(r.losses.size(), 40u);
  double last = 0;
  for (int i = 35; i < 40; i++) last += r.losses[i] / 5;
  EXPECT_LT(last, 0.7 * r.losses[0]) << "first " << r.losses[0] << " last five " << last;
  EXPECT_LT(r.val_loss, 0.7 * r.losses[0]);
  // The checkpoint loads through the normal loader and generates text.
  auto blob = map_file(c.out);
  Transformer tr(load_model(blob), 0, std::make_shared<ThreadPool>(1));
  auto tok = embedded_tokenizer(blob);
  ASSERT_TRUE(tok);
  RunOptions o;
  o.prompt = "the cat";
  o.steps = 20;
  o.sampler.temperature = 0.0f;
  std::string out;
  run_generate(tr, *tok, o, [&](const std::string& p) { out += p; });
  EXPECT_EQ(out.rfind("the cat", 0), 0u) << out;
  EXPECT_GT(out.size(), std::string("the cat").size() + 5) << out;
}

TEST(Trainer, SameSeedSameLossesForAnyThreadCount) {
  TrainConfig a = toy_train_config("det_a"), b = toy_train_config("det_b"), c1 = toy_train_config("det_c");
  a.steps = b.steps = c1.steps = 8;
  a.warmup = b.warmup = c1.warmup = 2;
  a.threads = b.threads = 2;
  c1.threads = 1;
  TrainResult ra = run_training(a), rb = run_training(b), rc = run_training(c1);
  EXPECT_EQ(ra.losses, rb.losses);
  EXPECT_EQ(ra.losses, rc.losses);
  TrainConfig d = toy_train_config("det_d");
  d.steps = 8;
  d.warmup = 2;
  d.seed = 8;
  EXPECT_NE(run_training(d).losses, ra.losses);
}

TEST(Trainer, ResumeContinuesExactly) {
  TrainConfig full = toy_train_config("resume_full");
  full.steps = 12;
  full.eval_interval = 0;
  TrainResult rf = run_training(full);
  TrainConfig part = toy_train_config("resume_part");
  part.steps = 12;
  part.eval_interval = 0;
  part.stop_at = 5;
  std::remove(part.state.c_str());
  TrainResult r1 = run_training(part);
  part.stop_at = 0;
  part.resume = true;
  TrainResult r2 = run_training(part);
  EXPECT_EQ(r1.end_step, 5);
  EXPECT_EQ(r2.start_step, 5);
  std::vector<double> joined = r1.losses;
  joined.insert(joined.end(), r2.losses.begin(), r2.losses.end());
  EXPECT_EQ(joined, rf.losses);
  EXPECT_EQ(r2.val_loss, rf.val_loss);
  // A state from another configuration is refused, not silently mixed in.
  TrainConfig other = part;
  other.model.hidden_dim = 48;
  EXPECT_THROW(run_training(other), Error);
}

TEST(Trainer, BadConfigsAreRefusedClearly) {
  auto msg = [](const std::string& text, std::vector<std::string> ov = {}) {
    try {
      parse_train_config(text, ov, "t.conf");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::string ok = "dim=32\nn_layers=1\nn_heads=4\nhidden_dim=64\nseq_len=16\nvocab=300\ndata=x.txt\n";
  EXPECT_EQ(msg(ok), "(accepted)");
  EXPECT_NE(msg(ok + "dimm = 3\n").find("unknown key 'dimm'"), std::string::npos);
  EXPECT_NE(msg(ok + "lr = fast\n").find("t.conf line 8: lr = 'fast': not a number"), std::string::npos);
  EXPECT_NE(msg(ok + "n_heads = 5\n").find("not a multiple of n_heads"), std::string::npos);
  EXPECT_NE(msg(ok + "batch 4\n").find("expected key = value"), std::string::npos);
  EXPECT_NE(msg("n_layers=1\n").find("dim is missing"), std::string::npos);
  EXPECT_NE(msg(ok, {"steps=0"}).find("steps = '0': must be 1.."), std::string::npos);
  EXPECT_EQ(parse_train_config(ok, {"dim=64"}).model.dim, 64);  // overrides win
  TrainConfig c = parse_train_config(ok, {"data=/nonexistent/qkv.txt", "quiet=1"});
  EXPECT_THROW(run_training(c), Error);
}

// The step-wise Trainer fine-tuning a checkpoint: its starting point is the checkpoint's
// weights (the held-out loss equals the one the first run measured on its own parameters),
// states round-trip in memory, and what it cannot train is refused by name.
TEST(Trainer, FineTunesAGgufCheckpointAndRefusesQuantizedOnes) {
  TrainConfig c = toy_train_config("finetune");
  c.steps = 10;
  c.eval_interval = 0;
  c.threads = 2;
  const TrainResult r = run_training(c);  // ends with an evaluation of the final parameters
  std::ifstream f(c.data, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto blob = map_file(c.out);
  LoadedModel base = load_model(blob);
  auto pool = std::make_shared<ThreadPool>(2);
  TrainConfig ft = c;
  ft.steps = 4;
  ft.warmup = 0;
  Trainer t(ft, text, embedded_tokenizer(blob), &base, pool);
  EXPECT_EQ(t.model_config().dim, 32);
  EXPECT_EQ(t.model_config().vocab_size, base.config.vocab_size);
  EXPECT_DOUBLE_EQ(t.evaluate(), r.val_loss);  // f32 checkpoint: the same parameters exactly
  const double first = t.step().loss;
  EXPECT_TRUE(std::isfinite(first));
  const std::vector<uint8_t> state = t.save_state();
  const double second = t.step().loss;
  // A second trainer restored from the state takes the same step.
  Trainer u(ft, text, embedded_tokenizer(blob), &base, pool);
  u.load_state(state.data(), state.size());
  EXPECT_EQ(u.steps_done(), 1);
  EXPECT_EQ(u.step().loss, second);
  // Hostile states: truncated, or of another shape.
  EXPECT_THROW(u.load_state(state.data(), state.size() - 5), Error);
  std::vector<uint8_t> bad = state;
  bad[3] = 'X';
  EXPECT_THROW(u.load_state(bad.data(), bad.size()), Error);
  // Its checkpoint loads through the engine.
  std::vector<uint8_t> g = t.to_gguf("ft", QType::F16);
  EXPECT_EQ(load_model(std::make_shared<VectorBlob>(g)).config.dim, 32);
  // A quantized model is refused, naming the type.
  std::vector<uint8_t> q8 = llama2c_to_gguf(base, *embedded_tokenizer(blob), "q8", QType::Q8_0);
  auto qblob = std::make_shared<VectorBlob>(q8);
  LoadedModel qm = load_model(qblob);
  try {
    Trainer q(ft, text, embedded_tokenizer(qblob), &qm, pool);
    ADD_FAILURE() << "a q8_0 model was accepted for fine-tuning";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("q8_0"), std::string::npos) << e.what();
  }
  // Empty text and impossible options are refused.
  EXPECT_THROW(Trainer(ft, "", embedded_tokenizer(blob), &base, pool), Error);
  TrainConfig bad_cfg = ft;
  bad_cfg.warmup = 100;
  EXPECT_THROW(Trainer(bad_cfg, text, embedded_tokenizer(blob), &base, pool), Error);
}

// `init = MODEL.gguf` in a config fine-tunes through run_training (the CLI's path): it starts
// from the checkpoint's loss, not a fresh model's.
TEST(Trainer, ConfigInitFineTunesACheckpoint) {
  TrainConfig c = toy_train_config("init_base");
  c.steps = 30;
  c.eval_interval = 0;
  c.threads = 2;
  const TrainResult base = run_training(c);
  const std::string data = c.data;
  TrainConfig ft =
      parse_train_config("steps = 3\nwarmup = 0\nlr = 1e-4\nbatch = 4\nseq_len = 16\nquiet = true\nthreads = 2\n",
                         {"data=" + data, "init=" + c.out, "out=" + ::testing::TempDir() + "qkv_train_init_ft.gguf"});
  const TrainResult r = run_training(ft);
  ASSERT_EQ(r.losses.size(), 3u);
  EXPECT_LT(r.losses[0], 0.8 * base.losses[0]) << "fresh " << base.losses[0] << ", fine-tune " << r.losses[0];
  EXPECT_EQ(load_model(map_file(ft.out)).config.seq_len, 32);  // the model keeps its context
  try {
    parse_train_config("dim = 32\n", {"data=" + data, "init=" + c.out});
    ADD_FAILURE() << "init with a shape was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("brings its own shape"), std::string::npos) << e.what();
  }
}

TEST(Trainer, ScheduleWarmsUpThenFollowsACosine) {
  TrainConfig c;
  c.lr = 1.0f;
  c.min_lr = 0.1f;
  c.warmup = 10;
  c.steps = 110;
  EXPECT_FLOAT_EQ(lr_at(c, 0), 0.1f);
  EXPECT_FLOAT_EQ(lr_at(c, 9), 1.0f);
  EXPECT_FLOAT_EQ(lr_at(c, 10), 1.0f);
  EXPECT_NEAR(lr_at(c, 60), 0.55f, 1e-6);
  EXPECT_NEAR(lr_at(c, 110), 0.1f, 1e-6);
}

// ---- BPE tokenizer learning --------------------------------------------------------------

std::string decode_all(const Tokenizer& t, const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 1; i < ids.size(); i++) s += t.decode(ids[i - 1], ids[i]);
  return s;
}

// Valid UTF-8 of any script round-trips, through merged pieces, character pieces and byte
// fallback alike. (U+2581 itself is the space marker and decodes as a space, as in SentencePiece.)
TEST(Bpe, RoundTripsArbitraryUtf8) {
  Tokenizer t = toy_tokenizer(320);
  const std::vector<std::string> texts = {
      "the word was god",          "  two  spaces  ",
      "tabs\tand\nnewlines\r\n",   "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80",
      std::string("nul\0byte", 8), "\xFF\xFE invalid bytes",
      "<0x41> <s> </s> <unk>"};
  for (const auto& s : texts) EXPECT_EQ(decode_all(t, t.encode(s, true, false)), s) << s;
  std::mt19937 g(13);
  auto utf8 = [](uint32_t cp) {
    std::string o;
    if (cp < 0x80) o += (char)cp;
    else if (cp < 0x800) o += (char)(0xC0 | cp >> 6), o += (char)(0x80 | (cp & 63));
    else if (cp < 0x10000)
      o += (char)(0xE0 | cp >> 12), o += (char)(0x80 | (cp >> 6 & 63)), o += (char)(0x80 | (cp & 63));
    else
      o += (char)(0xF0 | cp >> 18), o += (char)(0x80 | (cp >> 12 & 63)), o += (char)(0x80 | (cp >> 6 & 63)),
          o += (char)(0x80 | (cp & 63));
    return o;
  };
  const uint32_t ranges[][2] = {{1, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFD}, {0x10000, 0x10FFFF}};
  for (int k = 0; k < 200; k++) {
    std::string s;
    for (int i = 0; i < 30; i++) {
      const auto& r = ranges[g() % 5];
      uint32_t cp = r[0] + g() % (r[1] - r[0] + 1);
      if (cp == 0x2581) cp = 'x';
      s += g() % 3 == 0 ? std::string("the ") : utf8(cp);
    }
    ASSERT_EQ(decode_all(t, t.encode(s, true, false)), s);
  }
}

TEST(Bpe, LearnedMergesShortenHeldOutTextAndReplayInScoreOrder) {
  const std::string text = toy_corpus();
  const std::string train = text.substr(0, text.size() * 3 / 4), held = text.substr(text.size() * 3 / 4);
  BpeVocab v = train_bpe(train, 400);  // the toy text runs out of repeated pairs before 400
  EXPECT_GT(v.n_merges, 50);
  EXPECT_EQ((int)v.pieces.size(), 259 + v.n_chars + v.n_merges);
  Tokenizer t = bpe_tokenizer(v);
  // Without merges every character (ASCII here: every byte) is a token; with them the held-out
  // text takes far fewer.
  const size_t tokens = t.encode(held, false, false).size();
  EXPECT_LT(tokens, held.size() / 3) << tokens << " tokens for " << held.size() << " characters";
  // Scores: minus the merge rank (later merges lower), every merge piece made of two pieces.
  const int first = 259 + v.n_chars;
  for (int i = first; i < (int)v.pieces.size(); i++) {
    EXPECT_EQ(v.scores[i], -(float)(i - first));
    bool split = false;
    for (size_t cut = 1; cut < v.pieces[i].size() && !split; cut++) {
      auto a = std::find(v.pieces.begin(), v.pieces.end(), v.pieces[i].substr(0, cut));
      auto b = std::find(v.pieces.begin(), v.pieces.end(), v.pieces[i].substr(cut));
      split = a != v.pieces.end() && b != v.pieces.end() && a - v.pieces.begin() < i && b - v.pieces.begin() < i;
    }
    EXPECT_TRUE(split) << v.pieces[i];
  }
  // The most frequent word of the text is one token.
  EXPECT_EQ(t.encode("the", false, false).size(), 1u);
}

TEST(Bpe, FilesLoadBackAsTheSameTokenizer) {
  BpeVocab v = train_bpe(toy_corpus(), 350);
  Tokenizer t = bpe_tokenizer(v);
  const std::string probe = "the dog sang over the river by the fire.";
  auto gg = std::make_shared<VectorBlob>(bpe_to_gguf(v, "tok"));
  Tokenizer from_gguf = load_gguf_tokenizer(GgufFile::parse(gg));
  EXPECT_EQ(from_gguf.encode(probe, true, false), t.encode(probe, true, false));
  std::vector<uint8_t> bin = bpe_to_llama2c(v);
  Tokenizer from_bin = Tokenizer::from_llama2c(bin.data(), bin.size(), (int)v.pieces.size());
  EXPECT_EQ(from_bin.encode(probe, true, false), t.encode(probe, true, false));
}

TEST(Bpe, RefusesImpossibleRequests) {
  EXPECT_THROW(train_bpe("", 300), Error);
  EXPECT_THROW(train_bpe("abc", 259), Error);
  EXPECT_THROW(train_bpe("abc", 70000), Error);
}

}  // namespace
