// Draws an attention map (rows = queries, columns = keys) on a canvas, with token labels when
// the cells are big enough, and maps pointer positions back to cells.

const LIGHT = ['#f4f8fc', '#c6dbef', '#6baed6', '#2171b5', '#08306b'];
const DARK = ['#1c1f2b', '#3b0f70', '#8c2981', '#de4968', '#fe9f6d', '#fcfdbf'];

function hexToRgb(h) { return [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16)); }

function ramp(stops) {
  const rgb = stops.map(hexToRgb);
  const lut = new Uint8ClampedArray(256 * 3);
  for (let i = 0; i < 256; i++) {
    const t = (i / 255) * (rgb.length - 1);
    const k = Math.min(rgb.length - 2, Math.floor(t)), f = t - k;
    for (let c = 0; c < 3; c++) lut[i * 3 + c] = rgb[k][c] + (rgb[k + 1][c] - rgb[k][c]) * f;
  }
  return lut;
}
const LUTS = { light: ramp(LIGHT), dark: ramp(DARK) };

export function isDark() { return globalThis.matchMedia?.('(prefers-color-scheme: dark)').matches ?? false; }

/** Colour of a probability as CSS, for legends. */
export function colourOf(p, scale = 'sqrt') {
  const lut = isDark() ? LUTS.dark : LUTS.light;
  const v = Math.max(0, Math.min(1, scale === 'sqrt' ? Math.sqrt(p) : p));
  const i = Math.round(v * 255) * 3;
  return `rgb(${lut[i]}, ${lut[i + 1]}, ${lut[i + 2]})`;
}

const MIN_LABEL_CELL = 11;  // CSS px: below this, labels would overlap (hover shows tokens instead)
const LABEL_MARGIN = 72;

/**
 * Draws `probs` (rows x cols, row-major). Query row i sits at position cols - rows + i, so
 * keys beyond it are masked (the causal mask) and drawn as background. With causal: false
 * (cross-attention: target rows over source columns) nothing is masked, `labels` names the
 * columns and `rowLabels` the rows. `mask` (rows x cols, optional): 0 where the layer's attention
 * pattern hides the key (block-sparse layers), drawn as background like the causal mask.
 * Returns the geometry {x0, y0, cell, cw, ch, rows, cols} used by cellAt() (cw/ch: cell width/height).
 */
export function drawHeatmap(canvas, { probs, rows, cols, labels, rowLabels = null, causal = true, mask = null, selected = -1, hover = null, scale = 'sqrt' }) {
  const cssW = Math.max(120, canvas.clientWidth || 320);
  const dpr = Math.min(3, globalThis.devicePixelRatio || 1);
  const px = Math.round(cssW * dpr);
  if (canvas.width !== px || canvas.height !== px) { canvas.width = px; canvas.height = px; }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  const style = getComputedStyle(canvas);
  const bg = style.getPropertyValue('--panel').trim() || '#fff';
  const text = style.getPropertyValue('--text').trim() || '#000';
  const strong = style.getPropertyValue('--hl-strong').trim() || '#06c';
  const font = style.getPropertyValue('--mono').trim() || 'monospace';
  ctx.fillStyle = bg;
  ctx.fillRect(0, 0, cssW, cssW);
  const n = Math.max(rows, cols);
  if (!probs || rows === 0 || cols === 0) return { x0: 0, y0: 0, cell: 0, rows: 0, cols: 0 };

  // Causal maps are square (cells of one size); cross-attention maps fill the square with
  // cells as wide as the source allows and as tall as the target allows.
  const fit = (k, margin) => (cssW - margin - 2) / (causal ? n : k);
  const withLabels = labels && Math.min(fit(cols, LABEL_MARGIN), fit(rows, LABEL_MARGIN)) >= MIN_LABEL_CELL;
  const margin = withLabels ? LABEL_MARGIN : 0;
  const cw = fit(cols, margin), ch = fit(rows, margin), cell = Math.min(cw, ch);
  const x0 = margin, y0 = margin;

  // Cells into an image of rows x cols pixels, scaled up without smoothing.
  const lut = isDark() ? LUTS.dark : LUTS.light;
  const img = new ImageData(cols, rows);
  const bgRgb = /^#[0-9a-f]{6}$/i.test(bg) ? hexToRgb(bg) : [255, 255, 255];
  const offset = causal ? cols - rows : 0;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const o = (r * cols + c) * 4;
      if ((causal && c > r + offset) || (mask && !mask[r * cols + c])) {
        img.data[o] = bgRgb[0]; img.data[o + 1] = bgRgb[1]; img.data[o + 2] = bgRgb[2];
      } else {
        const p = probs[r * cols + c];
        const v = Math.max(0, Math.min(1, scale === 'sqrt' ? Math.sqrt(p) : p));
        const i = Math.round(v * 255) * 3;
        img.data[o] = lut[i]; img.data[o + 1] = lut[i + 1]; img.data[o + 2] = lut[i + 2];
      }
      img.data[o + 3] = 255;
    }
  }
  const tmp = document.createElement('canvas');
  tmp.width = cols; tmp.height = rows;
  tmp.getContext('2d').putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(tmp, x0, y0, cols * cw, rows * ch);

  if (withLabels) {
    const size = Math.max(8, Math.min(12, cell * 0.85));
    ctx.font = `${size}px ${font}`;
    ctx.fillStyle = text;
    const clip = (s) => (s.length > 9 ? s.slice(0, 8) + '…' : s);
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (let r = 0; r < rows; r++) {
      ctx.font = `${r === selected ? 'bold ' : ''}${size}px ${font}`;
      ctx.fillText(clip((rowLabels ? rowLabels[r] : labels[r + offset]) ?? ''), x0 - 4, y0 + (r + 0.5) * ch);
    }
    ctx.save();
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = 'left';
    for (let c = 0; c < cols; c++) {
      ctx.font = `${causal && c === selected + offset ? 'bold ' : ''}${size}px ${font}`;
      // Rotated frame: x runs up the canvas (negative y), y runs right.
      ctx.fillText(clip(labels[c] ?? ''), -(y0 - 4), x0 + (c + 0.5) * cw);
    }
    ctx.restore();
  }

  ctx.lineWidth = 2;
  ctx.strokeStyle = strong;
  if (selected >= 0 && selected < rows) ctx.strokeRect(x0 + 1, y0 + selected * ch + 1, cols * cw - 2, ch - 2 > 0 ? ch - 2 : 1);
  if (hover) {
    ctx.lineWidth = 1.5;
    ctx.strokeStyle = text;
    ctx.strokeRect(x0 + hover.c * cw, y0 + hover.r * ch, cw, ch);
  }
  return { x0, y0, cell, cw, ch, rows, cols };
}

/** The cell under CSS pixel (x, y) of the canvas, or null. */
export function cellAt(geom, x, y) {
  if (!geom || !geom.cell) return null;
  const cw = geom.cw ?? geom.cell, ch = geom.ch ?? geom.cell;
  const c = Math.floor((x - geom.x0) / cw), r = Math.floor((y - geom.y0) / ch);
  if (r < 0 || c < 0 || r >= geom.rows || c >= geom.cols) return null;
  return { r, c };
}
