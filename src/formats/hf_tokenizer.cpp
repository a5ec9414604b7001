// tokenizer.json (Hugging Face tokenizers) -> tokenizer.ggml.* keys, mapped onto qkv's tokenizers
// where they are the same algorithm:
//  - BPE with a ByteLevel pre-tokenizer -> byte-level BPE (gpt2): the pre-tokenizer chain
//    (ByteLevel's regex, Split regexes, Digits, Punctuation, Sequence) becomes a list of regexes,
//    matched to the llama.cpp pre-tokenizer with that list;
//  - BPE with byte_fallback and a Metaspace / Replace(" ", "▁") chain -> SentencePiece BPE (llama):
//    each piece's score is minus the rank of the first merge that forms it, so merging by score
//    applies the merges in their order;
//  - WordPiece -> bert, with the converter's spelling (word starts prefixed with U+2581, "##"
//    dropped from continuations);
//  - Unigram -> t5 (pieces and scores; the Precompiled normalizer's charsmap, base64-decoded).
// added_tokens are control (special) or user-defined tokens; BOS/EOS from tokenizer_config.json,
// whether BOS is added from its add_bos_token or the post_processor's template.
#include <algorithm>
#include <climits>
#include <map>

#include "../common.h"
#include "../json.h"
#include "../tokenizer/pretokenize.h"
#include "../tokenizer/tokenizer.h"
#include "gguf_writer.h"
#include "hf.h"

namespace qkv {

namespace {
[[noreturn]] void bad(const std::string& m) { fail(ErrorCode::BadTokenizer, "tokenizer.json: " + m); }
[[noreturn]] void unsupported(const std::string& m) { fail(ErrorCode::Unsupported, "tokenizer.json: " + m); }

std::string type_of(const Json* v) {
  const Json* t = v && v->k == Json::Obj ? v->get("type") : nullptr;
  return t && t->k == Json::Str ? t->s : "";
}
bool flag(const Json* obj, const char* k, bool def) {
  const Json* v = obj && obj->k == Json::Obj ? obj->get(k) : nullptr;
  return v && v->k == Json::Bool ? v->b : def;
}
std::string str(const Json* obj, const char* k) {
  const Json* v = obj && obj->k == Json::Obj ? obj->get(k) : nullptr;
  return v && v->k == Json::Str ? v->s : "";
}

// \uXXXX and \UXXXXXXXX escapes as the characters, and the case-insensitive contractions group
// as llama.cpp spells it, so that a pattern compares equal however it was written.
std::string normalize_regex(const std::string& r) {
  std::string out;
  for (size_t i = 0; i < r.size(); i++) {
    if (r[i] == '\\' && i + 1 < r.size() && (r[i + 1] == 'u' || r[i + 1] == 'U')) {
      const size_t n = r[i + 1] == 'u' ? 4 : 8;
      if (i + 2 + n <= r.size() && r.find_first_not_of("0123456789abcdefABCDEF", i + 2) >= i + 2 + n) {
        append_utf8(out, (uint32_t)std::stoul(r.substr(i + 2, n), nullptr, 16));
        i += 1 + n;
        continue;
      }
    }
    if (r[i] == '\\' && i + 1 < r.size()) {
      out += r.substr(i, 2);
      i++;
      continue;
    }
    out += r[i];
  }
  const std::string hf = "(?i:'s|'t|'re|'ve|'m|'ll|'d)",
                    ll = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
  for (size_t p; (p = out.find(hf)) != std::string::npos;) out.replace(p, hf.size(), ll);
  return out;
}

// The pre-tokenizer chain as the regexes it splits by, in order.
void chain_regexes(const Json* p, std::vector<std::string>& out, bool* byte_level) {
  const std::string t = type_of(p);
  if (t.empty()) return;
  if (t == "Sequence") {
    const Json* seq = p->get("pretokenizers");
    if (!seq || seq->k != Json::Arr) bad("a Sequence pre-tokenizer has no pretokenizers array");
    for (const Json& s : seq->arr) chain_regexes(&s, out, byte_level);
  } else if (t == "ByteLevel") {
    *byte_level = true;
    if (flag(p, "add_prefix_space", false)) unsupported("ByteLevel with add_prefix_space is not supported");
    if (flag(p, "use_regex", true)) out.push_back(pre_tokenizer_regexes(PreTokenizer::Gpt2)[0]);
  } else if (t == "Split") {
    const Json* pat = p->get("pattern");
    std::string re;
    if (pat && pat->k == Json::Obj && pat->get("Regex") && pat->get("Regex")->k == Json::Str) re = pat->get("Regex")->s;
    else if (pat && pat->k == Json::Obj && pat->get("String") && pat->get("String")->k == Json::Str) {
      for (char c : pat->get("String")->s) {
        if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) re += '\\';
        re += c;
      }
    } else bad("a Split pre-tokenizer has no pattern");
    if (str(p, "behavior") != "Isolated" || flag(p, "invert", false))
      unsupported("Split with behavior '" + str(p, "behavior") + "'" + (flag(p, "invert", false) ? " inverted" : "") +
                  " is not supported (Isolated is)");
    out.push_back(normalize_regex(re));
  } else if (t == "Digits") {
    out.push_back(flag(p, "individual_digits", false) ? "\\p{N}" : "\\p{N}+");
  } else if (t == "Punctuation") {
    out.push_back("[\\p{P}\\$\\+<=>\\^~\\|`]+");
  } else {
    unsupported("pre-tokenizer " + t + " is not supported with a BPE model");
  }
}

// tokenizer.ggml.pre for a regex list: the first llama.cpp pre-tokenizer with exactly that list
// and the file's ignore_merges.
std::string pre_name_for(const std::vector<std::string>& regexes, bool ignore_merges) {
  const std::string names = pre_tokenizer_names();
  for (size_t b = 0; b < names.size();) {
    size_t e = names.find(", ", b);
    if (e == std::string::npos) e = names.size();
    const std::string n = names.substr(b, e - b);
    b = e + 2;
    const PreTokenizer kind = pre_tokenizer_from_name(n);
    std::vector<std::string> theirs = pre_tokenizer_regexes(kind);
    for (std::string& r : theirs) r = normalize_regex(r);
    if (theirs == regexes && pre_tokenizer_ignores_merges(kind) == ignore_merges) return n;
  }
  std::string list;
  for (const std::string& r : regexes) list += (list.empty() ? "" : ", ") + r;
  unsupported("its pre-tokenizer splits by [" + list + "]" + (ignore_merges ? " with ignore_merges" : "") +
              ", which matches none of the pre-tokenizers qkv knows (llama.cpp's list)");
}

// Whether a normalizer or pre-tokenizer chain spells spaces as U+2581 (SentencePiece style), and
// whether it puts one before the text.
void spm_chain(const Json* p, bool* marker, bool* prefix) {
  const std::string t = type_of(p);
  if (t == "Sequence") {
    const Json* seq = p->get("normalizers") ? p->get("normalizers") : p->get("pretokenizers");
    if (seq && seq->k == Json::Arr)
      for (const Json& s : seq->arr) spm_chain(&s, marker, prefix);
  } else if (t == "Replace") {
    const Json* pat = p->get("pattern");
    if (pat && pat->k == Json::Obj && str(pat, "String") == " " && str(p, "content") == "\xE2\x96\x81") *marker = true;
  } else if (t == "Prepend") {
    if (str(p, "prepend") == "\xE2\x96\x81") *prefix = true;
  } else if (t == "Metaspace") {
    *marker = true;
    const std::string scheme = str(p, "prepend_scheme");
    if (scheme == "always" || scheme == "first" || (scheme.empty() && flag(p, "add_prefix_space", true)))
      *prefix = true;
  } else if (!t.empty() && t != "NFC" && t != "NFKC" && t != "Strip" && t != "ByteFallback" && t != "Fuse") {
    unsupported("normalizer or pre-tokenizer " + t + " is not supported with a SentencePiece-style BPE model");
  }
}

std::vector<uint8_t> base64(const std::string& s) {
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    int v = c >= 'A' && c <= 'Z'   ? c - 'A'
            : c >= 'a' && c <= 'z' ? c - 'a' + 26
            : c >= '0' && c <= '9' ? c - '0' + 52
            : c == '+'             ? 62
            : c == '/'             ? 63
                                   : -1;
    if (c == '=') break;
    if (v < 0) bad("precompiled_charsmap is not base64");
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back((uint8_t)(acc >> bits));
    }
  }
  return out;
}

// A special token's text in tokenizer_config.json: a string or {"content": ...}.
std::string token_text(const Json* v) {
  if (!v) return "";
  if (v->k == Json::Str) return v->s;
  if (v->k == Json::Obj) return str(v, "content");
  return "";
}
}  // namespace

size_t add_hf_tokenizer(GgufWriter& w, const HfFiles& files) {
  if (!files.find("tokenizer.json"))
    fail(ErrorCode::BadTokenizer, "Hugging Face checkpoint: tokenizer.json is missing");
  const Json tj = parse_json(files.text("tokenizer.json"), "tokenizer.json", ErrorCode::BadTokenizer);
  const Json tc = files.find("tokenizer_config.json") ? parse_json(files.text("tokenizer_config.json"),
                                                                   "tokenizer_config.json", ErrorCode::BadTokenizer)
                                                      : Json();
  if (tj.k != Json::Obj) bad("not a JSON object");
  const Json* model = tj.get("model");
  const std::string mtype = type_of(model);
  if (!model || model->k != Json::Obj) bad("no model object");

  // id -> text: the model's vocabulary, then added_tokens (which may extend it).
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<float> scores;
  auto put = [&](int64_t id, const std::string& text, int type) {
    if (id < 0 || id >= (1 << 24)) bad("token id " + std::to_string(id) + " is out of range");
    if ((size_t)id >= tokens.size()) {
      tokens.resize((size_t)id + 1);
      types.resize((size_t)id + 1, -1);
      scores.resize((size_t)id + 1, 0.0f);
    }
    tokens[(size_t)id] = text;
    types[(size_t)id] = type;
  };
  auto id_of = [&](const Json& v, const std::string& what) -> int64_t {
    if (v.k != Json::Num || v.s.empty() || v.s.size() > 9 || v.s.find_first_not_of("0123456789") != std::string::npos)
      bad(what + " must be a token id");
    return std::stoll(v.s);
  };
  const Json* vocab = model->get("vocab");
  if (!vocab) bad("the model has no vocab");
  if (mtype == "BPE" || mtype == "WordPiece") {
    if (vocab->k != Json::Obj) bad("the model's vocab must be an object {token: id}");
    for (const auto& kv : vocab->obj) put(id_of(kv.second, "vocab[" + kv.first + "]"), kv.first, kTokNormal);
  } else if (mtype == "Unigram") {
    if (vocab->k != Json::Arr) bad("the Unigram vocab must be an array of [piece, score]");
    for (size_t i = 0; i < vocab->arr.size(); i++) {
      const Json& e = vocab->arr[i];
      if (e.k != Json::Arr || e.arr.size() != 2 || e.arr[0].k != Json::Str || e.arr[1].k != Json::Num)
        bad("Unigram vocab entry " + std::to_string(i) + " is not [piece, score]");
      put((int64_t)i, e.arr[0].s, kTokNormal);
      scores[i] = std::strtof(e.arr[1].s.c_str(), nullptr);
    }
  } else {
    unsupported("model type '" + mtype + "' is not supported (BPE, WordPiece and Unigram are)");
  }
  std::map<std::string, int> special_ids;
  if (const Json* added = tj.get("added_tokens"); added && added->k == Json::Arr) {
    for (const Json& a : added->arr) {
      if (a.k != Json::Obj || !a.get("id") || !a.get("content") || a.get("content")->k != Json::Str)
        bad("an added token lacks id or content");
      const int64_t id = id_of(*a.get("id"), "added token id");
      put(id, a.get("content")->s, flag(&a, "special", false) ? kTokControl : kTokUserDefined);
      special_ids[a.get("content")->s] = (int)id;
    }
  }
  for (size_t i = 0; i < tokens.size(); i++)
    if (types[i] < 0) {  // a gap in the ids: a placeholder, as the converter writes
      tokens[i] = "[PAD" + std::to_string(i) + "]";
      types[i] = kTokUnused;
    }
  auto find_id = [&](const std::string& t) -> int {
    if (t.empty()) return -1;
    auto it = special_ids.find(t);
    if (it != special_ids.end()) return it->second;
    for (size_t i = 0; i < tokens.size(); i++)
      if (tokens[i] == t) return (int)i;
    return -1;
  };

  // BOS/EOS and whether they are added.
  const Json* tcp = tc.k == Json::Obj ? &tc : nullptr;
  int bos = find_id(token_text(tcp ? tcp->get("bos_token") : nullptr)),
      eos = find_id(token_text(tcp ? tcp->get("eos_token") : nullptr));
  bool add_bos = false;
  const Json* post = tj.get("post_processor");
  {  // the template's first piece, if a special token, is a BOS it adds (Llama 3's TemplateProcessing)
    const Json* single = post && type_of(post) == "TemplateProcessing" ? post->get("single") : nullptr;
    if (single && single->k == Json::Arr && !single->arr.empty()) {
      const Json* st = single->arr[0].k == Json::Obj ? single->arr[0].get("SpecialToken") : nullptr;
      if (st) {
        const int id = find_id(str(st, "id"));
        if (id >= 0) {
          add_bos = true;
          if (bos < 0) bos = id;
        }
      }
    }
  }
  bool add_eos = false;
  {  // ... and its last piece, if a special token, an EOS it adds (T5's </s>)
    const Json* single = post && type_of(post) == "TemplateProcessing" ? post->get("single") : nullptr;
    if (single && single->k == Json::Arr && single->arr.size() > 1) {
      const Json* st = single->arr.back().k == Json::Obj ? single->arr.back().get("SpecialToken") : nullptr;
      if (st) {
        const int id = find_id(str(st, "id"));
        if (id >= 0) {
          add_eos = true;
          if (eos < 0) eos = id;
        }
      }
    }
  }
  if (tcp && tcp->get("add_bos_token") && tcp->get("add_bos_token")->k == Json::Bool)
    add_bos = tcp->get("add_bos_token")->b;
  if (tcp && tcp->get("add_eos_token") && tcp->get("add_eos_token")->k == Json::Bool)
    add_eos = tcp->get("add_eos_token")->b;

  if (mtype == "WordPiece") {
    w.add_string("tokenizer.ggml.model", "bert");
    const std::string prefix =
        str(model, "continuing_subword_prefix").empty() ? "##" : str(model, "continuing_subword_prefix");
    for (size_t i = 0; i < tokens.size(); i++) {
      std::string& t = tokens[i];
      if (types[i] != kTokNormal || (t.size() >= 2 && t.front() == '[' && t.back() == ']')) {
        if (types[i] == kTokNormal) types[i] = kTokControl;
        continue;
      }
      t = t.compare(0, prefix.size(), prefix) == 0 ? t.substr(prefix.size()) : "\xE2\x96\x81" + t;
    }
    const int unk = find_id(str(model, "unk_token").empty() ? "[UNK]" : str(model, "unk_token"));
    if (unk >= 0) types[(size_t)unk] = kTokUnknown;
    const int cls = find_id(tcp && tcp->get("cls_token") ? token_text(tcp->get("cls_token")) : "[CLS]");
    const int sep = find_id(tcp && tcp->get("sep_token") ? token_text(tcp->get("sep_token")) : "[SEP]");
    w.add_strings("tokenizer.ggml.tokens", tokens);
    w.add_i32s("tokenizer.ggml.token_type", types);
    if (cls >= 0)
      w.add_u32("tokenizer.ggml.bos_token_id", (uint32_t)cls), w.add_u32("tokenizer.ggml.cls_token_id", (uint32_t)cls);
    if (sep >= 0) w.add_u32("tokenizer.ggml.seperator_token_id", (uint32_t)sep);
    if (unk >= 0) w.add_u32("tokenizer.ggml.unknown_token_id", (uint32_t)unk);
    w.add_bool("tokenizer.ggml.add_bos_token", cls >= 0);
    w.add_bool("tokenizer.ggml.add_sep_token", sep >= 0);
  } else if (mtype == "Unigram") {
    w.add_string("tokenizer.ggml.model", "t5");
    const Json* unk_v = model->get("unk_id");
    const int unk = unk_v && unk_v->k == Json::Num ? (int)id_of(*unk_v, "unk_id") : -1;
    if (unk >= 0 && (size_t)unk < types.size()) types[(size_t)unk] = kTokUnknown;
    // Metaspace gives the leading space; WhitespaceSplit (runs of spaces are one) or the
    // normalizer's Replace of " {2,}" is SentencePiece's remove_extra_whitespaces.
    bool prefix = false, squeeze = false;
    auto walk = [&](const Json* n, auto& self) -> void {
      const std::string t = type_of(n);
      if (t == "Sequence") {
        const Json* seq = n->get("pretokenizers") ? n->get("pretokenizers") : n->get("normalizers");
        if (seq && seq->k == Json::Arr)
          for (const Json& x : seq->arr) self(&x, self);
      } else if (t == "Metaspace") {
        bool marker = false;
        spm_chain(n, &marker, &prefix);
      } else if (t == "WhitespaceSplit") {
        squeeze = true;
      } else if (t == "Replace") {
        const Json* pat = n->get("pattern");
        if (pat && pat->k == Json::Obj && str(pat, "Regex") == " {2,}" && str(n, "content") == " ") squeeze = true;
        else unsupported("normalizer Replace other than \" {2,}\" -> \" \" is not supported with a Unigram model");
      } else if (!t.empty() && t != "Precompiled" && t != "Strip") {
        unsupported("normalizer or pre-tokenizer " + t + " is not supported with a Unigram model");
      }
    };
    walk(tj.get("pre_tokenizer"), walk);
    walk(tj.get("normalizer"), walk);
    std::vector<uint8_t> charsmap;
    const Json* norm = tj.get("normalizer");
    auto find_charsmap = [&](const Json* n, auto& self) -> void {
      if (type_of(n) == "Precompiled") charsmap = base64(str(n, "precompiled_charsmap"));
      if (type_of(n) == "Sequence" && n->get("normalizers") && n->get("normalizers")->k == Json::Arr)
        for (const Json& s : n->get("normalizers")->arr) self(&s, self);
    };
    find_charsmap(norm, find_charsmap);
    w.add_strings("tokenizer.ggml.tokens", tokens);
    w.add_f32s("tokenizer.ggml.scores", scores);
    w.add_i32s("tokenizer.ggml.token_type", types);
    if (unk >= 0) w.add_u32("tokenizer.ggml.unknown_token_id", (uint32_t)unk);
    w.add_bool("tokenizer.ggml.add_space_prefix", prefix);
    w.add_bool("tokenizer.ggml.remove_extra_whitespaces", squeeze);
    if (!charsmap.empty()) {
      GgufValue v;
      v.kind = GgufKind::ARRAY;
      v.elem = GgufKind::U8;
      v.raw = charsmap;
      w.add_value("tokenizer.ggml.precompiled_charsmap", v);
    }
  } else {  // BPE
    const Json* merges = model->get("merges");
    if (!merges || merges->k != Json::Arr) bad("the BPE model has no merges array");
    std::vector<std::string> merge_text;
    merge_text.reserve(merges->arr.size());
    for (const Json& m : merges->arr) {
      if (m.k == Json::Str) merge_text.push_back(m.s);
      else if (m.k == Json::Arr && m.arr.size() == 2 && m.arr[0].k == Json::Str && m.arr[1].k == Json::Str)
        merge_text.push_back(m.arr[0].s + " " + m.arr[1].s);
      else bad("a merge is neither \"a b\" nor [\"a\", \"b\"]");
    }
    bool marker = false, prefix = false;
    spm_chain(tj.get("normalizer"), &marker, &prefix);
    const Json* pre = tj.get("pre_tokenizer");
    if (type_of(pre) == "Metaspace") spm_chain(pre, &marker, &prefix);
    if (flag(model, "byte_fallback", false) || marker) {
      // SentencePiece BPE: merges become scores on the pieces they form.
      w.add_string("tokenizer.ggml.model", "llama");
      std::map<std::string, int> index;
      for (size_t i = 0; i < tokens.size(); i++) index.emplace(tokens[i], (int)i);
      std::vector<float> sc(tokens.size(), 0.0f);
      std::vector<bool> formed(tokens.size(), false);
      for (size_t r = 0; r < merge_text.size(); r++) {
        const size_t sp = merge_text[r].find(' ');
        if (sp == std::string::npos) bad("merge " + std::to_string(r) + " has no space");
        auto it = index.find(merge_text[r].substr(0, sp) + merge_text[r].substr(sp + 1));
        if (it != index.end() && !formed[(size_t)it->second]) {
          formed[(size_t)it->second] = true;
          sc[(size_t)it->second] = -(float)r;
        }
      }
      for (size_t i = 0; i < tokens.size(); i++) {
        if (types[i] == kTokNormal && tokens[i].size() == 6 && tokens[i].compare(0, 3, "<0x") == 0 &&
            tokens[i][5] == '>')
          types[i] = kTokByte;
        else if (types[i] == kTokNormal && !formed[i] && utf8_symbols(tokens[i]).size() > 1)
          sc[i] = -1e9f;  // no merge forms it
      }
      const int unk = find_id(str(model, "unk_token"));
      if (unk >= 0) types[(size_t)unk] = kTokUnknown;
      w.add_strings("tokenizer.ggml.tokens", tokens);
      w.add_f32s("tokenizer.ggml.scores", sc);
      w.add_i32s("tokenizer.ggml.token_type", types);
      w.add_bool("tokenizer.ggml.add_space_prefix", prefix);
      if (unk >= 0) w.add_u32("tokenizer.ggml.unknown_token_id", (uint32_t)unk);
    } else {
      std::vector<std::string> regexes;
      bool byte_level = false;
      chain_regexes(pre, regexes, &byte_level);
      if (!byte_level && type_of(tj.get("decoder")) != "ByteLevel")
        unsupported(
            "a BPE model without ByteLevel or SentencePiece-style (Metaspace, byte_fallback) handling is not supported");
      if (type_of(tj.get("normalizer")) != "" && type_of(tj.get("normalizer")) != "NFC")
        unsupported("normalizer " + type_of(tj.get("normalizer")) + " is not supported with a byte-level BPE model");
      w.add_string("tokenizer.ggml.model", "gpt2");
      w.add_string("tokenizer.ggml.pre", pre_name_for(regexes, flag(model, "ignore_merges", false)));
      w.add_strings("tokenizer.ggml.tokens", tokens);
      w.add_i32s("tokenizer.ggml.token_type", types);
      w.add_strings("tokenizer.ggml.merges", merge_text);
    }
  }
  if (mtype != "WordPiece") {
    if (bos >= 0) w.add_u32("tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (eos >= 0) w.add_u32("tokenizer.ggml.eos_token_id", (uint32_t)eos);
    w.add_bool("tokenizer.ggml.add_bos_token", add_bos && bos >= 0);
    w.add_bool("tokenizer.ggml.add_eos_token", add_eos && eos >= 0);
  }
  if (tcp) {
    const Json* ct = tcp->get("chat_template");
    if (ct && ct->k == Json::Str) w.add_string("tokenizer.chat_template", ct->s);
    else if (ct && ct->k == Json::Arr)  // named templates: the default one
      for (const Json& e : ct->arr)
        if (str(&e, "name") == "default") w.add_string("tokenizer.chat_template", str(&e, "template"));
  }
  return tokens.size();
}

}  // namespace qkv
