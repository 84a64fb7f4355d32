// Browser tests of the views: each view paints for a real fixture, and its headline numbers equal the golden files.
'use strict';
const path = require('path');
const { watchedPage, waitState } = require('./browser.js');

async function run(browser, origin, { fixturesDir, artifacts, ok, eq, golden }) {
  console.log('views');
  const { context, page, watch } = await watchedPage(browser, origin);
  for (const base of ['resnet50_train', 'linear_seed']) {
    const mv = golden(base, 'memoryviz.json');
    await page.goto(`${origin}/app/?url=${encodeURIComponent('/fixtures/' + base + '.pickle')}#view=timeline`);
    eq(await waitState(page, ['ready', 'error'], 60000), 'ready', `${base} timeline reaches ready`);
    const peak = await page.getAttribute('[data-peak-bytes]', 'data-peak-bytes').catch(() => null);
    eq(Number(peak), mv.devices['0'].peak_active_bytes, `${base} timeline peak equals PyTorch's`);
    await page.screenshot({ path: path.join(artifacts, `timeline-${base}.png`) });
  }
  eq(watch.foreign, [], 'no request left the origin');
  eq(watch.errors, [], 'no console errors');
  await context.close();
}

module.exports = { run };
