// Tool calls in a model's reply, by chat-template family: where each family writes its calls, how
// to read them back into OpenAI's {name, arguments (JSON text)}, and the grammar that forces a
// well-formed call (tool_choice 'required' or a named function).

/** Tool-call formats and the markers that open a call in the reply. */
export const TOOL_FORMATS = Object.freeze({
  hermes: { markers: ['<tool_call>'] },            // Hermes 2 Pro, Qwen 2.5 / 3, many fine-tunes
  llama3: { markers: ['<|python_tag|>', '{'] },     // Llama 3.1-3.3: a bare JSON object, or python_tag
  mistral: { markers: ['[TOOL_CALLS]'] },           // Mistral v3+: [TOOL_CALLS] [{...}, ...]
  functionary: { markers: ['>>>'] },                // Functionary v3: >>>name\n{args}
  granite: { markers: ['<|tool_call|>', '<tool_call>'] },
  deepseek: { markers: ['<｜tool▁calls▁begin｜>', '<｜tool▁call▁begin｜>'] },
  commandr: { markers: ['Action:'] },               // Command R: Action: ```json [...] ```
  gptoss: { markers: ['<|channel|>commentary to='] },
  json: { markers: ['{', '['] },                   // no known format: a bare JSON call
});

/**
 * The format of a model's chat template, from its rendering of a conversation offering one
 * tool (its markers and wording) and the recognized chat format name.
 */
export function detectToolFormat(rendered, chatFormat = '') {
  const r = String(rendered);
  if (r.includes('<tool_call>') || r.includes('<tools>')) return 'hermes';
  if (r.includes('[AVAILABLE_TOOLS]') || chatFormat.startsWith('mistral')) return 'mistral';
  if (r.includes('<|tool_call|>') || r.includes('<|start_of_role|>')) return 'granite';
  if (r.includes('tool▁calls▁begin') || r.includes('tool▁call▁begin')) return 'deepseek';
  if (r.includes('<|channel|>') || r.includes('<|start|>')) return 'gptoss';
  if (r.includes('>>>') && r.includes('namespace functions')) return 'functionary';
  if (r.includes('<|START_OF_TURN_TOKEN|>')) return 'commandr';
  if (r.includes('<|start_header_id|>') || r.includes('<|python_tag|>') || chatFormat === 'llama3') return 'llama3';
  return 'json';
}

function parseJson(text) {
  try { return { ok: true, value: JSON.parse(text) }; } catch { return { ok: false }; }
}

/** The first complete JSON value at text[i] (object or array), or null: {value, end}. */
function jsonAt(text, i) {
  const open = text[i];
  if (open !== '{' && open !== '[') return null;
  let depth = 0, inStr = false, esc = false;
  for (let k = i; k < text.length; k++) {
    const c = text[k];
    if (inStr) {
      if (esc) esc = false;
      else if (c === '\\') esc = true;
      else if (c === '"') inStr = false;
      continue;
    }
    if (c === '"') inStr = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      depth--;
      if (depth === 0) {
        const p = parseJson(text.slice(i, k + 1));
        return p.ok ? { value: p.value, end: k + 1 } : null;
      }
    }
  }
  return null;
}

function skipWs(text, i) {
  while (i < text.length && /\s/.test(text[i])) i++;
  return i;
}

/** {name, arguments} from a call object in any of the families' key spellings, or null. */
function callOf(v) {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return null;
  const fn = v.function && typeof v.function === 'object' ? v.function : v;
  const name = fn.name ?? v.tool_name;
  if (typeof name !== 'string' || !name) return null;
  let args = fn.arguments ?? fn.parameters ?? v.parameters ?? v.arguments ?? {};
  if (typeof args === 'string') {
    const p = parseJson(args);
    if (p.ok) args = p.value;
  }
  return { name, arguments: typeof args === 'string' ? args : JSON.stringify(args) };
}

function callsOf(v) {
  const list = Array.isArray(v) ? v : [v];
  const out = list.map(callOf);
  return out.every(Boolean) ? out : null;
}

/**
 * Splits a reply into its text and its tool calls: {content, toolCalls: [{name, arguments}]}.
 * Text that looks like a call but does not parse stays content.
 */
export function parseToolCalls(text, format) {
  const calls = [];
  let content = text;
  const grab = (re) => {
    let rest = '';
    let last = 0;
    for (const m of text.matchAll(re)) {
      const p = parseJson(m[1].trim());
      const got = p.ok ? callsOf(p.value) : null;
      if (!got) continue;
      calls.push(...got);
      rest += text.slice(last, m.index);
      last = m.index + m[0].length;
    }
    if (calls.length) content = rest + text.slice(last);
  };
  switch (format) {
    case 'hermes':
    case 'granite':
      grab(/<tool_call>([\s\S]*?)(?:<\/tool_call>|$)/g);
      if (!calls.length && format === 'granite') {
        const i = text.indexOf('<|tool_call|>');
        if (i >= 0) {
          const j = jsonAt(text, skipWs(text, i + 13));
          const got = j && callsOf(j.value);
          if (got) { calls.push(...got); content = text.slice(0, i); }
        }
      }
      break;
    case 'mistral': {
      const i = text.indexOf('[TOOL_CALLS]');
      if (i >= 0) {
        const j = jsonAt(text, skipWs(text, i + 12));
        const got = j && callsOf(j.value);
        if (got) { calls.push(...got); content = text.slice(0, i); }
      }
      break;
    }
    case 'llama3': {
      const tag = text.indexOf('<|python_tag|>');
      const at = tag >= 0 ? skipWs(text, tag + 14) : skipWs(text, 0);
      const j = jsonAt(text, at);
      const got = j && skipWs(text, j.end) === text.length ? callsOf(j.value) : null;
      if (got) { calls.push(...got); content = tag >= 0 ? text.slice(0, tag) : ''; }
      break;
    }
    case 'functionary': {
      const re = />>>\s*([A-Za-z0-9_.-]+)\s*\n?([\s\S]*?)(?=>>>|$)/g;
      let first = -1;
      for (const m of text.matchAll(re)) {
        if (m[1] === 'all') continue;
        const p = parseJson(m[2].trim() || '{}');
        if (!p.ok) continue;
        if (first < 0) first = m.index;
        calls.push({ name: m[1], arguments: JSON.stringify(p.value) });
      }
      if (calls.length) content = text.slice(0, first);
      break;
    }
    case 'deepseek': {
      const re = /<｜tool▁call▁begin｜>(?:function<｜tool▁sep｜>)?([^\n<]+)\n```(?:json)?\n([\s\S]*?)\n```/g;
      let first = -1;
      for (const m of text.matchAll(re)) {
        const p = parseJson(m[2]);
        if (!p.ok) continue;
        if (first < 0) first = m.index;
        calls.push({ name: m[1].trim(), arguments: JSON.stringify(p.value) });
      }
      const open = text.lastIndexOf('<｜tool▁calls▁begin｜>', first);
      if (calls.length) content = text.slice(0, open >= 0 ? open : first);
      break;
    }
    case 'commandr': {
      const m = /Action:\s*```(?:json)?\s*([\s\S]*?)```/.exec(text);
      const p = m && parseJson(m[1]);
      const list = p?.ok && Array.isArray(p.value) ? p.value : null;
      if (list) {
        for (const a of list) {
          if (a && typeof a.tool_name === 'string' && a.tool_name !== 'directly-answer') {
            calls.push({ name: a.tool_name, arguments: JSON.stringify(a.parameters ?? {}) });
          }
        }
        if (calls.length) content = text.slice(0, m.index);
      }
      break;
    }
    case 'gptoss': {
      const re = /(?:<\|start\|>assistant)?<\|channel\|>commentary to=functions\.([A-Za-z0-9_.-]+)[\s\S]*?<\|message\|>([\s\S]*?)(?:<\|call\|>|$)/g;
      let first = -1;
      for (const m of text.matchAll(re)) {
        const p = parseJson(m[2].trim());
        if (!p.ok) continue;
        if (first < 0) first = m.index;
        calls.push({ name: m[1], arguments: JSON.stringify(p.value) });
      }
      if (calls.length) content = text.slice(0, first);
      break;
    }
    default: {
      const at = skipWs(text, 0);
      const j = jsonAt(text, at);
      const got = j && skipWs(text, j.end) === text.length ? callsOf(j.value) : null;
      if (got) { calls.push(...got); content = ''; }
    }
  }
  return { content: calls.length ? content.trim() : text, toolCalls: calls };
}

/**
 * The JSON Schema of a forced call (tool_choice 'required' or a named function): one call object
 * {name, arguments} of one of `tools` (the family's key for the arguments).
 */
export function forcedCallSchema(tools, format) {
  const argsKey = format === 'llama3' ? 'parameters' : 'arguments';
  const alts = tools.map((t) => ({
    type: 'object',
    properties: { name: { const: t.function.name }, [argsKey]: t.function.parameters ?? { type: 'object' } },
    required: ['name', argsKey],
    additionalProperties: false,
  }));
  return alts.length === 1 ? alts[0] : { anyOf: alts };
}
