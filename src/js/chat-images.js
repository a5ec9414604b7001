// Images in chat messages: content parts ({type: 'text'}, OpenAI's {type: 'image_url'} with a
// data URL, qkv's {type: 'image', image}) become the prompt text with a marker per image, as
// llama.cpp's mtmd lays them out; the marked prompt is then tokenized around the markers and
// each marker replaced by the image's token rows (the mmproj's vision tower and projector).
import { QkvError, check, describe } from './errors.js';
import { call } from './util.js';
import { toRgba } from './vision.js';

/** The text that stands for an image in a rendered prompt (llama.cpp's mtmd default marker). */
export const IMAGE_MARKER = '<__media__>';

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * Message content as template text: a string as it is; an array of parts as their texts joined
 * by '\n' (how llama.cpp's server joins the parts of a template without typed content), each image
 * part as IMAGE_MARKER, the part itself pushed onto `images`.
 */
export function contentWithImages(content, what, images) {
  if (typeof content === 'string') return content;
  check(Array.isArray(content), `${what}: content must be a string or an array of content parts, got ${describe(content)}`);
  return content.map((p, k) => {
    const where = `${what}, content[${k}]`;
    check(isObj(p), `${where} must be a content part object ({type: 'text' | 'image_url' | 'image', ...})`);
    if (p.type === 'text') {
      check(typeof p.text === 'string', `${where}.text must be a string`);
      return p.text;
    }
    if (p.type === 'image_url') {
      const url = typeof p.image_url === 'string' ? p.image_url : p.image_url?.url;
      check(typeof url === 'string', `${where}: an image_url part needs image_url: {url}`);
      check(url.startsWith('data:'), `${where}: image URLs must be data: URLs (qkv fetches nothing); got ${JSON.stringify(url.slice(0, 40))}`);
    } else if (p.type === 'image') {
      check(p.image !== undefined && p.image !== null, `${where}: an image part needs image ({data, width, height} RGBA bytes, ImageData, ImageBitmap or a Blob)`);
    } else {
      throw new QkvError('unsupported', `${where}: content parts of type ${JSON.stringify(p.type)} are not supported (text, image_url, image)`);
    }
    images.push({ part: p, where });
    return IMAGE_MARKER;
  }).join('\n');
}

/** A data: URL's bytes as a Blob of its media type. */
function dataUrlBlob(url, where) {
  const comma = url.indexOf(',');
  check(comma > 0, `${where}: malformed data URL`);
  const head = url.slice(5, comma), body = url.slice(comma + 1);
  const type = head.split(';')[0] || 'application/octet-stream';
  let bytes;
  try {
    if (head.endsWith(';base64')) {
      const bin = atob(body.replace(/\s+/g, ''));
      bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    } else {
      bytes = new TextEncoder().encode(decodeURIComponent(body));
    }
  } catch (e) {
    throw new QkvError('bad_argument', `${where}: the data URL does not decode (${e?.message ?? e})`);
  }
  check(bytes.length > 0, `${where}: the data URL holds no bytes`);
  return new Blob([bytes], { type });
}

/** One image part as RGBA (vision.js's toRgba: raw RGBA, and encoded files through the platform or the engine's decoders). */
export async function partRgba({ part, where }, mod) {
  const src = part.type === 'image' ? part.image
    : dataUrlBlob(typeof part.image_url === 'string' ? part.image_url : part.image_url.url, where);
  return toRgba(src, where, mod);
}

/**
 * The prompt's ids with the images' token rows: text between markers tokenized as mtmd does
 * (the model's BOS once, at the start), each marker replaced by imageTokens ids of -1, and the
 * rows (imageTokens x dim per image, in order) as one Float32Array.
 */
export async function imagePrompt(model, prompt, images, special) {
  const texts = prompt.split(IMAGE_MARKER);
  check(texts.length - 1 === images.length,
    `the rendered prompt holds ${texts.length - 1} image markers (${IMAGE_MARKER}) for ${images.length} images: ` +
    `message text must not contain ${IMAGE_MARKER}`);
  const h = model._h, mod = model._mod;
  const per = model.info.mmproj.imageTokens, dim = model.info.mmproj.dim;
  const rows = new Float32Array(images.length * per * dim);
  for (let i = 0; i < images.length; i++) {
    const rgba = await partRgba(images[i], mod);
    const buf = call(() => new mod.Buffer(rgba.data.length));
    try {
      buf.view().set(rgba.data);
      rows.set(call(() => h.imageTokens(buf, rgba.width, rgba.height)), i * per * dim);
    } finally {
      buf.delete();
    }
  }
  const ids = [];
  texts.forEach((t, i) => {
    if (i > 0) for (let k = 0; k < per; k++) ids.push(-1);
    if (t || i === 0) ids.push(...call(() => h.tokenizeSpecial(t, i === 0, special)));
  });
  return { ids, rows };
}
