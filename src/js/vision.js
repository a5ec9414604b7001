// Image encoders (llama.cpp mmproj GGUF: CLIP / SigLIP vision towers) in the JS API:
// embedImage(image) takes raw RGBA {data, width, height} and the bytes of a PNG, JPEG or PPM/PGM
// file (Uint8Array / Buffer / ArrayBuffer, decoded by qkv's own decoders in WASM) everywhere, a
// Blob/File everywhere (browsers decode it with createImageBitmap, Node with qkv's decoders), and
// in the browser ImageData, ImageBitmap and image/canvas/video elements; preprocessing and the
// forward pass run in WASM.
import { QkvError, check, checkOptions, describe, throwIfAborted } from './errors.js';
import { call, yieldToLoop } from './util.js';

const IMAGE_POOLINGS = Object.freeze(['cls', 'mean']);
const RESIZE_MODES = Object.freeze(['crop', 'squash']);
const MAX_SIDE = 16384;
const MAX_PIXELS = 2 ** 26;  // the engine's limit (src/vision/image.h)


/** Raw RGBA {data, width, height} checked: the bytes JS hands to WASM. */
function checkRaw(img, what) {
  const { data, width, height } = img;
  check(Number.isInteger(width) && width >= 1 && width <= MAX_SIDE,
    `${what}: width must be an integer in 1..${MAX_SIDE}, got ${describe(width)}`);
  check(Number.isInteger(height) && height >= 1 && height <= MAX_SIDE,
    `${what}: height must be an integer in 1..${MAX_SIDE}, got ${describe(height)}`);
  check(width * height <= MAX_PIXELS, `${what}: the image is ${width}x${height}; at most ${MAX_PIXELS} pixels are read (scale it down first)`);
  check(data instanceof Uint8Array || data instanceof Uint8ClampedArray,
    `${what}: data must be a Uint8Array or Uint8ClampedArray of RGBA bytes, got ${describe(data)}`);
  check(data.length === width * height * 4,
    `${what}: data holds ${data.length} bytes; a ${width}x${height} RGBA image has ${width * height * 4}`);
  return img;
}

/**
 * Any supported image to raw RGBA. Browser sources are drawn on an OffscreenCanvas (or a canvas
 * element) and read back with getImageData; Blobs are decoded with createImageBitmap where it
 * exists (browsers), else, like encoded bytes, by qkv's PNG/JPEG/PPM decoders in `mod` (the
 * engine module: without it, encoded images are refused with 'unsupported').
 */
export async function toRgba(image, what = 'embedImage', mod = null) {
  if (image === null || typeof image !== 'object') {
    throw new QkvError('bad_argument', `${what} takes {data, width, height} (RGBA bytes), the bytes of a PNG or JPEG file, ImageData, ImageBitmap or a Blob, got ${describe(image)}`);
  }
  if (image instanceof ArrayBuffer) return decodeBytes(new Uint8Array(image), what, mod);
  if (image instanceof Uint8Array || image instanceof Uint8ClampedArray) return decodeBytes(image, what, mod);
  if (typeof Blob !== 'undefined' && image instanceof Blob) {
    if (typeof createImageBitmap !== 'function') return decodeBytes(new Uint8Array(await image.arrayBuffer()), what, mod);
    let bitmap;
    try {
      bitmap = await createImageBitmap(image);
    } catch (e) {
      throw new QkvError('bad_argument', `${what}: the image could not be decoded (${e?.message ?? e}); is it a PNG, JPEG, GIF, WebP or BMP file?`);
    }
    try { return drawn(bitmap, bitmap.width, bitmap.height, what); } finally { bitmap.close?.(); }
  }
  const drawable = ['ImageBitmap', 'HTMLImageElement', 'HTMLCanvasElement', 'OffscreenCanvas', 'HTMLVideoElement', 'VideoFrame', 'SVGImageElement']
    .some((k) => typeof globalThis[k] === 'function' && image instanceof globalThis[k]);
  if (drawable) {
    const w = image.naturalWidth ?? image.videoWidth ?? image.displayWidth ?? image.width;
    const h = image.naturalHeight ?? image.videoHeight ?? image.displayHeight ?? image.height;
    return drawn(image, w, h, what);
  }
  if ('data' in image && 'width' in image && 'height' in image) return checkRaw(image, what);  // ImageData too
  throw new QkvError('bad_argument', `${what} takes {data, width, height} (RGBA bytes), the bytes of a PNG or JPEG file, ImageData, ImageBitmap or a Blob, got ${describe(image)}`);
}

/** A PNG, JPEG or PPM/PGM file's bytes -> {data, width, height} through the engine's decoders. */
function decodeBytes(bytes, what, mod) {
  if (!mod?.decodeImage) {
    throw new QkvError('unsupported', `${what}: encoded image bytes are decoded by the engine: pass them to a loaded image encoder's embedImage`);
  }
  if (bytes.length === 0) throw new QkvError('bad_argument', `${what}: the image is empty (0 bytes)`);
  const buf = call(() => new mod.Buffer(bytes.length));
  try {
    buf.view().set(bytes);
    return call(() => mod.decodeImage(buf));
  } catch (e) {
    throw new QkvError(e.code ?? 'bad_argument', `${what}: ${e.message}`);
  } finally {
    buf.delete();
  }
}

/**
 * The view inspectImage() returns, from the engine's raw result {embedding, attention (one
 * Float32Array of layers * heads * rows * rows), rows, gridHeight, gridWidth} (the worker builds
 * the same view from the same raw result).
 */
export function imageInspection(r, { layers, heads, classToken }) {
  const n = r.rows, maps = r.attention;
  return {
    embedding: r.embedding, rows: n, classToken, gridHeight: r.gridHeight, gridWidth: r.gridWidth, layers, heads,
    attention(layer, head) {
      check(Number.isInteger(layer) && layer >= 0 && layer < layers, `layer must be 0..${layers - 1}, got ${describe(layer)}`);
      check(Number.isInteger(head) && head >= 0 && head < heads, `head must be 0..${heads - 1}, got ${describe(head)}`);
      const base = (layer * heads + head) * n * n;
      return Array.from({ length: n }, (_, i) => maps.subarray(base + i * n, base + (i + 1) * n));
    },
  };
}

function drawn(source, width, height, what) {
  check(width >= 1 && height >= 1 && width <= MAX_SIDE && height <= MAX_SIDE,
    `${what}: the image is ${width}x${height}; sides must be 1..${MAX_SIDE}`);
  const canvas = typeof OffscreenCanvas === 'function' ? new OffscreenCanvas(width, height)
    : Object.assign(document.createElement('canvas'), { width, height });
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  ctx.drawImage(source, 0, 0, width, height);
  return ctx.getImageData(0, 0, width, height);
}

/** A loaded image encoder (info.imageEncoder is true): CLIP / SigLIP from an mmproj GGUF. */
export class ImageEncoderModel {
  /** @internal */
  constructor(mod, handle, runtime, requested = 'wasm') {
    this._mod = mod;
    this._h = handle;
    this._runtime = runtime;
    this._requested = requested;
    this._info = call(() => handle.info());
    this._info.imageMean = Array.from(this._info.imageMean);
    this._info.imageStd = Array.from(this._info.imageStd);
    this._info.labels = Object.freeze(Array.from(this._info.labels));
    this.warnings = [];
  }

  _live() {
    if (!this._h) throw new QkvError('disposed', 'this model was disposed');
    return this._h;
  }

  /**
   * Architecture, sizes (patchSize, imageSize, embeddingDim), preprocessing, labels (the
   * classifier head's class names; empty without one), threads, memory.
   */
  get info() {
    this._live();
    const i = this._info;
    return {
      ...i,
      backend: 'wasm',
      device: { kind: 'wasm', requested: this._requested, reason: 'image encoders run in WASM' },
      threading: { ...this._runtime.threading, threads: i.threads },
      simdReason: this._runtime.simd.reason,
      memory: { weightBytes: i.weightBytes, kvCacheBytes: 0, gpuKvCacheBytes: 0, heapBytes: this._mod.HEAPU8 ? this._mod.HEAPU8.byteLength : 0 },
    };
  }

  /**
   * One image's embedding, a Float32Array of info.embeddingDim. image: {data: Uint8Array |
   * Uint8ClampedArray of RGBA bytes, width, height} (alpha ignored), the bytes of a PNG, JPEG or
   * PPM/PGM file (Uint8Array, Buffer, ArrayBuffer: decoded by qkv), a Blob/File (browsers: decoded
   * by createImageBitmap; Node: by qkv), ImageData, or in the browser an ImageBitmap or
   * image/canvas/video element. Options: {pooling: 'cls' | 'mean'}
   * (default: the class token when the model has one), {normalize: true}, {project: true} (the
   * model's visual_projection, if any), {size} (the encoder's input side, a multiple of the patch
   * size; default info.imageSize, other sizes interpolate the positions), {resize: 'crop' |
   * 'squash'} (default info.resize), {signal}.
   */
  async embedImage(image, options = {}) {
    return this._run('embedImage', image, options);
  }

  /**
   * embedImage() and where the encoder looked: the softmax attention of every layer and head over
   * the class token (if any) and the patches, row-major from the top-left patch. Returns
   * {embedding, rows, classToken, gridHeight, gridWidth, layers, heads, attention(layer, head)},
   * attention giving `rows` Float32Arrays of `rows` probabilities (query row i over key j; row 0
   * is the class token's when the model has one). Same image and options as embedImage().
   */
  async inspectImage(image, options = {}) {
    return imageInspection(await this._inspectImageRaw(image, options), this._info);
  }

  /** @internal inspectImage()'s raw result (what crosses postMessage from the worker). */
  async _inspectImageRaw(image, options = {}) {
    return this._run('inspectImage', image, options);
  }

  /**
   * The class probabilities of an image through the model's classifier head (info.labels not
   * empty: v.head.weight, v.head.bias and clip.vision.labels in the GGUF), applied to the pooled
   * state before any projection, then softmax. Returns the topK (default 5; at most the number of
   * classes) likeliest as [{index, label, probability}], most likely first (ties in class order).
   * Options: {topK, size, resize, signal} (size and resize as in embedImage).
   */
  async classifyImage(image, options = {}) {
    this._live();
    checkOptions(options, ['topK', 'size', 'resize', 'signal'], 'classifyImage');
    const { topK = 5, ...rest } = options;
    const labels = this._info.labels;
    if (labels.length === 0) {
      throw new QkvError('unsupported', 'classifyImage: this image encoder has no classifier head (v.head.weight and clip.vision.labels in the GGUF); use embedImage');
    }
    check(Number.isInteger(topK) && topK >= 1, `topK must be a positive integer, got ${describe(topK)}`);
    const probs = await this._run('classifyImage', image, rest);
    return Array.from(probs, (probability, index) => ({ index, label: labels[index], probability }))
      .sort((a, b) => b.probability - a.probability || a.index - b.index)
      .slice(0, topK);
  }

  /** @internal */
  async _run(fn, image, options) {
    const h = this._live();
    checkOptions(options, ['pooling', 'normalize', 'project', 'size', 'resize', 'signal'], fn);
    const { pooling, normalize = true, project = true, size, resize, signal } = options;
    check(pooling === undefined || IMAGE_POOLINGS.includes(pooling), `pooling must be one of ${IMAGE_POOLINGS.join(', ')}, got ${describe(pooling)}`);
    check(pooling !== 'cls' || this._info.classToken, "pooling 'cls': this image encoder has no class token (use 'mean')");
    check(typeof normalize === 'boolean', `normalize must be a boolean, got ${describe(normalize)}`);
    check(typeof project === 'boolean', `project must be a boolean, got ${describe(project)}`);
    check(size === undefined || (Number.isInteger(size) && size >= this._info.patchSize && size <= 4096 && size % this._info.patchSize === 0),
      `size must be a multiple of the patch size ${this._info.patchSize} up to 4096, got ${describe(size)}`);
    check(resize === undefined || RESIZE_MODES.includes(resize), `resize must be one of ${RESIZE_MODES.join(', ')}, got ${describe(resize)}`);
    throwIfAborted(signal);
    const img = await toRgba(image, fn, this._mod);
    throwIfAborted(signal);
    if (!this._h) throw new QkvError('disposed', 'this model was disposed');
    const buf = call(() => new this._mod.Buffer(img.data.length));
    try {
      buf.view().set(img.data);
      return call(() => h[fn](buf, img.width, img.height, { pooling, normalize, project, size, resize }));
    } finally {
      buf.delete();
    }
  }

  /** Embeddings of several images, in order ({signal} checked between images). */
  async embedImages(images, options = {}) {
    check(Array.isArray(images), `embedImages takes an array of images, got ${describe(images)}`);
    const out = [];
    for (const img of images) {
      out.push(await this.embedImage(img, options));
      await yieldToLoop();
    }
    return out;
  }

  /** Frees the model. Safe to call twice. */
  dispose() {
    if (this._h) { this._h.delete(); this._h = null; }
  }
}
