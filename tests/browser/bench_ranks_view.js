// Benchmark: a file saved by `allocscope ranks --json` (e.g. 1,000 ranks from tests/bench/bench_ranks.sh) opened in
// headless Chromium: pick -> the Ranks view painted (rows drawn, outliers first), and the page's JS heap.
// usage: node bench_ranks_view.js SITE_DIR RANKS.json [runs]
'use strict';
const fs = require('fs');
const path = require('path');
const { serve } = require('./serve.js');
const { launch, watchedPage, waitState } = require('./browser.js');

async function main() {
  const [site, file, runsText] = process.argv.slice(2);
  const { server, origin } = await serve({ '/app/': site });
  console.log('| run | file | rows | pick -> Ranks view ready (s) | outliers shown | JS heap (MiB) |');
  console.log('|---|---|---|---|---|---|');
  for (let r = 1; r <= Number(runsText || 1); ++r) {
    const browser = await launch();
    const { page } = await watchedPage(browser, origin, { width: 1600, height: 1000 });
    await page.goto(origin + '/app/');
    await waitState(page, ['empty']);
    const t0 = Date.now();
    await page.setInputFiles('#file-input', file);
    const st = await waitState(page, ['ready', 'error'], 120000);
    const seconds = (Date.now() - t0) / 1000;
    if (st !== 'ready') { console.log('error:', await page.textContent('#error-message')); process.exit(1); }
    const rows = await page.$$eval('[data-rank-row]', (x) => x.length);
    const outliers = await page.getAttribute('[data-outliers]', 'data-outliers');
    const heap = await page.evaluate(() => (performance.memory ? performance.memory.usedJSHeapSize : 0));
    console.log(`| ${r} | ${path.basename(file)} (${(fs.statSync(file).size / 1e6).toFixed(1)} MB) | ${rows} | ${seconds.toFixed(2)} | ${outliers} | ${(heap / 1048576).toFixed(0)} |`);
    await browser.close();
  }
  server.close();
}

main().catch((e) => { console.error(e); process.exit(1); });
