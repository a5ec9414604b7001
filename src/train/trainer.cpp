// The training loop: config, data, optimizer, schedule, evaluation, checkpoints, resume.
#include "trainer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "../common.h"
#include "../formats/file.h"
#include "../formats/gguf_writer.h"
#include "../formats/loader.h"
#include "../kernels/optim.h"
#include "../tokenizer/tokenizer.h"
#include "bpe.h"
#include "model.h"
#include "rng.h"

namespace qkv {

// ---- config -------------------------------------------------------------------------------

static std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

TrainConfig parse_train_config(const std::string& text, const std::vector<std::string>& overrides,
                               const std::string& origin) {
  TrainConfig c;
  c.model.dim = 0;
  int n_heads = 0, n_kv_heads = 0;
  auto set = [&](const std::string& k, const std::string& v, const std::string& where) {
    auto bad = [&](const std::string& why) { fail(ErrorCode::BadArgument, where + ": " + k + " = '" + v + "': " + why); };
    auto i64 = [&](long long lo, long long hi) {
      char* end = nullptr;
      errno = 0;
      long long r = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || errno) bad("not an integer");
      if (r < lo || r > hi) bad("must be " + std::to_string(lo) + ".." + std::to_string(hi));
      return r;
    };
    auto f64 = [&](double lo, double hi) {
      char* end = nullptr;
      double r = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || std::isnan(r)) bad("not a number");
      if (r < lo || r > hi) bad("must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return r;
    };
    auto flag = [&]() {
      if (v == "1" || v == "true" || v == "yes") return true;
      if (v == "0" || v == "false" || v == "no") return false;
      bad("must be true or false");
      return false;
    };
    if (k == "dim") c.model.dim = (int)i64(1, 1 << 14);
    else if (k == "n_layers") c.model.n_layers = (int)i64(1, 256);
    else if (k == "n_heads") n_heads = (int)i64(1, 1024);
    else if (k == "n_kv_heads") n_kv_heads = (int)i64(1, 1024);
    else if (k == "hidden_dim") c.model.hidden_dim = (int)i64(1, 1 << 16);
    else if (k == "seq_len") c.model.seq_len = (int)i64(2, 1 << 14);
    else if (k == "vocab") c.vocab = (int)i64(260, 65536);
    else if (k == "tokenizer") c.tokenizer = v;
    else if (k == "data") c.data = v;
    else if (k == "val_fraction") c.val_fraction = f64(0.0, 0.5);
    else if (k == "batch") c.batch = (int)i64(1, 4096);
    else if (k == "steps") c.steps = (int)i64(1, 100000000);
    else if (k == "warmup") c.warmup = (int)i64(0, 100000000);
    else if (k == "lr") c.lr = (float)f64(0.0, 10.0);
    else if (k == "min_lr") c.min_lr = (float)f64(0.0, 10.0);
    else if (k == "weight_decay") c.weight_decay = (float)f64(0.0, 10.0);
    else if (k == "clip") c.clip = (float)f64(0.0, 1e9);
    else if (k == "beta1") c.beta1 = (float)f64(0.0, 0.999999);
    else if (k == "beta2") c.beta2 = (float)f64(0.0, 0.999999);
    else if (k == "seed") c.seed = (uint64_t)i64(0, (1LL << 62));
    else if (k == "eval_interval") c.eval_interval = (int)i64(0, 100000000);
    else if (k == "eval_batches") c.eval_batches = (int)i64(1, 100000);
    else if (k == "log_interval") c.log_interval = (int)i64(1, 100000000);
    else if (k == "out") c.out = v;
    else if (k == "state") c.state = v;
    else if (k == "dtype") {
      if (v != "f32" && v != "f16") bad("must be f32 or f16");
      c.dtype = v;
    } else if (k == "name") c.name = v;
    else if (k == "threads") c.threads = (int)i64(0, 256);
    else if (k == "resume") c.resume = flag();
    else if (k == "quiet") c.quiet = flag();
    else if (k == "stop_at") c.stop_at = (int)i64(0, 100000000);
    else
      fail(ErrorCode::BadArgument, where + ": unknown key '" + k +
                                       "' (known: dim n_layers n_heads n_kv_heads hidden_dim seq_len vocab tokenizer data "
                                       "val_fraction batch steps warmup lr min_lr weight_decay clip beta1 beta2 seed "
                                       "eval_interval eval_batches log_interval out state dtype name threads resume stop_at)");
  };
  auto line_kv = [&](const std::string& raw, const std::string& where) {
    std::string line = raw.substr(0, raw.find('#'));
    if (trim(line).empty()) return;
    size_t eq = line.find('=');
    if (eq == std::string::npos) fail(ErrorCode::BadArgument, where + ": expected key = value, got '" + trim(raw) + "'");
    set(trim(line.substr(0, eq)), trim(line.substr(eq + 1)), where);
  };
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); n++) line_kv(line, origin + " line " + std::to_string(n));
  for (const auto& o : overrides) line_kv(o, "argument '" + o + "'");

  ModelConfig& m = c.model;
  auto need = [](bool ok, const std::string& msg) {
    if (!ok) fail(ErrorCode::BadArgument, "train config: " + msg);
  };
  need(m.dim > 0, "dim is missing");
  need(m.n_layers > 0, "n_layers is missing");
  need(n_heads > 0, "n_heads is missing");
  need(m.hidden_dim > 0, "hidden_dim is missing");
  need(m.seq_len > 0, "seq_len is missing");
  need(!c.data.empty(), "data (a UTF-8 text file) is missing");
  need(!c.tokenizer.empty() || c.vocab > 0, "give a tokenizer file or a vocab size to learn one");
  need(m.dim % n_heads == 0, "dim " + std::to_string(m.dim) + " is not a multiple of n_heads " + std::to_string(n_heads));
  m.n_heads = n_heads;
  m.n_kv_heads = n_kv_heads > 0 ? n_kv_heads : n_heads;
  need(m.n_kv_heads <= n_heads && n_heads % m.n_kv_heads == 0,
       "n_heads " + std::to_string(n_heads) + " is not a multiple of n_kv_heads " + std::to_string(m.n_kv_heads));
  m.head_dim = m.dim / n_heads;
  need(m.head_dim % 2 == 0, "head dim (dim / n_heads) must be even for RoPE");
  need(c.warmup <= c.steps, "warmup is longer than steps");
  if (c.min_lr < 0) c.min_lr = c.lr / 10;
  if (c.state.empty()) c.state = c.out + ".state";
  if (c.name.empty()) c.name = c.out.substr(c.out.find_last_of('/') + 1);
  return c;
}

float lr_at(const TrainConfig& c, int step) {
  if (step < c.warmup) return c.lr * (float)(step + 1) / (float)c.warmup;
  const double span = c.steps - c.warmup;
  const double t = span > 0 ? std::min(1.0, (step - c.warmup) / span) : 1.0;
  return (float)(c.min_lr + 0.5 * (c.lr - c.min_lr) * (1.0 + std::cos(3.141592653589793 * t)));
}

// ---- data ---------------------------------------------------------------------------------

static std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(ErrorCode::Io, "cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Documents are separated by blank lines; each is encoded with BOS and the dummy prefix, as a
// prompt is encoded at generation time.
static std::vector<int> encode_documents(const Tokenizer& tok, const std::string& text) {
  std::vector<int> ids;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find("\n\n", pos);
    if (end == std::string::npos) end = text.size();
    std::string doc = text.substr(pos, end - pos);
    while (!doc.empty() && (doc.back() == '\n' || doc.back() == '\r')) doc.pop_back();
    size_t b = doc.find_first_not_of('\n');
    if (b != std::string::npos) {
      std::vector<int> d = tok.encode(doc.substr(b), true, false);
      ids.insert(ids.end(), d.begin(), d.end());
    }
    pos = end + 2;
  }
  return ids;
}

// ---- state file: everything needed to continue exactly --------------------------------------

static constexpr char kStateMagic[8] = {'Q', 'K', 'V', 'T', 'R', 'N', '0', '1'};

static std::string fingerprint(const TrainConfig& c, int64_t n_params) {
  return c.model.describe() + " | batch " + std::to_string(c.batch) + " | seed " + std::to_string(c.seed) +
         " | params " + std::to_string(n_params);
}

static void write_file_atomic(const std::string& path, const void* data, size_t n) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(static_cast<const char*>(data), (std::streamsize)n);
    if (!f) fail(ErrorCode::Io, "cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(ErrorCode::Io, "cannot rename " + tmp + " to " + path);
}

struct OptState {
  int step = 0;
  uint64_t rng = 0;
  std::vector<float> m, v;
};

static void save_state(const std::string& path, const std::string& fp, const OptState& s, const std::vector<float>& p) {
  std::vector<uint8_t> o;
  auto put = [&](const void* d, size_t n) { o.insert(o.end(), (const uint8_t*)d, (const uint8_t*)d + n); };
  put(kStateMagic, 8);
  const uint32_t fl = (uint32_t)fp.size();
  put(&fl, 4);
  put(fp.data(), fp.size());
  const int32_t step = s.step;
  put(&step, 4);
  put(&s.rng, 8);
  const int64_t n = (int64_t)p.size();
  put(&n, 8);
  put(p.data(), p.size() * 4);
  put(s.m.data(), s.m.size() * 4);
  put(s.v.data(), s.v.size() * 4);
  write_file_atomic(path, o.data(), o.size());
}

static bool load_state(const std::string& path, const std::string& fp, OptState& s, std::vector<float>& p) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t off = 0;
  auto get = [&](void* d, size_t n) {
    if (bytes.size() - off < n) fail(ErrorCode::BadModel, "training state " + path + " is truncated");
    std::memcpy(d, bytes.data() + off, n);
    off += n;
  };
  char magic[8];
  get(magic, 8);
  if (std::memcmp(magic, kStateMagic, 8) != 0) fail(ErrorCode::BadModel, path + " is not a qkv training state file");
  uint32_t fl;
  get(&fl, 4);
  if (fl > 4096) fail(ErrorCode::BadModel, "training state " + path + " is corrupt");
  std::string got(fl, '\0');
  get(got.data(), fl);
  if (got != fp)
    fail(ErrorCode::BadArgument, "training state " + path + " belongs to another run:\n  state:  " + got +
                                     "\n  config: " + fp + "\n(delete it or point `state` elsewhere to start over)");
  int32_t step;
  get(&step, 4);
  get(&s.rng, 8);
  int64_t n;
  get(&n, 8);
  if (n != (int64_t)p.size()) fail(ErrorCode::BadModel, "training state " + path + " has the wrong parameter count");
  s.step = step;
  get(p.data(), n * 4);
  s.m.resize(n);
  s.v.resize(n);
  get(s.m.data(), n * 4);
  get(s.v.data(), n * 4);
  if (off != bytes.size()) fail(ErrorCode::BadModel, "training state " + path + " has trailing bytes");
  return true;
}

// ---- the loop -----------------------------------------------------------------------------

static std::string clock_text(double s) {
  char b[32];
  const int t = (int)(s + 0.5);
  if (t >= 3600) snprintf(b, sizeof b, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  else snprintf(b, sizeof b, "%d:%02d", t / 60, t % 60);
  return b;
}

TrainResult run_training(const TrainConfig& cfg) {
  using clk = std::chrono::steady_clock;
  const bool tty = !cfg.quiet && isatty(2);
  auto say = [&](const char* fmt, auto... args) {
    if (cfg.quiet) return;
    if (tty) fprintf(stderr, "\r\033[K");
    fprintf(stderr, fmt, args...);
    fflush(stderr);
  };

  // Tokenizer: from a file, or learned from the data.
  const std::string text = read_text(cfg.data);
  if (text.empty()) fail(ErrorCode::BadArgument, "training data " + cfg.data + " is empty");
  std::unique_ptr<Tokenizer> tok;
  if (!cfg.tokenizer.empty()) {
    auto blob = map_file(cfg.tokenizer);
    tok = embedded_tokenizer(blob);
    if (!tok) {
      if (cfg.vocab <= 0) fail(ErrorCode::BadArgument, "tokenizer " + cfg.tokenizer + " is not a GGUF; a llama2.c tokenizer.bin also needs vocab = N");
      tok = std::make_unique<Tokenizer>(Tokenizer::from_llama2c(blob->data(), blob->size(), cfg.vocab));
    }
  } else {
    say("learning a %d-piece BPE tokenizer from %s\n", cfg.vocab, cfg.data.c_str());
    tok = std::make_unique<Tokenizer>(bpe_tokenizer(train_bpe(text, cfg.vocab)));
  }
  const std::vector<int> ids = encode_documents(*tok, text);
  const int T = cfg.model.seq_len, B = cfg.batch;
  const int64_t n_val = (int64_t)(ids.size() * cfg.val_fraction);
  const int64_t n_train = (int64_t)ids.size() - n_val;
  if (n_train < T + 1)
    fail(ErrorCode::BadArgument, "training data has " + std::to_string(n_train) + " training tokens; seq_len " +
                                     std::to_string(T) + " needs at least " + std::to_string(T + 1));
  if (n_val > 0 && n_val < T + 1)
    fail(ErrorCode::BadArgument, "validation split has " + std::to_string(n_val) + " tokens, fewer than seq_len + 1 = " +
                                     std::to_string(T + 1) + "; raise val_fraction or set it to 0");

  ModelConfig mc = cfg.model;
  mc.vocab_size = tok->vocab_size();
  auto pool = std::make_unique<ThreadPool>(cfg.threads > 0 ? cfg.threads : ThreadPool::hardware_threads());
  TrainModel model(mc, pool.get());
  const int64_t P = model.layout().total;
  const std::string fp = fingerprint(cfg, P);
  OptState st;
  st.m.assign(P, 0.0f);
  st.v.assign(P, 0.0f);
  Rng rng(cfg.seed * 0x9E3779B97F4A7C15ull + 1);
  model.init(cfg.seed);
  if (cfg.resume && load_state(cfg.state, fp, st, model.params())) {
    rng.set_state(st.rng);
    say("resuming from %s at step %d\n", cfg.state.c_str(), st.step);
  }
  say("model: %s\n%.2fM parameters | %lld tokens (%lld train, %lld validation) | batch %d x %d | %d threads, %s\n",
      mc.describe().c_str(), P / 1e6, (long long)ids.size(), (long long)n_train, (long long)n_val, B, T, pool->size(),
      "f32");

  // Optimizer segments: norms get no weight decay.
  struct Seg {
    int64_t b, e;
    bool decay;
  };
  std::vector<Seg> segs;
  {
    int64_t at = 0;
    for (auto [b, e] : model.layout().norms) {
      if (b > at) segs.push_back({at, b, true});
      segs.push_back({b, e, false});
      at = e;
    }
    if (at < P) segs.push_back({at, P, true});
  }

  std::vector<int> in((size_t)B * T), tg((size_t)B * T);
  auto evaluate = [&]() {
    if (n_val == 0) return std::nan("");
    const int64_t windows = std::min<int64_t>((n_val - 1) / T, (int64_t)cfg.eval_batches * B);
    double sum = 0.0;
    int64_t done = 0;
    while (done < windows) {
      const int b = (int)std::min<int64_t>(B, windows - done);
      for (int i = 0; i < b; i++) {
        const int64_t s = n_train + (done + i) * T;
        for (int t = 0; t < T; t++) {
          in[(size_t)i * T + t] = ids[s + t];
          tg[(size_t)i * T + t] = ids[s + t + 1];
        }
      }
      sum += model.forward(in.data(), tg.data(), b, T) * b;
      done += b;
    }
    return sum / windows;
  };
  auto checkpoint = [&](int step) {
    LoadedModel view = model.view();
    std::vector<uint8_t> g = llama2c_to_gguf(view, *tok, cfg.name, parse_qtype(cfg.dtype));
    write_file_atomic(cfg.out, g.data(), g.size());
    st.step = step;
    st.rng = rng.state();
    save_state(cfg.state, fp, st, model.params());
  };

  TrainResult res;
  res.params = P;
  res.start_step = st.step;
  double train_seconds = 0.0, last_val = std::nan("");
  int64_t tokens = 0;
  const auto t_start = clk::now();
  const int stop = cfg.stop_at > 0 ? std::min(cfg.stop_at, cfg.steps) : cfg.steps;
  int saved_at = -1;
  for (int step = st.step; step < stop; step++) {
    const auto t0 = clk::now();
    for (int b = 0; b < B; b++) {
      const int64_t s = (int64_t)rng.below((uint64_t)(n_train - T));
      for (int t = 0; t < T; t++) {
        in[(size_t)b * T + t] = ids[s + t];
        tg[(size_t)b * T + t] = ids[s + t + 1];
      }
    }
    model.zero_grads();
    const double loss = model.forward(in.data(), tg.data(), B, T);
    if (!std::isfinite(loss)) fail(ErrorCode::Internal, "the loss became " + std::to_string(loss) + " at step " + std::to_string(step) + "; lower lr");
    model.backward();
    std::vector<float>& G = model.grads();
    double ss = 0.0;
    for (float g : G) ss += (double)g * g;
    const double norm = std::sqrt(ss);
    if (cfg.clip > 0 && norm > cfg.clip) {
      const float f = (float)(cfg.clip / norm);
      for (float& g : G) g *= f;
    }
    AdamWParams h;
    h.lr = lr_at(cfg, step);
    h.beta1 = cfg.beta1;
    h.beta2 = cfg.beta2;
    h.step = step + 1;
    for (const Seg& s : segs) {
      h.weight_decay = s.decay ? cfg.weight_decay : 0.0f;
      adamw_simd(model.params().data() + s.b, G.data() + s.b, st.m.data() + s.b, st.v.data() + s.b, s.e - s.b, h);
    }
    train_seconds += std::chrono::duration<double>(clk::now() - t0).count();
    tokens += (int64_t)B * T;
    res.losses.push_back(loss);
    const double tps = tokens / std::max(train_seconds, 1e-9);
    const int done = step + 1 - res.start_step, left = cfg.steps - step - 1;
    const double eta = train_seconds / done * left;
    const bool eval_now = cfg.eval_interval > 0 && ((step + 1) % cfg.eval_interval == 0 || step + 1 == cfg.steps);
    if (eval_now) {
      last_val = evaluate();
      say("step %6d/%d | loss %.4f | val %.4f (ppl %.2f) | lr %.2e | grad norm %.3f | %.0f tok/s | %s elapsed, ETA %s\n",
          step + 1, cfg.steps, loss, last_val, std::exp(last_val), h.lr, norm, tps,
          clock_text(std::chrono::duration<double>(clk::now() - t_start).count()).c_str(), clock_text(eta).c_str());
      checkpoint(step + 1);
      saved_at = step + 1;
    } else if (tty) {
      const int w = 30, fill = (int)((double)(step + 1) / cfg.steps * w);
      fprintf(stderr, "\r\033[K[%s%s] %d/%d | loss %.4f | lr %.2e | %.0f tok/s | ETA %s", std::string(fill, '#').c_str(),
              std::string(w - fill, '.').c_str(), step + 1, cfg.steps, loss, h.lr, tps, clock_text(eta).c_str());
      fflush(stderr);
    } else if ((step + 1) % cfg.log_interval == 0) {
      say("step %6d/%d | loss %.4f | lr %.2e | grad norm %.3f | %.0f tok/s | ETA %s\n", step + 1, cfg.steps, loss, h.lr,
          norm, tps, clock_text(eta).c_str());
    }
  }
  const int end = std::max(stop, res.start_step);
  if (saved_at != end) {
    last_val = evaluate();
    checkpoint(end);
  }
  res.end_step = end;
  res.val_loss = last_val;
  res.seconds = train_seconds;
  res.tokens_per_s = tokens / std::max(train_seconds, 1e-9);
  say("done: %d steps in %s (%.0f tok/s) | final val loss %.4f (ppl %.2f) | wrote %s and %s\n", end - res.start_step,
      clock_text(train_seconds).c_str(), res.tokens_per_s, last_val, std::exp(last_val), cfg.out.c_str(), cfg.state.c_str());
  return res;
}

}  // namespace qkv
