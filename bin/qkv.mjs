#!/usr/bin/env node
// The qkv command on the WASM engine: same commands, flags and stdout bytes as the native CLI.
import { closeSync, createReadStream, existsSync, openSync, readFileSync, statSync, writeSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { isHfCheckpoint, modelParts, partName, readParts, readSource } from '../src/js/source.js';
import { listDir, notCheckpoint } from '../src/js/checkpoint-dir.js';
import { MAX_WASM_THREADS, hardwareThreads, loadWasmModule, toHeapBuffer } from '../src/js/wasm-node.mjs';

const VERSION = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

function usage(mod, out) {
  out.write(`qkv ${VERSION}: a Transformer inference engine (WebAssembly build)\n\nCommands:\n` +
    '  qkv run MODEL [options]          generate text (llama2.c run.c flags)\n' +
    '  qkv info MODEL [-z TOK]          model architecture and sizes, as JSON\n' +
    '  qkv tokenize MODEL [-z TOK] TEXT token ids and pieces of TEXT, one per line\n' +
    '  qkv logits MODEL -z TOK -i TEXT -o OUT.f32   write the prompt\'s logits\n' +
    '  qkv perplexity MODEL FILE [-z TOK] [--ctx N] [--threads N]   perplexity on a text\n' +
    '  qkv quantize IN OUT.gguf --type TYPE [-z TOK.bin] [--text FILE] [--ctx N] [--threads N] [--allow-requantize]\n' +
    `                                   TYPE: ${mod.qtypeNames()}\n` +
    '  qkv embed MODEL TEXT... [--pooling mean|cls|last] [--no-normalize] [--truncate] [--threads N]\n' +
    '                                   one JSON array (the text\'s embedding) per line\n' +
    '  qkv embed-image MMPROJ IMAGE... [--pooling cls|mean] [--no-normalize] [--no-project]\n' +
    '                 [--size N] [--resize crop|squash] [--threads N]\n' +
    '                                   an image encoder (llama.cpp mmproj GGUF) on PNG, JPEG or\n' +
    '                                   PPM/PGM images (told by content): one JSON array per line\n' +
    '  qkv classify-image MODEL IMAGE... [--top N] [--size N] [--resize crop|squash] [--threads N]\n' +
    '                                   an image classifier (clip GGUF with v.head.*) on PNG, JPEG or\n' +
    '                                   PPM/PGM images: one JSON array of the N likeliest {index, label, probability}\n' +
    '  qkv serve MODEL [--port 8080] [--host 127.0.0.1] [--name ID] [-z TOK] [--mmproj MMPROJ] [--threads N] [--ctx N] [--max-body BYTES] [--max-pending N]\n' +
    '                                   an OpenAI-compatible HTTP server (/v1/chat/completions, ...;\n' +
    '                                   with --mmproj, image_url parts in chat messages)\n' +
    '  qkv --version                    print the version\n\n' + mod.runUsage());
}

// A model path: the first file of a split GGUF model (NAME-00001-of-0000N.gguf) brings the others;
// a directory is a Hugging Face checkpoint, its files read with their names.
async function readModelIntoHeap(mod, path, read = (p) => readIntoHeap(mod, p)) {
  const files = (await checkpointFiles(path)) ?? modelParts(path);
  const hf = isHfCheckpoint(files);
  return readParts(files, async (p) => {
    const buf = await read(p, files);
    if (hf) buf.setName(partName(p));
    return buf;
  });
}

// listDir in the native CLI's words (without the library's hint), so both CLIs print the same line.
function checkpointFiles(path) {
  return listDir(path).catch(() => { throw Object.assign(new Error(notCheckpoint(path)), { code: 'io' }); });
}

// Reads a file into the WASM heap; file-system failures become io errors naming the path.
async function readIntoHeap(mod, path) {
  try {
    return await toHeapBuffer(mod, path);
  } catch (e) {
    if (typeof e?.code === 'string' && /^E[A-Z]+$/.test(e.code)) {
      // The native CLI's wording (strerror), so both CLIs print the same line.
      const text = { EISDIR: `cannot read ${path}: not a regular file`,
        ENOENT: `cannot open ${path}: No such file or directory`,
        EACCES: `cannot open ${path}: Permission denied` }[e.code] ?? `cannot open ${path}: ${e.message}`;
      const err = new Error(text);
      err.code = 'io';
      throw err;
    }
    throw e;
  }
}

// `qkv info MODEL [-z TOK]` and `qkv tokenize MODEL [-z TOK] TEXT`: the native command's code
// (src/cli/inspect.h) in WASM, so both print the same bytes.
async function inspect(mod, cmd, argv) {
  let modelBuf, tokBuf;
  try {
    const a = mod.inspectParseArgs(cmd, argv);
    modelBuf = await readModelIntoHeap(mod, a.model);
    // info shows a llama2.c model without its tokenizer too; tokenize needs it.
    if (mod.inspectNeedsTokenizer(modelBuf) && (cmd === 'tokenize' || existsSync(a.tokenizer)))
      tokBuf = await readIntoHeap(mod, a.tokenizer);
    process.stdout.write(mod.inspect(cmd, modelBuf, tokBuf ?? null, a.text));
    return 0;
  } catch (e) {
    if (e && typeof e.code === 'string' && !/^E[A-Z]+$/.test(e.code)) return fail(e.code, e.message);
    return fail('internal', e && e.stack ? e.stack : String(e));
  } finally {
    modelBuf?.delete(); tokBuf?.delete();
  }
}

// `qkv perplexity MODEL FILE [-z TOK] [--ctx N] [--threads N]`: the native command's windows
// and output, through the JS API (all-logits feeds of 64 tokens, log-softmax in float64).
async function perplexity(mod, argv) {
  const { loadModel } = await import('../src/js/node.js');
  const [model, file] = argv;
  if (!model || !file || model.startsWith('-') || file.startsWith('-'))
    return fail('bad_argument', 'usage: qkv perplexity MODEL FILE [-z TOKENIZER] [--ctx N] [--threads N]');
  let tok = 'tokenizer.bin', ctx = 0, threads = 'auto';
  const int = (flag, v, lo, hi) => {
    const n = Number(v);
    if (!/^[0-9]+$/.test(v ?? '') || n < lo || n > hi) throw Object.assign(new Error(`${flag} must be ${lo}..${hi}, got ${v}`), { code: 'bad_argument' });
    return n;
  };
  let m, s;
  try {
    const known = ['-z', '--ctx', '--threads'];
    for (let i = 2; i < argv.length; i += 2) {
      const [f, v] = [argv[i], argv[i + 1]];
      if (!known.includes(f)) throw Object.assign(new Error(mod.unknownOptionMessage(f, known)), { code: 'bad_argument' });
      if (v === undefined) throw Object.assign(new Error(`option ${f} needs a value`), { code: 'bad_argument' });
      if (f === '-z') tok = v;
      else if (f === '--ctx') ctx = int(f, v, 1, 1 << 20);
      else threads = int(f, v, 1, 256);
    }
    let text;
    try {
      text = (await import('node:fs')).readFileSync(file, 'utf8');
    } catch (e) {
      throw Object.assign(new Error(`cannot open ${file}: ${e.code === 'ENOENT' ? 'No such file or directory' : e.message}`), { code: 'io' });
    }
    if (text.length === 0) throw Object.assign(new Error(`text file ${file} is empty`), { code: 'bad_argument' });
    m = await loadModel(model, { tokenizer: tok, threads });
    s = m.createSession({ contextLength: ctx });
    const window = ctx || m.info.contextLength;
    const ids = m.tokenize(text);
    if (ids.length < 2) throw Object.assign(new Error(`perplexity needs at least 2 tokens, the text has ${ids.length}`), { code: 'bad_argument' });
    if (window < 2) throw Object.assign(new Error(`perplexity window ${window} must be at least 2`), { code: 'bad_argument' });
    const windows = Math.ceil((ids.length - 1) / window);
    let nll = 0, predicted = 0, tokens = 0, w = 0;
    for (let start = 0; start + 1 < ids.length; start += window) {
      const len = Math.min(window, ids.length - start);
      let wnll = 0;
      s.truncate(0);
      for (let i = 0; i < len; i += 64) {
        const b = Math.min(64, len - i);
        s.feed(ids.slice(start + i, start + i + b), { allLogits: true });
        for (let j = 0; j < b && i + j + 1 < len; j++) {
          const l = s.logits(j);
          let mx = -Infinity, sum = 0;
          for (let k = 0; k < l.length; k++) if (l[k] > mx) mx = l[k];
          for (let k = 0; k < l.length; k++) sum += Math.exp(l[k] - mx);
          wnll += Math.log(sum) + mx - l[ids[start + i + j + 1]];
        }
      }
      nll += wnll; predicted += len - 1; tokens += len; w++;
      process.stderr.write(`[${w}/${windows}] ${len} tokens, window ppl ${Math.exp(wnll / (len - 1)).toFixed(4)}, ` +
        `running ppl ${Math.exp(nll / predicted).toFixed(4)}\n`);
    }
    process.stdout.write(`perplexity: ${Math.exp(nll / predicted).toFixed(4)} (${predicted} tokens predicted, ` +
      `${tokens} tokens in ${w} windows)\n`);
    return 0;
  } catch (e) {
    return fail(e.code ?? 'internal', e.message);
  } finally {
    s?.dispose();
    m?.dispose();
  }
}

// A float as C's printf("%.9g") writes it, so both CLIs print the same bytes.
function g9(v) {
  if (v === 0) return Object.is(v, -0) ? '-0' : '0';
  if (!Number.isFinite(v)) return Number.isNaN(v) ? 'nan' : v > 0 ? 'inf' : '-inf';
  const [m, e] = v.toExponential(8).split('e');
  const x = Number(e);
  const trim = (s) => (s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s);
  if (x < -4 || x >= 9) return `${trim(m)}e${x < 0 ? '-' : '+'}${String(Math.abs(x)).padStart(2, '0')}`;
  return trim(v.toFixed(8 - x));
}

// `qkv embed MODEL TEXT... [--pooling P] [--no-normalize] [--truncate] [--threads N]`: one JSON array per text.
// qkv serve MODEL: the OpenAI-compatible server on loopback by default; runs until killed.
async function serveCmd(argv) {
  const { loadModel } = await import('../src/js/node.js');
  const { serve } = await import('../src/js/serve.js');
  let model = null, port = 8080, host = '127.0.0.1', name, tokenizer, mmproj, threads = 'auto', ctx = 0, maxBodyBytes, maxPending;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (['--port', '--host', '--name', '-z', '--mmproj', '--threads', '--ctx', '--max-body', '--max-pending'].includes(a)) {
      if (i + 1 >= argv.length) return fail('bad_argument', `${a} needs a value`);
      const v = argv[++i];
      const int = (lo, hi) => {
        if (!/^[0-9]+$/.test(v) || Number(v) < lo || Number(v) > hi) throw Object.assign(new Error(`${a} must be ${lo}..${hi}, got ${v}`), { code: 'bad_argument' });
        return Number(v);
      };
      try {
        if (a === '--port') port = int(0, 65535);
        else if (a === '--host') host = v;
        else if (a === '--name') name = v;
        else if (a === '-z') tokenizer = v;
        else if (a === '--mmproj') mmproj = v;
        else if (a === '--threads') threads = int(1, 256);
        else if (a === '--max-body') maxBodyBytes = int(1024, 1 << 30);
        else if (a === '--max-pending') maxPending = int(1, 4096);
        else ctx = int(1, 1 << 20);
      } catch (e) { return fail(e.code, e.message); }
    } else if (model === null && !a.startsWith('-')) model = a;
    else return fail('bad_argument', `unexpected argument '${a}' (usage: qkv serve MODEL [--port N] [--host H])`);
  }
  if (model === null) return fail('bad_argument', 'serve needs MODEL (usage: qkv serve MODEL [--port N] [--host H])');
  try {
    const m = await loadModel(model, { threads, ...(tokenizer ? { tokenizer } : {}), ...(mmproj ? { mmproj } : {}) });
    const onLog = (e) => process.stderr.write(`qkv: ${e.method} ${e.path} ${e.status} ${e.ms} ms${e.aborted ? ' (client left)' : ''}\n`);
    const s = await serve(m, { port, host, modelName: name ?? basename(model), contextLength: ctx, onLog, ...(maxBodyBytes ? { maxBodyBytes } : {}), ...(maxPending ? { maxPending } : {}) });
    process.stderr.write(`qkv: serving ${basename(model)} as '${name ?? basename(model)}' on ${s.url}\n`);
    await new Promise(() => {});  // until the process is stopped
  } catch (e) {
    return fail(e.code ?? 'io', e.message);
  }
  return 0;
}

async function embed(mod, argv) {
  const { loadModel } = await import('../src/js/node.js');
  let model = null, pooling, normalize = true, truncate = false, threads = 'auto';
  const texts = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--no-normalize') normalize = false;
    else if (a === '--truncate') truncate = true;
    else if (a === '--pooling' || a === '--threads') {
      if (i + 1 >= argv.length) return fail('bad_argument', `${a} needs a value`);
      const v = argv[++i];
      if (a === '--pooling') pooling = v;
      else if (!/^[0-9]+$/.test(v) || Number(v) < 1 || Number(v) > 256) return fail('bad_argument', `--threads must be 1..256, got ${v}`);
      else threads = Number(v);
    } else if (a === '--') {
      texts.push(...argv.slice(i + 1));  // TEXTs that start with '-'
      break;
    } else if (a.startsWith('--') && a.length > 2) {  // a misspelt flag is not a text to embed
      return fail('bad_argument', mod.unknownOptionMessage(a, ['--pooling', '--no-normalize', '--truncate', '--threads']));
    } else if (model === null && !a.startsWith('-')) model = a;
    else texts.push(a);
  }
  if (model === null) return fail('bad_argument', 'embed needs MODEL (usage: qkv embed MODEL TEXT...)');
  if (texts.length === 0) return fail('bad_argument', 'embed needs at least one TEXT');
  let m;
  try {
    m = await loadModel(model, { threads });
    const vecs = await m.embed(texts, { pooling, normalize, truncate });
    for (const v of vecs) process.stdout.write(`[${Array.from(v, g9).join(',')}]\n`);
    return 0;
  } catch (e) {
    return fail(e.code ?? 'internal', e.message);
  } finally {
    m?.dispose();
  }
}

// `qkv embed-image MMPROJ IMAGE...`: PNG, JPEG or binary PPM/PGM images, told apart by content and
// decoded by the engine (as the native CLI does: Node has no image decoder built in), one JSON
// array per image.
async function embedImage(mod, argv) {
  const { loadModel } = await import('../src/js/node.js');
  const paths = [];
  let pooling, normalize = true, project = true, threads = 'auto', size, resize;
  const FLAGS = ['--pooling', '--no-normalize', '--no-project', '--size', '--resize', '--threads'];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--no-normalize') normalize = false;
    else if (a === '--no-project') project = false;
    else if (['--pooling', '--threads', '--size', '--resize'].includes(a)) {
      if (i + 1 >= argv.length) return fail('bad_argument', `${a} needs a value`);
      const v = argv[++i];
      const int = (lo, hi) => (/^[0-9]+$/.test(v) && Number(v) >= lo && Number(v) <= hi ? Number(v) : null);
      if (a === '--pooling') {
        if (v !== 'cls' && v !== 'mean') return fail('bad_argument', `--pooling must be cls or mean, got '${v}'`);
        pooling = v;
      } else if (a === '--resize') {
        if (v !== 'crop' && v !== 'squash') return fail('bad_argument', `resize mode '${v}' is not one of crop, squash`);
        resize = v;
      } else if (a === '--threads') {
        if ((threads = int(1, 256)) === null) return fail('bad_argument', `--threads must be an integer in 1..256, got '${v}'`);
      } else if ((size = int(1, 4096)) === null) return fail('bad_argument', `--size must be an integer in 1..4096, got '${v}'`);
    } else if (a.startsWith('-') && a.length > 1) return fail('bad_argument', mod.unknownOptionMessage(a, FLAGS));
    else paths.push(a);
  }
  if (paths.length === 0) return fail('bad_argument', 'embed-image needs MMPROJ (usage: qkv embed-image MMPROJ IMAGE...)');
  if (paths.length < 2) return fail('bad_argument', 'embed-image needs at least one IMAGE');
  let m;
  try {
    m = await loadModel(paths[0], { threads });
    for (const p of paths.slice(1)) {
      const img = await readImage(mod, p);
      const v = await m.embedImage(img, { pooling, normalize, project, resize, ...(size ? { size } : {}) });
      process.stdout.write(`[${Array.from(v, g9).join(',')}]\n`);
    }
    return 0;
  } catch (e) {
    return fail(e.code ?? 'internal', e.message);
  } finally {
    m?.dispose();
  }
}

// A binary PPM/PGM file as {data, width, height}; a corrupt one is a typed error naming the file.
async function readImage(mod, path) {
  const buf = await readPathIntoHeap(mod, path, 'the image');
  try {
    return mod.decodeImage(buf);
  } catch (e) {
    throw Object.assign(new Error(`${path}: ${e.message}`), { code: e.code ?? 'bad_argument' });
  } finally {
    buf.delete();
  }
}

// `qkv classify-image MODEL IMAGE... [--top N]`: one JSON array per image of the N likeliest
// classes {index, label, probability}, most likely first, as the native CLI prints them.
async function classifyImage(mod, argv) {
  const { loadModel } = await import('../src/js/node.js');
  const paths = [];
  let top = 5, threads = 'auto', size, resize;
  const FLAGS = ['--top', '--size', '--resize', '--threads'];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (FLAGS.includes(a)) {
      if (i + 1 >= argv.length) return fail('bad_argument', `${a} needs a value`);
      const v = argv[++i];
      const int = (lo, hi) => (/^[0-9]+$/.test(v) && Number(v) >= lo && Number(v) <= hi ? Number(v) : null);
      if (a === '--resize') {
        if (v !== 'crop' && v !== 'squash') return fail('bad_argument', `resize mode '${v}' is not one of crop, squash`);
        resize = v;
      } else if (a === '--top') {
        if ((top = int(1, 1 << 20)) === null) return fail('bad_argument', `--top must be an integer in 1..${1 << 20}, got '${v}'`);
      } else if (a === '--threads') {
        if ((threads = int(1, 256)) === null) return fail('bad_argument', `--threads must be an integer in 1..256, got '${v}'`);
      } else if ((size = int(1, 4096)) === null) return fail('bad_argument', `--size must be an integer in 1..4096, got '${v}'`);
    } else if (a.startsWith('-') && a.length > 1) return fail('bad_argument', mod.unknownOptionMessage(a, FLAGS));
    else paths.push(a);
  }
  if (paths.length === 0) return fail('bad_argument', 'classify-image needs MODEL (usage: qkv classify-image MODEL IMAGE...)');
  if (paths.length < 2) return fail('bad_argument', 'classify-image needs at least one IMAGE');
  let m;
  try {
    m = await loadModel(paths[0], { threads });
    if (!m.info.imageEncoder) return fail('unsupported', `${paths[0]} is not an image encoder`);
    if (m.info.labels.length === 0) return fail('unsupported', `${paths[0]} has no classifier head (v.head.weight, clip.vision.labels): use embed-image`);
    for (const p of paths.slice(1)) {
      const img = await readImage(mod, p);
      const classes = await m.classifyImage(img, { topK: top, resize, ...(size ? { size } : {}) });
      const items = classes.map((c) => `{"index":${c.index},"label":${JSON.stringify(c.label)},"probability":${g9(c.probability)}}`);
      process.stdout.write(`[${items.join(',')}]\n`);
    }
    return 0;
  } catch (e) {
    return fail(e.code ?? 'internal', e.message);
  } finally {
    m?.dispose();
  }
}

// A file streamed into the heap (no second copy of it outside), as the native CLI maps it.
async function readPathIntoHeap(mod, path, what) {
  let size;
  try {
    const st = statSync(path);
    if (!st.isFile()) throw Object.assign(new Error(`cannot read ${path}: not a regular file`), { code: 'io' });
    size = st.size;
  } catch (e) {
    if (e.code === 'io') throw e;
    throw Object.assign(new Error(`cannot open ${path}: ${e.code === 'ENOENT' ? 'No such file or directory' : e.message}`), { code: 'io' });
  }
  return readSource(mod, path, { what, openPath: async (p) => ({ size, chunks: createReadStream(p, { highWaterMark: 1 << 22 }) }) });
}

// `qkv quantize IN OUT --type T [-z TOK] [--text FILE] [--ctx N] [--threads N]`: the native
// command's policy, output file and report (the same bytes), through bindings/quantize_bindings.cpp.
async function quantize(argv) {
  let a, modelBuf, tokBuf, fd;
  try {
    const { mod, threaded } = await loadWasmModule({ threads: 'auto' });
    try {
      a = mod.quantizeParseArgs(argv);
    } catch (e) {
      return fail(e.code ?? 'internal', e.message);
    }
    let text = '';
    if (a.text) {  // read before the work, as natively
      try {
        text = readFileSync(a.text, 'utf8');
      } catch (e) {
        throw Object.assign(new Error(`cannot open ${a.text}: ${e.code === 'ENOENT' ? 'No such file or directory' : e.message}`), { code: 'io' });
      }
      if (text.length === 0) throw Object.assign(new Error(`text file ${a.text} is empty`), { code: 'bad_argument' });
    }
    // A split model given by its first file brings the others, as natively.
    modelBuf = await readModelIntoHeap(mod, a.model,
      (f, files) => readPathIntoHeap(mod, f, files.length > 1 ? `the model (${basename(f)})` : 'the model'));
    const head = modelBuf.view().subarray(0, 4);
    const gguf = head.length === 4 && String.fromCharCode(...head) === 'GGUF';
    if (!gguf && !(await checkpointFiles(a.model))) tokBuf = await readPathIntoHeap(mod, a.tokenizer, 'the tokenizer');
    try {
      fd = openSync(a.out, 'w');
    } catch (e) {
      throw Object.assign(new Error(`cannot write ${a.out}`), { code: 'io' });
    }
    const tty = process.stderr.isTTY;
    const report = mod.quantizeModel(modelBuf, tokBuf ?? null, basename(a.model), a.type, a.allowRequantize,
      (view) => { writeSync(fd, view); },
      tty ? (done, total) => process.stderr.write(`\rquantizing: ${(100 * done / total).toFixed(0)}%`) : null);
    if (tty) process.stderr.write('\n');
    closeSync(fd); fd = undefined;
    process.stdout.write(mod.quantizeSummary(argv, report));
    if (a.text) {
      const threads = threaded ? (a.threads || Math.min(hardwareThreads(), MAX_WASM_THREADS)) : 1;
      const measure = (buf, tok, label) => mod.perplexityOf(buf, tok, text, a.context, threads, (w, t) => {
        process.stderr.write(`${label}[${t.windows}] ${w.tokens} tokens, window ppl ${w.perplexity.toFixed(4)}, ` +
          `running ppl ${t.perplexity.toFixed(4)}\n`);
      });
      const before = measure(modelBuf, tokBuf ?? null, 'before ');
      modelBuf.delete(); modelBuf = null;  // one model in the heap at a time
      tokBuf?.delete(); tokBuf = null;
      modelBuf = await readPathIntoHeap(mod, a.out, 'the quantized model');
      const after = measure(modelBuf, null, 'after ');
      process.stdout.write(mod.perplexityChange(a.text, before, after));
    }
    return 0;
  } catch (e) {
    if (e && typeof e.code === 'string' && !/^E[A-Z]+$/.test(e.code)) return fail(e.code, e.message);
    return fail('internal', e && e.stack ? e.stack : String(e));
  } finally {
    if (fd !== undefined) closeSync(fd);
    modelBuf?.delete(); tokBuf?.delete();
  }
}

// A text file (--grammar, --json-schema); failures are io errors worded as the native CLI's.
function readText(path) {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    const text = { EISDIR: `cannot read ${path}: not a regular file`, ENOENT: `cannot open ${path}: No such file or directory`,
      EACCES: `cannot open ${path}: Permission denied` }[e.code] ?? `cannot open ${path}: ${e.message}`;
    throw Object.assign(new Error(text), { code: 'io' });
  }
}

function fail(code, message) {
  process.stderr.write(`qkv: error [${code}]: ${message}\n`);
  return 1;
}

async function main(argv) {
  // The single-thread module parses the flags (and prints usage); the engine build is chosen
  // from the parsed --threads.
  const { mod: parser } = await loadWasmModule({ threads: 1 });
  let mod = parser;
  const [cmd, ...rest] = argv;
  if (!cmd) { usage(mod, process.stderr); return 1; }
  if (cmd === '-h' || cmd === '--help' || cmd === 'help') { usage(mod, process.stdout); return 0; }
  if (cmd === '--version' || cmd === '-V' || cmd === 'version') {
    process.stdout.write(`qkv ${VERSION} (WebAssembly, engine ${mod.version()})\n`);
    return 0;
  }
  if (cmd === 'info' || cmd === 'tokenize') return inspect(mod, cmd, rest);
  if (cmd === 'perplexity') return perplexity(mod, rest);
  if (cmd === 'embed') return embed(mod, rest);
  if (cmd === 'embed-image') return embedImage(mod, rest);
  if (cmd === 'classify-image') return classifyImage(mod, rest);
  if (cmd === 'serve') return serveCmd(rest);
  if (cmd === 'quantize') return quantize(rest);
  if (cmd !== 'run' && cmd !== 'logits') {
    const commands = ['run', 'info', 'tokenize', 'logits', 'perplexity', 'quantize', 'embed', 'embed-image', 'classify-image'];
    process.stderr.write(`qkv: unknown command '${cmd}'${mod.didYouMean(cmd, commands)}\n\n`);
    usage(mod, process.stderr);
    return 1;
  }
  let args, engine, modelBuf, tokBuf;
  try {
    args = parser.RunArgs.parse(rest);
    if (args.threads() !== 1) {
      ({ mod } = await loadWasmModule({ threads: 'auto' }));
      if (mod !== parser) { args.delete(); args = mod.RunArgs.parse(rest); }  // Embind objects stay in their module
    }
    // Same order as the native CLI: the model is read and validated before the tokenizer.
    modelBuf = await readModelIntoHeap(mod, args.modelPath());
    if (cmd === 'run' && mod.modelKind(modelBuf) === 'encdec') {  // t5: -i is the source, the target is printed
      engine = new mod.EncDecModel(modelBuf, args.threads());
      modelBuf.delete(); modelBuf = null;
      const st = engine.run(rest, (piece) => process.stdout.write(Buffer.from(piece)));
      process.stdout.write('\n');
      const info = engine.info();
      const pre = st.prefillMs > 0 ? st.promptTokens / (st.prefillMs / 1000) : 0;
      const dec = st.decodeMs > 0 ? st.generatedTokens / (st.decodeMs / 1000) : 0;
      process.stderr.write(`prefill: ${st.promptTokens} tokens, ${pre.toFixed(1)} tok/s | decode: ` +
        `${st.generatedTokens} tokens, ${dec.toFixed(1)} tok/s | ${info.threads} threads, ${info.simd}\n`);
      return 0;
    }
    engine = new mod.Model(modelBuf, args.threads());
    modelBuf.delete(); modelBuf = null;
    engine.createSession(args.context()).delete();  // validates the context before the tokenizer, as natively
    if (!engine.hasTokenizer()) {  // llama2.c checkpoints keep it in a separate file (-z)
      tokBuf = await readIntoHeap(mod, args.tokenizerPath());
      engine.setTokenizer(tokBuf);
      tokBuf.delete(); tokBuf = null;
    }
    if (cmd === 'run') {
      // --grammar / --json-schema: read here (the WASM engine has no file system), as natively.
      if (args.grammarPath()) args.setGrammar(readText(args.grammarPath()));
      if (args.jsonSchemaPath()) args.setJsonSchema(readText(args.jsonSchemaPath()));
      const st = engine.run(args, (piece) => process.stdout.write(Buffer.from(piece)));
      process.stdout.write('\n');
      for (const n of st.notes) process.stderr.write(`qkv: ${n}\n`);
      const info = engine.info();  // threads and SIMD of the engine that ran
      const pre = st.prefillMs > 0 ? st.promptTokens / (st.prefillMs / 1000) : 0;
      const dec = st.decodeMs > 0 ? st.generatedTokens / (st.decodeMs / 1000) : 0;
      process.stderr.write(`prefill: ${st.promptTokens} tokens, ${pre.toFixed(1)} tok/s | decode: ` +
        `${st.generatedTokens} tokens, ${dec.toFixed(1)} tok/s | ${info.threads} threads, ${info.simd}\n`);
    } else {
      if (!args.logitsOut()) { const e = new Error('logits needs -o OUT'); e.code = 'bad_argument'; throw e; }
      const ids = engine.tokenize(args.prompt(), true);
      const logits = engine.allLogits(Array.from(ids), args.context());
      writeFileSync(args.logitsOut(), Buffer.from(logits.buffer, logits.byteOffset, logits.byteLength));
    }
    return 0;
  } catch (e) {
    if (e && typeof e.code === 'string' && !/^E[A-Z]+$/.test(e.code)) {
      process.stderr.write(`qkv: error [${e.code}]: ${e.message}\n`);
      if (e.code === 'bad_argument' && cmd === 'run') process.stderr.write('\n' + mod.runUsage());
      return 1;
    }
    process.stderr.write(`qkv: error [internal]: ${e && e.stack ? e.stack : e}\n`);
    return 1;
  } finally {
    modelBuf?.delete(); tokBuf?.delete(); engine?.delete(); args?.delete();
  }
}

process.exit(await main(process.argv.slice(2)));
