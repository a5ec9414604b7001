#!/usr/bin/env node
// The qkv command on the WASM engine: same commands, flags and stdout bytes as the native CLI.
import { writeFileSync } from 'node:fs';
import { loadWasmModule, toHeapBuffer } from '../src/js/wasm-node.mjs';

function usage(mod, out) {
  out.write('qkv: a Transformer inference engine (WebAssembly build)\n\nCommands:\n' +
    '  qkv run MODEL [options]          generate text (llama2.c run.c flags)\n' +
    '  qkv info MODEL [-z TOK]          model architecture, sizes and runtime\n' +
    '  qkv tokenize MODEL -z TOK TEXT   token ids and pieces of TEXT\n' +
    '  qkv logits MODEL -z TOK -i TEXT -o OUT.f32   write the prompt\'s logits\n\n' + mod.runUsage());
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

// `qkv info MODEL [-z TOK]` and `qkv tokenize MODEL -z TOK TEXT`, through the JS API.
async function infoOrTokenize(cmd, argv) {
  const { loadModel } = await import('../src/js/node.js');
  const model = argv[0];
  let tok = 'tokenizer.bin', text = null;
  for (let i = 1; i < argv.length; i++) {
    if (argv[i] === '-z' && i + 1 < argv.length) tok = argv[++i];
    else if (cmd === 'tokenize' && text === null) text = argv[i];
    else return fail('bad_argument', `unexpected argument '${argv[i]}'`);
  }
  if (!model) return fail('bad_argument', `usage: qkv ${cmd} MODEL -z TOKENIZER${cmd === 'tokenize' ? ' TEXT' : ''}`);
  if (cmd === 'tokenize' && text === null) return fail('bad_argument', 'usage: qkv tokenize MODEL -z TOKENIZER TEXT');
  let m;
  try {
    m = await loadModel(model, { tokenizer: tok, threads: 1 });
    if (cmd === 'info') {
      process.stdout.write(JSON.stringify(m.info, null, 2) + '\n');
    } else {
      const ids = m.tokenize(text);
      for (const id of ids) process.stdout.write(`${id}\t${JSON.stringify(m.detokenize([id]))}\n`);
    }
    return 0;
  } catch (e) {
    return fail(e.code ?? 'internal', e.message);
  } finally {
    m?.dispose();
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
  if (cmd === 'info' || cmd === 'tokenize') return infoOrTokenize(cmd, rest);
  if (cmd !== 'run' && cmd !== 'logits') {
    process.stderr.write(`qkv: unknown command '${cmd}'\n\n`);
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
    modelBuf = await readIntoHeap(mod, args.modelPath());
    engine = new mod.Model(modelBuf, args.threads());
    modelBuf.delete(); modelBuf = null;
    engine.createSession(args.context()).delete();  // validates the context before the tokenizer, as natively
    if (!engine.hasTokenizer()) {  // llama2.c checkpoints keep it in a separate file (-z)
      tokBuf = await readIntoHeap(mod, args.tokenizerPath());
      engine.setTokenizer(tokBuf);
      tokBuf.delete(); tokBuf = null;
    }
    if (cmd === 'run') {
      const st = engine.run(args, (piece) => process.stdout.write(Buffer.from(piece)));
      process.stdout.write('\n');
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
