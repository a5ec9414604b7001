// The chat-template Jinja subset (src/chat/jinja.h) against Jinja2 itself, set up as
// Hugging Face's apply_chat_template sets it up (tests/native/chat/jinja_reference.py): every
// template below, in the styles of the popular models' templates and a few that exercise the
// language, is rendered with every conversation by both, and the texts must be byte-identical
// (a template that raises in Jinja2 must raise in qkv). Then what the chat layer does with the
// result, and hostile templates.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "chat/chat.h"
#include "chat/jinja.h"
#include "chat_templates.h"
#include "jinja_compare.h"

using namespace qkv;

namespace {

const char* const kTemplates[] = {
    kChatmlDefaultSystem,
    kLlama3Dated,
    kZephyr,
    kDeepSeekR1,
    kMistralV7,
    kChatmlMacros,
    kChatmlTools,
    // Gemma style: the system text folded into the first user turn, roles must alternate.
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set first = messages[0]['content'] + '\\n\\n' %}"
    "{% set turns = messages[1:] %}{% else %}{% set first = '' %}{% set turns = messages %}{% endif %}"
    "{% for message in turns %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant') }}{% endif %}"
    "{% if message['role'] == 'assistant' %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\\n' + (first if loop.first else '') + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}",
    // Llama 2 style: <<SYS>> inside the first user turn, strip(), BOS and EOS per exchange.
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
    "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('roles must alternate') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
    // Falcon 3 style.
    "{% for message in messages %}{% if message['role'] == 'system' %}{{ '<|system|>\\n' + message['content'] + '\\n' }}"
    "{% elif message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + '\\n' }}{% elif message['role'] == 'assistant' %}"
    "{% if not loop.last %}{{ '<|assistant|>\\n' + message['content'] + eos_token + '\\n' }}{% else %}"
    "{{ '<|assistant|>\\n' + message['content'] + eos_token }}{% endif %}{% endif %}"
    "{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}{% endfor %}",
    // The language: filters, tests, operators, methods, loop variables, for-else, literals.
    "{#- a comment -#}\n"
    "{%- set n = messages | length -%}\n"
    "{{ n }} messages; last role {{ (messages | last).role | upper }}; first {{ messages[0].content[:3] }}|\n"
    "{% for m in messages if m.role != 'system' -%}\n"
    "  [{{ loop.index }}/{{ loop.length }}{{ '*' if loop.first }}{{ '!' if loop.last else '' }}{{ loop.revindex0 }}] "
    "{{ m.role | capitalize }}: {{ m.content | replace('o', '0') | trim }}\n"
    "{% else %}\n"
    "  (no turns)\n"
    "{% endfor -%}\n"
    "{{ [1, 2, 3] | join('-') }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 * 3 + 1 }} {{ 'ab' ~ 3 }} {{ 1.5 + 1 }} {{ 10 / 4 }}\n"
    "{{ none is none }} {{ undefined_thing is defined }} {{ 'x' in 'xyz' }} {{ 3 not in [1, 2] }} {{ {'a': 1, 'b': 'c\"d'} | tojson }}\n"
    "{{ true and 'yes' or 'no' }} {{ 0 or '' or 'last' }} {{ not messages }} {{ 'Hello World'.lower() }} {{ ' pad '.strip() }}|\n"
    "{{ 'a,b,,c'.split(',') }} {{ ' x y  z '.split() }} {{ 'abc'[::-1] }} {{ [1, 2, 3, 4][1:3] }} {{ messages[-1]['content'] | default('none') }}\n"
    "{{ nothing | default('dflt') }} {{ 'it''s' }} {{ \"q'uote\" }} {{ 'abc'.startswith('ab') }} {{ 'abc'.endswith('x') }} {{ 'a b'.title() }}\n"
    "{{ range(3) | list }} {{ 3 is odd }} {{ 4 is even }} {{ 'x' is string }} {{ 1 is number }} {{ {'k': 2}.get('k') }} {{ {'k': 2}.get('z', 9) }}\n"
    "{%- for k, v in {'one': 1, 'two': 2}.items() %} {{ k }}={{ v }}{% endfor %}\n"
    "{{ messages | map(attribute='role') | list if false else 'skip' }} {{ 5 > 3 and 2 <= 2 }} {{ [1] + [2] }} {{ 'ab' * 2 }} {{ 1 == 1.0 }}\n"
    "{%- if add_generation_prompt %}\n"
    ">>>\n"
    "{%- endif %}",
    // Mistral v0.3 style: the turns picked out with selectattr / rejectattr / map.
    "{%- set turns = messages | rejectattr('role', 'equalto', 'system') | selectattr('tool_calls', 'undefined') | list %}"
    "{%- set sys = messages | selectattr('role', 'eq', 'system') | map(attribute='content') | list %}"
    "{{- bos_token }}{%- for m in turns %}{%- if m.role == 'user' %}"
    "{%- if loop.last and sys %}{{- '[INST] ' + sys | join('\\n') + '\\n\\n' + m.content + '[/INST]' }}"
    "{%- else %}{{- '[INST] ' + m.content + '[/INST]' }}{%- endif %}{%- else %}{{- ' ' + m.content + eos_token }}{%- endif %}"
    "{%- endfor %}{{ messages | map(attribute='content') | select | list | length }}{{ [0, 1, '', 'a'] | reject | list }}",
    // Macros (defaults, keyword arguments, varargs, recursion, a closure over a loop variable),
    // call blocks with caller(args), {% set %} blocks, loop controls and loop.cycle, as tool-use
    // templates (Hermes, Granite) write them.
    "{%- macro turn(role, text, close='<|end|>') -%}\n"
    "<|{{ role }}|>{{ text | trim }}{{ close }}{{ varargs | join(',') }}\n"
    "{%- endmacro -%}\n"
    "{%- macro countdown(n) %}{{ n }}{% if n > 0 %},{{ countdown(n - 1) }}{% endif %}{% endmacro -%}\n"
    "{%- macro wrap(tag) %}<{{ tag }}>{{ caller(tag | upper) }}</{{ tag }}>{% endmacro -%}\n"
    "{%- set ns = namespace(users=0) -%}\n"
    "{%- macro note_user() %}{% set ns.users = ns.users + 1 %}{% endmacro -%}\n"
    "{%- set header %}\n"
    "  [{{ messages | length }} turns, first {{ messages[0].role }}]\n"
    "{% endset -%}\n"
    "{{ header | trim }}{{ countdown(3) }}\n"
    "{%- for m in messages %}\n"
    "{%- if m.content == '' %}{% continue %}{% endif %}\n"
    "{%- if loop.index > 3 %}{% break %}{% endif %}\n"
    "{%- if m.role == 'user' %}{{ note_user() }}{% endif %}\n"
    "{%- macro tagged() %}{{ loop.index }}:{{ m.role }}{% endmacro %}\n"
    "{{ turn(m.role, m.content, close=loop.cycle('</a>', '</b>')) }} {{ tagged() }}\n"
    "{%- call(t) wrap('span') %}{{ t }}-{{ m.role[:1] }}{% endcall %}\n"
    "{%- endfor %}\n"
    "{{ turn('x', 'y', '!', 1, 2) }}{{ ns.users }}\n"
    "{%- if add_generation_prompt %}{{ turn('assistant', '', close='') }}{% endif %}",
    // What Jinja's lexer reads inside tags: '}}' and '%}' in string literals do not close a tag
    // (tool hints with JSON in them), Python's string escapes (a backslash-newline joins lines,
    // \x \u \U and octal escapes, unknown escapes keep their backslash), and tuples.
    R"J({%- set hint = 'Call as <tool>{"name": "f", "arguments": {"a": 1}}</tool>' -%}
{{- hint }}|{{ '}}' }}|{{ "%}" }}|{{ '{{' ~ "{%" }}{# a '}}' in a comment #}
{%- set long = "one \
two\tthree\x41\u00e9\U0001F600\101\d\q\\\"" -%}
{{ long }}|{{ ('a', 'b') | join('+') }}|{% for k, v in [('x', 1), ('y', 2)] %}{{ k }}{{ v }}{% endfor %}|{{ ('solo',) | length }}|{{ () | length }}
{%- for m in messages %} {{ m.role }}{% endfor %})J",
    // The filters of tool-use templates: tojson(indent=..., sort_keys=...), indent (Jinja 3's
    // first / blank rules, Python's line breaks) and unique.
    R"J({{ messages | tojson(indent=4) }}|{{ {'b': [1, {'c': none, 'a': true}], 'a': 'x"y'} | tojson(indent=2, sort_keys=true) }}
{{ [] | tojson(indent=2) }}{{ {} | tojson(indent='	') }}|{{ messages[0] | tojson(indent='--') }}
{{ "a

b
  c
" | indent }}|{{ "a

b" | indent(2, true) }}|{{ "a

b" | indent(width='> ', first=true, blank=true) }}
{{ "
x" | indent(3, first=true) }}|{{ "x
y zw" | indent(1) }}|{{ messages | map(attribute='content') | join('
') | indent(2) }}
{{ ['a', 'B', 'b', 'A', 'c'] | unique | list }}{{ ['a', 'B', 'b', 'A'] | unique(case_sensitive=true) | list }}
{{ messages | unique(attribute='role') | map(attribute='content') | list }}{{ [1, 1.0, '1', true] | unique | list }})J",
    // Brackets inside a tag ('}}' closing a dict literal), sort_keys on raw keys, a macro defined
    // in a loop calling itself, slices with huge steps, repeating an empty string.
    "{{ {'a': {'b': [1, {'c': 2}]}} | tojson }}|{{ {'a': 1, 'a b': 2, 'A': 3} | tojson(sort_keys=true) }}|"
    "{% for i in [3] %}{% macro inner(n) %}{{ n }}{% if n > 1 %}{{ inner(n - 1) }}{% endif %}{% endmacro %}{{ inner(i) }}{% endfor %}|"
    "{{ [1, 2, 3][1::922337203685477580 * 10 + 7] }}{{ 'abc'[::-922337203685477580 * 10 - 7] }}|{{ '' * 999999999999999999 }}{{ 'ab' * -3 }}|"
    "{% for m in messages %}{{ loop.cycle('x', 'y') }}{% endfor %}",
    // Scoping: what a loop's pass sets is gone in the next pass and after the loop; a namespace
    // keeps it.
    "{% set x = 0 %}{% set ns = namespace(n=0) %}{% for m in messages %}{% if loop.first %}{% set y = 'first' %}{% endif %}"
    "{% set x = x + 1 %}{% set ns.n = ns.n + 1 %}{{ x }}{{ y }}{{ ns.n }},{% endfor %}{{ x }}{{ y }}{{ ns.n }}",
    // A template that ends in a newline after an expression (Jinja drops that one newline).
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{{ '>' if add_generation_prompt }}\n",
    // Whitespace control in every combination.
    "  {% if true %}\n"
    "    indented text\n"
    "  {% endif %}\n"
    "{%- for m in messages %}\n"
    "{{- m.role -}}\n"
    "  :  {{ m.content }}\n"
    "{% endfor %}\n"
    "end {{- '  x  ' -}} !\n"
    "    {%+ if true %}kept{% endif %}\n"
    "\t{# a comment on its own line #}\n"
    "tail {% if add_generation_prompt -%}   \n\n  go{%- endif %}",
};

const std::vector<std::vector<JinjaMessage>> kConversations = {
    {{"system", "Be brief."},
     {"user", "  Hi there!  "},
     {"assistant", "Hello.\nHow can I help?"},
     {"user", "Tell me a story."}},
    {{"user", "Hello!"}},
    {{"user", "2 + 2?"},
     {"assistant", "<think>easy: 4</think>The answer is 4."},
     {"user", "日本語で 🙂 and café"}},
    {{"user", "one"}, {"user", "two"}},
    {{"system", ""}, {"user", ""}, {"assistant", "o"}},
};

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += (char)c;
    else if (c < 0x20) {
      char b[8];
      snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += (char)c;
    }
  }
  return o + "\"";
}

using Case = JinjaCase;

// Jinja2's renderings (empty optional: it raised), or a skip reason.
bool reference(const std::vector<Case>& cases, const std::string& bos, const std::string& eos,
               std::vector<std::pair<bool, std::string>>* out, std::string* why) {
  // Files named after the test and the process: ctest runs the tests of this file in parallel,
  // and other checkouts on the same machine may run this very test at the same time.
  const std::string tag =
      std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" + std::to_string(getpid());
  const std::string in = testing::TempDir() + "qkv_jinja_in_" + tag + ".json",
                    res = testing::TempDir() + "qkv_jinja_out_" + tag + ".bin";
  {
    std::ofstream f(in, std::ios::binary);
    f << "[";
    for (size_t i = 0; i < cases.size(); i++) {
      f << (i ? "," : "") << "{\"template\":" << json_str(cases[i].tmpl) << ",\"messages\":[";
      for (size_t k = 0; k < cases[i].msgs->size(); k++) {
        const JinjaMessage& m = (*cases[i].msgs)[k];
        f << (k ? "," : "") << "{\"role\":" << json_str(m.role) << ",\"content\":" << json_str(m.content);
        // The message's fields (a JSON object) spliced in beside role and content.
        if (m.fields_json.size() > 2) f << "," << m.fields_json.substr(1, m.fields_json.size() - 2);
        f << "}";
      }
      f << "],\"add_generation_prompt\":" << (cases[i].gen ? "true" : "false") << ",\"bos_token\":" << json_str(bos)
        << ",\"eos_token\":" << json_str(eos) << ",\"vars\":" << (cases[i].vars.empty() ? "{}" : cases[i].vars) << "}";
    }
    f << "]";
  }
  const std::string cmd =
      "python3 '" QKV_SOURCE_DIR "/tests/native/chat/jinja_reference.py' < '" + in + "' > '" + res + "'";
  if (std::system(cmd.c_str()) != 0) {
    *why = "python3 with jinja2 is not available (scripts/setup.sh installs python3-jinja2)";
    return false;
  }
  std::ifstream f(res, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t p = 0;
  for (size_t i = 0; i < cases.size(); i++) {
    const size_t nl = all.find('\n', p);
    if (nl == std::string::npos) {
      *why = "short reference output";
      return false;
    }
    const std::string head = all.substr(p, nl - p);
    p = nl + 1;
    if (head == "ERR") {
      out->push_back({false, ""});
      continue;
    }
    const size_t n = std::stoul(head.substr(3));
    out->push_back({true, all.substr(p, n)});
    p += n;
  }
  return true;
}

}  // namespace

// Renders every case with qkv and compares with Jinja2's text (or its refusal); returns how many
// Jinja2 refused.
int compare_with_jinja2(const std::vector<Case>& cases, size_t per_template) {
  std::vector<std::pair<bool, std::string>> want;
  std::string why;
  // Python's jinja2 is the reference; scripts/setup.sh installs it. Without it this test fails
  // rather than skips: a comparison that silently did not run would read as a pass.
  EXPECT_TRUE(reference(cases, "<s>", "</s>", &want, &why)) << why;
  if (want.size() != cases.size()) {
    ADD_FAILURE() << "reference gave " << want.size() << " of " << cases.size() << " renderings";
    return 0;
  }
  int raised = 0;
  for (size_t i = 0; i < cases.size(); i++) {
    const Case& c = cases[i];
    JinjaChatInput in;
    in.messages = *c.msgs;
    in.add_generation_prompt = c.gen;
    in.bos_token = "<s>";
    in.eos_token = "</s>";
    in.vars_json = c.vars;
    const std::string where =
        "template " + std::to_string(i / per_template) + ", case " + std::to_string(i % per_template);
    if (!want[i].first) {
      raised++;
      try {
        render_jinja_chat(c.tmpl, in);
        ADD_FAILURE() << where << ": Jinja2 raised, qkv rendered";
      } catch (const Error& e) {
        // raise_exception() is the caller's error (BadArgument); a template error is the model's (BadModel).
        EXPECT_TRUE(e.code() == ErrorCode::BadArgument || e.code() == ErrorCode::BadModel) << where << ": " << e.what();
      }
      continue;
    }
    try {
      EXPECT_EQ(render_jinja_chat(c.tmpl, in), want[i].second) << where;
    } catch (const Error& e) {
      ADD_FAILURE() << where << ": " << e.what();
    }
  }
  return raised;
}

// Tools, template variables and message fields (what chat() passes as options.tools,
// options.templateVars and a message's other fields), as JSON, against Jinja2 given the same.
TEST(Jinja, ToolsVariablesAndMessageFieldsRenderAsJinja2Does) {
  const std::vector<std::vector<JinjaMessage>> conversations = {
      {{"system", "You help."},
       {"user", "Weather in Paris?"},
       {"assistant", "",
        R"({"tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "\u00b0C"}}}]})"},
       {"tool", "{\"temp\": 21}", R"({"name": "get_weather", "tool_call_id": "c1"})"},
       {"tool", "sunny"},
       {"user", "Thanks! \xf0\x9f\x99\x82"}},
      {{"user", "Hi"}},
      {{"user", "Call two"},
       {"assistant", "Sure.",
        R"({"tool_calls": [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": [1, 2.5, -3e-2, null, true]}}]})"}},
  };
  const char* const vars[] = {
      "",
      R"({"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather \"now\"",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["\u00b0C", "\u00b0F"]}}, "required": ["city"]}}}]})",
      R"({"enable_thinking": false})",
      R"({"tools": [{"name": "a"}, {"name": "b"}], "enable_thinking": true, "extra": [1, 2.5, null, "x\u00e9\ud83d\ude00\n"], "empty": {}})",
  };
  // kChatmlTools, and one that prints what it was given (Python's repr and json.dumps of parsed
  // JSON: nested dicts, floats, null, true, escapes).
  const char* const templates[] = {
      kChatmlTools,
      "{{ messages | tojson }}|{{ tools | tojson if tools is defined }}|{{ enable_thinking }}|{{ extra if extra is defined }}"
      "{{ empty }}|{% for m in messages %}{{ m.tool_calls | default('-') }}{{ m.name }}{{ m.tool_call_id }};{% endfor %}"};
  std::vector<Case> cases;
  for (const char* t : templates)
    for (const auto& c : conversations)
      for (const char* v : vars) cases.push_back({t, &c, true, v});
  compare_with_jinja2(cases, 3 * 4);
}

TEST(Jinja, BadTemplateVariablesAndFieldsAreRefused) {
  auto code_of = [](const std::string& vars, const std::string& fields) {
    JinjaChatInput in;
    in.messages = {{"user", "Hi", fields}};
    in.vars_json = vars;
    try {
      render_jinja_chat("{{ messages }}{{ x }}", in);
      return std::string("rendered");
    } catch (const Error& e) {
      return std::string(error_code_name(e.code()));
    }
  };
  EXPECT_EQ(code_of(R"({"x": [1, {"y": "\ud83d\ude00 \ud800 \udc00"}], "z": -1.5e3})", R"({"name": "n"})"), "rendered");
  for (const char* bad : {"{", "[1]", "{\"x\": }", "{\"x\": 1,}", "{\"x\": 1} 2", "{\"x\": \"\\q\"}", "{\"x\": tru}",
                          "{\"x\": \"a\nb\"}", "{\"x\": 01e}", "{\"x\": -}", "{\"x\": \"\\u12\"}", "{\"messages\": []}",
                          "{\"raise_exception\": 1}", "{\"add_generation_prompt\": false}"})
    EXPECT_EQ(code_of(bad, ""), "bad_argument") << bad;
  EXPECT_EQ(code_of("", "[]"), "bad_argument");
  EXPECT_EQ(code_of("", R"({"role": "assistant"})"), "bad_argument");
  EXPECT_EQ(code_of("", R"({"content": "x"})"), "bad_argument");
  std::string deep = "{\"x\": ";
  for (int i = 0; i < 100; i++) deep += "[";
  for (int i = 0; i < 100; i++) deep += "]";
  EXPECT_EQ(code_of(deep + "}", ""), "bad_argument");  // nested past the value limit
  std::string huge = "{\"x\": [";
  for (int i = 0; i < 200000; i++) huge += i ? ",1" : "1";
  EXPECT_EQ(code_of(huge + "]}", ""), "rendered");
}

TEST(Jinja, RendersAsJinja2Does) {
  std::vector<Case> cases;
  for (const char* t : kTemplates)
    for (const auto& c : kConversations)
      for (bool gen : {true, false}) cases.push_back({t, &c, gen, ""});
  EXPECT_GT(compare_with_jinja2(cases, 2 * kConversations.size()),
            0);  // the alternation checks fired where Jinja2's did
}

TEST(Jinja, ChatLayerUsesTheTemplateAndDropsADoubledBos) {
  const std::string t =
      "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{{ eos_token }}{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|>{% endif %}";
  ChatTemplate ct = detect_chat_template(t, "<s>", "</s>", true, false);
  EXPECT_TRUE(ct.jinja_ok);
  EXPECT_FALSE(ct.guessed);
  // Tokenization adds BOS, so the template's leading copy goes (as llama.cpp does).
  EXPECT_EQ(render_chat(ct, {{"user", "Hi"}}, true), "<|user|>Hi</s><|assistant|>");
  ct = detect_chat_template(t, "<s>", "</s>", false, true);
  EXPECT_EQ(render_chat(ct, {{"user", "Hi"}}, false), "<s><|user|>Hi");
  // A template that raises: the recognized format's own rendering takes over (Gemma templates
  // refuse system turns); an unknown format's refusal reaches the caller.
  const std::string gemma =
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
      "<start_of_turn>{{ 'model' if m.role == 'assistant' else 'user' }}\n{{ m.content }}<end_of_turn>\n{% endfor %}"
      "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}";
  ct = detect_chat_template(gemma);
  EXPECT_TRUE(ct.jinja_ok);
  EXPECT_EQ(render_chat(ct, {{"system", "Be brief."}, {"user", "Hi"}}, true),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  ct = detect_chat_template(
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system, please') }}{% endif %}"
      "[{{ m.role }}] {{ m.content }}\n{% endfor %}");
  EXPECT_TRUE(ct.jinja_ok);
  EXPECT_EQ(render_chat(ct, {{"user", "Hi"}}, true), "[user] Hi\n");
  try {
    render_chat(ct, {{"system", "x"}, {"user", "Hi"}}, true);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::BadArgument);
    EXPECT_NE(std::string(e.what()).find("no system, please"), std::string::npos);
  }
  // A template that drops the messages is not used; nor is one the subset cannot run.
  EXPECT_FALSE(detect_chat_template("<|im_start|>{{ 'fixed text' }}").jinja_ok);
  EXPECT_FALSE(detect_chat_template("<|im_start|>{% macro f() %}{% endmacro %}").jinja_ok);
  EXPECT_EQ(detect_chat_template("<|im_start|>{% macro f() %}{% endmacro %}").format, ChatFormat::ChatML);
  // Falling back says why: the construct the subset lacks, a template error, or lost messages.
  EXPECT_NE(detect_chat_template("<|im_start|>{% macro f() %}{% endmacro %}").fallback_reason.find("leaves out"),
            std::string::npos);
  ct = detect_chat_template("<|im_start|>{% for m in messages %}{{ m.content | random }}{% endfor %}");
  EXPECT_FALSE(ct.jinja_ok);
  EXPECT_FALSE(ct.guessed);  // ChatML, recognized: rendered by hand
  EXPECT_NE(ct.fallback_reason.find("the filter 'random'"), std::string::npos) << ct.fallback_reason;
  EXPECT_NE(ct.fallback_reason.find("unsupported"), std::string::npos) << ct.fallback_reason;
  ct = detect_chat_template("{% for m in messages %}{% include 'turn.jinja' %}{% endfor %}");
  EXPECT_TRUE(ct.guessed);
  EXPECT_NE(ct.fallback_reason.find("the 'include' statement"), std::string::npos) << ct.fallback_reason;
  ct = detect_chat_template("<|im_start|>{{ messages[0].content - 1 }}");
  EXPECT_NE(ct.fallback_reason.find("cannot apply '-'"), std::string::npos) << ct.fallback_reason;
  EXPECT_NE(ct.fallback_reason.find("bad_model"), std::string::npos) << ct.fallback_reason;
  EXPECT_EQ(detect_chat_template(t).fallback_reason, "");
  EXPECT_EQ(detect_chat_template("").fallback_reason, "");
}

TEST(Jinja, HostileTemplatesFailCleanly) {
  JinjaChatInput in;
  in.messages = {{"user", "Hi"}};
  auto code_of = [&](const std::string& t) {
    try {
      render_jinja_chat(t, in);
      return std::string("rendered");
    } catch (const Error& e) {
      return std::string(error_code_name(e.code()));
    }
  };
  EXPECT_EQ(code_of("{{ 1 "), "bad_model");           // unclosed tag
  EXPECT_EQ(code_of("{% if true %}x"), "bad_model");  // unclosed block
  EXPECT_EQ(code_of("{% endfor %}"), "bad_model");    // stray end
  EXPECT_EQ(code_of("{{ 'abc }}"), "bad_model");      // unterminated string
  EXPECT_EQ(
      code_of(
          "{{ (((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
          "((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((1 }}"),
      "bad_model");  // nesting
  EXPECT_EQ(code_of("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"),
            "bad_model");  // work
  EXPECT_EQ(
      code_of(
          "{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}"),
      "bad_model");
  EXPECT_EQ(code_of("{{ range(10000000000) }}"), "bad_model");
  EXPECT_EQ(code_of("{{ 1 // 0 }}"), "bad_model");
  // 64-bit integers: overflow is an error (Python's integers would grow), never a wrapped value,
  // a trap (INT64_MIN // -1) or a wrapped size check.
  EXPECT_EQ(code_of("{{ 999999999999999999 * 999999999999999999 }}"), "bad_model");
  EXPECT_EQ(code_of("{{ -999999999999999999 * 9 - 999999999999999999 }}"), "bad_model");
  EXPECT_EQ(code_of("{{ (-999999999999999999 * 9 - 223372036854775817) // -1 }}"), "bad_model");
  EXPECT_EQ(code_of("{{ -(-999999999999999999 * 9 - 223372036854775817) }}"), "bad_model");
  EXPECT_EQ(code_of("{{ 'abcd' * (999999999999999999 * 9 + 8) }}"), "bad_model");
  EXPECT_EQ(code_of("{{ range(0, 999999999999999999 * 9, 999999999999999999 * 5) | length }}"), "rendered");
  EXPECT_EQ(code_of("{{ 'a' - 1 }}"), "bad_model");
  EXPECT_EQ(code_of("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}"), "bad_model");  // endless recursion
  EXPECT_EQ(code_of("{% macro m(n) %}{{ m(n) }}{{ m(n) }}{% endmacro %}{{ m(0) }}"), "bad_model");
  EXPECT_EQ(code_of("{% macro m() %}{{ caller() }}{% endmacro %}{{ m() }}"), "bad_model");  // no caller
  EXPECT_EQ(code_of("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"), "bad_model");           // too many arguments
  EXPECT_EQ(code_of("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}"), "bad_model");
  EXPECT_EQ(code_of("{% macro m() %}x"), "bad_model");  // unclosed
  EXPECT_EQ(code_of("{% break %}"), "bad_model");
  // Values nested without end (freeing or printing them would recurse that deep), and cycles.
  EXPECT_EQ(
      code_of(
          "{% set ns = namespace(x=[]) %}{% for i in range(300000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x | length }}"),
      "bad_model");
  EXPECT_EQ(
      code_of(
          "{% set ns = namespace(x={}) %}{% for i in range(300000) %}{% set ns.x = {'k': ns.x} %}{% endfor %}{{ ns.x }}"),
      "bad_model");
  EXPECT_EQ(
      code_of(
          "{% set st = namespace(prev=namespace(x=none)) %}{% for i in range(100000) %}{% set n = namespace(x=none) %}"
          "{% set p = st.prev %}{% set p.x = n %}{% set st.prev = n %}{% endfor %}{{ st }}"),
      "bad_model");
  EXPECT_EQ(code_of("{% set ns = namespace(a=1) %}{% set ns.self = [ns] %}{{ ns }}"), "bad_model");
  // A macro defined inside a block carries the names there: it cannot go into a namespace either
  // (a chain of 200000 of them overflowed the stack when freed; a namespace in its closure was a
  // cycle that leaked).
  EXPECT_EQ(
      code_of(
          "{% set g = namespace(f=none) %}{% for i in range(200000) %}{% set prev = g.f %}{% macro m() %}{% endmacro %}"
          "{% set g.f = m %}{% endfor %}"),
      "bad_model");
  EXPECT_EQ(
      code_of(
          "{% for i in range(3) %}{% set n = namespace() %}{% macro m() %}{% endmacro %}{% set n.f = [m] %}{% endfor %}"),
      "bad_model");
  // Copying a big string into a closure or a list is charged as work.
  EXPECT_EQ(code_of("{% set ns = namespace(s='x' * 16000000) %}{% for i in range(100000) %}{% set big = ns.s %}"
                    "{% macro m() %}{% endmacro %}{% endfor %}"),
            "bad_model");
  EXPECT_EQ(
      code_of(
          "{% set ns = namespace(l=['x' * 8000000]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}"),
      "bad_model");
  // ... but reading a stored list shares it: a 10 MB list of lines read once per pass renders.
  EXPECT_EQ(code_of("{% set parts = (('x' * 500) ~ '\n') * 20000 %}{% set parts = parts.split('\n') %}"
                    "{% for p in parts %}{% if parts[loop.index0] != p %}!{% endif %}{% endfor %}"),
            "rendered");
  // Only a loop's own variable has cycle(); a dict that looks like one does not.
  EXPECT_EQ(code_of("{{ {'index0': -1, 'revindex0': 0}.cycle('a', 'b') }}"), "unsupported");
  // Expression trees without nesting (1+1+1+...): bounded per tag, so walking and freeing them
  // cannot exhaust the stack.
  std::string chain = "{{ 1";
  for (int i = 0; i < 300000; i++) chain += "+1";
  EXPECT_EQ(code_of(chain + " }}"), "bad_model");
  EXPECT_EQ(code_of("{% macro m() %}" + chain + " }}{% endmacro %}"), "bad_model");
  std::string attrs = "{{ messages";
  for (int i = 0; i < 300000; i++) attrs += ".a";
  EXPECT_EQ(code_of(attrs + " }}"), "bad_model");
  EXPECT_EQ(
      code_of("{% set d = {'a': 1} %}{% set d.b = 2 %}"),
      "bad_model");  // only namespaces take attributes                                              // outside a loop
  EXPECT_EQ(code_of("{% for i in [1] %}{% macro m() %}{% break %}{% endmacro %}{% endfor %}"), "bad_model");
  EXPECT_EQ(code_of("{% macro m(s) %}{{ m(s ~ s) }}{% endmacro %}{{ m('xxxxxxxxxxxxxxxx') }}"), "bad_model");  // growth
  EXPECT_EQ(code_of("{{ 'a' | urlize(extra_schemes=['ftp:']) }}"), "unsupported");
  EXPECT_EQ(code_of("{{ [1, 2] | random }}"), "unsupported");  // its pick differs from run to run
  // pprint and urlize of big values: linear work, bounded by the output and work budgets.
  EXPECT_EQ(code_of("{{ ('ab ' * 1000000) | pprint }}{{ range(100000) | list | pprint }}"), "rendered");
  EXPECT_EQ(code_of("{{ range(30000) | batch(1) | batch(1) | batch(1) | batch(2) | list | pprint }}"), "rendered");
  EXPECT_EQ(
      code_of(
          "{{ ('(http://a' ~ '.b' * 2000000 ~ '.com/' ~ '&gt;' * 100000 ~ ' x@' ~ 'y.' * 1000000 ~ 'z ') | urlize }}"),
      "rendered");
  EXPECT_EQ(code_of("{{ ('http://a.com/x ' * 3000000) | urlize }}"), "bad_model");
  EXPECT_EQ(code_of("{{ raise_exception('stop here') }}"),
            "bad_argument");  // the template's verdict on the conversation
  std::string deep;
  for (int i = 0; i < 500; i++) deep += "{% if true %}";
  EXPECT_EQ(code_of(deep), "bad_model");
}

namespace {

// Renders a template in a child process that is killed after `secs` seconds, so that a template
// that would run away (before the bounds below) fails the test instead of stalling it. Returns
// "rendered:<text>", "<error code>:<message>", or what killed the child.
std::string outcome_in_child(const std::string& t, unsigned secs = 120) {
  int fd[2];
  if (pipe(fd) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    alarm(secs);
    std::string r;
    try {
      JinjaChatInput in;
      in.messages = {{"user", "Hi"}};
      r = "rendered:" + render_jinja_chat(t, in);
    } catch (const Error& e) {
      r = std::string(error_code_name(e.code())) + ":" + e.what();
    } catch (const std::exception& e) {
      r = std::string("exception:") + e.what();
    }
    for (size_t off = 0; off < r.size();) {
      const ssize_t n = write(fd[1], r.data() + off, r.size() - off);
      if (n <= 0) break;
      off += (size_t)n;
    }
    _exit(0);
  }
  close(fd[1]);
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd[0], buf, sizeof buf)) > 0) out.append(buf, (size_t)n);
  close(fd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFSIGNALED(st))
    return "killed by signal " + std::to_string(WTERMSIG(st)) +
           (WTERMSIG(st) == SIGALRM ? " (ran past the time limit)" : "");
  return out;
}

std::string code_part(const std::string& outcome) { return outcome.substr(0, outcome.find(':')); }

// a0 = [1..8], a(k) = [a(k-1)] * 8 written out: a12 stands for 8^13 items, in a few hundred bytes
// (and b0..b12, its twin built apart).
std::string shared_lists(const char* n) {
  std::string t = std::string("{% set ") + n + "0 = [1, 2, 3, 4, 5, 6, 7, 8] %}";
  for (int k = 1; k <= 12; k++) {
    t += std::string("{% set ") + n + std::to_string(k) + " = [";
    for (int j = 0; j < 8; j++) t += std::string(j ? ", " : "") + n + std::to_string(k - 1);
    t += "] %}";
  }
  return t;
}

}  // namespace

// Issue 33, item 11: values that share structure are charged by the size they expand to, so
// printing, converting, comparing, searching and error messages each stop at a bound.
TEST(Jinja, ValuesThatExpandAreBoundedByTheirSize) {
  const std::string p = shared_lists("a") + shared_lists("b");
  for (const char* t : {"{{ a12 }}",
                        "{{ a12 ~ '' }}",
                        "{{ (a12 | string) | length }}",
                        "{{ a12 == b12 }}",
                        "{{ a12 in [b12] }}",
                        "{{ a12 != b12 }}",
                        "{{ [a12] == [b12] }}",
                        "{{ raise_exception(a12) }}",
                        "{{ a12 | tojson }}",
                        "{{ a12 | join }}",
                        "{{ a12 | trim }}",
                        "{{ a12 | upper }}",
                        "{{ a12 | replace('1', '2') }}",
                        "{{ a12 | indent }}",
                        "{{ {'k': a12} | tojson(indent=2) }}",
                        "{% set x %}{{ a12 }}{% endset %}",
                        "{{ b12 in [1, 2, a12] }}",
                        "{{ a12 | list == b12 }}",
                        "{{ a12 | map('string') | list }}",
                        "{{ a12 | sort }}"}) {
    const std::string o = outcome_in_child(p + t);
    EXPECT_EQ(code_part(o), "bad_model") << t << ": " << o.substr(0, 300);
  }
  // An error message quotes a value cut short, whatever it expands to.
  for (const char* t : {"{{ a12 - 1 }}", "{{ a12 | int + a12 }}", "{% for x, y in [a12] %}{% endfor %}",
                        "{{ a12 is odd }}", "{{ a12[1:'x'] }}"}) {
    const std::string o = outcome_in_child(p + t);
    EXPECT_EQ(code_part(o), "bad_model") << t << ": " << o.substr(0, 300);
    EXPECT_LT(o.size(), 400u) << t;
  }
  // What Python decides without a walk renders: a list is equal to itself (compared by identity first).
  EXPECT_EQ(outcome_in_child(
                p + "{{ a12 in [a12] }} {{ a12 == a12 }} {{ a12 | length }} {{ (a12 | first | first) | length }}"),
            "rendered:True True 8 8");
  // Expression trees are bounded in height when parsed: a chain of 4000 attributes or filters
  // (which overflowed the stack, natively and in the multi-threaded WebAssembly build) is refused
  // before anything runs.
  std::string attrs = "{{ messages", filters = "{{ 'x'", tests = "{{ 1", concat = "{{ 'x'", nots = "{{ ";
  for (int i = 0; i < 4000; i++) {
    attrs += ".a";
    filters += " | trim";
    tests += " is number";
    concat += " ~ 'x'";
  }
  for (int i = 0; i < 200; i++) nots += "- ";
  for (const std::string& t : {attrs + " }}", filters + " }}", tests + " }}", concat + " }}", nots + "1 }}"}) {
    const std::string o = outcome_in_child(t);
    EXPECT_EQ(code_part(o), "bad_model") << o.substr(0, 300);
  }
  // A chain as long as real templates write renders.
  std::string ok = "{{ 'x'";
  for (int i = 0; i < 100; i++) ok += " | trim";
  EXPECT_EQ(outcome_in_child(ok + " }}"), "rendered:x");
}

// Issue 33, item 12: filters read what they need, 'in' over a list is charged, and substring
// search is linear whatever the text and needle.
TEST(Jinja, FiltersMembershipAndSearchAreCharged) {
  // big|first reads one item (it printed the whole list first: ~45 ms a call).
  const std::string big = "{% set big = range(999999) %}";
  EXPECT_EQ(
      outcome_in_child(big +
                       "{% for i in range(20000) %}{{ big | first }}{{ big | last | string | length }}{% endfor %}"),
      "rendered:" + [] {
        std::string r;
        for (int i = 0; i < 20000; i++) r += "06";
        return r;
      }());
  EXPECT_EQ(outcome_in_child(big + "{{ big | length }} {{ big[-1] }} {{ (big[:3] | list) is sequence }}"),
            "rendered:999999 999998 True");
  // 'x in list' scans are charged per item: a loop of them ends at the budget.
  EXPECT_EQ(code_part(outcome_in_child(big + "{% for i in range(100000) %}{% if -1 in big %}!{% endif %}{% endfor %}")),
            "bad_model");
  EXPECT_EQ(code_part(outcome_in_child(
                big + "{% for i in range(100000) %}{{ big | select('none') | list | length }}{% endfor %}")),
            "bad_model");
  // A 100k needle that almost matches everywhere in a 16 MB text: linear (Knuth-Morris-Pratt).
  const std::string s = "{% set hay = 'a' * 16000000 %}{% set needle = 'a' * 100000 ~ 'b' %}";
  EXPECT_EQ(outcome_in_child(s + "{{ needle in hay }} {{ hay.find(needle) }} {{ hay.split(needle) | length }} "
                                 "{{ hay.replace(needle, 'x') | length }} {{ hay | replace(needle, 'x') | length }}"),
            "rendered:False -1 1 16000000 16000000");
  // ... and the same searches still find what is there.
  EXPECT_EQ(
      outcome_in_child(
          "{% set t = 'abcabcabd' %}{{ 'abd' in t }} {{ t.find('cab') }} {{ t.split('ab') }} {{ t.replace('abc', '-') }} "
          "{{ 'aXbXc'.split('X', 1) }} {{ 'abc'.replace('', '-') }} {{ t | replace('b', 'B', 2) }}"),
      "rendered:True 2 ['', 'c', 'c', 'd'] --abd ['a', 'bXc'] -a-b-c- aBcaBcabd");
  // strip with a long set of characters reads each character once.
  EXPECT_EQ(outcome_in_child("{% set c = 'ab' * 4000000 %}{{ (c ~ 'x' ~ c).strip(c) }}"), "rendered:x");
}

// The constructs that llama.cpp's collection of real chat templates uses beyond the basics
// (issue 32): each written into templates of our own and compared with Jinja2 over plain,
// multi-turn, tool-use and Unicode conversations.
TEST(Jinja, ConstructsOfRealTemplatesRenderAsJinja2Does) {
  const char* const templates[] = {
      // dictsort (integer keys, by value, reversed, case-blind), integer dict keys looked up,
      // tested with 'in', printed and dumped; tuples print as Python prints them.
      "{%- set budgets = {0: 0, 512: 128, 1024: 256, 16384: 1024} -%}\n"
      "{%- set ns = namespace(interval=None) -%}\n"
      "{%- for k, v in budgets | dictsort -%}{%- if ns.interval is none and 700 <= k -%}{%- set ns.interval = v -%}{%- endif -%}{%- endfor -%}\n"
      "{{ ns.interval }} {{ budgets[16384] }} {{ budgets[3] is undefined }} {{ 512 in budgets }} {{ '512' in budgets }}\n"
      "{{ budgets }} {{ budgets | tojson }} {{ {'b': 2, 'A': 1, 'c': 0} | dictsort }} {{ {'b': 2, 'A': 1} | dictsort(true) }}\n"
      "{{ {'b': 2, 'a': 3, 'c': 1} | dictsort(by='value', reverse=true) }} {{ {'x': 1}.items() | list }} {{ (1,) }} {{ () }} {{ (1, 'a') == [1, 'a'] }}\n"
      "{%- for m in messages %}\n{{ loop.index }}: {{ {'role': m.role, 'n': loop.index} | dictsort | map('last') | list }}{% endfor %}",
      // tojson's options as Hugging Face passes them to json.dumps, over the tool definitions and
      // tool calls; map with a filter, attribute paths with defaults, selections over none.
      "{%- if tools is defined %}{% for t in tools %}\n{{ t | tojson(ensure_ascii=False) }}\n{{ t | tojson(ensure_ascii=True) }}\n"
      "{{ t.function.parameters | tojson(indent=2) }}\n{{ t | tojson(separators=(',', ':'), sort_keys=true) }}\n"
      "{{ t.function.parameters.properties | dictsort | map('first') | join(', ') }}{% endfor %}{% endif %}\n"
      "{%- for m in messages %}\n{{ m.role | upper }}: {{ m.content | tojson(ensure_ascii=true) }} {{ m.tool_calls | map(attribute='function.name') | list }}"
      "{% for tc in m.tool_calls %} {{ tc.function.arguments | tojson(sort_keys=true) }} {{ tc.function.arguments | items | list }}{% endfor %}{% endfor %}\n"
      "{{ none | selectattr('role') | list }} {{ nothing | select | list }} {{ none | rejectattr('x') | list }} {{ '' | select | list }}\n"
      "{{ messages | map(attribute='name', default='anon') | list }} {{ messages | map(attribute='role') | map('capitalize') | unique | list }}\n"
      "{{ messages | selectattr('tool_calls', 'defined') | list | length }} {{ messages | map(attribute='content') | map('length') | sum }}",
      // {% filter %} blocks (with arguments, chained), characters counted, sliced and indexed as
      // Python counts them (Unicode text), and the filters real templates use.
      "{%- for m in messages %}{% filter upper %}{{ m.role }}{% endfilter %}: {% filter replace('a', '4') | trim %}  {{ m.content }}  {% endfilter %}\n"
      "{{ m.content | length }} {{ m.content[:4] }}|{{ m.content[-1:] }}|{{ m.content[1] if m.content }}|{{ m.content | first }}|{{ m.content | last }}|"
      "{{ m.content | reverse }}|{{ m.content | wordcount }}|{{ m.content | list | length }}|{{ m.content.split() | join(',') }}\n{% endfor %}"
      "{% filter indent(2, true) %}a\nb{% endfilter %}\n"
      "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }} {{ [3, 1, 2] | sort(reverse=true) | join }} "
      "{{ [1, 5, 3] | max }} {{ [4, 2] | min }} {{ ['b', 'C'] | max }} {{ [1, 2, 3] | sum }} {{ [{'n': 2}, {'n': 1}] | sort(attribute='n') | map(attribute='n') | list }}\n"
      "{{ -3 | abs }} {{ 1e20 }} {{ 2.5e-7 }} {{ 10 / 3 }} {{ 1.5 | int }} {{ '42' | int }} {{ 'x' | int(7) }} {{ ' 3.5 ' | float }} {{ 'Hi' | center(10) }}|"
      "{{ [1, 2, 3, 4, 5] | batch(2) | list }} {{ '<a href=\"x\">' | e }} {{ 'abc'.replace('', '-') }} {{ 'a\\tb\\x01' | list }} {{ ['x\\ty'] }}\n"
      "{%- macro fmt(v, keys=True) -%}{%- if v is mapping -%}{ {%- for k, x in v | dictsort -%}{{ k if keys else k | upper }}:{{ fmt(x, keys=keys) }}"
      "{{ ',' if not loop.last }}{%- endfor -%} }{%- elif v is string -%}<{{ v }}>{%- elif v is sequence -%}[{{ v | map('string') | join('|') }}]"
      "{%- else -%}{{ v }}{%- endif -%}{%- endmacro -%}\n"
      "{{ fmt({'b': [1, 2], 'a': {'y': 'z', 'x': 1.0}}) }} {{ fmt({'k': none}, keys=false) }}",
      // map, select and friends give generators in Jinja2: always true, no index or length, equal
      // only to themselves, iterable but not a sequence.
      "{% if messages | selectattr('role', 'eq', 'nobody') %}T{% endif %}{{ (messages | map(attribute='role'))[0] is undefined }} "
      "{{ ([1] | select) == [1] }} {{ 'user' in messages | map(attribute='role') }} {{ messages | map(attribute='role') | first }} "
      "{{ [1, 2] | reverse | join }} {{ [1] | select is sequence }} {{ [1] | select is iterable }} {{ {'a': 1} | items | list }} "
      "{{ messages | selectattr('role', 'eq', 'nobody') | list | length }} {{ [3, 1, 3] | unique | list }}",
  };
  // ... and dumping one raises in Jinja2 (json.dumps of a generator), as llama.cpp's DeepSeek R1
  // template does with tools: qkv refuses it too.
  const char* const raising = "{{ tools | map(attribute='function') | tojson }}{{ messages | select | length }}";
  const std::vector<JinjaMessage> tool_turns = {
      {"system", "You help."},
      {"user", "Weather in Paris? Caf\xc3\xa9 \xe2\x98\x95"},
      {"assistant", "",
       R"({"tool_calls": [{"id": "call_abc123456", "type": "function", "function": {"name": "get_weather", "arguments": {"unit": "\u00b0C", "city": "Paris"}}}]})"},
      {"tool", "{\"temp\": 21}", R"({"name": "get_weather", "tool_call_id": "call_abc123456"})"},
      {"assistant",
       "It is 21 \xc2\xb0"
       "C \xf0\x9f\x99\x82"},
  };
  const std::string tools =
      R"({"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather \u2014 \"now\"",)"
      R"( "parameters": {"type": "object", "properties": {"unit": {"type": "string", "enum": ["\u00b0C", "\u00b0F"]}, "city": {"type": "string"}}, "required": ["city"]}}}]})";
  std::vector<std::vector<JinjaMessage>> conversations = kConversations;
  conversations.push_back(tool_turns);
  std::vector<Case> cases;
  for (const char* t : templates)
    for (const auto& c : conversations)
      for (bool gen : {true, false}) cases.push_back({t, &c, gen, &c == &conversations.back() ? tools : ""});
  EXPECT_EQ(compare_with_jinja2(cases, 2 * conversations.size()), 0);
  cases.clear();
  for (const auto& c : conversations)
    for (bool gen : {true, false}) cases.push_back({raising, &c, gen, &c == &conversations.back() ? tools : ""});
  EXPECT_EQ(compare_with_jinja2(cases, 2 * conversations.size()), (int)cases.size());
}
