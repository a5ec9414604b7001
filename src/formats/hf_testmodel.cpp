// The inverse of convert_hf_to_gguf.py for the families hf.cpp reads (see hf_testmodel.h).
#include "hf_testmodel.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "../common.h"
#include "../json.h"
#include "../tokenizer/pretokenize.h"
#include "../tokenizer/tokenizer.h"
#include "gguf_writer.h"

namespace qkv {

namespace {
Json jstr(const std::string& s) {
  Json j;
  j.k = Json::Str;
  j.s = s;
  return j;
}
Json jnum(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", v);
  Json j;
  j.k = Json::Num;
  j.s = b;
  return j;
}
Json jbool(bool v) {
  Json j;
  j.k = Json::Bool;
  j.b = v;
  return j;
}
Json jobj(std::vector<std::pair<std::string, Json>> kv) {
  Json j;
  j.k = Json::Obj;
  j.obj = std::move(kv);
  return j;
}
Json jarr(std::vector<Json> a) {
  Json j;
  j.k = Json::Arr;
  j.arr = std::move(a);
  return j;
}
std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

// GGUF tensor name -> HF name.
std::string hf_name(const std::string& arch, const std::string& g) {
  const size_t dot = g.rfind('.');
  const std::string base = g.substr(0, dot), suffix = g.substr(dot);
  const bool bert = arch == "bert", gemma23 = arch == "gemma2" || arch == "gemma3";
  if (bert) {
    static const std::map<std::string, std::string> top = {{"token_embd", "embeddings.word_embeddings"},
                                                            {"position_embd", "embeddings.position_embeddings"},
                                                            {"token_types", "embeddings.token_type_embeddings"},
                                                            {"token_embd_norm", "embeddings.LayerNorm"}};
    if (top.count(base)) return top.at(base) + suffix;
  } else {
    if (base == "token_embd") return "model.embed_tokens" + suffix;
    if (base == "output_norm") return "model.norm" + suffix;
    if (base == "output") return "lm_head" + suffix;
  }
  QKV_CHECK(base.compare(0, 4, "blk.") == 0, "a block tensor");
  const size_t d2 = base.find('.', 4);
  const std::string l = base.substr(4, d2 - 4), rest = base.substr(d2 + 1);
  static const std::map<std::string, std::string> dec = {
      {"attn_q", "self_attn.q_proj"}, {"attn_k", "self_attn.k_proj"}, {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"}, {"attn_q_norm", "self_attn.q_norm"}, {"attn_k_norm", "self_attn.k_norm"},
      {"attn_norm", "input_layernorm"}, {"ffn_gate", "mlp.gate_proj"}, {"ffn_up", "mlp.up_proj"}, {"ffn_down", "mlp.down_proj"},
      {"post_ffw_norm", "post_feedforward_layernorm"}, {"post_attention_norm", "post_attention_layernorm"}};
  static const std::map<std::string, std::string> enc = {
      {"attn_q", "attention.self.query"}, {"attn_k", "attention.self.key"}, {"attn_v", "attention.self.value"},
      {"attn_output", "attention.output.dense"}, {"attn_output_norm", "attention.output.LayerNorm"},
      {"ffn_up", "intermediate.dense"}, {"ffn_down", "output.dense"}, {"layer_output_norm", "output.LayerNorm"}};
  std::string h;
  if (!bert && rest == "ffn_norm") h = gemma23 ? "pre_feedforward_layernorm" : "post_attention_layernorm";
  else h = (bert ? enc : dec).at(rest);
  return (bert ? "encoder.layer." : "model.layers.") + l + "." + h + suffix;
}

std::vector<uint8_t> encode(QType t, const std::vector<float>& v) {
  std::vector<uint8_t> out(qtype_row_bytes(t, (int)v.size()));
  encode_row(t, v.data(), out.data(), (int)v.size());
  return out;
}
std::vector<float> decode(QType t, const std::vector<uint8_t>& b, size_t n) {
  std::vector<float> out(n);
  dequantize_row_ref(t, b.data(), out.data(), (int)n);
  return out;
}
}  // namespace

std::vector<uint8_t> write_safetensors(const std::vector<HfTensor>& tensors) {
  std::vector<std::pair<std::string, Json>> header;
  header.emplace_back("__metadata__", jobj({{"format", jstr("pt")}}));
  uint64_t off = 0;
  for (const HfTensor& t : tensors) {
    std::vector<Json> shape;
    for (uint64_t d : t.shape) shape.push_back(jnum((double)d));
    header.emplace_back(t.name, jobj({{"dtype", jstr(t.type == QType::F32 ? "F32" : t.type == QType::F16 ? "F16" : "BF16")},
                                      {"shape", jarr(shape)},
                                      {"data_offsets", jarr({jnum((double)off), jnum((double)(off + t.bytes.size()))})}}));
    off += t.bytes.size();
  }
  std::string h = json_text(jobj(header));
  while ((8 + h.size()) % 8) h += ' ';  // the data section 8-aligned, as the reference writer pads
  std::vector<uint8_t> out(8);
  const uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), h.begin(), h.end());
  for (const HfTensor& t : tensors) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

HfFileList write_hf_tokenizer(const GgufFile& g, bool add_bos) {
  const std::string model = g.get_string("tokenizer.ggml.model");
  const GgufValue& toks = g.get("tokenizer.ggml.tokens");
  const size_t n = toks.size();
  std::vector<std::string> tokens(n);
  for (size_t i = 0; i < n; i++) tokens[i] = toks.str_at(i);
  std::vector<int> types(n, kTokNormal);
  if (const GgufValue* t = g.find("tokenizer.ggml.token_type"))
    for (size_t i = 0; i < n; i++) types[i] = (int)t->int_at(i);
  std::vector<Json> added;
  auto add_special = [&](size_t i, bool special) {
    added.push_back(jobj({{"id", jnum((double)i)}, {"content", jstr(tokens[i])}, {"single_word", jbool(false)}, {"lstrip", jbool(false)},
                          {"rstrip", jbool(false)}, {"normalized", jbool(false)}, {"special", jbool(special)}}));
  };
  auto id_key = [&](const char* k) -> int { return g.find(k) ? (int)g.get_int(k) : -1; };
  Json tj, tc;
  std::vector<std::pair<std::string, Json>> cfg = {{"add_bos_token", jbool(add_bos)}, {"add_eos_token", jbool(false)}};
  if (model == "gpt2") {
    const std::string pre = g.find("tokenizer.ggml.pre") ? g.get_string("tokenizer.ggml.pre") : "default";
    const PreTokenizer kind = pre_tokenizer_from_name(pre);
    const std::vector<std::string>& res = pre_tokenizer_regexes(kind);
    const std::string gpt2 = pre_tokenizer_regexes(PreTokenizer::Gpt2)[0];
    Json pre_tok;
    if (res.size() == 1 && res[0] == gpt2) {
      pre_tok = jobj({{"type", jstr("ByteLevel")}, {"add_prefix_space", jbool(false)}, {"trim_offsets", jbool(true)}, {"use_regex", jbool(true)}});
    } else {  // Split stages as HF writes them (Digits for the digit runs), then ByteLevel without its regex
      std::vector<Json> seq;
      bool regex_done = false;
      for (const std::string& r : res) {
        if (r == "\\p{N}+" || r == "\\p{N}") seq.push_back(jobj({{"type", jstr("Digits")}, {"individual_digits", jbool(r == "\\p{N}")}}));
        else if (r == gpt2) {
          seq.push_back(jobj({{"type", jstr("ByteLevel")}, {"add_prefix_space", jbool(false)}, {"trim_offsets", jbool(true)}, {"use_regex", jbool(true)}}));
          regex_done = true;
        } else
          seq.push_back(jobj({{"type", jstr("Split")}, {"pattern", jobj({{"Regex", jstr(r)}})}, {"behavior", jstr("Isolated")}, {"invert", jbool(false)}}));
      }
      if (!regex_done)
        seq.push_back(jobj({{"type", jstr("ByteLevel")}, {"add_prefix_space", jbool(false)}, {"trim_offsets", jbool(true)}, {"use_regex", jbool(false)}}));
      pre_tok = jobj({{"type", jstr("Sequence")}, {"pretokenizers", jarr(seq)}});
    }
    std::vector<std::pair<std::string, Json>> vocab;
    for (size_t i = 0; i < n; i++) {
      vocab.emplace_back(tokens[i], jnum((double)i));
      if (types[i] == kTokControl || types[i] == kTokUserDefined) add_special(i, types[i] == kTokControl);
    }
    const GgufValue& m = g.get("tokenizer.ggml.merges");
    std::vector<Json> merges;
    for (size_t i = 0; i < m.size(); i++) merges.push_back(jstr(m.str_at(i)));
    tj = jobj({{"version", jstr("1.0")}, {"added_tokens", jarr(added)}, {"normalizer", Json()}, {"pre_tokenizer", pre_tok},
               {"post_processor", Json()}, {"decoder", jobj({{"type", jstr("ByteLevel")}})},
               {"model", jobj({{"type", jstr("BPE")}, {"dropout", Json()}, {"unk_token", Json()}, {"fuse_unk", jbool(false)},
                               {"byte_fallback", jbool(false)}, {"ignore_merges", jbool(pre_tokenizer_ignores_merges(kind))},
                               {"vocab", jobj(vocab)}, {"merges", jarr(merges)}})}});
  } else if (model == "llama") {
    // SentencePiece BPE as HF's converter holds it: every split of a piece into two pieces is a
    // merge, ranked by the piece's score (best first), byte fallback, spaces as U+2581.
    std::vector<float> scores(n, 0.0f);
    if (const GgufValue* s = g.find("tokenizer.ggml.scores"))
      for (size_t i = 0; i < n; i++) scores[i] = (float)s->num_at(i);
    std::map<std::string, int> index;
    for (size_t i = 0; i < n; i++) index.emplace(tokens[i], (int)i);
    std::vector<std::pair<std::pair<float, int>, std::string>> ms;  // ((-score, id), "l r")
    std::vector<std::pair<std::string, Json>> vocab;
    for (size_t i = 0; i < n; i++) {
      vocab.emplace_back(tokens[i], jnum((double)i));
      if (types[i] == kTokControl || types[i] == kTokUserDefined || types[i] == kTokUnknown) add_special(i, types[i] != kTokUserDefined);
      if (types[i] != kTokNormal) continue;
      const std::vector<std::string> sym = utf8_symbols(tokens[i]);
      std::string left;
      for (size_t k = 0; k + 1 < sym.size(); k++) {
        left += sym[k];
        const std::string right = tokens[i].substr(left.size());
        auto l = index.find(left), r = index.find(right);
        if (l != index.end() && r != index.end() && types[(size_t)l->second] == kTokNormal && types[(size_t)r->second] == kTokNormal)
          ms.push_back({{-scores[i], (int)i}, left + " " + right});
      }
    }
    std::stable_sort(ms.begin(), ms.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<Json> merges;
    for (const auto& m : ms) merges.push_back(jstr(m.second));
    const bool prefix = g.find("tokenizer.ggml.add_space_prefix") ? g.get("tokenizer.ggml.add_space_prefix").u != 0 : true;
    std::vector<Json> norms;
    if (prefix) norms.push_back(jobj({{"type", jstr("Prepend")}, {"prepend", jstr("\xE2\x96\x81")}}));
    norms.push_back(jobj({{"type", jstr("Replace")}, {"pattern", jobj({{"String", jstr(" ")}})}, {"content", jstr("\xE2\x96\x81")}}));
    const int unk = id_key("tokenizer.ggml.unknown_token_id");
    tj = jobj({{"version", jstr("1.0")}, {"added_tokens", jarr(added)},
               {"normalizer", jobj({{"type", jstr("Sequence")}, {"normalizers", jarr(norms)}})}, {"pre_tokenizer", Json()},
               {"model", jobj({{"type", jstr("BPE")}, {"unk_token", unk >= 0 ? jstr(tokens[(size_t)unk]) : Json()},
                               {"byte_fallback", jbool(true)}, {"vocab", jobj(vocab)}, {"merges", jarr(merges)}})}});
  } else if (model == "bert") {
    std::vector<std::pair<std::string, Json>> vocab;
    const std::string mark = "\xE2\x96\x81";
    for (size_t i = 0; i < n; i++) {
      std::string t = tokens[i];
      if (types[i] == kTokControl || types[i] == kTokUnknown || (t.size() >= 2 && t.front() == '[' && t.back() == ']')) {
        if (types[i] != kTokNormal) {
          tokens[i] = t;
          add_special(i, true);
        }
      } else if (t.compare(0, mark.size(), mark) == 0) {
        t = t.substr(mark.size());
      } else {
        t = "##" + t;
      }
      vocab.emplace_back(t, jnum((double)i));
    }
    const int unk = id_key("tokenizer.ggml.unknown_token_id");
    tj = jobj({{"version", jstr("1.0")}, {"added_tokens", jarr(added)},
               {"normalizer", jobj({{"type", jstr("BertNormalizer")}, {"lowercase", jbool(true)}})},
               {"pre_tokenizer", jobj({{"type", jstr("BertPreTokenizer")}})},
               {"model", jobj({{"type", jstr("WordPiece")}, {"unk_token", jstr(unk >= 0 ? tokens[(size_t)unk] : "[UNK]")},
                               {"continuing_subword_prefix", jstr("##")}, {"vocab", jobj(vocab)}})}});
    const int cls = id_key("tokenizer.ggml.cls_token_id") >= 0 ? id_key("tokenizer.ggml.cls_token_id") : id_key("tokenizer.ggml.bos_token_id");
    const int sep = id_key("tokenizer.ggml.seperator_token_id");
    if (cls >= 0) cfg.emplace_back("cls_token", jstr(tokens[(size_t)cls]));
    if (sep >= 0) cfg.emplace_back("sep_token", jstr(tokens[(size_t)sep]));
  } else if (model == "t5") {  // Unigram: [piece, score] pairs, Metaspace, </s> appended by the template
    std::vector<Json> vocab;
    for (size_t i = 0; i < n; i++) {
      vocab.push_back(jarr({jstr(tokens[i]), jnum(g.get("tokenizer.ggml.scores").num_at(i))}));
      if (types[i] == kTokControl || types[i] == kTokUserDefined || types[i] == kTokUnknown) add_special(i, types[i] != kTokUserDefined);
    }
    auto flag_of = [&](const char* k, bool def) { return g.find(k) ? g.get(k).u != 0 : def; };
    std::vector<Json> norms;
    if (flag_of("tokenizer.ggml.remove_extra_whitespaces", false))
      norms.push_back(jobj({{"type", jstr("Replace")}, {"pattern", jobj({{"Regex", jstr(" {2,}")}})}, {"content", jstr(" ")}}));
    const int eos = id_key("tokenizer.ggml.eos_token_id");
    Json post;
    if (flag_of("tokenizer.ggml.add_eos_token", true) && eos >= 0)
      post = jobj({{"type", jstr("TemplateProcessing")},
                   {"single", jarr({jobj({{"Sequence", jobj({{"id", jstr("A")}, {"type_id", jnum(0)}})}}),
                                    jobj({{"SpecialToken", jobj({{"id", jstr(tokens[(size_t)eos])}, {"type_id", jnum(0)}})}})})}});
    tj = jobj({{"version", jstr("1.0")}, {"added_tokens", jarr(added)},
               {"normalizer", norms.empty() ? Json() : jobj({{"type", jstr("Sequence")}, {"normalizers", jarr(norms)}})},
               {"pre_tokenizer", jobj({{"type", jstr("Metaspace")}, {"replacement", jstr("\xE2\x96\x81")},
                                       {"prepend_scheme", jstr(flag_of("tokenizer.ggml.add_space_prefix", true) ? "always" : "never")}})},
               {"post_processor", post},
               {"model", jobj({{"type", jstr("Unigram")}, {"unk_id", jnum(id_key("tokenizer.ggml.unknown_token_id"))}, {"vocab", jarr(vocab)}})}});
    cfg.clear();  // the template says what is added
  } else {
    fail(ErrorCode::Unsupported, "write_hf_tokenizer: tokenizer model " + model);
  }
  if (model != "bert" && model != "t5") {
    const int bos = id_key("tokenizer.ggml.bos_token_id"), eos = id_key("tokenizer.ggml.eos_token_id");
    if (bos >= 0 && (size_t)bos < n) cfg.emplace_back("bos_token", jstr(tokens[(size_t)bos]));
    if (eos >= 0 && (size_t)eos < n) cfg.emplace_back("eos_token", jstr(tokens[(size_t)eos]));
  }
  if (const GgufValue* ct = g.find("tokenizer.chat_template")) cfg.emplace_back("chat_template", jstr(ct->s));
  tc = jobj(cfg);
  return {{"tokenizer.json", bytes_of(json_text(tj))}, {"tokenizer_config.json", bytes_of(json_text(tc))}};
}

HfFileList write_hf_checkpoint(const GgufFile& g, QType dtype, int shards, std::vector<uint8_t>* gguf_out) {
  const std::string arch = g.get_string("general.architecture");
  auto key = [&](const char* k) { return arch + "." + k; };
  const bool bert = arch == "bert", gemma = arch.compare(0, 5, "gemma") == 0, llama = arch == "llama";
  const int heads = (int)g.get_int(key("attention.head_count")), kv_heads = (int)g.get_int_or(key("attention.head_count_kv"), heads);
  std::vector<HfTensor> hf;
  GgufWriter w;
  for (const auto& kv : g.metadata())
    if (kv.first != "general.alignment") w.add_value(kv.first, kv.second);
  for (const GgufTensorInfo& t : g.tensors()) {
    const bool vec = t.rank() == 1;
    const uint64_t cols = t.dim(0), rows = vec ? 1 : t.dim(1);
    QType st;
    QKV_CHECK(qtype_of_ggml(t.type, &st), "a stored type");
    std::vector<float> v(rows * cols);
    for (uint64_t r = 0; r < rows; r++)
      dequantize_row_ref(st, g.tensor_data(t) + r * qtype_row_bytes(st, (int)cols), v.data() + r * cols, (int)cols);
    const bool norm_shift = gemma && vec && t.name.size() > 11 && t.name.compare(t.name.size() - 11, 11, "norm.weight") == 0;
    const bool permute = llama && !vec && (t.name.find(".attn_q.") != std::string::npos || t.name.find(".attn_k.") != std::string::npos);
    std::vector<float> h = v;
    if (norm_shift)
      for (float& x : h) x -= 1.0f;
    if (permute) {  // GGUF row h*hd + 2i + j holds HF row h*hd + j*half + i
      const uint64_t nh = t.name.find(".attn_q.") != std::string::npos ? heads : kv_heads, half = rows / nh / 2;
      for (uint64_t hh = 0; hh < nh; hh++)
        for (uint64_t j = 0; j < 2; j++)
          for (uint64_t i = 0; i < half; i++)
            std::memcpy(&h[(hh * 2 * half + j * half + i) * cols], &v[(hh * 2 * half + 2 * i + j) * cols], cols * sizeof(float));
    }
    HfTensor ht;
    ht.name = hf_name(arch, t.name);
    ht.shape = vec ? std::vector<uint64_t>{cols} : std::vector<uint64_t>{rows, cols};
    ht.type = dtype;
    ht.bytes = encode(dtype, h);
    if (gemma && t.name == "token_embd.weight") {  // Gemma's embedding has rows past the vocabulary (the converter drops them)
      const std::vector<float> extra(8 * cols, 0.5f);
      const std::vector<uint8_t> eb = encode(dtype, extra);
      ht.bytes.insert(ht.bytes.end(), eb.begin(), eb.end());
      ht.shape[0] += 8;
    }
    // The GGUF a converter writes from these bytes: decoded, +1 / permuted back, vectors F32.
    std::vector<float> back = decode(dtype, ht.bytes, h.size());  // (without Gemma's extra rows)
    if (norm_shift)
      for (float& x : back) x += 1.0f;
    if (permute) back = v.size() == back.size() ? [&] {
      std::vector<float> p(back.size());
      const uint64_t nh = t.name.find(".attn_q.") != std::string::npos ? heads : kv_heads, half = rows / nh / 2;
      for (uint64_t hh = 0; hh < nh; hh++)
        for (uint64_t j = 0; j < 2; j++)
          for (uint64_t i = 0; i < half; i++)
            std::memcpy(&p[(hh * 2 * half + 2 * i + j) * cols], &back[(hh * 2 * half + j * half + i) * cols], cols * sizeof(float));
      return p;
    }() : back;
    const bool table = t.name == "position_embd.weight" || t.name == "token_types.weight";
    w.add_tensor(t.name, t.dims, back.data(), vec || table ? QType::F32 : dtype);
    hf.push_back(std::move(ht));
  }
  if (gguf_out) *gguf_out = w.finish();

  // config.json
  std::vector<std::pair<std::string, Json>> c;
  c.emplace_back("architectures", jarr({jstr(bert ? "BertModel" : arch + "ForCausalLM")}));
  c.emplace_back("model_type", jstr(arch == "gemma3" ? "gemma3_text" : arch));
  c.emplace_back("hidden_size", jnum((double)g.get_int(key("embedding_length"))));
  c.emplace_back("intermediate_size", jnum((double)g.get_int(key("feed_forward_length"))));
  c.emplace_back("num_hidden_layers", jnum((double)g.get_int(key("block_count"))));
  c.emplace_back("num_attention_heads", jnum(heads));
  c.emplace_back("num_key_value_heads", jnum(kv_heads));
  c.emplace_back("max_position_embeddings", jnum((double)g.get_int(key("context_length"))));
  if (g.find(key("attention.key_length"))) c.emplace_back("head_dim", jnum((double)g.get_int(key("attention.key_length"))));
  if (bert) {
    c.emplace_back("layer_norm_eps", jnum(g.get_float_or(key("attention.layer_norm_epsilon"), 1e-12)));
  } else {
    c.emplace_back("rms_norm_eps", jnum(g.get_float_or(key("attention.layer_norm_rms_epsilon"), 1e-5)));
    c.emplace_back("rope_theta", jnum(g.get_float_or(key("rope.freq_base"), 10000.0)));
    c.emplace_back("tie_word_embeddings", jbool(g.find_tensor("output.weight") == nullptr));
  }
  if (g.find(key("rope.scaling.type")) && g.get_string(key("rope.scaling.type")) == "linear")
    c.emplace_back("rope_scaling", jobj({{"rope_type", jstr("linear")}, {"factor", jnum(g.get_float(key("rope.scaling.factor")))}}));
  if (g.find(key("attention.sliding_window"))) c.emplace_back("sliding_window", jnum((double)g.get_int(key("attention.sliding_window"))));
  if (arch == "gemma2") {
    c.emplace_back("attn_logit_softcapping", jnum(g.get_float_or(key("attn_logit_softcapping"), 50.0)));
    c.emplace_back("final_logit_softcapping", jnum(g.get_float_or(key("final_logit_softcapping"), 30.0)));
  }
  c.emplace_back("torch_dtype", jstr(dtype == QType::F32 ? "float32" : dtype == QType::F16 ? "float16" : "bfloat16"));
  HfFileList files = {{"config.json", bytes_of(json_text(jobj(c)))}};
  for (auto& f : write_hf_tokenizer(g, g.find("tokenizer.ggml.add_bos_token") ? g.get("tokenizer.ggml.add_bos_token").u != 0 : false))
    files.push_back(std::move(f));
  if (bert) {
    const int64_t pool = g.get_int_or(key("pooling_type"), 0);
    if (pool >= 1 && pool <= 3)
      files.push_back({"1_Pooling/config.json",
                       bytes_of(json_text(jobj({{"pooling_mode_mean_tokens", jbool(pool == 1)}, {"pooling_mode_cls_token", jbool(pool == 2)},
                                                {"pooling_mode_lasttoken", jbool(pool == 3)}})))});
  }
  if (shards <= 1) {
    files.push_back({"model.safetensors", write_safetensors(hf)});
    return files;
  }
  std::vector<std::pair<std::string, Json>> map;
  for (int s = 0; s < shards; s++) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
    std::vector<HfTensor> part;
    for (size_t i = (size_t)s; i < hf.size(); i += (size_t)shards) {
      part.push_back(hf[i]);
      map.emplace_back(hf[i].name, jstr(name));
    }
    files.push_back({name, write_safetensors(part)});
  }
  files.push_back({"model.safetensors.index.json", bytes_of(json_text(jobj({{"metadata", jobj({})}, {"weight_map", jobj(map)}})))});
  return files;
}

}  // namespace qkv
