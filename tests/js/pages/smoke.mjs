// Loads the Emscripten ES module from /dist and reports through window.__result
// (or window.__error). Used by tests/js/browser_smoke.test.mjs.
const violations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  violations.push(`${e.violatedDirective}: ${e.blockedURI || e.sample || ''}`);
});

const out = document.getElementById('out');
try {
  const { default: createQkvModule } = await import('/dist/qkv.mjs');
  const mod = await createQkvModule();
  const simdArch = mod.simdArch();
  window.__result = {
    simdArch,
    crossOriginIsolated: self.crossOriginIsolated,
    sharedArrayBuffer: typeof SharedArrayBuffer === 'function',
    violations,
  };
  out.textContent = JSON.stringify(window.__result, null, 2);
} catch (e) {
  window.__error = String(e && e.stack || e);
  out.textContent = 'error: ' + window.__error;
}
