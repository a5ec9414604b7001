// The docs cannot go stale: every fenced js block of README.md and docs/*.md marked runnable (the
// line `<!-- test: node -->` just before it) runs against the packed-and-installed package, with
// the model names it uses replaced by the test fixtures; the README's Node example must print what
// the run.c-conformant CLI generates for the same prompt and sampling. Relative links of the docs
// must resolve to files and headings.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { models, root, runWasm } from './helpers.mjs';
import { childEnv, installedPackage } from './packed-package.mjs';

const MARKER = '<!-- test: node -->';
/** Model names the docs use -> the fixtures that stand in for them. */
const FIXTURES = {
  'stories15M.bin': join(models, 'stories260K.bin'),
  'tokenizer.bin': join(models, 'aidreams-tok512.bin'),
  'kjv-2m.gguf': join(root, 'models', 'kjv-2m.gguf'),
};
const missing = Object.values(FIXTURES).filter((f) => !existsSync(f));
const haveDist = existsSync(join(root, 'dist', 'qkv.wasm'));
const skip = missing.length ? `fixtures missing: ${missing.join(', ')}` : !haveDist && 'no WASM build in dist/ (scripts/build.sh wasm)';

const docFiles = ['README.md', 'ARCHITECTURE.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** The runnable blocks of a Markdown file: {file, line, code, heading}. */
function runnableBlocks(file) {
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  const blocks = [];
  let heading = '';
  for (let i = 0; i < lines.length; i++) {
    if (/^#+ /.test(lines[i])) heading = lines[i].replace(/^#+ /, '');
    if (lines[i].trim() !== MARKER) continue;
    assert.match(lines[i + 1] ?? '', /^```js\s*$/, `${file}:${i + 1}: ${MARKER} must be followed by a \`\`\`js block`);
    const end = lines.indexOf('```', i + 2);
    assert.ok(end > i, `${file}:${i + 2}: unclosed block`);
    blocks.push({ file, line: i + 2, code: lines.slice(i + 2, end).join('\n'), heading });
    i = end;
  }
  return blocks;
}

/** Replaces quoted model names (with any folder before them) by the fixtures' absolute paths. */
function withFixtures(code) {
  let out = code;
  for (const [name, path] of Object.entries(FIXTURES)) {
    out = out.replace(new RegExp(`(['"\`])(?:[^'"\`\\n]*/)?${name.replace('.', '\\.')}\\1`, 'g'), JSON.stringify(path));
  }
  return out;
}

const blocks = docFiles.flatMap(runnableBlocks);

test('the README has a runnable Node example, and docs/ has more', () => {
  const readme = blocks.filter((b) => b.file === 'README.md');
  assert.ok(readme.some((b) => b.heading === 'Node'), `no ${MARKER} block under the README's "## Node"`);
  assert.ok(blocks.length >= 4, `only ${blocks.length} runnable blocks in ${docFiles.join(', ')}`);
});

/** Runs one block in the consumer project; returns its stdout. */
function runBlock(block, t) {
  const { consumer } = installedPackage();
  const file = join(consumer, `docs-example-${block.file.replace(/\W/g, '_')}-${block.line}.mjs`);
  writeFileSync(file, withFixtures(block.code) + '\n');
  const r = spawnSync(process.execPath, [file], { cwd: consumer, env: childEnv(), encoding: 'utf8', timeout: 120000 });
  if (r.stderr) t.diagnostic(r.stderr.trim().split('\n').slice(0, 5).join(' | '));
  assert.equal(r.status, 0, `${block.file}:${block.line} (under "${block.heading}") failed (status ${r.status}${r.signal ? `, ${r.signal}` : ''}):\n` +
    `${r.stdout}\n${r.stderr}${r.error ? String(r.error) : ''}`);
  assert.match(r.stdout, /\S/, `${block.file}:${block.line} printed nothing`);
  return r.stdout;
}

for (const block of blocks) {
  test(`runs ${block.file}:${block.line} (${block.heading})`, { skip, timeout: 180000 }, (t) => {
    const stdout = runBlock(block, t);
    if (block.file !== 'README.md' || block.heading !== 'Node') return;
    // The README's example streams generate(); run.c's sampler with the same seed, temperature and
    // top-p (the CLI, held to run.c's outputs) must give the same text.
    const prompt = block.code.match(/generate\('([^']*)'/)?.[1];
    const temperature = block.code.match(/temperature: ([\d.]+)/)?.[1];
    const seed = block.code.match(/seed: (\d+)/)?.[1];
    assert.ok(prompt && temperature && seed, 'the README Node example changed shape: update this test\'s reading of it');
    const cli = runWasm(['run', FIXTURES['stories15M.bin'], '-z', FIXTURES['tokenizer.bin'], '-i', prompt, '-t', temperature, '-p', '0.9',
      '-s', seed, '-n', '0']);
    assert.equal(cli.status, 0, cli.stderr);
    // The CLI prints pieces through run.c's safe_printf (lone non-printable bytes dropped), JS decodes
    // UTF-8 (U+FFFD for invalid bytes): compare the printable ASCII both keep.
    const printable = (s) => s.replace(/[^\x20-\x7e\t\n\v\f\r]/g, '');
    const continuation = printable(cli.stdout.toString().slice(prompt.length));
    const text = printable(stdout.replace(/\n$/, ''));
    assert.ok(text.length > 0 && continuation.startsWith(text),
      `the README example printed\n${JSON.stringify(text)}\nbut the CLI continues the prompt with\n${JSON.stringify(continuation.slice(0, text.length + 40))}`);
  });
}

/** GitHub's heading anchors of a Markdown file. */
function anchors(path) {
  const out = new Set();
  let fence = false;
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (line.startsWith('```')) fence = !fence;
    const m = !fence && line.match(/^#+ (.*)/);
    if (m) out.add(m[1].trim().toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-'));
  }
  return out;
}

// Pages other branches write; links to them may dangle until those are merged.
const PENDING = new Set(['docs/webgpu.md', 'docs/webgpu-kernels.md', 'docs/node.md', 'docs/cli.md', 'docs/chat-templates.md',
  'docs/tokenizers.md', 'docs/openai.md']);

test('relative links of the docs resolve to files and headings', () => {
  const broken = [];
  for (const file of docFiles) {
    const text = readFileSync(join(root, file), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue;
      const [path, anchor] = target.split('#');
      const abs = path ? resolve(dirname(join(root, file)), path) : join(root, file);
      const rel = relative(root, abs);
      if (!existsSync(abs)) {
        if (!PENDING.has(rel)) broken.push(`${file}: ${target} (no such file)`);
        continue;
      }
      if (anchor && abs.endsWith('.md') && !anchors(abs).has(anchor)) broken.push(`${file}: ${target} (no such heading)`);
    }
  }
  assert.deepEqual(broken, []);
});
