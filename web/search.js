// The search box applied to one file's timeline rows, shared by the Active Memory Timeline and the Diff view's two
// timelines: a regular expression over frames (run once per distinct frame, not per event) or a hex address inside
// a block. The core keeps the resulting marks per file and device for draws that ask for "marks". Every view that
// marks frames (the detail card, the flame graph) marks the frames this search found, by frame id, so a search means
// the same in each: the regex tested against "file:line:name".
import { count } from './format.js';

export const isAddress = (text) => /^0x[0-9a-f]+$/i.test(text);

// The regex never runs on the page's thread. JavaScript's engine backtracks, and a nested repetition such as
// (a+)+$ takes exponential time on one frame's text: a shared link with #search=(a+)+$ froze the tab for good
// (docs/reliability.md row 34). It runs on a worker of its own, stopped when it takes longer than this.
export const MATCH_LIMIT_MS = 3000;

// The matcher's source, started from a blob: the offline report (allocscope plot) has no other file to start.
const MATCHER = `'use strict';
let texts = null, key = null;
self.onmessage = (e) => {
  const m = e.data;
  if (m.texts) { texts = m.texts; key = m.key; }
  if (m.key !== key) { self.postMessage({ seq: m.seq, lost: true }); return; }
  let re;
  try { re = new RegExp(m.pattern, 'i'); } catch (err) { self.postMessage({ seq: m.seq, invalid: true }); return; }
  const ids = [];
  for (let i = 0; i < texts.length; ++i) if (re.test(texts[i])) ids.push(i);
  self.postMessage({ seq: m.seq, ids });
};`;

class TooSlow extends Error {}

// One matcher at a time, one question at a time: a stopped matcher takes its frame texts with it, and the questions
// behind the slow one go to a fresh matcher, which is sent the texts again.
const matcher = { url: null, worker: null, key: null, seq: 0, queue: [], busy: null };

function pump() {
  if (matcher.busy || !matcher.queue.length) return;
  const q = matcher.queue.shift();
  if (!matcher.worker) {
    if (!matcher.url) matcher.url = URL.createObjectURL(new Blob([MATCHER], { type: 'text/javascript' }));  // one blob
    matcher.worker = new Worker(matcher.url);
    matcher.key = null;
  }
  const w = matcher.worker;
  const msg = { seq: ++matcher.seq, key: q.key, pattern: q.pattern };
  if (matcher.key !== q.key) { msg.texts = q.texts; matcher.key = q.key; }
  const done = (fn) => { clearTimeout(timer); matcher.busy = null; fn(); pump(); };
  const timer = setTimeout(() => {
    w.terminate();
    if (matcher.worker === w) matcher.worker = null;
    done(() => q.reject(new TooSlow()));
  }, MATCH_LIMIT_MS);
  w.onmessage = (e) => {
    if (e.data.seq !== msg.seq) return;
    done(() => {
      if (e.data.lost) { matcher.key = null; matcher.queue.unshift(q); }  // asked without texts: ask again with them
      else q.resolve(e.data.invalid ? null : e.data.ids);
    });
  };
  w.onerror = (e) => {
    e.preventDefault();
    w.terminate();
    if (matcher.worker === w) matcher.worker = null;
    done(() => q.reject(new Error(`the search's worker failed: ${e.message || 'unknown error'}`)));
  };
  matcher.busy = q;
  w.postMessage(msg);
}

let matchKeys = 0;

function runMatcher(key, texts, pattern) {
  return new Promise((resolve, reject) => { matcher.queue.push({ key, texts, pattern, resolve, reject }); pump(); });
}

// The file's frame ids whose "file:line:name" the regex matches: a Set, or null when there is no regex search
// (empty, an address) or the text is not a valid regex. Cached per file and text. Throws TooSlow when stopped.
export async function frameHits(call, f, text) {
  text = (text || '').trim();
  if (!text || isAddress(text)) return null;
  if (f._hits && f._hits.text === text) return f._hits.ids;
  if (!f._frames) f._frames = (await call({ method: 'frames', id: f.id })).body.frames;
  // Keyed by the file object, not its id: a restarted core numbers files from 1 again, and the matcher would
  // otherwise test the new file's search against the old file's frames.
  if (!f._matchKey) f._matchKey = ++matchKeys;
  const ids = await runMatcher(f._matchKey, f._frames, text);
  f._hits = { text, ids: ids && new Set(ids) };
  return f._hits.ids;
}

// What frameHits last found for this text, without waiting: for cards drawn on a hover (null until it is known).
export function knownHits(f, text) {
  text = (text || '').trim();
  return f._hits && f._hits.text === text ? f._hits.ids : null;
}

// The line a view shows when frameHits or matchRows failed with `e`.
export function searchFailure(f, e) {
  if (!(e instanceof TooSlow)) return e.message;
  return `search stopped: this regular expression ran over ${MATCH_LIMIT_MS / 1000} s on the file's ` +
         `${count(f._frames ? f._frames.length : 0)} frames (a nested repetition like (a+)+ backtracks exponentially)`;
}

// -> {mask: Uint8Array over rows, or null; matches; info: a line for the toolbar ('' when nothing is searched)}.
export async function matchRows(call, f, device, text) {
  text = (text || '').trim();
  if (!text) return { mask: null, matches: 0, info: '' };
  try {
    let r;
    if (isAddress(text)) r = await call({ method: 'match_rows', id: f.id, device, address: text });
    else {
      const ids = await frameHits(call, f, text);
      if (!ids) return { mask: null, matches: 0, info: 'invalid regular expression' };
      r = await call({ method: 'match_rows', id: f.id, device, frames: [...ids] });
    }
    return { mask: r.blobs.mask, matches: r.body.matches,
             info: `${count(r.body.matches)} of ${count(r.body.rows)} allocations match` };
  } catch (e) {
    return { mask: null, matches: 0, info: searchFailure(f, e) };
  }
}
