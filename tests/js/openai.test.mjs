// createOpenAI (qkv/openai): OpenAI-shaped requests and responses over the qkv API, in process
// and through qkv/worker. References: the plain qkv API for the same options (text, tokens,
// usage), Ajv for schema-constrained output, float64 log-softmax of the session's logits for
// logprobs, and hand-written replies in each family's tool-call format for the parser.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import Ajv from 'ajv';
import { loadModel, QkvError } from '../../src/js/node.js';
import { createOpenAI } from '../../src/js/openai.js';
import { createWorker } from '../../src/js/worker-client.js';
import { detectToolFormat, parseToolCalls } from '../../src/js/tool-calls.js';
import { models as sharedModels, root } from './helpers.mjs';

const maker = join(root, 'build', 'qkv_test_models');
const dir = join(root, 'test-artifacts', 'openai-models');
const skip = !existsSync(maker) && `${maker} is not built (scripts/build.sh native)`;
const ajv = new Ajv({ strict: false });

before(() => {
  if (skip) return;
  mkdirSync(dir, { recursive: true });
  let r = spawnSync(maker, [dir, sharedModels], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  r = spawnSync(maker, ['--encoders', dir], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
});

const MESSAGES = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello there' }];
const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['c', 'f'] } }, required: ['city', 'unit'], additionalProperties: false },
  },
};

test('chat.completions.create: the response object, text and usage as the qkv API gives them', { skip }, async () => {
  const m = await loadModel(join(dir, 'qwen2.gguf'), { threads: 1 });
  try {
    const client = createOpenAI(m, { modelName: 'qwen-test' });
    const r = await client.chat.completions.create({ model: 'qwen-test', messages: MESSAGES, temperature: 0.7, seed: 5, max_tokens: 12 });
    assert.equal(r.object, 'chat.completion');
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.model, 'qwen-test');
    assert.equal(r.choices.length, 1);
    const want = await m.createSession();
    let text = '';
    for await (const t of want.chat(MESSAGES, { temperature: 0.7, topP: 1, seed: 5, maxTokens: 12 })) text += t.text;
    assert.equal(r.choices[0].message.content, text);
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(r.choices[0].finish_reason, want.lastGeneration.finishReason === 'stop' ? 'stop' : 'length');
    assert.deepEqual(r.usage, {
      prompt_tokens: want.lastGeneration.promptTokens, completion_tokens: want.lastGeneration.generatedTokens,
      total_tokens: want.lastGeneration.promptTokens + want.lastGeneration.generatedTokens,
    });
    // Streaming gives the same text in deltas, a role first, a finish reason last, usage on request.
    const stream = await client.chat.completions.create({ model: 'qwen-test', messages: MESSAGES, temperature: 0.7, seed: 5, max_tokens: 12, stream: true, stream_options: { include_usage: true } });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0].id));
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), text);
    assert.equal(chunks.at(-2).choices[0].finish_reason, r.choices[0].finish_reason);
    assert.deepEqual(chunks.at(-1).usage, r.usage);
    // n: that many choices, seeds seed, seed + 1, ...
    const two = await client.chat.completions.create({ messages: MESSAGES, seed: 5, n: 2, max_tokens: 6, temperature: 0.7 });
    assert.equal(two.choices.length, 2);
    assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
    assert.deepEqual((await client.models.list()).data.map((x) => x.id), ['qwen-test']);
  } finally {
    m.dispose();
  }
});

test('response_format json_schema and json_object give valid JSON', { skip }, async () => {
  const m = await loadModel(join(dir, 'qwen2.gguf'), { threads: 1 });
  try {
    const client = createOpenAI(m);
    const schema = { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'array', items: { type: 'boolean' }, maxItems: 3 } }, required: ['a', 'b'], additionalProperties: false };
    for (let seed = 1; seed <= 5; seed++) {
      const r = await client.chat.completions.create({
        messages: MESSAGES, seed, max_tokens: 200,
        response_format: { type: 'json_schema', json_schema: { name: 'x', schema, strict: true } },
      });
      assert.equal(r.choices[0].finish_reason, 'stop');
      assert.ok(ajv.validate(schema, JSON.parse(r.choices[0].message.content)), r.choices[0].message.content);
    }
  } finally {
    m.dispose();
  }
});

test('tool_choice required / named: a well-formed call, parsed into tool_calls, streamed as deltas', { skip }, async () => {
  // The test models' context (256) is too short for Qwen's tool prompt: the calls run on the
  // ChatML model (no tool markers in its template: bare JSON calls); the Qwen template's format
  // is read without generating.
  const tools = await loadModel(join(dir, 'qwen2-tools.gguf'), { threads: 1 });
  assert.equal(await createOpenAI(tools).toolFormat(), 'hermes');
  tools.dispose();
  const m = await loadModel(join(dir, 'qwen2.gguf'), { threads: 1 });
  try {
    const client = createOpenAI(m);
    assert.equal(await client.toolFormat(), 'json');
    for (let seed = 1; seed <= 4; seed++) {
      const r = await client.chat.completions.create({ messages: MESSAGES, tools: [WEATHER], tool_choice: 'required', seed, max_tokens: 200 });
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
      assert.equal(c.message.tool_calls.length, 1);
      const call = c.message.tool_calls[0];
      assert.match(call.id, /^call_/);
      assert.equal(call.type, 'function');
      assert.equal(call.function.name, 'get_weather');
      assert.ok(ajv.validate(WEATHER.function.parameters, JSON.parse(call.function.arguments)), call.function.arguments);
    }
    const named = { type: 'function', function: { name: 'get_weather' } };
    const s = await client.chat.completions.create({ messages: MESSAGES, tools: [WEATHER], tool_choice: named, seed: 3, max_tokens: 200, stream: true });
    let name = '', args = '', id = '', finish = null;
    for await (const ch of s) {
      for (const tc of ch.choices[0]?.delta.tool_calls ?? []) {
        if (tc.id) id = tc.id;
        if (tc.function?.name) name += tc.function.name;
        args += tc.function?.arguments ?? '';
      }
      finish = ch.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(finish, 'tool_calls');
    assert.equal(name, 'get_weather');
    assert.match(id, /^call_/);
    assert.ok(ajv.validate(WEATHER.function.parameters, JSON.parse(args)));
    // The assistant's call and the tool's answer go back into the template as a conversation.
    const follow = await client.chat.completions.create({
      messages: [...MESSAGES, { role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name, arguments: args } }] },
        { role: 'tool', tool_call_id: id, content: '{"temp": 20}' }],
      tools: [WEATHER], max_tokens: 4, seed: 1,
    });
    assert.equal(follow.object, 'chat.completion');
  } finally {
    m.dispose();
  }
});

test('logprobs: the chosen token and the top alternatives, as float64 log-softmax of the logits', { skip }, async () => {
  const m = await loadModel(join(dir, 'qwen2.gguf'), { threads: 1 });
  try {
    const client = createOpenAI(m);
    const r = await client.chat.completions.create({ messages: MESSAGES, temperature: 0, max_tokens: 3, logprobs: true, top_logprobs: 5 });
    const lp = r.choices[0].logprobs.content;
    assert.equal(lp.length, r.usage.completion_tokens);
    // Reference: the first step's logits, from the same prompt fed by hand.
    const s = m.createSession();
    s.feed(m.tokenize(m.applyChatTemplate(MESSAGES), { special: true }));
    const logits = Array.from(s.logits());
    const mx = Math.max(...logits);
    const lse = mx + Math.log(logits.reduce((a, x) => a + Math.exp(x - mx), 0));
    const order = logits.map((x, i) => [x, i]).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
    assert.ok(Math.abs(lp[0].logprob - (order[0][0] - lse)) < 1e-4, `${lp[0].logprob} vs ${order[0][0] - lse}`);
    assert.equal(lp[0].top_logprobs.length, 5);
    for (let k = 0; k < 5; k++) {
      assert.ok(Math.abs(lp[0].top_logprobs[k].logprob - (order[k][0] - lse)) < 1e-4);
      assert.equal(lp[0].top_logprobs[k].token, m.detokenize([order[k][1]]));
    }
    assert.deepEqual(lp[0].bytes, Array.from(new TextEncoder().encode(lp[0].token)));
    // Under a grammar, tokens it rules out are not listed as alternatives.
    const g = await client.chat.completions.create({ messages: MESSAGES, max_tokens: 4, logprobs: true, top_logprobs: 5, qkv: { grammar: 'root ::= "ab" "c"?' } });
    for (const t of g.choices[0].logprobs.content) for (const a of t.top_logprobs) assert.ok(Number.isFinite(a.logprob) && 'abc'.includes(a.token), JSON.stringify(a));
    const c = await client.completions.create({ prompt: 'Hello', temperature: 0, max_tokens: 2, logprobs: 2 });
    assert.equal(c.object, 'text_completion');
    assert.equal(c.choices[0].logprobs.tokens.length, c.usage.completion_tokens);
    assert.equal(Object.keys(c.choices[0].logprobs.top_logprobs[0]).length <= 2, true);
  } finally {
    m.dispose();
  }
});

test('bad requests: unknown and ill-typed fields named in bad_argument errors', { skip }, async () => {
  const m = await loadModel(join(dir, 'qwen2.gguf'), { threads: 1 });
  try {
    const client = createOpenAI(m);
    const bad = async (req, re, code = 'bad_argument') => {
      await assert.rejects(client.chat.completions.create(req), (e) => e instanceof QkvError && e.code === code && re.test(e.message), JSON.stringify(req));
    };
    await bad({ messages: MESSAGES, temprature: 1 }, /unknown field 'temprature'/);
    await bad({ messages: MESSAGES, temperature: 3 }, /'temperature' must be a number in \[0, 2\]/);
    await bad({ messages: MESSAGES, max_tokens: 'many' }, /'max_tokens'/);
    await bad({ messages: MESSAGES, stop: ['a', 'b', 'c', 'd', 'e'] }, /'stop'/);
    await bad({ messages: MESSAGES, logit_bias: { x: 1 } }, /'logit_bias'/);
    await bad({ messages: MESSAGES, qkv: { top_k: -1 } }, /qkv: field 'top_k'/);
    await bad({ messages: MESSAGES, qkv: { topk: 1 } }, /qkv: unknown field 'topk'/);
    await bad({ messages: [] }, /messages must be a non-empty array/);
    await bad({ messages: [{ role: 'robot', content: 'x' }] }, /role/);
    await bad({ messages: [{ role: 'user', content: 'x', contnet: 'y' }] }, /messages\[0\]: unknown field 'contnet'/);
    await bad({ messages: MESSAGES, tools: [{ ...WEATHER, function: { ...WEATHER.function, paramters: {} } }] }, /tools\[0\].function: unknown field 'paramters'/);
    await bad({ messages: MESSAGES, response_format: { type: 'json_schema', json_schema: { name: 'n', shema: {} } } }, /response_format.json_schema: unknown field 'shema'/);
    await bad({ messages: MESSAGES, stream_options: { include_usge: true } }, /'stream_options'/);
    await bad({ messages: MESSAGES, tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'get_weather' }, force: 1 } }, /tool_choice: unknown field 'force'/);
    await bad({ messages: [{ role: 'user', content: 'x', audio: {} }] }, /messages\[0\]: field 'audio'/, 'unsupported');
    await bad({ messages: MESSAGES, response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'integer', minimum: 3, maximum: 2 } } } }, /minimum/);
    await bad({ messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }, /image_url/);
    // An image to a model loaded without an mmproj (images in chat: tests/js/vlm_wllama.test.mjs).
    await bad({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }] }, /without an mmproj/);
    await bad({ messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: {} }] }] }, /input_audio/, 'unsupported');
    await bad({ messages: MESSAGES, tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'nope' } } }, /'nope'/);
    await bad({ messages: MESSAGES, response_format: { type: 'yaml' } }, /response_format.type/);
    await bad({ messages: MESSAGES, top_logprobs: 2 }, /top_logprobs needs logprobs/);
    await assert.rejects(client.completions.create({ prompt: 5 }), /prompt must be a string/);
    await assert.rejects(client.embeddings.create({ input: [] }), /input must be/);
  } finally {
    m.dispose();
  }
});

test('abort: an AbortSignal stops a streamed generation; the next request runs', { skip }, async () => {
  const m = await loadModel(join(dir, 'qwen2.gguf'), { threads: 1 });
  try {
    const client = createOpenAI(m);
    const ac = new AbortController();
    // A fixed seed whose reply runs past 3 chunks (an unseeded one may end before the abort).
    const s = await client.chat.completions.create({ messages: MESSAGES, max_tokens: 200, seed: 1, stream: true }, { signal: ac.signal });
    let n = 0;
    await assert.rejects(async () => { for await (const _ of s) { if (++n === 3) ac.abort(); } }, (e) => e.code === 'aborted');
    const r = await client.chat.completions.create({ messages: MESSAGES, max_tokens: 2 });
    assert.equal(r.choices.length, 1);
  } finally {
    m.dispose();
  }
});

test('embeddings.create equals model.embed, float and base64', { skip }, async () => {
  const m = await loadModel(join(dir, 'bert.gguf'), { threads: 1 });
  try {
    const client = createOpenAI(m);
    const r = await client.embeddings.create({ input: ['a cat', 'a dog'], model: 'x' });
    const want = await m.embed(['a cat', 'a dog']);
    assert.equal(r.object, 'list');
    assert.deepEqual(r.data.map((d) => d.embedding), want.map((v) => Array.from(v)));
    const b = await client.embeddings.create({ input: 'a cat', encoding_format: 'base64' });
    const bytes = Buffer.from(b.data[0].embedding, 'base64');
    assert.deepEqual(Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4)), Array.from(want[0]));
    assert.ok(r.usage.prompt_tokens > 0);
  } finally {
    m.dispose();
  }
});

test('through qkv/worker the same requests give the same responses', { skip }, async () => {
  const w = await createWorker();
  const local = await loadModel(join(dir, 'qwen2.gguf'), { threads: 1 });
  try {
    const rm = await w.loadModel(join(dir, 'qwen2.gguf'), { threads: 1 });
    const req = { messages: MESSAGES, seed: 9, max_tokens: 10, logprobs: true, top_logprobs: 2 };
    const a = await createOpenAI(rm).chat.completions.create(req);
    const b = await createOpenAI(local).chat.completions.create(req);
    assert.deepEqual(a.choices, b.choices);
    assert.deepEqual(a.usage, b.usage);
    const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false };
    const j = await createOpenAI(rm).chat.completions.create({ messages: MESSAGES, seed: 2, max_tokens: 100, response_format: { type: 'json_schema', json_schema: { name: 's', schema } } });
    assert.ok(ajv.validate(schema, JSON.parse(j.choices[0].message.content)));
    await rm.dispose();
  } finally {
    local.dispose();
    await w.terminate();
  }
});

test('tool-call parsing per template family', () => {
  const args = '{"city":"Paris","unit":"c"}';
  const cases = [
    ['hermes', `Sure.<tool_call>\n{"name": "get_weather", "arguments": ${args}}\n</tool_call>`, 'Sure.'],
    ['llama3', `{"name": "get_weather", "parameters": ${args}}`, ''],
    ['llama3', `<|python_tag|>{"name": "get_weather", "parameters": ${args}}`, ''],
    ['mistral', `[TOOL_CALLS] [{"name": "get_weather", "arguments": ${args}}]`, ''],
    ['functionary', `>>>get_weather\n${args}`, ''],
    ['granite', `<|tool_call|>[{"name": "get_weather", "arguments": ${args}}]`, ''],
    ['deepseek', `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n\`\`\`json\n${args}\n\`\`\`<｜tool▁call▁end｜><｜tool▁calls▁end｜>`, ''],
    ['commandr', `Action: \`\`\`json\n[{"tool_name": "get_weather", "parameters": ${args}}]\n\`\`\``, ''],
    ['gptoss', `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>${args}<|call|>`, ''],
  ];
  for (const [format, text, content] of cases) {
    const r = parseToolCalls(text, format);
    assert.equal(r.toolCalls.length, 1, `${format}: ${text}`);
    assert.equal(r.toolCalls[0].name, 'get_weather', format);
    assert.deepEqual(JSON.parse(r.toolCalls[0].arguments), JSON.parse(args), format);
    assert.equal(r.content, content, format);
  }
  // Two calls; and text that is not a call stays content.
  const two = parseToolCalls(`<tool_call>{"name":"a","arguments":{}}</tool_call><tool_call>{"name":"b","arguments":{"x":1}}</tool_call>`, 'hermes');
  assert.deepEqual(two.toolCalls.map((c) => c.name), ['a', 'b']);
  assert.deepEqual(parseToolCalls('<tool_call>{not json</tool_call>', 'hermes').toolCalls, []);
  assert.equal(parseToolCalls('The answer is {1, 2}', 'llama3').content, 'The answer is {1, 2}');
  assert.equal(detectToolFormat('<|im_start|>system\n<tools>\n...</tools>'), 'hermes');
  assert.equal(detectToolFormat('[AVAILABLE_TOOLS] [...]'), 'mistral');
  assert.equal(detectToolFormat('<|start_header_id|>system<|end_header_id|>'), 'llama3');
});

// A stand-in model whose replies are scripted, to check what the client makes of a template
// family's tool-call text: content streamed without the call's markup, the call as OpenAI's deltas.
function scriptedModel(pieces, rendered, control = {}) {
  return {
    info: { chatFormat: 'chatml' },
    applyChatTemplate: async () => rendered,
    // Control tokens (control: {text: id}) print as nothing, as in qkv's detokenize.
    detokenize: async (ids) => (Object.values(control).includes(ids[0]) ? '' : `<${ids[0]}>`),
    tokenize: async (text) => (text in control ? [control[text]] : [1, 2]),
    createSession: async () => ({
      lastGeneration: null,
      async *chat() {
        for (const [i, text] of pieces.entries()) yield typeof text === 'number' ? { token: text, text: '' } : { token: i, text };
        this.lastGeneration = { promptTokens: 7, generatedTokens: pieces.length, finishReason: 'stop' };
      },
    }),
  };
}

test('auto tool calls: streamed content never shows the call markup; calls come as deltas', async () => {
  const pieces = ['Let me', ' check.', '<tool', '_call>\n{"name": "get_', 'weather", "arguments": {"city": "Oslo", "unit": "c"}}', '\n</tool_call>'];
  const client = createOpenAI(scriptedModel(pieces, '<|im_start|>system\n<tools>...</tools>'));
  assert.equal(await client.toolFormat(), 'hermes');
  const whole = await client.chat.completions.create({ messages: MESSAGES, tools: [WEATHER] });
  assert.equal(whole.choices[0].message.content, 'Let me check.');
  assert.equal(whole.choices[0].finish_reason, 'tool_calls');
  assert.deepEqual(JSON.parse(whole.choices[0].message.tool_calls[0].function.arguments), { city: 'Oslo', unit: 'c' });
  const stream = await client.chat.completions.create({ messages: MESSAGES, tools: [WEATHER], stream: true });
  let content = '', finish = null;
  const calls = [];
  for await (const c of stream) {
    const d = c.choices[0].delta;
    content += d.content ?? '';
    for (const t of d.tool_calls ?? []) {
      calls[t.index] ??= { id: '', name: '', arguments: '' };
      if (t.id) calls[t.index].id = t.id;
      calls[t.index].name += t.function?.name ?? '';
      calls[t.index].arguments += t.function?.arguments ?? '';
    }
    finish = c.choices[0].finish_reason ?? finish;
  }
  assert.equal(content, 'Let me check.');
  assert.equal(finish, 'tool_calls');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'get_weather');
  assert.deepEqual(JSON.parse(calls[0].arguments), { city: 'Oslo', unit: 'c' });
  // Without tools the same text is plain content, markup and all.
  const plain = await client.chat.completions.create({ messages: MESSAGES });
  assert.equal(plain.choices[0].message.content, pieces.join(''));
  assert.equal(plain.choices[0].finish_reason, 'stop');
  // A reply that only looks like the start of a marker is sent in full.
  const near = createOpenAI(scriptedModel(['a <tool', 'box> b'], '<tools></tools>'));
  let text = '';
  for await (const c of await near.chat.completions.create({ messages: MESSAGES, tools: [WEATHER], stream: true })) text += c.choices[0].delta.content ?? '';
  assert.equal(text, 'a <toolbox> b');
});

test('a marker that is a control token ([TOOL_CALLS]) is read from its id', async () => {
  const client = createOpenAI(scriptedModel([900, ' [{"name": "get_weather", "arguments": {"city": "Rome", "unit": "f"}}]'], '[AVAILABLE_TOOLS] [...]', { '[TOOL_CALLS]': 900 }));
  assert.equal(await client.toolFormat(), 'mistral');
  const r = await client.chat.completions.create({ messages: MESSAGES, tools: [WEATHER] });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(r.choices[0].message.content, null);
  assert.deepEqual(JSON.parse(r.choices[0].message.tool_calls[0].function.arguments), { city: 'Rome', unit: 'f' });
});

// Each family's call text, as a model writes it in small pieces: the client streams the call's
// id and name first, then its arguments in fragments while the reply is still being generated;
// the fragments join into the arguments of the non-streamed answer.
const OSLO = { city: 'Oslo', unit: 'c' };
const FAMILY_REPLIES = {
  hermes: ['<|im_start|>system\n<tools>...</tools>', 'Sure.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}\n</tool_call>'],
  llama3: ['<|start_header_id|>system<|end_header_id|>', '{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "c"}}'],
  mistral: ['[AVAILABLE_TOOLS] [...]', '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}]'],
  functionary: ['>>> namespace functions {}', '>>>get_weather\n{"city": "Oslo", "unit": "c"}'],
  granite: ['<|start_of_role|>system', '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}]'],
  deepseek: ['<｜tool▁calls▁begin｜>', '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Oslo", "unit": "c"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'],
  commandr: ['<|START_OF_TURN_TOKEN|>', 'Action: ```json\n[{"tool_name": "get_weather", "parameters": {"city": "Oslo", "unit": "c"}}]\n```'],
  gptoss: ['<|start|>system<|message|><|channel|>', '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo", "unit": "c"}<|call|>'],
};

test('streamed tool calls: id and name first, then the arguments in fragments as they are generated, per family', async () => {
  for (const [format, [rendered, reply]] of Object.entries(FAMILY_REPLIES)) {
    const pieces = reply.match(/[\s\S]{1,4}/gu);
    const model = scriptedModel(pieces, rendered);
    let produced = 0;
    const inner = model.createSession;
    model.createSession = async () => {
      const s = await inner();
      const chat = s.chat;
      s.chat = async function* (...a) { for await (const t of chat.apply(s, a)) { produced++; yield t; } };
      return s;
    };
    const client = createOpenAI(model);
    assert.equal(await client.toolFormat(), format);
    const whole = await client.chat.completions.create({ messages: MESSAGES, tools: [WEATHER] });
    assert.equal(whole.choices[0].finish_reason, 'tool_calls', format);
    assert.deepEqual(JSON.parse(whole.choices[0].message.tool_calls[0].function.arguments), OSLO, format);
    const deltas = [];
    let content = '', finish = null;
    produced = 0;
    for await (const c of await client.chat.completions.create({ messages: MESSAGES, tools: [WEATHER], stream: true })) {
      content += c.choices[0].delta.content ?? '';
      for (const t of c.choices[0].delta.tool_calls ?? []) deltas.push({ ...t, produced });
      finish = c.choices[0].finish_reason ?? finish;
    }
    assert.equal(finish, 'tool_calls', format);
    assert.equal(content, format === 'hermes' ? 'Sure.' : '', `${format}: content without the call's markup`);
    assert.ok(deltas.every((d) => d.index === 0), format);
    assert.match(deltas[0].id, /^call_/, `${format}: the first delta carries the id`);
    assert.equal(deltas[0].type, 'function');
    assert.deepEqual(deltas[0].function, { name: 'get_weather', arguments: '' }, `${format}: then the name, with no arguments yet`);
    assert.ok(deltas.slice(1).every((d) => d.id === undefined && d.function.name === undefined), format);
    const fragments = deltas.slice(1).map((d) => d.function.arguments);
    assert.ok(fragments.length >= 4, `${format}: arguments in ${fragments.length} fragments`);
    assert.ok(deltas[1].produced < pieces.length, `${format}: arguments streamed while the reply is generated`);
    assert.deepEqual(JSON.parse(fragments.join('')), OSLO, format);
  }
  // Two calls in one reply: indexes 0 and 1, each with its own id.
  const two = createOpenAI(scriptedModel('[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}, {"name": "get_weather", "arguments": {"city": "Rome", "unit": "f"}}]'.match(/[\s\S]{1,5}/g), '[AVAILABLE_TOOLS]'));
  const calls = [];
  for await (const c of await two.chat.completions.create({ messages: MESSAGES, tools: [WEATHER], stream: true })) {
    for (const t of c.choices[0].delta.tool_calls ?? []) {
      calls[t.index] ??= { id: t.id, args: '' };
      calls[t.index].args += t.function.arguments;
    }
  }
  assert.equal(calls.length, 2);
  assert.notEqual(calls[0].id, calls[1].id);
  assert.deepEqual(calls.map((c) => JSON.parse(c.args)), [OSLO, { city: 'Rome', unit: 'f' }]);
  // Arguments before the name cannot be streamed piecewise: the call comes whole at the end.
  const late = createOpenAI(scriptedModel('{"arguments": {"city": "Oslo", "unit": "c"}, "name": "get_weather"}'.match(/[\s\S]{1,5}/g), ''));
  const got = [];
  for await (const c of await late.chat.completions.create({ messages: MESSAGES, tools: [WEATHER], stream: true })) got.push(...(c.choices[0].delta.tool_calls ?? []));
  assert.equal(got.length, 2);
  assert.deepEqual(JSON.parse(got[1].function.arguments), OSLO);
});

test('forced calls in each family\'s own syntax: valid calls over seeds, written as the family writes them', { skip, timeout: 120000 }, async () => {
  const m = await loadModel(join(dir, 'qwen2.gguf'), { threads: 1 });
  const CLOCK = { type: 'function', function: { name: 'set_alarm', parameters: { type: 'object', properties: { hour: { type: 'integer', minimum: 0, maximum: 23 }, minute: { type: 'integer', minimum: 0, maximum: 59 } }, required: ['hour', 'minute'], additionalProperties: false } } };
  const opener = {
    hermes: '<tool_call>\n', llama3: '{', mistral: '[TOOL_CALLS][', functionary: '>>>', granite: '<|tool_call|>[',
    deepseek: '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>', commandr: 'Action: ```json\n[', gptoss: '<|channel|>commentary to=functions.', json: '{',
  };
  try {
    for (const format of Object.keys(opener)) {
      const client = createOpenAI(m, { toolFormat: format });
      assert.equal(await client.toolFormat(), format);
      for (let seed = 1; seed <= 3; seed++) {
        const choice = seed === 3 ? { type: 'function', function: { name: 'set_alarm' } } : 'required';
        const r = await client.chat.completions.create({ messages: MESSAGES, tools: [WEATHER, CLOCK], tool_choice: choice, seed, max_tokens: 200, temperature: 1 });
        const c = r.choices[0];
        const where = `${format} seed ${seed}`;
        assert.equal(c.finish_reason, 'tool_calls', `${where}: ${JSON.stringify(c)}`);
        assert.equal(c.message.tool_calls.length, 1, where);
        const { name, arguments: args } = c.message.tool_calls[0].function;
        const tool = [WEATHER, CLOCK].find((t) => t.function.name === name);
        assert.ok(tool, `${where}: called ${name}`);
        if (seed === 3) assert.equal(name, 'set_alarm', where);
        assert.ok(ajv.validate(tool.function.parameters, JSON.parse(args)), `${where}: ${args}`);
      }
      // The raw reply starts with the family's own call syntax, not a bare JSON object.
      const { forcedCall } = await import('../../src/js/tool-calls.js');
      const text = await m.complete('Call:', { ...forcedCall([WEATHER, CLOCK], format), maxTokens: 200, seed: 9 });
      assert.ok(text.startsWith(opener[format]), `${format}: ${JSON.stringify(text.slice(0, 60))}`);
      const parsed = parseToolCalls(text, format).toolCalls;
      assert.equal(parsed.length, 1, `${format}: ${text}`);
    }
  } finally {
    m.dispose();
  }
});
