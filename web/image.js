// The image panel: an image (dropped, picked or drawn) through a Vision Transformer on this page:
// its class probabilities when the model has a classifier head (its embedding otherwise), and the
// attention of any layer and head laid over the image, from the class token or from a clicked patch.
//
// Image models are listed by the build in models/images.json (every clip-arch GGUF of models/, or a
// random-weight fixture standing in); they run on the page (the engine's Worker does not carry
// image encoders), single-threaded: they are small.
import { colourOf } from './heatmap.js';
import { errorText, formatBytes, formatMs } from './format.js';

const VIEW = 320;  // CSS px of the image view's side

export function initImages(el) {
  const s = {
    list: null,       // models/images.json
    model: null,      // the loaded ImageEncoderModel
    loading: null,    // Promise of the load in progress
    image: null,      // {data, width, height}: the RGBA last classified
    source: null,     // what to draw: an ImageBitmap or canvas
    seen: null,       // inspectImage() of the image
    query: -1,        // the attention row shown (-1: the class token, or the centre patch without one)
    seq: 0,           // bumps with each image; stale results are dropped
  };
  const status = (text, state) => {
    el.status.textContent = text;
    if (state) el.details.dataset.state = state;
  };

  el.details.addEventListener('toggle', () => { if (el.details.open) ensureModel().catch(() => {}); });
  el.modelSelect.addEventListener('change', () => loadListed(Number(el.modelSelect.value)).catch(() => {}));
  el.file.addEventListener('change', () => { if (el.file.files[0]) useBlob(el.file.files[0]); });
  el.drop.addEventListener('dragover', (e) => { e.preventDefault(); el.drop.classList.add('dragging'); });
  el.drop.addEventListener('dragleave', () => el.drop.classList.remove('dragging'));
  el.drop.addEventListener('drop', (e) => {
    e.preventDefault();
    el.drop.classList.remove('dragging');
    const f = [...(e.dataTransfer?.files ?? [])].find((x) => x.type.startsWith('image/')) ?? e.dataTransfer?.files?.[0];
    if (f) useBlob(f);
  });
  el.layer.addEventListener('change', draw);
  el.head.addEventListener('change', draw);
  el.fromCls.addEventListener('click', () => { s.query = -1; draw(); });
  el.view.addEventListener('click', (e) => {
    const p = patchAt(e.offsetX, e.offsetY);
    if (p) { s.query = p.y * s.seen.gridWidth + p.x; draw(); }
  });
  el.view.addEventListener('keydown', (e) => {
    if (!s.seen) return;
    const d = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] }[e.key];
    if (!d) return;
    e.preventDefault();
    const { gridWidth: gw, gridHeight: gh } = s.seen;
    const q = s.query >= 0 ? s.query : Math.floor(gh / 2) * gw + Math.floor(gw / 2);
    const x = Math.min(gw - 1, Math.max(0, (q % gw) + d[0])), y = Math.min(gh - 1, Math.max(0, Math.floor(q / gw) + d[1]));
    s.query = y * gw + x;
    draw();
  });
  initDrawing();

  async function ensureModel() {
    if (s.model || s.loading) return s.loading;
    if (!s.list) {
      try {
        const res = await fetch('models/images.json');
        s.list = res.ok ? await res.json() : [];
      } catch {
        s.list = [];
      }
      el.modelSelect.replaceChildren(...s.list.map((m, i) => new Option(`${m.name} (${formatBytes(m.modelBytes)})`, String(i))));
    }
    if (s.list.length === 0) {
      status('No image model in this build: put a clip-arch GGUF (an image classifier or mmproj encoder) in models/ and rebuild the site.', 'empty');
      return null;
    }
    return loadListed(0);
  }

  async function loadListed(i) {
    const m = s.list[i];
    s.model?.dispose();
    s.model = null;
    status(`Loading ${m.name}…`, 'loading');
    el.modelDesc.textContent = m.description ?? '';
    const t0 = performance.now();
    // Imported when first needed: the page's text path loads nothing more than before.
    s.loading = import('./qkv/src/js/browser.js').then(({ loadModel }) => loadModel(new URL(`models/${m.model}`, location.href).href, { threads: 1 }));
    try {
      s.model = await s.loading;
      const info = s.model.info;
      el.layer.replaceChildren(...Array.from({ length: info.layers }, (_, l) => new Option(`${l + 1}`, String(l))));
      el.layer.value = String(info.layers - 1);
      el.head.replaceChildren(new Option('mean of heads', 'mean'), ...Array.from({ length: info.heads }, (_, h) => new Option(`${h + 1}`, String(h))));
      el.fromCls.hidden = !info.classToken;
      el.details.dataset.labels = String(info.labels.length);
      status(`${m.name}: ${info.description}, ${info.labels.length ? `${info.labels.length} classes` : 'no classifier head (embeddings)'}; loaded in ${formatMs(performance.now() - t0)}. Drop, pick or draw an image.`, 'ready');
      if (s.image) await run(s.image, s.source);
    } catch (e) {
      status(`Could not load ${m.name}: ${errorText(e)}`, 'error');
      throw e;
    } finally {
      s.loading = null;
    }
    return s.model;
  }

  async function useBlob(blob) {
    let bitmap;
    try {
      bitmap = await createImageBitmap(blob);
    } catch (e) {
      status(`${blob.name || 'The file'} is not an image this browser decodes (${errorText(e)}).`, 'error');
      return;
    }
    const c = new OffscreenCanvas(bitmap.width, bitmap.height);
    const ctx = c.getContext('2d', { willReadFrequently: true });
    ctx.drawImage(bitmap, 0, 0);
    await run(ctx.getImageData(0, 0, bitmap.width, bitmap.height), bitmap);
  }

  // The image through the model: classes (or the embedding), then every layer's attention.
  async function run(image, source) {
    const seq = ++s.seq;
    s.image = image;
    s.source = source;
    if (!s.model) await ensureModel();
    const model = s.model;
    if (!model || seq !== s.seq) return;
    status(`Running ${image.width}x${image.height}…`, 'running');
    try {
      const t0 = performance.now();
      const info = model.info;
      const classes = info.labels.length ? await model.classifyImage(image, { topK: info.labels.length }) : null;
      const embedding = classes ? null : await model.embedImage(image);
      const seen = await model.inspectImage(image);
      if (seq !== s.seq || model !== s.model) return;
      s.seen = seen;
      s.query = -1;
      showResult(classes, embedding);
      draw();
      status(`${image.width}x${image.height} image, seen as ${seen.gridWidth}x${seen.gridHeight} patches of ${info.patchSize} px (${info.resize === 'crop' ? 'the centre square' : 'squashed to a square'}); ${formatMs(performance.now() - t0)}. Click a patch to see what it attended to.`, 'done');
    } catch (e) {
      if (seq === s.seq) status(errorText(e), 'error');
    }
  }

  function showResult(classes, embedding) {
    el.classes.replaceChildren();
    el.embedding.textContent = '';
    el.classesHeading.textContent = classes ? 'Classes' : 'Embedding';
    if (classes) {
      for (const c of classes) {
        const li = document.createElement('li');
        li.dataset.index = String(c.index);
        li.dataset.probability = String(c.probability);
        const name = document.createElement('span');
        name.className = 'class-label';
        name.textContent = c.label;
        const bar = document.createElement('meter');
        bar.min = 0; bar.max = 1; bar.value = c.probability;
        const pct = document.createElement('span');
        pct.className = 'class-prob';
        pct.textContent = `${(100 * c.probability).toFixed(1)}%`;
        li.append(name, bar, pct);
        el.classes.append(li);
      }
    } else {
      const head = Array.from(embedding.slice(0, 8), (v) => v.toFixed(3)).join(', ');
      el.embedding.textContent = `${embedding.length} numbers (unit length): [${head}${embedding.length > 8 ? ', …' : ''}]`;
    }
  }

  // The attention row shown: a probability per patch (the class token's own column left out).
  function row() {
    const seen = s.seen;
    const off = seen.classToken ? 1 : 0, n = seen.gridWidth * seen.gridHeight;
    const q = s.query >= 0 ? s.query + off : seen.classToken ? 0 : Math.floor(seen.gridHeight / 2) * seen.gridWidth + Math.floor(seen.gridWidth / 2);
    const layer = Number(el.layer.value), head = el.head.value;
    const out = new Float64Array(n);
    const heads = head === 'mean' ? Array.from({ length: seen.heads }, (_, h) => h) : [Number(head)];
    for (const h of heads) {
      const r = seen.attention(layer, h)[q];
      for (let i = 0; i < n; i++) out[i] += r[off + i] / heads.length;
    }
    return { values: out, query: q - off };
  }

  // The model's view of the image (its crop or squash), the attention over it, the query outlined.
  function draw() {
    const { view } = el;
    const dpr = Math.min(3, globalThis.devicePixelRatio || 1);
    if (view.width !== VIEW * dpr) { view.width = VIEW * dpr; view.height = VIEW * dpr; }
    const ctx = view.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = getComputedStyle(view).getPropertyValue('--panel').trim() || '#fff';
    ctx.fillRect(0, 0, VIEW, VIEW);
    if (!s.seen || !s.source) return;
    const { width: w, height: h } = s.image;
    ctx.imageSmoothingEnabled = true;
    if (s.model.info.resize === 'crop') {
      const side = Math.min(w, h);
      ctx.drawImage(s.source, (w - side) / 2, (h - side) / 2, side, side, 0, 0, VIEW, VIEW);
    } else {
      ctx.drawImage(s.source, 0, 0, w, h, 0, 0, VIEW, VIEW);
    }
    const { gridWidth: gw, gridHeight: gh } = s.seen;
    const { values, query } = row();
    const max = values.reduce((a, b) => Math.max(a, b), 0) || 1;
    const cw = VIEW / gw, ch = VIEW / gh;
    for (let y = 0; y < gh; y++) {
      for (let x = 0; x < gw; x++) {
        const v = Math.sqrt(values[y * gw + x] / max);  // relative to the strongest patch, square root: weak links show
        ctx.globalAlpha = 0.1 + 0.65 * v;
        ctx.fillStyle = colourOf(v, 'linear');
        ctx.fillRect(x * cw, y * ch, cw, ch);
      }
    }
    ctx.globalAlpha = 1;
    const layer = Number(el.layer.value) + 1, head = el.head.value === 'mean' ? 'mean of heads' : `head ${Number(el.head.value) + 1}`;
    let from;
    if (s.query >= 0 || !s.seen.classToken) {
      ctx.lineWidth = 2.5;
      ctx.strokeStyle = getComputedStyle(view).getPropertyValue('--hl-strong').trim() || '#06c';
      ctx.strokeRect((query % gw) * cw + 1, Math.floor(query / gw) * ch + 1, cw - 2, ch - 2);
      from = `patch (${query % gw + 1}, ${Math.floor(query / gw) + 1})`;
      view.dataset.query = `${query % gw},${Math.floor(query / gw)}`;
    } else {
      from = 'the class token';
      view.dataset.query = 'cls';
    }
    view.dataset.layer = String(layer - 1);
    view.dataset.head = el.head.value;
    view.setAttribute('aria-label', `Attention from ${from}, layer ${layer}, ${head}, over the ${gw}x${gh} patches`);
    el.caption.textContent = `Attention from ${from}, layer ${layer}, ${head}: stronger colour = more attention (relative to the strongest patch, p = ${max.toFixed(3)}).`;
  }

  function patchAt(x, y) {
    if (!s.seen) return null;
    const gx = Math.floor((x / el.view.clientWidth) * s.seen.gridWidth), gy = Math.floor((y / el.view.clientHeight) * s.seen.gridHeight);
    if (gx < 0 || gy < 0 || gx >= s.seen.gridWidth || gy >= s.seen.gridHeight) return null;
    return { x: gx, y: gy };
  }

  // A white canvas to draw on in black; each stroke's end classifies the drawing.
  function initDrawing() {
    const c = el.draw;
    const ctx = c.getContext('2d', { willReadFrequently: true });
    const clear = () => { ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, c.width, c.height); };
    clear();
    let last = null;
    const at = (e) => [(e.offsetX * c.width) / c.clientWidth, (e.offsetY * c.height) / c.clientHeight];
    c.addEventListener('pointerdown', (e) => { last = at(e); c.setPointerCapture(e.pointerId); stroke(last); });
    c.addEventListener('pointermove', (e) => { if (last) { const p = at(e); stroke(p); last = p; } });
    const end = () => {
      if (!last) return;
      last = null;
      const img = ctx.getImageData(0, 0, c.width, c.height);
      createImageBitmap(img).then((b) => run(img, b));  // a snapshot: the canvas may change before it is drawn
    };
    c.addEventListener('pointerup', end);
    c.addEventListener('pointercancel', end);
    function stroke(p) {
      ctx.strokeStyle = '#000';
      ctx.lineWidth = c.width / 14;
      ctx.lineCap = ctx.lineJoin = 'round';
      ctx.beginPath();
      ctx.moveTo(last[0], last[1]);
      ctx.lineTo(p[0], p[1]);
      ctx.stroke();
    }
    el.clear.addEventListener('click', clear);
  }
}
