// The encoder-decoder training loop: config, generated data, AdamW, evaluation, t5 GGUF export.
#include "encdec_trainer.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "../common.h"
#include "../engine/encdec_generate.h"
#include "../formats/gguf_encdec.h"
#include "../formats/gguf_writer.h"
#include "../kernels/optim.h"
#include "trainer.h"

namespace qkv {

EncDecTrainConfig parse_encdec_train_config(const std::string& text, const std::vector<std::string>& overrides,
                                            const std::string& origin) {
  EncDecTrainConfig c;
  int additive_dim = 0;
  for_each_config_entry(text, overrides, origin, [&](const ConfigEntry& e) {
    const std::string &k = e.key, &v = e.value;
    EncDecTrainShape& s = c.shape;
    if (parse_run_config_entry(c, e)) return;
    if (k == "arch") {
      if (v != "encdec") e.bad("this trainer takes arch = encdec");
    } else if (k == "dim") s.dim = (int)e.i64(1, 4096);
    else if (k == "n_heads") s.n_heads = (int)e.i64(1, 256);
    else if (k == "hidden_dim") s.hidden_dim = (int)e.i64(1, 16384);
    else if (k == "enc_layers") s.enc_layers = (int)e.i64(1, 64);
    else if (k == "dec_layers") s.dec_layers = (int)e.i64(1, 64);
    else if (k == "seq_len") s.seq_len = (int)e.i64(2, 4096);
    else if (k == "rel_buckets") s.rel_buckets = (int)e.i64(4, 256);
    else if (k == "cross_attention") {
      if (v != "softmax" && v != "additive") e.bad("cross_attention is softmax or additive");
      if (v == "softmax") s.additive_cross = 0;
      else if (s.additive_cross == 0) s.additive_cross = -1;  // width: additive_dim, else the head width
    } else if (k == "additive_dim") additive_dim = (int)e.i64(1, 4096);
    else if (k == "task") {
      if (v != "dates") e.bad("the only generated task is 'dates'");
      c.task = v;
    } else if (k == "val_examples") c.val_examples = (int)e.i64(1, 1 << 20);
    else if (k == "data_seed") c.data_seed = (uint64_t)e.i64(0, 1LL << 62);
    else
      fail(ErrorCode::BadArgument,
           e.where + ": unknown key '" + k +
               "' for arch = encdec (known: arch dim n_heads hidden_dim enc_layers dec_layers seq_len "
               "rel_buckets cross_attention additive_dim task val_examples data_seed " +
               kTrainRunKeys + ")");
  });
  finish_run_config(c);
  if (c.shape.additive_cross != 0)
    c.shape.additive_cross = additive_dim > 0 ? additive_dim : c.shape.dim / std::max(1, c.shape.n_heads);
  else if (additive_dim > 0)
    fail(ErrorCode::BadArgument, "train config: additive_dim needs cross_attention = additive");
  c.shape.vocab = (int)char_vocab_pieces(date_alphabet()).size();
  c.shape.model_config();  // shape errors now, before any work
  return c;
}

// ---- vocabulary and export ------------------------------------------------------------------

static const char* kSpace = "\xE2\x96\x81";  // U+2581

std::vector<std::string> char_vocab_pieces(const std::string& alphabet) {
  std::vector<std::string> p = {"<pad>", "</s>", "<unk>"};
  for (char ch : alphabet) {
    std::string s = ch == ' ' ? std::string(kSpace) : std::string(1, ch);
    bool dup = false;
    for (const auto& q : p) dup |= q == s;
    if (!dup) p.push_back(s);
  }
  return p;
}

static void add_char_tokenizer(GgufWriter& w, const std::string& alphabet) {
  const std::vector<std::string> pieces = char_vocab_pieces(alphabet);
  std::vector<float> scores(pieces.size(), -1.0f);
  std::vector<int32_t> types(pieces.size(), 1);
  scores[0] = scores[1] = scores[2] = 0.0f;
  types[0] = types[1] = 3;
  types[2] = 2;
  add_t5_tokenizer(w, pieces, scores, types, false, true);
}

Tokenizer char_unigram_tokenizer(const std::string& alphabet) {
  // Through the GGUF keys and the loader, so training tokenizes exactly as inference will.
  GgufWriter w;
  w.add_string("general.architecture", "t5");
  add_char_tokenizer(w, alphabet);
  return load_gguf_unigram(GgufFile::parse(std::make_shared<VectorBlob>(w.finish())));
}

std::vector<uint8_t> encdec_to_gguf(const EncDecModelData& m, const std::string& alphabet, const std::string& name,
                                    QType type) {
  const ModelConfig& c = m.config;
  GgufWriter w;
  w.add_string("general.architecture", "t5");
  w.add_string("general.name", name);
  w.add_string("general.license", "MIT");
  add_char_tokenizer(w, alphabet);
  w.add_u32("t5.context_length", c.seq_len);
  w.add_u32("t5.embedding_length", c.dim);
  w.add_u32("t5.feed_forward_length", c.hidden_dim);
  w.add_u32("t5.block_count", c.n_layers);
  w.add_u32("t5.decoder_block_count", m.encdec.n_dec_layers);
  w.add_u32("t5.attention.head_count", c.n_heads);
  w.add_u32("t5.attention.key_length", c.head_dim);
  w.add_u32("t5.attention.value_length", c.head_dim);
  w.add_f32("t5.attention.layer_norm_epsilon", c.norm_eps);
  w.add_f32("t5.attention.layer_norm_rms_epsilon", c.norm_eps);
  w.add_u32("t5.attention.relative_buckets_count", c.rel_buckets);
  w.add_u32("t5.decoder_start_token_id", m.encdec.decoder_start_id);
  add_attention_kinds(w, "t5.cross_attention.layer_kinds", "t5.attention.", m.encdec.cross_attn, c);
  auto mat = [&](const std::string& n, const Tensor& t) {
    w.add_tensor(n, {(uint64_t)t.cols, (uint64_t)t.rows}, t.f32(), type);
  };
  auto vec = [&](const std::string& n, const float* p, uint64_t len) { w.add_tensor_f32(n, {len}, p); };
  const EncDecWeights& W = m.weights;
  mat("token_embd.weight", W.tok_embed);
  auto layer = [&](const std::string& p, const EncDecLayerWeights& L, bool dec) {
    vec(p + "attn_norm.weight", L.attn_norm, c.dim);
    mat(p + "attn_q.weight", L.wq);
    mat(p + "attn_k.weight", L.wk);
    mat(p + "attn_v.weight", L.wv);
    mat(p + "attn_o.weight", L.wo);
    if (L.rel_bias)
      w.add_tensor_f32(p + "attn_rel_b.weight", {(uint64_t)c.n_heads, (uint64_t)c.rel_buckets}, L.rel_bias);
    if (dec) {
      vec(p + "cross_attn_norm.weight", L.cross_norm, c.dim);
      mat(p + "cross_attn_q.weight", L.cq);
      mat(p + "cross_attn_k.weight", L.ck);
      mat(p + "cross_attn_v.weight", L.cv);
      mat(p + "cross_attn_o.weight", L.co);
      if (L.cross_add.wq) add_additive_tensors(w, p, "cross_attn", L.cross_add, c);
    }
    vec(p + "ffn_norm.weight", L.ffn_norm, c.dim);
    mat(p + "ffn_up.weight", L.w_up);
    mat(p + "ffn_down.weight", L.w_down);
  };
  for (size_t l = 0; l < W.enc.size(); l++) layer("enc.blk." + std::to_string(l) + ".", W.enc[l], false);
  vec("enc.output_norm.weight", W.enc_norm, c.dim);
  for (size_t l = 0; l < W.dec.size(); l++) layer("dec.blk." + std::to_string(l) + ".", W.dec[l], true);
  vec("dec.output_norm.weight", W.dec_norm, c.dim);
  return w.finish();
}

std::string encdec_greedy(EncoderDecoder& model, const Tokenizer& tok, const std::string& source, int max_len) {
  const std::vector<int> src = encdec_source_ids(tok, source);
  model.encode(src.data(), (int)src.size());
  int token = model.encdec().decoder_start_id, prev = -1;
  std::string out;
  const int V = model.config().vocab_size;
  for (int pos = 0; pos < std::min(max_len, model.context()); pos++) {
    const float* logits = model.decode(&token, 1, pos);
    int best = 0;
    for (int i = 1; i < V; i++)
      if (logits[i] > logits[best]) best = i;
    if (tok.is_eog(best)) break;
    if (!tok.is_control(best)) out += tok.decode(prev, best);
    prev = token = best;
  }
  return out;
}

// ---- the loop -------------------------------------------------------------------------------

static std::vector<int> target_ids(const Tokenizer& tok, const std::string& t) { return tok.encode(t, false, true); }

EncDecTrainResult run_encdec_training(const EncDecTrainConfig& cfg) {
  using clk = std::chrono::steady_clock;
  auto say = [&](const char* fmt, auto... args) {
    if (cfg.quiet) return;
    fprintf(stderr, fmt, args...);
    fflush(stderr);
  };
  const std::string alphabet = date_alphabet();
  const Tokenizer tok = char_unigram_tokenizer(alphabet);
  EncDecTrainShape shape = cfg.shape;
  shape.vocab = tok.vocab_size();
  auto pool = std::make_shared<ThreadPool>(cfg.threads > 0 ? cfg.threads : ThreadPool::hardware_threads());
  EncDecTrainModel model(shape, pool.get());
  model.init(cfg.seed);
  const int64_t P = model.layout().total;
  say("encoder-decoder: dim %d, %d heads, ffn %d, %d+%d layers, vocab %d | %.3fM parameters | batch %d | %d threads\n",
      shape.dim, shape.n_heads, shape.hidden_dim, shape.enc_layers, shape.dec_layers, shape.vocab, P / 1e6, cfg.batch,
      pool->size());

  auto to_ids = [&](const std::vector<Seq2SeqExample>& ex, std::vector<std::vector<int>>& s,
                    std::vector<std::vector<int>>& t) {
    s.clear();
    t.clear();
    for (const auto& e : ex) {
      s.push_back(encdec_source_ids(tok, e.source));
      t.push_back(target_ids(tok, e.target));
    }
  };
  const std::vector<Seq2SeqExample> val = generate_dates(cfg.data_seed + 1, cfg.val_examples, DateSplit::HeldOut);
  std::vector<std::vector<int>> vs, vt;
  to_ids(val, vs, vt);

  const std::vector<ParamSegment> segs = optimizer_segments(model.layout().norms, P);
  std::vector<float> m(P, 0.0f), v(P, 0.0f);

  auto evaluate = [&](double* exact) {
    double sum = 0.0;
    int64_t toks = 0;
    for (size_t i = 0; i < vs.size(); i += cfg.batch) {
      const size_t j = std::min(vs.size(), i + cfg.batch);
      std::vector<std::vector<int>> s(vs.begin() + i, vs.begin() + j), t(vt.begin() + i, vt.begin() + j);
      int64_t n = 0;
      for (auto& x : t) n += (int64_t)x.size();
      sum += model.forward(s, t) * n;
      toks += n;
    }
    if (exact) {
      EncoderDecoder inf(model.view(), 0, pool);
      int ok = 0;
      for (const auto& e : val) ok += encdec_greedy(inf, tok, e.source, 16) == e.target;
      *exact = (double)ok / val.size();
    }
    return sum / toks;
  };
  auto save = [&]() {
    std::vector<uint8_t> g = encdec_to_gguf(model.view(), alphabet, cfg.name, parse_qtype(cfg.dtype));
    write_file_atomic(cfg.out, g.data(), g.size());
  };

  EncDecTrainResult res;
  res.params = P;
  const auto t_start = clk::now();
  std::vector<std::vector<int>> bs, bt;
  for (int step = 0; step < cfg.steps; step++) {
    // A fresh batch per step, a function of (data_seed, step) alone.
    to_ids(generate_dates(cfg.data_seed * 1000003ull + (uint64_t)step * 7919ull + 11, cfg.batch, DateSplit::Train), bs,
           bt);
    model.zero_grads();
    const double loss = model.forward(bs, bt);
    if (!std::isfinite(loss))
      fail(ErrorCode::Internal,
           "the loss became " + std::to_string(loss) + " at step " + std::to_string(step) + "; lower lr");
    model.backward();
    const float lr = lr_at(cfg, step);
    const double norm = optimizer_step(model.params().data(), model.grads(), m.data(), v.data(), segs, cfg, lr, step);
    res.losses.push_back(loss);
    const double el = std::chrono::duration<double>(clk::now() - t_start).count();
    if (cfg.eval_interval > 0 && (step + 1) % cfg.eval_interval == 0 && step + 1 < cfg.steps) {
      double ex = 0;
      const double vl = evaluate(&ex);
      say("step %5d/%d | loss %.4f | val %.3e | exact %.1f%% | lr %.2e | %.0f s\n", step + 1, cfg.steps, loss, vl,
          100 * ex, lr, el);
      save();
    } else if ((step + 1) % cfg.log_interval == 0) {
      say("step %5d/%d | loss %.4f | lr %.2e | grad norm %.3f | %.0f s\n", step + 1, cfg.steps, loss, lr, norm, el);
    }
  }
  res.seconds = std::chrono::duration<double>(clk::now() - t_start).count();
  res.val_loss = evaluate(&res.val_exact);
  save();
  say("done: %d steps in %.0f s | validation loss %.3e (ppl %.5f) | exact match %.2f%% of %d held-out dates | wrote %s\n",
      cfg.steps, res.seconds, res.val_loss, std::exp(res.val_loss), 100 * res.val_exact, (int)val.size(),
      cfg.out.c_str());
  return res;
}

}  // namespace qkv
