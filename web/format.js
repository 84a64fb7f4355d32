// Number and text formatting shared by the views (bytes in binary units, times, addresses).
const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

export function bytes(n) {
  const neg = n < 0;
  let v = Math.abs(Number(n));
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) { v /= 1024; ++u; }
  const s = u === 0 ? String(v) : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
  return `${neg ? '-' : ''}${s} ${UNITS[u]}`;
}

export function signedBytes(n) { return (n > 0 ? '+' : '') + bytes(n); }

export function count(n) { return Number(n).toLocaleString('en-US'); }

export function exact(n) { return `${count(n)} bytes`; }

export function micros(us) {
  const v = Number(us);
  if (Math.abs(v) < 1e3) return `${v.toFixed(0)} µs`;
  if (Math.abs(v) < 1e6) return `${(v / 1e3).toFixed(2)} ms`;
  return `${(v / 1e6).toFixed(3)} s`;
}

export function hex(addrString) {
  // Addresses travel as decimal strings (they can exceed 2^53); BigInt keeps them exact.
  try { return '0x' + BigInt(addrString).toString(16); } catch (e) { return String(addrString); }
}

// Creates an element with text (never HTML: snapshot strings only ever become text nodes).
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  if (attrs) for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}
