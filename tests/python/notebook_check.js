// Opens a notebook that Jupyter executed (nbconvert's HTML of it) in Chromium: the snapshot's cell output is the
// allocscope viewer in an iframe, offline. Checks that it opened the snapshot, that its timeline is drawn (pixels of
// more than the background), and that nothing left the page: no request but the file itself, blobs and data URLs.
// usage: node notebook_check.js NOTEBOOK.html SCREENSHOT.png
'use strict';
const path = require('path');
const { launch } = require(path.join(__dirname, '..', 'browser', 'browser.js'));

let failures = 0;
function ok(cond, what) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}`);
  if (!cond) ++failures;
}

(async () => {
  const [html, shot] = process.argv.slice(2);
  const browser = await launch();
  const context = await browser.newContext({ viewport: { width: 1300, height: 1000 } });
  const page = await context.newPage();
  const requests = [];
  const errors = [];
  context.on('request', (r) => requests.push(r.url()));
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto('file://' + path.resolve(html));
  const frameElement = await page.waitForSelector('iframe.allocscope-viewer', { timeout: 30000 });
  ok(!!frameElement, 'the cell output is the viewer in an iframe');
  const frame = await frameElement.contentFrame();
  await frame.waitForFunction(() => ['ready', 'error'].includes(document.documentElement.dataset.state), null,
                              { timeout: 90000 });
  ok((await frame.evaluate(() => document.documentElement.dataset.state)) === 'ready', 'the viewer opened the snapshot');
  await frame.click('[data-view="timeline"]');
  await frame.waitForSelector('.canvas-wrap canvas', { timeout: 30000 });
  await frame.waitForTimeout(1500);
  // Drawn: the plot's canvas holds many distinct colours (an empty plot is one background and a few axis greys).
  const colours = await frame.evaluate(() => {
    let most = 0;
    for (const c of document.querySelectorAll('.canvas-wrap canvas')) {
      if (!c.width || !c.height) continue;
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      const seen = new Set();
      for (let i = 0; i < d.length; i += 4 * 7) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      most = Math.max(most, seen.size);
    }
    return most;
  });
  ok(colours > 20, `the timeline is drawn (${colours} distinct colours on its canvas)`);
  const foreign = requests.filter((u) => !(u.startsWith('file://') || u.startsWith('blob:') || u.startsWith('data:') ||
                                          u === 'about:srcdoc'));
  ok(foreign.length === 0, `no request off the page (${requests.length} requests; foreign: ${foreign.join(', ')})`);
  ok(errors.length === 0, `no page errors (${errors.join('; ')})`);
  // The answer cell's output is the CLI's text, escaped into <pre>.
  const pre = await page.textContent('pre.allocscope-answer').catch(() => '');
  ok(/peak allocated/.test(pre), 'the summary answer shows as text');
  await page.screenshot({ path: shot, fullPage: false });
  await browser.close();
  if (failures) {
    console.log(`${failures} check(s) failed`);
    process.exit(1);
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
