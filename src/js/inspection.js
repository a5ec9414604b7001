// Accessors over the flat attention maps of an encoder-decoder inspection (shared by the
// in-process model and the worker client, since functions cannot cross postMessage).
import { check } from './errors.js';

/**
 * raw: {heads, encoderLayers, decoderLayers, sourceTokens, targetTokens, encoderProbs, selfProbs,
 * crossProbs} (Float32Arrays, layer-major) -> the same plus encoder/self/cross(layer, head) giving rows.
 */
export function inspectionView(raw) {
  const H = raw.heads, S = raw.sourceTokens.length, T = raw.targetTokens.length;
  const rows = (data, layers, nq, nk, what) => (layer, head) => {
    check(Number.isInteger(layer) && layer >= 0 && layer < layers, `${what} layer must be an integer in [0, ${layers - 1}], got ${layer}`);
    check(Number.isInteger(head) && head >= 0 && head < H, `head must be an integer in [0, ${H - 1}], got ${head}`);
    const base = (layer * H + head) * nq * nk;
    return Array.from({ length: nq }, (_, i) => data.subarray(base + i * nk, base + (i + 1) * nk));
  };
  return {
    ...raw,
    encoder: rows(raw.encoderProbs, raw.encoderLayers, S, S, 'encoder'),
    self: rows(raw.selfProbs, raw.decoderLayers, T, T, 'decoder'),
    cross: rows(raw.crossProbs, raw.decoderLayers, T, S, 'decoder'),
  };
}
