// The published package, packed and installed once per content: `npm pack` the repository and
// install the tarball into a fresh consumer project outside the repository (in the temp folder,
// keyed by this checkout and a hash of the files the package ships), shared by the suites that
// test what users install (package.test.mjs, docs_examples.test.mjs).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { root } from './helpers.mjs';

/** The environment for child processes: never a node:test child context (it would change the reporter protocol). */
export function childEnv(extra = {}) {
  const env = { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0', ...extra };
  delete env.NODE_TEST_CONTEXT;
  delete env.NODE_OPTIONS;
  delete env.NODE_PATH;  // the consumer must resolve 'qkv' from its own node_modules only
  return env;
}

export function sh(cmd, args, cwd, timeout = 120000) {
  const r = spawnSync(cmd, args, { cwd, env: childEnv(), encoding: 'utf8', timeout, maxBuffer: 1 << 26 });
  return { ...r, output: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}

/** A hash of package.json and every file its "files" whitelist names (the tarball's inputs). */
function contentHash() {
  const h = createHash('sha256');
  const pkg = readFileSync(join(root, 'package.json'));
  h.update(pkg);
  const add = (p) => {
    if (!existsSync(p)) return;
    if (statSync(p).isDirectory()) {
      for (const f of readdirSync(p).sort()) add(join(p, f));
    } else {
      h.update(relative(root, p)).update('\0').update(readFileSync(p)).update('\0');
    }
  };
  for (const f of JSON.parse(pkg).files ?? []) add(join(root, f));
  return h.digest('hex').slice(0, 16);
}

let cached = null;

/**
 * Packs and installs the package unless this content was already installed (by this process or
 * an earlier one). Returns {work, tarball, consumer, packed (paths in the tarball, without
 * 'package/'), timings, reused}. Throws with npm's output when packing or installing fails.
 */
export function installedPackage() {
  if (cached) return cached;
  const prefix = `qkv-package-${createHash('sha256').update(root).digest('hex').slice(0, 8)}-`;
  const work = join(tmpdir(), prefix + contentHash());
  const ready = join(work, 'ready.json');
  if (existsSync(ready)) {
    cached = { ...JSON.parse(readFileSync(ready, 'utf8')), reused: true };
    return cached;
  }
  // Older contents of this checkout go; other checkouts' folders are theirs.
  for (const f of readdirSync(tmpdir())) {
    if (f.startsWith(prefix) && join(tmpdir(), f) !== work) rmSync(join(tmpdir(), f), { recursive: true, force: true });
  }
  const staging = mkdtempSync(join(tmpdir(), 'qkv-package-staging-'));
  const timings = {};
  try {
    let t0 = performance.now();
    const pack = sh('npm', ['pack', '--json', '--pack-destination', staging], root);
    if (pack.status !== 0) throw new Error(`npm pack failed:\n${pack.output}`);
    const [meta] = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('[')));
    const list = sh('tar', ['-tzf', join(staging, meta.filename)], staging);
    if (list.status !== 0) throw new Error(`tar -tzf failed:\n${list.output}`);
    const packed = list.stdout.split('\n').filter(Boolean).map((p) => p.replace(/^package\//, ''));
    timings.pack = performance.now() - t0;

    t0 = performance.now();
    const consumer = join(staging, 'consumer');
    mkdirSync(consumer);
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'qkv-consumer', version: '1.0.0', private: true, type: 'module' }, null, 2));
    const tarball = join(staging, meta.filename);
    let install = sh('npm', ['install', tarball, '--no-audit', '--no-fund', '--offline'], consumer);
    if (install.status !== 0) install = sh('npm', ['install', tarball, '--no-audit', '--no-fund'], consumer);
    if (install.status !== 0) throw new Error(`npm install of the tarball failed:\n${install.output}`);
    timings.install = performance.now() - t0;

    const info = { work, tarball: join(work, meta.filename), consumer: join(work, 'consumer'), packed, timings };
    writeFileSync(join(staging, 'ready.json'), JSON.stringify(info));
    try {
      renameSync(staging, work);
    } catch (e) {
      if (!existsSync(ready)) throw e;  // another process installed the same content first: use theirs
      rmSync(staging, { recursive: true, force: true });
    }
  } catch (e) {
    rmSync(staging, { recursive: true, force: true });
    throw e;
  }
  cached = { ...JSON.parse(readFileSync(ready, 'utf8')), reused: false };
  return cached;
}
