// Compile-only: the declarations must reject these (each @ts-expect-error fails the build if
// the line type-checks).
import { loadModel, quantize, type ImageEncoderModel, type Model } from 'qkv';

async function misuse(model: Model, clip: ImageEncoderModel): Promise<void> {
  // @ts-expect-error image pooling is cls or mean
  await clip.embedImage({ data: new Uint8Array(4), width: 1, height: 1 }, { pooling: 'last' });
  // @ts-expect-error raw images are bytes, not a number array
  await clip.embedImage({ data: [0, 0, 0, 255], width: 1, height: 1 });
  // @ts-expect-error classifyImage has no pooling (the head reads the model's own)
  await clip.classifyImage(new Blob([]), { pooling: 'mean' });
  // @ts-expect-error labels are read-only
  clip.info.labels.push('x');
  // @ts-expect-error resize is crop or squash
  await clip.embedImage(new Blob([]), { resize: 'fit' });
  // @ts-expect-error encoded images are bytes, not a file name
  await clip.embedImage('photo.png');
  // @ts-expect-error the tokenizer is a source, not a number
  await loadModel('m.bin', { tokenizer: 5 });
  // @ts-expect-error gpuLayers is 'auto' or a number
  await loadModel('m.gguf', { gpuLayers: 'all' });
  // @ts-expect-error threads is 'auto' or a number
  await loadModel('m.bin', { tokenizer: 't.bin', threads: 'many' });
  // @ts-expect-error a decoder's mask has no causal option (it is its model's)
  model.sparseMask({ queries: 2, keys: 2, causal: true });
  // @ts-expect-error prompts are strings
  model.generate(42);
  // @ts-expect-error temperature is a number
  model.generate('x', { temperature: 'hot' });
  // @ts-expect-error stop takes strings
  model.generate('x', { stop: [1] });
  // @ts-expect-error chat roles are system, user, assistant or tool
  model.chat([{ role: 'bot', content: 'hi' }]);
  // @ts-expect-error template variables are JSON values
  model.applyChatTemplate([{ role: 'user', content: 'hi' }], { templateVars: { f: () => 1 } });
  // @ts-expect-error tools is an array
  model.chat([{ role: 'user', content: 'hi' }], { tools: { name: 'f' } });
  // @ts-expect-error content parts are text, image_url or image
  model.chat([{ role: 'user', content: [{ type: 'audio', audio: 'x' }] }]);
  // @ts-expect-error chat takes messages, not a string
  model.chat('hi');
  // @ts-expect-error info is read-only
  model.info = model.info;
  // @ts-expect-error pooling is mean, cls or last
  await model.embed(['x'], { pooling: 'max' });
  // @ts-expect-error embed takes strings
  await model.embed([1, 2]);
  // @ts-expect-error rerank takes a query and documents
  await model.rerank(['q'], 'a');
  // @ts-expect-error q3_k is not a type quantize writes
  void quantize(new Uint8Array(8), { type: 'q3_k' });
  // @ts-expect-error quantize needs a type
  void quantize(new Uint8Array(8), {});
  // @ts-expect-error tokenize returns ids, not a string
  const s: string = model.tokenize('x');
  void s;
}
void misuse;

import { createTrainer } from 'qkv';

async function trainMisuse(): Promise<void> {
  // @ts-expect-error text is required
  await createTrainer({ steps: 3 });
  // @ts-expect-error shape presets are tiny, small, medium
  await createTrainer({ text: 'x', shape: 'huge' });
  // @ts-expect-error steps is a number
  await createTrainer({ text: 'x', steps: '10' });
  // @ts-expect-error linear attention does not train
  await createTrainer({ text: 'x', attention: 'linear' });
  const t = await createTrainer({ text: 'x' });
  // @ts-expect-error dtype is f32 or f16
  await t.toGGUF({ dtype: 'q4_0' });
}
void trainMisuse;

async function cacheMisuse() {
  const { loadModel: load, deleteCachedModel } = await import('qkv');
  // @ts-expect-error a cache is a boolean, a backend's name or an object
  await load('https://example.com/m.gguf', { cache: 'indexeddb' });
  // @ts-expect-error segmentBytes is a number
  await load('https://example.com/m.gguf', { cache: { segmentBytes: '32M' } });
  // @ts-expect-error deleteCachedModel takes URLs, not bytes
  await deleteCachedModel(new Uint8Array(4));
}
void cacheMisuse;
