// Browser test of issue 40, "the answer where the user looks": the moments of use a new user meets, each on a real
// file in Debian's Chromium. (1) the detail column never covers what the pointer is on, wraps its stack lines and
// leads with the user's frame, marked, on a context='all' stack; (2) a snapshot without a trace opens on the
// allocator's segment map and offers Flame and Peak of what is alive; (3) an OOM file opens on the device that ran
// out, with the OOM marked on its timeline, a badge on the OOM tab and the Overview saying what happened; (4) memory
// with no stack is a labelled node of the flame graph; (5) text, CSV and pickles that are not snapshots are refused in
// words; (6) the timeline, Peak and What-if name the peak alike; (7) the State history's caption stays below its
// rows, the header keeps to one line with two files at 1600 px, `?` lists every view's key, the Leaks chart has
// axes. One page, reused; a few seconds per moment.
// usage: node moments_test.js SITE_DIR FIXTURES_DIR
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { serve } = require('./serve.js');
const { launch, watchedPage, waitState } = require('./browser.js');

const [siteDir, fixtures] = process.argv.slice(2);
const artifacts = path.join(__dirname, 'artifacts');

let passed = 0, failed = 0;
function ok(cond, what) {
  if (cond) { ++passed; console.log(`  ok   ${what}`); } else { ++failed; console.log(`  FAIL ${what}`); }
  return cond;
}
function eq(got, want, what) { return ok(JSON.stringify(got) === JSON.stringify(want), `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`); }
const facts = (rel) => JSON.parse(fs.readFileSync(path.join(fixtures, path.dirname(rel), 'expected',
  `${path.basename(rel).replace(/\.pickle(\.gz)?$/, '')}.facts.json`), 'utf8'));

async function open(page, origin, files, hash) {
  const q = files.map((f) => 'url=' + encodeURIComponent('/fixtures/' + f)).join('&');
  await page.goto('about:blank');
  await page.goto(`${origin}/app/?${q}${hash ? '#' + hash : ''}`);
  return waitState(page, ['ready', 'error'], 60000).catch(() => 'timeout');
}
async function view(page) { return page.evaluate(() => (document.querySelector('#tabs .tab.active') || {}).dataset?.view || null); }
async function inked(page, sel) {
  return page.evaluate((s) => {
    const c = document.querySelector(s);
    if (!c || !c.width) return 0;
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i]) ++n;
    return n;
  }, sel);
}
// Into tests/browser/artifacts (a selection is copied to docs/screenshots by hand, as for the other tests).
async function shot(page, name) {
  fs.mkdirSync(artifacts, { recursive: true });
  await page.screenshot({ path: path.join(artifacts, `${name}.png`) });
}
const rect = (page, sel) => page.evaluate((s) => { const r = document.querySelector(s).getBoundingClientRect(); return { x: r.x, y: r.y, w: r.width, h: r.height }; }, sel);
const overlaps = (a, b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

// (1) The detail column: beside the plot, never over it; stack lines wrap; the user's frame first, marked.
async function detailColumn(page, origin) {
  console.log('detail column (gpt2_cpp: stacks=\'all\')');
  await open(page, origin, ['gpt2_cpp.pickle.gz'], 'view=timeline');
  const canvas = await rect(page, '#view canvas[aria-label="active memory timeline"]');
  const detail = await rect(page, '#detail');
  ok(detail.w > 200 && !overlaps(canvas, detail), `the detail column (${JSON.stringify(detail)}) is beside the plot (${JSON.stringify(canvas)})`);
  // Hover the plot's bottom right, where the card used to sit, low enough to be on a band, until a card shows.
  let card = null;
  for (let dx = 20; dx < 400 && !card; dx += 25) {
    for (const dy of [30, 60, 100]) {
      const x = canvas.x + canvas.w - dx, y = canvas.y + canvas.h - dy;
      await page.mouse.move(x, y);
      await page.waitForTimeout(0);
      card = await page.waitForSelector('#detail .alloc-card', { timeout: 1500 }).then(() => ({ x, y }), () => null);
      if (card) break;
    }
  }
  if (!ok(card, 'hovering the bottom right of the plot shows an allocation card')) return;
  const under = await page.evaluate(({ x, y }) => document.elementFromPoint(x, y).getAttribute('aria-label'), card);
  eq(under, 'active memory timeline', 'the pointer is still on the plot, not on the card');
  // A traced allocation's C++ stack (context='all': 20-odd frames, the allocator's first) for what follows.
  const framesOf = async () => Number((/ of (\d+) frames/.exec(await page.textContent('#detail').catch(() => '')) || [])[1] || 0);
  let deep = null;
  for (let fx = 0.1; fx < 0.95 && !deep; fx += 0.07) {
    for (const fy of [0.95, 0.85, 0.7, 0.5]) {
      const x = canvas.x + canvas.w * fx, y = canvas.y + canvas.h * fy;
      await page.mouse.move(x, y);
      const n = await page.waitForSelector('#detail .alloc-card', { timeout: 1000 }).then(framesOf, () => 0);
      if (n >= 10) { deep = n; break; }
    }
  }
  if (!ok(deep, `an allocation with a C++ stack is found (${deep} frames)`)) return;
  const lead = await page.evaluate(() => {
    const l = document.querySelector('#detail .site-lead');
    const site = document.querySelector('#detail .stack .site');
    const stack = document.querySelector('#detail .stack');
    const lines = [...stack.children];
    return { lead: l ? l.textContent : null, data: l ? l.dataset.site : null, marked: site ? site.title : null,
             index: lines.indexOf(site), wraps: stack.scrollWidth <= stack.clientWidth + 1,
             whiteSpace: getComputedStyle(stack).whiteSpace };
  });
  ok(lead.lead && /your code: /.test(lead.lead) && /\.py:\d+/.test(lead.data), `the card leads with the user's frame ("${lead.lead}")`);
  ok(lead.marked && lead.marked.startsWith(lead.data), `that frame is marked in the stack ("${lead.marked}", line ${lead.index})`);
  ok(lead.wraps && lead.whiteSpace === 'pre-wrap', `stack lines wrap, none is cut off (white-space ${lead.whiteSpace})`);
  // With every frame shown (f), context='all' puts the allocator's frames first: the lead still names the user's.
  await page.keyboard.press('f');
  const all = await page.evaluate(() => {
    const lines = [...document.querySelectorAll('#detail .stack > div')];
    return { n: lines.length, index: lines.findIndex((l) => l.classList.contains('site')),
             lead: (document.querySelector('#detail .site-lead') || {}).dataset?.site };
  });
  ok(all.index > 0 && all.lead === lead.data, `with all ${all.n} frames the user's is line ${all.index}, marked, and still leads`);
  await page.keyboard.press('f');
  await shot(page, 'detail-beside-plot');
}

// (2) No trace: the segment map first; Flame and Peak of what is alive.
async function traceless(page, origin) {
  console.log('a snapshot without a trace (listonly_segments: torch.cuda.memory_snapshot())');
  const f = 'external/listonly_segments.pickle.gz', want = facts(f);
  eq(await open(page, origin, [f]), 'ready', 'opens');
  eq(await view(page), 'state', 'lands on the State history (the segment map)');
  const tabs = await page.$$eval('#tabs button', (bs) => bs.map((b) => b.dataset.view));
  eq(tabs, ['overview', 'state', 'flame', 'peak', 'oom'], 'offers Overview, State, Flame, Peak and OOM');
  const segs = await page.getAttribute('#view canvas[data-state-segments]', 'data-state-segments');
  eq(Number(segs), want.segments, 'the map shows every segment the snapshot holds');
  ok(await inked(page, '#view canvas[data-state-segments]') > 1000, 'and paints it');
  ok(await page.isVisible('#view [data-no-trace-state]'), 'it says this is the one state there is, and how to record a trace');
  await shot(page, 'state-no-trace');
  await page.click('[data-view="peak"]');
  await page.waitForSelector('#view [data-peak-allocated]');
  const peak = Number(await page.getAttribute('#view [data-peak-allocated]', 'data-peak-allocated'));
  ok(peak > 0 && await page.isVisible('#view [data-no-trace-peak]'), `Peak shows what is alive (${peak} bytes) and says it is not a peak over time`);
  await page.click('[data-view="flame"]');
  await page.waitForFunction(() => Number((document.querySelector('#view [data-total]') || {}).dataset?.total) > 0);
  eq(Number(await page.getAttribute('#view [data-total]', 'data-total')), peak, 'Flame holds the same bytes');
  ok(await inked(page, '#view canvas') > 1000, 'and draws them');
}

// (3) OOM: the device that ran out, marked; a badge; the Overview in words.
async function oomFile(page, origin) {
  console.log('an OOM on cuda:1 of four (pt28_4dev_expandable_oom)');
  const f = 'external/pt28_4dev_expandable_oom.pickle.gz', want = facts(f);
  eq(await open(page, origin, [f]), 'ready', 'opens');
  eq(await view(page), 'timeline', 'lands on the Active Memory Timeline');
  eq(await page.inputValue('#device-select'), '1', 'on cuda:1, the device that ran out');
  await page.waitForFunction(() => Number((document.querySelector('#view canvas[data-oom-marks]') || {}).dataset?.oomMarks) > 0, null, { timeout: 10000 }).catch(() => null);
  const marks = Number(await page.getAttribute('#view canvas[aria-label="active memory timeline"]', 'data-oom-marks'));
  eq(marks, want.actions.oom, 'every oom event is marked on the timeline');
  eq(Number(await page.getAttribute('[data-view="oom"] [data-oom-badge]', 'data-oom-badge')), want.actions.oom, 'the OOM tab carries a badge with the count');
  await shot(page, 'oom-marked');
  await page.click('[data-view="overview"]');
  await page.waitForFunction(() => / asking for /.test((document.querySelector('[data-oom-summary]') || {}).textContent || ''), null, { timeout: 10000 }).catch(() => null);
  const said = await page.textContent('[data-oom-summary]').catch(() => '');
  ok(/cuda:1 ran out of memory/.test(said) && / asking for .* free in the driver/.test(said) && !/allocscope oom/.test(said),
     `the Overview says what happened ("${said.slice(0, 160)}...")`);
}

// (4) No stack: a labelled node.
async function noStack(page, origin) {
  console.log('memory with no stack (resnet50_train)');
  eq(await open(page, origin, ['resnet50_train.pickle'], 'view=flame'), 'ready', 'opens on Flame');
  await page.waitForFunction(() => (document.querySelector('#view [data-total]') || {}).dataset?.noStack !== undefined);
  // The CLI's `peak --tree` names the same bytes: 128.2 MiB allocated before the trace (tests/analysis_answers).
  const bytes = Number(await page.getAttribute('#view [data-total]', 'data-no-stack'));
  ok(bytes > 128 * 2 ** 20 && bytes < 128.3 * 2 ** 20, `a "no stack" node holds the memory with no stack (${bytes} bytes)`);
  // Its label is drawn: find the node by hovering the top row from the right.
  const c = await rect(page, '#view canvas');
  let label = null;
  for (let x = c.x + c.w - 5; x > c.x && !label; x -= 8) {
    await page.mouse.move(x, c.y + 27);
    label = await page.evaluate(() => { const h = document.querySelector('#detail h4'); return h && h.textContent === 'no stack' ? h.textContent : null; });
  }
  ok(label, 'hovering it names it "no stack" and says why');
}

// (5) Bad input, in words.
async function badInput(page, origin) {
  console.log('bad input');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'allocscope-moments-'));
  try {
    const cases = [
      ['notes.txt', Buffer.from('hello, this is not a pickle\n'), /a text file, not a pickle: it begins "hello, this is not a pickle"/],
      ['steps.csv', Buffer.from('step,bytes\n1,100\n2,200\n'), /CSV text, not a pickle/],
      // pickle.dumps({'a': [1, 2, 3]}, protocol=2)
      ['dict.pickle', Buffer.from('80027d710058010000006171015d7102284b014b024b036573 2e'.replace(/ /g, ''), 'hex'), /a pickle, but not a memory snapshot: a dict with the key\(s\) 'a'/],
    ];
    await page.goto(`${origin}/app/`);
    await waitState(page, ['empty']);
    for (const [name, bytes, says] of cases) {
      const file = path.join(dir, name);
      fs.writeFileSync(file, bytes);
      await page.setInputFiles('#file-input', file);
      const st = await waitState(page, ['error', 'ready'], 30000).catch(() => 'timeout');
      const text = await page.textContent('#error-message');
      ok(st === 'error' && says.test(text) && !/opcode/.test(text), `${name}: "${text}"`);
      await page.click('#error-back');
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// (6) One vocabulary and one numbering: the timeline's headline, the Peak view and What-if name the peak alike.
async function vocabulary(page, origin) {
  console.log('one peak vocabulary (linear_seed: the CLI says "peak allocated 4.1GiB (4434803008 bytes) at step 15")');
  await open(page, origin, ['linear_seed.pickle'], 'view=timeline');
  await page.waitForSelector('#view [data-peak-bytes]');
  const head = await page.textContent('#view .peak');
  ok(/^peak allocated 4\.13 GiB at step 15 \(after 15 events\)/.test(head), `the timeline's headline: "${head}"`);
  await page.click('[data-view="peak"]');
  await page.waitForSelector('#view [data-peak-allocated]');
  const card = await page.textContent('#view [data-peak-allocated]');
  ok(/^4\.13 GiBPeak allocated4,434,803,008 bytes requested by live tensors · step 15, after 15 events/.test(card), `the Peak view: "${card}"`);
  await page.click('[data-view="whatif"]');
  await page.waitForSelector('#view [data-predicted-allocated]');
  const labels = await page.$$eval('#view .card-label', (ls) => ls.map((l) => l.textContent));
  ok(labels.includes('Peak in blocks, recorded') && !labels.some((l) => /allocator blocks|\(active\)/.test(l)),
     `What-if calls its number the peak in blocks (${labels.slice(0, 2).join('; ')})`);
}

// PyTorch 2.12-2.14's layout (tests/fixtures/newest, written from PyTorch's key names: no real file exists here).
async function newestFormat(page, origin) {
  console.log('the newest format (newest/pt214_training: forward_frames, FX, user metadata, a private pool, host memory)');
  eq(await open(page, origin, ['newest/pt214_training.pickle'], 'view=peak'), 'ready', 'opens');
  // fc2's weight gradient: made on the autograd engine's thread with no frames; its forward_frames name fc2's line.
  await page.locator('#view tr.clickable', { hasText: 'model.py:13:forward' }).filter({ hasText: '2.00 MiB' }).first().click();
  await page.waitForSelector('#detail .alloc-card');
  const grad = await page.evaluate(() => ({ lead: (document.querySelector('#detail .site-lead') || {}).dataset?.site,
    forward: !!document.querySelector('#detail [data-forward-frames]') }));
  ok(grad.lead === '/work/model.py:13' && grad.forward, `a gradient's card leads with its forward line and shows the forward frames (${JSON.stringify(grad)})`);
  await page.locator('#view tr.clickable', { hasText: '512 KiB' }).first().click();
  await page.waitForFunction(() => !!document.querySelector('#detail [data-fx]'), null, { timeout: 10000 }).catch(() => null);
  const fx = await page.textContent('#detail [data-fx]').catch(() => '');
  ok(/node=addmm, op=call_function, target=aten\.addmm\.default/.test(fx) && /x = self\.fc1\(x\)/.test(fx), `a torch.compile'd frame shows its FX node and model code ("${fx.replace(/\s+/g, ' ')}")`);
  // user metadata (torch.cuda.memory._set_memory_metadata): shown on the card, and found by the search box.
  await page.click('[data-view="timeline"]');
  await page.waitForSelector('#view canvas[data-rects]');
  await page.fill('#search', 'step 1');
  await page.waitForFunction(() => /allocations match/.test(document.querySelector('.timeline-info').textContent), null, { timeout: 10000 }).catch(() => null);
  const info = await page.textContent('.timeline-info');
  ok(/\b4 of \d+ allocations match/.test(info), `the search finds the 4 allocations made under the metadata "step 1" ("${info}")`);
  await page.fill('#search', '');
  eq(Number(await page.getAttribute('#view canvas[aria-label="active memory timeline"]', 'data-annotate-marks')), 1,
     'the annotate entry is marked on the timeline');
  // The private pool's segment is marked in the State history; pinned host memory has its own row in the Overview.
  await page.click('[data-view="state"]');
  await page.waitForSelector('#view canvas[data-private-pool-segments]');
  await page.keyboard.press('End');
  await page.waitForFunction(() => { const c = document.querySelector('#view canvas[data-state-step]'), sc = document.querySelector('#view .scrubber'); return c && sc && c.dataset.stateStep === sc.max; }, null, { timeout: 10000 }).catch(() => null);
  eq(Number(await page.getAttribute('#view canvas[data-private-pool-segments]', 'data-private-pool-segments')), 1, 'the State history marks the private pool\'s segment');
  await page.click('[data-view="overview"]');
  eq(Number(await page.getAttribute('[data-host-reserved]', 'data-host-reserved').catch(() => null)), 4 * 2 ** 20, 'the Overview has a row for the pinned host memory');
  const settings = await page.textContent('#view').catch(() => '');
  ok(/trace_alloc_overflowed\s*True/.test(settings), 'the allocator settings show trace_alloc_overflowed');
  await shot(page, 'newest-format');
  // The pinned host memory is an entry of its own in the file selector, where every view answers it as a GPU's: its
  // timeline (4 MiB allocated by its two host trace events), its Peak, named as host memory, never cuda:0.
  await page.click('[data-open-host]');
  await page.waitForSelector('#view canvas[data-rects]');
  const host = await page.evaluate(() => {
    const sel = document.querySelector('#file-select');
    const dev = document.querySelector('#device-select');
    return { shown: !document.querySelector('#file-pick').classList.contains('hidden'), option: sel.options[sel.selectedIndex].text,
             device: document.querySelector('#device-pick').classList.contains('hidden') ? null : dev.options[dev.selectedIndex].text,
             options: sel.options.length, peak: document.querySelector('#view .peak').textContent,
             tabs: Array.from(document.querySelectorAll('#tabs [data-view]')).map((b) => b.dataset.view) };
  });
  ok(host.shown && host.options === 2 && /pt214_training\.pickle · pinned host memory$/.test(host.option),
     `the file selector has the pinned host memory as its second entry ("${host.option}")`);
  eq(host.device, 'host (pinned)', 'the device selector says what the views draw (the file selector may cut the name short)');
  ok(/^peak allocated 4\.00 MiB at step 2/.test(host.peak), `the host memory's timeline has its own peak ("${host.peak}")`);
  ok(!host.tabs.includes('diff') && !host.tabs.includes('whatif') && host.tabs.includes('peak'),
     `no Diff of a file against its own host memory, no What-if of pinned memory (${host.tabs.join(' ')})`);
  await page.click('[data-view="peak"]');
  await page.waitForSelector('#view h2');
  const heading = await page.textContent('#view h2');
  eq(heading, 'Peak memory on pinned host memory', 'the Peak view names the host, not cuda:0');
  await page.selectOption('#file-select', '0');
  await page.waitForSelector('#view h2');
  eq(await page.textContent('#view h2'), 'Peak memory on cuda:0', 'back on the GPU file, the Peak view names cuda:0');
}

// (7) The smaller things.
async function smaller(page, origin) {
  console.log('smaller things');
  await open(page, origin, ['resnet50_train.pickle'], 'view=state');
  const cap = await page.evaluate(() => { const c = document.querySelector('#view canvas[data-state-segments]'); return { y: Number(c.dataset.captionY), row: Number(c.dataset.lastRowBottom) }; });
  ok(cap.y - 10 > cap.row, `the State history's caption (baseline ${cap.y}) is below its last row (bottom ${cap.row})`);
  await page.keyboard.press('?');
  const keys = await page.$$eval('#help-keys [data-help-key]', (rs) => rs.map((r) => r.dataset.helpKey));
  ok(['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'w'].every((k) => keys.includes(k)), `? lists every view's key (${keys.join(' ')})`);
  await page.click('#help-close');
  await page.click('[data-view="leaks"]');
  await page.waitForSelector('#view canvas[data-axes]', { timeout: 10000 }).catch(() => null);
  const axes = await page.getAttribute('#view canvas[data-axes]', 'data-axes').catch(() => null);
  ok(axes && axes.split(',').length === 3 && Number(axes.split(',')[2]) > 1, `the Leaks chart has axes (range and points: ${axes})`);
  await page.setViewportSize({ width: 1600, height: 900 });
  await open(page, origin, ['ddp_rank0.pickle', 'ddp_rank1.pickle']);
  const bar = await page.evaluate(() => {
    const kids = [...document.getElementById('bar').children].filter((e) => e.offsetParent !== null);
    return new Set(kids.map((e) => Math.round(e.getBoundingClientRect().top + e.getBoundingClientRect().height / 2))).size;
  });
  eq(bar, 1, 'with two files at 1600 px the header is one line');
  await page.setViewportSize({ width: 1400, height: 860 });
}

async function main() {
  const { server, origin } = await serve({ '/app/': siteDir, '/fixtures/': fixtures, '/': siteDir });
  const browser = await launch();
  const t0 = Date.now();
  try {
    const { context, page, watch } = await watchedPage(browser, origin);
    for (const moment of [detailColumn, traceless, oomFile, noStack, badInput, vocabulary, newestFormat, smaller]) {
      const t = Date.now();
      try { await moment(page, origin); } catch (e) { ok(false, `${moment.name}: ${e && e.stack ? e.stack : e}`); }
      console.log(`  (${Date.now() - t} ms)`);
    }
    eq(watch.errors, [], 'no console errors');
    eq(watch.foreign, [], 'no request left the origin');
    await context.close();
  } finally {
    await browser.close();
    server.close();
  }
  console.log(`${passed} passed, ${failed} failed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  process.exit(failed ? 1 : 0);
}

main();
