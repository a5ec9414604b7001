// qkv web demo: loads a model into the engine (in a Web Worker, so the page never freezes),
// streams generated text, and explores its attention. No framework, no network after load.
import { createWorker } from './qkv/src/js/worker-client.js';
import { Explorer } from './explorer.js';
import { cacheAvailable, cacheSummary, clearCache, fetchCached } from './loader.js';
import { errorText, formatBytes, formatMs, formatRate } from './format.js';
import { initTrain } from './train.js';
import { initImages } from './image.js';

const $ = (id) => document.getElementById(id);
const app = $('app');

// The page's sampling defaults; a built-in model's manifest may bring its own (`sampling`: greedy
// for the dates translator), which replace these while it is loaded.
const DEFAULTS = { temperature: 0.8, topK: 40, topP: 0.9, minP: 0.05, repetitionPenalty: 1.1, maxTokens: 200 };
const LIVE_RATE_MIN_MS = 250;
const FIELDS = [
  // [key, input id, label, min, max, integer]
  ['temperature', 'temperature', 'Temperature', 0, 2, false],
  ['topK', 'top-k', 'Top-k', 0, 1 << 24, true],
  ['topP', 'top-p', 'Top-p', 0, 1, false],
  ['minP', 'min-p', 'Min-p', 0, 1, false],
  ['repetitionPenalty', 'repetition-penalty', 'Repetition penalty', 1, 2, false],
  ['maxTokens', 'max-tokens', 'Max tokens', 1, 1 << 20, true],
];

const state = {
  worker: null,
  model: null,        // RemoteModel
  manifest: null,     // web/dist/models/default.json
  builtins: null,     // web/dist/models/index.json: every built-in model, the default first
  loading: null,      // AbortController of the load in progress
  generating: null,   // AbortController of the generation in progress
  picked: { model: null, tokenizer: null },
  source: null,       // {model, tokenizer, name} of the loaded model (the Train panel fine-tunes it)
  defaults: { ...DEFAULTS },  // the loaded model's sampling defaults
  examplePrompt: '',  // the loaded model's example prompt (replaced by the next model's unless edited)
};

const explorer = new Explorer({
  details: $('explorer'), layer: $('layer'), head: $('head'), scale: $('scale'), status: $('explorer-status'),
  canvas: $('heatmap'), tip: $('heatmap-tip'), strip: $('token-strip'), topk: $('topk'), topkToken: $('topk-token'),
  topkActual: $('topk-actual'), caption: $('heatmap-caption'),
}, { onMemoryChange: () => refreshMemory() });

function setState(s) {
  app.dataset.state = s;
  const busy = s === 'loading' || s === 'generating';
  $('generate').disabled = !state.model || busy;
  $('stop').disabled = s !== 'generating';
  for (const id of ['load-url', 'load-default', 'load-builtin']) $(id).disabled = s === 'loading';
  $('load-files').disabled = s === 'loading' || !state.picked.model;
}

// --- alerts -----------------------------------------------------------------------------
function showError(e, context) {
  const box = $('alert');
  box.replaceChildren();
  const p = document.createElement('p');
  p.style.margin = '0';
  p.textContent = `${context ? context + ': ' : ''}${errorText(e)}`;
  box.append(p);
  if (e?.code) {
    const c = document.createElement('span');
    c.className = 'code';
    c.textContent = `(${e.code})`;
    p.append(' ', c);
  }
}
function clearError() { $('alert').replaceChildren(); }

// --- status bar ---------------------------------------------------------------------------
function showBackend(info) {
  const b = $('backend');
  if (!info) { b.textContent = '–'; b.dataset.mode = ''; return; }
  const { mode, reason, threads } = info.threading;
  b.dataset.mode = mode;
  const device = info.device ?? { kind: 'wasm', reason: '' };
  b.dataset.device = device.kind;
  b.textContent = (mode === 'pthreads' ? 'WASM · pthreads' : 'WASM · single thread') +
    (device.kind === 'webgpu' ? ' · model on WebGPU' : '');
  b.title = `${info.simd}; ${reason}`;
  $('threads').textContent = String(threads);
  const where = device.kind === 'webgpu'
    ? `the model runs on the GPU${device.adapter?.vendor ? ` (${device.adapter.vendor})` : ''}, KV cache ${device.kvType ?? 'f32'}`
    : 'the model runs in WASM';
  $('webgpu').textContent = device.kind === 'webgpu' ? 'WebGPU' : 'WASM';
  $('backend-reason').textContent = `${mode === 'pthreads' ? 'Threads' : 'One thread'}: ${reason}. ` +
    `SIMD: ${info.simd}. WebGPU: ${where} (${device.reason}).`;
}

async function refreshMemory() {
  const m = state.model;
  if (!m) { $('memory').textContent = '–'; return; }
  try {
    const info = await m.refreshInfo();
    if (state.model !== m) return;
    const { weightBytes, kvCacheBytes, heapBytes } = info.memory;
    $('memory').textContent = formatBytes(heapBytes);
    $('memory').title = `WebAssembly heap ${formatBytes(heapBytes)}: weights ${formatBytes(weightBytes)}, KV caches ${formatBytes(kvCacheBytes)}`;
    $('fact-memory').textContent = `weights ${formatBytes(weightBytes)} · KV cache ${formatBytes(kvCacheBytes)} · heap ${formatBytes(heapBytes)}`;
  } catch { /* the model went away meanwhile */ }
}

function showModel(info, meta) {
  $('model-name').textContent = meta.name;
  const src = $('model-source');
  src.textContent = meta.source;
  src.hidden = !meta.source;
  $('model-desc').textContent = meta.description ?? '';
  const facts = $('model-facts');
  facts.replaceChildren();
  const add = (k, v, id) => {
    const dt = document.createElement('dt'); dt.textContent = k;
    const dd = document.createElement('dd'); dd.textContent = v;
    if (id) dd.id = id;
    facts.append(dt, dd);
  };
  add('Architecture', `${info.arch}, ${info.encoderDecoder ? `encoder-decoder: ${info.encoderLayers} + ${info.decoderLayers}` : info.layers} layers, ${info.heads} heads` +
    (info.kvHeads !== info.heads ? ` (${info.kvHeads} kv)` : '') + `, dim ${info.dim}`);
  add('Vocabulary', String(info.vocabSize));
  add('Context', `${info.contextLength} tokens`);
  add('Memory', '…', 'fact-memory');
  if (meta.license) add('Licence', meta.license);
  $('top-k').max = String(info.vocabSize);
}

// --- loading -------------------------------------------------------------------------------
function progressUi(label) {
  const box = $('load-progress'), bar = $('progress'), text = $('progress-text');
  box.hidden = false;
  $('progress-label').textContent = label;
  bar.max = 1; bar.value = 0;
  text.textContent = '';
  return {
    label(l) { $('progress-label').textContent = l; },
    update({ loaded, total }) {
      if (total) {
        bar.max = total; bar.value = loaded;
        text.textContent = `${formatBytes(loaded)} of ${formatBytes(total)} (${Math.floor((loaded / total) * 100)}%)`;
      } else {
        bar.removeAttribute('value');
        text.textContent = `${formatBytes(loaded)}`;
      }
    },
    done() { box.hidden = true; },
  };
}

/**
 * Loads a model. `get(signal, progress)` returns {model, tokenizer} sources for the worker
 * (URLs, Blobs); meta is {name, description, license, source}.
 */
async function load(get, meta, { reveal = true } = {}) {
  state.loading?.abort();
  state.generating?.abort();
  const ac = new AbortController();
  state.loading = ac;
  clearError();
  setState('loading');
  const ui = progressUi(`Loading ${meta.name}…`);
  // A load the user asked for from further down the panel: bring its progress bar into view.
  if (reveal) $('load-progress').scrollIntoView({ block: 'nearest' });
  $('run-info').textContent = `Loading the model ${meta.name}…`;
  try {
    const src = await get(ac.signal, ui);
    ui.label(`Loading ${meta.name} into the engine…`);
    const model = await state.worker.loadModel(src.model, {
      tokenizer: src.tokenizer, signal: ac.signal, onProgress: (p) => ui.update(p),
    });
    if (state.loading !== ac) { model.dispose().catch(() => {}); return; }
    const old = state.model;
    state.model = model;
    state.source = { model: src.model, tokenizer: src.tokenizer, name: meta.name };
    explorer.setModel(model);
    if (old) old.dispose().catch(() => {});
    showModel(model.info, meta);
    showBackend(model.info);
    applyModelDefaults(meta);
    $('output-prompt').textContent = '';
    $('output-text').textContent = '';
    app.dataset.model = meta.name;
    $('run-info').textContent = `Model ${meta.name} ready.`;
    await refreshMemory();
  } catch (e) {
    if (state.loading !== ac) return;
    if (e?.code === 'aborted') $('run-info').textContent = `Loading ${meta.name} was cancelled.`;
    else {
      showError(e, `Cannot load ${meta.name}`);
      if (reveal) $('alert').scrollIntoView({ block: 'nearest' });
      $('run-info').textContent = state.model ? '' : 'No model loaded: see the Model panel.';
    }
  } finally {
    if (state.loading === ac) {
      state.loading = null;
      ui.done();
      setState(state.model ? 'ready' : 'empty');
      updateCacheInfo();
    }
  }
}

function abs(url) { return new URL(url, location.href).href; }

// The default model, or another built-in one (an entry of models/index.json).
function loadDefault(opts, m = state.manifest) {
  if (!m) return;
  return load(async () => ({ model: abs(`models/${m.model}`), tokenizer: m.tokenizer ? abs(`models/${m.tokenizer}`) : undefined }),
    { name: m.name, description: m.description, license: m.license, prompt: m.prompt, sampling: m.sampling,
      source: m === state.manifest ? 'default' : 'built-in' }, opts);
}

function loadFromUrls(modelUrl, tokUrl, opts) {
  const name = decodeURIComponent(new URL(modelUrl).pathname.split('/').pop() || modelUrl);
  return load(async (signal, ui) => {
    ui.label(`Downloading ${name}…`);
    const m = await fetchCached(modelUrl, { signal, onProgress: (p) => ui.update(p), what: 'the model' });
    let t = null;
    if (tokUrl) {
      ui.label('Downloading the tokenizer…');
      t = await fetchCached(tokUrl, { signal, onProgress: (p) => ui.update(p), what: 'the tokenizer' });
    }
    $('model-source').dataset.cached = String(m.cached);
    return { model: m.blob, tokenizer: t?.blob, cached: m.cached };
  }, { name, description: `From ${modelUrl}`, source: 'URL' }, opts).then(() => {
    if (state.model) $('model-source').textContent = $('model-source').dataset.cached === 'true' ? 'URL · from cache' : 'URL · downloaded';
  });
}

function loadFiles() {
  const { model, tokenizer } = state.picked;
  if (!model) return;
  if (!tokenizer && !/\.gguf$/i.test(model.name)) {
    showError(new Error('a llama2.c model needs its tokenizer.bin: pick or drop it too'));
    return;
  }
  return load(async () => ({ model, tokenizer }),
    { name: model.name, description: `Local file, ${formatBytes(model.size)}${tokenizer ? ` (tokenizer ${tokenizer.name})` : ''}`, source: 'file' });
}

function showPicked() {
  const { model, tokenizer } = state.picked;
  const parts = [];
  if (model) parts.push(`Model: ${model.name} (${formatBytes(model.size)})`);
  if (tokenizer) parts.push(`Tokenizer: ${tokenizer.name} (${formatBytes(tokenizer.size)})`);
  $('picked').textContent = parts.join(' · ');
  setState(app.dataset.state);
}

/** Dropped files: a name with "tok" (or the smaller of two) is the tokenizer. */
function takeFiles(files) {
  files = [...files];
  if (!files.length) return;
  if (files.length >= 2) {
    files.sort((a, b) => (/tok/i.test(a.name) ? 1 : 0) - (/tok/i.test(b.name) ? 1 : 0) || b.size - a.size);
    state.picked.model = files[0];
    state.picked.tokenizer = files[1];
  } else if (/tok/i.test(files[0].name)) state.picked.tokenizer = files[0];
  else state.picked.model = files[0];
  showPicked();
  if (state.picked.model && (state.picked.tokenizer || /\.gguf$/i.test(state.picked.model.name))) loadFiles();
}

async function updateCacheInfo() {
  const el = $('cache-info');
  if (!cacheAvailable()) {
    el.textContent = 'Model cache: unavailable here (the Cache API needs https or localhost); URL models are downloaded each time.';
    $('clear-cache').disabled = true;
    return;
  }
  try {
    const { entries, bytes } = await cacheSummary();
    el.textContent = entries ? `Model cache: ${entries} file${entries > 1 ? 's' : ''}, ${formatBytes(bytes)}.` : 'Model cache: empty.';
    $('clear-cache').disabled = entries === 0;
  } catch (e) {
    el.textContent = `Model cache: unreadable (${errorText(e)}).`;
  }
}

// --- sampling options ------------------------------------------------------------------------
function readOptions() {
  const opts = {};
  const problems = [];
  for (const [key, id, label, lo, hi, integer] of FIELDS) {
    const input = $(id);
    const raw = input.value.trim();
    const v = raw === '' ? state.defaults[key] : Number(raw);
    const bad = !Number.isFinite(v) || v < lo || v > hi || (integer && !Number.isInteger(v));
    input.setAttribute('aria-invalid', String(bad));
    if (bad) problems.push(`${label} must be ${integer ? 'an integer' : 'a number'} from ${lo} to ${hi}`);
    else opts[key] = v;
  }
  const seedInput = $('seed');
  const rawSeed = seedInput.value.trim();
  if (rawSeed === '') {
    opts.seed = crypto.getRandomValues(new Uint32Array(1))[0] || 1;
    seedInput.setAttribute('aria-invalid', 'false');
  } else {
    const s = Number(rawSeed);
    const bad = !Number.isSafeInteger(s) || s < 0;
    seedInput.setAttribute('aria-invalid', String(bad));
    if (bad) problems.push('Seed must be a non-negative integer (or empty for a random one)');
    else opts.seed = s;
  }
  $('sampling-error').textContent = problems.join('. ');
  return problems.length ? null : opts;
}

// A newly loaded model brings its example prompt and sampling defaults; what the user typed or
// changed stays (a prompt or field still at the previous model's default is not the user's).
function applyModelDefaults(meta) {
  const prompt = $('prompt');
  if (meta.prompt && (!prompt.value.trim() || prompt.value === state.examplePrompt)) prompt.value = meta.prompt;
  state.examplePrompt = meta.prompt ?? state.examplePrompt;
  const next = { ...DEFAULTS, ...(meta.sampling ?? {}) };
  for (const [key, id] of FIELDS) {
    const input = $(id);
    if (input.value.trim() === '' || Number(input.value) === state.defaults[key]) input.value = String(next[key]);
  }
  state.defaults = next;
}

function resetOptions() {
  for (const [key, id] of FIELDS) { $(id).value = String(state.defaults[key]); $(id).setAttribute('aria-invalid', 'false'); }
  $('seed').value = '';
  $('sampling-error').textContent = '';
}

// --- generation ------------------------------------------------------------------------------
const FINISH = {
  length: 'reached max tokens',
  stop: 'the model ended the text',
  context: 'the context is full',
  aborted: 'stopped',
};

async function generate() {
  const model = state.model;
  if (!model || state.generating || state.loading) return;
  const opts = readOptions();
  if (!opts) return;
  clearError();
  const prompt = $('prompt').value;
  const ac = new AbortController();
  state.generating = ac;
  setState('generating');
  explorer.setRun(null);

  const out = $('output'), outText = $('output-text');
  // An encoder-decoder model's output is a new text (a translation, a summary), not a continuation.
  $('output-prompt').textContent = model.info.encoderDecoder ? `${prompt}\n→ ` : prompt;
  outText.textContent = '';
  out.setAttribute('aria-busy', 'true');
  $('caret').hidden = false;
  $('run-info').textContent = 'Generating…';
  $('tps').textContent = '–';
  $('ttft').textContent = '–';

  const t0 = performance.now();
  let tFirst = null, tLast = null, n = 0, pending = '', frame = 0, finish = null;
  const genIds = [];
  const flush = () => {
    frame = 0;
    if (pending) {
      const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
      outText.textContent += pending;
      pending = '';
      if (atEnd) out.scrollTop = out.scrollHeight;
    }
    if (tFirst !== null) {
      $('ttft').textContent = formatMs(tFirst - t0);
      // Tokens reach the page in bursts (the engine yields about every 10 ms): a rate over a
      // shorter span measures the burst, not the engine.
      if (n > 1 && tLast - tFirst >= LIVE_RATE_MIN_MS) $('tps').textContent = formatRate((n - 1) / ((tLast - tFirst) / 1000));
    }
  };
  let promptIds = [], stats = null;
  try {
    promptIds = await model.tokenize(prompt);
    for await (const { token, text } of model.generate(prompt, { ...opts, signal: ac.signal })) {
      const now = performance.now();
      if (tFirst === null) tFirst = now;
      tLast = now;
      if (token >= 0) { genIds.push(token); n++; }
      pending += text;
      if (!frame) frame = requestAnimationFrame(flush);
    }
    finish = 'length';
  } catch (e) {
    if (e?.code === 'aborted') finish = 'aborted';
    else { finish = 'error'; showError(e, 'Generation failed'); }
  } finally {
    // A stopped generation reports its figures too.
    try {
      stats = model.info.encoderDecoder ? model.lastGeneration : (await model.session()).lastGeneration;
    } catch { stats = null; }
    if (finish === 'length' && stats?.finishReason) finish = stats.finishReason;
    if (frame) cancelAnimationFrame(frame);
    flush();
    out.setAttribute('aria-busy', 'false');
    $('caret').hidden = true;
    state.generating = null;
    setState(state.model ? 'ready' : 'empty');
  }
  // The final rate is the engine's own (tokens over its decoding time), not the page's arrival times.
  const rate = stats?.generatedTokens > 0 && stats.decodeMs > 0 ? stats.generatedTokens / (stats.decodeMs / 1000) : NaN;
  $('tps').textContent = formatRate(rate);
  app.dataset.generatedTokens = String(stats?.generatedTokens ?? '');
  app.dataset.decodeMs = String(stats?.decodeMs ?? '');
  const info = $('run-info');
  info.replaceChildren();
  if (finish !== 'error') {
    const ctx = model.info.contextLength;
    info.append(`${n} token${n === 1 ? '' : 's'} from a ${promptIds.length}-token prompt` +
      (Number.isFinite(rate) ? `, ${formatRate(rate)} tokens/s` : '') +
      (tFirst !== null ? `, first after ${formatMs(tFirst - t0)}` : '') +
      `. Finished: ${FINISH[finish] ?? finish}${finish === 'context' ? ` (${ctx} tokens)` : ''}. Seed ${opts.seed} `);
    const again = document.createElement('button');
    again.type = 'button';
    again.className = 'secondary';
    again.textContent = 'Reuse seed';
    again.addEventListener('click', () => { $('seed').value = String(opts.seed); $('seed').focus(); });
    info.append(again);
  }
  app.dataset.finish = finish;
  app.dataset.seed = String(opts.seed);
  if (state.model === model) {
    explorer.setRun({ promptIds, genIds, source: prompt });
    refreshMemory();
  }
}

function stop() { state.generating?.abort(); }

// --- wiring ------------------------------------------------------------------------------------
function wire() {
  $('gen-form').addEventListener('submit', (e) => { e.preventDefault(); generate(); });
  $('stop').addEventListener('click', stop);
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); generate(); }
  });
  document.addEventListener('keydown', (e) => {
    if (e.key !== 'Escape') return;
    if (state.generating) { e.preventDefault(); stop(); } else if (state.loading) { e.preventDefault(); state.loading.abort(); }
  });
  $('reset-sampling').addEventListener('click', resetOptions);
  $('cancel-load').addEventListener('click', () => state.loading?.abort());
  $('load-default').addEventListener('click', () => loadDefault());
  $('load-builtin').addEventListener('click', () => {
    const m = state.builtins?.[Number($('builtin-model').value)];
    if (m) loadDefault(undefined, m);
  });
  $('url-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const m = $('model-url').value.trim(), t = $('tokenizer-url').value.trim();
    let mu, tu = null;
    try { mu = new URL(m, location.href).href; if (t) tu = new URL(t, location.href).href; } catch { /* below */ }
    const gguf = /\.gguf$/i.test(m);
    if (!m || !mu || (t && !tu) || (!t && !gguf)) {
      showError(new Error('give the model URL and its tokenizer.bin URL (a GGUF file carries its own tokenizer)'));
      return;
    }
    loadFromUrls(mu, tu);
  });
  $('clear-cache').addEventListener('click', async () => {
    await clearCache();
    await updateCacheInfo();
    $('cache-info').textContent += ' (cleared)';
  });
  $('model-file').addEventListener('change', (e) => { state.picked.model = e.target.files[0] ?? null; showPicked(); });
  $('tokenizer-file').addEventListener('change', (e) => { state.picked.tokenizer = e.target.files[0] ?? null; showPicked(); });
  $('load-files').addEventListener('click', () => loadFiles());

  // Drag and drop anywhere on the page lands in the drop zone.
  const zone = $('dropzone');
  let depth = 0;
  const hasFiles = (e) => [...(e.dataTransfer?.types ?? [])].includes('Files');
  window.addEventListener('dragenter', (e) => {
    if (!hasFiles(e)) return;
    depth++;
    $('other-model').open = true;
    zone.classList.add('dragging');
  });
  window.addEventListener('dragleave', () => { if (--depth <= 0) { depth = 0; zone.classList.remove('dragging'); } });
  window.addEventListener('dragover', (e) => { if (hasFiles(e)) e.preventDefault(); });
  window.addEventListener('drop', (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    depth = 0;
    zone.classList.remove('dragging');
    takeFiles(e.dataTransfer.files);
  });
}

async function main() {
  wire();
  resetOptions();
  setState('starting');
  if (!globalThis.crossOriginIsolated) {
    const n = $('isolation-notice');
    n.textContent = 'Single-threaded: this page is served without cross-origin isolation, so WebAssembly threads ' +
      'are unavailable. Everything works, only slower. For threads, serve it with the headers ' +
      '"Cross-Origin-Opener-Policy: same-origin" and "Cross-Origin-Embedder-Policy: require-corp" ' +
      '(bash scripts/demo.sh does).';
    n.hidden = false;
    app.dataset.isolated = 'false';
  } else {
    app.dataset.isolated = 'true';
  }
  updateCacheInfo();
  initTrain({
    modelSource: () => state.source?.model ?? null,
    modelName: () => state.source?.name ?? 'model',
    useModel: (bytes, name) => load(async () => ({ model: new Blob([bytes]) }),
      { name, description: `A model trained in this page, ${formatBytes(bytes.byteLength)}`, source: 'trained' }),
  });
  initImages({
    details: $('image-panel'), modelSelect: $('image-model'), modelDesc: $('image-model-desc'), drop: $('image-drop'),
    file: $('image-file'), draw: $('image-draw'), clear: $('image-clear'), status: $('image-status'),
    classes: $('image-classes'), classesHeading: $('image-classes-heading'), embedding: $('image-embedding'),
    layer: $('image-layer'), head: $('image-head'), fromCls: $('image-from-cls'), view: $('image-view'), caption: $('image-caption'),
  });
  try {
    state.worker = await createWorker();
  } catch (e) {
    showError(e, 'Cannot start the engine worker');
    setState('error');
    return;
  }
  try {
    const res = await fetch('models/default.json');
    if (!res.ok) throw new Error(`models/default.json: HTTP ${res.status}`);
    state.manifest = await res.json();
  } catch (e) {
    showError(e, 'No default model in this build');
  }
  // models/index.json lists every built-in model (the encoder-decoder dates model beside the
  // default); older builds have none.
  try {
    const res = await fetch('models/index.json');
    if (res.ok) state.builtins = await res.json();
  } catch {
    state.builtins = null;
  }
  if (Array.isArray(state.builtins) && state.builtins.length > 1) {
    const sel = $('builtin-model');
    state.builtins.forEach((m, i) => sel.add(new Option(`${m.name} (${(m.modelBytes / 1048576).toFixed(1)} MiB)`, String(i))));
    $('builtin-row').hidden = false;
  }
  // ?builtin=NAME loads that built-in model; ?model=URL&tokenizer=URL loads that model (by URL,
  // cached) instead of the default.
  const q = new URLSearchParams(location.search);
  const builtin = q.get('builtin') && state.builtins?.find?.((m) => m.name === q.get('builtin') || m.model === q.get('builtin'));
  if (builtin) {
    $('builtin-model').value = String(state.builtins.indexOf(builtin));
    await loadDefault({ reveal: false }, builtin);
  } else if (q.get('model')) {
    $('model-url').value = q.get('model');
    $('tokenizer-url').value = q.get('tokenizer') ?? '';
    await loadFromUrls(abs(q.get('model')), q.get('tokenizer') ? abs(q.get('tokenizer')) : null, { reveal: false });
  } else if (state.manifest) {
    await loadDefault({ reveal: false });
  } else {
    setState('empty');
  }
}

main();
