// Chat formats: detection from the Jinja text by its distinctive markers, and rendering.
#include "chat.h"

#include "../common.h"
#include "jinja.h"
#include "../tokenizer/tokenizer.h"

namespace qkv {

namespace {
bool has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

std::string trim(const std::string& s) {
  const char* ws = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return std::string();
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}
}  // namespace

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::ChatML: return "chatml";
    case ChatFormat::Llama3: return "llama3";
    case ChatFormat::Llama2: return "llama2";
    case ChatFormat::Gemma: return "gemma";
    case ChatFormat::Phi3: return "phi3";
  }
  return "?";
}

namespace {
std::string render_jinja(const ChatTemplate& t, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                         const std::string& vars_json = "") {
  JinjaChatInput in;
  for (const ChatMessage& m : messages) in.messages.push_back({m.role, m.content, m.fields_json});
  in.vars_json = vars_json;
  in.add_generation_prompt = add_generation_prompt;
  in.bos_token = t.bos_token;
  in.eos_token = t.eos_token;
  std::string o = render_jinja_chat(t.jinja, in);
  const std::string &b = t.bos_token, &e = t.eos_token;
  if (t.add_bos && !b.empty() && o.compare(0, b.size(), b) == 0) o.erase(0, b.size());
  if (t.add_eos && !e.empty() && o.size() >= e.size() && o.compare(o.size() - e.size(), e.size(), e) == 0)
    o.erase(o.size() - e.size());
  return o;
}
}  // namespace

ChatTemplate detect_chat_template(const std::string& j, const std::string& bos_token, const std::string& eos_token,
                                  bool add_bos, bool add_eos) {
  ChatTemplate t = detect_chat_format(j);
  t.format_known = !t.guessed;
  t.jinja = j;
  t.bos_token = bos_token;
  t.eos_token = eos_token;
  t.add_bos = add_bos;
  t.add_eos = add_eos;
  if (!j.empty()) {
    try {  // a template that runs, and whose output carries every message's text
      const std::string o = render_jinja(t, {{"user", "Hi7"}, {"assistant", "Hello8."}, {"user", "Bye9"}}, true);
      t.jinja_ok = o.find("Hi7") != std::string::npos && o.find("Hello8.") != std::string::npos &&
                   o.find("Bye9") != std::string::npos;
      if (!t.jinja_ok)
        t.fallback_reason = "chat template: its output for a test conversation leaves out the messages' text";
    } catch (const Error& e) {
      t.jinja_ok = false;
      t.fallback_reason = std::string(e.what()) + " (" + error_code_name(e.code()) + ")";
    }
    if (t.jinja_ok) t.guessed = false;
  }
  return t;
}

ChatTemplate chat_template_of(const Tokenizer* tok) {
  if (!tok) return detect_chat_template("");
  auto text = [&](int id) { return id >= 0 && id < tok->vocab_size() ? tok->piece(id) : std::string(); };
  return detect_chat_template(tok->chat_template(), text(tok->bos_id()), text(tok->eos_id()), tok->add_bos(),
                              tok->add_eos());
}

ChatTemplate detect_chat_format(const std::string& j) {
  ChatTemplate t;
  t.guessed = false;
  if (has(j, "<|im_start|>")) {
    t.format = ChatFormat::ChatML;
  } else if (has(j, "<|start_header_id|>") && has(j, "<|eot_id|>")) {
    t.format = ChatFormat::Llama3;
  } else if (has(j, "<|user|>") || (has(j, "<|end|>") && has(j, "'<|' + message['role']"))) {
    t.format = ChatFormat::Phi3;
  } else if (has(j, "<start_of_turn>")) {
    t.format = ChatFormat::Gemma;
  } else if (has(j, "[INST]")) {
    t.format = ChatFormat::Llama2;
    t.llama2_system = has(j, "<<SYS>>");
    t.llama2_bos_in_history = has(j, "bos_token + '[INST]") || has(j, "bos_token + \"[INST]");
    t.llama2_strip = has(j, "content.strip()") || has(j, "content | trim");
  } else {
    t.format = ChatFormat::ChatML;
    t.guessed = true;
  }
  return t;
}

std::string render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        const std::string& vars_json) {
  bool extras = !vars_json.empty();  // what only the template itself can render
  for (const ChatMessage& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool")
      fail(ErrorCode::BadArgument, "chat message role '" + m.role + "' is not system, user, assistant or tool");
    extras = extras || m.role == "tool" || !m.fields_json.empty();
  }
  if (t.jinja_ok) {
    try {
      return render_jinja(t, messages, add_generation_prompt, vars_json);
    } catch (const Error&) {
      // A recognized format renders what its template refused (say, a system message that a
      // Gemma template raises on); an unknown template's refusal, or one about what only the
      // template can render, is the caller's error.
      if (!t.format_known || extras) throw;
    }
  }
  if (extras)
    fail(
        ErrorCode::Unsupported,
        t.jinja.empty()
            ? "chat: tools, template variables, message fields and the 'tool' role need the model's chat template, and it has none"
            : "chat: tools, template variables, message fields and the 'tool' role need the model's own chat template, which qkv cannot run (it renders this model's chat format by hand)");
  std::string o;
  switch (t.format) {
    case ChatFormat::ChatML:
      for (const ChatMessage& m : messages) o += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (add_generation_prompt) o += "<|im_start|>assistant\n";
      break;
    case ChatFormat::Llama3:
      for (const ChatMessage& m : messages)
        o += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
      if (add_generation_prompt) o += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatFormat::Phi3:
      for (const ChatMessage& m : messages) o += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
      if (add_generation_prompt) o += "<|assistant|>\n";
      break;
    case ChatFormat::Gemma: {
      // No system role: the system text opens the first user turn.
      std::string system;
      for (const ChatMessage& m : messages) {
        if (m.role == "system") {
          system += trim(m.content) + "\n\n";
          continue;
        }
        o += "<start_of_turn>" + std::string(m.role == "assistant" ? "model" : "user") + "\n";
        if (m.role == "user" && !system.empty()) o += system, system.clear();
        o += trim(m.content) + "<end_of_turn>\n";
      }
      if (add_generation_prompt) o += "<start_of_turn>model\n";
      break;
    }
    case ChatFormat::Llama2: {
      // [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant}</s><s>[INST] {user} [/INST]
      bool inside = true;
      o += "[INST] ";
      for (const ChatMessage& m : messages) {
        const std::string content = t.llama2_strip ? trim(m.content) : m.content;
        if (!inside) {
          inside = true;
          o += t.llama2_bos_in_history ? "<s>[INST] " : "[INST] ";
        }
        if (m.role == "system") o += t.llama2_system ? "<<SYS>>\n" + content + "\n<</SYS>>\n\n" : content + "\n";
        else if (m.role == "user") o += content + " [/INST]";
        else o += content + "</s>", inside = false;
      }
      break;
    }
  }
  return o;
}

}  // namespace qkv
