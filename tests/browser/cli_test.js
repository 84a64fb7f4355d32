// The CLI's viewer verbs in real Chromium: `allocscope view` serves the files and prints a URL that opens them;
// `allocscope plot` writes one HTML that opens from disk with no request but itself and its worker blob.
// usage: node cli_test.js ALLOCSCOPE_BINARY SITE_DIR FIXTURES_DIR [CAPPED_WASM_DIR]
'use strict';
const fs = require('fs');
const path = require('path');
const { spawn, spawnSync } = require('child_process');
const { launch, waitState } = require('./browser.js');

const [cli, site, fixtures, cappedDir] = process.argv.slice(2);
const os = require('os');
const artifacts = path.join(__dirname, 'artifacts');
fs.mkdirSync(artifacts, { recursive: true });
let passed = 0, failed = 0;
const ok = (c, what) => { if (c) { ++passed; console.log(`  ok   ${what}`); } else { ++failed; console.log(`  FAIL ${what}`); } };

async function pageFor(browser) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 860 } });
  const page = await context.newPage();
  const requests = [], errors = [];
  context.on('request', (r) => requests.push(r.url()));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  return { context, page, requests, errors };
}

// Starts `allocscope view` on FILES (any free port) and resolves to {child, url, stderr()} once it prints its URL.
async function startView(files, options = []) {
  const child = spawn(cli, ['view', '--port', '0', '--web-root', site, ...options, ...files], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => { out += d; if (out.includes('\n')) resolve(out.split('\n')[0].trim()); });
    child.on('exit', (code) => reject(new Error(`view exited ${code}: ${stderr}`)));
    setTimeout(() => reject(new Error('no URL printed in 10 s')), 10000);
  });
  return { child, url, stderr: () => stderr };
}

// The printed URL up to its query: http://127.0.0.1:PORT/TOKEN/, under which everything is served.
const baseOf = (url) => url.slice(0, url.indexOf('?'));
const tokens = [];

async function viewTest(browser) {
  console.log('allocscope view');
  const files = ['ddp_rank0.pickle', 'ddp_rank1.pickle'].map((f) => path.join(fixtures, f));
  const { child, url, stderr } = await startView(files);
  ok(/^http:\/\/127\.0\.0\.1:\d+\/[0-9a-f]{32}\/\?url=files%2F0%2Fddp_rank0\.pickle&url=files%2F1%2Fddp_rank1\.pickle$/.test(url), `prints the URL (${url})`);
  const { context, page, requests, errors } = await pageFor(browser);
  await page.goto(url);
  ok((await waitState(page, ['ready', 'error'], 60000)) === 'ready', 'the printed URL opens both files');
  const names = await page.$$eval('#file-select option', (o) => o.map((x) => x.textContent));
  ok(JSON.stringify(names) === JSON.stringify(['ddp_rank0.pickle', 'ddp_rank1.pickle']), `both files are offered (${names})`);
  const origin = new URL(url).origin;
  ok(requests.every((u) => u.startsWith(baseOf(url)) || u.startsWith('blob:')), 'every request went to the local server');
  ok(errors.length === 0, `no console errors (${errors.join('; ')})`);
  const base = baseOf(url);
  const r = await fetch(base + '../../etc/passwd').then((x) => x.status).catch(() => 0);
  const r2 = await fetch(base + 'files/7/x').then((x) => x.status).catch(() => 0);
  ok(r === 404 && r2 === 404, 'nothing outside the site and the named files is served');
  // Another user of the machine reaches 127.0.0.1 too: without the URL's secret first segment, nothing is served.
  const token = new URL(base).pathname.slice(1, -1);
  tokens.push(token);
  const wrong = token.replace(/^./, (c) => (c === '0' ? '1' : '0'));
  const without = [];
  for (const p of ['/', '/index.html', '/files/0/ddp_rank0.pickle', `/${wrong}/files/0/ddp_rank0.pickle`, `/${token}`,
                   `/${token.slice(0, -1)}/files/0/ddp_rank0.pickle`])
    without.push(await fetch(origin + p).then((x) => x.status).catch(() => 0));
  ok(without.every((c) => c === 404) && (await fetch(base + 'files/0/ddp_rank0.pickle').then((x) => x.status)) === 200,
     `without the secret, or with another, nothing is served (${without}); with it, the file is`);
  await context.close();
  const exit = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  child.kill('SIGINT');
  ok((await exit) === 0 && /stopped/.test(stderr()), 'Ctrl-C stops it cleanly');
}

// `allocscope view ranks.json`: the Ranks view from a saved ranks file, and the snapshots it names served beside it,
// so a row opens its rank; nothing else under files/ is served.
async function viewRanksTest(browser) {
  console.log('allocscope view RANKS.json');
  const { child, url } = await startView([path.join(fixtures, 'ranks_ddp.json')]);
  tokens.push(new URL(baseOf(url)).pathname.slice(1, -1));
  ok(tokens.length === 2 && tokens[0] !== tokens[1], 'each run has its own secret');
  const status = (p) => fetch(baseOf(url) + p.slice(1)).then((x) => x.status).catch(() => 0);
  ok((await status('/files/0/rows/ddp_rank1.pickle')) === 200 && (await status('/files/0/ddp_rank1.pickle')) === 200 &&
     (await status('/files/0/ranks_ddp.json')) === 200, 'serves the ranks file and a snapshot it names (as rows/NAME and as NAME)');
  ok((await status('/files/0/oom.pickle')) === 404 &&
     (await status('/files/0/rows/oom.pickle')) === 404 &&
     (await status('/files/0/rows/rank3_missing.pickle')) === 404,
     'not a file it does not name, nor a named file that is not there');
  const { context, page, errors } = await pageFor(browser);
  await page.goto(url);
  ok((await waitState(page, ['ready', 'error'], 60000)) === 'ready', 'the printed URL opens the Ranks view');
  await page.click('[data-rank-row="0"]');
  await page.waitForSelector('[data-peak-bytes]', { timeout: 30000 }).catch(() => null);
  const want = JSON.parse(fs.readFileSync(path.join(fixtures, 'expected', 'ddp_rank1.memoryviz.json'), 'utf8')).devices['1'].peak_active_bytes;
  ok(Number(await page.getAttribute('[data-peak-bytes]', 'data-peak-bytes').catch(() => 0)) === want, 'its outlier row opens rank 1 with PyTorch\'s peak');
  ok(errors.length === 0, `no console errors (${errors.join('; ')})`);
  await context.close();
  const exit = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  child.kill('SIGINT');
  await exit;
}

// An audit's cases (2026-11-26): names with '#', '?', '%' did not open from the printed URL; a ranks file's rows
// named './x' or '../d/x' never opened, while a row naming /etc/passwd was served; any Host was answered (DNS
// rebinding); /examples/ served the whole source fixtures folder.
async function viewOddNamesTest(browser) {
  console.log('allocscope view: odd names, ranks rows, Host');
  const dir = path.join(artifacts, 'odd names');
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(path.join(dir, 'run'), { recursive: true });
  const odd = ['r#1 100%.pickle', 'q?x%41.pickle'];
  for (const n of odd) fs.copyFileSync(path.join(fixtures, 'ddp_rank0.pickle'), path.join(dir, n));
  fs.copyFileSync(path.join(fixtures, 'ddp_rank1.pickle'), path.join(dir, 'run', 'ddp_rank1.pickle'));
  let v = await startView(odd.map((n) => path.join(dir, n)));
  const { context, page, errors } = await pageFor(browser);
  await page.goto(v.url);
  ok((await waitState(page, ['ready', 'error'], 60000)) === 'ready', `files named ${odd.join(', ')} open from the printed URL`);
  const names = await page.$$eval('#file-select option', (o) => o.map((x) => x.textContent));
  ok(JSON.stringify(names) === JSON.stringify(odd), `and keep their names (${names})`);
  ok(errors.length === 0, `no console errors (${errors.join('; ')})`);
  await context.close();
  const port = new URL(v.url).port, prefix = new URL(baseOf(v.url)).pathname;
  const http = require('http');
  const withHost = (host, p) => new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: prefix + p.slice(1), headers: { Host: host } }, (r) => { r.resume(); resolve(r.statusCode); });
    req.on('error', () => resolve(0));
  });
  ok((await withHost('evil.example', '/')) === 403 && (await withHost(`evil.example:${port}`, '/index.html')) === 403,
     'a request naming another host is refused');
  ok((await withHost(`127.0.0.1:${port}`, '/')) === 200 && (await withHost(`localhost:${port}`, '/')) === 200,
     'requests for 127.0.0.1 and localhost are answered');
  const status = (p) => fetch(baseOf(v.url) + p.slice(1)).then((x) => x.status).catch(() => 0);
  ok((await status('/examples/README.md')) === 404 && (await status('/examples/expected/oom.facts.json')) === 404,
     '/examples/ serves example snapshots only');
  // A client sending its request a byte every 2 s is dropped once 10 s have passed (it held a thread for ever).
  const dropped = await new Promise((resolve) => {
    const net = require('net');
    const t0 = Date.now();
    const sock = net.connect(Number(port), '127.0.0.1');
    const req = `GET ${prefix} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ` + 'a'.repeat(40);
    let i = 0;
    const timer = setInterval(() => { if (i < req.length) sock.write(req[i++]); }, 2000);
    sock.on('error', () => {});
    sock.on('close', () => { clearInterval(timer); resolve((Date.now() - t0) / 1000); });
    setTimeout(() => { clearInterval(timer); sock.destroy(); resolve(-1); }, 25000);
  });
  ok(dropped > 9 && dropped < 16, `a client that drips its request is dropped after 10 s (${dropped} s)`);
  // Keep-alive: requests one after another on one connection (a POST's body, then a GET sent in the same write as
  // the POST, so the server must keep what it read past the body) each get their answer, in order; an idle
  // connection is closed after 5 s; HTTP/1.0 and `Connection: close` get one answer and a close.
  const onOneSocket = (text) => new Promise((resolve) => {
    const sock = require('net').connect(Number(port), '127.0.0.1');
    const t0 = Date.now();
    let got = '';
    sock.on('data', (d) => { got += d; });
    sock.on('error', () => {});
    sock.on('close', () => resolve({ got, s: (Date.now() - t0) / 1000 }));
    sock.write(text);
    setTimeout(() => sock.destroy(), 15000);
  });
  const post = '{"method":"nope"}';
  const pair = await onOneSocket(`POST ${prefix}api/call HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Length: ${post.length}\r\n\r\n${post}` +
                                 `GET ${prefix} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
  const statuses = [...pair.got.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]);
  ok(statuses.length === 2 && statuses[1] === '200' && /<html/i.test(pair.got) && pair.s > 4 && pair.s < 8,
     `two requests in one write on one connection get two answers, then the idle connection closes after 5 s ` +
     `(${statuses}, closed after ${pair.s} s)`);
  const once = await onOneSocket(`GET ${prefix} HTTP/1.0\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
  const closing = await onOneSocket(`GET ${prefix} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n` +
                                    `GET ${prefix} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
  ok(/Connection: close/.test(once.got) && once.s < 2 && closing.got.match(/^HTTP\/1\.1/gm).length === 1 && closing.s < 2,
     `HTTP/1.0 and Connection: close get one answer and the connection closes (${once.s} s, ${closing.s} s)`);
  v.child.kill('SIGINT');
  // A ranks file whose rows are './x', '../d/x', an absolute snapshot, and files that are not snapshots.
  const ranks = { kind: 'allocscope.ranks', rows: [
    { name: './r#1 100%.pickle' }, { name: '../odd names/run/ddp_rank1.pickle' },
    { name: path.join(dir, 'q?x%41.pickle') }, { name: '/etc/passwd' }, { name: '/proc/self/environ' },
    { name: 'ranks.json' }] };
  fs.writeFileSync(path.join(dir, 'ranks.json'), JSON.stringify(ranks));
  v = await startView([path.join(dir, 'ranks.json')]);
  const row = (n) => fetch(`${baseOf(v.url)}files/0/rows/${encodeURIComponent(n)}`).then((x) => x.status).catch(() => 0);
  const got = [];
  for (const r of ranks.rows) got.push(await row(r.name));
  ok(JSON.stringify(got) === JSON.stringify([200, 200, 200, 404, 404, 404]),
     `rows open by any relative or absolute name; files that are not snapshots are not served (${got})`);
  v.child.kill('SIGINT');
  fs.rmSync(dir, { recursive: true, force: true });
}

async function plotTest(browser) {
  console.log('allocscope plot');
  const out = path.join(artifacts, 'report-oom.html');
  const res = spawnSync(cli, ['plot', path.join(fixtures, 'oom.pickle'), '-o', out, '--web-root', site], { encoding: 'utf8' });
  ok(res.status === 0 && fs.existsSync(out), `writes the report (${res.stderr.trim()})`);
  const html = fs.readFileSync(out, 'utf8');
  ok(!/src="http|href="http|<script[^>]+src=/.test(html), 'the report references no external file');
  ok(/connect-src 'none'/.test(html), 'its CSP forbids all connections');
  const { context, page, requests, errors } = await pageFor(browser);
  await page.goto('file://' + out + '#view=overview');
  ok((await waitState(page, ['ready', 'error'], 60000)) === 'ready', 'the report opens from disk');
  const facts = JSON.parse(fs.readFileSync(path.join(fixtures, 'expected', 'oom.facts.json'), 'utf8'));
  const segs = Number(await page.getAttribute('[data-fact="segments"]', 'data-value'));
  ok(segs === facts.segments, `the report shows the golden facts (segments ${segs})`);
  // The report embeds the file gzipped; its worker (itself a blob) inflates it on a second blob worker, as the site does.
  const where = await page.workers()[0].evaluate(() => self.allocscopeEngine && self.allocscopeEngine.lastInflate);
  ok(where === 'worker', `the report's file inflated on the inflater worker (${where})`);
  // The search's matcher worker starts from a blob in the report too (its CSP allows blob: workers only).
  await page.evaluate(() => { location.hash = '#view=timeline'; });
  await page.waitForSelector('.timeline-info', { timeout: 20000 }).catch(() => null);
  await page.fill('#search', '\\.py:');
  const found = await page.waitForFunction(() => /allocations match|search/.test((document.querySelector('.timeline-info') || {}).textContent || ''),
                                           null, { timeout: 20000 }).then(() => page.textContent('.timeline-info')).catch(() => '');
  ok(/\d[\d,]* of [\d,]+ allocations match/.test(found), `the report's search runs on its matcher worker (${found.trim().slice(-40)})`);
  ok(requests.every((u) => u.startsWith('file://') || u.startsWith('blob:')), `no network request (${requests.length} requests)`);
  ok(errors.length === 0, `no console errors (${errors.join('; ')})`);
  await page.screenshot({ path: path.join(artifacts, 'report-oom.png') });
  await context.close();

  // `plot --from --to`: the report opens only that window, as the served page does with ?from=&to=.
  const winOut = path.join(artifacts, 'report-window.html');
  const rw = spawnSync(cli, ['plot', path.join(fixtures, 'resnet50_train.pickle'), '-o', winOut, '--web-root', site,
                             '--from', '4000', '--to', '6000'], { encoding: 'utf8' });
  ok(rw.status === 0, `plot --from 4000 --to 6000 writes a report (${rw.stderr.trim()})`);
  {
    const { context, page, errors } = await pageFor(browser);
    await page.goto('file://' + winOut + '#view=peak');
    ok((await waitState(page, ['ready', 'error'], 60000)) === 'ready', 'the window\'s report opens from disk');
    const note = await page.textContent('#window-note');
    await page.waitForSelector('[data-peak-allocated]');
    const step = Number(await page.getAttribute('[data-peak-allocated]', 'data-peak-step'));
    const want = JSON.parse(spawnSync(cli, ['peak', path.join(fixtures, 'resnet50_train.pickle'), '--from', '4000', '--to', '6000', '--json'],
                                      { encoding: 'utf8' }).stdout).devices[0].allocated.step;
    ok(note === 'only steps 4000-6000' && step === want, `it says its window and the window's peak step (${note}, ${step})`);
    ok(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await context.close();
  }

  const bad = path.join(artifacts, 'half.pickle');
  const good = fs.readFileSync(path.join(fixtures, 'linear_seed.pickle'));
  fs.writeFileSync(bad, good.subarray(0, good.length >> 1));
  const r2 = spawnSync(cli, ['plot', bad, '-o', path.join(artifacts, 'bad.html'), '--web-root', site], { encoding: 'utf8' });
  ok(r2.status !== 0 && /at byte \d+/.test(r2.stderr), `a corrupt file fails at the command line (${r2.stderr.trim()})`);
}

// The What-if view's plan and `allocscope plan --json` for the same file and GPU: the same options, in the same order
// (one core computes both), each with its line of code. A real OOM recorded under a cap (plan_runs/oom_cut).
async function planTest(browser) {
  console.log('the viewer\'s plan against allocscope plan');
  const file = path.join(fixtures, 'plan_runs', 'oom_cut', 'llama_hf_90_oom.pickle.gz');
  const cliPlan = JSON.parse(spawnSync(cli, ['plan', file, '--gpu', '4.19GiB', '--top', '6', '--json'], { encoding: 'utf8' }).stdout);
  const want = cliPlan.options.map((o) => [...o.changes, ...(o.batch_scale !== 1 ? [`--batch ${o.batch_scale}`] : [])].join(' '));
  ok(want.length >= 2, `the CLI plans options (${want.join(' | ')})`);
  const { child, url } = await startView([file]);
  const { context, page, errors } = await pageFor(browser);
  await page.goto(url + '#view=whatif');
  ok((await waitState(page, ['ready', 'error'], 60000)) === 'ready', 'the OOM file opens');
  await page.click('[data-view="whatif"]');
  await page.fill('.gpu-input', '4.19GiB');
  await page.press('.gpu-input', 'Enter');
  await page.click('[data-plan]');
  await page.waitForSelector('[data-plan-option="0"]', { timeout: 60000 }).catch(() => null);
  const got = await page.$$eval('[data-plan-option]', (rows) => rows.map((r) => r.dataset.planFlags));
  ok(JSON.stringify(got) === JSON.stringify(want), `the viewer lists the CLI's options in its order (${got.join(' | ')})`);
  const first = await page.textContent('[data-plan-option="0"] code').catch(() => '');
  ok(first === cliPlan.options[0].code.join('; '), `and the line that applies the first (${first})`);
  ok(/as recorded it needs/.test(await page.textContent('[data-plan-head]')), 'its head says what the recorded run needs');
  ok(errors.length === 0, `no console errors (${errors.join('; ')})`);
  await page.screenshot({ path: path.join(artifacts, 'plan.png') });
  await context.close();
  const exit = new Promise((resolve) => child.on('exit', resolve));
  child.kill('SIGINT');
  await exit;
}

// `allocscope view --backend native` (what it picks by itself for a file too big for a tab): the page never reads
// the file; this process parses it and answers every method the views call. Each view is opened, and every request
// the page made is asked again of the wasm core (the viewer's own, in node) on the same file: the answers must be
// the same, body and typed arrays, except the two numbers that measure the process's memory.
async function nativeTest(browser) {
  console.log('allocscope view --backend native');
  const { openEngine } = require(path.join(site, 'engine.js'));
  const factory = require(path.join(site, 'allocscope.js'));
  const sets = [['resnet50_train.pickle'], ['ddp_rank0.pickle', 'ddp_rank1.pickle']];
  for (const names of sets) {
    const files = names.map((f) => path.join(fixtures, f));
    const { child, url, stderr } = await startView(files, ['--backend', 'native']);
    const { context, page, requests, errors } = await pageFor(browser);
    const calls = [];
    let inFlight = 0;
    page.on('request', (r) => { if (/\/api\//.test(r.url())) { ++inFlight; if (/\/api\/call$/.test(r.url())) calls.push(r.postData()); } });
    const settle = async () => {  // until no api request has been in flight for 400 ms
      for (let quiet = 0; quiet < 4;) { await page.waitForTimeout(100); quiet = inFlight === 0 ? quiet + 1 : 0; }
    };
    page.on('requestfinished', (r) => { if (/\/api\//.test(r.url())) --inFlight; });
    page.on('requestfailed', (r) => { if (/\/api\//.test(r.url())) --inFlight; });
    await page.goto(url);
    ok((await waitState(page, ['ready', 'error'], 60000)) === 'ready', 'the page opens the files through allocscope view');
    ok(/[?&]native=1/.test(url) && /parsed here/.test(stderr()), `the URL asked the page to use this process (${names.join(', ')})`);
    const tabs = await page.$$eval('#tabs [data-view]', (b) => b.map((x) => x.dataset.view));
    for (const view of tabs) {
      await page.click(`#tabs [data-view="${view}"]`);
      await settle();
    }
    ok(!requests.some((u) => /\/files\/\d+\//.test(u)), 'the page never downloaded a file');
    ok(calls.length >= tabs.length, `every view asked this process (${tabs.join(', ')}: ${calls.length} calls)`);
    ok(errors.length === 0, `no console errors (${errors.join('; ')})`);
    const failedViews = await page.$$eval('.error, [data-error]', (e) => e.map((x) => x.textContent)).catch(() => []);
    ok(failedViews.length === 0, `no view shows an error (${failedViews.join('; ')})`);
    if (names.length === 1) await page.screenshot({ path: path.join(artifacts, 'view-native.png') });

    // The same requests of the wasm core: ids 1..n are the files in the same order in both.
    const engine = await openEngine(factory, { wasmBinary: fs.readFileSync(path.join(site, 'allocscope.wasm')) });
    for (const f of files) await engine.loadStream(new Uint8Array(fs.readFileSync(f)), path.basename(f), () => {});
    const base = baseOf(url);
    const memory = new Set(['heap_in_use', 'model_bytes']);
    const strip = (body) => JSON.parse(JSON.stringify(body, (k, v) => (memory.has(k) ? undefined : v)));
    let same = 0;
    const differ = [];
    for (const text of new Set(calls)) {
      const req = JSON.parse(text);
      let want;
      try { want = engine.call(req); } catch (e) { want = { body: { error: e.message }, blobs: {} }; }
      const buf = await (await fetch(base + 'api/call', { method: 'POST', body: text })).arrayBuffer();
      const n = new DataView(buf).getUint32(0, true);
      const body = JSON.parse(Buffer.from(buf, 4, n).toString('utf8'));
      const start = Math.ceil((4 + n) / 8) * 8;
      const blobs = {};
      for (const b of body._blobs || []) blobs[b.name] = Buffer.from(buf, start + b.offset, b.size);
      delete body._blobs;
      const wantBlobs = Object.fromEntries(Object.entries(want.blobs).map(([k, v]) => [k, Buffer.from(v.buffer, v.byteOffset, v.byteLength)]));
      const sameBody = JSON.stringify(strip(body)) === JSON.stringify(strip(want.body));
      const sameBlobs = Object.keys(blobs).length === Object.keys(wantBlobs).length &&
                        Object.keys(blobs).every((k) => wantBlobs[k] && blobs[k].equals(wantBlobs[k]));
      if (sameBody && sameBlobs) ++same;
      else differ.push(`${req.method}${sameBody ? ' (typed arrays)' : ''}`);
    }
    ok(differ.length === 0 && same > 0, `the same answers as the wasm core, body and typed arrays (${same} requests; differ: ${differ.join(', ')})`);
    await context.close();
    const exit = new Promise((resolve) => child.on('exit', resolve));
    child.kill('SIGINT');
    await exit;
  }
}

// A file `allocscope view` gave the tab to parse, too big for the tab after all (the site with the test-only wasm
// build capped at 68 MB, which the 1M-event file outgrows): the page asks allocscope view to parse it instead and
// opens on its timeline, with no error shown.
async function nativeFallbackTest(browser) {
  console.log('allocscope view: too big for the tab after all');
  if (!cappedDir) { console.log('  skip: no capped wasm build given'); return; }
  const capped = fs.mkdtempSync(path.join(os.tmpdir(), 'allocscope-capped-site-'));
  try {
    fs.cpSync(site, capped, { recursive: true });
    for (const f of ['allocscope.js', 'allocscope.wasm']) fs.copyFileSync(path.join(cappedDir, f), path.join(capped, f));
    const file = path.join(fixtures, 'gpt2_big_1M.pickle.gz');
    const child = spawn(cli, ['view', '--port', '0', '--web-root', capped, '--backend', 'browser', file], { stdio: ['ignore', 'pipe', 'pipe'] });
    const url = await new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => { out += d; if (out.includes('\n')) resolve(out.split('\n')[0].trim()); });
      child.on('exit', (code) => reject(new Error(`view exited ${code}`)));
    });
    ok(!/native=1/.test(url), 'a 12 MB file is given to the tab');
    const { context, page, requests, errors } = await pageFor(browser);
    await page.goto(url);
    ok((await waitState(page, ['ready', 'error'], 120000)) === 'ready', 'the tab runs out of memory, and the file opens through allocscope view');
    ok(requests.some((u) => /\/files\/0\//.test(u)) && requests.some((u) => /\/api\/open/.test(u)),
       'the tab read the file first, then asked allocscope view');
    ok(await page.$('#tabs [data-view="timeline"].active') !== null, 'on its Active Memory Timeline');
    const real = errors.filter((e) => !/Aborted|out of memory|RuntimeError/i.test(e));
    ok(real.length === 0, `no other console errors (${real.join('; ')})`);
    await context.close();
    const exit = new Promise((resolve) => child.on('exit', resolve));
    child.kill('SIGINT');
    await exit;
  } finally {
    fs.rmSync(capped, { recursive: true, force: true });
  }
}

// The native backend's edges: a ranks report is read by the page even with --backend native (its rows open the
// ranks); a broken file's error reaches the page with its byte offset; Ctrl-C during a load ends the process at once.
async function nativeEdgesTest(browser) {
  console.log('allocscope view --backend native: ranks report, broken file, Ctrl-C during a load');
  const stop = async (child) => {
    const exit = new Promise((resolve) => child.on('exit', resolve));
    child.kill('SIGINT');
    return Promise.race([exit, new Promise((resolve) => setTimeout(() => resolve('still running'), 3000))]);
  };
  {
    const { child, url } = await startView([path.join(fixtures, 'ranks_ddp.json')], ['--backend', 'native']);
    ok(!/native=1/.test(url), 'a ranks report is left to the page');
    const { context, page } = await pageFor(browser);
    await page.goto(url);
    ok((await waitState(page, ['ready', 'error'], 60000)) === 'ready', 'and opens the Ranks view');
    await context.close();
    await stop(child);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'allocscope-native-'));
  try {
    const bytes = fs.readFileSync(path.join(fixtures, 'ddp_rank0.pickle'));
    const broken = path.join(dir, 'broken.pickle');
    fs.writeFileSync(broken, bytes.subarray(0, Math.floor(bytes.length / 2)));
    const { child, url } = await startView([broken], ['--backend', 'native']);
    const { context, page } = await pageFor(browser);
    await page.goto(url);
    ok((await waitState(page, ['ready', 'error'], 60000)) === 'error', 'a truncated file ends in the error page');
    const text = await page.textContent('body');
    ok(/broken\.pickle/.test(text) && /at byte \d+/.test(text), 'which names the file and the byte where it ends');
    await context.close();
    await stop(child);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  {
    const { child, url } = await startView([path.join(fixtures, 'gpt2_big_1M.pickle.gz')], ['--backend', 'native']);
    const loading = fetch(baseOf(url) + 'api/open?file=0', { method: 'POST' }).catch(() => null);
    await new Promise((resolve) => setTimeout(resolve, 150));
    const t0 = Date.now();
    const code = await stop(child);
    ok(code === 0 && Date.now() - t0 < 2500, `Ctrl-C during a load ends it (exit ${code} after ${Date.now() - t0} ms)`);
    await loading;
  }
}

// `allocscope view --from A --to B` (and the page's ?from=&to=): only that window is loaded, in the tab and in this
// process alike, and every view says the file's own steps. The oracle is the CLI's `peak --from A --to B --json`,
// itself tested against the whole file (tests/analysis_answers/window_answers_test.cpp).
async function windowTest(browser) {
  console.log('allocscope view --from --to');
  const file = path.join(fixtures, 'resnet50_train.pickle');
  const cliPeak = JSON.parse(spawnSync(cli, ['peak', file, '--from', '4000', '--to', '6000', '--json'], { encoding: 'utf8' }).stdout).devices[0];
  const fileEvents = JSON.parse(spawnSync(cli, ['summary', file, '--json'], { encoding: 'utf8' }).stdout).devices[0].events;
  for (const backend of ['browser', 'native']) {
    const { child, url } = await startView([file], ['--backend', backend, '--from', '4000', '--to', '6000']);
    ok(/&from=4000&to=6000$/.test(url), `${backend}: the URL carries the window (${url})`);
    const { context, page, errors } = await pageFor(browser);
    await page.goto(url);
    ok((await waitState(page, ['ready', 'error'], 60000)) === 'ready', `${backend}: the window opens`);
    const note = await page.textContent('#window-note');
    ok(note === 'only steps 4000-6000' && await page.isVisible('#window-note'), `${backend}: the bar says which window (${note})`);
    const tabs = await page.$$eval('#tabs [data-view]', (b) => b.map((x) => x.dataset.view));
    ok(!tabs.includes('whatif') && !tabs.includes('leaks'), `${backend}: no What-if or Leaks on a window (${tabs})`);
    // Timeline: its headline is the window's peak at the file's step; it opens on the window's steps.
    await page.waitForSelector('[data-peak-bytes]');
    const headline = await page.textContent('.peak');
    ok(Number(await page.getAttribute('[data-peak-bytes]', 'data-peak-bytes')) === cliPeak.allocated.bytes &&
       headline.includes(`at step ${cliPeak.allocated.step.toLocaleString('en-US')} (after ${cliPeak.allocated.step.toLocaleString('en-US')} events)`),
       `${backend}: the timeline's peak is the CLI's, at the file's step (${headline})`);
    const toolbar = await page.textContent('#view');
    ok(/window 4,000 – 6,000/.test(toolbar), `${backend}: the timeline opens on steps 4,000-6,000 of the file`);
    // Peak: the CLI's answer; its buttons go to the page's step of the file's peak step.
    await page.click('#tabs [data-view="peak"]');
    await page.waitForSelector('[data-peak-allocated]');
    const peakBytes = Number(await page.getAttribute('[data-peak-allocated]', 'data-peak-allocated'));
    const peakStep = Number(await page.getAttribute('[data-peak-allocated]', 'data-peak-step'));
    ok(peakBytes === cliPeak.allocated.bytes && peakStep === cliPeak.allocated.step,
       `${backend}: Peak says the CLI's ${peakBytes} bytes at step ${peakStep}`);
    const peakText = await page.textContent('#view');
    ok(peakText.includes('before the window') || peakText.includes('after the window'), `${backend}: Peak's largest allocations say which lived past the window`);
    await page.click('text=Allocator state at the peak');
    await page.waitForSelector('[data-state-step]');
    const stateLabel = await page.textContent('#view');
    const want = `after ${cliPeak.allocated.step.toLocaleString('en-US')} of ${fileEvents.toLocaleString('en-US')} events`;
    ok(stateLabel.includes(want), `${backend}: Allocator state opens at the peak, said in the file's steps (${want})`);
    await page.click('#tabs [data-view="flame"]');
    await page.waitForFunction(() => document.querySelector('.step-input') && document.querySelector('.step-input').value !== '');
    const stepBox = await page.inputValue('.step-input');
    ok(Number(stepBox) === cliPeak.allocated.step, `${backend}: Flame's step box holds the file's step (${stepBox})`);
    ok(errors.length === 0, `${backend}: no console errors (${errors.join('; ')})`);
    if (backend === 'browser') {
      await page.goto(url.replace('from=4000', 'from=4k'));
      ok((await waitState(page, ['ready', 'error'], 60000)) === 'error' && /4k/.test(await page.textContent('#error-message')),
         `a window that does not parse is the error page, naming it (${await page.textContent('#error-message')})`);
    }
    await context.close();
    const exit = new Promise((resolve) => child.on('exit', resolve));
    child.kill('SIGINT');
    await exit;
  }
}

(async () => {
  const browser = await launch();
  try {
    await windowTest(browser);
    await nativeTest(browser);
    await nativeFallbackTest(browser);
    await nativeEdgesTest(browser);
    await viewTest(browser);
    await planTest(browser);
    await viewRanksTest(browser);
    await viewOddNamesTest(browser);
    await plotTest(browser);
  } catch (e) {
    ++failed;
    console.log(`  FAIL ${e && e.stack ? e.stack : e}`);
  } finally {
    await browser.close();
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
})();
