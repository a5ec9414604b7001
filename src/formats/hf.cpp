// Hugging Face checkpoint -> GGUF form, as llama.cpp's convert_hf_to_gguf.py maps each family:
// config.json keys to {arch}.* keys, HF tensor names to GGUF ones. Matrices stay where they are
// in the safetensors data; what the converter changes is changed in a small owned copy: 1-D
// tensors become F32 (the engine's norms and biases are F32), Gemma's RMSNorm weights get their
// +1, and Llama's q/k rows go from the rotate-half order to adjacent pairs (the converter's
// permute), so the model reads exactly as its GGUF conversion does.
#include "hf.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <dirent.h>
#include <map>
#include <set>

#include "../common.h"
#include "../json.h"
#include "file.h"
#include "gguf_writer.h"
#include "safetensors.h"

namespace qkv {

HfFiles::HfFiles(std::vector<std::pair<std::string, std::shared_ptr<const Blob>>> files) : files_(std::move(files)) {}

const Blob* HfFiles::find(const std::string& name) const {
  // The exact name, else the shortest path ending in "/name" (dir/config.json, not dir/1_Pooling/config.json).
  const Blob* best = nullptr;
  size_t best_len = 0;
  for (const auto& f : files_) {
    const std::string& n = f.first;
    if (n == name) return f.second.get();
    if (n.size() > name.size() && n[n.size() - name.size() - 1] == '/' &&
        n.compare(n.size() - name.size(), name.size(), name) == 0 && (!best || n.size() < best_len)) {
      best = f.second.get();
      best_len = n.size();
    }
  }
  return best;
}

std::string HfFiles::text(const std::string& name) const {
  const Blob* b = find(name);
  return b ? std::string(reinterpret_cast<const char*>(b->data()), (size_t)b->size()) : std::string();
}

const uint8_t* HfFiles::data() const {
  const Blob* c = find("config.json");
  return c ? c->data() : nullptr;
}
uint64_t HfFiles::size() const {
  const Blob* c = find("config.json");
  return c ? c->size() : 0;
}

const HfFiles* as_hf_files(const Blob* blob) { return dynamic_cast<const HfFiles*>(blob); }

uint64_t input_bytes(const Blob& blob) {
  const HfFiles* hf = as_hf_files(&blob);
  if (!hf) return model_bytes(blob);
  uint64_t n = 0;
  for (const auto& f : hf->files()) n += f.second->size();
  return n;
}

namespace {
[[noreturn]] void bad(const std::string& m) { fail(ErrorCode::BadModel, "Hugging Face checkpoint: " + m); }

// The files, plus the converted copies the views point into.
class HfStorage : public Blob {
 public:
  explicit HfStorage(std::shared_ptr<const Blob> files) : files_(std::move(files)) {}
  const uint8_t* data() const override { return files_->data(); }
  uint64_t size() const override { return files_->size(); }
  std::vector<std::vector<uint8_t>> owned;

 private:
  std::shared_ptr<const Blob> files_;
};

const Json* field(const Json& c, const char* k) { return c.get(k); }
double num(const Json& c, const char* k, double def, bool required = false) {
  const Json* v = c.get(k);
  if (!v || v->k == Json::Null) {
    if (required) bad(std::string("config.json has no ") + k);
    return def;
  }
  if (v->k != Json::Num) bad(std::string("config.json: ") + k + " must be a number");
  const double d = std::strtod(v->s.c_str(), nullptr);
  if (!std::isfinite(d)) bad(std::string("config.json: ") + k + " is not finite");
  return d;
}
uint32_t count(const Json& c, const char* k, double def, bool required = false) {
  const double d = num(c, k, def, required);
  if (!(d >= 0 && d <= (double)(1 << 30)) || d != std::floor(d))
    bad(std::string("config.json: ") + k + " = " + std::to_string(d) + " is not a count");
  return (uint32_t)d;
}

struct Family {
  const char* model_type;
  const char* arch;  // GGUF architecture
};
const Family kFamilies[] = {
    {"llama", "llama"},   {"mistral", "llama"}, {"qwen2", "qwen2"},        {"qwen3", "qwen3"}, {"gemma", "gemma"},
    {"gemma2", "gemma2"}, {"gemma3", "gemma3"}, {"gemma3_text", "gemma3"}, {"bert", "bert"},
};

// HF name (prefix removed) -> GGUF name, per family; "" to skip, "?" for unknown.
std::string gguf_name(const std::string& arch, const std::string& n) {
  static const std::map<std::string, std::string> kDecoder = {
      {"self_attn.q_proj", "attn_q"},
      {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"},
      {"self_attn.q_norm", "attn_q_norm"},
      {"self_attn.k_norm", "attn_k_norm"},
      {"input_layernorm", "attn_norm"},
      {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},
      {"pre_feedforward_layernorm", "ffn_norm"},
      {"post_feedforward_layernorm", "post_ffw_norm"},
  };
  static const std::map<std::string, std::string> kBert = {
      {"attention.self.query", "attn_q"},
      {"attention.self.key", "attn_k"},
      {"attention.self.value", "attn_v"},
      {"attention.output.dense", "attn_output"},
      {"attention.output.LayerNorm", "attn_output_norm"},
      {"intermediate.dense", "ffn_up"},
      {"output.dense", "ffn_down"},
      {"output.LayerNorm", "layer_output_norm"},
  };
  const bool bert = arch == "bert";
  const size_t dot = n.rfind('.');
  if (dot == std::string::npos) return "?";
  const std::string base = n.substr(0, dot), suffix = n.substr(dot);  // ".weight" / ".bias"
  if (suffix == ".inv_freq") return "";
  if (bert) {
    if (base == "embeddings.word_embeddings") return "token_embd" + suffix;
    if (base == "embeddings.position_embeddings") return "position_embd" + suffix;
    if (base == "embeddings.token_type_embeddings") return "token_types" + suffix;
    if (base == "embeddings.LayerNorm") return "token_embd_norm" + suffix;
    if (base.compare(0, 7, "pooler.") == 0) return "";
    if (n == "embeddings.position_ids") return "";
  } else {
    if (base == "embed_tokens") return "token_embd" + suffix;
    if (base == "norm") return "output_norm" + suffix;
    if (base == "lm_head") return "output" + suffix;
  }
  const std::string layers = bert ? "encoder.layer." : "layers.";
  if (base.compare(0, layers.size(), layers) != 0) return "?";
  const size_t d2 = base.find('.', layers.size());
  if (d2 == std::string::npos) return "?";
  const std::string l = base.substr(layers.size(), d2 - layers.size()), rest = base.substr(d2 + 1);
  if (l.empty() || l.find_first_not_of("0123456789") != std::string::npos) return "?";
  std::string g;
  if (rest == "post_attention_layernorm") g = arch == "gemma2" || arch == "gemma3" ? "post_attention_norm" : "ffn_norm";
  else {
    const auto& m = bert ? kBert : kDecoder;
    auto it = m.find(rest);
    if (it == m.end()) return "?";
    g = it->second;
  }
  return "blk." + l + "." + g + suffix;
}

// Llama 3's rope_scaling (rope_type llama3) as the converter writes it: rope_freqs.weight, one
// divisor per frequency.
std::vector<float> llama3_rope_factors(const Json& rs, double base, int head_dim) {
  const double factor = num(rs, "factor", 8.0), lo = num(rs, "low_freq_factor", 1.0),
               hi = num(rs, "high_freq_factor", 4.0);
  const double old_ctx = num(rs, "original_max_position_embeddings", 8192.0);
  if (!(factor > 0 && lo > 0 && hi > lo && old_ctx > 0))
    bad("config.json: rope_scaling (llama3) has out-of-range values");
  const double lo_wl = old_ctx / lo, hi_wl = old_ctx / hi;
  std::vector<float> out;
  for (int i = 0; i < head_dim; i += 2) {
    const double freq = 1.0 / std::pow(base, (double)i / head_dim);
    const double wl = 2 * M_PI / freq;
    if (wl < hi_wl) out.push_back(1.0f);
    else if (wl > lo_wl) out.push_back((float)factor);
    else {
      const double smooth = (old_ctx / wl - lo) / (hi - lo);
      out.push_back((float)(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

float elem_f32(QType t, const uint8_t* p, uint64_t i) {
  if (t == QType::F32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return t == QType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}
}  // namespace

GgufFile hf_as_gguf(std::shared_ptr<const Blob> blob) {
  const HfFiles* files = as_hf_files(blob.get());
  if (!files) bad("not a set of checkpoint files");
  if (!files->find("config.json")) bad("config.json is missing (it says which model this is)");
  Json cfg = parse_json(files->text("config.json"), "config.json", ErrorCode::BadModel);
  if (cfg.k != Json::Obj) bad("config.json is not a JSON object");
  const Json* mt = field(cfg, "model_type");
  if (!mt || mt->k != Json::Str) bad("config.json has no model_type");
  std::string model_type = mt->s;
  if (model_type == "gemma3" && cfg.get("text_config")) {  // Gemma3ForConditionalGeneration: the text half
    Json tc = *cfg.get("text_config");
    if (tc.k != Json::Obj) bad("config.json: text_config is not an object");
    // Its config lists only what differs from transformers' Gemma3TextConfig defaults.
    auto def = [&](const char* k, const char* v) {
      if (!tc.get(k)) {
        Json n;
        n.k = Json::Num;
        n.s = v;
        tc.obj.emplace_back(k, n);
      }
    };
    def("num_attention_heads", "8");
    def("num_key_value_heads", "4");
    def("head_dim", "256");
    def("rms_norm_eps", "1e-6");
    def("rope_theta", "1000000");
    def("max_position_embeddings", "131072");
    def("sliding_window", "4096");
    cfg = tc;
  }
  std::string arch;
  for (const Family& f : kFamilies)
    if (model_type == f.model_type) arch = f.arch;
  if (arch.empty())
    fail(ErrorCode::Unsupported,
         "Hugging Face model_type '" + model_type +
             "' is not supported; supported: llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3, bert "
             "(convert others with llama.cpp's convert_hf_to_gguf.py)");
  const bool bert = arch == "bert", gemma = arch.compare(0, 5, "gemma") == 0;

  // The tensors: one file, or the shards the index names.
  std::map<std::string, SafetensorsTensor> tensors;
  std::map<std::string, std::string> file_of;
  auto add_file = [&](const std::string& name) {
    const Blob* b = files->find(name);
    if (!b) fail(ErrorCode::Io, "Hugging Face checkpoint: " + name + " is missing");
    for (SafetensorsTensor& t : parse_safetensors(*b, name)) {
      const std::string n = t.name;
      if (!tensors.emplace(n, std::move(t)).second) bad("tensor " + n + " appears in more than one file");
      file_of[n] = name;
    }
  };
  if (files->find("model.safetensors")) {
    add_file("model.safetensors");
  } else if (files->find("model.safetensors.index.json")) {
    const Json idx =
        parse_json(files->text("model.safetensors.index.json"), "model.safetensors.index.json", ErrorCode::BadModel);
    const Json* wm = idx.k == Json::Obj ? idx.get("weight_map") : nullptr;
    if (!wm || wm->k != Json::Obj) bad("model.safetensors.index.json has no weight_map object");
    std::set<std::string> shards;
    for (const auto& kv : wm->obj) {
      if (kv.second.k != Json::Str || kv.second.s.empty() || kv.second.s.find('/') != std::string::npos)
        bad("model.safetensors.index.json: the file of " + kv.first + " must be a file name");
      shards.insert(kv.second.s);
    }
    for (const std::string& s : shards) add_file(s);
    for (const auto& kv : wm->obj) {
      if (file_of[kv.first] != kv.second.s)
        bad("model.safetensors.index.json places " + kv.first + " in " + kv.second.s + ", which does not hold it");
    }
  } else {
    fail(ErrorCode::Io,
         "Hugging Face checkpoint: no model.safetensors or model.safetensors.index.json among the files");
  }

  GgufWriter w;
  auto key = [&](const char* k) { return arch + "." + k; };
  w.add_string("general.architecture", arch);
  {
    const Json* nm = cfg.get("_name_or_path");
    w.add_string("general.name", nm && nm->k == Json::Str && !nm->s.empty() ? nm->s : model_type);
  }
  const uint32_t dim = count(cfg, "hidden_size", 0, true), heads = count(cfg, "num_attention_heads", 0, true);
  if (heads == 0) bad("config.json: num_attention_heads must be positive");
  const uint32_t kv_heads = count(cfg, "num_key_value_heads", heads);
  const uint32_t layers = count(cfg, "num_hidden_layers", 0, true);
  w.add_u32(key("embedding_length"), dim);
  w.add_u32(key("feed_forward_length"), count(cfg, "intermediate_size", 0, true));
  w.add_u32(key("block_count"), layers);
  w.add_u32(key("attention.head_count"), heads);
  w.add_u32(key("attention.head_count_kv"), kv_heads);
  w.add_u32(key("context_length"), count(cfg, "max_position_embeddings", bert ? 512 : 4096));
  uint32_t head_dim = dim / heads;
  if (cfg.get("head_dim") && cfg.get("head_dim")->k != Json::Null) {
    head_dim = count(cfg, "head_dim", 0);
    w.add_u32(key("attention.key_length"), head_dim);
    w.add_u32(key("attention.value_length"), head_dim);
  }
  if (bert) {
    w.add_f32(key("attention.layer_norm_epsilon"), (float)num(cfg, "layer_norm_eps", 1e-12));
    w.add_bool(key("attention.causal"), false);
    const Json pool = files->find("1_Pooling/config.json") ? parse_json(files->text("1_Pooling/config.json"),
                                                                        "1_Pooling/config.json", ErrorCode::BadModel)
                                                           : Json();
    auto on = [&](const char* k) {
      const Json* v = pool.k == Json::Obj ? pool.get(k) : nullptr;
      return v && v->k == Json::Bool && v->b;
    };
    if (on("pooling_mode_mean_tokens")) w.add_u32(key("pooling_type"), 1);
    else if (on("pooling_mode_cls_token")) w.add_u32(key("pooling_type"), 2);
    else if (on("pooling_mode_lasttoken")) w.add_u32(key("pooling_type"), 3);
  } else {
    w.add_f32(key("attention.layer_norm_rms_epsilon"), (float)num(cfg, "rms_norm_eps", 1e-6));
    w.add_f32(key("rope.freq_base"), (float)num(cfg, "rope_theta", 10000.0));
  }
  std::vector<float> rope_freqs;
  if (const Json* rs = cfg.get("rope_scaling"); rs && rs->k != Json::Null) {
    if (rs->k != Json::Obj) bad("config.json: rope_scaling must be an object");
    const Json* ty = rs->get("rope_type") ? rs->get("rope_type") : rs->get("type");
    const std::string type = ty && ty->k == Json::Str ? ty->s : "";
    if (type == "linear") {
      w.add_string(key("rope.scaling.type"), "linear");
      w.add_f32(key("rope.scaling.factor"), (float)num(*rs, "factor", 1.0, true));
    } else if (type == "yarn") {
      w.add_string(key("rope.scaling.type"), "yarn");
      w.add_f32(key("rope.scaling.factor"), (float)num(*rs, "factor", 1.0, true));
      w.add_u32(key("rope.scaling.original_context_length"), count(*rs, "original_max_position_embeddings", 0, true));
    } else if (type == "llama3" && arch == "llama") {
      rope_freqs = llama3_rope_factors(*rs, num(cfg, "rope_theta", 10000.0), (int)head_dim);
    } else if (type != "default") {
      fail(ErrorCode::Unsupported,
           "Hugging Face config.json: rope_scaling type '" + type + "' is not supported (linear, yarn, llama3 are)");
    }
  }
  if (arch == "gemma2") {
    w.add_f32(key("attn_logit_softcapping"), (float)num(cfg, "attn_logit_softcapping", 50.0));
    w.add_f32(key("final_logit_softcapping"), (float)num(cfg, "final_logit_softcapping", 30.0));
  }
  if (arch == "gemma3" && cfg.get("final_logit_softcapping") && cfg.get("final_logit_softcapping")->k == Json::Num)
    w.add_f32(key("final_logit_softcapping"), (float)num(cfg, "final_logit_softcapping", 0.0));
  if ((arch == "gemma2" || arch == "gemma3") && cfg.get("sliding_window") && cfg.get("sliding_window")->k == Json::Num)
    w.add_u32(key("attention.sliding_window"), count(cfg, "sliding_window", 0));
  const size_t n_tokens = add_hf_tokenizer(w, *files);
  if (const std::string ct = files->text("chat_template.jinja"); !ct.empty())
    w.add_string("tokenizer.chat_template", ct);

  // Tensors, renamed; the ones the converter changes are copied here.
  auto storage = std::make_shared<HfStorage>(blob);
  std::vector<GgufTensorInfo> infos;
  std::vector<const uint8_t*> ptrs;
  const Json* tie = cfg.get("tie_word_embeddings");
  const bool tied = !bert && (gemma || (tie && tie->k == Json::Bool && tie->b));
  bool has_lm_head = false;
  for (const auto& kv : tensors) {
    std::string n = kv.first;
    for (const char* pre : {"model.language_model.", "language_model.model.", "model.", "bert."})
      if (n.compare(0, std::strlen(pre), pre) == 0) {
        n = n.substr(std::strlen(pre));
        break;
      }
    if (n == "lm_head.weight") has_lm_head = true;
    if (n.compare(0, 13, "vision_tower.") == 0 || n.compare(0, 22, "multi_modal_projector.") == 0) continue;
    if (bert && (n.compare(0, 4, "cls.") == 0)) continue;  // the masked-LM head
    const std::string g = gguf_name(arch, n);
    if (g.empty()) continue;
    if (g == "?")
      fail(ErrorCode::Unsupported,
           "Hugging Face checkpoint: tensor " + kv.first + " has no place in a " + model_type + " model");
    // Biases the GGUF rows of these families do not read (Llama's attention_bias / mlp_bias, Qwen 3's): refused, not
    // ignored.
    if (!bert && arch != "qwen2" && g.size() > 5 && g.compare(g.size() - 5, 5, ".bias") == 0)
      fail(ErrorCode::Unsupported, "Hugging Face checkpoint: tensor " + kv.first + " (a bias " + model_type +
                                       " models do not have) is not supported");
    const SafetensorsTensor& t = kv.second;
    if (!t.supported)
      fail(ErrorCode::Unsupported,
           "Hugging Face checkpoint: tensor " + kv.first + " is " + t.dtype + "; qkv runs F32, F16 and BF16 weights");
    if (t.shape.empty() || t.shape.size() > 2) bad("tensor " + kv.first + " is not 1-D or 2-D");
    GgufTensorInfo info;
    info.name = g;
    for (size_t i = t.shape.size(); i-- > 0;) info.dims.push_back(t.shape[i]);
    const bool vec = t.shape.size() == 1, table = g == "position_embd.weight" || g == "token_types.weight";
    const bool norm_shift = gemma && vec && g.size() > 11 && g.compare(g.size() - 11, 11, "norm.weight") == 0;
    const bool permute =
        arch == "llama" && (g.find(".attn_q.") != std::string::npos || g.find(".attn_k.") != std::string::npos);
    const uint8_t* data = t.data;
    QType type = t.type;
    if (vec || table || norm_shift) {  // F32 copy (+1 for Gemma's norms)
      std::vector<uint8_t> buf(t.elements() * 4);
      float* f = reinterpret_cast<float*>(buf.data());
      for (uint64_t i = 0; i < t.elements(); i++) f[i] = elem_f32(t.type, t.data, i) + (norm_shift ? 1.0f : 0.0f);
      storage->owned.push_back(std::move(buf));
      data = storage->owned.back().data();
      type = QType::F32;
    }
    if (permute) {  // rows h*hd + j*hd/2 + i -> h*hd + 2i + j (convert_hf_to_gguf's permute)
      const uint32_t nh = g.find(".attn_q.") != std::string::npos ? heads : kv_heads;
      const uint64_t rows = t.shape[0],
                     row_bytes = vec ? qtype_row_bytes(type, 1) : qtype_row_bytes(type, (int)t.shape[1]);
      if (rows % (2ull * nh) != 0)
        bad("tensor " + kv.first + " has " + std::to_string(rows) + " rows, not a multiple of 2 x its heads");
      const uint64_t half = rows / nh / 2;
      std::vector<uint8_t> buf(rows * row_bytes);
      for (uint64_t h = 0; h < nh; h++)
        for (uint64_t j = 0; j < 2; j++)
          for (uint64_t i = 0; i < half; i++)
            std::memcpy(buf.data() + (h * 2 * half + 2 * i + j) * row_bytes,
                        data + (h * 2 * half + j * half + i) * row_bytes, row_bytes);
      storage->owned.push_back(std::move(buf));
      data = storage->owned.back().data();
    }
    // Gemma's embedding has rows past the tokenizer's vocabulary: the converter drops them
    // (here: a view of the first rows).
    if (gemma && g == "token_embd.weight" && info.dims.size() == 2 && info.dims[1] > n_tokens && n_tokens > 0)
      info.dims[1] = n_tokens;
    info.type = ggml_of_qtype(type);
    info.bytes = info.elements() * (type == QType::F32 ? 4 : 2);
    infos.push_back(std::move(info));
    ptrs.push_back(data);
  }
  if (tied && has_lm_head) {  // a tied checkpoint that stores the classifier anyway: the GGUF has none
    for (size_t i = 0; i < infos.size(); i++)
      if (infos[i].name == "output.weight") {
        infos.erase(infos.begin() + (long)i);
        ptrs.erase(ptrs.begin() + (long)i);
        break;
      }
  }
  if (!rope_freqs.empty()) {
    std::vector<uint8_t> buf(rope_freqs.size() * 4);
    std::memcpy(buf.data(), rope_freqs.data(), buf.size());
    storage->owned.push_back(std::move(buf));
    GgufTensorInfo info;
    info.name = "rope_freqs.weight";
    info.dims = {rope_freqs.size()};
    info.type = ggml_of_qtype(QType::F32);
    info.bytes = rope_freqs.size() * 4;
    infos.push_back(std::move(info));
    ptrs.push_back(storage->owned.back().data());
  }
  // GGUF order: by block then name, as the converter writes them (also what `qkv quantize` keeps).
  std::vector<size_t> order(infos.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  auto rank = [&](const std::string& n) -> std::pair<long, std::string> {
    if (n.compare(0, 4, "blk.") == 0) return {std::stol(n.substr(4)), n.substr(n.find('.', 4))};
    return {n.compare(0, 6, "output") == 0 ? 1L << 30 : -1, n};
  };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rank(infos[a].name) < rank(infos[b].name); });
  std::vector<GgufTensorInfo> sorted_infos;
  std::vector<const uint8_t*> sorted_ptrs;
  for (size_t i : order) {
    sorted_infos.push_back(infos[i]);
    sorted_ptrs.push_back(ptrs[i]);
  }
  return GgufFile::from_views(storage, std::make_shared<VectorBlob>(w.finish()), std::move(sorted_infos), sorted_ptrs);
}

std::shared_ptr<const Blob> map_hf_directory(const std::string& dir) {
  std::vector<std::pair<std::string, std::shared_ptr<const Blob>>> files;
  auto list = [&](const std::string& sub) {
    DIR* d = opendir((dir + "/" + sub).c_str());
    if (!d) return;
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) names.push_back(e->d_name);
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      auto ends = [&](const char* s) {
        return n.size() >= std::strlen(s) && n.compare(n.size() - std::strlen(s), std::string::npos, s) == 0;
      };
      // Mistral's consolidated.safetensors repeats the weights in another layout: not read.
      if ((ends(".json") || ends(".safetensors") || n == "chat_template.jinja") &&
          n.compare(0, 12, "consolidated") != 0)
        files.emplace_back(sub + n, map_file(dir + "/" + sub + n));
    }
  };
  list("");
  list("1_Pooling/");
  bool config = false;
  for (const auto& f : files) config = config || f.first == "config.json";
  if (!config) fail(ErrorCode::Io, dir + " is a directory without config.json: not a Hugging Face checkpoint");
  return std::make_shared<HfFiles>(std::move(files));
}

}  // namespace qkv
