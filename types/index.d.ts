// Type declarations for the qkv package (browser and Node entries share this API).

/**
 * Stable error codes carried by every QkvError. 'bad_argument' also covers an unknown option key
 * (the message names it and the known key it resembles); 'busy': a second generation (or a feed,
 * prefill, truncate, sample) on a session whose generation is still running. 'webgpu_failed': the
 * GPU of a model loaded with weights: 'gpu' was lost or failed; its weights were on the GPU only,
 * so it cannot go on in WASM: Model.reload() loads it again. 'quota': the model cache (LoadOptions.cache)
 * cannot hold the download: the browser's storage quota (or the disk) has too little space;
 * `needed` and `available` give the sizes in bytes.
 */
export type ErrorCode =
  | 'bad_model' | 'bad_tokenizer' | 'bad_argument' | 'unsupported' | 'out_of_memory'
  | 'io' | 'aborted' | 'disposed' | 'busy' | 'internal' | 'webgpu_failed' | 'quota';

export declare const ErrorCodes: readonly ErrorCode[];

/** The one error type thrown by qkv. `code` is stable; `message` says what to do. */
export declare class QkvError extends Error {
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown });
  readonly name: 'QkvError';
  readonly code: ErrorCode;
  /** With code 'quota': the bytes the cache needed to write. */
  readonly needed?: number;
  /** With code 'quota': the bytes the storage had left (quota minus usage, or the disk's free space). */
  readonly available?: number;
}

/** Where model bytes come from. Strings are URLs in browsers; paths or URLs in Node. */
export type ModelSource =
  | string | URL | Blob | ArrayBuffer | ArrayBufferView
  | AsyncIterable<Uint8Array | ArrayBuffer> | Iterable<Uint8Array | ArrayBuffer>;

/**
 * A model for loadModel: one source, or the files of a model split by llama.cpp's gguf-split,
 * in order (paths, URLs or Blobs). A path or URL named NAME-00001-of-0000N.gguf brings its
 * N - 1 siblings (NAME-00002-of-0000N.gguf, ...) by itself; naming another part is an error.
 *
 * A Hugging Face checkpoint (llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3, bert; F32, F16,
 * BF16) is its files, in any order: config.json, tokenizer.json, tokenizer_config.json (optional:
 * BOS/EOS, chat template), model.safetensors or model.safetensors.index.json with its shards
 * (paths, URLs, or Files: each is known by its name, so plain Blobs are refused); in Node also
 * the checkpoint's directory as one path. See docs/models.md.
 */
export type ModelFiles = ModelSource | Array<string | URL | Blob>;

export interface LoadProgress {
  /** Bytes of the model read so far (of all its files, for a split model). */
  loaded: number;
  /** Total bytes, or null when the source does not say (an iterable, a compressed response; a split model until its last file). */
  total: number | null;
}

export interface LoadOptions {
  /** llama2.c tokenizer.bin of the model: required for llama2.c checkpoints; GGUF files carry their own. */
  tokenizer?: ModelSource;
  /** Called as model bytes arrive. */
  onProgress?: (p: LoadProgress) => void;
  /** Cancels the download and the load; the promise rejects with code 'aborted'. */
  signal?: AbortSignal;
  /**
   * Worker threads for matrix work. 'auto' (default) uses every core where WebAssembly threads
   * are available (Node; pages served with COOP/COEP), else 1. At most 8.
   */
  threads?: 'auto' | number;
  /**
   * Which WebAssembly build runs. 'auto' (default): the relaxed-SIMD build (fused multiply-add
   * in the f32 kernels: 1.1-1.6x faster f32 products; an 8-bit integer dot product for the
   * Q4/Q5/Q6 block types: 1.2-1.7x faster, the same results for Q4_0 ... Q5_1; the K types
   * (Q4_K, Q5_K, Q6_K) against activations quantized per 256 as llama.cpp does, so their logits
   * differ from SIMD128's by that rounding) where the engine runs relaxed SIMD
   * (Chromium >= 114, Node >= 22), else the SIMD128 build. 'baseline': always SIMD128 (the same
   * bits on every machine: relaxed multiply-add may or may not be fused, depending on the CPU).
   * 'relaxed': the relaxed build or an error (code 'unsupported').
   */
  simd?: 'auto' | 'relaxed' | 'baseline';
  /**
   * Where the model runs. 'wasm': the WASM engine. 'webgpu': the whole model on the GPU (weights
   * uploaded once as stored, KV cache on the GPU, one submit per decoded token, only the logits
   * read back; sampling stays on the CPU; encoders' embed() passes too, pooled in WASM); a model
   * or option the GPU path does not implement (linear attention, sinusoidal positions: neither
   * comes from a file qkv reads; encoder-decoder T5), a missing GPU, or a GPU failure
   * mid-generation gives WASM with a warning. 'auto' (default): WebGPU only when one decode step
   * (encoders: one embedding), timed on both at load, is faster there; info.device.reason and
   * info.device.measured give the figures. Sessions with captureAttention on compute their maps
   * on the GPU too (in WASM where the maps exceed the GPU's buffer limits).
   */
  device?: 'auto' | 'webgpu' | 'wasm';
  /**
   * Precision of the GPU path's KV cache. 'auto' and 'f32' (the default): f32 everywhere, on every
   * adapter (no dependence on shader-f16). 'f16': keys and values are stored in f16 (half the KV
   * cache's memory and bandwidth; arithmetic stays f32) where the adapter has 'shader-f16', and
   * `info.device.kvType` says 'f16'; elsewhere (SwiftShader, NVIDIA through Dawn) the cache is f32
   * and a 'webgpu_f16_unavailable' warning says so. Tolerance: docs/webgpu-kernels.md.
   */
  gpuPrecision?: 'auto' | 'f32' | 'f16';
  /**
   * Where the weights live. 'heap' (default): the file is read into the WebAssembly heap (then
   * uploaded when the model runs on WebGPU). 'gpu': a GGUF model's weight matrices stream from the
   * source straight into GPU buffers through an 8 MiB staging buffer, never whole in JS or in the
   * heap, so models larger than the 4 GiB wasm32 heap run; the heap keeps the header (metadata,
   * tokenizer), the vectors (norms, biases) and f32 position tables. Needs WebGPU (not with device
   * 'wasm'); the CPU cannot run such a model, so a lost GPU gives 'webgpu_failed' (Model.reload()).
   * Unset with device 'auto': a model whose file does not fit the heap loads this way when there
   * is a WebGPU adapter (else 'out_of_memory').
   */
  weights?: 'heap' | 'gpu';
  /**
   * Partial offload, as llama.cpp's n_gpu_layers: how many of the first layers run on WebGPU; the
   * rest, the final norm and the classifier run in WASM on the hidden states the GPU reads back
   * (dim floats per token; one submit per decoded token still). 0: every layer in WASM; the
   * model's layer count: the whole model on the GPU. 'auto' (default): as many layers as the
   * device takes, allocated layer by layer inside out-of-memory error scopes and within its
   * buffer limits (WebGPU exposes no memory size), the rest in WASM. With weights 'gpu' only
   * the GPU layers' matrices go to GPU memory; the CPU layers' and the classifier go into the
   * heap ('out_of_memory' with the sizes when neither holds them). info.device gives gpuLayers,
   * cpuLayers and the reason. A whole number in [0, layers] or 'auto', else 'bad_argument'; a
   * count above 0 cannot go with device 'wasm'. Encoders run whole on one side.
   */
  gpuLayers?: number | 'auto';
  /** The WebGPU entry point; default navigator.gpu. In Node pass `create([])` from the 'webgpu' package. */
  gpu?: object;
  /** Called with each warning (WebGPU unavailable or lost, and the fallback taken); default console.warn. */
  onWarning?: (warning: QkvWarning) => void;
  /**
   * A bound in bytes on what the model may take: the weights plus, for each session, the KV cache
   * of its whole context and a row of logits (the cache grows as tokens come). Checked before
   * anything is allocated for them: a model whose declared context or vocabulary needs more fails
   * to load, and a createSession() that would pass it fails, with 'out_of_memory' and the sizes.
   * Default: none (the wasm32 heap's 4 GiB still bounds the file).
   */
  maxMemory?: number;
  /**
   * Images in chat: the vision-language model's mmproj GGUF (llama.cpp's; a URL, path, Blob or
   * bytes, as the model source) whose projector turns images into rows of this text model's
   * embedding space. Projector 'mlp' (LLaVA-style) runs; others are 'unsupported'. A projector of
   * another width than the model's is 'bad_model' naming both. Not with weights: 'gpu'.
   */
  mmproj?: ModelSource;
  /**
   * Keeps http(s) downloads of the model (each file of a split model) so a reload reads them
   * from local storage instead of the network; see docs/webgpu.md#model-cache. Default false.
   * true: in browsers OPFS where available, else the Cache API (neither in insecure contexts:
   * then no cache); in Node the directory $XDG_CACHE_HOME/qkv/models (~/.cache/qkv/models).
   * A cut download resumes with a Range request; too little storage fails with 'quota'.
   */
  cache?: CacheOption;
}

/**
 * The model cache: false (none), true (the default store), a browser store by name, or
 * {backend, dir (Node: the directory), segmentBytes (the unit kept whole: what a cut download
 * can lose; default 32 MiB)}.
 */
export type CacheOption = boolean | 'opfs' | 'cache-api' | { backend?: 'auto' | 'opfs' | 'cache-api'; dir?: string; segmentBytes?: number };

/** One download in the model cache. */
export interface CachedModel {
  /** The file's URL (one entry per file of a split model). */
  url: string;
  /** Where it is kept: 'opfs', 'cache-api', or 'dir' (Node). */
  backend: 'opfs' | 'cache-api' | 'dir';
  /** The file's size in bytes. */
  size: number;
  /** Bytes kept so far (less than size: an interrupted download, resumed by the next load). */
  cachedBytes: number;
  complete: boolean;
  /** The server's validators, sent back to revalidate and to resume. */
  etag: string | null;
  lastModified: string | null;
  /** When the entry last changed (ms since the epoch). */
  updated: number | null;
}

/** Options of the model-cache calls: which store to look at (default: every store of this browser; in Node the default directory). */
export interface CacheManageOptions {
  cache?: CacheOption;
}

/** The model cache's entries. */
export declare function listCachedModels(options?: CacheManageOptions): Promise<CachedModel[]>;
/** Deletes a model's cached files (every part of a split model); resolves to how many entries there were. */
export declare function deleteCachedModel(source: string | URL | Array<string | URL>, options?: CacheManageOptions): Promise<number>;
/** Deletes every cached model; resolves to the entries and bytes removed. */
export declare function clearModelCache(options?: CacheManageOptions): Promise<{ entries: number; bytes: number }>;

/** A non-fatal problem: the work goes on, on a fallback. */
export interface QkvWarning {
  code: 'webgpu_unavailable' | 'webgpu_unsupported' | 'webgpu_failed' | 'webgpu_f16_unavailable';
  message: string;
}

/** Where a model runs, and why. */
export interface DeviceInfo {
  kind: 'webgpu' | 'wasm';
  requested: 'auto' | 'webgpu' | 'wasm';
  reason: string;
  adapter?: { vendor: string; architecture: string; device: string; description: string };
  /** 'gpu': the weights are in GPU memory only (the weights load option, or 'auto' for a model too large for the heap). */
  weights?: 'gpu';
  /** Element type of the GPU KV cache (WebGPU only): 'f16' with gpuPrecision 'f16' on a device with shader-f16. */
  kvType?: 'f32' | 'f16';
  /**
   * Layers run on WebGPU (the first ones) and in WASM (the rest, with the final norm and the
   * classifier): gpuLayers + cpuLayers = info.layers. WASM: 0 and all. Set on Model's info
   * (not on encoder-decoder or image-encoder models, which run whole on one side).
   */
  gpuLayers?: number;
  cpuLayers?: number;
  /**
   * The 'auto' measurement: milliseconds of one decode step at `position` on each backend (the
   * GPU's with its logits read back; WASM on the model's threads), medians of a few steps; for
   * an encoder, of one embedding (`what`) instead.
   */
  measured?: { position?: number; what?: string; webgpuMs: number; wasmMs: number };
}

export interface SamplingOptions {
  /** 0 = greedy. Default 0.8. */
  temperature?: number;
  /** Keep the k most likely tokens; 0 = off (default). */
  topK?: number;
  /** Nucleus sampling mass in [0, 1]; 1 = off. Default 0.9. */
  topP?: number;
  /** Drop tokens below minP x the top probability; 0 = off (default). */
  minP?: number;
  /** > 1 discourages recently seen tokens; 1 = off (default). */
  repetitionPenalty?: number;
  /** How many recent tokens the penalty considers. Default 64. */
  repetitionWindow?: number;
  /**
   * Random seed (non-negative integer). The same seed, options and prompt give the same text;
   * with temperature + topP only, the same tokens as llama2.c's run.c. Default: random.
   */
  seed?: number;
}

export interface GenerateOptions extends SamplingOptions {
  /** Tokens to generate at most. Default 256. */
  maxTokens?: number;
  /** Stop when the text contains one of these; the stop string is not returned. */
  stop?: string | string[];
  /** Token ids that end generation without being returned. Default: BOS and EOS. */
  stopTokens?: number[];
  /** Stops generation; the iterator then throws QkvError('aborted'). */
  signal?: AbortSignal;
  /**
   * Constrained decoding: GBNF text (llama.cpp's grammar format; the start rule is `root`). Every
   * step samples only tokens that keep the output a prefix of the grammar's language, and the
   * end-of-generation tokens only once it is complete. Errors: QkvError('bad_argument') naming
   * the line and column.
   */
  grammar?: string;
  /**
   * Constrained decoding to JSON valid under this JSON Schema (an object, or its JSON text):
   * type, properties / required / additionalProperties, items / prefixItems / minItems /
   * maxItems, enum, const, anyOf / oneOf, $ref within the schema, minLength / maxLength,
   * pattern, format (date, time, date-time, uuid, email), integer minimum / maximum /
   * exclusiveMinimum / exclusiveMaximum (number ranges and multipleOf are not enforced). With
   * `grammar` too, the schema's value is the rule `schema` that the grammar places: e.g. grammar
   * 'root ::= "<json>" schema "</json>"'; a list of schemas with a grammar gives the rules
   * `schema-0`, `schema-1`, ...
   */
  jsonSchema?: object | boolean | string | Array<object | boolean>;
  /** OpenAI's penalties in [-2, 2] over the tokens generated so far: presence once, frequency per occurrence. */
  presencePenalty?: number;
  frequencyPenalty?: number;
  /** Added to token logits before sampling: {token id: bias in [-100, 100]}. */
  logitBias?: Record<number, number>;
  /**
   * Adds `logprob` (of the chosen token) and `topLogprobs` (this many alternatives, 0..20) to each
   * generated item, from the distribution the sampler drew from (logits after penalties, bias and
   * grammar, over the temperature, log-softmaxed; before top-k/top-p/min-p).
   */
  logprobs?: number;
}

export interface GeneratedToken {
  /** The token id (-1 for a final flush of held-back text). */
  token: number;
  /** Newly completed text: whole UTF-8 characters only, invalid bytes as U+FFFD. May be ''. */
  text: string;
  /** With options.logprobs: the token's log-probability. */
  logprob?: number;
  /** With options.logprobs: the most likely alternatives, most likely first. */
  topLogprobs?: Array<{ token: number; logprob: number }>;
}

export interface GenerationStats {
  promptTokens: number;
  /** Prompt tokens found in the session's KV cache and not recomputed. */
  reusedTokens: number;
  generatedTokens: number;
  prefillMs: number;
  decodeMs: number;
  finishReason: 'length' | 'stop' | 'context' | 'aborted';
  /** The seed used (the random default included), to reproduce the run. */
  seed: number;
}

export interface AttentionMap {
  /** Tokens fed in the captured call. */
  queries: number;
  /** Positions attended over (cache length after the call). */
  keys: number;
  /** Row-major (queries, keys): row i is the query at position keys - queries + i. */
  probs: Float32Array;
}

/**
 * Chat formats qkv can render without running the template (recognized from the GGUF's Jinja
 * chat template; used when the template itself cannot be run, see ModelInfo.chatTemplate).
 */
export type ChatFormat = 'chatml' | 'llama3' | 'llama2' | 'gemma' | 'phi3';

/** A JSON value, as chat templates receive tools, variables and message fields. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * One turn of a conversation for chat(). Fields besides role and content (tool_calls, name,
 * tool_call_id, reasoning_content, ...) reach the model's chat template as the message's
 * attributes; they, and the 'tool' role, need a template qkv runs (ModelInfo.chatTemplate 'jinja').
 */
/**
 * A part of a message's content: text, an image as OpenAI writes it (a data: URL; decoded where
 * vision.js's toRgba decodes: the browser's image decoders), or any ImageInput (raw RGBA
 * everywhere). Images need a model loaded with an mmproj; the parts' texts are joined by '\n'
 * with each image in its place, as llama.cpp's mtmd lays them out.
 */
export type ChatContentPart =
  | { type: 'text'; text: string }
  | { type: 'image_url'; image_url: { url: string } | string }
  | { type: 'image'; image: ImageInput };

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  /** null only for an assistant turn that just calls tools (tool_calls); rendered as ''. */
  content: string | ChatContentPart[] | null;
  [field: string]: JsonValue | ChatContentPart[] | undefined;
}

/** What the model's chat template receives besides the messages. */
export interface ChatTemplateOptions {
  /** Tool definitions, the template's `tools` (e.g. [{type: 'function', function: {name, description, parameters}}]). */
  tools?: JsonValue[];
  /**
   * Further template variables, e.g. {enable_thinking: false} for Qwen 3 or {documents: [...]}.
   * messages, add_generation_prompt, bos_token, eos_token and the template functions are qkv's
   * (setting them is a bad_argument error). Tools or variables with a model whose template qkv
   * renders by hand (chatTemplate 'builtin' or 'none') are an 'unsupported' error.
   */
  templateVars?: { [name: string]: JsonValue };
}

/** Options of chat(): generation options and what the chat template receives. */
export interface ChatOptions extends GenerateOptions, ChatTemplateOptions {}

/** An mmproj joined to a text model (images in chat). */
export interface MmprojInfo {
  /** clip.projector_type: 'mlp' (LLaVA: linear, GELU, linear). */
  projector: string;
  /** The vision tower's input side (images are padded to a square, then resized to it). */
  imageSize: number;
  patchSize: number;
  /** Tokens each image takes in the prompt (its patches). */
  imageTokens: number;
  /** Vision layers run (LLaVA: all but the last). */
  visionLayers: number;
  visionDim: number;
  /** Width of the image tokens' rows: the text model's embedding width. */
  dim: number;
}

export interface ModelInfo {
  arch: string;
  description: string;
  dim: number;
  hiddenDim: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  vocabSize: number;
  /** Trained context length in tokens. */
  contextLength: number;
  norm: 'rmsnorm' | 'layernorm';
  positional: string;
  ffn: string;
  tiedClassifier: boolean;
  /** BOS id (-1: the tokenizer has none). */
  bosId: number;
  /** EOS id (-1: none). */
  eosId: number;
  /** Ids that end a generation (EOS, end-of-turn tokens); generate() stops at these, at BOS and at EOS by default. */
  eogIds: number[];
  /** Whether tokenize() puts BOS first (GGUF: tokenizer.ggml.add_bos_token). */
  addBos: boolean;
  /**
   * 'sentencepiece' (llama2.c, GGUF `llama`), 'bpe' (GGUF `gpt2`, byte-level), 'wordpiece'
   * (GGUF `bert`), 'unigram' (GGUF `t5`), 'rwkv' (GGUF `rwkv`, RWKV World), 'none' (not loaded yet).
   */
  tokenizer: 'sentencepiece' | 'bpe' | 'wordpiece' | 'unigram' | 'rwkv' | 'none';
  /** True for encoder-only models (BERT, Nomic BERT): they give embeddings (embed()), not text. */
  encoder: boolean;
  /**
   * The model's pooling (GGUF `*.pooling_type`; mean if none). 'rank': a reranker, whose embed()
   * pools by 'cls' and whose rerank() scores documents.
   */
  pooling: EmbedPooling | 'rank';
  /** True for rerankers (rank pooling and a classification head): rerank() works. */
  reranker: boolean;
  /** Chat format recognized from the model's tokenizer.chat_template (the built-in rendering). */
  chatFormat: ChatFormat;
  /**
   * True when chat() can neither run the model's template nor recognize its format (or there
   * is no template) and falls back to ChatML.
   */
  chatFormatGuessed: boolean;
  /**
   * How chat() renders a conversation: 'jinja' runs the model's own template (qkv's Jinja
   * subset, byte-identical to Jinja2 / Hugging Face for what it supports), 'builtin' renders
   * chatFormat by hand (the template uses Jinja that the subset lacks), 'none' (no template).
   */
  chatTemplate: 'jinja' | 'builtin' | 'none';
  /**
   * Why chatTemplate is 'builtin' (or chatFormatGuessed is true with a template): the construct
   * qkv's Jinja subset lacks or the error the template ran into, e.g. "chat template: the filter
   * 'random' (...) (unsupported)". Empty when the model's template is used or there is none.
   */
  chatFallbackReason: string;
  /** The mmproj loaded with the model (LoadOptions.mmproj), or null: images in chat. */
  mmproj: MmprojInfo | null;
  /**
   * The attention kind of each layer (docs/attention-kinds.md): 'softmax' (scaled dot-product),
   * 'linear', 'additive' (Bahdanau: v . tanh(W_q q + W_k k)), 'block_sparse' (softmax over the
   * sparsePattern's key blocks). Encoder-decoder models: the encoder's.
   */
  attentionKinds: AttentionKind[];
  /** Width of the additive layers' tanh layer; 0 when no layer is additive. */
  additiveLength: number;
  /** The block-sparse layers' pattern; null when no layer is block-sparse. */
  sparsePattern: SparsePattern | null;
  threads: number;
  /** The kernels' instruction set: 'wasm' (SIMD128) or 'wasm-relaxed' (relaxed SIMD); natively e.g. 'avx512bw'. */
  simd: string;
  /** Why this WebAssembly build was picked (the `simd` load option). */
  simdReason: string;
  /** Where attention runs now (after any fallback). */
  backend: 'webgpu' | 'wasm';
  device: DeviceInfo;
  threading: { mode: 'pthreads' | 'single'; reason: string; threads: number };
  memory: ModelMemory;
}

/** Where a model's bytes are: the WebAssembly heap, GPU buffers, and a GPU-resident load's staging. */
export interface ModelMemory {
  /** The model file's bytes (the first file of a split model). */
  weightBytes: number;
  /** Sessions' CPU KV caches. */
  kvCacheBytes: number;
  /** Sessions' GPU KV caches. */
  gpuKvCacheBytes: number;
  /** The whole WebAssembly heap (it never shrinks: its peak). */
  heapBytes: number;
  /** Weights in the heap: the whole file for a load through the heap; with weights: 'gpu' the vectors only. */
  heapWeightBytes: number;
  /** Weights in GPU buffers (0 in WASM). */
  gpuWeightBytes: number;
  /** GPU buffers of weights and KV caches. */
  gpuBufferBytes: number;
  /** The staging buffer a weights: 'gpu' load streamed through (freed once loaded); 0 otherwise. */
  stagingBytes: number;
}

export type AttentionKind = 'softmax' | 'linear' | 'additive' | 'block_sparse';

/**
 * Which keys a block-sparse layer's queries see (besides causality): blocks of blockSize
 * positions; a query sees its own block and windowBlocks blocks either side, the first
 * globalTokens positions (which also see everything), and randomBlocks blocks drawn from seed.
 */
export interface SparsePattern {
  blockSize: number;
  windowBlocks: number;
  globalTokens: number;
  randomBlocks: number;
  seed: number;
}

/** How embed() turns per-token states into one vector: their mean, the first ([CLS]) token's, or the last token's. */
export type EmbedPooling = 'mean' | 'cls' | 'last';

export interface RerankOptions {
  /** How many results to return, best first (default all). */
  topN?: number;
  /** Documents per encoder pass (default 32; 1..4096). */
  batchSize?: number;
  /** Checked between passes; aborting rejects with QkvError code 'aborted'. */
  signal?: AbortSignal;
}

/** One document's relevance, from Model.rerank. */
export interface RerankResult {
  /** The document's position in the list given. */
  index: number;
  /** The classification head's first output, as llama.cpp's /rerank reports it (not squashed). */
  score: number;
  /** Tokens of the (query, document) pair. */
  tokens: number;
}

export interface EmbedOptions {
  /** Default: the model's (info.pooling). */
  pooling?: EmbedPooling;
  /** Scale each vector to unit L2 length (default true), as llama.cpp's embedding API does. */
  normalize?: boolean;
  /**
   * A text longer than the model's context: refused with 'bad_argument' (false, the default), or
   * cut to its first tokens plus its closing one ([SEP]) (true).
   */
  truncate?: boolean;
  /** Texts per encoder pass (default 32; 1..4096). Each pass is one synchronous WASM call. */
  batchSize?: number;
  /** Checked between passes; aborting rejects with QkvError code 'aborted'. */
  signal?: AbortSignal;
}

/** A conversation with its own KV cache. */
export declare class Session {
  private constructor();
  /** Tokens held in the KV cache. */
  readonly tokens: number[];
  /** Position of the next token (= tokens.length). */
  readonly position: number;
  readonly contextLength: number;
  /** Figures of the last generate() call. */
  lastGeneration: GenerationStats | null;
  /**
   * Streams text. The prompt is the whole text so far: the longest prefix already in the cache
   * is reused, so a follow-up that extends the previous text only prefills the new tokens.
   * One generation per session at a time: another one started before this one ends (finishes,
   * is left with break/return(), or is aborted) rejects with 'busy' on its first step. Nothing is
   * computed ahead of the consumer: a stream that is not read does no work.
   */
  generate(prompt: string, options?: GenerateOptions): AsyncGenerator<GeneratedToken, void, undefined>;
  /** Generates and returns the whole text. */
  complete(prompt: string, options?: GenerateOptions): Promise<string>;
  /**
   * Streams the assistant's reply to `messages`, rendered in the model's chat format (info.chatFormat)
   * with its control tokens parsed; stops at the model's end-of-turn tokens. A follow-up call whose
   * messages extend the previous conversation reuses the KV cache.
   */
  chat(messages: ChatMessage[], options?: ChatOptions): AsyncGenerator<GeneratedToken, void, undefined>;
  /** Where this session's forward runs ('wasm' after a GPU failure). */
  readonly backend: 'webgpu' | 'wasm';
  /**
   * Appends token ids to the cache and computes them in one pass; allLogits keeps every token's
   * logits. On a WebGPU session it returns a Promise (the GPU is asynchronous): `await` it, which
   * works on both backends.
   */
  feed(tokens: ArrayLike<number>, options?: { allLogits?: boolean }): void | Promise<void>;
  /**
   * Makes the cache hold exactly `tokens`, reusing the cached prefix. Returns tokens computed
   * (a Promise of it on a WebGPU session: `await` it).
   */
  prefill(tokens: ArrayLike<number>): number | Promise<number>;
  /** Logits of the last token fed, or of token i of the last allLogits feed: Float32Array(vocabSize). */
  logits(i?: number): Float32Array;
  /**
   * Picks the next token from the current logits (does not feed it). A loop of sample() and
   * feed([token]) with the same options draws from one random stream, as generate() does, so a
   * seed gives generate()'s tokens. The stream starts again (from `seed`, or a new random one)
   * when the options change or the cache is not exactly one token longer than at the last
   * sample(): a new prompt, truncate(), reset(), or sample() twice without a feed (which
   * therefore gives the same token twice).
   */
  sample(options?: SamplingOptions): number;
  /** Forgets cached tokens from position n on. */
  truncate(n: number): void;
  /** Empties the cache. */
  reset(): void;
  /** Record attention probabilities on the next feeds (off by default: it costs time and memory). */
  captureAttention: boolean;
  /** Attention probabilities of the last feed for one layer and head. */
  attention(layer: number, head: number): AttentionMap;
  /** Frees the KV cache. Idempotent. */
  dispose(): void;
}

/** A loaded model; its weights live once in the WASM heap and are shared by its sessions. */
export declare class Model {
  private constructor();
  readonly info: ModelInfo;
  /** Warnings so far (WebGPU unavailable or lost, with the fallback taken). */
  readonly warnings: QkvWarning[];
  /** The default session used by generate()/complete(). */
  readonly session: Session;
  /**
   * Loads this model again from the same source with the same options, disposes this one and
   * returns the new one (after 'webgpu_failed'). 'unsupported' for a source of one-time chunks.
   */
  reload(): Promise<Model>;
  createSession(options?: { contextLength?: number }): Session;
  generate(prompt: string, options?: GenerateOptions): AsyncGenerator<GeneratedToken, void, undefined>;
  complete(prompt: string, options?: GenerateOptions): Promise<string>;
  /** Streams a chat reply from the default session; see Session.chat. */
  chat(messages: ChatMessage[], options?: ChatOptions): AsyncGenerator<GeneratedToken, void, undefined>;
  /**
   * The prompt text chat() would feed for `messages` (control tokens spelled out): the model's
   * chat template with options' tools and templateVars, ending with the assistant's turn opener
   * unless addGenerationPrompt is false.
   */
  applyChatTemplate(messages: ChatMessage[], options?: ChatTemplateOptions & { addGenerationPrompt?: boolean }): string;
  /** Text to token ids, BOS first (where the model adds one) unless { bos: false }; special: parse control tokens in the text. */
  /**
   * The block-sparse pattern (info.sparsePattern) as a mask: rows for queries at positions
   * queryStart.. (queries of them), columns for keys 0..keys-1; 1 where the pattern lets the query
   * see the key (before causality). Throws 'bad_argument' when the model has no block-sparse layer.
   */
  sparseMask(options: { queryStart?: number; queries: number; keys: number }): Uint8Array;
  tokenize(text: string, options?: { bos?: boolean; special?: boolean }): number[];
  /**
   * Token ids to text; BOS/EOS skipped; invalid UTF-8 becomes U+FFFD. The dummy-prefix space the
   * tokenizer adds is dropped only after BOS, so detokenize(tokenize(t)) === t, while ids from
   * tokenize(t, { bos: false }) decode to " " + t.
   */
  detokenize(ids: ArrayLike<number>): string;
  /**
   * Sentence embeddings: one Float32Array of info.dim numbers per text, in order (a single string
   * counts as a list of one). Texts longer than the model's context, an empty list and non-strings
   * are refused with QkvError code 'bad_argument'.
   */
  embed(texts: string | string[], options?: EmbedOptions): Promise<Float32Array[]>;
  /** Texts and tokens of the last embed() call. */
  lastEmbedding: { texts: number; tokens: number } | null;
  /**
   * Reranker models (info.reranker): each document scored with the query as llama.cpp pairs and
   * scores them, highest first. A model that is no reranker: QkvError 'unsupported'; an empty
   * list, non-strings or a pair longer than the context: 'bad_argument'.
   */
  rerank(query: string, documents: string[], options?: RerankOptions): Promise<RerankResult[]>;
  /** Frees the model and all its sessions. Idempotent. */
  dispose(): void;
}

/** What an encoder-decoder model (t5 GGUF) reports: ModelInfo's fields (less the encoder-only ones) plus its two stacks. */
export interface EncoderDecoderInfo extends Omit<ModelInfo, 'encoder' | 'pooling'> {
  encoderDecoder: true;
  /** Encoder layers (= layers). */
  encoderLayers: number;
  decoderLayers: number;
  /** The first decoder input (T5: the pad token, 0). */
  decoderStartId: number;
  /** Attention kind of each decoder layer's self-attention (attentionKinds: the encoder's). */
  decoderAttentionKinds: AttentionKind[];
  /** Attention kind of each decoder layer's cross-attention. */
  crossAttentionKinds: AttentionKind[];
}

/**
 * Attention of an encoder-decoder model for one source and target. Maps are arrays of rows
 * (Float32Array), one per query token; rows sum to 1. Target rows start with the decoder start token.
 */
export interface EncoderDecoderInspection {
  heads: number;
  encoderLayers: number;
  decoderLayers: number;
  sourceTokens: { id: number; text: string }[];
  /** The decoder start token ('<start>') first, then the target. */
  targetTokens: { id: number; text: string }[];
  /** Encoder self-attention, source x source. */
  encoder(layer: number, head: number): Float32Array[];
  /** Decoder causal self-attention, target x target. */
  self(layer: number, head: number): Float32Array[];
  /** Cross-attention, target x source: the alignment of each target token over the source. */
  cross(layer: number, head: number): Float32Array[];
}

/**
 * An encoder-decoder model (GGUF `t5`): the encoder reads a source once, the decoder generates
 * the target with cross-attention over it. Runs in WASM (no WebGPU path yet).
 */
export declare class EncoderDecoderModel {
  private constructor();
  readonly info: EncoderDecoderInfo;
  readonly warnings: QkvWarning[];
  /** Figures of the last generate() call (promptTokens counts the source). */
  lastGeneration: GenerationStats | null;
  /** Streams the target generated from `source`; same items and options as Model.generate. */
  generate(source: string, options?: GenerateOptions): AsyncGenerator<GeneratedToken, void, undefined>;
  complete(source: string, options?: GenerateOptions): Promise<string>;
  /** Text to ids: by default as the encoder takes a source (EOS appended); { source: false } for the bare pieces. */
  /**
   * The block-sparse pattern as a mask (Model.sparseMask); causal: true for the decoder's
   * self-attention, false for the encoder's and cross-attention (default false).
   */
  sparseMask(options: { queryStart?: number; queries: number; keys: number; causal?: boolean }): Uint8Array;
  tokenize(text: string, options?: { source?: boolean; special?: boolean }): number[];
  /** Target ids to text (control tokens skipped). */
  detokenize(ids: ArrayLike<number>): string;
  /** Attention maps for `source` and a target (text or ids; default: the greedy target, up to maxTokens). */
  inspect(source: string, options?: { target?: string | number[]; maxTokens?: number }): Promise<EncoderDecoderInspection>;
  /** Throws QkvError('unsupported'): encoder-decoder models have no chat format. */
  chat(...args: unknown[]): never;
  /** Throws QkvError('unsupported'): one decoder state per model. */
  createSession(...args: unknown[]): never;
  dispose(): void;
}

/** Raw pixels, row-major RGBA (4 bytes a pixel; alpha is ignored). ImageData has this shape. */
export interface RawImage {
  data: Uint8Array | Uint8ClampedArray;
  /** 1..16384 */
  width: number;
  /** 1..16384 */
  height: number;
}

/**
 * What embedImage() takes: raw RGBA everywhere; the bytes of a PNG, JPEG or binary PPM/PGM file
 * everywhere (a Uint8Array, Node Buffer or ArrayBuffer, told apart by content and decoded by
 * qkv's own decoders: baseline and progressive JPEG, every PNG colour type and bit depth); a Blob
 * or File everywhere (browsers decode it with createImageBitmap, so GIF, WebP and BMP work there
 * too; Node with qkv's decoders); in the browser also what the platform draws on a canvas.
 * Corrupt or oversized files are rejected with 'bad_argument', CMYK, arithmetic-coded, lossless
 * and 12-bit JPEG with 'unsupported'.
 */
export type ImageInput = RawImage | Uint8Array | ArrayBuffer | ImageData | ImageBitmap | HTMLImageElement | HTMLCanvasElement | OffscreenCanvas | HTMLVideoElement | VideoFrame | Blob;

export interface ImageEmbedOptions {
  /** 'cls': the class token's final state; 'mean': the average over the patches. Default: 'cls' when the model has a class token (CLIP), else 'mean' (SigLIP). */
  pooling?: 'cls' | 'mean';
  /** Unit L2 length (default true). */
  normalize?: boolean;
  /** Through the model's visual_projection when it has one (default true); info.embeddingDim numbers, else info.dim. */
  project?: boolean;
  /** The encoder's input side in pixels, a multiple of info.patchSize (default info.imageSize); other sizes interpolate the learned positions (bicubic, as PyTorch's F.interpolate). */
  size?: number;
  /** 'crop': shorter side to `size`, then the centre square (CLIP's processor); 'squash': straight to size x size (SigLIP's). Default info.resize. */
  resize?: 'crop' | 'squash';
  /** Checked before the work starts. */
  signal?: AbortSignal;
}

export interface ImageClassifyOptions {
  /** How many classes to return, most likely first (default 5; at most the number of classes). */
  topK?: number;
  /** As in ImageEmbedOptions. */
  size?: number;
  /** As in ImageEmbedOptions. */
  resize?: 'crop' | 'squash';
  /** Checked before the work starts. */
  signal?: AbortSignal;
}

/** One class of classifyImage()'s answer. */
export interface ImageClass {
  /** The class's row in v.head.weight. */
  index: number;
  /** Its name from clip.vision.labels. */
  label: string;
  /** Softmax probability (all classes' sum to 1). */
  probability: number;
}

/** The attention of an image encoder for one image (ImageEncoderModel.inspectImage). */
export interface ImageInspection {
  embedding: Float32Array;
  /** Query and key rows: the class token (if any) then gridHeight * gridWidth patches. */
  rows: number;
  classToken: boolean;
  gridHeight: number;
  gridWidth: number;
  layers: number;
  heads: number;
  /** `rows` rows of `rows` softmax probabilities (each sums to 1); row 0 is the class token's when there is one. */
  attention(layer: number, head: number): Float32Array[];
}

/** What an image encoder (an mmproj GGUF's vision tower) reports. */
export interface ImageEncoderInfo {
  arch: 'clip';
  imageEncoder: true;
  description: string;
  /** Width of the encoder's states. */
  dim: number;
  hiddenDim: number;
  layers: number;
  heads: number;
  headDim: number;
  patchSize: number;
  /** The input side the position table was learned for. */
  imageSize: number;
  classToken: boolean;
  ffn: 'gelu' | 'quick-gelu';
  /** The default pooling. */
  pooling: 'cls' | 'mean';
  /** Rows of visual_projection (0: none). */
  projectionDim: number;
  /** Length of embedImage()'s vectors by default. */
  embeddingDim: number;
  /** The default resize mode. */
  resize: 'crop' | 'squash';
  /** Per channel (R, G, B), on the 0..1 scale: (v / 255 - mean) / std. */
  imageMean: number[];
  imageStd: number[];
  /** clip.projector_type of the file ('' if none): the VLM projector, not run by embedImage. */
  projector: string;
  /** The classifier head's class names (clip.vision.labels), in class order; empty when the file has no head. */
  labels: readonly string[];
  weightBytes: number;
  threads: number;
  simd: string;
  backend: 'wasm';
  device: DeviceInfo;
  threading: ModelInfo['threading'];
  simdReason: string;
  memory: ModelInfo['memory'];
}

/**
 * An image encoder: the CLIP or SigLIP vision tower of a llama.cpp mmproj GGUF
 * (general.architecture "clip"), a Vision Transformer run in WASM. See docs/vision.md.
 */
export declare class ImageEncoderModel {
  private constructor();
  readonly info: ImageEncoderInfo;
  readonly warnings: QkvWarning[];
  /**
   * One image's embedding (info.embeddingDim numbers, or info.dim with { project: false }).
   * Bad images (wrong byte count, zero or huge sides, undecodable Blobs) and options: QkvError
   * 'bad_argument'; a Blob where no decoder exists (Node): 'unsupported'.
   */
  embedImage(image: ImageInput, options?: ImageEmbedOptions): Promise<Float32Array>;
  /**
   * embedImage() and where the encoder looked: every layer's and head's attention over the class
   * token (if any) and the patches (row-major from the top-left one).
   */
  inspectImage(image: ImageInput, options?: ImageEmbedOptions): Promise<ImageInspection>;
  /**
   * The topK likeliest classes through the model's classifier head (info.labels not empty):
   * softmax of v.head.weight x pooled state + v.head.bias, the pooled state taken before any
   * projection. No head: QkvError 'unsupported'; bad images and options: 'bad_argument'.
   */
  classifyImage(image: ImageInput, options?: ImageClassifyOptions): Promise<ImageClass[]>;
  /** embedImage() over a list, in order. */
  embedImages(images: ImageInput[], options?: ImageEmbedOptions): Promise<Float32Array[]>;
  dispose(): void;
}

/**
 * Loads a GGUF model or a llama2.c checkpoint with its tokenizer. A `t5` GGUF gives an
 * EncoderDecoderModel, an mmproj / `clip` GGUF an ImageEncoderModel: name it as the type
 * argument (loadModel<ImageEncoderModel>(...)) or check `model instanceof ImageEncoderModel`.
 */
export declare function loadModel<M extends Model | EncoderDecoderModel | ImageEncoderModel = Model>(source: ModelFiles, options?: LoadOptions): Promise<M>;

/** Weight types quantize() writes (the native CLI's `qkv quantize --type`). */
export type QuantizeType = 'q8_0' | 'q4_0' | 'q4_1' | 'q5_0' | 'q5_1' | 'q4_k' | 'q5_k' | 'f16' | 'bf16' | 'f32';
export declare const QUANTIZE_TYPES: readonly QuantizeType[];

export interface QuantizeProgress {
  /** 'read': model bytes read into the heap; 'quantize': values re-encoded. */
  phase: 'read' | 'quantize';
  done: number;
  /** null while reading a source of unknown length. */
  total: number | null;
}

export interface QuantizeOptions {
  /** Target type; q4_k and q5_k are llama.cpp's Q4_K_M / Q5_K_M mixes (classifier and some layers at Q6_K). */
  type: QuantizeType;
  /** A llama2.c checkpoint's tokenizer.bin (embedded in the output); ignored for GGUF input. */
  tokenizer?: ModelSource;
  /** general.name of a converted llama2.c checkpoint (default 'model'). */
  name?: string;
  onProgress?: (p: QuantizeProgress) => void;
  /**
   * Receives the output file in order, chunk by chunk (each chunk is a copy the callee owns);
   * with it, `bytes` in the result is null and no whole copy of the output is kept.
   */
  onChunk?: (chunk: Uint8Array) => void;
  /** Checked before reading and before re-encoding (the re-encoding itself runs to the end). */
  signal?: AbortSignal;
  /**
   * Re-encode an input whose weight matrices are already of a block type (e.g. Q8_0 -> Q4_0).
   * Default false: such an input is refused with a `bad_argument` QkvError, since a second
   * rounding loses more than quantizing the F32/F16 original. Widening (to f32/f16/bf16) is
   * always allowed. The CLIs' `--allow-requantize`.
   */
  allowRequantize?: boolean;
}

export interface QuantizedTensorReport {
  name: string;
  /** GGUF type names, e.g. 'F32', 'Q5_K'. */
  from: string;
  to: string;
  /** Why `to` differs from the requested type ('' when it does not). */
  note: string;
}

export interface QuantizeResult {
  /** The new GGUF file (null when options.onChunk took the chunks). */
  bytes: Uint8Array | null;
  /** Bytes of the input: every file of a split model. */
  inBytes: number;
  outBytes: number;
  fromGguf: boolean;
  /** The input was a Hugging Face checkpoint (its files or directory). */
  fromHuggingFace: boolean;
  tensors: QuantizedTensorReport[];
}

/**
 * Re-encodes a model's weight matrices (GGUF of any architecture qkv reads, or a llama2.c
 * checkpoint with options.tokenizer) to a block type, keeping every metadata key: the same file,
 * byte for byte, as the native `qkv quantize`. A split GGUF model (its files, or the path or URL
 * of its first) becomes one file, without the split.* keys. Memory: the input plus one chunk of rows.
 */
export declare function quantize(source: ModelFiles, options: QuantizeOptions): Promise<QuantizeResult>;
// ---- training -------------------------------------------------------------------------------

/** The shape of a fresh model (llama layout: RMSNorm, RoPE, SwiGLU, tied classifier). */
export interface TrainShape {
  /** Residual width (a multiple of heads; dim / heads even). */
  dim: number;
  layers: number;
  /** Query heads. */
  heads: number;
  /** Key/value heads (divides heads; fewer is grouped-query attention). Default: heads. */
  kvHeads?: number;
  /** Feed-forward inner width. */
  hiddenDim: number;
}

export type TrainPreset = 'tiny' | 'small' | 'medium';

/** Presets: shape plus the default seq and vocab for it. */
export declare const TRAIN_PRESETS: Readonly<Record<TrainPreset, Readonly<TrainShape & { seq: number; vocab: number }>>>;

/** The attention kinds a trained layer may use. */
export type TrainAttentionKind = 'softmax' | 'additive' | 'block_sparse';

export interface TrainOptions {
  /** The training text (UTF-8; blank lines separate documents). The last valFraction is held out. */
  text: string | ArrayBuffer | ArrayBufferView | Blob;
  /** A GGUF model to fine-tune (llama, f32/f16 weights, tied classifier). Omit for a fresh model. */
  model?: string | URL | Blob | ArrayBuffer | ArrayBufferView;
  /** A fresh model's shape: a preset (default 'tiny') or sizes. Not with `model`. */
  shape?: TrainPreset | TrainShape;
  /** {vocab}: learn a BPE of that many pieces (260..65536) from the text; or a tokenizer GGUF. */
  tokenizer?: { vocab: number } | string | URL | Blob | ArrayBuffer | ArrayBufferView;
  /** Tokens per training sequence (a fresh model's context length). */
  seq?: number;
  /** Sequences per step (default 8). */
  batch?: number;
  /** Optimizer steps of the run (default 200); the learning rate schedule spans them. */
  steps?: number;
  /** Linear warm-up steps (default steps / 10, at most 100), then a cosine down to minLr. */
  warmup?: number;
  /** Peak learning rate (default 1e-3). */
  lr?: number;
  /** Final learning rate (default lr / 10). */
  minLr?: number;
  weightDecay?: number;
  /** Gradient-norm clipping (default 1; 0 = off). */
  clip?: number;
  beta1?: number;
  beta2?: number;
  /** Initialisation and batch sampling: the same seed and thread count give the same losses. */
  seed?: number;
  /** Share of the token stream held out for evaluate() (default 0.05, at most 0.5). */
  valFraction?: number;
  /** Batches evaluate() averages over (default 4). */
  evalBatches?: number;
  /** Refuse (code 'out_of_memory') runs whose estimated memory exceeds this (default 2 GiB). */
  maxMemory?: number;
  /**
   * A fresh model's attention (docs/attention-kinds.md): one kind for every layer or one per
   * layer (default all 'softmax'). Not with `model` (a fine-tuned model keeps its kinds).
   */
  attention?: TrainAttentionKind | TrainAttentionKind[];
  /** Width of the additive layers' tanh layer (1..4096; default the head width). Needs an additive layer. */
  additiveDim?: number;
  /**
   * The block-sparse layers' pattern; fields left out take their defaults (blockSize 64,
   * windowBlocks 1, the others 0). Needs a block_sparse layer.
   */
  sparsePattern?: Partial<SparsePattern>;
  /** general.name of the GGUF that toGGUF() writes. */
  name?: string;
  /** As for loadModel: threads for the matrix work. */
  threads?: 'auto' | number;
  /** As for loadModel: which WebAssembly build (relaxed SIMD where available by default). */
  simd?: 'auto' | 'relaxed' | 'baseline';
  /**
   * 'auto' (default): on a page, a dedicated Worker (threads where the page is cross-origin
   * isolated); in Node and inside workers, this thread. true: always a worker; false: this thread.
   */
  worker?: 'auto' | boolean;
  /** Cancels creation (reading files, learning the tokenizer does not stop midway). */
  signal?: AbortSignal;
}

export interface TrainStep {
  /** 1-based index of the step. */
  step: number;
  /** Mean cross-entropy of the step's batch, nats per token. */
  loss: number;
  lr: number;
  /** Gradient norm before clipping. */
  gradNorm: number;
  /** Tokens in the batch. */
  tokens: number;
  /** Time of the step. */
  ms: number;
  /** Tokens per second over the steps so far. */
  tokensPerSecond: number;
  /** Held-out loss, on the steps run() evaluated (evalEvery). */
  valLoss?: number;
}

export interface TrainInfo {
  dim: number; hiddenDim: number; layers: number; heads: number; kvHeads: number;
  vocabSize: number;
  /** The model's context length (a fine-tuned model keeps its own). */
  contextLength: number;
  /** Tokens per training sequence. */
  seq: number;
  batch: number;
  steps: number;
  params: number;
  trainTokens: number;
  valTokens: number;
  threads: number;
  description: string;
  /** Each layer's attention kind, as Model.info reports them. */
  attentionKinds: AttentionKind[];
  /** Width of the additive layers' tanh layer (0: none). */
  additiveLength: number;
  /** The block-sparse layers' pattern (null: none). */
  sparsePattern: SparsePattern | null;
  /** Whether the engine runs in a worker. */
  worker: boolean;
  threading?: { mode: 'pthreads' | 'single'; reason: string; threads: number };
  /** The WebAssembly build: 'wasm' or 'wasm-relaxed', and why it was picked. */
  simd?: string;
  simdReason?: string;
}

export interface RunOptions {
  /** Called after each step; the next step waits for a returned promise; stop() here ends the run at this step. */
  onStep?: (step: TrainStep) => void | Promise<void>;
  /** Ends the run after the current step; the promise rejects with code 'aborted'. */
  signal?: AbortSignal;
  /** Evaluate every N steps and at the last step (TrainStep.valLoss). */
  evalEvery?: number;
  /** Run at most this many steps in this call. */
  maxSteps?: number;
}

export interface RunResult {
  stepsDone: number;
  /** True when stop() (or maxSteps) ended the run before all steps were done. */
  stopped: boolean;
  /** The last validation loss run() computed, or null. */
  valLoss: number | null;
}

/** A training run. In-process or in a worker, the same methods (all async). */
export interface Trainer {
  readonly info: TrainInfo;
  readonly stepsDone: number;
  /** All steps done. */
  readonly done: boolean;
  /** Every step so far. */
  readonly history: TrainStep[];
  step(): Promise<TrainStep>;
  /** Streams steps until done, stop() or abort; call again to resume. */
  run(options?: RunOptions): Promise<RunResult>;
  /** The same as run(), as an async iterator; leaving the loop stops. */
  steps(options?: { signal?: AbortSignal; evalEvery?: number }): AsyncIterableIterator<TrainStep>;
  /** Ends a run() in progress after its current step. */
  stop(): void;
  /** Mean loss on the held-out text (NaN when valFraction is 0). */
  evaluate(): Promise<number>;
  /** GGUF bytes (tokenizer embedded) that loadModel accepts. */
  toGGUF(options?: { name?: string; dtype?: 'f32' | 'f16' }): Promise<Uint8Array>;
  /** Parameters, optimizer moments and position: loadState() continues exactly. */
  saveState(): Promise<Uint8Array>;
  loadState(bytes: ArrayBuffer | ArrayBufferView): Promise<void>;
  dispose(): void | Promise<void>;
}

/** Trains a fresh model or fine-tunes one on text. Bad options reject with QkvError 'bad_argument'. */
export declare function createTrainer(options: TrainOptions): Promise<Trainer>;
