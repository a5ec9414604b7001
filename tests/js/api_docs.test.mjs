// The API reference builds from types/*.d.ts without a warning (scripts/api-docs.sh, TypeDoc with
// warnings as errors), covers the public entry points, and a planted doc-comment fault fails it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { root } from './helpers.mjs';

const script = join(root, 'scripts', 'api-docs.sh');
const skip = existsSync(join(root, 'node_modules', 'typedoc')) ? false : 'typedoc not installed (npm install)';

function apiDocs(args, extraEnv = {}) {
  const env = { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0', ...extraEnv };
  delete env.NODE_TEST_CONTEXT;
  const r = spawnSync('bash', [script, ...args], { cwd: root, env, encoding: 'utf8', timeout: 300000 });
  return { status: r.status, output: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}

/** Scratch space inside the repository (build-docs/ is ignored), so TypeDoc resolves the same tsconfig. */
function scratch() {
  mkdirSync(join(root, 'build-docs'), { recursive: true });
  return mkdtempSync(join(root, 'build-docs', 'test-'));
}

test('scripts/api-docs.sh builds the reference of types/*.d.ts without a warning', { skip }, () => {
  const out = scratch();
  try {
    const r = apiDocs(['--out', out]);
    assert.equal(r.status, 0, `api-docs.sh failed:\n${r.output}`);
    assert.doesNotMatch(r.output, /\[(warning|error)\]/, `TypeDoc reported:\n${r.output}`);
    const pages = readdirSync(out, { recursive: true }).map(String);
    for (const name of ['loadModel', 'createWorker', 'createTrainer', 'quantize', 'QkvError']) {
      assert.ok(pages.some((p) => p.includes(`.${name}.html`)), `no page for ${name} in:\n${pages.join('\n')}`);
    }
    assert.match(readFileSync(join(out, 'index.html'), 'utf8'), /qkv/);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('a broken {@link} in a declaration file fails the build', { skip }, () => {
  const dir = scratch();
  try {
    const entry = join(dir, 'planted.d.ts');
    writeFileSync(entry, '/** Loads nothing; see {@link NoSuchDeclaration}. */\nexport declare function planted(): void;\n');
    const tsconfig = JSON.parse(readFileSync(join(root, 'tests', 'types', 'tsconfig.json'), 'utf8'));
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ ...tsconfig, files: ['planted.d.ts'] }));
    // The repository's options (warnings as errors, validation) with only the inputs swapped.
    const options = JSON.parse(readFileSync(join(root, 'typedoc.json'), 'utf8'));
    writeFileSync(join(dir, 'typedoc.json'), JSON.stringify({ ...options, entryPoints: [entry], tsconfig: join(dir, 'tsconfig.json'), out: join(dir, 'out') }));
    const r = apiDocs([], { QKV_TYPEDOC_OPTIONS: join(dir, 'typedoc.json') });
    assert.notEqual(r.status, 0, `a broken link passed:\n${r.output}`);
    assert.match(r.output, /NoSuchDeclaration/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
