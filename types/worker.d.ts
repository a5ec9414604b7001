// qkv/worker: the same API with the engine in a Web Worker (Node: a worker thread). Every
// method is async because it crosses postMessage.
import type {
  AttentionMap, ChatMessage, EmbedOptions, EncoderDecoderInfo, EncoderDecoderInspection, GenerateOptions, GeneratedToken,
  GenerationStats, ImageEmbedOptions, ImageEncoderInfo, ImageInput, ImageInspection, LoadOptions, ModelFiles, ModelInfo, ModelSource, QkvWarning,
  QuantizeOptions, QuantizeResult, RerankOptions, RerankResult, SamplingOptions,
} from './index.js';

export { QkvError, ErrorCode } from './index.js';

export interface RemoteSession {
  lastGeneration: GenerationStats | null;
  tokens(): Promise<number[]>;
  position(): Promise<number>;
  setCaptureAttention(on: boolean): Promise<void>;
  feed(tokens: ArrayLike<number>, options?: { allLogits?: boolean }): Promise<void>;
  prefill(tokens: ArrayLike<number>): Promise<number>;
  logits(i?: number): Promise<Float32Array>;
  sample(options?: SamplingOptions): Promise<number>;
  truncate(n: number): Promise<void>;
  reset(): Promise<void>;
  attention(layer: number, head: number): Promise<AttentionMap>;
  generate(prompt: string, options?: GenerateOptions): AsyncGenerator<GeneratedToken, void, undefined>;
  complete(prompt: string, options?: GenerateOptions): Promise<string>;
  chat(messages: ChatMessage[], options?: GenerateOptions): AsyncGenerator<GeneratedToken, void, undefined>;
  dispose(): Promise<void>;
}

export interface RemoteModel {
  /** Info as of loading; refreshInfo() fetches current memory figures. */
  info: ModelInfo;
  /** Warnings so far, as the worker reported them (also passed to options.onWarning). */
  warnings: QkvWarning[];
  refreshInfo(): Promise<ModelInfo>;
  tokenize(text: string, options?: { bos?: boolean; special?: boolean }): Promise<number[]>;
  detokenize(ids: ArrayLike<number>): Promise<string>;
  /** Model.sparseMask in the worker. */
  sparseMask(options: { queryStart?: number; queries: number; keys: number }): Promise<Uint8Array>;
  /** Sentence embeddings, computed in the worker (see Model.embed). */
  embed(texts: string | string[], options?: EmbedOptions): Promise<Float32Array[]>;
  /** Reranker scores, computed in the worker (see Model.rerank). */
  rerank(query: string, documents: string[], options?: RerankOptions): Promise<RerankResult[]>;
  createSession(options?: { contextLength?: number }): Promise<RemoteSession>;
  session(): Promise<RemoteSession>;
  generate(prompt: string, options?: GenerateOptions): AsyncGenerator<GeneratedToken, void, undefined>;
  complete(prompt: string, options?: GenerateOptions): Promise<string>;
  chat(messages: ChatMessage[], options?: GenerateOptions): AsyncGenerator<GeneratedToken, void, undefined>;
  dispose(): Promise<void>;
}

/** An encoder-decoder model (t5) in the worker; see EncoderDecoderModel. */
export interface RemoteEncoderDecoderModel {
  info: EncoderDecoderInfo;
  warnings: QkvWarning[];
  lastGeneration: GenerationStats | null;
  refreshInfo(): Promise<EncoderDecoderInfo>;
  tokenize(text: string, options?: { source?: boolean; special?: boolean }): Promise<number[]>;
  detokenize(ids: ArrayLike<number>): Promise<string>;
  /** Model.sparseMask in the worker. */
  sparseMask(options: { queryStart?: number; queries: number; keys: number; causal?: boolean }): Promise<Uint8Array>;
  generate(source: string, options?: GenerateOptions): AsyncGenerator<GeneratedToken, void, undefined>;
  complete(source: string, options?: GenerateOptions): Promise<string>;
  inspect(source: string, options?: { target?: string | number[]; maxTokens?: number }): Promise<EncoderDecoderInspection>;
  dispose(): Promise<void>;
}

/**
 * An image encoder (llama.cpp mmproj GGUF) in the worker; see ImageEncoderModel. Images go to the
 * worker as they are (raw RGBA, encoded PNG/JPEG/PPM bytes, ImageData, ImageBitmap, Blob), except
 * image/canvas/video elements, read to RGBA on this side first, and Blobs in Node, sent as bytes.
 */
export interface RemoteImageEncoderModel {
  info: ImageEncoderInfo;
  warnings: QkvWarning[];
  refreshInfo(): Promise<ImageEncoderInfo>;
  embedImage(image: ImageInput, options?: ImageEmbedOptions): Promise<Float32Array>;
  inspectImage(image: ImageInput, options?: ImageEmbedOptions): Promise<ImageInspection>;
  embedImages(images: ImageInput[], options?: ImageEmbedOptions): Promise<Float32Array[]>;
  dispose(): Promise<void>;
}

export interface QkvWorker {
  /**
   * Async iterables are gathered on this side; ArrayBuffers, Blobs and URLs go to the worker as they
   * are. options.gpu is ignored (the worker uses its own navigator.gpu); onWarning runs here.
   */
  loadModel<M extends RemoteModel | RemoteEncoderDecoderModel | RemoteImageEncoderModel = RemoteModel>(source: ModelFiles, options?: LoadOptions): Promise<M>;
  /**
   * quantize() with the work in the worker: the page stays responsive. onProgress and onChunk run
   * here (chunks arrive as transferred copies); without onChunk the bytes come back in one buffer.
   */
  quantize(source: ModelSource, options: QuantizeOptions): Promise<QuantizeResult>;
  /**
   * Stops the worker and frees every model in it. Calls still pending reject with 'disposed', as
   * do later ones. Not needed for a Node process to end: the worker thread keeps the process
   * alive only while a call is awaited.
   */
  terminate(): Promise<void>;
  /** The same as terminate(). */
  dispose(): Promise<void>;
}

/**
 * Starts a worker running the engine (default: the package's worker.js). Options are checked on
 * both sides (unknown keys are 'bad_argument'); a generation runs at most 4 tokens ahead of its
 * consumer; a second generation on one session is 'busy', as in process.
 */
export declare function createWorker(url?: string | URL): Promise<QkvWorker>;
