// model.chat(): the model's chat format rendered with its control tokens parsed, streamed like
// generate(), stopping at end-of-turn ids, reusing the session's cache across turns; bad
// messages are refused with bad_argument. Uses the random-weight GGUF models of
// build/qkv_test_models (their llama.cpp conformance is tests/js/wllama.test.mjs).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { loadModel, QkvError } from '../../src/js/node.js';
import { haveNative, models as sharedModels, root, runNative, runWasm } from './helpers.mjs';

const maker = join(root, 'build', 'qkv_test_models');
const dir = join(root, 'test-artifacts', 'chat-models');
const skip = !existsSync(maker) && `${maker} is not built (scripts/build.sh native)`;

before(() => {
  if (skip) return;
  mkdirSync(dir, { recursive: true });
  const r = spawnSync(maker, [dir, sharedModels], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
});

const MESSAGES = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello there' }];

test('chat() renders the ChatML template, parses its markers and streams like generate()', { skip }, async () => {
  const m = await loadModel(join(dir, 'qwen2.gguf'), { threads: 1 });
  try {
    assert.equal(m.info.chatFormat, 'chatml');
    assert.equal(m.info.chatFormatGuessed, false);
    assert.equal(m.info.tokenizer, 'bpe');
    assert.equal(m.info.addBos, false);
    const imEnd = m.tokenize('<|im_end|>', { special: true });
    assert.equal(imEnd.length, 1, 'the marker is one control token');
    assert.ok(m.info.eogIds.includes(imEnd[0]), '<|im_end|> ends a turn');
    assert.ok(m.tokenize('<|im_end|>').length > 1, 'without special parsing the marker is plain text');
    const opts = { maxTokens: 12, temperature: 0 };
    let chatText = '';
    for await (const { text } of m.chat(MESSAGES, opts)) chatText += text;
    const s = m.session.lastGeneration;
    const prompt = '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n';
    assert.equal(s.promptTokens, m.tokenize(prompt, { special: true }).length);
    // The same prompt fed by hand gives the same greedy continuation.
    const ref = m.createSession();
    ref.feed(m.tokenize(prompt, { special: true }));
    const ids = [];
    for (let i = 0; i < s.generatedTokens; i++) { const t = ref.sample({ temperature: 0 }); ids.push(t); ref.feed([t]); }
    assert.equal(chatText, m.detokenize(ids));
    // A follow-up turn extends the conversation: the cached prefix is reused.
    const more = [...MESSAGES, { role: 'assistant', content: chatText }, { role: 'user', content: 'More?' }];
    for await (const _ of m.chat(more, { maxTokens: 2, temperature: 0 })) { /* drain */ }
    assert.ok(m.session.lastGeneration.reusedTokens >= s.promptTokens, `reused ${m.session.lastGeneration.reusedTokens}`);
  } finally {
    m.dispose();
  }
});

test('chat() uses the Llama 3 format where the template says so, and refuses bad messages', { skip }, async () => {
  const m = await loadModel(join(dir, 'llama-bpe.gguf'), { threads: 1 });
  try {
    assert.equal(m.info.chatFormat, 'llama3');
    assert.equal(m.info.addBos, true);
    const bad = async (messages, re) => {
      await assert.rejects(async () => { for await (const _ of m.chat(messages)) { /* no output */ } },
        (e) => e instanceof QkvError && e.code === 'bad_argument' && re.test(e.message));
    };
    await bad([], /non-empty array/);
    await bad('hi', /non-empty array/);
    await bad([{ role: 'robot', content: 'x' }], /role/);
    await bad([{ role: 'user', content: 5 }], /content must be a string/);
    await bad([null], /must be an object/);
    let n = 0;
    for await (const _ of m.chat([{ role: 'user', content: 'Hi' }], { maxTokens: 3, temperature: 0 })) n++;
    assert.ok(n >= 1);
  } finally {
    m.dispose();
  }
});

test('chat() falls back to ChatML, saying so, for a model without a template', { skip }, async () => {
  const m = await loadModel(join(dir, 'gpt2.gguf'), { threads: 1 });
  const warn = console.warn, warnings = [];
  console.warn = (w) => warnings.push(w);
  try {
    assert.equal(m.info.chatFormatGuessed, true);
    for await (const _ of m.chat(MESSAGES, { maxTokens: 2, temperature: 0 })) { /* drain */ }
    for await (const _ of m.chat(MESSAGES, { maxTokens: 2, temperature: 0 })) { /* drain */ }
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], /ChatML/);
  } finally {
    console.warn = warn;
    m.dispose();
  }
});

test('the CLIs chat (--chat, --system) print the reply chat() streams', { skip }, async () => {
  const path = join(dir, 'qwen2.gguf');
  const m = await loadModel(path, { threads: 1 });
  // The CLIs print run.c's way: a lone byte that is not printable text is dropped, piece by piece.
  let want = '';
  try {
    for await (const { token } of m.chat(MESSAGES, { maxTokens: 30, temperature: 0 })) {
      if (token < 0) continue;
      const piece = m.detokenize([token]);
      if (piece === '\uFFFD' || /^[\x00-\x08\x0e-\x1f\x7f]$/.test(piece)) continue;
      want += piece;
    }
  } finally {
    m.dispose();
  }
  const args = ['run', path, '--system', 'Be brief.', '--chat', 'Hello there', '-t', '0', '-n', '200'];
  for (const [name, r] of [['native', haveNative && runNative(args)], ['wasm', runWasm(args)]]) {
    if (!r) continue;
    assert.equal(r.status, 0, `${name}: ${r.stderr}`);
    assert.equal(r.stdout.toString().replace(/\n$/, ''), want, `${name} CLI reply`);
  }
});

test('tools, template variables and message fields reach the chat template; applyChatTemplate shows the prompt', { skip }, async () => {
  const m = await loadModel(join(dir, 'qwen2-tools.gguf'), { threads: 1 });
  try {
    assert.equal(m.info.chatTemplate, 'jinja');
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather "now"', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
    const messages = [
      { role: 'system', content: 'You help.' },
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris', unit: '\u00b0C' } } }] },
      { role: 'tool', content: '{"temp": 21}', tool_call_id: 'c1' },
      { role: 'user', content: 'Thanks \ud83d\ude42' },
    ];
    // The template's text for this input, as tests/native/chat/test_jinja.cpp checks it against Jinja2
    // (kChatmlTools): tools as json.dumps writes them, tool_calls from the message's own field,
    // the tool turn as a user turn, and the thinking block from enable_thinking.
    const want = '<|im_start|>system\nYou help.\n\n# Tools\n\nYou may call these functions:\n<tools>\n' +
      '{"type": "function", "function": {"name": "get_weather", "description": "Weather \\"now\\"", "parameters": {"type": "object", ' +
      '"properties": {"city": {"type": "string"}}, "required": ["city"]}}}\n</tools>\n' +
      'Call one as <tool_call>{"name": ..., "arguments": ...}</tool_call>.<|im_end|>\n' +
      '<|im_start|>user\nWeather in Paris?<|im_end|>\n' +
      '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "\u00b0C"}}\n</tool_call><|im_end|>\n' +
      '<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response><|im_end|>\n' +
      '<|im_start|>user\nThanks \ud83d\ude42<|im_end|>\n<|im_start|>assistant\n';
    const opts = { tools, templateVars: { enable_thinking: false } };
    assert.equal(m.applyChatTemplate(messages, opts), want + '<think>\n\n</think>\n\n');
    assert.equal(m.applyChatTemplate(messages, { tools }), want);
    assert.equal(m.applyChatTemplate(messages, { tools, addGenerationPrompt: false }), want.slice(0, -'<|im_start|>assistant\n'.length));
    // Without tools: the plain system turn.
    assert.ok(m.applyChatTemplate(messages.slice(0, 2)).startsWith('<|im_start|>system\nYou help.<|im_end|>\n'));
    // chat() feeds what applyChatTemplate shows (control tokens parsed); a short conversation,
    // as the tools above take more tokens than this test model's context.
    const short = [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: '', tool_calls: [{ name: 'f', arguments: {} }] }];
    const prompt = m.applyChatTemplate(short, { templateVars: { enable_thinking: false } });
    assert.equal(prompt, '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call><|im_end|>\n' +
      '<|im_start|>assistant\n<think>\n\n</think>\n\n');
    let n = 0;
    for await (const _ of m.chat(short, { templateVars: { enable_thinking: false }, maxTokens: 2, temperature: 0 })) n++;
    assert.ok(n >= 1);
    assert.equal(m.session.lastGeneration.promptTokens, m.tokenize(prompt, { special: true }).length);
    // Bad input: a clear bad_argument, never a crash.
    const bad = (f, re) => assert.throws(f, (e) => e instanceof QkvError && e.code === 'bad_argument' && re.test(e.message));
    bad(() => m.applyChatTemplate(messages, { tools: {} }), /tools must be an array/);
    bad(() => m.applyChatTemplate(messages, { templateVars: [1] }), /templateVars must be a plain object/);
    bad(() => m.applyChatTemplate(messages, { templateVars: new Map([['a', 1]]) }), /templateVars must be a plain object/);
    bad(() => m.applyChatTemplate([{ role: 'user', content: null }]), /content must be a string/);
    // An assistant turn that only calls tools may have null content (OpenAI-style).
    assert.equal(m.applyChatTemplate([{ role: 'user', content: 'Hi' }, { role: 'assistant', content: null, tool_calls: [{ name: 'f', arguments: {} }] }],
      { addGenerationPrompt: false }),
    '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call><|im_end|>\n');
    bad(() => m.applyChatTemplate(messages, { templateVars: { messages: [] } }), /set by qkv itself/);
    bad(() => m.applyChatTemplate(messages, { tools, templateVars: { tools } }), /tools given twice/);
    const cyclic = {};
    cyclic.self = cyclic;
    bad(() => m.applyChatTemplate(messages, { templateVars: { cyclic } }), /JSON-serializable/);
    bad(() => m.applyChatTemplate(messages, { templateVars: { n: 10n } }), /JSON-serializable/);
    bad(() => m.applyChatTemplate([{ role: 'user', content: 'x', extra: 1n }]), /fields must be JSON-serializable/);
    bad(() => m.applyChatTemplate(messages, { addGenerationPrompt: 'yes' }), /addGenerationPrompt/);
    bad(() => m.applyChatTemplate(messages, null), /options must be an object/);
  } finally {
    m.dispose();
  }
  // A model whose template qkv renders by hand cannot take them: 'unsupported', said plainly.
  const g = await loadModel(join(dir, 'gpt2.gguf'), { threads: 1 });
  const warn = console.warn;
  console.warn = () => {};
  try {
    assert.throws(() => g.applyChatTemplate([{ role: 'user', content: 'x' }], { tools: [] }),
      (e) => e instanceof QkvError && e.code === 'unsupported' && /chat template/.test(e.message));
    assert.throws(() => g.applyChatTemplate([{ role: 'tool', content: 'x' }]), (e) => e.code === 'unsupported');
    assert.equal(g.applyChatTemplate([{ role: 'user', content: 'x' }]), '<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n');
  } finally {
    console.warn = warn;
    g.dispose();
  }
});
