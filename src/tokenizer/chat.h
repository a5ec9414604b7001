// Chat templates: the format is recognized from the model's tokenizer.chat_template (a Jinja
// text qkv does not execute) and rendered by hand, as llama.cpp renders its known formats.
#pragma once
#include <string>
#include <vector>

namespace qkv {

enum class ChatFormat { ChatML, Llama3, Llama2, Gemma, Phi3 };

struct ChatMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

struct ChatTemplate {
  ChatFormat format = ChatFormat::ChatML;
  bool guessed = true;  // no template, or one not recognized: ChatML as a fallback
  bool llama2_system = true, llama2_bos_in_history = false, llama2_strip = false;
  std::string bos_text, eos_text;  // Llama 2: "<s>" / "</s>" between turns
};

// Recognizes the format; an empty or unknown template gives ChatML with guessed = true.
ChatTemplate detect_chat_template(const std::string& jinja);
const char* chat_format_name(ChatFormat f);

// The prompt text for messages (specials spelled out; tokenize it with special parsing), ending
// with the assistant's turn opener when add_generation_prompt. Throws BadArgument on a bad role.
std::string render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& messages, bool add_generation_prompt);

}  // namespace qkv
