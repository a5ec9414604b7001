// qkv_encdec_bench [THREADS]: encoder-decoder speed on a random T5-shaped model (dim 512, 8
// heads, 6 + 6 layers, hidden 1024 gated GELU, vocab 8000, f32): encoding a 128-token source,
// then greedy decoding of 64 target tokens with the cached cross K/V. The same model with
// sinusoidal positions instead of T5's relative bias (attention_flash instead of the direct biased
// loop) is timed in the same run, so the cost of the bias is a same-run ratio.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "model/encdec.h"

using namespace qkv;

namespace {
double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

struct Store {
  std::vector<std::vector<float>> bufs;
  std::mt19937 rng{1};
  const float* fill(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    bufs.emplace_back(n);
    for (float& x : bufs.back()) x = d(rng);
    return bufs.back().data();
  }
  Tensor mat(int rows, int cols) {
    Tensor t;
    t.data = fill((size_t)rows * cols, -1.7f / std::sqrt((float)cols), 1.7f / std::sqrt((float)cols));
    t.rows = rows;
    t.cols = cols;
    return t;
  }
};

EncDecModelData make(Store& s, bool relative) {
  EncDecModelData m;
  ModelConfig& c = m.config;
  c.arch = relative ? "t5" : "t5-sinusoidal";
  c.dim = 512;
  c.hidden_dim = 1024;
  c.n_layers = 6;
  c.n_heads = c.n_kv_heads = 8;
  c.head_dim = 64;
  c.vocab_size = 8000;
  c.seq_len = 512;
  c.causal = false;
  c.pos = relative ? PosKind::RelativeBucket : PosKind::Sinusoidal;
  c.ffn = FfnKind::GeGLU;
  c.norm_eps = 1e-6f;
  m.encdec.n_dec_layers = 6;
  m.config.attn_scale = 1.0f / 8.0f;
  const int d = c.dim, h = c.hidden_dim;
  m.weights.tok_embed = s.mat(c.vocab_size, d);
  auto layer = [&](bool dec, int l) {
    EncDecLayerWeights L;
    L.attn_norm = s.fill(d, 0.9f, 1.1f);
    L.wq = s.mat(d, d), L.wk = s.mat(d, d), L.wv = s.mat(d, d), L.wo = s.mat(d, d);
    if (relative && l == 0) L.rel_bias = s.fill((size_t)c.rel_buckets * c.n_heads, -1.0f, 1.0f);
    if (dec) {
      L.cross_norm = s.fill(d, 0.9f, 1.1f);
      L.cq = s.mat(d, d), L.ck = s.mat(d, d), L.cv = s.mat(d, d), L.co = s.mat(d, d);
    }
    L.ffn_norm = s.fill(d, 0.9f, 1.1f);
    L.w_gate = s.mat(h, d), L.w_up = s.mat(h, d), L.w_down = s.mat(d, h);
    return L;
  };
  for (int l = 0; l < 6; l++) m.weights.enc.push_back(layer(false, l));
  for (int l = 0; l < 6; l++) m.weights.dec.push_back(layer(true, l));
  m.weights.enc_norm = s.fill(d, 0.9f, 1.1f);
  m.weights.dec_norm = s.fill(d, 0.9f, 1.1f);
  m.weights.classifier = m.weights.tok_embed;
  return m;
}

void run(EncDecModelData data, int threads, int reps) {
  const std::string name = data.config.arch;
  EncoderDecoder model(std::move(data), 0, std::make_shared<ThreadPool>(threads));
  std::vector<int> src(128);
  for (size_t i = 0; i < src.size(); i++) src[i] = (int)(i * 37 % 8000);
  double best_enc = 1e30, best_dec = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = now_ms();
    model.encode(src.data(), (int)src.size());
    best_enc = std::min(best_enc, now_ms() - t0);
    int tok = 0;
    t0 = now_ms();
    for (int pos = 0; pos < 64; pos++) {
      const float* l = model.decode(&tok, 1, pos);
      int best = 0;
      for (int v = 1; v < 8000; v++)
        if (l[v] > l[best]) best = v;
      tok = best;
    }
    best_dec = std::min(best_dec, now_ms() - t0);
  }
  printf("%-14s threads %d | encode 128 tokens: %7.1f ms (%6.0f tok/s) | decode 64 tokens: %7.1f ms (%6.1f tok/s)\n",
         name.c_str(), threads, best_enc, 128 / (best_enc / 1000), best_dec, 64 / (best_dec / 1000));
}
}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::max(1, atoi(argv[1])) : 1;
  Store s;
  printf("qkv_encdec_bench: random T5-shaped model, dim 512, 8 heads, 6+6 layers, f32; best of 3\n");
  run(make(s, true), threads, 3);
  run(make(s, false), threads, 3);
  return 0;
}
