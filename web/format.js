// Number and text formatting shared by the views (bytes in binary units, times, addresses).
const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

export function bytes(n) {
  if (n === null || n === undefined || Number.isNaN(Number(n))) return '?';
  const neg = n < 0;
  let v = Math.abs(Number(n));
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) { v /= 1024; ++u; }
  // Bytes are whole numbers (an average of them, a median, is rounded as the CLI rounds it).
  const d = v >= 100 ? 0 : v >= 10 ? 1 : 2;
  const s = u === 0 ? String(Math.round(v)) : fixedHalfEven(Math.abs(Number(n)), u, d);
  return `${neg ? '-' : ''}${s} ${UNITS[u]}`;
}

// n / 1024^u with d decimals, a value exactly halfway rounded to even, as the CLI's printf (and Python's format,
// PyTorch's _format_size) round the exact binary value: toFixed rounds such ties up, and 12.25 MiB read 12.3 here
// where the CLI says 12.2 (an audit).
function fixedHalfEven(n, u, d) {
  if (!Number.isSafeInteger(n)) return (n / 1024 ** u).toFixed(d);
  const den = 1024n ** BigInt(u);
  const scaled = BigInt(n) * 10n ** BigInt(d);
  let q = scaled / den;
  const r2 = 2n * (scaled % den);
  if (r2 > den || (r2 === den && q % 2n === 1n)) q += 1n;
  const t = q.toString().padStart(d + 1, '0');
  return d ? `${t.slice(0, -d)}.${t.slice(-d)}` : t;
}

// What the views call a device of `file` (a {info} entry of the store's files): cuda:N, or "pinned host memory" for
// the file the worker opened from a snapshot's host_segments and host_traces (PyTorch 2.14), whose one device is 0.
export function deviceName(file, device) {
  return file && file.info && file.info.host_of ? 'pinned host memory' : `cuda:${device}`;
}

// A window of a file (?from=&to=): device `device`'s window from the file's info ({first, last, offset, file_events,
// time_origin_us}: wasm/methods_facts.cpp), or null when the file was loaded whole. The page's steps first..last
// are the window's, the file's steps `offset` more; the steps before `first` place the allocations alive at its
// start, the ones past `last` the releases kept from after it. Every label says the file's own numbers, as the CLI.
export function windowOf(info, device) {
  const d = info && info.devices ? info.devices.find((x) => x.device === device) : null;
  return d && d.window ? d.window : null;
}

// A step as the file numbers it (axis ticks, the step a user types): the page's step plus a window's offset.
export function fileStep(step, win) { return win ? step + win.offset : step; }
// And back: the page's step of a file's step (an answer in the CLI's numbers, such as the peak's).
export function pageStep(step, win) { return win ? step - win.offset : step; }

// A step as the CLI says it: step S is the state after S events (`state --step S`, "after 4 of 33 events"), while
// "event E" names one event, counted from 0 (`state --event E`). "after event S" read one event late. `win`: the
// device's window (windowOf), whose steps are said as the file's.
export function afterEvents(step, total, win) {
  if (win) {
    if (step < win.first) return 'before the window (alive at its start)';
    if (step > win.last) return 'after the window';
    step += win.offset;
    if (total !== undefined) total = win.file_events;
  }
  if (step === 0) return 'before the first event';
  return total === undefined ? `after ${count(step)} events` : `after ${count(step)} of ${count(total)} events`;
}

// "event E" (the page's event E, counted from 0) as the file numbers it.
export function eventName(e, win) {
  if (win) {
    if (e < win.first) return 'before the window';
    if (e >= win.last) return 'after the window';
    e += win.offset;
  }
  return `event ${count(e)}`;
}

// Whether a device's trace records times (the core's `timed`, from `records_times`): PyTorch 2.0's and 2.1's
// files write 0 on every event, and "+0 µs" would read as measured.
export function deviceTimed(info, device) {
  const d = info && info.devices ? info.devices.find((x) => x.device === device) : null;
  return !d || d.timed !== false;
}

// A time since the trace's first event, or what an untimed trace has instead.
export function since(us, first, timed = true) {
  return timed ? `+${micros(us - first)}` : 'no times recorded';
}

export function signedBytes(n) { return (n > 0 ? '+' : '') + bytes(n); }

// One formatter for every count: Number#toLocaleString builds one per call (0.5 ms of each pan/zoom step's labels).
const COUNT = new Intl.NumberFormat('en-US');
export function count(n) { return COUNT.format(Number(n)); }

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

// A frame's line as every view prints it: a line the file did not give (None in Python) as "None", the core's text for
// it, so what a card shows is what the search matches ("file:line:name").
export const lineText = (line) => (line === null || line === undefined ? 'None' : String(line));

// The core's message for a GPU field it cannot read, without the command-line option it names.
export const gpuProblem = (e) => String(e && e.message ? e.message : e).replace(/^--gpu: /, '');
