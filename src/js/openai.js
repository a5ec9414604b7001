// An OpenAI-shaped client over a qkv model (in process, or a qkv/worker model): code written for
// the OpenAI SDK runs by changing only the client construction. Requests and responses are
// OpenAI's objects field for field; unknown or ill-typed fields are bad_argument errors naming
// them; requests run one at a time on one KV cache (never interleaved).
import { QkvError, check } from './errors.js';
import { TOOL_FORMATS, detectToolFormat, forcedCall, parseToolCalls, scanToolCalls } from './tool-calls.js';

const ROLES = ['system', 'developer', 'user', 'assistant', 'tool'];
// A message's fields (OpenAI's, plus reasoning_content as llama.cpp's server takes it).
const MESSAGE_FIELDS = new Set(['role', 'content', 'name', 'tool_calls', 'tool_call_id', 'refusal', 'reasoning_content']);

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
const bad = (msg) => new QkvError('bad_argument', msg);

// Field checks: each returns an error text for a bad value, or '' when it is fine.
const num = (lo, hi) => (v) => (isNum(v) && v >= lo && v <= hi ? '' : `a number in [${lo}, ${hi}]`);
const int = (lo, hi) => (v) => (Number.isInteger(v) && v >= lo && v <= hi ? '' : `an integer in [${lo}, ${hi}]`);
const bool = (v) => (typeof v === 'boolean' ? '' : 'a boolean');
const str = (v) => (typeof v === 'string' ? '' : 'a string');
const nullable = (f) => (v) => (v === null ? '' : f(v));
const stopCheck = (v) => (typeof v === 'string' || (Array.isArray(v) && v.length <= 4 && v.every((s) => typeof s === 'string' && s))
  ? '' : 'a string or an array of up to 4 non-empty strings');
const biasCheck = (v) => (isObj(v) && Object.entries(v).every(([k, b]) => /^\d+$/.test(k) && isNum(b) && b >= -100 && b <= 100)
  ? '' : 'an object {token id: bias in [-100, 100]}');
const objCheck = (v) => (isObj(v) ? '' : 'an object');
const anyCheck = () => '';
const streamOptionsCheck = (v) => (isObj(v) && Object.keys(v).every((k) => k === 'include_usage' || k === 'include_obfuscation') && [undefined, null, true, false].includes(v.include_usage)
  ? '' : '{include_usage?: boolean}');

const COMMON = {
  model: str, stream: nullable(bool), stream_options: nullable(streamOptionsCheck), temperature: nullable(num(0, 2)),
  top_p: nullable(num(0, 1)), seed: nullable(int(0, Number.MAX_SAFE_INTEGER)), stop: nullable(stopCheck),
  presence_penalty: nullable(num(-2, 2)), frequency_penalty: nullable(num(-2, 2)), logit_bias: nullable(biasCheck),
  n: nullable(int(1, 16)), user: str, qkv: objCheck, max_tokens: nullable(int(1, 1 << 24)),
};
const CHAT_FIELDS = {
  ...COMMON, messages: anyCheck, max_completion_tokens: nullable(int(1, 1 << 24)), logprobs: nullable(bool),
  top_logprobs: nullable(int(0, 20)), tools: anyCheck, tool_choice: anyCheck, parallel_tool_calls: nullable(bool),
  response_format: anyCheck, metadata: anyCheck, store: nullable(bool), service_tier: anyCheck, reasoning_effort: anyCheck,
};
const COMPLETION_FIELDS = {
  ...COMMON, prompt: anyCheck, logprobs: nullable(int(0, 5)), echo: nullable(bool), best_of: nullable(int(1, 1)), suffix: nullable(str),
};
const EMBEDDING_FIELDS = {
  model: str, input: anyCheck, encoding_format: (v) => (v === 'float' || v === 'base64' ? '' : "'float' or 'base64'"),
  dimensions: int(1, 1 << 20), user: str,
};
/** qkv's extension field: sampling options OpenAI does not have, and a raw grammar. */
// The rerank request of llama.cpp's server (Jina's and Cohere's shape); `texts` is its alias of documents.
const RERANK_FIELDS = {
  model: str, query: str, documents: anyCheck, texts: anyCheck, top_n: int(1, Number.MAX_SAFE_INTEGER), return_documents: bool, user: str,
};
const QKV_FIELDS = {
  top_k: int(0, 1 << 24), min_p: num(0, 1), repetition_penalty: num(1e-3, 100), repetition_window: int(0, 1 << 20),
  grammar: (v) => (typeof v === 'string' && v ? '' : 'a non-empty GBNF string'),
};

function checkFields(req, fields, what) {
  check(isObj(req), `${what} takes a request object`);
  for (const [k, v] of Object.entries(req)) {
    if (v === undefined) continue;
    const f = fields[k];
    if (!f) throw bad(`${what}: unknown field '${k}'`);
    const why = f(v);
    if (why) throw bad(`${what}: field '${k}' must be ${why}, got ${JSON.stringify(v) ?? typeof v}`);
  }
  if (req.qkv !== undefined) checkFields(req.qkv, QKV_FIELDS, `${what}: qkv`);
}

const randomId = () => Array.from({ length: 24 }, () => 'abcdefghijklmnopqrstuvwxyz0123456789'[Math.floor(Math.random() * 36)]).join('');
const nowSec = () => Math.floor(Date.now() / 1000);

/** Sampling options of the qkv API from an OpenAI request. */
function samplingOf(req) {
  const q = req.qkv ?? {};
  const o = {
    temperature: req.temperature ?? 1,
    topP: req.top_p ?? 1,
    topK: q.top_k, minP: q.min_p, repetitionPenalty: q.repetition_penalty, repetitionWindow: q.repetition_window,
    presencePenalty: req.presence_penalty ?? undefined,
    frequencyPenalty: req.frequency_penalty ?? undefined,
    logitBias: req.logit_bias ?? undefined,
    seed: req.seed ?? undefined,
    stop: req.stop ?? undefined,
  };
  if (q.grammar) o.grammar = q.grammar;
  for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
  return o;
}

/** Message content: a string, null, or content parts (text, image_url; checked and joined by core.js as llama.cpp joins them). */
function contentText(c, i) {
  if (c === null || c === undefined) return null;
  if (typeof c === 'string' || Array.isArray(c)) return c;
  throw bad(`messages[${i}].content must be a string, an array of content parts or null`);
}

/** OpenAI messages to the chat template's: tool-call arguments as objects, as templates expect. */
function templateMessages(messages) {
  if (!Array.isArray(messages) || messages.length === 0) throw bad('chat.completions.create: messages must be a non-empty array');
  return messages.map((m, i) => {
    if (!isObj(m)) throw bad(`messages[${i}] must be an object`);
    if (!ROLES.includes(m.role)) throw bad(`messages[${i}].role must be one of ${ROLES.join(', ')}, got ${JSON.stringify(m.role)}`);
    for (const k of Object.keys(m)) {
      if (!MESSAGE_FIELDS.has(k) && m[k] !== undefined) {
        throw (k === 'audio' || k === 'function_call'
          ? new QkvError('unsupported', `messages[${i}]: field '${k}' is not supported`)
          : bad(`messages[${i}]: unknown field '${k}'`));
      }
    }
    const { role, content, tool_calls: calls, ...rest } = m;
    const out = { role: role === 'developer' ? 'system' : role, content: contentText(content, i), ...rest };
    if (out.content === null && out.role !== 'assistant') throw bad(`messages[${i}].content must not be null for role '${role}'`);
    if (calls !== undefined) {
      if (!Array.isArray(calls)) throw bad(`messages[${i}].tool_calls must be an array`);
      out.tool_calls = calls.map((c, k) => {
        if (!isObj(c) || !isObj(c.function) || typeof c.function.name !== 'string') throw bad(`messages[${i}].tool_calls[${k}] must be {id, type: 'function', function: {name, arguments}}`);
        let args = c.function.arguments ?? '{}';
        if (typeof args === 'string') { try { args = JSON.parse(args); } catch { /* the template gets the text */ } }
        return { ...c, function: { ...c.function, arguments: args } };
      });
    }
    return out;
  });
}

/** Unknown keys of a nested request object: a bad_argument naming the first. */
function knownKeys(obj, keys, where) {
  for (const k of Object.keys(obj)) if (!keys.includes(k) && obj[k] !== undefined) throw bad(`${where}: unknown field '${k}'`);
}

function checkTools(tools) {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) throw bad('tools must be an array of {type: "function", function: {name, description, parameters}}');
  tools.forEach((t, i) => {
    if (!isObj(t) || t.type !== 'function' || !isObj(t.function) || typeof t.function.name !== 'string' || !t.function.name) {
      throw bad(`tools[${i}] must be {type: 'function', function: {name, description?, parameters?}}`);
    }
    knownKeys(t, ['type', 'function'], `tools[${i}]`);
    knownKeys(t.function, ['name', 'description', 'parameters', 'strict'], `tools[${i}].function`);
    if (t.function.parameters !== undefined && !isObj(t.function.parameters)) throw bad(`tools[${i}].function.parameters must be a JSON Schema object`);
  });
  return tools;
}

/** The tools a reply must call from (tool_choice), or null when a call is not forced. */
function forcedTools(tools, choice) {
  if (choice === undefined || choice === null || choice === 'auto' || choice === 'none') return null;
  if (choice === 'required') {
    if (!tools.length) throw bad("tool_choice 'required' needs tools");
    return tools;
  }
  if (isObj(choice) && choice.type === 'function' && isObj(choice.function) && typeof choice.function.name === 'string') {
    knownKeys(choice, ['type', 'function'], 'tool_choice');
    const t = tools.find((x) => x.function.name === choice.function.name);
    if (!t) throw bad(`tool_choice names '${choice.function.name}', which is not in tools`);
    return [t];
  }
  throw bad("tool_choice must be 'none', 'auto', 'required' or {type: 'function', function: {name}}");
}

function responseFormat(rf) {
  if (rf === undefined || rf === null) return {};
  if (!isObj(rf)) throw bad('response_format must be an object');
  knownKeys(rf, ['type', 'json_schema'], 'response_format');
  if (isObj(rf.json_schema)) knownKeys(rf.json_schema, ['name', 'description', 'schema', 'strict'], 'response_format.json_schema');
  if (rf.type === 'text') return {};
  if (rf.type === 'json_object') return { jsonSchema: { type: 'object' } };
  if (rf.type === 'json_schema') {
    if (!isObj(rf.json_schema) || (rf.json_schema.schema !== undefined && !isObj(rf.json_schema.schema))) {
      throw bad('response_format.json_schema must be {name, schema, strict?}');
    }
    return { jsonSchema: rf.json_schema.schema ?? { type: 'object' } };
  }
  throw bad(`response_format.type must be 'text', 'json_object' or 'json_schema', got ${JSON.stringify(rf.type)}`);
}

const finishOf = (r) => (r === 'length' || r === 'context' ? 'length' : 'stop');

/** Holds back text that may begin a tool call, so that calls never leak into content deltas. */
class CallSplitter {
  constructor(format, active) { this.markers = active ? TOOL_FORMATS[format].markers : []; this.text = ''; this.sent = 0; this.inCall = false; }
  /** Adds text; returns the content that is safe to send now. */
  push(t) {
    this.text += t;
    if (this.inCall || !this.markers.length) return this.inCall ? '' : this.flushSafe();
    for (const m of this.markers) {
      // A bare-JSON marker ('{', '[') counts only at the start of the reply.
      const at = m.length === 1 ? (this.text.trimStart().startsWith(m) ? this.text.indexOf(m) : -1) : this.text.indexOf(m, this.sent);
      if (at >= 0) { this.inCall = true; const out = this.text.slice(this.sent, at); this.sent = at; return out; }
    }
    return this.flushSafe();
  }
  flushSafe() {
    let keep = 0;
    for (const m of this.markers) {
      if (m.length === 1) { if (!this.text.trim()) keep = Math.max(keep, this.text.length - this.sent); continue; }
      for (let k = Math.min(m.length - 1, this.text.length - this.sent); k > keep; k--) {
        if (this.text.endsWith(m.slice(0, k))) { keep = k; break; }
      }
    }
    const out = this.text.slice(this.sent, this.text.length - keep);
    this.sent = this.text.length - keep;
    return out;
  }
}

/**
 * An OpenAI-shaped client for a qkv model (from loadModel, or a qkv/worker model):
 * client.chat.completions.create, client.completions.create, client.embeddings.create,
 * client.rerank.create (rerankers), client.models.list / retrieve. Each create(request, {signal}) returns a Promise of the response
 * object, or with stream: true of an async iterable of chunk objects.
 */
export function createOpenAI(model, options = {}) {
  check(model && typeof model === 'object' && model.info, 'createOpenAI takes a loaded qkv model');
  check(isObj(options), 'createOpenAI options must be an object');
  const id = options.modelName ?? 'qkv';
  check(typeof id === 'string' && id.length > 0, 'modelName must be a non-empty string');
  const contextLength = options.contextLength ?? 0;
  check(Number.isInteger(contextLength) && contextLength >= 0, 'contextLength must be a non-negative integer');
  let session = null;
  // The tool-call format: read from the chat template unless options.toolFormat names it.
  let toolFormat = options.toolFormat ?? null;
  check(toolFormat === null || Object.hasOwn(TOOL_FORMATS, toolFormat), `toolFormat must be one of ${Object.keys(TOOL_FORMATS).join(', ')}, got ${JSON.stringify(toolFormat)}`);
  let queue = Promise.resolve();
  /** Runs fn alone: requests wait for the one before (one KV cache, never interleaved). */
  function exclusive(fn) {
    const run = queue.then(fn, fn);
    queue = run.then(() => {}, () => {});
    return run;
  }
  async function sessionOf() {
    if (!session) session = await model.createSession({ contextLength });
    return session;
  }
  async function formatOf() {
    if (toolFormat) return toolFormat;
    const probe = [{ type: 'function', function: { name: 'probe_tool', description: 'p', parameters: { type: 'object', properties: {} } } }];
    let rendered = '';
    try { rendered = await model.applyChatTemplate([{ role: 'user', content: 'x' }], { tools: probe }); } catch { /* no template: json */ }
    toolFormat = detectToolFormat(rendered, model.info.chatFormat ?? '');
    return toolFormat;
  }
  const piece = async (tok) => model.detokenize([tok]);
  // Tool-call markers that are control tokens ([TOOL_CALLS], <|python_tag|>) print as nothing:
  // their ids put the marker back into the text the parser reads.
  let markerIds = null;
  async function markersOf(format) {
    if (markerIds) return markerIds;
    markerIds = new Map();
    for (const mk of TOOL_FORMATS[format].markers) {
      if (mk.length < 2) continue;
      try {
        const ids = await model.tokenize(mk, { bos: false, special: true });
        if (ids.length === 1 && (await model.detokenize([ids[0]])) === '') markerIds.set(ids[0], mk);
      } catch { /* not in this vocabulary */ }
    }
    return markerIds;
  }
  const textOf = (t, markers) => (markers?.has(t.token) ? t.text + markers.get(t.token) : t.text);
  const bytesOf = (s) => Array.from(new TextEncoder().encode(s));

  /** One generation: {text, tokens: [{token, logprob, topLogprobs}], stats}. onText streams. */
  async function generate(kind, input, opts, signal, onText, markers = null) {
    const s = await sessionOf();
    const it = kind === 'chat' ? s.chat(input, { ...opts, signal }) : s.generate(input, { ...opts, signal });
    let text = '';
    const tokens = [];
    for await (const t of it) {
      text += textOf(t, markers);
      if (t.token >= 0 && t.logprob !== undefined) tokens.push(t);
      if (onText && t.text) await onText(t.text, t);
    }
    return { text, tokens, stats: s.lastGeneration };
  }

  async function chatLogprobs(tokens) {
    const content = [];
    for (const t of tokens) {
      const tok = await piece(t.token);
      const top = [];
      for (const a of t.topLogprobs ?? []) { const p = await piece(a.token); top.push({ token: p, logprob: a.logprob, bytes: bytesOf(p) }); }
      content.push({ token: tok, logprob: t.logprob, bytes: bytesOf(tok), top_logprobs: top });
    }
    return { content, refusal: null };
  }

  async function chatPlan(req) {
    checkFields(req, CHAT_FIELDS, 'chat.completions.create');
    const messages = templateMessages(req.messages);
    const tools = checkTools(req.tools);
    const forced = forcedTools(tools, req.tool_choice);
    const useTools = tools.length > 0 && req.tool_choice !== 'none';
    const format = useTools ? await formatOf() : 'json';
    const opts = { ...samplingOf(req), ...responseFormat(req.response_format) };
    const max = req.max_completion_tokens ?? req.max_tokens;
    opts.maxTokens = max ?? (1 << 24);
    if (req.logprobs) opts.logprobs = req.top_logprobs ?? 0;
    else if (req.top_logprobs !== undefined && req.top_logprobs !== null) throw bad('top_logprobs needs logprobs: true');
    if (useTools) opts.tools = tools;
    if (forced) {
      if (opts.jsonSchema || opts.grammar) throw bad('a forced tool call (tool_choice) cannot be combined with response_format or qkv.grammar');
      // The call in the family's own syntax (its tags or markers around or before the JSON).
      Object.assign(opts, forcedCall(forced, format));
    }
    return { messages, opts, forced: !!forced, useTools, format, n: req.n ?? 1 };
  }

  function toolCallsOf(plan, text) {
    if (!plan.useTools) return { content: text, toolCalls: [] };
    const parsed = parseToolCalls(text, plan.format);
    // Arguments as the model wrote them (what a stream sends), where they are the same JSON.
    const raw = parsed.toolCalls.length ? scanToolCalls(text, plan.format) : null;
    if (raw?.length === parsed.toolCalls.length) {
      parsed.toolCalls = parsed.toolCalls.map((c, k) => {
        let same = false;
        try { same = raw[k].name === c.name && JSON.stringify(JSON.parse(raw[k].args)) === c.arguments; } catch { /* not whole JSON */ }
        return same ? { ...c, arguments: raw[k].args } : c;
      });
    }
    return parsed;
  }

  const toOpenAICalls = (calls) => calls.map((c) => ({ id: `call_${randomId()}`, type: 'function', function: { name: c.name, arguments: c.arguments } }));

  async function chatCreate(req, { signal } = {}) {
    const plan = await chatPlan(req);
    const base = { id: `chatcmpl-${randomId()}`, created: nowSec(), model: id, system_fingerprint: null };
    if (req.stream) return exclusiveStream(chatStream(req, plan, base, signal));
    return exclusive(async () => {
      const choices = [];
      let prompt = 0, completion = 0;
      for (let i = 0; i < plan.n; i++) {
        const opts = { ...plan.opts, ...(req.seed !== undefined && req.seed !== null ? { seed: req.seed + i } : {}) };
        const g = await generate('chat', plan.messages, opts, signal, null, plan.useTools ? await markersOf(plan.format) : null);
        prompt = g.stats.promptTokens;
        completion += g.stats.generatedTokens;
        const { content, toolCalls } = toolCallsOf(plan, g.text);
        const message = { role: 'assistant', content: toolCalls.length && !content ? null : content, refusal: null };
        if (toolCalls.length) message.tool_calls = toOpenAICalls(toolCalls);
        choices.push({
          index: i, message,
          logprobs: req.logprobs ? await chatLogprobs(g.tokens) : null,
          finish_reason: toolCalls.length ? 'tool_calls' : finishOf(g.stats.finishReason),
        });
      }
      return { ...base, object: 'chat.completion', choices, usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } };
    });
  }

  /**
   * A stream (`iter`, an async generator not yet started) that takes its turn in the queue: it
   * waits for the requests before it and holds later ones until it ends or the caller leaves.
   */
  function exclusiveStream(iter) {
    let release;
    const turn = new Promise((r) => { release = r; });
    const myTurn = queue;
    queue = queue.then(() => turn);
    let done = false;
    const finish = () => { if (!done) { done = true; release(); } };
    return Promise.resolve({
      [Symbol.asyncIterator]() { return this; },
      async next() {
        try {
          await myTurn;
          const r = await iter.next();
          if (r.done) finish();
          return r;
        } catch (e) { finish(); throw e; }
      },
      async return(v) {
        try { await iter.return?.(v); } finally { finish(); }
        return { done: true, value: v };
      },
    });
  }

  async function* chatStream(req, plan, base, signal) {
    const chunk = (choices, extra = {}) => ({ ...base, object: 'chat.completion.chunk', choices, ...extra });
    let prompt = 0, completion = 0;
    for (let i = 0; i < plan.n; i++) {
      yield chunk([{ index: i, delta: { role: 'assistant', content: '', refusal: null }, logprobs: null, finish_reason: null }]);
      const split = new CallSplitter(plan.format, plan.useTools);
      const pending = [];
      // Calls whose arguments stream as they are written: {id, sent (characters of arguments sent)}.
      const streamed = [];
      let frozen = false;  // the reply's calls stopped reading as streamable: the rest goes at the end
      const callDelta = (k, fn, extra = {}) => chunk([{ index: i, delta: { tool_calls: [{ index: k, ...extra, function: fn }] }, logprobs: null, finish_reason: null }]);
      const opts = { ...plan.opts, ...(req.seed !== undefined && req.seed !== null ? { seed: req.seed + i } : {}) };
      const s = await sessionOf();
      const it = s.chat(plan.messages, { ...opts, signal });
      const markers = plan.useTools ? await markersOf(plan.format) : null;
      let text = '';
      for await (const t of it) {
        const piece = textOf(t, markers);
        text += piece;
        const send = split.push(piece);
        const lp = req.logprobs && t.token >= 0 && t.logprob !== undefined ? await chatLogprobs([t]) : null;
        if (send || lp) pending.push(chunk([{ index: i, delta: { content: send }, logprobs: lp, finish_reason: null }]));
        if (split.inCall && !frozen) {
          // OpenAI's order: a call's id and name first, then its arguments in fragments.
          const calls = scanToolCalls(split.text.slice(split.sent), plan.format);
          if (!calls) frozen = true;
          for (const [k, c] of (calls ?? []).entries()) {
            if (!streamed[k]) {
              streamed[k] = { id: `call_${randomId()}`, sent: 0 };
              pending.push(callDelta(k, { name: c.name, arguments: '' }, { id: streamed[k].id, type: 'function' }));
            }
            if (c.args.length > streamed[k].sent) {
              pending.push(callDelta(k, { arguments: c.args.slice(streamed[k].sent) }));
              streamed[k].sent = c.args.length;
            }
          }
        }
        while (pending.length) yield pending.shift();
      }
      const stats = s.lastGeneration;
      prompt = stats.promptTokens;
      completion += stats.generatedTokens;
      const { content, toolCalls } = toolCallsOf(plan, text);
      if (toolCalls.length || streamed.length) {
        // Content before the calls that the splitter held back, then the calls not streamed yet
        // (whole): each its id and name first, its arguments after.
        const said = split.text.slice(0, split.sent);
        if (content.length > said.trim().length && content.startsWith(said.trim())) {
          yield chunk([{ index: i, delta: { content: content.slice(said.trim().length) }, logprobs: null, finish_reason: null }]);
        }
        for (const [k, c] of toOpenAICalls(toolCalls).entries()) {
          if (k < streamed.length) continue;
          yield callDelta(k, { name: c.function.name, arguments: '' }, { id: c.id, type: 'function' });
          yield callDelta(k, { arguments: c.function.arguments });
        }
      } else {
        const rest = split.text.slice(split.sent);
        if (rest) yield chunk([{ index: i, delta: { content: rest }, logprobs: null, finish_reason: null }]);
      }
      // A call streamed but cut short by max_tokens ends with 'length', as OpenAI's do.
      const finish = finishOf(stats.finishReason);
      yield chunk([{ index: i, delta: {}, logprobs: null, finish_reason: toolCalls.length || (streamed.length && finish !== 'length') ? 'tool_calls' : finish }]);
    }
    if (req.stream_options?.include_usage) {
      yield chunk([], { usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } });
    }
  }

  async function completionPlan(req) {
    checkFields(req, COMPLETION_FIELDS, 'completions.create');
    let prompt = req.prompt;
    if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string') prompt = prompt[0];
    if (typeof prompt !== 'string') {
      throw (Array.isArray(prompt) ? new QkvError('unsupported', 'completions.create: one prompt per request (a string)') : bad('completions.create: prompt must be a string'));
    }
    if (req.suffix) throw new QkvError('unsupported', 'completions.create: suffix (fill-in-the-middle) is not supported');
    const opts = samplingOf(req);
    opts.maxTokens = req.max_tokens ?? 16;
    if (req.logprobs !== undefined && req.logprobs !== null) opts.logprobs = req.logprobs;
    return { prompt, opts, n: req.n ?? 1 };
  }

  async function completionLogprobs(tokens, offset0) {
    const out = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
    let offset = offset0;
    for (const t of tokens) {
      const p = await piece(t.token);
      out.tokens.push(p);
      out.token_logprobs.push(t.logprob);
      const top = {};
      for (const a of t.topLogprobs ?? []) top[await piece(a.token)] = a.logprob;
      out.top_logprobs.push(top);
      out.text_offset.push(offset);
      offset += p.length;
    }
    return out;
  }

  async function completionCreate(req, { signal } = {}) {
    const plan = await completionPlan(req);
    const base = { id: `cmpl-${randomId()}`, created: nowSec(), model: id, system_fingerprint: null };
    if (req.stream) {
      return exclusiveStream(async function* () {
        let prompt = 0, completion = 0;
        for (let i = 0; i < plan.n; i++) {
          const s = await sessionOf();
          const opts = { ...plan.opts, ...(req.seed !== undefined && req.seed !== null ? { seed: req.seed + i } : {}) };
          if (req.echo) yield { ...base, object: 'text_completion', choices: [{ text: plan.prompt, index: i, logprobs: null, finish_reason: null }] };
          for await (const t of s.generate(plan.prompt, { ...opts, signal })) {
            const lp = plan.opts.logprobs !== undefined && t.token >= 0 ? await completionLogprobs([t], 0) : null;
            if (t.text || lp) yield { ...base, object: 'text_completion', choices: [{ text: t.text, index: i, logprobs: lp, finish_reason: null }] };
          }
          const st = s.lastGeneration;
          prompt = st.promptTokens;
          completion += st.generatedTokens;
          yield { ...base, object: 'text_completion', choices: [{ text: '', index: i, logprobs: null, finish_reason: finishOf(st.finishReason) }] };
        }
        if (req.stream_options?.include_usage) {
          yield { ...base, object: 'text_completion', choices: [], usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } };
        }
      }());
    }
    return exclusive(async () => {
      const choices = [];
      let prompt = 0, completion = 0;
      for (let i = 0; i < plan.n; i++) {
        const opts = { ...plan.opts, ...(req.seed !== undefined && req.seed !== null ? { seed: req.seed + i } : {}) };
        const g = await generate('text', plan.prompt, opts, signal);
        prompt = g.stats.promptTokens;
        completion += g.stats.generatedTokens;
        const text = (req.echo ? plan.prompt : '') + g.text;
        choices.push({
          text, index: i,
          logprobs: plan.opts.logprobs !== undefined ? await completionLogprobs(g.tokens, req.echo ? plan.prompt.length : 0) : null,
          finish_reason: finishOf(g.stats.finishReason),
        });
      }
      return { ...base, object: 'text_completion', choices, usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } };
    });
  }

  async function embeddingsCreate(req, { signal } = {}) {
    checkFields(req, EMBEDDING_FIELDS, 'embeddings.create');
    let input = req.input;
    if (typeof input === 'string') input = [input];
    if (!Array.isArray(input) || input.length === 0 || !input.every((s) => typeof s === 'string')) {
      throw (Array.isArray(input) && input.length > 0 && input.every((x) => Array.isArray(x) || Number.isInteger(x))
        ? new QkvError('unsupported', 'embeddings.create: token-id input is not supported; give strings')
        : bad('embeddings.create: input must be a string or a non-empty array of strings'));
    }
    return exclusive(async () => {
      const vecs = await model.embed(input, { signal });
      const dim = vecs[0]?.length ?? 0;
      if (req.dimensions !== undefined && req.dimensions !== dim) {
        throw new QkvError('unsupported', `embeddings.create: this model gives ${dim} dimensions; dimensions: ${req.dimensions} is not supported`);
      }
      const tokens = model.lastEmbedding?.tokens ?? (await Promise.all(input.map((t) => model.tokenize(t)))).reduce((a, t) => a + t.length, 0);
      const data = vecs.map((v, index) => ({
        object: 'embedding', index,
        embedding: req.encoding_format === 'base64'
          ? base64(new Uint8Array(Float32Array.from(v).buffer)) : Array.from(v),
      }));
      return { object: 'list', data, model: id, usage: { prompt_tokens: tokens, total_tokens: tokens } };
    });
  }

  async function rerankCreate(req, { signal } = {}) {
    checkFields(req, RERANK_FIELDS, 'rerank.create');
    if (req.query === undefined) throw bad('rerank.create: field \'query\' is required');
    if (req.documents !== undefined && req.texts !== undefined) throw bad('rerank.create: give documents or texts, not both');
    const docs = req.documents ?? req.texts;
    // A document is a string or Cohere's {text}.
    const texts = Array.isArray(docs) ? docs.map((d) => (isObj(d) && typeof d.text === 'string' && Object.keys(d).length === 1 ? d.text : d)) : null;
    if (!texts || texts.length === 0 || !texts.every((s) => typeof s === 'string')) {
      throw bad('rerank.create: documents must be a non-empty array of strings (or {text} objects)');
    }
    return exclusive(async () => {
      const all = await model.rerank(req.query, texts, { signal });
      const ranked = all.slice(0, req.top_n ?? all.length);
      const tokens = all.reduce((a, r) => a + r.tokens, 0);  // every pair read, not only the top_n returned
      const results = ranked.map((r) => ({
        index: r.index, relevance_score: r.score, ...(req.return_documents ? { document: { text: texts[r.index] } } : {}),
      }));
      return { object: 'list', model: id, results, usage: { prompt_tokens: tokens, total_tokens: tokens } };
    });
  }

  const modelObject = () => ({ id, object: 'model', created: 0, owned_by: 'qkv' });
  return {
    chat: { completions: { create: chatCreate } },
    completions: { create: completionCreate },
    embeddings: { create: embeddingsCreate },
    rerank: { create: rerankCreate },
    models: {
      list: async () => ({ object: 'list', data: [modelObject()] }),
      retrieve: async (name) => {
        if (name !== id) throw new QkvError('bad_argument', `no model '${name}' (this client serves '${id}')`);
        return modelObject();
      },
    },
    /** The tool-call format read from the model's chat template (hermes, llama3, mistral, ...). */
    toolFormat: formatOf,
  };
}

function base64(bytes) {
  if (typeof Buffer !== 'undefined') return Buffer.from(bytes).toString('base64');
  let s = '';
  for (let i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
  return btoa(s);
}
