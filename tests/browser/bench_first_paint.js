// Benchmark: drop -> first picture (the memory curve drawn while the file streams in) and first paint of the Active
// Memory Timeline for a big snapshot in headless Chromium, plus memory
// (main-thread JS heap, the worker's wasm heap, Chromium's total RSS) and the cost of one full-width redraw.
// usage: node bench_first_paint.js SITE_DIR FILE [runs]   Prints a Markdown table row per run.
// A .gz file is opened twice per run, gzip inflated on a worker of its own (the viewer's way) and inline on the
// engine's worker, so the two compare under the same load.
'use strict';
const fs = require('fs');
const path = require('path');
const { execSync } = require('child_process');
const { serve } = require('./serve.js');
const { launch, watchedPage, waitState, waitWarm } = require('./browser.js');

function chromiumRss() {
  // Sum of resident memory of every Chromium process (renderer + GPU + browser), in bytes.
  try {
    const out = execSync("ps -C chromium -o rss=", { encoding: 'utf8' });
    return out.split('\n').filter(Boolean).reduce((a, x) => a + Number(x) * 1024, 0);
  } catch (e) { return 0; }
}

async function main() {
  const [site, file, runsText] = process.argv.slice(2);
  const runs = Number(runsText || 1);
  const { server, origin } = await serve({ '/app/': site });
  const mb = (b) => (b / (1 << 20)).toFixed(0);
  console.log(`| run | inflate | file | drop → first picture (s) | drop → first paint (s) | JS heap main (MiB) | wasm heap (MiB) | Chromium RSS (MiB) | redraw 1600 px (ms) | rects (device) |`);
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  const modes = file.endsWith('.gz') ? ['worker', 'inline'] : ['—'];
  for (let r = 1; r <= runs; ++r) for (const mode of modes) {
    const browser = await launch();
    const { page, watch } = await watchedPage(browser, origin, { width: 1800, height: 1000 });
    await page.goto(origin + '/app/#view=timeline');
    await waitState(page, ['empty']);
    if (mode === 'inline') await page.workers()[0].evaluate(() => { self.allocscopeInflateInline = true; });
    // As a user's drag would, the drop comes after the core's warm-up on the start page (Engine.warmUp).
    await waitWarm(page);
    const t0 = Date.now();
    await page.setInputFiles('#file-input', file);
    const st = await waitState(page, ['ready', 'error'], 300000);
    const seconds = (Date.now() - t0) / 1000;
    if (st !== 'ready') { console.log('error:', await page.textContent('#error-message')); process.exit(1); }
    const heap = await page.evaluate(() => (performance.memory ? performance.memory.usedJSHeapSize : 0));
    // The memory curve drawn while the file still streams in (issue 43), from the page's own clock at the drop.
    const picture = await page.evaluate(() => Number(document.documentElement.dataset.firstPreviewMs || NaN) / 1000);
    const worker = page.workers()[0];
    const wasm = await worker.evaluate(() => self.allocscopeEngine.m.HEAPU8.length);
    // The redraw is timed on the file's busiest device (ddp_rank1.pickle traced cuda:1 only), over its whole trace.
    const draw = await worker.evaluate(() => {
      const e = self.allocscopeEngine;
      const id = self.allocscopeOpened[0];  // the only file opened in this fresh page
      const devices = e.call({ method: 'info', id }).body.devices;
      const device = devices.reduce((a, d) => (d.events > a.events ? d : a), devices[0]).device;
      const steps = e.call({ method: 'axis', id, device }).body.step_count;
      const t = performance.now();
      let rects = 0;
      for (let i = 0; i < 5; ++i) rects = e.call({ method: 'timeline_draw', id, device, x0: (i * steps) / 1000, x1: steps, width: 1600, height: 700 }).body.rects;
      return { ms: (performance.now() - t) / 5, rects, device };
    });
    const rss = chromiumRss();
    await page.screenshot({ path: path.join(__dirname, 'artifacts', 'bench-first-paint.png') });
    console.log(`| ${r} | ${mode} | ${path.basename(file)} (${mb(fs.statSync(file).size)} MiB) | ${Number.isNaN(picture) ? '—' : picture.toFixed(2)} | ${seconds.toFixed(2)} | ${mb(heap)} | ${mb(wasm)} | ${mb(rss)} | ${draw.ms.toFixed(1)} | ${draw.rects} (cuda:${draw.device}) |`);
    if (watch.foreign.length) console.log('foreign requests!', watch.foreign);
    await browser.close();
  }
  server.close();
}

main().catch((e) => { console.error(e); process.exit(1); });
