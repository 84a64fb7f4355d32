// Launches Debian's Chromium through playwright-core with the flags TOOLCHAIN.md lists (no sandbox as root, no
// background traffic) and watches a page: every request must stay on the page's origin, and console errors count.
'use strict';
const { chromium } = require('playwright-core');

const ARGS = ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking',
              '--disable-component-update', '--no-first-run', '--disable-sync'];

async function launch() {
  return chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ARGS, headless: true });
}

// Opens a page that records foreign requests and console errors in `watch`.
async function watchedPage(browser, origin, viewport, colorScheme) {
  const context = await browser.newContext({ viewport: viewport || { width: 1400, height: 860 }, colorScheme: colorScheme || 'light' });
  const page = await context.newPage();
  const watch = { foreign: [], errors: [], requests: 0 };
  const check = (url) => {
    ++watch.requests;
    if (!(url.startsWith(origin + '/') || url.startsWith('blob:' + origin) || url.startsWith('data:'))) watch.foreign.push(url);
  };
  // The context sees the page's and its workers' requests (importScripts, the wasm fetch).
  context.on('request', (r) => check(r.url()));
  page.on('console', (m) => { if (m.type() === 'error') watch.errors.push(m.text()); });
  page.on('pageerror', (e) => watch.errors.push(String(e)));
  return { context, page, watch };
}

async function waitState(page, states, timeout) {
  await page.waitForFunction((s) => s.includes(document.documentElement.dataset.state), states, { timeout: timeout || 60000 });
  return page.evaluate(() => document.documentElement.dataset.state);
}

// The engine worker's warm-up on the start page (Engine.warmUp): waits until it has ended (a user's drag takes longer
// than it does) and returns its record ({state: 'done', ms, rows, rounds} ...), or null when none started in time.
async function waitWarm(page, timeout = 20000) {
  const until = Date.now() + timeout;
  for (;;) {
    const worker = page.workers()[0];
    const w = worker ? await worker.evaluate(() => self.allocscopeWarm || null).catch(() => null) : null;
    if ((w && w.state !== 'running') || Date.now() > until) return w;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

module.exports = { launch, watchedPage, waitState, waitWarm };
