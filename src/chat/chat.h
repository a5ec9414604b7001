// Chat templates: the format is recognized from the model's tokenizer.chat_template (a Jinja
// text qkv does not execute) and rendered by hand, as llama.cpp renders its known formats.
#pragma once
#include <string>
#include <vector>

namespace qkv {

class Tokenizer;

enum class ChatFormat { ChatML, Llama3, Llama2, Gemma, Phi3 };

struct ChatMessage {
  std::string role;  // system, user, assistant (and tool, for templates that take it)
  std::string content;
  std::string fields_json;  // a JSON object of further fields for the template (tool_calls, ...), or empty
};

struct ChatTemplate {
  ChatFormat format = ChatFormat::ChatML;
  // Neither the template itself (see jinja.h) nor a recognized format renders the prompt: no
  // template, or one that the Jinja subset cannot run and whose format is not recognized.
  // ChatML is then a guess.
  bool guessed = true;
  bool llama2_system = true, llama2_bos_in_history = false, llama2_strip = false;
  // The template text, rendered by the Jinja subset when it can (jinja_ok: a probe conversation
  // rendered), else by the recognized format's built-in rendering.
  std::string jinja;
  bool jinja_ok = false;
  // Why the template is not used (empty when it is, or when there is none): what the Jinja subset
  // lacks or refused ("chat template: the filter 'wordwrap'"), or that its output leaves out the
  // conversation. Reported as info.chatFallbackReason.
  std::string fallback_reason;
  bool format_known = false;  // the format was recognized from the template's markers
  // bos_token / eos_token for the template, and whether tokenization adds them: a prompt that
  // starts with BOS (or ends with EOS) that tokenization adds again loses that copy, as llama.cpp
  // does.
  std::string bos_token, eos_token;
  bool add_bos = false, add_eos = false;
};

// Recognizes the format and probes the Jinja subset on the template; an empty template, or an
// unknown one the subset cannot run, gives ChatML with guessed = true.
ChatTemplate detect_chat_template(const std::string& jinja, const std::string& bos_token = "",
                                  const std::string& eos_token = "", bool add_bos = false, bool add_eos = false);
// The model's chat template with its BOS/EOS texts and flags (tok may be null: no template).
ChatTemplate chat_template_of(const Tokenizer* tok);
// The format alone, from the template's markers (no probe; guessed = not recognized).
ChatTemplate detect_chat_format(const std::string& jinja);
const char* chat_format_name(ChatFormat f);

// The prompt text for messages (specials spelled out; tokenize it with special parsing), ending
// with the assistant's turn opener when add_generation_prompt: the template's own output where
// the Jinja subset runs it, else the format's built-in rendering. Throws BadArgument on a bad
// role, and with the template's message when a template that only the subset renders raises.
// vars_json: a JSON object of further template variables (tools, enable_thinking, ...), or
// empty. Those, message fields and the 'tool' role need the template itself: with the built-in
// rendering they are ErrorCode::Unsupported.
std::string render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        const std::string& vars_json = "");

}  // namespace qkv
