#!/usr/bin/env node
// The qkv command on the WASM engine: same commands, flags and stdout bytes as the native CLI.
import { writeFileSync } from 'node:fs';
import { loadWasmModule, toHeapBuffer } from '../src/js/wasm-node.mjs';

function usage(mod, out) {
  out.write('qkv: a Transformer inference engine (WebAssembly build)\n\nCommands:\n' +
    '  qkv run MODEL [options]          generate text (llama2.c run.c flags)\n' +
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

async function main(argv) {
  const mod = await loadWasmModule();
  const [cmd, ...rest] = argv;
  if (!cmd) { usage(mod, process.stderr); return 1; }
  if (cmd === '-h' || cmd === '--help' || cmd === 'help') { usage(mod, process.stdout); return 0; }
  if (cmd !== 'run' && cmd !== 'logits') {
    process.stderr.write(`qkv: unknown command '${cmd}'\n\n`);
    usage(mod, process.stderr);
    return 1;
  }
  let args, engine, modelBuf, tokBuf;
  try {
    args = mod.RunArgs.parse(rest);
    // Same order as the native CLI: the model is read and validated before the tokenizer.
    modelBuf = await readIntoHeap(mod, args.modelPath());
    engine = new mod.Engine(modelBuf, args.threads(), args.context());
    modelBuf.delete(); modelBuf = null;
    tokBuf = await readIntoHeap(mod, args.tokenizerPath());
    engine.setTokenizer(tokBuf);
    tokBuf.delete(); tokBuf = null;
    if (cmd === 'run') {
      const st = engine.run(args, (piece) => process.stdout.write(Buffer.from(piece)));
      process.stdout.write('\n');
      const info = engine.info();
      const pre = st.prefillMs > 0 ? st.promptTokens / (st.prefillMs / 1000) : 0;
      const dec = st.decodeMs > 0 ? st.generatedTokens / (st.decodeMs / 1000) : 0;
      process.stderr.write(`prefill: ${st.promptTokens} tokens, ${pre.toFixed(1)} tok/s | decode: ` +
        `${st.generatedTokens} tokens, ${dec.toFixed(1)} tok/s | ${info.threads} threads, ${info.simd}\n`);
    } else {
      if (!args.logitsOut()) { const e = new Error('logits needs -o OUT'); e.code = 'bad_argument'; throw e; }
      const ids = engine.tokenize(args.prompt(), true);
      const logits = engine.logits(Array.from(ids));
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

process.exitCode = await main(process.argv.slice(2));
