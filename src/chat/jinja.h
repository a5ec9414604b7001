// A small Jinja interpreter for chat templates (tokenizer.chat_template), so that chat prompts
// come out as the model's own template writes them, which is what llama.cpp (through its Jinja
// engine) and Hugging Face render. It covers what chat templates use:
//   - text, {{ expressions }}, {% statements %}, {# comments #}, the '-' whitespace controls, and
//     trim_blocks / lstrip_blocks as Hugging Face sets them;
//   - for (with loop.index/index0/first/last/length/revindex/previtem/nextitem and loop.cycle(),
//     an 'if' filter, two-name unpacking and else), break / continue (Hugging Face enables
//     Jinja's loop controls), if / elif / else, set (also ns.attr = ...) and {% set x %} blocks;
//   - macros (defaults, keyword arguments, varargs / kwargs, recursion; one defined inside a
//     block sees the names there) and {% call(args) m() %} blocks with caller(args);
//   - namespace(), range(), dict(), raise_exception(), strftime_now();
//   - literals (strings, numbers, true/false/none, lists, dicts), attributes and subscripts,
//     slices, + - * / // % ~, comparisons, in / not in, and / or / not, a if b else c;
//   - filters trim, length, count, upper, lower, capitalize, title, string, int, float, first,
//     last, join, default, tojson (indent, sort_keys), indent (width, first, blank), unique,
//     list, reverse, replace, safe, items, select, reject, selectattr, rejectattr,
//     map(attribute=...); tests defined, undefined, none, string,
//     number, integer, float, boolean, mapping, iterable, sequence, callable, true, false, odd,
//     even, eq / equalto, ne, in;
//   - string methods strip, lstrip, rstrip, split, startswith, endswith, upper, lower, replace,
//     title, capitalize, find; dict methods get, items, keys, values.
// Anything else (filter blocks, includes, other filters) is refused with ErrorCode::Unsupported,
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
