// Benchmark: pan/zoom latency on the Active Memory Timeline of a big snapshot in headless Chromium. Each step is a key
// press (zoom in, pan, zoom out) timed from the press to the repainted window label (the worker's draw query, the
// canvas paint and the next animation frame). Prints p50/p95/max per kind for tests/bench/RESULTS.md.
// Usage: node tests/browser/bench_pan_zoom.js SITE_DIR FILE
'use strict';
const path = require('path');
const { serve } = require('./serve.js');
const { launch, watchedPage, waitState } = require('./browser.js');

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

async function main() {
  const [site, file] = process.argv.slice(2);
  const { server, origin } = await serve({ '/app/': site });
  const browser = await launch();
  const { page } = await watchedPage(browser, origin, { width: 1800, height: 1000 });
  await page.goto(origin + '/app/#view=timeline');
  await waitState(page, ['empty']);
  await page.setInputFiles('#file-input', file);
  if ((await waitState(page, ['ready', 'error'], 300000)) !== 'ready') throw new Error('did not load');
  const plan = [...Array(12).fill('+'), ...Array(30).fill('ArrowRight'), ...Array(30).fill('ArrowLeft'), ...Array(12).fill('-')];
  const times = { '+': [], '-': [], ArrowRight: [], ArrowLeft: [] };
  for (const key of plan) {
    // Arm an observer on the label that reports the window, then press the key and wait for the repaint.
    await page.evaluate(() => {
      const info = [...document.querySelectorAll('span,div')].find((e) => / rectangles for /.test(e.textContent) &&
                                                                       e.children.length === 0);
      const before = info.textContent;
      window.__step = new Promise((resolve) => {
        const t0 = performance.now();
        const obs = new MutationObserver(() => {
          if (info.textContent === before) return;
          obs.disconnect();
          requestAnimationFrame(() => resolve(performance.now() - t0));
        });
        obs.observe(info, { childList: true, characterData: true, subtree: true });
        window.__t0 = t0;
      });
    });
    await page.keyboard.press(key);
    const ms = await page.evaluate(() => Promise.race([window.__step, new Promise((r) => setTimeout(() => r(-1), 5000))]));
    if (ms >= 0) times[key].push(ms);
  }
  const all = Object.values(times).flat();
  console.log('| step | n | p50 (ms) | p95 (ms) | max (ms) |');
  console.log('|---|---|---|---|---|');
  for (const [k, v] of Object.entries(times)) {
    if (v.length) console.log(`| ${k} | ${v.length} | ${pct(v, 50).toFixed(1)} | ${pct(v, 95).toFixed(1)} | ${Math.max(...v).toFixed(1)} |`);
  }
  console.log(`| all | ${all.length} | ${pct(all, 50).toFixed(1)} | ${pct(all, 95).toFixed(1)} | ${Math.max(...all).toFixed(1)} |`);
  await browser.close();
  server.close();
}

main().catch((e) => { console.error(e); process.exit(1); });
