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
  if (text[i] !== '{' && text[i] !== '[') return null;
  const end = valueEnd(text, i);
  const p = end < 0 ? null : parseJson(text.slice(i, end));
  return p?.ok ? { value: p.value, end } : null;
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

const gbnfText = (s) => `"${s.replace(/[\\"]/g, (c) => `\\${c}`).replace(/\n/g, '\\n')}"`;

/**
 * The constraint of a forced call (tool_choice 'required' or a named function) in the family's
 * own syntax: {jsonSchema, grammar?} for the sampler, one call of one of `tools` whose arguments
 * match its `parameters`. Families that write the name outside the JSON (Functionary, DeepSeek,
 * gpt-oss) get one schema per tool (rules schema-0, schema-1, ...). Markers that are control
 * tokens in the model's vocabulary are written as their text (the grammar writes text; the
 * parser reads both).
 */
export function forcedCall(tools, format) {
  const params = tools.map((t) => t.function.parameters ?? { type: 'object' });
  const byName = (pre, post) => `root ::= ${pre} (${tools.map((t, k) => `${gbnfText(t.function.name + post)} schema-${k}`).join(' | ')})`;
  switch (format) {
    case 'functionary': return { jsonSchema: params, grammar: byName('">>>"', '\n') };
    case 'deepseek':
      return {
        jsonSchema: params,
        grammar: `${byName(gbnfText('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>'), '\n```json\n')} ${gbnfText('\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>')}`,
      };
    case 'gptoss': return { jsonSchema: params, grammar: byName(gbnfText('<|channel|>commentary to=functions.'), ' <|constrain|>json<|message|>') };
    default: break;
  }
  const nameKey = format === 'commandr' ? 'tool_name' : 'name';
  const argsKey = format === 'llama3' || format === 'commandr' ? 'parameters' : 'arguments';
  const alts = tools.map((t, k) => ({
    type: 'object',
    properties: { [nameKey]: { const: t.function.name }, [argsKey]: params[k] },
    required: [nameKey, argsKey],
    additionalProperties: false,
  }));
  const jsonSchema = alts.length === 1 ? alts[0] : { anyOf: alts };
  const wrap = {
    hermes: ['<tool_call>\n', '\n</tool_call>'],
    granite: ['<|tool_call|>[', ']'],
    mistral: ['[TOOL_CALLS][', ']'],
    commandr: ['Action: ```json\n[', ']\n```'],
  }[format];
  return wrap ? { jsonSchema, grammar: `root ::= ${gbnfText(wrap[0])} schema ${gbnfText(wrap[1])}` } : { jsonSchema };
}

/** The end of the JSON value that starts at text[i] ('{' or '['), or -1 while it is incomplete. */
function valueEnd(text, i) {
  let depth = 0, inStr = false, esc = false;
  for (let k = i; k < text.length; k++) {
    const c = text[k];
    if (inStr) {
      if (esc) esc = false;
      else if (c === '\\') esc = true;
      else if (c === '"') inStr = false;
    } else if (c === '"') inStr = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      if (--depth === 0) return k + 1;
    }
  }
  return -1;
}

/** The end of any JSON value at text[i] followed by more text, or -1 while it may go on. */
function scalarOrValueEnd(text, i) {
  if (text[i] === '{' || text[i] === '[') return valueEnd(text, i);
  const m = /^(?:"(?:[^"\\]|\\.)*"|[^,}\s]+)/.exec(text.slice(i));
  return m && i + m[0].length < text.length ? i + m[0].length : -1;
}

/** A complete JSON string at text[i], or null: {value, end}. */
function stringAt(text, i) {
  if (text[i] !== '"') return null;
  for (let k = i + 1, esc = false; k < text.length; k++) {
    if (esc) esc = false;
    else if (text[k] === '\\') esc = true;
    else if (text[k] === '"') {
      const p = parseJson(text.slice(i, k + 1));
      return p.ok ? { value: p.value, end: k + 1 } : null;
    }
  }
  return null;
}

/**
 * A call object being written at text[i] ('{'), read as far as it goes: {name, args (the index
 * where the arguments object starts), end (past the object, or -1)}, or null when it is not a
 * call whose name comes before an object of arguments (then it is streamed whole at the end).
 */
function callObjectAt(text, i, nameKey, argsKeys) {
  let k = skipWs(text, i + 1), name = null;
  while (k < text.length) {
    if (text[k] === '}') return name === null ? null : { name, args: -1, end: k + 1 };
    const key = stringAt(text, k);
    if (!key) return { name, args: -1, end: -1 };
    k = skipWs(text, key.end);
    if (k >= text.length) return { name, args: -1, end: -1 };
    if (text[k] !== ':') return null;
    k = skipWs(text, k + 1);
    if (k >= text.length) return { name, args: -1, end: -1 };
    if (key.value === nameKey) {
      const v = stringAt(text, k);
      if (!v) return text[k] === '"' ? { name, args: -1, end: -1 } : null;
      name = v.value;
      k = v.end;
    } else if (argsKeys.includes(key.value)) {
      if (name === null || text[k] !== '{') return null;
      // The call object ends right after its arguments, or (more keys follow) is left to the end.
      const e = valueEnd(text, k);
      const close = e < 0 ? -1 : skipWs(text, e);
      return { name, args: k, end: close >= 0 && text[close] === '}' ? close + 1 : -1 };
    } else {
      const e = scalarOrValueEnd(text, k);
      if (e < 0) return { name, args: -1, end: -1 };
      k = e;
    }
    k = skipWs(text, k);
    if (text[k] === ',') k = skipWs(text, k + 1);
  }
  return { name, args: -1, end: -1 };
}

/**
 * The calls a reply is writing, read as far as they go, for streaming their arguments as they
 * are generated: [{name, args: the arguments' JSON text so far}], each entry once its name is
 * known and its arguments have begun. null: this reply's calls cannot be streamed piecewise
 * (their arguments are sent whole once the reply is complete).
 */
export function scanToolCalls(text, format) {
  const out = [];
  const objects = (i, list, nameKey = 'name', argsKeys = ['arguments', 'parameters']) => {
    // One call object at i, or a list of them when `list`.
    let k = skipWs(text, i);
    if (list) {
      if (k >= text.length) return true;
      if (text[k] !== '[') return false;
      k = skipWs(text, k + 1);
    }
    while (k < text.length) {
      if (text[k] !== '{') return list && text[k] === ']';
      const c = callObjectAt(text, k, nameKey, argsKeys);
      if (!c) return false;
      if (c.args < 0) return true;
      const e = valueEnd(text, c.args);
      out.push({ name: c.name, args: text.slice(c.args, e < 0 ? text.length : e) });
      if (!list || c.end < 0) return true;
      k = skipWs(text, c.end);
      if (text[k] !== ',') return true;
      k = skipWs(text, k + 1);
    }
    return true;
  };
  const afterEach = (marker, list) => {
    for (let i = text.indexOf(marker); i >= 0; i = text.indexOf(marker, i + marker.length)) {
      if (!objects(i + marker.length, list)) return false;
    }
    return true;
  };
  const named = (re) => {
    for (const m of text.matchAll(re)) {
      const at = m.index + m[0].length;
      if (at >= text.length) break;
      if (text[at] !== '{') return false;
      const e = valueEnd(text, at);
      out.push({ name: m[1], args: text.slice(at, e < 0 ? text.length : e) });
    }
    return true;
  };
  let ok;
  switch (format) {
    case 'hermes': ok = afterEach('<tool_call>', false); break;
    case 'granite': ok = text.includes('<|tool_call|>') ? afterEach('<|tool_call|>', true) : afterEach('<tool_call>', false); break;
    case 'mistral': ok = afterEach('[TOOL_CALLS]', true); break;
    case 'llama3': {
      const tag = text.indexOf('<|python_tag|>');
      ok = objects(tag >= 0 ? tag + 14 : 0, false);
      break;
    }
    case 'commandr': {
      const m = /Action:\s*```(?:json)?\s*\[/.exec(text);
      ok = !m || objects(m.index + m[0].length - 1, true, 'tool_name', ['parameters']);
      break;
    }
    case 'functionary': ok = named(/>>>\s*([A-Za-z0-9_.-]+)\s*\n/g) && !/>>>\s*all\b/.test(text); break;
    case 'deepseek': ok = named(/<｜tool▁call▁begin｜>(?:function<｜tool▁sep｜>)?([^\n<]+)\n```(?:json)?\n/g); break;
    case 'gptoss': ok = named(/<\|channel\|>commentary to=functions\.([A-Za-z0-9_.-]+)[^<]*(?:<\|constrain\|>[^<]*)?<\|message\|>/g); break;
    default: {
      const at = skipWs(text, 0);
      ok = objects(at, text[at] === '[');
    }
  }
  return ok ? out : null;
}
