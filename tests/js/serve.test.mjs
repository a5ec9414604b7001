// qkv serve with the official `openai` npm client pointed at it on 127.0.0.1: chat (plain and
// streamed), JSON schema, tools, completions, embeddings, abort, bad requests, limits. The
// server's answers are checked against createOpenAI in process on the same model.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { request } from 'node:http';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import Ajv from 'ajv';
import OpenAI from 'openai';
import { loadModel } from '../../src/js/node.js';
import { createOpenAI } from '../../src/js/openai.js';
import { serve } from '../../src/js/serve.js';
import { models as sharedModels, root, wasmCli } from './helpers.mjs';

const maker = join(root, 'build', 'qkv_test_models');
const dir = join(root, 'test-artifacts', 'serve-models');
const skip = !existsSync(maker) && `${maker} is not built (scripts/build.sh native)`;
const ajv = new Ajv({ strict: false });
const MESSAGES = [{ role: 'user', content: 'Hello there' }];
let model, server, client, local;
const log = [];

before(async () => {
  if (skip) return;
  mkdirSync(dir, { recursive: true });
  const r = spawnSync(maker, [dir, sharedModels], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  model = await loadModel(join(dir, 'qwen2.gguf'), { threads: 1 });
  server = await serve(model, { port: 0, modelName: 'test-model', maxBodyBytes: 1 << 16, maxPending: 4, onLog: (e) => log.push(e) });
  client = new OpenAI({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });
  local = createOpenAI(await loadModel(join(dir, 'qwen2.gguf'), { threads: 1 }), { modelName: 'test-model' });
});
after(async () => { await server?.close(); model?.dispose(); });

const strip = (r) => { const { id, created, ...rest } = r; return rest; };

test('the openai client: models, chat, streamed chat, completions equal the in-process answers', { skip }, async () => {
  assert.equal(server.url.startsWith('http://127.0.0.1:'), true);
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), ['test-model']);
  const req = { model: 'test-model', messages: MESSAGES, seed: 4, max_tokens: 10, temperature: 0.8 };
  const r = await client.chat.completions.create(req);
  assert.deepEqual(strip(r), strip(await local.chat.completions.create(req)));
  const stream = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = '', usage = null, finish = null;
  for await (const c of stream) {
    text += c.choices[0]?.delta?.content ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
    usage = c.usage ?? usage;
  }
  assert.equal(text, r.choices[0].message.content);
  assert.equal(finish, r.choices[0].finish_reason);
  assert.deepEqual(usage, r.usage);
  const c = await client.completions.create({ model: 'test-model', prompt: 'Once', max_tokens: 5, seed: 1 });
  assert.equal(c.choices[0].text, (await local.completions.create({ prompt: 'Once', max_tokens: 5, seed: 1 })).choices[0].text);
});

test('the openai client: JSON schema output and forced tool calls', { skip }, async () => {
  const schema = { type: 'object', properties: { n: { type: 'integer' }, s: { type: 'string', maxLength: 8 } }, required: ['n', 's'], additionalProperties: false };
  for (let seed = 1; seed <= 3; seed++) {
    const r = await client.chat.completions.create({ model: 'x', messages: MESSAGES, seed, max_tokens: 150, response_format: { type: 'json_schema', json_schema: { name: 'o', schema, strict: true } } });
    assert.ok(ajv.validate(schema, JSON.parse(r.choices[0].message.content)), r.choices[0].message.content);
  }
  const tool = { type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string', maxLength: 10 } }, required: ['q'], additionalProperties: false } } };
  const r = await client.chat.completions.create({ model: 'x', messages: MESSAGES, tools: [tool], tool_choice: 'required', seed: 2, max_tokens: 150 });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(r.choices[0].message.tool_calls[0].function.name, 'lookup');
  assert.ok(ajv.validate(tool.function.parameters, JSON.parse(r.choices[0].message.tool_calls[0].function.arguments)));
  // Streamed tool-call deltas, reassembled the way SDK users do.
  const s = await client.chat.completions.create({ model: 'x', messages: MESSAGES, tools: [tool], tool_choice: 'required', seed: 2, max_tokens: 150, stream: true });
  let args = '', name = '';
  for await (const c of s) for (const t of c.choices[0]?.delta?.tool_calls ?? []) { name += t.function?.name ?? ''; args += t.function?.arguments ?? ''; }
  assert.equal(name, 'lookup');
  assert.equal(args, r.choices[0].message.tool_calls[0].function.arguments);
});

test('bad requests come back as OpenAI errors: 400 naming the field, 404, 413', { skip }, async () => {
  await assert.rejects(client.chat.completions.create({ model: 'x', messages: MESSAGES, temperature: 5 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /temperature/.test(e.message) && e.code === 'bad_argument');
  await assert.rejects(client.chat.completions.create({ model: 'x', messages: MESSAGES, frobnicate: 1 }),
    (e) => e.status === 400 && /unknown field 'frobnicate'/.test(e.message));
  await assert.rejects(client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x'.repeat(70000) }] }),
    (e) => e.status === 413);
  const raw = await fetch(`${server.url}/nothing`);
  assert.equal(raw.status, 404);
  assert.equal((await raw.json()).error.type, 'invalid_request_error');
  const notJson = await fetch(`${server.url}/chat/completions`, { method: 'POST', body: '{oops' });
  assert.equal(notJson.status, 400);
  assert.match((await notJson.json()).error.message, /not valid JSON/);
});

test('abort: a client that leaves mid-stream stops its generation and the server goes on', { skip }, async () => {
  // End-of-turn tokens forbidden and 16 choices, so that only the disconnect can end it early.
  const info = model.info;
  const logit_bias = Object.fromEntries([info.eosId, ...info.eogIds].map((t) => [String(t), -100]));
  const body = JSON.stringify({ model: 'x', messages: MESSAGES, n: 16, stream: true, logit_bias });
  const before = log.length;
  let chunks = 0;
  await new Promise((resolve, reject) => {
    const req = request(`${server.url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      res.on('data', () => { if (++chunks === 2) { req.destroy(); resolve(); } });
      res.on('end', () => reject(new Error('the whole response arrived before the disconnect')));
    });
    req.on('error', () => {});
    req.end(body);
  });
  while (log.length === before) await new Promise((r) => setTimeout(r, 20));
  assert.equal(log.at(-1).path, '/v1/chat/completions');
  assert.equal(log.at(-1).aborted, true, 'the server saw the client leave and stopped');
  // The KV cache is free for the next request.
  const r = await client.chat.completions.create({ model: 'x', messages: MESSAGES, max_tokens: 3, seed: 1 });
  assert.equal(r.choices.length, 1);
});

test('more requests than maxPending at once: the extra ones get 429, the others complete in turn', { skip }, async () => {
  // Four requests whose bodies are still arriving hold the four places (maxPending: 4).
  const body = JSON.stringify({ model: 'x', messages: MESSAGES, max_tokens: 5, seed: 3 });
  const held = Array.from({ length: 4 }, () => {
    let req;
    const done = new Promise((resolve, reject) => {
      req = request(`${server.url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
        let text = '';
        res.on('data', (d) => { text += d; });
        res.on('end', () => resolve({ status: res.statusCode, json: JSON.parse(text) }));
      });
      req.on('error', reject);
    });
    req.write(body.slice(0, 10));
    return { req, done };
  });
  await new Promise((r) => setTimeout(r, 200));  // let the server see their headers
  const busy = await fetch(`${server.url}/chat/completions`, { method: 'POST', body });
  assert.equal(busy.status, 429);
  assert.equal((await busy.json()).error.type, 'rate_limit_exceeded');
  for (const h of held) h.req.end(body.slice(10));
  const answers = await Promise.all(held.map((h) => h.done));
  // Queued, not interleaved: each answer is what the request gives alone.
  const alone = await local.chat.completions.create(JSON.parse(body));
  for (const a of answers) {
    assert.equal(a.status, 200);
    assert.equal(a.json.choices[0].message.content, alone.choices[0].message.content);
  }
});

test('embeddings through the server equal model.embed', { skip }, async () => {
  const enc = join(dir, 'encoders');
  mkdirSync(enc, { recursive: true });
  const r = spawnSync(maker, ['--encoders', enc], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const m = await loadModel(join(enc, 'bert.gguf'), { threads: 1 });
  const s = await serve(m, { port: 0 });
  try {
    const c = new OpenAI({ baseURL: s.url, apiKey: 'unused', maxRetries: 0 });
    const e = await c.embeddings.create({ model: 'qkv', input: ['hello world', 'a cat'], encoding_format: 'float' });
    const want = await m.embed(['hello world', 'a cat']);
    assert.deepEqual(e.data.map((d) => d.embedding), want.map((v) => Array.from(v)));
  } finally {
    await s.close();
    m.dispose();
  }
});

test('the CLI: qkv serve MODEL --port 0 listens on 127.0.0.1 and answers the client', { skip }, async () => {
  const p = spawn(process.execPath, [wasmCli, 'serve', join(dir, 'qwen2.gguf'), '--port', '0', '--threads', '1', '--name', 'cli-model', '--max-body', '2048']);
  try {
    const url = await new Promise((resolve, reject) => {
      let err = '';
      p.stderr.on('data', (b) => { err += b; const m = /on (http:\/\/\S+)/.exec(err); if (m) resolve(m[1]); });
      p.on('exit', (code) => reject(new Error(`serve exited ${code}: ${err}`)));
    });
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    const c = new OpenAI({ baseURL: url, apiKey: 'unused', maxRetries: 0 });
    assert.deepEqual((await c.models.list()).data.map((m) => m.id), ['cli-model']);
    const r = await c.chat.completions.create({ model: 'cli-model', messages: MESSAGES, max_tokens: 3 });
    assert.equal(r.object, 'chat.completion');
    await assert.rejects(c.chat.completions.create({ model: 'cli-model', messages: [{ role: 'user', content: 'x'.repeat(3000) }] }), { status: 413 });
  } finally {
    p.kill();
  }
  const bad = spawnSync(process.execPath, [wasmCli, 'serve', join(dir, 'qwen2.gguf'), '--max-pending', '0'], { encoding: 'utf8' });
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /--max-pending must be 1\.\.4096, got 0/);
});
