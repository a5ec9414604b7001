// Greedy decoding through the step API, shared by tests/js/wllama.test.mjs and the relaxed-SIMD
// child process it starts (tests/js/greedy-child.mjs).
/**
 * Greedy ids from qkv, never choosing a banned id, through the step API (feed, logits, argmax),
 * with the margin between the best and the second-best logit at every step. `prefill(session)`
 * feeds the prompt (default: the ids; images in chat feed their embedding rows with them).
 */
export function qkvGreedy(model, ids, banned, n, prefill = (s) => s.feed(ids)) {
  const s = model.createSession();
  try {
    const out = [], gaps = [], seconds = [];
    prefill(s);
    const eog = new Set([...model.info.eogIds]);
    for (let i = 0; i < n; i++) {
      const l = s.logits();
      let best = -1, second = -1;
      for (let v = 0; v < l.length; v++) {
        if (banned.has(v)) continue;
        if (best < 0 || l[v] > l[best]) { second = best; best = v; } else if (second < 0 || l[v] > l[second]) second = v;
      }
      if (eog.has(best)) break;
      out.push(best);
      gaps.push(l[best] - l[second]);
      seconds.push(second);
      s.feed([best]);
    }
    return { out, gaps, seconds };
  } finally {
    s.dispose();
  }
}
