// Constrained decoding through the JS API: random-weight models (whose unconstrained output is
// noise) must produce JSON that Ajv validates against the schema, for many seeds and schemas and
// for BPE and SentencePiece vocabularies; GBNF output matches the same language written as a
// JS regular expression; the native CLI's --json-schema agrees with the WASM engine; bad
// grammars and schemas are bad_argument errors naming the problem.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import Ajv from 'ajv';
import { loadModel, QkvError } from '../../src/js/node.js';
import { haveNative, models as sharedModels, root, runNative, runWasm } from './helpers.mjs';

const maker = join(root, 'build', 'qkv_test_models');
const dir = join(root, 'test-artifacts', 'grammar-models');
const skip = !existsSync(maker) && `${maker} is not built (scripts/build.sh native)`;

before(() => {
  if (skip) return;
  mkdirSync(dir, { recursive: true });
  const r = spawnSync(maker, [dir, sharedModels], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
});

// Bounded schemas (string lengths, item counts), so that every generation ends within maxTokens.
const SCHEMAS = [
  {
    type: 'object',
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 12 },
      age: { type: 'integer' },
      ok: { type: 'boolean' },
      tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, maxItems: 3 },
    },
    required: ['name', 'age'],
    additionalProperties: false,
  },
  { type: 'array', items: { type: 'number' }, minItems: 1, maxItems: 4 },
  {
    $defs: { point: { type: 'object', properties: { x: { type: 'integer' }, y: { type: 'integer' } }, required: ['x', 'y'], additionalProperties: false } },
    type: 'object',
    properties: {
      kind: { const: 'line' },
      from: { $ref: '#/$defs/point' },
      label: { anyOf: [{ type: 'null' }, { type: 'string', maxLength: 6 }] },
    },
    required: ['kind', 'from', 'label'],
    additionalProperties: false,
  },
  { type: 'string', pattern: '^[A-Z]{2}-[0-9]{3}$' },
  { type: 'string', format: 'date' },
  { enum: ['red', 'green', 42, null, { deep: [1, 'x'] }] },
  // Integer ranges, enforced exactly (random weights would write any integer).
  {
    type: 'object',
    properties: {
      hour: { type: 'integer', minimum: 0, maximum: 23 },
      delta: { type: 'integer', minimum: -40, exclusiveMaximum: 7 },
      year: { type: 'integer', minimum: 1900, maximum: 2100 },
      big: { type: 'integer', exclusiveMinimum: 99999 },
      neg: { type: 'integer', maximum: -1000 },
    },
    required: ['hour', 'delta', 'year', 'big', 'neg'],
    additionalProperties: false,
  },
];
const ajv = new Ajv({ strict: false });

for (const file of ['qwen2.gguf', 'llama-spm.gguf', 'gpt2.gguf']) {
  test(`JSON Schema output is always valid (${file}, ${SCHEMAS.length} schemas x 8 seeds)`, { skip }, async () => {
    const m = await loadModel(join(dir, file), { threads: 1 });
    try {
      for (const [k, schema] of SCHEMAS.entries()) {
        const validate = ajv.compile(schema);
        for (let seed = 1; seed <= 8; seed++) {
          const out = await m.complete('Data:', { jsonSchema: schema, seed, temperature: 1, topP: 1, maxTokens: 400 });
          assert.equal(m.session.lastGeneration.finishReason, 'stop', `schema ${k} seed ${seed}: ended by ${m.session.lastGeneration.finishReason}: ${out}`);
          let value;
          assert.doesNotThrow(() => { value = JSON.parse(out); }, `schema ${k} seed ${seed}: not JSON: ${JSON.stringify(out)}`);
          assert.ok(validate(value), `schema ${k} seed ${seed}: ${JSON.stringify(out)} fails: ${ajv.errorsText(validate.errors)}`);
        }
      }
      // Unconstrained, the same model does not write valid JSON: the grammar is what makes it so.
      let valid = 0;
      for (let seed = 1; seed <= 8; seed++) {
        const out = await m.complete('Data:', { seed, temperature: 1, topP: 1, maxTokens: 40 });
        try { if (ajv.validate(SCHEMAS[0], JSON.parse(out))) valid++; } catch { /* not JSON */ }
      }
      assert.equal(valid, 0);
    } finally {
      m.dispose();
    }
  });
}

test('GBNF output is in the grammar\'s language, greedy and sampled, in chat too', { skip }, async () => {
  const m = await loadModel(join(dir, 'qwen2.gguf'), { threads: 1 });
  try {
    const grammar = 'root ::= greeting " " name ("!" | "?"){1,3}\n' +
      'greeting ::= "hi" | "hello" | "hey"  # a comment\n' +
      'name ::= [A-Z] [a-z\\u00e9]{2,7}\n';
    const re = /^(hi|hello|hey) [A-Z][a-zé]{2,7}[!?]{1,3}$/u;
    for (let seed = 1; seed <= 10; seed++) {
      const out = await m.complete('x', { grammar, seed, temperature: seed === 1 ? 0 : 1.5, topP: 1, maxTokens: 60 });
      assert.match(out, re, `seed ${seed}`);
      let chat = '';
      for await (const t of m.chat([{ role: 'user', content: 'hi' }], { grammar, seed, temperature: 1, maxTokens: 60 })) chat += t.text;
      assert.match(chat, re, `chat seed ${seed}`);
    }
  } finally {
    m.dispose();
  }
});

test('grammar and jsonSchema together: the schema is the rule `schema` the grammar places', { skip }, async () => {
  const m = await loadModel(join(dir, 'qwen2.gguf'), { threads: 1 });
  try {
    const schema = SCHEMAS[2];
    const validate = ajv.compile(schema);
    for (let seed = 1; seed <= 6; seed++) {
      const out = await m.complete('x', { grammar: 'root ::= "<tool_call>\n" schema "\n</tool_call>"', jsonSchema: schema, seed, temperature: 1, maxTokens: 300 });
      const mm = /^<tool_call>\n([\s\S]*)\n<\/tool_call>$/.exec(out);
      assert.ok(mm, JSON.stringify(out));
      assert.ok(validate(JSON.parse(mm[1])), mm[1]);
    }
  } finally {
    m.dispose();
  }
});

test('the CLIs take --json-schema and --grammar; native and WASM agree', { skip: skip || (!haveNative && 'native CLI not built') }, () => {
  const schemaFile = join(dir, 'schema.json');
  writeFileSync(schemaFile, JSON.stringify(SCHEMAS[0]));
  const args = ['run', join(dir, 'llama-bpe.gguf'), '-n', '300', '-s', '7', '-t', '1', '-i', 'Hi', '--json-schema', schemaFile, '--threads', '1'];
  const n = runNative(args), w = runWasm(args);
  assert.equal(n.status, 0, n.stderr);
  assert.equal(w.status, 0, w.stderr);
  assert.equal(w.stdout.toString(), n.stdout.toString());
  const text = n.stdout.toString().trim();
  assert.ok(text.startsWith('Hi'));
  assert.ok(ajv.validate(SCHEMAS[0], JSON.parse(text.slice(2))), text);
  const bad = join(dir, 'bad.gbnf');
  writeFileSync(bad, 'root ::= "a" undefined-rule\n');
  const e = runNative(['run', join(dir, 'llama-bpe.gguf'), '-i', 'Hi', '--grammar', bad]);
  assert.notEqual(e.status, 0);
  assert.match(e.stderr, /bad_argument.*line 1, column 14.*undefined-rule/);
  assert.equal(runWasm(['run', join(dir, 'llama-bpe.gguf'), '-i', 'Hi', '--grammar', bad]).stderr, e.stderr);
  for (const path of [join(dir, 'missing.gbnf'), dir]) {
    const a = runNative(['run', join(dir, 'llama-bpe.gguf'), '-i', 'Hi', '--json-schema', path]);
    const b = runWasm(['run', join(dir, 'llama-bpe.gguf'), '-i', 'Hi', '--json-schema', path]);
    assert.match(a.stderr, /^qkv: error \[io\]/);
    assert.equal(b.stderr, a.stderr);
  }
});

test('bad grammars, schemas and option types are bad_argument errors naming the problem', { skip }, async () => {
  const m = await loadModel(join(dir, 'qwen2.gguf'), { threads: 1 });
  try {
    const bad = async (opts, re) => {
      await assert.rejects(m.complete('x', { maxTokens: 3, ...opts }),
        (e) => e instanceof QkvError && e.code === 'bad_argument' && re.test(e.message), JSON.stringify(opts));
    };
    await bad({ grammar: 'root ::= "a" | (' }, /line 1, column 16.*unclosed/);
    await bad({ grammar: 'root ::= x\nx ::= root "a"' }, /left-recursive/);
    await bad({ grammar: 'start ::= "a"' }, /root/);
    await bad({ grammar: 42 }, /grammar must be a non-empty string/);
    await bad({ grammar: '' }, /grammar must be a non-empty string/);
    await bad({ jsonSchema: 'nope' }, /invalid JSON/);
    await bad({ jsonSchema: { type: 'strng' } }, /unknown type 'strng'/);
    await bad({ jsonSchema: { $ref: '#/$defs/none' } }, /does not resolve/);
    await bad({ jsonSchema: null }, /jsonSchema must be a JSON Schema/);
    await bad({ jsonSchema: {}, grammar: 'root ::= "a"\nschema ::= "b"' }, /defined twice/);
    // The model is still usable after the errors.
    assert.equal(typeof await m.complete('x', { maxTokens: 2, grammar: 'root ::= "ab"' }), 'string');
  } finally {
    m.dispose();
  }
});
