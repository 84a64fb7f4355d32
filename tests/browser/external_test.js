// Browser test of the viewer on the real snapshots other projects wrote (tests/fixtures/external, PyTorch 2.0-2.11):
// every file opens, shows PyTorch's counts, and every view the viewer offers for it paints (data-state=ready) on
// every device, through the device selector as a user would; a view that cannot apply (no trace recorded, a device
// without one) says so in words instead of an error or a blank canvas; Diff and Ranks open on them too. One page
// is reused and each file is opened once, its views switched by their tabs, so the 26 files take ~45 s on 2 cores.
// usage: node external_test.js SITE_DIR EXTERNAL_FIXTURES_DIR
'use strict';
const fs = require('fs');
const path = require('path');
const { serve } = require('./serve.js');
const { launch, watchedPage, waitState } = require('./browser.js');

const [siteDir, externalDir] = process.argv.slice(2);
const artifacts = path.join(__dirname, 'artifacts');

let passed = 0, failed = 0;
const failures = [];
function ok(cond, what) {
  if (cond) ++passed;  // one line per file and view would bury the failures: only those are printed in full
  else { ++failed; failures.push(what); console.log(`  FAIL ${what}`); }
  return cond;
}
function eq(got, want, what) { return ok(JSON.stringify(got) === JSON.stringify(want), `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`); }

const FILES = fs.readdirSync(externalDir).filter((f) => /\.pickle(\.gz)?$/.test(f)).sort();
const baseOf = (f) => f.replace(/\.pickle(\.gz)?$/, '');
const factsOf = (f) => JSON.parse(fs.readFileSync(path.join(externalDir, 'expected', `${baseOf(f)}.facts.json`), 'utf8'));
const traced = (facts) => facts.trace_events_per_device.some((n) => n > 0);

// The views of one file, by what they need: the whole file, or one device's trace.
const FILE_VIEWS = ['overview', 'oom'];
const DEVICE_VIEWS = ['timeline', 'segments', 'state', 'flame', 'peak', 'leaks'];
const CANVAS_VIEWS = new Set(['timeline', 'segments', 'state', 'flame']);
// What a file without a trace still offers, from the segments it holds: the segment map and what is alive in it.
const SEGMENT_VIEWS = ['state', 'flame', 'peak'];
// What a view must say when it has nothing to draw: a [data-empty] element with words in it.
const EMPTY = '#view [data-empty]';

// Reads what the current view shows: the page state, its error or empty-state text, how many pixels its canvases
// paint (a blank canvas has none), and the numbers it exposes.
function look(page) {
  return page.evaluate(() => {
    const html = document.documentElement;
    const view = document.getElementById('view');
    const empty = view.querySelector('[data-empty]');
    let inked = 0;
    for (const c of view.querySelectorAll('canvas')) {
      if (!c.width || !c.height || c.closest('.minimap')) continue;
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) ++inked;
    }
    const num = (sel, name) => { const e = view.querySelector(sel); return e ? Number(e.getAttribute(name)) : null; };
    return {
      state: html.dataset.state,
      error: html.dataset.state === 'error' ? document.getElementById('error-message').textContent : null,
      empty: empty ? { kind: empty.dataset.empty, text: empty.textContent.trim() } : null,
      canvases: view.querySelectorAll('canvas').length,
      inked,
      rects: [...view.querySelectorAll('canvas[data-rects]')].map((c) => Number(c.dataset.rects)),
      stateSegments: num('[data-state-segments]', 'data-state-segments'),
      peakBytes: num('[data-peak-bytes]', 'data-peak-bytes'),
      peakAllocated: num('[data-peak-allocated]', 'data-peak-allocated'),
      peakStep: num('[data-peak-step]', 'data-peak-step'),
      peakReserved: num('[data-peak-reserved]', 'data-peak-reserved'),
    };
  });
}

// data-state only moves to `ready` on the first paint after opening files; a view switch keeps it. Marking the page
// first makes the next paint (or failure) of the newly mounted view visible as the move back to ready (or error).
async function mark(page) { await page.evaluate(() => { document.documentElement.dataset.state = 'switching'; }); }
async function settle(page) { return waitState(page, ['ready', 'error'], 30000).catch(() => 'timeout'); }

async function openUrl(page, origin, files, view) {
  const q = files.map((f) => 'url=' + encodeURIComponent('/fixtures/' + f)).join('&');
  await page.goto('about:blank');  // a hash-only change would not reload the page
  await page.goto(`${origin}/app/?${q}${view ? `#view=${view}` : ''}`);
  return waitState(page, ['ready', 'error'], 60000).catch(() => 'timeout');
}

async function shot(page, name) {
  fs.mkdirSync(artifacts, { recursive: true });
  await page.screenshot({ path: path.join(artifacts, `external-${name}.png`) }).catch(() => {});
}

const shotsTaken = new Set();  // one screenshot of each kind of empty state, for a person to look at

// One view after it settled: ready, and either painted or saying in words why there is nothing to show.
async function checkView(page, where, st, view) {
  const v = await look(page);
  if (!ok(st === 'ready', `${where}: reaches ready (${st}${v.error ? `: "${v.error}"` : ''})`)) { await shot(page, where.replace(/[^\w.-]+/g, '_')); return v; }
  if (v.empty) {
    ok(v.empty.text.length > 20 && (await page.isVisible(EMPTY)), `${where}: the empty-state message is visible: "${v.empty.text}"`);
    const kind = `${v.empty.kind}-${view}`;
    if (!shotsTaken.has(kind)) { shotsTaken.add(kind); await shot(page, `empty-${kind}-${where.replace(/[^\w.-]+/g, '_')}`); }
  }
  else if (v.canvases) ok(v.inked > 0, `${where}: its canvas is painted (${v.inked} px)`);
  else ok((await page.textContent('#view')).trim().length > 20, `${where}: shows its answer`);
  return v;
}

async function singleFiles(page, origin, watch) {
  console.log('single files');
  for (const f of FILES) {
    const base = baseOf(f), facts = factsOf(f);
    const t0 = Date.now(), errorsBefore = watch.errors.length;
    // Opened as a user opens it (no view asked for): it lands on its most useful view and draws it. A trace: the
    // Active Memory Timeline, on the device that ran out of memory if one did; segments without a trace: the
    // allocator's segment map; nothing at all: the Overview, which says why.
    const landed = await openUrl(page, origin, [`external/${f}`], '');
    const first = await look(page);
    if (!ok(landed === 'ready', `${base}: opens (${landed}${first.error ? `: "${first.error}"` : ''})`)) { await shot(page, base); continue; }
    const withSegments = facts.segments > 0;
    const wantView = traced(facts) ? 'timeline' : withSegments ? 'state' : 'overview';
    const where = await page.evaluate(() => ({ view: (document.querySelector('#tabs .tab.active') || {}).dataset?.view,
      device: Number(document.getElementById('device-select').value), badge: document.querySelector('[data-oom-badge]') ? 1 : 0 }));
    eq(where.view, wantView, `${base}: lands on its most useful view`);
    if (wantView === 'overview') ok(first.empty && first.empty.kind === 'no-trace', `${base}: the Overview it lands on says why there is nothing to draw`);
    else ok(first.inked > 0, `${base}: the ${wantView} it lands on is drawn (${first.inked} px)`);
    if (traced(facts)) ok((facts.trace_events_per_device[where.device] || 0) > 0, `${base}: on a device with a trace (cuda:${where.device})`);
    eq(where.badge, facts.actions.oom ? 1 : 0, `${base}: the OOM tab has a badge exactly when the file has oom events`);
    await mark(page);
    await page.click('[data-view="overview"]');
    const st = wantView === 'overview' ? landed : await settle(page);
    const opened = await look(page);
    if (!ok(st === 'ready', `${base}: its Overview opens (${st})`)) continue;

    // Overview: PyTorch's counts, and per device what the trace and the segments hold.
    const shown = await page.evaluate(() => {
      const out = { actions: {}, perDevice: [], devices: [] };
      for (const e of document.querySelectorAll('[data-fact]')) out[e.dataset.fact] = Number(e.dataset.value);
      for (const e of document.querySelectorAll('[data-action]')) out.actions[e.dataset.action] = Number(e.dataset.value);
      for (const e of document.querySelectorAll('[data-device-events]')) out.perDevice[Number(e.dataset.deviceEvents)] = Number(e.dataset.value);
      for (const e of document.querySelectorAll('[data-device-segments]')) out.devices.push([Number(e.dataset.deviceSegments), Number(e.dataset.value)]);
      return out;
    });
    eq([shown.total_reserved, shown.total_allocated, shown.segments, shown.active_blocks],
       [facts.total_reserved, facts.total_allocated, facts.segments, facts.active_blocks], `${base}: overview totals equal PyTorch's`);
    eq(shown.actions, facts.actions, `${base}: overview action counts`);
    const traces = facts.trace_events_per_device;
    eq(traces.map((_, d) => shown.perDevice[d] ?? null), traces, `${base}: overview events per device`);
    // (A bare list of segments has no device traces: its devices come from the segments, with no events.)
    ok(shown.perDevice.every((n, d) => d < traces.length || !n), `${base}: devices without a trace list no events (${JSON.stringify(shown.perDevice)})`);
    eq(shown.devices.reduce((a, [, n]) => a + n, 0), facts.segments, `${base}: the devices table's segments add up to PyTorch's count`);

    // The tabs: with a trace, every single-file view; without one, the views that need a trace are not offered and
    // the overview says why.
    const tabs = await page.$$eval('#tabs button', (bs) => bs.map((b) => b.dataset.view));
    const withTrace = traced(facts);
    eq(tabs, withTrace ? [...FILE_VIEWS.slice(0, 1), ...DEVICE_VIEWS, 'oom', 'whatif']
      : withSegments ? ['overview', ...SEGMENT_VIEWS, 'oom'] : FILE_VIEWS, `${base}: the views offered`);
    if (!withTrace) {
      const why = opened.empty;
      ok(why && why.kind === 'no-trace' && /no (allocation )?trace/i.test(why.text) && /_record_memory_history/.test(why.text),
         `${base}: the overview says there is no trace and how to record one (${why ? `"${why.text}"` : 'no [data-empty] message'})`);
    }
    await checkView(page, `${base} overview`, st, 'overview');

    // OOM, once per file.
    await mark(page);
    await page.click('[data-view="oom"]');
    const oom = await checkView(page, `${base} oom`, await settle(page), 'oom');
    if (oom.state === 'ready') eq(Number(await page.getAttribute('[data-ooms]', 'data-ooms').catch(() => null)), facts.actions.oom || 0, `${base}: OOM view lists every oom event`);

    // The per-device views on every device the selector offers (a device without a trace must say so).
    if (withTrace) {
      const devices = await page.$$eval('#device-select option', (os) => os.map((o) => Number(o.value)));
      let stateSegments = 0;
      for (const d of devices) {
        const events = facts.trace_events_per_device[d] || 0;
        const peaks = {};
        if (devices.length > 1 && Number(await page.inputValue('#device-select')) !== d) {
          // The device selector, as a user switches: the view shown (Leaks, the last one) must follow it at once.
          await mark(page);
          await page.selectOption('#device-select', String(d));
          const v = await checkView(page, `${base} cuda:${d} leaks after choosing the device`, await settle(page), 'device-select');
          const h2 = await page.evaluate(() => (document.querySelector('#view h2') || {}).textContent || '');
          if (v.state === 'ready' && events && /^Leaks/.test(h2))
            ok(new RegExp(`cuda:${d}$`).test(h2), `${base}: the view shown follows the device selector to cuda:${d} ("${h2}")`);
        }
        // What-if too (a per-device view listed after OOM), before Leaks so that Leaks stays the last one shown.
        for (const view of [...DEVICE_VIEWS.slice(0, -1), 'whatif', 'leaks']) {
          const where = `${base} cuda:${d} ${view}`;
          await mark(page);
          await page.click(`[data-view="${view}"]`);
          const v = await checkView(page, where, await settle(page), view);
          if (v.state !== 'ready') continue;
          const segsHere = (shown.devices.find(([dev]) => dev === d) || [d, 0])[1];
          if (!events && SEGMENT_VIEWS.includes(view) && segsHere) {
            // The segments this device holds answer State, Flame and Peak (the one state there is).
            ok(!v.empty && (v.inked > 0 || v.peakAllocated !== null), `${where}: a device without a trace shows its segments' state (${v.inked} px)`);
            if (view === 'state') stateSegments += v.stateSegments || 0;
          } else if (!events) {
            ok(v.empty && v.empty.kind === 'no-trace' && new RegExp(`cuda:${d}`).test(v.empty.text),
               `${where}: a device without a trace says so (${v.empty ? `"${v.empty.text}"` : `no message; ${v.canvases} canvases, ${v.inked} px`})`);
          } else if (view === 'timeline') {
            // (PyTorch 2.0-2.4 files whose trace is one free_completed still draw the blocks alive before the trace.)
            ok(v.peakBytes > 0 && v.rects.length === 1 && v.rects[0] > 0, `${where}: draws bands (${v.rects} rectangles) and the peak (${v.peakBytes})`);
            peaks.timeline = v.peakBytes;
          } else if (view === 'segments') {
            ok(v.peakReserved > 0 && v.rects.length === 1 && v.rects[0] > 0, `${where}: draws bands (${v.rects} rectangles) and the peak reserved (${v.peakReserved})`);
            peaks.reserved = v.peakReserved;
          } else if (view === 'flame') {
            // At the peak of active memory (the event picked last may be elsewhere); compared with the Peak view below.
            await page.click('#view button:has-text("At peak")');
            await page.waitForFunction(() => / the peak$/.test((document.querySelector('#view [data-total]') || {}).textContent || ''), null, { timeout: 10000 }).catch(() => null);
            peaks.flame = Number(await page.getAttribute('#view [data-total]', 'data-total').catch(() => null));
          } else if (view === 'peak') {
            eq(peaks.flame, v.peakAllocated, `${where}: the flame graph at the peak holds the Peak view's bytes`);
            eq(v.peakReserved, peaks.reserved, `${where}: peak reserved equals the Segments timeline's`);
            // The timeline's peak is PyTorch's max_size, the highest total after an action (MemoryViz.js): when memory
            // is highest before the first event (traces whose only event frees a block allocated before them, as in
            // the PyTorch 2.0-2.4 files here), PyTorch's number, and so the timeline's, is lower than the real one.
            if (v.peakStep === 0) ok(peaks.timeline <= v.peakAllocated, `${where}: peak before the first event: the timeline's (PyTorch's) ${peaks.timeline} <= ${v.peakAllocated}`);
            else eq(peaks.timeline, v.peakAllocated, `${where}: the Peak view equals the Active Memory Timeline's peak (at event ${v.peakStep})`);
          } else if (view === 'state') {
            // The allocator state history at the last event holds the segments the snapshot lists for that device.
            await page.keyboard.press('End');
            await page.waitForFunction(() => {
              const c = document.querySelector('#view canvas[data-state-step]'), s = document.querySelector('#view .scrubber');
              return c && s && c.dataset.stateStep === s.max;
            }, null, { timeout: 10000 }).catch(() => null);
            const end = await look(page);
            ok(end.stateSegments !== null, `${where}: exposes its segment count (data-state-segments ${end.stateSegments})`);
            stateSegments += end.stateSegments || 0;
          }
          if (events && CANVAS_VIEWS.has(view)) ok(v.canvases > 0, `${where}: draws on a canvas`);
        }
      }
      eq(stateSegments, facts.segments, `${base}: State history at the last event shows PyTorch's segment count, summed over devices`);
    } else if (withSegments) {
      // No trace: State, Flame and Peak answer from the segments, on every device that has some.
      const devices = await page.$$eval('#device-select option', (os) => os.map((o) => Number(o.value)));
      let stateSegments = 0;
      for (const d of devices) {
        if (devices.length > 1 && Number(await page.inputValue('#device-select')) !== d) {
          await mark(page);
          await page.selectOption('#device-select', String(d));
          await settle(page);
        }
        let flame = null;
        const segsHere = (shown.devices.find(([dev]) => dev === d) || [d, 0])[1];
        for (const view of SEGMENT_VIEWS) {
          const where = `${base} cuda:${d} ${view} (no trace)`;
          await mark(page);
          await page.click(`[data-view="${view}"]`);
          const v = await checkView(page, where, await settle(page), view);
          if (v.state !== 'ready') continue;
          if (!segsHere) {  // an empty device trace and no segments: nothing to show, said in words
            ok(v.empty && v.empty.kind === 'no-trace', `${where}: a device with neither trace nor segments says so`);
            continue;
          }
          if (view === 'state') stateSegments += v.stateSegments || 0;
          if (view === 'flame') {
            await page.waitForFunction(() => (document.querySelector('#view [data-total]') || {}).dataset?.total !== undefined, null, { timeout: 10000 }).catch(() => null);
            flame = Number(await page.getAttribute('#view [data-total]', 'data-total').catch(() => null));
          }
          if (view === 'peak') eq(v.peakAllocated, flame, `${where}: what is alive equals the flame graph's total`);
        }
      }
      eq(stateSegments, facts.segments, `${base}: the segment map shows PyTorch's segment count, summed over devices`);
    }
    eq(watch.errors.slice(errorsBefore), [], `${base}: no console errors or uncaught exceptions`);
    console.log(`  ${base}: ${Date.now() - t0} ms`);
  }
}

// Two files: the Diff view on neighbours in the list (each file once as A, once as B). Many files: Ranks on all.
async function manyFiles(page, origin, watch) {
  console.log('diff and ranks');
  const t0 = Date.now(), errorsBefore = watch.errors.length;
  for (let i = 0; i < FILES.length; ++i) {
    const pair = [FILES[i], FILES[(i + 1) % FILES.length]];
    const where = `diff ${baseOf(pair[0])} | ${baseOf(pair[1])}`;
    const st = await openUrl(page, origin, pair.map((f) => `external/${f}`), 'diff');
    const v = await checkView(page, where, st, 'diff');
    if (v.state !== 'ready') continue;
    eq(await page.$$eval('[data-diff-panel]', (ps) => ps.length), 2, `${where}: two panels`);
    const noTrace = pair.filter((f) => !traced(factsOf(f))).length;
    const said = await page.$$eval('[data-diff-panel] [data-empty]', (es) => es.map((e) => e.textContent));
    eq(said.length, noTrace, `${where}: each file without a trace says so (${JSON.stringify(said)})`);
    // The traced ones draw their bands (the canvas gets data-rects once its first draw arrived).
    await page.waitForFunction((n) => { const cs = [...document.querySelectorAll('[data-diff-panel] canvas')]; return cs.length === n && cs.every((c) => c.dataset.rects); },
                               2 - noTrace, { timeout: 10000 }).catch(() => null);
    const rects = await page.$$eval('[data-diff-panel] canvas', (cs) => cs.map((c) => Number(c.dataset.rects)));
    ok(rects.length === 2 - noTrace && rects.every((n) => n > 0), `${where}: each traced file's timeline draws bands (${rects} rectangles)`);
  }
  const st = await openUrl(page, origin, FILES.map((f) => `external/${f}`), 'ranks');
  const v = await checkView(page, `ranks of all ${FILES.length}`, st, 'ranks');
  if (v.state === 'ready') eq(await page.$$eval('[data-rank-row]', (rs) => rs.length), FILES.length, 'ranks: one row per file');
  eq(watch.errors.slice(errorsBefore), [], 'diff and ranks: no console errors or uncaught exceptions');
  console.log(`  ${Date.now() - t0} ms`);
}

async function main() {
  ok(FILES.length >= 26, `at least the 26 external snapshots are found (${FILES.length} in ${externalDir})`);
  const { server, origin } = await serve({ '/app/': siteDir, '/fixtures/': path.dirname(externalDir), '/': siteDir });
  const browser = await launch();
  const t0 = Date.now();
  try {
    const { context, page, watch } = await watchedPage(browser, origin);
    await singleFiles(page, origin, watch);
    await manyFiles(page, origin, watch);
    eq(watch.foreign, [], 'no request left the origin');
    await context.close();
  } catch (e) {
    ok(false, `${e && e.stack ? e.stack : e}`);
  } finally {
    await browser.close();
    server.close();
  }
  console.log(`${passed} passed, ${failed} failed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  if (failures.length) console.log('failures:\n' + failures.map((f) => `  ${f}`).join('\n'));
  process.exit(failed ? 1 : 0);
}

main();
