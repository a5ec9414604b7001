// The demo's Train panel: trains a fresh small model (or fine-tunes the loaded one) on text the
// user pastes or drops, in a Worker (threads where the page is cross-origin isolated), with a
// live loss curve, stop/resume, GGUF download and "use this model".
import { TRAIN_PRESETS, createTrainer } from './qkv/src/js/browser.js';
import { errorText, formatBytes, formatRate } from './format.js';

const $ = (id) => document.getElementById(id);

/**
 * hooks: {modelSource(): source of the loaded model or null, modelName(): string,
 *         useModel(bytes, name): loads GGUF bytes as the page's model}
 */
export function initTrain(hooks) {
  const st = { trainer: null, running: false, gguf: null, key: '' };
  const canvas = $('train-loss');

  function setUi() {
    const has = !!st.trainer;
    $('train-start').disabled = st.running;
    $('train-stop').disabled = !st.running;
    $('train-resume').disabled = st.running || !has || st.trainer.done;
    $('train-download').disabled = st.running || !has || st.trainer.stepsDone === 0;
    $('train-use').disabled = st.running || !has || st.trainer.stepsDone === 0;
    $('train-preset').disabled = $('train-mode').value !== 'fresh';
    $('train-attention').disabled = $('train-mode').value !== 'fresh';
    $('train-panel').dataset.state = st.running ? 'running' : has ? (st.trainer.done ? 'done' : 'stopped') : 'idle';
  }

  function status(text) { $('train-status').textContent = text; }
  function fail(e, what) { $('train-error').textContent = `${what}: ${errorText(e)}${e?.code ? ` (${e.code})` : ''}`; }

  function draw() {
    const h = st.trainer ? st.trainer.history : [];
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 480, ht = canvas.clientHeight || 200;
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(ht * dpr);
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, ht);
    const css = getComputedStyle(canvas);
    const fg = css.color || '#333';
    g.font = '11px system-ui, sans-serif';
    g.fillStyle = fg;
    canvas.dataset.points = String(h.length);
    if (h.length) {  // first step's loss and the mean of the last five (read by tests and assistive tech)
      canvas.dataset.first = String(h[0].loss);
      canvas.dataset.last = String(h.slice(-5).reduce((a, r) => a + r.loss, 0) / Math.min(5, h.length));
    }
    if (!h.length) { g.fillText('The loss curve appears here while training.', 8, ht / 2); return; }
    const total = st.trainer.info.steps;
    const losses = h.map((r) => r.loss).concat(h.filter((r) => r.valLoss !== undefined && Number.isFinite(r.valLoss)).map((r) => r.valLoss));
    const [lo, hi] = lossAxis(losses);
    canvas.dataset.axisLo = String(lo);
    canvas.dataset.axisHi = String(hi);
    const L = 36, R = 8, T = 8, B = 18;
    const x = (s) => L + (w - L - R) * (s / Math.max(total, 1));
    const y = (v) => T + (ht - T - B) * (1 - (v - lo) / Math.max(hi - lo, 1e-9));
    g.strokeStyle = fg;
    g.globalAlpha = 0.3;
    g.beginPath(); g.moveTo(L, T); g.lineTo(L, ht - B); g.lineTo(w - R, ht - B); g.stroke();
    g.globalAlpha = 1;
    g.fillText(hi.toFixed(2), 2, T + 8);
    g.fillText(lo.toFixed(2), 2, ht - B);
    g.fillText(`step ${total}`, w - R - 50, ht - 4);
    g.strokeStyle = '#2a7ae2';
    g.lineWidth = 1.5;
    g.beginPath();
    h.forEach((r, i) => (i ? g.lineTo(x(r.step), y(r.loss)) : g.moveTo(x(r.step), y(r.loss))));
    g.stroke();
    g.fillStyle = '#d9480f';
    for (const r of h) if (r.valLoss !== undefined && Number.isFinite(r.valLoss)) { g.beginPath(); g.arc(x(r.step), y(r.valLoss), 3, 0, 7); g.fill(); }
    canvas.setAttribute('aria-label', `Training loss over ${h.length} steps: first ${h[0].loss.toFixed(3)}, last ${h[h.length - 1].loss.toFixed(3)}`);
  }

  // The y axis spans the losses (a 5% margin each side), not 0..max: a loss that falls from 4.1
  // to 3.6 should fill the chart, not its top eighth.
  function lossAxis(values) {
    const mn = Math.min(...values), mx = Math.max(...values);
    const pad = (mx - mn) * 0.05 || Math.max(Math.abs(mx) * 0.05, 0.01);
    return [Math.max(0, mn - pad), mx + pad];
  }

  function readNumber(id, lo, hi, integer) {
    const v = Number($(id).value);
    const bad = !Number.isFinite(v) || v < lo || v > hi || (integer && !Number.isInteger(v));
    $(id).setAttribute('aria-invalid', String(bad));
    if (bad) throw Object.assign(new Error(`${$(id).labels?.[0]?.textContent ?? id} must be ${integer ? 'an integer' : 'a number'} from ${lo} to ${hi}`), { code: 'bad_argument' });
    return v;
  }

  function options() {
    const text = $('train-text').value;
    if (!text.trim()) throw Object.assign(new Error('paste or drop some text to train on'), { code: 'bad_argument' });
    const o = {
      text, steps: readNumber('train-steps', 1, 100000, true), batch: readNumber('train-batch', 1, 256, true),
      lr: readNumber('train-lr', 1e-6, 1, false), seed: 1, valFraction: 0.1,
    };
    if ($('train-mode').value === 'finetune') {
      const src = hooks.modelSource();
      if (!src) throw Object.assign(new Error('no model is loaded to fine-tune'), { code: 'bad_argument' });
      o.model = src;
      o.name = `${hooks.modelName()} (fine-tuned)`;
    } else {
      const p = $('train-preset').value;
      o.shape = p;
      o.name = `qkv ${p} (trained in the browser)`;
      // Every layer of the chosen kind (docs/attention-kinds.md); blocks of 16 keep a sparse
      // pattern visible in the tiny preset's 64-token windows.
      const kind = $('train-attention').value;
      if (kind !== 'softmax') o.attention = kind;
      if (kind === 'block_sparse') o.sparsePattern = { blockSize: 16, windowBlocks: 1, globalTokens: 4, randomBlocks: 1 };
    }
    // A short text cannot fill long windows: shorten them (at least 8 tokens) to fit.
    const seq = o.model ? 128 : TRAIN_PRESETS[o.shape].seq;
    const approxTokens = text.length / 3;
    o.seq = Math.max(8, Math.min(seq, Math.floor(approxTokens * (1 - o.valFraction) / 4)));
    if (approxTokens * o.valFraction < o.seq + 1) o.valFraction = 0;
    return o;
  }

  async function run() {
    st.running = true;
    setUi();
    $('train-error').textContent = '';
    try {
      const r = await st.trainer.run({
        evalEvery: Math.max(10, Math.round(st.trainer.info.steps / 10)),
        onStep: (s) => {
          status(`Step ${s.step}/${st.trainer.info.steps} · loss ${s.loss.toFixed(3)}` +
            (s.valLoss !== undefined && Number.isFinite(s.valLoss) ? ` · held-out ${s.valLoss.toFixed(3)}` : '') +
            ` · ${formatRate(s.tokensPerSecond)} tokens/s`);
          $('train-tps').textContent = formatRate(s.tokensPerSecond);
          requestAnimationFrame(draw);
        },
      });
      const last = st.trainer.history.at(-1);
      status(`${r.stopped ? 'Stopped' : 'Done'} at step ${r.stepsDone}/${st.trainer.info.steps}` +
        (last ? ` · loss ${last.loss.toFixed(3)}` : '') + (r.valLoss !== null && Number.isFinite(r.valLoss) ? ` · held-out ${r.valLoss.toFixed(3)}` : '') +
        (r.stopped ? '. Resume continues from here.' : '.'));
    } catch (e) {
      fail(e, 'Training failed');
      status('Training stopped by an error.');
    } finally {
      st.running = false;
      draw();
      setUi();
    }
  }

  async function start() {
    if (st.running) return;
    let o;
    try {
      o = options();
    } catch (e) {
      fail(e, 'Cannot start');
      return;
    }
    const old = st.trainer;
    st.trainer = null;
    if (old) await old.dispose();
    st.running = true;
    setUi();
    $('train-error').textContent = '';
    status(o.model ? 'Preparing the loaded model for fine-tuning…' : 'Learning a tokenizer from the text and building the model…');
    try {
      st.trainer = await createTrainer(o);
      const i = st.trainer.info;
      $('train-info').textContent = `${(i.params / 1e6).toFixed(2)}M parameters (dim ${i.dim}, ${i.layers} layers, vocabulary ${i.vocabSize}` +
        `${i.attentionKinds?.some((k) => k !== 'softmax') ? `, ${[...new Set(i.attentionKinds)].join('/')} attention` : ''}) · ` +
        `${i.trainTokens} training tokens, ${i.valTokens} held out · batch ${i.batch} × ${i.seq} · ${i.threads} thread${i.threads > 1 ? 's' : ''} in a worker`;
    } catch (e) {
      st.running = false;
      fail(e, 'Cannot start training');
      status('');
      setUi();
      return;
    }
    st.running = false;
    draw();
    await run();
  }

  async function gguf() {
    return st.trainer.toGGUF({ dtype: 'f32' });
  }

  $('train-start').addEventListener('click', start);
  $('train-stop').addEventListener('click', () => { st.trainer?.stop(); status('Stopping after this step…'); });
  $('train-resume').addEventListener('click', () => { if (st.trainer && !st.running) run(); });
  $('train-download').addEventListener('click', async () => {
    try {
      const bytes = await gguf();
      const url = URL.createObjectURL(new Blob([bytes], { type: 'application/octet-stream' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = `qkv-trained-step${st.trainer.stepsDone}.gguf`;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
      status(`Downloaded ${a.download} (${formatBytes(bytes.byteLength)}).`);
    } catch (e) { fail(e, 'Cannot write the GGUF'); }
  });
  $('train-use').addEventListener('click', async () => {
    try {
      const bytes = await gguf();
      await hooks.useModel(bytes, `trained in this page (step ${st.trainer.stepsDone})`);
    } catch (e) { fail(e, 'Cannot use the trained model'); }
  });
  $('train-mode').addEventListener('change', setUi);

  // Text: paste, pick or drop .txt files.
  const drop = $('train-text');
  const takeText = async (files) => {
    const f = [...files].find((x) => x.size > 0);
    if (!f) return;
    $('train-text').value = await f.text();
    $('train-picked').textContent = `${f.name} (${formatBytes(f.size)})`;
  };
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('dragging'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('dragging'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('dragging');
    if (e.dataTransfer?.files?.length) takeText(e.dataTransfer.files);
  });
  $('train-file').addEventListener('change', (e) => takeText(e.target.files));
  new ResizeObserver(() => draw()).observe(canvas);
  setUi();
  draw();
}
