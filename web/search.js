// The search box applied to one file's timeline rows, shared by the Active Memory Timeline and the Diff view's two
// timelines: a regular expression over frames (run on the page once per distinct frame, not per event) or a hex
// address inside a block. The core keeps the resulting marks per file and device for draws that ask for "marks".
import { count } from './format.js';
import { searchRegex } from './detail.js';

export const isAddress = (text) => /^0x[0-9a-f]+$/i.test(text);

// -> {mask: Uint8Array over rows, or null; matches; info: a line for the toolbar ('' when nothing is searched)}.
export async function matchRows(call, f, device, text) {
  text = (text || '').trim();
  if (!text) return { mask: null, matches: 0, info: '' };
  try {
    let r;
    if (isAddress(text)) r = await call({ method: 'match_rows', id: f.id, device, address: text });
    else {
      const re = searchRegex(text);
      if (!re) return { mask: null, matches: 0, info: 'invalid regular expression' };
      if (!f._frames) f._frames = (await call({ method: 'frames', id: f.id })).body.frames;
      const ids = [];
      f._frames.forEach((s, i) => { if (re.test(s)) ids.push(i); });
      r = await call({ method: 'match_rows', id: f.id, device, frames: ids });
    }
    return { mask: r.blobs.mask, matches: r.body.matches,
             info: `${count(r.body.matches)} of ${count(r.body.rows)} allocations match` };
  } catch (e) {
    return { mask: null, matches: 0, info: e.message };
  }
}
