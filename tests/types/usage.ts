// Compile-only check of the public types (tsc --noEmit): every documented call, as users write it.
import { loadModel, quantize, QUANTIZE_TYPES, QkvError, ErrorCodes, type Model, type Session, type ModelInfo, type GenerationStats, type EmbedPooling, type EncoderDecoderModel, type EncoderDecoderInfo, type EncoderDecoderInspection, type ImageEncoderModel, type ImageEncoderInfo, type RawImage, type ImageClass } from 'qkv';
import { createWorker, type RemoteModel, type RemoteEncoderDecoderModel, type RemoteImageEncoderModel } from 'qkv/worker';

async function main(): Promise<void> {
  const ac = new AbortController();
  const model: Model = await loadModel('model.bin', {
    tokenizer: new Uint8Array(4),
    onProgress: ({ loaded, total }) => console.log(loaded, total ?? 'unknown'),
    signal: ac.signal,
    threads: 'auto',
    simd: 'auto',
  });
  const info: ModelInfo = model.info;
  const mode: 'pthreads' | 'single' = info.threading.mode;
  const build: string = info.simd + ': ' + info.simdReason;
  console.log(info.vocabSize, info.memory.heapBytes, mode, build);
  const kinds: ('softmax' | 'linear' | 'additive' | 'block_sparse')[] = info.attentionKinds;
  if (info.sparsePattern) {
    const mask: Uint8Array = model.sparseMask({ queryStart: 4, queries: 2, keys: 6 });
    console.log(kinds, info.sparsePattern.blockSize, info.additiveLength, mask.length);
  }
  for await (const { token, text } of model.generate('Once', { maxTokens: 8, temperature: 0.7, topK: 40, topP: 0.9, minP: 0.05, repetitionPenalty: 1.1, seed: 1, stop: ['\n'], signal: ac.signal })) {
    console.log(token, text);
  }
  const fmt: 'chatml' | 'llama3' | 'llama2' | 'gemma' | 'phi3' = info.chatFormat;
  // Images in chat: a model loaded with its mmproj, OpenAI's image_url parts and raw RGBA.
  const vlm: Model = await loadModel('llava.gguf', { mmproj: 'mmproj.gguf' });
  const tokensPerImage: number | undefined = vlm.info.mmproj?.imageTokens;
  for await (const { text } of vlm.chat([{ role: 'user', content: [
    { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
    { type: 'image', image: { data: new Uint8Array(16), width: 2, height: 2 } },
    { type: 'text', text: 'What is this?' },
  ] }])) console.log(tokensPerImage, text);
  for await (const { text } of model.chat([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }], { maxTokens: 8 })) {
    console.log(fmt, text, info.eogIds.length, info.addBos);
  }
  const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }];
  const turns = [{ role: 'user' as const, content: 'Hi' }, { role: 'assistant' as const, content: '', tool_calls: [{ name: 'f', arguments: {} }] },
                 { role: 'tool' as const, content: '42', tool_call_id: 'c1' }];
  const prompt: string = model.applyChatTemplate(turns, { tools, templateVars: { enable_thinking: false }, addGenerationPrompt: true });
  for await (const { text } of model.chat(turns, { tools, templateVars: { enable_thinking: false }, maxTokens: 8 })) console.log(prompt, text);
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
  const pool: EmbedPooling | 'rank' = model.info.pooling;
  const ranked = await model.rerank('q', ['a', 'b'], { topN: 1, batchSize: 4 });
  console.log(model.info.reranker, ranked[0].index, ranked[0].score, ranked[0].tokens);
  console.log(vecs[0].length, pool, model.info.encoder, model.lastEmbedding?.tokens);
  model.dispose();
  try {
    await loadModel(new Blob([]), { tokenizer: 'tok.bin' });
  } catch (e) {
    if (e instanceof QkvError && ErrorCodes.includes(e.code)) console.log(e.code satisfies string);
  }
  const q = await quantize(new Uint8Array(8), { type: 'q5_k', onProgress: (p) => console.log(p.phase, p.done, p.total) });
  console.log(q.bytes?.length, q.outBytes, q.tensors.map((t) => `${t.name}: ${t.from} -> ${t.to} ${t.note}`), QUANTIZE_TYPES.length);
  const t5 = await loadModel<EncoderDecoderModel>('t5.gguf');
  const ei: EncoderDecoderInfo = t5.info;
  for await (const { token, text } of t5.generate('translate: hello', { maxTokens: 8, temperature: 0 })) console.log(token, text);
  const map: EncoderDecoderInspection = await t5.inspect('hello', { target: 'hallo' });
  const row: Float32Array = map.cross(ei.decoderLayers - 1, 0)[0];
  console.log(row.length === map.sourceTokens.length, t5.tokenize('a', { source: false }), t5.lastGeneration?.promptTokens);
  t5.dispose();
  const clip = await loadModel<ImageEncoderModel>('mmproj.gguf', { threads: 2 });
  const ci: ImageEncoderInfo = clip.info;
  const raw: RawImage = { data: new Uint8Array(4 * 4 * 4), width: 4, height: 4 };
  const v: Float32Array = await clip.embedImage(raw, { pooling: 'mean', size: ci.imageSize, resize: 'squash' });
  const vs: Float32Array[] = await clip.embedImages([raw, new Blob([])], { project: false });
  console.log(v.length === ci.embeddingDim, vs.length, ci.patchSize, ci.imageMean[0]);
  const seen = await clip.inspectImage(raw);
  const fromCls: Float32Array = seen.attention(seen.layers - 1, 0)[0];
  const fromPng: Float32Array = await clip.embedImage(new Uint8Array([0x89, 0x50, 0x4e, 0x47]));
  console.log(fromPng.length, (await clip.embedImage(new ArrayBuffer(8))).length);
  console.log(fromCls.length === seen.rows, seen.gridWidth * seen.gridHeight + (seen.classToken ? 1 : 0) === seen.rows);
  if (ci.labels.length > 0) {
    const classes: ImageClass[] = await clip.classifyImage(raw, { topK: ci.labels.length, signal: new AbortController().signal });
    console.log(classes[0].index, classes[0].label.toUpperCase(), classes[0].probability.toFixed(3));
  }
  clip.dispose();
  const w = await createWorker();
  const rm: RemoteModel = await w.loadModel(new URL('https://example.com/m.bin'), { tokenizer: 'tok.bin' });
  for await (const t of rm.generate('x')) console.log(t.text);
  console.log((await rm.tokenize('a')).length, (await rm.refreshInfo()).arch, (await rm.embed('a'))[0].length, (await rm.rerank('q', ['a']))[0].score);
  await rm.dispose();
  const rt5 = await w.loadModel<RemoteEncoderDecoderModel>('t5.gguf');
  for await (const t of rt5.generate('hello', { maxTokens: 4 })) console.log(t.text, rt5.info.decoderLayers);
  console.log((await rt5.inspect('hello')).cross(0, 0).length);
  await rt5.dispose();
  const rclip = await w.loadModel<RemoteImageEncoderModel>('mmproj.gguf');
  const rv: Float32Array = await rclip.embedImage(new Blob([]), { pooling: 'mean' });
  const rseen = await rclip.inspectImage(raw);
  console.log(rv.length === rclip.info.embeddingDim, rseen.attention(0, 0).length, (await rclip.embedImages([raw])).length);
  await rclip.dispose();
  const wq = await w.quantize('model.gguf', { type: 'q4_k', onProgress: (p) => console.log(p.phase), onChunk: (c) => console.log(c.byteLength) });
  console.log(wq.outBytes, wq.bytes === null);
  await w.terminate();
}
void main;

import { createTrainer, TRAIN_PRESETS, type Trainer, type TrainStep } from 'qkv';

async function training(): Promise<void> {
  const ac = new AbortController();
  const t: Trainer = await createTrainer({ text: 'hello world', shape: 'tiny', tokenizer: { vocab: 300 }, steps: 20, batch: 4, seq: 32, lr: 1e-3, seed: 1, threads: 2, worker: 'auto' });
  const s: TrainStep = await t.step();
  console.log(s.loss, s.tokensPerSecond, t.info.params, TRAIN_PRESETS.small.dim);
  const r = await t.run({ onStep: (x) => console.log(x.loss, x.valLoss), signal: ac.signal, evalEvery: 5 });
  console.log(r.stopped, r.valLoss ?? 'none');
  for await (const x of t.steps({ signal: ac.signal })) console.log(x.step);
  t.stop();
  const gguf: Uint8Array = await t.toGGUF({ dtype: 'f16' });
  await t.loadState(await t.saveState());
  const m = await loadModel(gguf);
  m.dispose();
  // Partial offload: the first layers on WebGPU, the rest in WASM.
  const po = await loadModel('model.gguf', { device: 'webgpu', gpuLayers: 20 });
  const split: number | undefined = po.info.device.gpuLayers;
  console.log(split, po.info.device.cpuLayers);
  await loadModel('model.gguf', { gpuLayers: 'auto', weights: 'gpu' });
  await t.dispose();
  await createTrainer({ text: new Blob(['x']), model: 'model.gguf', seq: 64, shape: undefined });
  await createTrainer({ text: 'x', shape: { dim: 64, layers: 2, heads: 4, hiddenDim: 128 } });
  const tk = await createTrainer({ text: 'x', attention: ['block_sparse', 'additive'], additiveDim: 16, sparsePattern: { blockSize: 16, globalTokens: 4 } });
  const tkKinds: string[] = tk.info.attentionKinds;
  console.log(tkKinds, tk.info.additiveLength, tk.info.sparsePattern?.windowBlocks);
}
void training;

// qkv/openai and qkv/serve: the OpenAI-shaped client and the HTTP server.
import { createOpenAI, type ChatCompletion, type ChatCompletionChunk } from 'qkv/openai';
import { serve } from 'qkv/serve';

async function openaiUsage(model: Model): Promise<void> {
  const client = createOpenAI(model, { modelName: 'm', contextLength: 512, toolFormat: 'hermes' });
  const rr = await client.rerank.create({ query: 'q', documents: ['a', { text: 'b' }], top_n: 1, return_documents: true });
  console.log(rr.results[0].relevance_score, rr.results[0].document?.text, rr.usage.total_tokens);
  const r: ChatCompletion = await client.chat.completions.create({
    messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8, temperature: 0.7, seed: 1, logprobs: true, top_logprobs: 2,
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' }, strict: true } },
    qkv: { top_k: 40, min_p: 0.05 },
  });
  console.log(r.choices[0].message.content, r.choices[0].logprobs?.content[0].top_logprobs[0].logprob, r.usage.total_tokens);
  const stream = await client.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], stream: true }, { signal: new AbortController().signal });
  for await (const c of stream) { const chunk: ChatCompletionChunk = c; console.log(chunk.choices[0]?.delta.content); }
  const t = await client.chat.completions.create({
    messages: [{ role: 'user', content: 'Weather?' }],
    tools: [{ type: 'function', function: { name: 'w', parameters: { type: 'object' } } }], tool_choice: 'required',
  });
  console.log(t.choices[0].message.tool_calls?.[0].function.arguments);
  const c = await client.completions.create({ prompt: 'Once', max_tokens: 4, logprobs: 1 });
  console.log(c.choices[0].text, (await client.embeddings.create({ input: ['a'] })).data[0].embedding, (await client.models.list()).data[0].id);
  for await (const t2 of model.generate('x', { grammar: 'root ::= "a"', logprobs: 2, presencePenalty: 0.5, logitBias: { 5: -100 } })) console.log(t2.logprob, t2.topLogprobs?.[0].token);
  await model.complete('x', { jsonSchema: { type: 'object' } });
  await model.complete('x', { grammar: 'root ::= "<" schema-0 ">"', jsonSchema: [{ type: 'integer', minimum: 0 }] });
  const s = await serve(model, { port: 0, onLog: (e) => console.log(e.status) });
  console.log(s.url);
  await s.close();
}
void openaiUsage;

async function cacheUsage() {
  const { loadModel: load, listCachedModels, deleteCachedModel, clearModelCache } = await import('qkv');
  await load('https://example.com/m-00001-of-00002.gguf', { device: 'webgpu', weights: 'gpu', cache: true });
  await load('https://example.com/m.gguf', { cache: { backend: 'opfs', segmentBytes: 1 << 24 } });
  for (const e of await listCachedModels({ cache: 'cache-api' })) console.log(e.url, e.cachedBytes / e.size, e.complete, e.backend);
  console.log(await deleteCachedModel('https://example.com/m.gguf'), (await clearModelCache()).bytes);
  try { await load('https://example.com/m.gguf', { cache: 'opfs' }); } catch (e) { if (e instanceof QkvError && e.code === 'quota') console.log(e.needed, e.available); }
}
void cacheUsage;
