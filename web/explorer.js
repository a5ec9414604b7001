// The attention explorer: for the text just generated, a token x token heatmap of attention
// probabilities per layer and head (or averaged over heads), a token strip that shows what the
// hovered/focused token attended to, and the model's top-10 next tokens at any position.
//
// It costs nothing while closed: attention is captured only in a separate session created
// when the panel is open, and that session is disposed when the panel closes or a new
// generation starts. For encoder-decoder models (t5) it shows the cross-attention instead: a
// target x source alignment heatmap per decoder layer and head (model.inspect).
import { cellAt, drawHeatmap } from './heatmap.js';
import { errorText, showPiece } from './format.js';

/** The explorer feeds at most this many tokens (the front is cut, BOS kept). */
export const MAX_EXPLORER_TOKENS = 256;
const TOP_K = 10;

export class Explorer {
  /**
   * @param {Record<string, HTMLElement>} el  details, layer, head, scale, status, canvas, tip, strip, topk, topkToken, topkActual, caption
   * @param {{onMemoryChange?: () => void, onError?: (e: unknown) => void}} hooks
   */
  constructor(el, hooks = {}) {
    this.el = el;
    this.hooks = hooks;
    this.model = null;
    this.run = null;        // {promptIds, genIds}
    this.after = -1;        // the token after the last one shown (a context-full run's last token), or -1
    this.session = null;
    this.epoch = 0;         // bumped whenever the data becomes stale; async work checks it
    this.maps = new Map();  // 'layer:head' -> Promise<{rows, cols, probs}>
    this.pieces = new Map();  // token id -> Promise<string> (per model)
    this.ids = [];
    this.labels = [];
    this.promptLen = 0;
    this.selected = -1;
    this.hover = null;
    this.current = null;
    this.geom = null;
    this.topkSeq = 0;
    this.bind();
  }

  get isOpen() { return this.el.details.open; }

  bind() {
    const { details, layer, head, scale, canvas, strip } = this.el;
    details.addEventListener('toggle', () => {
      if (details.open) this.analyze();
      else this.release('Closed: nothing is captured while the explorer is closed.');
    });
    layer.addEventListener('change', () => this.render());
    head.addEventListener('change', () => this.render());
    scale.addEventListener('change', () => this.draw());
    canvas.addEventListener('pointermove', (e) => this.onPointer(e));
    canvas.addEventListener('pointerleave', () => { this.hover = null; this.el.tip.hidden = true; this.draw(); });
    canvas.addEventListener('click', (e) => {
      const cell = this.cellOf(e);
      if (cell) this.select(cell.r + (this.current.cross ? 0 : this.current.cols - this.current.rows));
    });
    canvas.addEventListener('keydown', (e) => {
      if (!this.current) return;
      const step = { ArrowUp: -1, ArrowDown: 1, ArrowLeft: -1, ArrowRight: 1 }[e.key];
      if (step) { e.preventDefault(); this.select(Math.max(0, Math.min(this.ids.length - 1, this.selected + step))); }
    });
    strip.addEventListener('keydown', (e) => {
      const i = Number(e.target?.dataset?.index);
      if (!Number.isInteger(i)) return;
      const to = { ArrowLeft: i - 1, ArrowRight: i + 1, ArrowUp: i - 1, ArrowDown: i + 1, Home: 0, End: this.ids.length - 1 }[e.key];
      if (to === undefined) return;
      e.preventDefault();
      strip.children[Math.max(0, Math.min(this.ids.length - 1, to))]?.focus();
    });
    const pick = (e) => {
      const b = e.target.closest?.('.tok');
      if (b) this.select(Number(b.dataset.index));
    };
    strip.addEventListener('pointerover', pick);
    strip.addEventListener('focusin', pick);
    strip.addEventListener('click', pick);
    new ResizeObserver(() => { if (this.isOpen) this.draw(); }).observe(this.el.canvas);
    globalThis.matchMedia?.('(prefers-color-scheme: dark)').addEventListener?.('change', () => this.draw());
  }

  /** A new model: selectors follow its layers and heads; old data is dropped. */
  setModel(model) {
    this.release();
    this.model = model;
    this.maskKey = null;
    this.encdec = false;
    this.inspection = null;
    this.pieces = new Map();
    this.run = null;
    const { layer, head } = this.el;
    layer.replaceChildren();
    head.replaceChildren();
    if (this.el.caption) {
      this.captionText ??= this.el.caption.textContent;
      this.el.caption.textContent = this.captionText;
    }
    if (!model) return;
    const { heads, kvHeads } = model.info;
    this.encdec = !!model.info.encoderDecoder;
    const layers = this.encdec ? model.info.decoderLayers : model.info.layers;
    // Each layer's attention kind (softmax unless the model says otherwise) in its label.
    const kinds = (this.encdec ? model.info.crossAttentionKinds : model.info.attentionKinds) ?? [];
    const kindOf = (l) => (kinds[l] && kinds[l] !== 'softmax' ? `, ${kinds[l].replace('_', '-')} attention` : '');
    for (let l = 0; l < layers; l++) {
      layer.add(new Option(this.encdec ? `Decoder ${l + 1} of ${layers}, cross-attention${kindOf(l)}` : `${l + 1} of ${layers}${kindOf(l)}`, String(l)));
    }
    head.add(new Option(`Average over ${heads} heads`, 'avg'));
    for (let h = 0; h < heads; h++) head.add(new Option(`Head ${h + 1}${kvHeads < heads ? ` (kv ${Math.floor(h / (heads / kvHeads)) + 1})` : ''}`, String(h)));
    layer.value = String(layers - 1);
    head.value = 'avg';
    this.clearView('Generate some text to explore its attention.');
  }

  /** The tokens of the last generation (or null while one runs). */
  setRun(run, { runningMessage } = {}) {
    this.release();
    this.run = run;
    if (!run) {
      this.clearView(runningMessage ?? 'Generating… the explorer shows the text when it ends.');
      return;
    }
    if (this.isOpen) this.analyze();
    else this.el.status.textContent = 'Open to compute the attention of the text just generated.';
  }

  /** Frees the capture session and cached maps. */
  release(message) {
    this.epoch++;
    const s = this.session;
    this.session = null;
    this.maps.clear();
    this.current = null;
    this.inspection = null;
    if (s) s.dispose().catch(() => {});
    if (message) this.clearView(message);
  }

  clearView(message) {
    const { canvas, strip, topk, topkToken, topkActual, status } = this.el;
    this.ids = []; this.labels = []; this.selected = -1; this.current = null; this.geom = null;
    strip.replaceChildren();
    topk.replaceChildren();
    topkActual.textContent = '';
    topkToken.textContent = '…';
    canvas.dataset.rows = '0';
    canvas.dataset.cols = '0';
    canvas.setAttribute('aria-label', 'Attention heatmap (empty)');
    this.el.details.dataset.state = 'empty';
    status.textContent = message;
    if (this.isOpen) this.draw();
  }

  piece(id) {
    const { bosId, eosId } = this.model.info;
    if (!this.pieces.has(id)) {
      this.pieces.set(id, id === bosId ? Promise.resolve('<s>') : id === eosId ? Promise.resolve('</s>')
        : this.model.detokenize([id]).then((s) => s || `<${id}>`));
    }
    return this.pieces.get(id);
  }

  /** Feeds prompt + generated tokens into a capturing session and shows the result. */
  async analyze() {
    if (!this.model || !this.run || !this.isOpen) return;
    this.release();
    const epoch = this.epoch;
    const model = this.model;
    const { status, details } = this.el;
    details.dataset.state = 'computing';
    status.textContent = 'Computing attention…';
    if (this.encdec) return this.analyzeCross(epoch);
    try {
      const limit = Math.min(MAX_EXPLORER_TOKENS, model.info.contextLength);
      const all = [...this.run.promptIds, ...this.run.genIds];
      let ids = all, cut = 0;  // cut: tokens left out after BOS
      // A generation that filled the context sampled its last token from the last position and
      // never fed it: the positions the model computed are the first `limit`, the last token is
      // their prediction (shown as the actual next token of the last row), nothing is cut.
      this.after = all.length === limit + 1 ? all[limit] : -1;
      if (this.after >= 0) {
        ids = all.slice(0, limit);
      } else if (all.length > limit) {
        const tail = all.length - (limit - 1);
        cut = tail - 1;
        ids = [all[0], ...all.slice(tail)];
      }
      const t0 = performance.now();
      const s = await model.createSession();
      if (epoch !== this.epoch) { s.dispose().catch(() => {}); return; }
      this.session = s;
      await s.setCaptureAttention(true);
      await s.feed(ids, { allLogits: true });
      const labels = (await Promise.all(ids.map((id) => this.piece(id)))).map(showPiece);
      if (epoch !== this.epoch) return;
      this.ids = ids;
      this.labels = labels;
      this.promptLen = Math.max(1, this.run.promptIds.length - cut);
      this.buildStrip();
      const ms = performance.now() - t0;
      status.textContent = `${ids.length} tokens (${this.promptLen} of the prompt, BOS included), computed in ${Math.round(ms)} ms` +
        (cut ? `. The text is longer than ${limit} tokens: the first ${cut === 1 ? "token" : `${cut} tokens`} after BOS ${cut === 1 ? "is" : "are"} left out.` : '.');
      this.hooks.onMemoryChange?.();
      await this.render({ select: ids.length - 1 });
    } catch (e) {
      if (epoch !== this.epoch) return;
      details.dataset.state = 'error';
      status.textContent = `The explorer failed: ${errorText(e)}`;
      this.hooks.onError?.(e);
    }
  }

  /** Encoder-decoder: the cross-attention of the target just generated over its source. */
  async analyzeCross(epoch) {
    const { status, details } = this.el;
    try {
      const t0 = performance.now();
      const limit = Math.min(MAX_EXPLORER_TOKENS, this.model.info.contextLength) - 1;
      const gen = this.run.genIds.slice(0, limit);
      const m = await this.model.inspect(this.run.source ?? '', { target: gen });
      if (epoch !== this.epoch) return;
      this.inspection = m;
      this.ids = m.targetTokens.map((t) => t.id);
      this.labels = m.targetTokens.map((t, i) => (i === 0 ? t.text : showPiece(t.text)));
      this.sourceLabels = m.sourceTokens.map((t) => (t.id === this.model.info.eosId ? '</s>' : showPiece(t.text)));
      this.promptLen = 1;
      if (this.el.caption) {
        this.el.caption.textContent = 'Rows: the target tokens, the decoder start token first. Columns: the source tokens ' +
          '(with its end token). Stronger colour = more attention: where the decoder looked in the source for each token.';
      }
      this.buildStrip();
      status.textContent = `Cross-attention of ${this.ids.length} target tokens (the decoder start token first) over ` +
        `${this.sourceLabels.length} source tokens, computed in ${Math.round(performance.now() - t0)} ms` +
        (gen.length < this.run.genIds.length ? `; the first ${gen.length} generated tokens are shown.` : '.');
      this.hooks.onMemoryChange?.();
      await this.render({ select: this.ids.length - 1 });
    } catch (e) {
      if (epoch !== this.epoch) return;
      details.dataset.state = 'error';
      status.textContent = `The explorer failed: ${errorText(e)}`;
      this.hooks.onError?.(e);
    }
  }

  buildStrip() {
    const { strip } = this.el;
    const frag = document.createDocumentFragment();
    this.ids.forEach((id, i) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'tok' + (i < this.promptLen ? ' prompt' : '') + (this.labels[i].startsWith('<') && this.labels[i].endsWith('>') ? ' special' : '');
      b.dataset.index = String(i);
      b.dataset.token = String(id);
      b.tabIndex = i === this.ids.length - 1 ? 0 : -1;
      const w = document.createElement('span');
      w.className = 'w';
      const t = document.createElement('span');
      t.className = 't';
      t.textContent = this.labels[i];
      b.append(w, t);
      b.setAttribute('aria-label', `token ${i + 1} of ${this.ids.length}, ${this.encdec ? (i === 0 ? 'decoder start' : 'target') : i < this.promptLen ? 'prompt' : 'generated'}: ${this.labels[i]}`);
      frag.append(b);
    });
    strip.replaceChildren(frag);
  }

  /** Attention map of (layer, head), head = 'avg' for the mean over heads. */
  map(layer, head) {
    const key = `${layer}:${head}`;
    if (!this.maps.has(key)) {
      const s = this.session;
      let p;
      if (head === 'avg') {
        const n = this.model.info.heads;
        p = Promise.all(Array.from({ length: n }, (_, h) => this.map(layer, String(h)))).then((maps) => {
          const { rows, cols } = maps[0];
          const probs = new Float32Array(rows * cols);
          for (const m of maps) for (let i = 0; i < probs.length; i++) probs[i] += m.probs[i];
          for (let i = 0; i < probs.length; i++) probs[i] /= n;
          return { rows, cols, probs, cross: maps[0].cross };
        });
      } else if (this.inspection) {
        const rows = this.inspection.cross(layer, Number(head));
        const T = rows.length, S = rows[0]?.length ?? 0;
        const probs = new Float32Array(T * S);
        rows.forEach((r, i) => probs.set(r, i * S));
        p = Promise.resolve({ rows: T, cols: S, probs, cross: true });
      } else {
        p = s.attention(layer, Number(head)).then((a) => ({ rows: a.queries, cols: a.keys, probs: a.probs }));
      }
      p.catch(() => this.maps.delete(key));
      this.maps.set(key, p);
    }
    return this.maps.get(key);
  }

  async render({ select } = {}) {
    if ((!this.session && !this.inspection) || !this.ids.length) return;
    const epoch = this.epoch;
    const layer = Number(this.el.layer.value), head = this.el.head.value;
    try {
      const m = await this.map(layer, head);
      const mask = await this.maskOf(layer, m);
      if (epoch !== this.epoch) return;
      this.current = { ...m, layer, head, mask };
      const { canvas, details } = this.el;
      canvas.dataset.rows = String(m.rows);
      canvas.dataset.cols = String(m.cols);
      canvas.dataset.layer = String(layer);
      canvas.dataset.head = head;
      details.dataset.state = 'ready';
      this.select(select ?? (this.selected >= 0 ? this.selected : this.ids.length - 1), { force: true });
    } catch (e) {
      if (epoch !== this.epoch) return;
      this.el.status.textContent = `Cannot read the attention of layer ${layer + 1}: ${errorText(e)}`;
      this.hooks.onError?.(e);
    }
  }

  draw() {
    if (!this.isOpen) return;
    const m = this.current;
    const cross = !!m?.cross;
    const row = m && this.selected >= 0 ? this.selected - (cross ? 0 : m.cols - m.rows) : -1;
    this.geom = drawHeatmap(this.el.canvas, {
      probs: m?.probs, rows: m?.rows ?? 0, cols: m?.cols ?? 0, labels: cross ? this.sourceLabels : this.labels,
      rowLabels: cross ? this.labels : null, causal: !cross, mask: m?.mask ?? null, selected: row,
      hover: this.hover, scale: this.el.scale.value,
    });
  }

  /** A block-sparse layer's pattern as the mask of map m, from the engine (null for other kinds). */
  async maskOf(layer, m) {
    const info = this.model?.info;
    const kinds = (this.encdec ? info?.crossAttentionKinds : info?.attentionKinds) ?? [];
    if (kinds[layer] !== 'block_sparse' || typeof this.model.sparseMask !== 'function') return null;
    const key = `${m.rows}x${m.cols}:${!!m.cross}`;
    if (this.maskKey !== key) {
      this.maskKey = key;
      this.mask = this.model.sparseMask(m.cross ? { queries: m.rows, keys: m.cols } : { queryStart: m.cols - m.rows, queries: m.rows, keys: m.cols });
    }
    return this.mask;
  }

  cellOf(e) {
    if (!this.current) return null;
    const r = this.el.canvas.getBoundingClientRect();
    return cellAt(this.geom, e.clientX - r.left, e.clientY - r.top);
  }

  onPointer(e) {
    const cell = this.cellOf(e);
    const { tip, canvas } = this.el;
    if (!cell) { this.hover = null; tip.hidden = true; this.draw(); return; }
    const m = this.current;
    const off = m.cross ? 0 : m.cols - m.rows;
    this.hover = cell;
    this.draw();
    const q = cell.r + off, k = cell.c;
    tip.textContent = m.cross ? `${this.labels[q]} → source ${this.sourceLabels[k]}: ${(m.probs[cell.r * m.cols + k] * 100).toFixed(1)}%`
      : k > q ? `${this.labels[q]} cannot see ${this.labels[k]} (later token)`
      : `${this.labels[q]} → ${this.labels[k]}: ${(m.probs[cell.r * m.cols + k] * 100).toFixed(1)}%`;
    tip.hidden = false;
    const rect = canvas.getBoundingClientRect();
    const x = e.clientX - rect.left, y = e.clientY - rect.top;
    tip.style.left = `${Math.min(x + 12, rect.width - tip.offsetWidth - 2)}px`;
    tip.style.top = `${y + 16 + tip.offsetHeight > rect.height ? y - tip.offsetHeight - 8 : y + 16}px`;
  }

  /** Makes token i (a position of the fed text) the focus: its row, what it attended to, its next-token view. */
  select(i, { force = false } = {}) {
    if (!this.current || !Number.isInteger(i) || i < 0 || i >= this.ids.length) return;
    if (i === this.selected && !force) return;
    this.selected = i;
    const m = this.current;
    const off = m.cross ? 0 : m.cols - m.rows;
    const row = i - off;
    const { strip, canvas } = this.el;
    const weights = row >= 0 ? m.probs.subarray(row * m.cols, (row + 1) * m.cols) : null;
    let max = 0;
    if (weights) for (const w of weights) max = Math.max(max, w);
    for (const b of strip.children) {
      const j = Number(b.dataset.index);
      const on = j === i;
      b.classList.toggle('selected', on);
      if (on) { b.setAttribute('aria-current', 'true'); b.tabIndex = 0; } else { b.removeAttribute('aria-current'); b.tabIndex = -1; }
      b.firstChild.style.opacity = !m.cross && weights && max > 0 && j <= i ? String((weights[j] / max) * 0.6) : '0';
    }
    this.draw();
    const headText = m.head === 'avg' ? `average over ${this.model.info.heads} heads` : `head ${Number(m.head) + 1}`;
    let summary = `Attention heatmap, layer ${m.layer + 1}, ${headText}: ${m.rows} by ${m.cols} tokens.`;
    if (weights && m.cross) {
      summary = `Cross-attention heatmap, decoder layer ${m.layer + 1}, ${headText}: ${m.rows} target by ${m.cols} source tokens.`;
      const top = [...weights.keys()].sort((a, b) => weights[b] - weights[a]).slice(0, 3);
      summary += ` Target token ${i + 1} (${this.labels[i]}) attends most to source ` +
        top.map((j) => `${this.sourceLabels[j]} at ${j + 1} (${(weights[j] * 100).toFixed(0)}%)`).join(', ') + '.';
    } else if (weights) {
      const top = [...weights.keys()].filter((j) => j <= i).sort((a, b) => weights[b] - weights[a]).slice(0, 3);
      summary += ` Token ${i + 1} (${this.labels[i]}) attends most to ` +
        top.map((j) => `${this.labels[j]} at ${j + 1} (${(weights[j] * 100).toFixed(0)}%)`).join(', ') + '.';
    }
    canvas.setAttribute('aria-label', summary);
    this.showTopK(i);
  }

  async showTopK(i) {
    const seq = ++this.topkSeq;
    const epoch = this.epoch;
    const { topk, topkToken, topkActual } = this.el;
    topkToken.textContent = this.labels[i];
    if (this.encdec) {
      topk.replaceChildren();
      topkActual.textContent = 'Next-token probabilities are shown for decoder-only models; this view is the target-by-source alignment.';
      return;
    }
    try {
      const logits = await this.session.logits(i);
      if (seq !== this.topkSeq || epoch !== this.epoch) return;
      let max = -Infinity;
      for (const v of logits) if (v > max) max = v;
      let sum = 0;
      const p = new Float32Array(logits.length);
      for (let j = 0; j < logits.length; j++) { p[j] = Math.exp(logits[j] - max); sum += p[j]; }
      for (let j = 0; j < p.length; j++) p[j] /= sum;
      const order = [...p.keys()].sort((a, b) => p[b] - p[a]);
      const best = order.slice(0, TOP_K);
      const pieces = await Promise.all(best.map((id) => this.piece(id)));
      const next = i + 1 < this.ids.length ? this.ids[i + 1] : this.after ?? -1;
      const nextPiece = next >= 0 ? await this.piece(next) : null;
      if (seq !== this.topkSeq || epoch !== this.epoch) return;
      topk.replaceChildren(...best.map((id, k) => topkRow(pieces[k], p[id], id === next, p[best[0]])));
      topkActual.textContent = next < 0 ? 'This is the last token: the list is what the model would say next.'
        : `The text went on with ${showPiece(nextPiece, { spaces: true })}: ${(p[next] * 100).toFixed(p[next] < 0.001 ? 3 : 1)}%, ` +
          `rank ${order.indexOf(next) + 1} of ${p.length} (sampling then reshaped these probabilities).`;
      topk.dataset.position = String(i);
    } catch (e) {
      if (seq !== this.topkSeq || epoch !== this.epoch) return;
      topk.replaceChildren();
      topkActual.textContent = '';
      this.el.status.textContent = `Cannot read the logits at token ${i + 1}: ${errorText(e)}`;
    }
  }
}

function topkRow(piece, prob, actual, top) {
  const li = document.createElement('li');
  if (actual) li.classList.add('actual');
  const s = document.createElement('span');
  s.className = 'piece';
  s.textContent = showPiece(piece, { spaces: true });
  const bar = document.createElement('span');
  bar.className = 'bar';
  bar.setAttribute('aria-hidden', 'true');
  const fill = document.createElement('span');
  fill.style.width = `${(top > 0 ? prob / top : 0) * 100}%`;
  bar.append(fill);
  const v = document.createElement('span');
  v.className = 'p';
  v.textContent = `${(prob * 100).toFixed(prob < 0.001 ? 3 : 1)}%`;
  li.append(s, bar, v);
  return li;
}
