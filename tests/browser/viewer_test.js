// Browser tests of the viewer in real Chromium: each fixture dropped through the file input must reach
// data-state=ready with PyTorch's golden numbers on screen; a corrupt file must show a human error; the example,
// ?url= and dark mode work; no request ever leaves the page's origin.
// usage: node viewer_test.js SITE_DIR FIXTURES_DIR [group [CAPPED_WASM_DIR]]
//        (group: shell | fixtures | views | big | memory | bug; default: shell, fixtures, views)
'use strict';
const fs = require('fs');
const path = require('path');
const { serve } = require('./serve.js');
const { launch, watchedPage, waitState, waitWarm } = require('./browser.js');

const [siteDir, fixturesDir, group, cappedDir] = process.argv.slice(2);
const artifacts = path.join(__dirname, 'artifacts');
fs.mkdirSync(artifacts, { recursive: true });

let passed = 0, failed = 0;
function ok(cond, what) {
  if (cond) { ++passed; console.log(`  ok   ${what}`); } else { ++failed; console.log(`  FAIL ${what}`); }
}
function eq(got, want, what) { ok(JSON.stringify(got) === JSON.stringify(want), `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`); }

const SMALL = fs.readdirSync(fixturesDir).filter((f) => /\.pickle(\.gz)?$/.test(f) && !/1M/.test(f)).sort();
const golden = (base, kind) => {
  const p = path.join(fixturesDir, 'expected', `${base}.${kind}`);
  return fs.existsSync(p) ? JSON.parse(fs.readFileSync(p, 'utf8')) : null;
};
const baseOf = (f) => f.replace(/\.pickle(\.gz)?$/, '');

async function readFacts(page) {
  return page.evaluate(() => {
    const out = {};
    for (const e of document.querySelectorAll('[data-fact]')) out[e.dataset.fact] = Number(e.dataset.value);
    const actions = {};
    for (const e of document.querySelectorAll('[data-action]')) actions[e.dataset.action] = Number(e.dataset.value);
    const perDevice = [];
    for (const e of document.querySelectorAll('[data-device-events]')) perDevice[Number(e.dataset.deviceEvents)] = Number(e.dataset.value);
    out.actions = actions;
    out.perDevice = perDevice;
    return out;
  });
}

// A navigation that differs only in the hash would not reload the page: go through about:blank.
async function fresh(page, url) {
  await page.goto('about:blank');
  await page.goto(url);
}

async function openViaInput(page, files) {
  await page.setInputFiles('#file-input', files);
  return waitState(page, ['ready', 'error'], 120000);
}

// After a load ends, only the engine's worker is left (playwright lists the inflater's, a worker's worker, too).
async function inflaterGone(page) {
  for (let i = 0; i < 100 && page.workers().length > 1; ++i) await new Promise((r) => setTimeout(r, 50));
  return page.workers().length === 1;
}

async function shellTests(browser, origin) {
  console.log('shell');
  const { context, page, watch } = await watchedPage(browser, origin);
  await fresh(page, origin + '/app/');
  eq(await waitState(page, ['empty']), 'empty', 'fresh page is data-state=empty');
  await page.screenshot({ path: path.join(artifacts, 'welcome.png') });
  // While the page waits, the core runs a made-up snapshot through the load and the first view (wasm/warm_up.cpp):
  // 4 rounds of 60,001 trace entries each (one segment_alloc, 20,000 allocations and their 40,000 frees).
  const warm = await waitWarm(page);
  ok(warm && warm.state === 'done' && warm.rows === 4 * 60001, `the core warmed up on the start page (${JSON.stringify(warm)})`);

  // A corrupt file: the first half of a real pickle.
  const corrupt = path.join(artifacts, 'corrupt.pickle');
  const good = fs.readFileSync(path.join(fixturesDir, 'linear_seed.pickle'));
  fs.writeFileSync(corrupt, good.subarray(0, good.length >> 1));
  eq(await openViaInput(page, corrupt), 'error', 'truncated pickle ends in data-state=error');
  const msg = await page.textContent('#error-message');
  ok(/corrupt\.pickle/.test(msg) && /byte \d+/.test(msg), `error names the file and a byte offset: "${msg}"`);
  ok(await page.isVisible('#error-message'), 'error message is visible');
  await page.screenshot({ path: path.join(artifacts, 'error.png') });

  // Not a pickle at all; then a gzip that does not inflate.
  const text = path.join(artifacts, 'notes.txt');
  fs.writeFileSync(text, 'just some text, not a snapshot\n');
  eq(await openViaInput(page, text), 'error', 'a text file ends in data-state=error');
  const badgz = path.join(artifacts, 'broken.pickle.gz');
  fs.writeFileSync(badgz, Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 9, 9, 9, 9, 9, 9, 9, 9, 9]));
  eq(await openViaInput(page, badgz), 'error', 'a broken gzip ends in data-state=error');
  ok(/gzip|inflate/i.test(await page.textContent('#error-message')), 'broken gzip error says gzip');
  // A gzip cut short after a few MiB inflated: the inflater worker's failure comes after chunks were parsed, and is
  // still the file's error, said in words with where it stopped.
  const cut = path.join(artifacts, 'cut.pickle.gz');
  const big = fs.readFileSync(path.join(fixturesDir, 'gpt2_big_1M.pickle.gz'));
  fs.writeFileSync(cut, big.subarray(0, big.length >> 2));
  eq(await openViaInput(page, cut), 'error', 'a gzip cut short ends in data-state=error');
  const cutMsg = await page.textContent('#error-message');
  ok(/cut\.pickle\.gz/.test(cutMsg) && /does not inflate|byte \d+/.test(cutMsg), `it says so: "${cutMsg}"`);
  ok(await inflaterGone(page), 'the inflater worker is gone after the failed inflate');
  // A gzip that inflates well but is not a pickle (24 MiB of text): the parse fails at once while the inflater's
  // worker still has most of the file to go; the load must stop it, not leave it inflating.
  const gzText = path.join(artifacts, 'text.pickle.gz');
  fs.writeFileSync(gzText, require('zlib').gzipSync(Buffer.alloc(24 << 20, 'not a pickle, just text. ')));
  eq(await openViaInput(page, gzText), 'error', 'a gzip of text ends in data-state=error');
  const textMsg = await page.textContent('#error-message');
  ok(/text\.pickle\.gz/.test(textMsg) && /byte 0/.test(textMsg), `it names the byte the parse stopped at: "${textMsg}"`);
  ok(await inflaterGone(page), 'the inflater worker is stopped when the parse fails first');

  // Snapshot strings are text, never HTML: frame names, file names, annotations and settings full of markup.
  const evil = path.join(artifacts, 'markup.pickle');
  const py = `import pickle,sys
f={'name':'<img src=x onerror="document.title=1">','filename':'<b>evil</b>.py','line':1}
snap={'segments':[{'device':0,'address':1048576,'total_size':2097152,'allocated_size':512,'active_size':512,'requested_size':512,
 'stream':0,'segment_type':'small','segment_pool_id':(0,0),'is_expandable':False,'frames':[f],
 'blocks':[{'address':1048576,'size':512,'requested_size':512,'state':'active_allocated','frames':[f]}]}],
 'device_traces':[[{'action':'alloc','addr':1048576,'size':512,'stream':0,'time_us':5,'frames':[f]}]],
 'external_annotations':[{'stage':'START','name':'<script>document.title=2</script>','device':0,'time_us':0},
                         {'stage':'END','name':'<script>document.title=2</script>','device':0,'time_us':9}],
 'allocator_settings':{'<i>key</i>':'<u>value</u>'}}
pickle.dump(snap, open(sys.argv[1],'wb'), protocol=4)`;
  require('child_process').execFileSync('python3', ['-c', py, evil]);
  await fresh(page, origin + '/app/#view=overview');
  eq(await openViaInput(page, evil), 'ready', 'a snapshot full of markup opens');
  for (const view of ['overview', 'timeline', 'peak', 'flame']) {
    await page.click(`[data-view="${view}"]`);
    await page.waitForTimeout(400);
    if (view === 'timeline') {
      const b = await page.locator('.canvas-wrap canvas').boundingBox();
      await page.mouse.move(b.x + b.width * 0.6, b.y + b.height - 30);
      await page.waitForTimeout(400);
    }
    const injected = await page.evaluate(() => document.querySelectorAll('main img, main b, main i, main u, main script, #detail img, #detail b, #detail script').length);
    eq(injected, 0, `${view}: no element made from snapshot strings`);
    if (view === 'overview') ok((await page.textContent('main')).includes('<i>key</i>'), 'markup shows as text');
  }
  ok(!['1', '2'].includes(await page.title()), 'no injected script ran');

  // A real drop event anywhere on the page (two files at once).
  await fresh(page, origin + '/app/#view=overview');
  await waitState(page, ['empty']);
  const dropped = ['ddp_rank0.pickle', 'ddp_rank1.pickle'].map((f) => Array.from(fs.readFileSync(path.join(fixturesDir, f))));
  await page.evaluate((files) => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array(files[0])], 'ddp_rank0.pickle'));
    dt.items.add(new File([new Uint8Array(files[1])], 'ddp_rank1.pickle'));
    const target = document.querySelector('.fine');
    target.dispatchEvent(new DragEvent('dragenter', { bubbles: true, dataTransfer: dt }));
    target.dispatchEvent(new DragEvent('drop', { bubbles: true, cancelable: true, dataTransfer: dt }));
  }, dropped);
  eq(await waitState(page, ['ready', 'error'], 60000), 'ready', 'dropping two files anywhere opens them');
  ok(await page.isVisible('[data-view="diff"]') && await page.isVisible('[data-view="ranks"]'), 'two files offer Diff and Ranks');

  // The built-in example.
  await fresh(page, origin + '/app/');
  await waitState(page, ['empty']);
  await page.click('#example-button');
  eq(await waitState(page, ['ready', 'error'], 60000), 'ready', '"Try an example" reaches ready');

  // ?url= opens hosted files (same origin), and refuses others.
  await fresh(page, origin + '/app/?url=' + encodeURIComponent('/fixtures/oom.pickle'));
  eq(await waitState(page, ['ready', 'error'], 60000), 'ready', '?url= opens a same-origin file');
  await fresh(page, origin + '/app/?url=' + encodeURIComponent('http://example.invalid/x.pickle'));
  eq(await waitState(page, ['ready', 'error'], 60000), 'error', '?url= refuses another origin');

  // Dark mode follows prefers-color-scheme.
  const dark = await watchedPage(browser, origin, null, 'dark');
  await dark.page.goto(origin + '/app/?url=' + encodeURIComponent('/fixtures/resnet50_train.pickle'));
  await waitState(dark.page, ['ready', 'error'], 60000);
  const bg = await dark.page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  ok(bg === 'rgb(20, 22, 27)', `dark mode background (${bg})`);
  await dark.page.screenshot({ path: path.join(artifacts, 'dark.png') });
  eq(dark.watch.foreign, [], 'dark page: no foreign requests');
  await dark.context.close();

  eq(watch.foreign, [], 'no request left the origin');
  ok(watch.requests > 3, `requests were observed (${watch.requests})`);
  await context.close();
}

async function fixtureTests(browser, origin) {
  console.log('fixtures');
  const { context, page, watch } = await watchedPage(browser, origin);
  for (const f of SMALL) {
    const base = baseOf(f);
    await fresh(page, origin + '/app/#view=overview');
    await waitState(page, ['empty']);
    const st = await openViaInput(page, path.join(fixturesDir, f));
    eq(st, 'ready', `${f} reaches ready`);
    if (st !== 'ready') { console.log('    ' + (await page.textContent('#error-message'))); continue; }
    const facts = golden(base, 'facts.json');
    const shown = await readFacts(page);
    eq([shown.total_reserved, shown.total_allocated, shown.segments, shown.active_blocks],
       [facts.total_reserved, facts.total_allocated, facts.segments, facts.active_blocks], `${base} totals`);
    eq(shown.actions, facts.actions, `${base} action counts`);
    eq(shown.perDevice, facts.trace_events_per_device, `${base} events per device`);
    await page.screenshot({ path: path.join(artifacts, `overview-${base}.png`) });
  }
  // Several files at once.
  const two = ['ddp_rank0.pickle', 'ddp_rank1.pickle'].map((f) => path.join(fixturesDir, f));
  await fresh(page, origin + '/app/');
  await waitState(page, ['empty']);
  eq(await openViaInput(page, two), 'ready', 'two files at once reach ready');
  eq(await page.$$eval('#file-select option', (o) => o.map((x) => x.textContent)), ['ddp_rank0.pickle', 'ddp_rank1.pickle'], 'both files are offered');
  eq(watch.foreign, [], 'no request left the origin');
  eq(watch.errors, [], 'no console errors');
  await context.close();
}

// The 1M-event file (162 MB inflated from 12 MB of gzip): facts and PyTorch's peak, through the file input.
async function bigTest(browser, origin) {
  console.log('big');
  const { context, page, watch } = await watchedPage(browser, origin);
  await fresh(page, origin + '/app/#view=overview');
  await waitState(page, ['empty']);
  await page.evaluate(() => {
    window.__progress = [];
    setInterval(() => window.__progress.push([document.documentElement.dataset.state, document.getElementById('progress').value,
                                              document.getElementById('loading-label').textContent,
                                              !document.getElementById('preview').classList.contains('hidden'),
                                              Number(document.getElementById('preview-canvas').dataset.previewRows || 0)]), 25);
  });
  const st = await openViaInput(page, path.join(fixturesDir, 'gpt2_big_1M.pickle.gz'));
  eq(st, 'ready', 'gpt2_big_1M.pickle.gz reaches ready');
  // gzip inflates on a worker of its own beside the parse (so the facts below check that path against PyTorch).
  eq(await page.workers()[0].evaluate(() => self.allocscopeEngine.lastInflate), 'worker', 'the file inflated on the inflater worker');
  const seen = await page.evaluate(() => window.__progress.filter((p) => p[0] === 'loading'));
  ok(seen.some((p) => p[1] > 0.05 && p[1] < 0.95), `the progress bar moves while loading (${seen.length} samples)`);
  // Reading, inflating and parsing happen together (the file streams into the core), so one phase is named.
  ok(seen.some((p) => /Loading gpt2_big_1M/.test(p[2])), 'it names the file being loaded');
  const facts = golden('gpt2_big_1M', 'facts.json');
  // The first picture (issue 43): the memory curve of the rows parsed so far, shown while the file still loads and
  // growing, then of every row once the file is read, before the exact view replaces it.
  const rows = facts.trace_events_per_device.reduce((a, b) => a + b, 0);
  const drawn = seen.filter((p) => p[3] && p[4] > 0).map((p) => p[4]);
  ok(drawn.length > 0 && drawn.some((r) => r < rows), `the memory curve is drawn while the file loads (rows seen: ${[...new Set(drawn)].slice(0, 6).join(', ')} of ${rows})`);
  const pv = await page.evaluate(() => ({ ...document.getElementById('preview-canvas').dataset, first: Number(document.documentElement.dataset.firstPreviewMs) }));
  ok(Number(pv.previews) >= 2 && pv.previewComplete === '1' && Number(pv.previewRows) === rows,
     `it grew in ${pv.previews} pictures, the last of all ${pv.previewRows} rows; the first ${pv.first} ms after the drop`);
  const shown = await readFacts(page);
  eq([shown.total_reserved, shown.total_allocated, shown.segments, shown.active_blocks, shown.actions],
     [facts.total_reserved, facts.total_allocated, facts.segments, facts.active_blocks, facts.actions], 'gpt2_big_1M facts');
  await page.click('[data-view="timeline"]');
  await page.waitForSelector('[data-peak-bytes]', { timeout: 120000 });
  eq(Number(await page.getAttribute('[data-peak-bytes]', 'data-peak-bytes')),
     golden('gpt2_big_1M', 'memoryviz.json').devices['0'].peak_active_bytes, 'gpt2_big_1M timeline peak equals PyTorch\'s');
  eq(watch.foreign, [], 'no request left the origin');
  eq(watch.errors, [], 'no console errors');
  await context.close();
}

// Out of memory in the core: the site served with the test-only wasm build whose heap is capped at 68 MB (loading
// the 1M-event file peaks at ~77 MiB). The core really runs out of memory inside the worker: the page must say the
// file is too large for the browser's memory and what to do instead, stay usable, and open a small file afterwards.
async function memoryTest(browser, origin) {
  console.log('memory');
  const { context, page, watch } = await watchedPage(browser, origin);
  await fresh(page, origin + '/capped/#view=overview');
  await waitState(page, ['empty']);
  eq(await openViaInput(page, path.join(fixturesDir, 'resnet50_train.pickle')), 'ready', 'capped build: a small file opens');
  const st = await openViaInput(page, path.join(fixturesDir, 'gpt2_big_1M.pickle.gz'));
  eq(st, 'error', 'a file too large for the capped heap ends in data-state=error');
  const msg = await page.textContent('#error-message');
  console.log(`    message: ${msg}`);
  ok(/gpt2_big_1M\.pickle\.gz is too large for the browser's memory/.test(msg), 'the message names the file and says it is too large for the browser\'s memory');
  ok(/ran out of memory at \d+ MiB/.test(msg), 'the message says how much memory the core had when it ran out');
  ok(/allocscope view FILE/.test(msg) && /allocscope summary FILE/.test(msg) && /--from STEP --to STEP/.test(msg), 'the message says what to do: allocscope view (parsed natively), the command line, or a time range');
  ok(!/stopped|bug/.test(msg), 'an out-of-memory is not reported as a bug');
  ok(await page.isVisible('#error-message'), 'the message is visible (not a crashed tab)');
  eq(await page.$$eval('#tabs button', (b) => b.length), 0, 'no view tabs are left for the files the old core held');
  await page.screenshot({ path: path.join(artifacts, 'error-too-large.png') });
  // The tab still works: back goes to the start (the old core's files are gone), and a small file opens in a fresh core.
  await page.click('#error-back');
  eq(await waitState(page, ['empty', 'ready', 'error']), 'empty', 'back after an out-of-memory goes to the start page');
  eq(await openViaInput(page, path.join(fixturesDir, 'linear_seed.pickle')), 'ready', 'a small file opens after the core ran out of memory');
  const facts = golden('linear_seed', 'facts.json');
  const shown = await readFacts(page);
  eq([shown.total_reserved, shown.total_allocated], [facts.total_reserved, facts.total_allocated], 'and shows its golden totals');
  eq(watch.foreign, [], 'no request left the origin');
  await context.close();
}

// An abort of the core that is not out of memory, i.e. a bug: the capped test build's test_abort method stops the core
// the way a failed check (std::abort) or a trap (out-of-bounds access, unreachable code) would, inside the worker,
// through the same worker_client module the views call it with. The worker must call it a bug in words (not "too
// large"), say the files are closed, and start a fresh core so the page keeps working.
async function bugTest(browser, origin) {
  console.log('bug');
  const { context, page, watch } = await watchedPage(browser, origin);
  await fresh(page, origin + '/capped/#view=overview');
  await waitState(page, ['empty']);
  for (const [kind, what] of [['abort', /\(Aborted\(/], ['trap', /\(unreachable/]]) {
    eq(await openViaInput(page, path.join(fixturesDir, 'resnet50_train.pickle')), 'ready', `${kind}: a small file opens`);
    const got = await page.evaluate(async (k) => {
      const client = await import('./worker_client.js');
      let id = 0;  // the open file's id in this core (ids count up per core)
      for (let i = 1; i <= 16; ++i) await client.call({ method: 'info', id: i }).then(() => { id = i; }, () => {});
      try {
        await client.call({ method: 'test_abort', id, kind: k });
        return { answered: true };
      } catch (e) {
        return { message: e.message, lost: e.lost };
      }
    }, kind);
    console.log(`    ${kind}: ${got.message}`);
    ok(!got.answered && /^the viewer's WebAssembly core stopped /.test(got.message || ''), `${kind}: the worker says the core stopped`);
    ok(what.test(got.message || ''), `${kind}: the message quotes the abort (${what})`);
    ok(!/ASSERTIONS/.test(got.message || ''), `${kind}: without Emscripten's hint to rebuild with assertions`);
    ok(/This is a bug in allocscope/.test(got.message) && /allocscope summary FILE/.test(got.message),
       `${kind}: it is reported as a bug, with the command line as the way to read the file`);
    ok(!/too large|out of memory/.test(got.message), `${kind}: a bug is not reported as out of memory`);
    ok(/files opened before are closed/.test(got.message) && got.lost === true, `${kind}: the files of the stopped core are given up`);
    // A fresh core answers: the next file opens with its golden totals.
    eq(await openViaInput(page, path.join(fixturesDir, 'linear_seed.pickle')), 'ready', `${kind}: a file opens in a fresh core afterwards`);
    const facts = golden('linear_seed', 'facts.json');
    const shown = await readFacts(page);
    eq([shown.total_reserved, shown.total_allocated], [facts.total_reserved, facts.total_allocated], `${kind}: and shows its golden totals`);
  }
  // The site's own module has no such trigger.
  await fresh(page, origin + '/app/#view=overview');
  await waitState(page, ['empty']);
  eq(await openViaInput(page, path.join(fixturesDir, 'linear_seed.pickle')), 'ready', 'site build: a small file opens');
  const site = await page.evaluate(async () => {
    const client = await import('./worker_client.js');
    try { await client.call({ method: 'test_abort', id: 1 }); return 'answered'; } catch (e) { return e.message; }
  });
  eq(site, "bridge: unknown method 'test_abort'", 'the site build does not ship test_abort');
  eq(watch.foreign, [], 'no request left the origin');
  await context.close();
}

// A host whose Content-Security-Policy forbids blob: workers (worker-src 'self', sent as a header, which applies to
// the engine's worker too): gzip cannot inflate on a worker of its own there, so it inflates inline on the engine's
// worker, and the file opens with the same facts PyTorch's tools give.
async function strictHostTest(browser, roots) {
  console.log('strict host (no blob: workers)');
  const { server, origin } = await serve(roots, { 'content-security-policy': "worker-src 'self'" });
  let context = null;
  try {
    const w = await watchedPage(browser, origin);
    context = w.context;
    const { page, watch } = w;
    await fresh(page, origin + '/app/#view=overview');
    await waitState(page, ['empty']);
    eq(await openViaInput(page, path.join(fixturesDir, 'gpt2_cpp.pickle.gz')), 'ready', 'a .gz opens on a host that forbids blob: workers');
    eq(await page.workers()[0].evaluate(() => self.allocscopeEngine.lastInflate), 'inline', 'it inflated inline, on the engine\'s worker');
    const facts = golden('gpt2_cpp', 'facts.json');
    const shown = await readFacts(page);
    eq([shown.total_reserved, shown.total_allocated, shown.segments, shown.active_blocks, shown.actions],
       [facts.total_reserved, facts.total_allocated, facts.segments, facts.active_blocks, facts.actions], 'gpt2_cpp facts there');
    eq(watch.foreign, [], 'no request left the origin');
  } finally {
    if (context) await context.close();
    server.close();
  }
}

async function main() {
  const roots = { '/app/': siteDir, '/fixtures/': fixturesDir, '/': siteDir };
  if (cappedDir) Object.assign(roots, { '/capped/': siteDir, '/capped/allocscope.js': path.join(cappedDir, 'allocscope.js'),
                                        '/capped/allocscope.wasm': path.join(cappedDir, 'allocscope.wasm') });
  const { server, origin } = await serve(roots);
  const browser = await launch();
  try {
    if (!group || group === 'shell') await shellTests(browser, origin);
    if (!group || group === 'shell') await strictHostTest(browser, roots);
    if (!group || group === 'fixtures') await fixtureTests(browser, origin);
    if (group === 'big') await bigTest(browser, origin);
    if (group === 'memory') await memoryTest(browser, origin);
    if (group === 'bug') await bugTest(browser, origin);
    if (!group || group === 'views') await require('./views_test.js').run(browser, origin, { fixturesDir, artifacts, ok, eq, golden });
  } catch (e) {
    ++failed;
    console.log(`  FAIL ${e && e.stack ? e.stack : e}`);
  } finally {
    await browser.close();
    server.close();
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main();
