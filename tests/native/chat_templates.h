// Chat templates in the styles of popular models' own, which only come out right when run as
// Jinja: the llama.cpp conformance models (make_test_models.cpp) carry them, and test_jinja.cpp
// renders them against Jinja2. TinyLlama's Zephyr layout (one tag per line: trim_blocks and
// the newlines after expressions matter), Qwen 2.5's default system turn, Llama 3.1's dated
// system header (strftime_now), DeepSeek-R1's namespace and reasoning split, Mistral's v7
// markers, and ChatML written with macros, a set block and loop controls.
#pragma once

inline const char* const kZephyr =
    "{% for message in messages %}\n"
    "{% if message['role'] == 'user' %}\n"
    "{{ '<|user|>\\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'system' %}\n"
    "{{ '<|system|>\\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'assistant' %}\n"
    "{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n"
    "{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n"
    "{{ '<|assistant|>' }}\n"
    "{% endif %}\n"
    "{% endfor %}";
inline const char* const kChatmlDefaultSystem =
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "{%- else %}\n"
    "    {{- '<|im_start|>system\\nYou are a careful assistant.<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) or message.role == 'assistant' %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n";
inline const char* const kLlama3Dated =
    "{{- bos_token }}\n"
    "{%- if date_string is not defined %}\n"
    "    {%- if strftime_now is defined %}{%- set date_string = strftime_now('%d %b %Y') %}\n"
    "    {%- else %}{%- set date_string = '1 Jan 2024' %}{%- endif %}\n"
    "{%- endif %}\n"
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- set sys = messages[0]['content'] | trim %}\n"
    "    {%- set messages = messages[1:] %}\n"
    "{%- else %}{%- set sys = '' %}{%- endif %}\n"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\nToday Date: ' + date_string + '\\n\\n' + sys + '<|eot_id|>' }}\n"
    "{%- for message in messages %}\n"
    "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}\n";
inline const char* const kDeepSeekR1 =
    "{% set ns = namespace(system_prompt='') %}{%- for message in messages %}{%- if message['role'] == 'system' %}"
    "{% set ns.system_prompt = ns.system_prompt + message['content'] %}{%- endif %}{%- endfor %}{{ bos_token }}{{ ns.system_prompt }}"
    "{%- for message in messages %}{%- if message['role'] == 'user' %}{{ '<\xef\xbd\x9c" "User\xef\xbd\x9c>' + message['content'] }}{%- endif %}"
    "{%- if message['role'] == 'assistant' %}{% set content = message['content'] %}"
    "{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{ '<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>' + content + eos_token }}{%- endif %}{%- endfor %}"
    "{% if add_generation_prompt %}{{ '<\xef\xbd\x9c" "Assistant\xef\xbd\x9c><think>\\n' }}{% endif %}";
inline const char* const kMistralV7 =
    "{{ bos_token }}{% for m in messages %}{% if m.role == 'system' %}{{ '[SYSTEM_PROMPT]' + m.content + '[/SYSTEM_PROMPT]' }}"
    "{% elif m.role == 'user' %}{{ '[INST]' + m.content + '[/INST]' }}{% else %}{{ m.content + eos_token }}{% endif %}{% endfor %}";

// ChatML written with a macro per turn, a {% set %} block for the default system text and a
// {% continue %} over empty turns, as macro-based templates (Granite, Hermes tool use) are.
inline const char* const kChatmlMacros =
    "{%- macro render_turn(role, content) -%}\n"
    "{{- '<|im_start|>' + role + '\\n' + content | trim + '<|im_end|>\\n' -}}\n"
    "{%- endmacro -%}\n"
    "{%- set system %}You are a careful assistant. Answer in {{ 'one' }} sentence.{% endset -%}\n"
    "{%- if messages[0].role == 'system' %}{% set system = messages[0].content %}{% set rest = messages[1:] %}"
    "{% else %}{% set rest = messages %}{% endif -%}\n"
    "{{- render_turn('system', system) -}}\n"
    "{%- for m in rest -%}\n"
    "{%- if m.content | trim == '' %}{% continue %}{% endif -%}\n"
    "{{- render_turn(m.role, m.content) -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' -}}{% endif -%}\n";

// ChatML with tools in Qwen 2.5's manner (tool signatures in the system turn, the assistant's
// tool_calls as <tool_call> blocks, consecutive 'tool' messages in one user turn) and Qwen 3's
// enable_thinking switch: renders the template variables and message fields chat() passes.
inline const char* const kChatmlTools = R"J({%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\n\n' }}{%- endif %}
{{- "# Tools\n\nYou may call these functions:\n<tools>" }}
{%- for tool in tools %}{{- "\n" + (tool | tojson) }}{%- endfor %}
{{- "\n</tools>\nCall one as <tool_call>{\"name\": ..., \"arguments\": ...}</tool_call>.<|im_end|>\n" }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- for m in messages %}
{%- if m.role == 'user' or (m.role == 'system' and not loop.first) %}
{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}
{%- elif m.role == 'assistant' %}
{{- '<|im_start|>assistant' }}
{%- if m.content %}{{- '\n' + m.content }}{%- endif %}
{%- for tc in m.tool_calls | default([]) %}
{%- set f = tc.function if tc.function is defined else tc %}
{{- '\n<tool_call>\n{"name": "' + f.name + '", "arguments": ' + (f.arguments | tojson) + '}\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif m.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\n<tool_response>\n' + m.content + '\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- if enable_thinking is defined and not enable_thinking %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}
{%- endif %}
)J";
