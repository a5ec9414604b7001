// The PUBLISHED package works: `npm pack` the repository, install the tarball into a fresh
// consumer project (outside the repository), check what the tarball holds, then run the consumer
// tests of tests/js/package/ there. Those import 'qkv' by its package name, so they exercise the
// exports map, the files whitelist and the shipped WASM builds, never the repository's sources.
// Each tests/js/package/*.consumer.mjs runs as its own `node --test` process in the consumer
// project; a failure shows that file's failing subtests here.
//
// Run: node --test tests/js/package.test.mjs   (the consumer project stays in the temp folder,
// reused while the packed files are unchanged: tests/js/packed-package.mjs)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join, posix, resolve } from 'node:path';
import { before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { childEnv, installedPackage, sh } from './packed-package.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const consumerSources = join(root, 'tests', 'js', 'package');
const MODELS = resolve(root, '..', 'shared', 'models');
const REFERENCE = resolve(root, '..', 'shared', 'reference');
const FIXTURES = ['aidreams260K.bin', 'aidreams-tok512.bin', 'stories260K.bin', 'llama2-tokenizer.bin'].map((f) => join(MODELS, f));
const fixtureSkip = FIXTURES.every((f) => existsSync(f)) && existsSync(REFERENCE) ? false : `model fixtures missing under ${MODELS}`;
const TSC = join(root, 'node_modules', 'typescript', 'bin', 'tsc');

let consumer;
/** Paths inside the tarball, without the leading 'package/'. */
let packed = [];
let timings = {};

before(() => {
  // Packed and installed once per content, shared with docs_examples.test.mjs (packed-package.mjs).
  ({ consumer, packed, timings } = installedPackage());
  for (const f of readdirSync(consumerSources)) {
    if (/\.(mjs|ts)$/.test(f)) copyFileSync(join(consumerSources, f), join(consumer, f));
  }
});

// ---------------------------------------------------------------------------------------------
// What the tarball holds
// ---------------------------------------------------------------------------------------------

test('the tarball holds the WASM builds, the JS API, the CLI and the types', (t) => {
  t.diagnostic(`npm pack ${timings.pack?.toFixed(0)} ms, npm install ${timings.install?.toFixed(0)} ms, ${packed.length} files`);
  const required = ['package.json', 'dist/package.json', 'dist/qkv.mjs', 'dist/qkv.wasm', 'dist/qkv-mt.mjs', 'dist/qkv-mt.wasm',
    'dist/qkv-mt.worker.js', 'dist/qkv-relaxed.mjs', 'dist/qkv-relaxed.wasm', 'dist/qkv-mt-relaxed.mjs',
    'dist/qkv-mt-relaxed.wasm', 'dist/qkv-mt-relaxed.worker.js', 'bin/qkv.mjs', 'README.md'];
  for (const f of required) assert.ok(packed.includes(f), `${f} is missing from the tarball; it holds:\n${packed.join('\n')}`);
  const js = readdirSync(join(root, 'src', 'js')).filter((f) => /\.m?js$/.test(f));
  assert.ok(js.length >= 5);
  for (const f of js) assert.ok(packed.includes(`src/js/${f}`), `src/js/${f} is missing from the tarball`);
  assert.ok(packed.includes('types/index.d.ts'),
    'types/index.d.ts is missing from the tarball (package.json "types" points at it; is types/ written and listed in "files"?)');
});

test('the tarball holds no tests, build outputs, dependencies, C++ sources or model files', () => {
  const forbidden = [
    [/^tests?\//, 'tests'], [/^build[^/]*\//, 'a build folder'], [/(^|\/)\.deps\//, '.deps'], [/(^|\/)node_modules\//, 'node_modules'],
    [/\.(c|cc|cpp|cxx|h|hh|hpp|inl)$/, 'C/C++ sources'], [/^src\/(?!js\/|webgpu\/[^/]+\.wgsl$)/, 'engine sources'], [/(^|\/)CMakeLists\.txt$/, 'CMake files'],
    [/^(bindings|bench|scripts|models)\//, 'repository tooling'], [/\.bin$/, 'model files'], [/\.(o|a|so|wasm\.map)$/, 'object files'],
    [/(^|\/)\.git/, 'git metadata'],
  ];
  const bad = packed.flatMap((p) => forbidden.filter(([re]) => re.test(p)).map(([, what]) => `${p} (${what})`));
  assert.deepEqual(bad, [], `the tarball holds files it should not:\n${bad.join('\n')}`);
  assert.ok(packed.length < 60, `${packed.length} files in the tarball: is the "files" whitelist too wide?`);
});

test("every file named by package.json's main, types, exports and bin is in the tarball", () => {
  const pkg = JSON.parse(readFileSync(join(consumer, 'node_modules', 'qkv', 'package.json'), 'utf8'));
  const targets = new Set();
  const walk = (v) => {
    if (typeof v === 'string') targets.add(posix.normalize(v));
    else if (v && typeof v === 'object') Object.values(v).forEach(walk);
  };
  walk(pkg.main);
  walk(pkg.types);
  walk(pkg.exports);
  walk(pkg.bin);
  assert.ok(targets.size >= 5);
  const missing = [...targets].filter((p) => !packed.includes(p));
  assert.deepEqual(missing, [], `package.json names files the tarball lacks: ${missing.join(', ')}`);
  assert.deepEqual(Object.keys(pkg.dependencies ?? {}), [], 'the package has no runtime dependencies');
  assert.match(readFileSync(join(consumer, 'node_modules', 'qkv', 'bin', 'qkv.mjs'), 'utf8'), /^#!\/usr\/bin\/env node\n/);
});

test('every relative import in the shipped JS resolves to a shipped file', () => {
  const dir = join(consumer, 'node_modules', 'qkv');
  const broken = [];
  let checked = 0;
  for (const f of packed.filter((p) => /\.m?js$/.test(p) && !p.startsWith('dist/'))) {
    // Comments hold JSDoc type imports (import('../../types/index.js').X): only code counts.
    const text = readFileSync(join(dir, f), 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
    const specs = [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bnew URL\(\s*)['"](\.{1,2}\/[^'"$]+)['"]/g)].map((m) => m[1]);
    for (const s of specs) {
      checked++;
      const target = posix.normalize(posix.join(posix.dirname(f), s));
      if (!packed.includes(target)) broken.push(`${f}: ${s}`);
    }
  }
  assert.deepEqual(broken, [], `imports of files not in the tarball:\n${broken.join('\n')}`);
  assert.ok(checked >= 10, `only ${checked} relative imports found: is the scan broken?`);
});

// ---------------------------------------------------------------------------------------------
// The consumer project: each file of tests/js/package/ in its own node --test process
// ---------------------------------------------------------------------------------------------

// Named *.consumer.mjs, not *.test.mjs, so that `node --test tests/js/` does not run them in the
// repository itself (there 'qkv' would resolve to the working tree, and the fixtures are not passed).
const consumerTests = readdirSync(consumerSources).filter((f) => f.endsWith('.consumer.mjs')).sort();

for (const file of consumerTests) {
  test(`consumer: ${file}`, { skip: fixtureSkip, timeout: 120000 }, (t) => {
    const r = spawnSync(process.execPath, ['--test', '--test-reporter=spec', file], {
      cwd: consumer,
      env: childEnv({ QKV_TEST_MODELS: MODELS, QKV_TEST_REFERENCE: REFERENCE }),
      encoding: 'utf8',
      timeout: 110000,
      maxBuffer: 1 << 26,
    });
    const out = `${r.stdout ?? ''}${r.stderr ?? ''}`;
    const summary = out.split('\n').filter((l) => /^ℹ (tests|pass|fail|duration_ms) /.test(l)).join(', ').replace(/ℹ /g, '');
    t.diagnostic(summary || 'no summary');
    if (r.status !== 0) {
      // The inner spec reporter ends with a "failing tests" section: show it (or everything).
      const i = out.indexOf('✖ failing tests:');
      const detail = i >= 0 ? out.slice(i) : out;
      const passed = out.split('\n').filter((l) => /^✔ /.test(l));
      assert.fail(`${file} failed in the consumer project (status ${r.status}${r.signal ? `, signal ${r.signal}` : ''}; ` +
        `${summary}):\n${detail.slice(-12000)}\n-- passing: ${passed.length}`);
    }
  });
}

test('the published declarations type-check a consumer (tsc, types via the exports map)', {
  skip: !existsSync(TSC) && `no TypeScript at ${TSC} (npm install in the repository)`,
}, () => {
  writeFileSync(join(consumer, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext', strict: true, noEmit: true, lib: ['es2022', 'dom'], types: [] },
    files: ['typecheck.ts'],
  }));
  const r = sh(process.execPath, [TSC, '-p', join(consumer, 'tsconfig.json')], consumer);
  assert.equal(r.status, 0, `tsc failed on the consumer's typecheck.ts:\n${r.output}`);
});
