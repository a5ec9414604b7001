// Small formatting helpers shared by the page's modules.

/** 1536 -> "1.5 KiB". */
export function formatBytes(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return '?';
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let u = 0;
  while (n >= 1024 && u < units.length - 1) { n /= 1024; u++; }
  return `${u === 0 ? n : n.toFixed(n < 10 ? 2 : 1)} ${units[u]}`;
}

/** 1234.5 -> "1.23 s", 12.3 -> "12 ms". */
export function formatMs(ms) {
  if (!Number.isFinite(ms)) return '–';
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}

export function formatRate(perSecond) {
  if (!Number.isFinite(perSecond) || perSecond <= 0) return '–';
  return perSecond >= 100 ? perSecond.toFixed(0) : perSecond.toFixed(1);
}

/**
 * A token piece made visible: newlines and tabs as symbols, nothing empty; with
 * {spaces: true} (or when the piece is only spaces) spaces show as ␣.
 */
export function showPiece(s, { spaces = false } = {}) {
  if (s === '') return '∅';
  if (spaces || /^ +$/.test(s)) s = s.replace(/ /g, '␣');
  return s.replace(/\n/g, '↵').replace(/\t/g, '⇥').replace(/\r/g, '␍');
}

/** Message of an error for people: QkvError's message (it says what to do) and its code. */
export function errorText(e) {
  if (!e) return 'unknown error';
  return String(e.message ?? e);
}
