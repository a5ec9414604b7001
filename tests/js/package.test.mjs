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
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { childEnv, installedPackage, sh } from './packed-package.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const consumerSources = join(root, 'tests', 'js', 'package');
const MODELS = resolve(root, '..', 'shared', 'models');
const REFERENCE = resolve(root, '..', 'shared', 'reference');
const FIXTURES = ['aidreams260K.bin', 'aidreams-tok512.bin', 'stories260K.bin', 'llama2-tokenizer.bin'].map((f) => join(MODELS, f));
const fixtureSkip = FIXTURES.every((f) => existsSync(f)) && existsSync(REFERENCE) ? false : `model fixtures missing under ${MODELS}`;
const TSC = join(root, 'node_modules', 'typescript', 'bin', 'tsc');

let work, tarball, consumer, plain;
/** Paths inside the tarball, without the leading 'package/'. */
let packed = [];
let timings = {};

before(() => {
  // Packed and installed once per content, shared with docs_examples.test.mjs (packed-package.mjs).
  ({ work, tarball, consumer, packed, timings } = installedPackage());
  for (const f of readdirSync(consumerSources)) {
    if (/\.(mjs|ts)$/.test(f)) copyFileSync(join(consumerSources, f), join(consumer, f));
  }
  // A project as `npm init -y` makes it (CommonJS by default), with the same tarball installed.
  plain = mkdtempSync(join(tmpdir(), 'qkv-plain-'));
  const init = sh('npm', ['init', '-y'], plain);
  assert.equal(init.status, 0, `npm init -y failed:\n${init.output}`);
  let plainInstall = sh('npm', ['install', tarball, '--no-audit', '--no-fund', '--offline'], plain);
  if (plainInstall.status !== 0) plainInstall = sh('npm', ['install', tarball, '--no-audit', '--no-fund'], plain);
  assert.equal(plainInstall.status, 0, `npm install of the tarball into the npm init -y project failed:\n${plainInstall.output}`);
});

after(() => { if (plain) rmSync(plain, { recursive: true, force: true }); });

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
  // A guard against a whitelist gone wide, not a budget: the JS modules and WGSL kernels number ~60 now.
  assert.ok(packed.length < 80, `${packed.length} files in the tarball: is the "files" whitelist too wide?`);
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

// ---------------------------------------------------------------------------------------------
// A fresh `npm init -y` project (no "type": "module"), and packing an unbuilt tree
// ---------------------------------------------------------------------------------------------

/** Runs a file of the npm init -y project with a time limit: a program that does not end fails. */
function runPlain(file, code) {
  writeFileSync(join(plain, file), code);
  const r = spawnSync(process.execPath, [file], { cwd: plain, env: childEnv(), encoding: 'utf8', timeout: 60000 });
  return { ...r, output: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}

const MODEL = JSON.stringify(join(MODELS, 'stories260K.bin'));
const TOKENIZER = JSON.stringify(join(MODELS, 'aidreams-tok512.bin'));

test('npm init -y project: the README examples run as written (ES modules: .mjs files)', { skip: fixtureSkip }, () => {
  // The README's Node example and its worker example; only the file names are the fixtures'.
  const node = runPlain('example.mjs', `import { loadModel } from 'qkv';

const model = await loadModel(${MODEL}, {
  tokenizer: ${TOKENIZER},
  onProgress: ({ loaded, total }) => console.log(\`\${loaded} / \${total} bytes\`),
});
for await (const { text } of model.generate('Once upon a time', { maxTokens: 100, temperature: 0.8, seed: 42 })) {
  process.stdout.write(text);
}
model.dispose();
`);
  assert.equal(node.status, 0, `the Node example failed or did not end:\n${node.output}`);
  assert.match(node.stdout, /\d+ \/ \d+ bytes\n[\s\S]{20,}/);
  const worker = runPlain('example-worker.mjs', `import { createWorker } from 'qkv/worker';
const worker = await createWorker();
const model = await worker.loadModel(${MODEL}, { tokenizer: ${TOKENIZER} });
for await (const { text } of model.generate('Once upon a time')) console.log(text);
`);
  assert.equal(worker.status, 0, `the worker example failed or did not end by itself:\n${worker.output}`);
  assert.ok(worker.stdout.trim().length > 0, 'the worker example printed nothing');
});

test("npm init -y project: require('qkv') from CommonJS works, or says to use import", { skip: fixtureSkip }, () => {
  const r = runPlain('example.js', `let qkv;
try {
  qkv = require('qkv');
} catch (e) {
  // Node without require(esm) (before 20.19 / 22.12): its message must point to import().
  console.log('require failed: ' + e.code + ' ' + e.message);
  process.exit(/import\\(\\)/.test(e.message) && e.code === 'ERR_REQUIRE_ESM' ? 0 : 1);
}
(async () => {
  const model = await qkv.loadModel(${MODEL}, { tokenizer: ${TOKENIZER}, threads: 1 });
  console.log('text: ' + await model.complete('Once upon a time', { maxTokens: 20, seed: 1 }));
  model.dispose();
})();
`);
  assert.equal(r.status, 0, r.output);
  assert.match(r.stdout, /^(text: .{10,}|require failed: ERR_REQUIRE_ESM .*)/m);
});

test('npm pack refuses a tree without the WASM build (prepack)', () => {
  const bare = mkdtempSync(join(tmpdir(), 'qkv-unbuilt-'));
  mkdirSync(join(bare, 'scripts'), { recursive: true });
  copyFileSync(join(root, 'package.json'), join(bare, 'package.json'));
  copyFileSync(join(root, 'scripts', 'check-dist.mjs'), join(bare, 'scripts', 'check-dist.mjs'));
  const r = sh('npm', ['pack', '--pack-destination', bare], bare);
  assert.notEqual(r.status, 0, `npm pack succeeded on a tree without dist/:\n${r.output}`);
  assert.match(r.output, /refusing to pack: the WASM build is incomplete .*dist\/qkv\.wasm/);
  assert.deepEqual(readdirSync(bare).filter((f) => f.endsWith('.tgz')), [], 'a tarball was written');
});
