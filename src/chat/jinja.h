// A small Jinja interpreter for chat templates (tokenizer.chat_template), so that chat prompts
// come out as the model's own template writes them, which is what Hugging Face (Jinja2) and
// llama.cpp render. It covers what real chat templates use (docs/chat-templates.md lists the
// statements, filters, tests and methods); anything else is refused with ErrorCode::Unsupported,
// so that a caller can fall back to a built-in rendering; raise_exception() in a template gives
// ErrorCode::BadArgument with the template's message. Output, work and recursion are bounded, so
// a hostile template fails cleanly instead of running away.
#pragma once
#include <string>
#include <vector>

namespace qkv {

struct JinjaMessage {
  std::string role, content;
  // A JSON object of the message's other fields (tool_calls, name, reasoning_content, ...), or
  // empty: they become the message's attributes beside role and content.
  std::string fields_json;
};

struct JinjaChatInput {
  std::vector<JinjaMessage> messages;
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;
  // A JSON object of further variables (tools, enable_thinking, documents, ...), or empty.
  std::string vars_json;
};

// Renders a chat template with messages, add_generation_prompt, bos_token, eos_token, the
// functions above and the variables of vars_json defined (anything else is undefined). Malformed
// JSON, or a variable that would replace one of qkv's, is ErrorCode::BadArgument.
std::string render_jinja_chat(const std::string& tmpl, const JinjaChatInput& in);

}  // namespace qkv
