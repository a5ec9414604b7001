// Runs in the page bench/bench-kernels-chromium.mjs serves: loads each kernel-benchmark build
// (an ES module from qkv_kernel_bench_web) and times every case, alternating the builds case by
// case so that a slow spell of the machine hits all of them alike; keeps each build's best.
window.benchKernels = async ({ builds, rounds, only }) => {
  const mods = [];
  for (const url of builds) mods.push(await (await import(url)).default());
  const n = mods[0]._n_cases();
  const cases = Array.from({ length: n }, (_, c) => ({
    type: mods[0].UTF8ToString(mods[0]._case_type(c)), d: mods[0]._case_d(c), n: mods[0]._case_n(c),
    tokens: mods[0]._case_tokens(c), flops: mods[0]._case_flops(c),
  }));
  for (const m of mods) if (m._n_cases() !== n) throw new Error('the builds have different case lists');
  const picked = [...cases.keys()].filter((c) => !only || only.includes(cases[c].type));
  if (picked.length === 0) throw new Error(`no case has a type in ${only.join(',')}`);
  for (const c of picked) for (const m of mods) m._run_case(c);  // warm-up: the engine tiers up
  // JSON carries no Infinity: a case left out stays null.
  const best = mods.map(() => cases.map((_, c) => (picked.includes(c) ? Infinity : null)));
  for (let r = 0; r < rounds; r++)
    for (const c of picked)
      for (let i = 0; i < mods.length; i++) best[i][c] = Math.min(best[i][c], mods[i]._run_case(c));
  return { cases, best, userAgent: navigator.userAgent };
};
window.benchReady = true;
