// `qkv info` and `qkv tokenize`: see inspect.h.
#include "inspect.h"

#include <cstdio>

#include "../common.h"

#include "../formats/hf.h"
#include "../formats/detect.h"
#include "args.h"
#include "../formats/gguf.h"
#include "../formats/gguf_encdec.h"
#include "../formats/loader.h"
#include "../chat/chat.h"
#include "../tokenizer/tokenizer.h"

namespace qkv {

namespace {

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += (char)c;
    else if (c == '\n') o += "\\n";
    else if (c == '\t') o += "\\t";
    else if (c == '\r') o += "\\r";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else o += (char)c;
  }
  return o + "\"";
}

// A tokenizer: the model's own (GGUF) or the llama2.c file `tok` (checked against `vocab`).
std::unique_ptr<Tokenizer> tokenizer_of(const std::shared_ptr<const Blob>& model, const Blob* tok, int vocab) {
  std::unique_ptr<Tokenizer> t = embedded_tokenizer(model);
  if (!t && tok) t = std::make_unique<Tokenizer>(Tokenizer::from_llama2c(tok->data(), tok->size(), vocab));
  return t;
}

}  // namespace

InspectArgs parse_inspect_args(const std::string& cmd, const std::vector<std::string>& args) {
  const std::string usage =
      cmd == "tokenize" ? "usage: qkv tokenize MODEL [-z TOKENIZER] TEXT" : "usage: qkv info MODEL [-z TOKENIZER]";
  InspectArgs a;
  bool have_text = false, options_done = false;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& s = args[i];
    if (!options_done && s == "--") {
      options_done = true;  // a TEXT that starts with '-' comes after "--"
    } else if (!options_done && s == "-z") {
      if (i + 1 >= args.size()) fail(ErrorCode::BadArgument, "option -z needs a value");
      a.tokenizer_path = args[++i];
    } else if (!options_done && s.size() > 1 && s[0] == '-') {
      fail(ErrorCode::BadArgument, unknown_option_message(s, {"-z"}) + " (" + usage + ")");
    } else if (a.model_path.empty()) {
      a.model_path = s;
    } else if (cmd == "tokenize" && !have_text) {
      a.text = s;
      have_text = true;
    } else {
      fail(ErrorCode::BadArgument, "unexpected argument '" + s + "' (" + usage + ")");
    }
  }
  if (a.model_path.empty()) fail(ErrorCode::BadArgument, "missing MODEL path (" + usage + ")");
  if (cmd == "tokenize" && !have_text) fail(ErrorCode::BadArgument, "missing TEXT (" + usage + ")");
  return a;
}

bool needs_separate_tokenizer(const Blob& model) {
  return !looks_like_gguf(model.data(), model.size()) && !as_hf_files(&model);
}

std::string model_info_json(const std::shared_ptr<const Blob>& model, const Blob* tok) {
  const bool gguf = looks_like_gguf(model->data(), model->size());
  const bool encdec = gguf && is_encdec_model(model);
  ModelConfig c;
  std::vector<AttnKind> cross;  // encoder-decoders: the cross-attention's kinds
  if (encdec) {
    EncDecModelData m = load_encdec_model(model);
    c = m.config;
    cross = m.encdec.cross_attn;
  } else {
    c = load_model(model).config;
  }
  std::unique_ptr<Tokenizer> t = tokenizer_of(model, tok, c.vocab_size);
  std::string o = "{\n";
  auto field = [&](const char* k, const std::string& v) {
    o += std::string(o.size() > 2 ? ",\n" : "") + "  \"" + k + "\": " + v;
  };
  auto str = [&](const char* k, const std::string& v) { field(k, json_string(v)); };
  auto num = [&](const char* k, long long v) { field(k, std::to_string(v)); };
  str("format", gguf ? "gguf" : as_hf_files(model.get()) ? "huggingface" : "llama2.c");
  str("arch", c.arch);
  field("encoderDecoder", encdec ? "true" : "false");
  str("description", c.describe());
  num("dim", c.dim);
  num("hiddenDim", c.hidden_dim);
  num("layers", c.n_layers);
  num("heads", c.n_heads);
  num("kvHeads", c.n_kv_heads);
  num("headDim", c.head_dim);
  num("vocabSize", c.vocab_size);
  num("contextLength", c.seq_len);
  str("norm", norm_kind_name(c.norm));
  str("positional", pos_kind_name(c.pos));
  str("ffn", ffn_kind_name(c.ffn));
  field("tiedClassifier", c.tied_classifier ? "true" : "false");
  // Attention kinds other than softmax (docs/attention-kinds.md), only where the file has them.
  auto kinds = [&](const char* k, const std::vector<AttnKind>& v) {
    if (v.empty()) return;
    std::string a;
    for (AttnKind x : v) a += (a.empty() ? "[" : ", ") + json_string(attn_kind_name(x));
    field(k, a + "]");
  };
  kinds("attentionKinds", c.layer_attn);
  kinds("crossAttentionKinds", cross);
  num("fileBytes", (long long)input_bytes(*model));
  str("tokenizer", t ? t->kind() : "none");
  if (t) {
    num("bosId", t->bos_id());
    num("eosId", t->eos_id());
    const ChatTemplate ct = chat_template_of(t.get());
    str("chatFormat", chat_format_name(ct.format));
    field("chatFormatGuessed", ct.guessed ? "true" : "false");
    str("chatTemplate", ct.jinja_ok ? "jinja" : ct.jinja.empty() ? "none" : "builtin");
  }
  return o + "\n}\n";
}

std::string tokenize_lines(const std::shared_ptr<const Blob>& model, const Blob* tok, const std::string& text) {
  // Only the vocabulary size is needed from a llama2.c checkpoint; GGUF carries the tokenizer.
  std::unique_ptr<Tokenizer> t = embedded_tokenizer(model);
  if (!t) {
    if (!tok) fail(ErrorCode::BadArgument, "a llama2.c checkpoint needs its tokenizer (-z TOKENIZER)");
    t = tokenizer_of(model, tok, load_model(model).config.vocab_size);
  }
  std::string o;
  for (int id : t->encode(text, true, false)) o += std::to_string(id) + "\t" + json_string(t->piece(id)) + "\n";
  return o;
}

}  // namespace qkv
