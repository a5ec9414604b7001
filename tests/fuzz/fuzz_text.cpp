// libFuzzer target over the untrusted text qkv reads besides model bytes: chat templates run by
// the Jinja runtime, and arbitrary text through the tokenizers. The first byte picks the mode
// (even: the rest is a template, odd: the rest is text to tokenize); every input must end in a
// result or a qkv::Error within the per-input time and memory bounds scripts/fuzz.sh sets.
//
// Templates are rendered straight (render_jinja_chat, with conversations that carry tool calls,
// template variables and Unicode) and through the chat layer (probe, fallback, rendering).
// Text is tokenized (with and without special tokens) and detokenized by the real vocabularies
// in ../shared/vocab when they are there (SentencePiece, BPE with several pre-tokenizers,
// WordPiece), each round trip checked for what must hold.
//
// Seeds: run with QKV_FUZZ_WRITE_SEEDS=DIR to write a seed corpus into DIR and exit.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "formats/file.h"
#include "formats/loader.h"
#include "chat/chat.h"
#include "chat/jinja.h"
#include "tokenizer/tokenizer.h"

using namespace qkv;

namespace {

std::vector<std::unique_ptr<Tokenizer>> g_tokenizers;

void load_vocabularies() {
  const std::string dir = getenv("QKV_FUZZ_VOCAB") ? getenv("QKV_FUZZ_VOCAB") : QKV_SOURCE_DIR "/../shared/vocab";
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".gguf") == 0) names.push_back(n);
  }
  closedir(d);
  for (const std::string& n : names) {
    try {
      if (auto t = embedded_tokenizer(map_file(dir + "/" + n))) g_tokenizers.push_back(std::move(t));
    } catch (const Error&) {  // a vocabulary qkv does not read: not this target's concern
    }
  }
}

void run_template(const std::string& t) {
  JinjaChatInput in;
  in.messages = {
      {"system", "Be brief."},
      {"user", "Weather in Paris? caf\xc3\xa9 \xf0\x9f\x99\x82"},
      {"assistant", "",
       R"({"tool_calls": [{"id": "call_123456789", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]})"},
      {"tool", "{\"temp\": 21}", R"({"tool_call_id": "call_123456789", "name": "get_weather"})"},
      {"user", "Thanks"}};
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.vars_json =
      R"({"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}], "enable_thinking": false})";
  try {
    render_jinja_chat(t, in);
  } catch (const Error&) {
  }
  in.add_generation_prompt = false;
  in.vars_json.clear();
  in.messages.resize(2);
  try {
    render_jinja_chat(t, in);
  } catch (const Error&) {
  }
  try {
    const ChatTemplate ct = detect_chat_template(t, "<s>", "</s>", true, false);
    render_chat(ct, {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}}, true);
  } catch (const Error&) {
  }
}

void run_text(const std::string& text) {
  for (const auto& t : g_tokenizers) {
    for (bool special : {false, true}) {
      std::vector<int> ids;
      try {
        ids = t->encode(text, true, false, special);
      } catch (const Error&) {
        continue;
      }
      std::string out;
      for (size_t i = 0; i < ids.size(); i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab_size()) __builtin_trap();  // an id outside the vocabulary
        if (i) out += t->decode(ids[i - 1], ids[i]);
      }
    }
  }
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
  if (!f) fail(ErrorCode::Io, "cannot write " + path);
}

void write_seeds(const std::string& dir) {
  const char* const templates[] = {
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
      "{{ bos_token }}{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('alternate') }}{% endif %}"
      "[INST] {{ m.content | trim }} [/INST]{% endfor %}",
      "{%- set ns = namespace(n=0) -%}{%- for k, v in {2: 'b', 1: 'a'} | dictsort -%}{%- set ns.n = ns.n + k -%}{{ v }}{%- endfor -%}{{ ns.n }}"
      "{% filter upper %}{{ tools | tojson(indent=2, ensure_ascii=true) if tools is defined }}{% endfilter %}",
      "{%- macro f(x, d=1) -%}{{ x ~ d }}{%- endmacro -%}{% for m in messages | selectattr('tool_calls', 'defined') %}"
      "{% for tc in m.tool_calls %}{{ f(tc.function.name, d=tc.function.arguments | items | list) }}{% endfor %}{% endfor %}"
      "{{ messages | map(attribute='content') | map('length') | sum }}{{ 'abcabc'.split('b') }}{{ 'x' in 'axb' }}{{ messages[::-1][0].role }}",
      "{% set a = [1, 2] %}{% set b = [a, a] %}{% set c = [b, b] %}{{ c == [b, b] }}{{ c | string | length }}{{ (c | first)[0][1:] }}",
  };
  int i = 0;
  for (const char* t : templates) write(dir + "/template-" + std::to_string(i++), std::string(1, '\0') + t);
  const char* const texts[] = {
      "Hello world! 123 4567 don't", "<s>[INST] caf\xc3\xa9 \xf0\x9f\x99\x82 <|im_end|> \t\n\n  x",
      "11111111111111111111 aaaa",
      "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xd0\xbf\xd1\x80\xd0\xb8 \xce\xb1\xce\xb2 \xff\xfe broken"};
  i = 0;
  for (const char* t : texts) write(dir + "/text-" + std::to_string(i++), std::string(1, '\1') + t);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = getenv("QKV_FUZZ_WRITE_SEEDS")) {
    try {
      write_seeds(dir);
    } catch (const Error& e) {
      fprintf(stderr, "seed writing failed: %s\n", e.what());
      exit(1);
    }
    fprintf(stderr, "seeds written to %s\n", dir);
    exit(0);
  }
  load_vocabularies();
  fprintf(stderr, "[fuzz_text] %zu vocabularies\n", g_tokenizers.size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) run_template(rest);
  else run_text(rest);
  return 0;
}
