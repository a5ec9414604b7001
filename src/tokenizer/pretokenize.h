// Byte-level BPE pre-tokenizers of GGUF models (tokenizer.ggml.pre): each is llama.cpp's list of
// regular expressions for that name, run by the linear-time engine in regex.h over Unicode
// categories.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../common.h"

namespace qkv {

// llama.cpp's pre-tokenizer types (one per distinct regex list and flags); each is a list of
// regexes applied in turn, every stage splitting the fragments the previous one left
// (pretokenize.cpp has the lists, each with the tokenizer.ggml.pre names that select it).
enum class PreTokenizer {
  Default,
  Gpt2,
  Llama3,
  Dbrx,
  Jais2,
  Qwen2,
  Qwen35,
  Starcoder,
  Falcon,
  DeepseekLlm,
  DeepseekCoder,
  Deepseek3,
  Spark25,
  Youtu,
  Poro,
  Viking,
  Tekken,
  Chameleon,
  Gpt4o,
  GraniteEmbMulti,
  Superbpe,
  Bailingmoe,
  SeedCoder,
  Ufakzeka,
  Laguna,
  ExaoneMoe,
  Minicpm5,
  Afmoe,
  TinyAya,
  KimiK2,
  // SentencePiece-style BPE over raw UTF-8 (no byte-level alphabet; pre_tokenizer_raw_utf8):
  Gemma4,      // spaces as U+2581, split at newline runs only
  SarvamMoe,   // the same, spaces cleaned differently on output
  Whitespace,  // runs of non-space characters
};

// The tokenizer.ggml.pre name -> kind; throws Error(Unsupported) listing the known names.
PreTokenizer pre_tokenizer_from_name(const std::string& name);
const char* pre_tokenizer_names();
// llama.cpp's flags of a kind: a pre-token that is itself in the vocabulary is taken whole
// (ignore_merges), and whether BOS is added when the GGUF does not say.
bool pre_tokenizer_ignores_merges(PreTokenizer kind);
bool pre_tokenizer_adds_bos(PreTokenizer kind);
// Kinds whose merges run over the text's own UTF-8 characters, with <0xXX> byte tokens for what
// no token spells (llama.cpp's byte_encode = false), and those that write spaces as U+2581 first.
bool pre_tokenizer_raw_utf8(PreTokenizer kind);
bool pre_tokenizer_escapes_spaces(PreTokenizer kind);
// The kind's regexes, as llama.cpp lists them (a stage llama.cpp runs by custom code is named
// by its regex too).
const std::vector<std::string>& pre_tokenizer_regexes(PreTokenizer kind);

// Unicode general-category class of a code point: 1 letter, 2 number, 3 punctuation, 4 mark,
// 5 symbol, 0 other; unicode_category() tells the letters apart (unicode_table.inc's codes).
int unicode_class(uint32_t cp);
int unicode_category(uint32_t cp);
bool unicode_is_space(uint32_t cp);

// UTF-8 -> code points; invalid bytes become U+FFFD (one per byte), as llama.cpp decodes them.
std::vector<uint32_t> utf8_to_codepoints(const std::string& s);

// GPT-2's byte-level alphabet: printable bytes stand for themselves, the others are moved to
// U+0100 upwards in byte order, so every byte is one visible character.
uint32_t gpt2_byte_to_cp(uint8_t b);
int gpt2_cp_to_byte(uint32_t cp);  // -1 if cp is not one of those 256 characters

// Splits text into pre-tokens (UTF-8 strings whose concatenation is the text's code points).
// *steps (if given) grows by the work done (regex VM steps), for the linearity tests.
std::vector<std::string> pre_tokenize(const std::string& text, PreTokenizer kind, uint64_t* steps = nullptr);

}  // namespace qkv
