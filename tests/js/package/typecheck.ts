// Compiled with tsc --noEmit inside the consumer project: the published declarations resolve
// through the package's exports map ("types" condition) and describe the API.
import { loadModel, QkvError, ErrorCodes, type Model, type Session, type ErrorCode, type GenerationStats } from 'qkv';
import { createWorker, type RemoteModel } from 'qkv/worker';

export async function use(path: string): Promise<string> {
  const model: Model = await loadModel(path, { tokenizer: path + '.tok', threads: 1, onProgress: (p) => console.log(p.loaded, p.total) });
  const s: Session = model.createSession({ contextLength: 64 });
  let text = '';
  for await (const { token, text: t } of s.generate('I dream of', { temperature: 0, maxTokens: 8, stop: ['\n'], signal: AbortSignal.timeout(1000) })) {
    text += t;
    const id: number = token;
    console.log(id);
  }
  const stats: GenerationStats | null = s.lastGeneration;
  const logits: Float32Array = s.logits();
  const codes: readonly ErrorCode[] = ErrorCodes;
  try {
    model.tokenize(text);
  } catch (e) {
    if (e instanceof QkvError) { const c: ErrorCode = e.code; console.log(c, codes); }
  }
  const w = await createWorker();
  const rm: RemoteModel = await w.loadModel(path, { tokenizer: path, maxMemory: 1 << 30 });
  await rm.dispose();
  await w.terminate();
  await w.dispose();
  const busy: ErrorCode = 'busy';
  console.log(busy);
  model.dispose();
  return `${text}${stats?.finishReason}${logits.length}`;
}

export async function misuse(path: string): Promise<void> {
  // @ts-expect-error the tokenizer is a source, not a boolean (optional: GGUF files carry their own)
  await loadModel(path, { tokenizer: true });
  // @ts-expect-error a number is no source
  await loadModel(5, { tokenizer: path });
  const model = await loadModel(path, { tokenizer: path });
  // @ts-expect-error temperature is a number
  model.generate('x', { temperature: 'hot' });
  // @ts-expect-error the prompt is a string
  await model.complete(42);
  // @ts-expect-error misspelled option (refused at run time too, with 'did you mean')
  model.generate('x', { maxToken: 5 });
}
