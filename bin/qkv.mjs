#!/usr/bin/env node
// The qkv command on the WASM engine: same commands, flags and stdout bytes as the native CLI.
import { writeFileSync } from 'node:fs';
import { loadWasmModule, toHeapBuffer } from '../src/js/wasm-node.mjs';

function usage(mod, out) {
  out.write('qkv: a Transformer inference engine (WebAssembly build)\n\nCommands:\n' +
    '  qkv run MODEL [options]          generate text (llama2.c run.c flags)\n' +
    '  qkv logits MODEL -z TOK -i TEXT -o OUT.f32   write the prompt\'s logits\n\n' + mod.runUsage());
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
    try {
      modelBuf = await toHeapBuffer(mod, args.modelPath());
      tokBuf = await toHeapBuffer(mod, args.tokenizerPath());
    } catch (e) {
      if (e.code === 'ENOENT' || e.code === 'EISDIR' || e.code === 'EACCES') {
        const err = new Error(`cannot open ${e.path}: ${e.message}`);
        err.code = 'io';
        throw err;
      }
      throw e;
    }
    engine = new mod.Engine(modelBuf, tokBuf, args.threads(), args.context());
    modelBuf.delete(); tokBuf.delete(); modelBuf = tokBuf = null;
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
