// Benchmark: pan/zoom latency on the Active Memory Timeline of a big snapshot in headless Chromium. Each step is a key
// press (zoom in, pan, zoom out), timed to the first visible change (the last exact frame's pixels drawn where the new
// window puts them, canvas data-window) and to the exact repaint (the worker's draw query, the canvas paint and the
// next animation frame, seen on the window label). The first change is timed from the test driver's send (as before,
// including the DevTools-protocol round trip), from the key event's time stamp (the page's own work) and to the next
// animation frame. Prints p50/p95/max for tests/bench/RESULTS.md; with --view, also the parts of each step: the page's
// (key -> fetch, last byte -> frame drawn), the server's call (Server-Timing) and HTTP's (queue, first byte, body).
// Usage: node tests/browser/bench_pan_zoom.js SITE_DIR FILE [--view ALLOCSCOPE_BINARY] [--profile] [--trace OUT.json]
//   --view: the file is opened by `allocscope view --backend native` (parsed by that process, which answers the
//   page's calls); also prints the time from the URL to the first drawn timeline and both processes' memory.
//   --profile: each step's parts, and the page's functions with the most CPU time over the steps.
//   --trace: a Chromium trace of the steps (open it in chrome://tracing or ui.perfetto.dev).
'use strict';
const fs = require('fs');
const path = require('path');
const { spawn } = require('child_process');
const { serve } = require('./serve.js');
const { launch, watchedPage, waitState } = require('./browser.js');

// `allocscope view --backend native SITE FILE`: resolves to {child, url} once it prints its URL.
function startView(cli, site, file) {
  const child = spawn(cli, ['view', '--port', '0', '--web-root', site, '--backend', 'native', file], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => { out += d; if (out.includes('\n')) resolve({ child, url: out.split('\n')[0].trim() }); });
    child.on('exit', (code) => reject(new Error(`allocscope view exited ${code}`)));
  });
}

// Peak resident memory of a process (VmHWM), in MiB.
function peakMiB(pid) {
  const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

async function main() {
  const [site, file, flag, cli] = process.argv.slice(2);
  const native = flag === '--view';
  const browser = await launch();
  let server = null, view = null, page;
  if (native) {
    view = await startView(cli, site, file);
    ({ page } = await watchedPage(browser, new URL(view.url).origin, { width: 1800, height: 1000 }));
    const t0 = Date.now();
    await page.goto(view.url + '#view=timeline');
    await page.waitForFunction(() => document.documentElement.dataset.firstPreviewMs || document.documentElement.dataset.state === 'ready',
                               null, { timeout: 600000, polling: 50 });
    const preview = await page.evaluate(() => document.documentElement.dataset.firstPreviewMs);
    console.log(`URL -> first picture (the memory curve of what is parsed so far): ${((Date.now() - t0) / 1000).toFixed(1)} s ` +
                `(${preview} ms after the page asked for the file)`);
    if ((await waitState(page, ['ready', 'error'], 600000)) !== 'ready') throw new Error('did not load');
    const rows = await page.evaluate(() => document.getElementById('preview-canvas').dataset.previewRows);
    console.log(`URL -> file parsed, views mounting: ${((Date.now() - t0) / 1000).toFixed(1)} s (last picture: ${rows} rows)`);
    await page.waitForSelector('canvas[data-window]', { timeout: 600000 });
    console.log(`URL -> first timeline drawn: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  } else {
    let origin;
    ({ server, origin } = await serve({ '/app/': site }));
    ({ page } = await watchedPage(browser, origin, { width: 1800, height: 1000 }));
    await page.goto(origin + '/app/#view=timeline');
    await waitState(page, ['empty']);
    await page.setInputFiles('#file-input', file);
    if ((await waitState(page, ['ready', 'error'], 300000)) !== 'ready') throw new Error('did not load');
  }
  // --profile (last argument): a CPU profile of the page over the key presses; prints the functions with the most
  // self time, to find the page's share of a step.
  const profile = process.argv.includes('--profile') ? await page.context().newCDPSession(page) : null;
  const traceAt = process.argv.indexOf('--trace');
  const tracing = traceAt > 0 ? await page.context().newCDPSession(page) : null;
  const traceEvents = [];
  if (tracing) {
    tracing.on('Tracing.dataCollected', (d) => traceEvents.push(...d.value));
    await tracing.send('Tracing.start', { traceConfig: { includedCategories: ['devtools.timeline', 'blink', 'cc', 'gpu', 'toplevel', 'v8', 'disabled-by-default-devtools.timeline'] } });
  }
  if (profile) {
    await profile.send('Profiler.enable');
    await profile.send('Profiler.setSamplingInterval', { interval: 200 });
    await profile.send('Profiler.start');
  }
  const plan = [...Array(12).fill('+'), ...Array(30).fill('ArrowRight'), ...Array(30).fill('ArrowLeft'), ...Array(12).fill('-')];
  const times = { '+': [], '-': [], ArrowRight: [], ArrowLeft: [] };
  const shown = { driver: [], event: [], frame: [] };  // first visible change (the moved pixels), three ways
  const fromKey = [];  // exact redraw from the key event's time stamp: the product's latency without the driver's
  // --view: the server's call, the rest of the HTTP round trip, its size; and that rest split: before the request
  // went out (queueing, connecting), the first byte's wait beyond the server's call, and the body's transfer.
  // And the page's share: key event -> fetch started, last byte -> the frame drawn (decode, raster, label).
  const parts = { call: [], wire: [], bytes: [], before: [], first: [], body: [], keyToFetch: [], drawn: [] };
  for (const key of plan) {
    // Arm an observer on the label that reports the window, then press the key and wait for the repaint.
    await page.evaluate(() => {
      const info = [...document.querySelectorAll('span,div')].find((e) => / rectangles for /.test(e.textContent) &&
                                                                       e.children.length === 0);
      const before = info.textContent;
      const canvas = document.querySelector('canvas[data-window]');
      const shownBefore = canvas ? canvas.dataset.window : null;
      // The key event's own time stamp (when the renderer created it): the part of the latency that is the page's.
      window.__key = null;
      window.addEventListener('keydown', (e) => { window.__key = e.timeStamp; }, { capture: true, once: true });
      window.__shown = new Promise((resolve) => {
        if (!canvas) return resolve(null);
        const t0 = performance.now();
        const obs = new MutationObserver(() => {
          if (canvas.dataset.window === shownBefore) return;
          obs.disconnect();
          // The frame is drawn (synchronously, in the key handler); it shows at the next vsync.
          const drawn = performance.now();
          requestAnimationFrame(() => resolve({ driver: drawn - t0, event: window.__key === null ? -1 : drawn - window.__key,
                                                frame: window.__key === null ? -1 : performance.now() - window.__key }));
        });
        obs.observe(canvas, { attributes: true, attributeFilter: ['data-window'] });
      });
      window.__step = new Promise((resolve) => {
        const t0 = performance.now();
        const obs = new MutationObserver(() => {
          if (info.textContent === before) return;
          obs.disconnect();
          window.__labelAt = performance.now();
          requestAnimationFrame(() => resolve({ ms: performance.now() - t0,
                                                fromKey: window.__key === null ? -1 : performance.now() - window.__key }));
        });
        obs.observe(info, { childList: true, characterData: true, subtree: true });
        window.__t0 = t0;
      });
    });
    await page.keyboard.press(key);
    const step = await page.evaluate(() => Promise.race([window.__step, new Promise((r) => setTimeout(() => r(null), 5000))]));
    const ms = step ? step.ms : -1;
    if (step && step.fromKey >= 0) fromKey.push(step.fromKey);
    const first = await page.evaluate(() => Promise.race([window.__shown, new Promise((r) => setTimeout(() => r(null), 5000))]));
    if (ms >= 0) times[key].push(ms);
    if (native) {
      // Where the step's wait went: the draw call's resource timing, with the server's own time (Server-Timing).
      const e = await page.evaluate(() => {
        const calls = performance.getEntriesByType('resource').filter((x) => x.name.endsWith('api/call'));
        const r = calls[calls.length - 1];
        performance.clearResourceTimings();
        const call = r && r.serverTiming.find((x) => x.name === 'call');
        return r && call ? { call: call.duration, wire: r.responseEnd - r.startTime - call.duration, bytes: r.encodedBodySize,
                             before: r.requestStart - r.startTime, first: r.responseStart - r.requestStart - call.duration,
                             body: r.responseEnd - r.responseStart,
                             keyToFetch: window.__key === null ? NaN : r.startTime - window.__key,
                             drawn: window.__labelAt - r.responseEnd,
                             calls: calls.map((x) => x.duration.toFixed(0)).join('/') } : null;
      });
      if (e) for (const k of Object.keys(parts)) if (Number.isFinite(e[k])) parts[k].push(e[k]);
      if (e && profile) console.log(`step ${key}: ${ms.toFixed(1)} ms = key->fetch ${e.keyToFetch.toFixed(1)} + server ` +
                                    `${e.call.toFixed(1)} + HTTP ${e.wire.toFixed(1)} (${(e.bytes / 1024).toFixed(0)} KB) + ` +
                                    `drawn ${e.drawn.toFixed(1)} + frame; calls ${e.calls} ms`);
    }
    if (first) for (const k of Object.keys(shown)) if (first[k] >= 0) shown[k].push(first[k]);
  }
  if (tracing) {
    const done = new Promise((resolve) => tracing.once('Tracing.tracingComplete', resolve));
    await tracing.send('Tracing.end');
    await done;
    fs.writeFileSync(process.argv[traceAt + 1], JSON.stringify({ traceEvents }));
  }
  if (profile) {
    const { profile: prof } = await profile.send('Profiler.stop');
    const self = new Map();
    const byId = new Map(prof.nodes.map((n) => [n.id, n]));
    const dt = prof.timeDeltas;
    let total = 0;
    prof.samples.forEach((id, i) => {
      const n = byId.get(id);
      const f = n.callFrame;
      const key = `${f.functionName || '(anonymous)'} ${f.url.split('/').pop()}:${f.lineNumber + 1}`;
      self.set(key, (self.get(key) || 0) + (dt[i] || 0) / 1000);
      total += (dt[i] || 0) / 1000;
    });
    console.log(`page CPU profile over the steps: ${total.toFixed(0)} ms sampled; most self time:`);
    for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`  ${v.toFixed(1)} ms  ${k}`);
  }
  const row = (label, xs) => console.log(`| ${label} | ${xs.length} | ${pct(xs, 50).toFixed(1)} | ${pct(xs, 95).toFixed(1)} | ${Math.max(...xs).toFixed(1)} |`);
  console.log('frame with the pixels moved to the new window (the preview):');
  console.log('| measure | n | p50 (ms) | p95 (ms) | max (ms) |');
  console.log('|---|---|---|---|---|');
  if (shown.driver.length) row('test driver sends the key -> canvas drawn (includes the CDP round trip)', shown.driver);
  if (shown.event.length) row('key event -> canvas drawn (the page\'s own work)', shown.event);
  if (shown.frame.length) row('key event -> next animation frame (the drawn frame goes to the screen)', shown.frame);
  console.log('exact redraw for the new window:');
  const all = Object.values(times).flat();
  console.log('| step | n | p50 (ms) | p95 (ms) | max (ms) |');
  console.log('|---|---|---|---|---|');
  for (const [k, v] of Object.entries(times)) {
    if (v.length) console.log(`| ${k} | ${v.length} | ${pct(v, 50).toFixed(1)} | ${pct(v, 95).toFixed(1)} | ${Math.max(...v).toFixed(1)} |`);
  }
  console.log(`| all | ${all.length} | ${pct(all, 50).toFixed(1)} | ${pct(all, 95).toFixed(1)} | ${Math.max(...all).toFixed(1)} |`);
  if (fromKey.length) row('all, from the key event\'s time stamp (without the driver\'s round trip)', fromKey);
  if (native && parts.call.length) {
    console.log('the draw calls (resource timing; the server reports its own time in Server-Timing):');
    console.log('| part | n | p50 | p95 | max |');
    console.log('|---|---|---|---|---|');
    row('allocscope view answering the call (ms)', parts.call);
    row('the rest of the HTTP round trip, to the last byte (ms)', parts.wire);
    row('answer size (KB)', parts.bytes.map((b) => b / 1024));
    row('of the rest: before the request went out (ms)', parts.before);
    row('of the rest: first byte, beyond the server\'s call (ms)', parts.first);
    row('of the rest: the body\'s transfer (ms)', parts.body);
    row('the page: key event -> the call\'s fetch starts (ms)', parts.keyToFetch);
    row('the page: last byte -> frame drawn and labelled (ms)', parts.drawn);
  }
  if (native) {
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    const metrics = Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map((m) => [m.name, m.value]));
    console.log(`allocscope view peak RSS ${peakMiB(view.child.pid).toFixed(0)} MiB; the tab's JS heap ` +
                `${(metrics.JSHeapTotalSize / 2 ** 20).toFixed(0)} MiB (used ${(metrics.JSHeapUsedSize / 2 ** 20).toFixed(0)})`);
  }
  await browser.close();
  if (server) server.close();
  if (view) view.child.kill('SIGINT');
}

main().catch((e) => { console.error(e); process.exit(1); });
