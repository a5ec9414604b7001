// The shipped TypeScript declarations compile against typical use and reject misuse.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { root } from './helpers.mjs';

test('types/*.d.ts: tsc --noEmit over tests/types (usage compiles, misuse is rejected)', () => {
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', join(root, 'tests', 'types', 'tsconfig.json')], { encoding: 'utf8' });
  assert.equal(r.status, 0, `tsc failed:\n${r.stdout}${r.stderr}`);
});
