// Compile-only check of the public types (tsc --noEmit): every documented call, as users write it.
import { loadModel, QkvError, ErrorCodes, type Model, type Session, type ModelInfo, type GenerationStats, type EmbedPooling } from 'qkv';
import { createWorker, type RemoteModel } from 'qkv/worker';

async function main(): Promise<void> {
  const ac = new AbortController();
  const model: Model = await loadModel('model.bin', {
    tokenizer: new Uint8Array(4),
    onProgress: ({ loaded, total }) => console.log(loaded, total ?? 'unknown'),
    signal: ac.signal,
    threads: 'auto',
  });
  const info: ModelInfo = model.info;
  const mode: 'pthreads' | 'single' = info.threading.mode;
  console.log(info.vocabSize, info.memory.heapBytes, mode);
  for await (const { token, text } of model.generate('Once', { maxTokens: 8, temperature: 0.7, topK: 40, topP: 0.9, minP: 0.05, repetitionPenalty: 1.1, seed: 1, stop: ['\n'], signal: ac.signal })) {
    console.log(token, text);
  }
  const fmt: 'chatml' | 'llama3' | 'llama2' | 'gemma' | 'phi3' = info.chatFormat;
  for await (const { text } of model.chat([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }], { maxTokens: 8 })) {
    console.log(fmt, text, info.eogIds.length, info.addBos);
  }
  const s: Session = model.createSession({ contextLength: 64 });
  const text: string = await s.complete('Hi', { stop: 'x' });
  const stats: GenerationStats | null = s.lastGeneration;
  s.feed(model.tokenize(text, { bos: false }));
  const logits: Float32Array = s.logits();
  s.captureAttention = true;
  s.feed([s.sample({ temperature: 0 })]);
  const { queries, keys, probs } = s.attention(0, 0);
  console.log(logits.length, stats?.reusedTokens, queries * keys === probs.length, model.detokenize([1, 2]));
  s.truncate(0);
  s.dispose();
  const vecs: Float32Array[] = await model.embed(['a', 'b'], { pooling: 'cls', normalize: false, truncate: true, batchSize: 8 });
  const pool: EmbedPooling = model.info.pooling;
  console.log(vecs[0].length, pool, model.info.encoder, model.lastEmbedding?.tokens);
  model.dispose();
  try {
    await loadModel(new Blob([]), { tokenizer: 'tok.bin' });
  } catch (e) {
    if (e instanceof QkvError && ErrorCodes.includes(e.code)) console.log(e.code satisfies string);
  }
  const w = await createWorker();
  const rm: RemoteModel = await w.loadModel(new URL('https://example.com/m.bin'), { tokenizer: 'tok.bin' });
  for await (const t of rm.generate('x')) console.log(t.text);
  console.log((await rm.tokenize('a')).length, (await rm.refreshInfo()).arch, (await rm.embed('a'))[0].length);
  await rm.dispose();
  await w.terminate();
}
void main;
