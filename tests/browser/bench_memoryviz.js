// Benchmark: PyTorch's own viewer (MemoryViz, the page behind pytorch.org/memory_viz) against ours, in the same run, on
// the same bytes, in headless Chromium (a fresh browser per measurement): time from the file handed to the page's
// <input type=file> to the first drawn Active Memory Timeline. Benchmarks are not tests: nothing fails on a slow
// number (the exit status is 0 unless the benchmark itself cannot run).
//
// usage: node tests/browser/bench_memoryviz.js SITE_DIR [--memoryviz=DIR] [--runs=N] [--timeout=SECONDS] [FILE...]
//   SITE_DIR     the assembled viewer (build/wasm/site)
//   --memoryviz  the folder holding MemoryViz.js and process_alloc_data.js (default ../shared/anchors/memoryviz from
//                the repository root). It is served from there, never copied into the repository; if it is absent,
//                only our viewer is measured.
//   --runs       measurements per file and viewer (default 2)
//   --timeout    the most seconds one measurement may take (default 900)
//   FILE...      snapshots (default tests/fixtures/gpt2_big_1M.pickle.gz and tests/fixtures/resnet50_train.pickle)
// Prints a Markdown table, one row per file and run.
//
// MemoryViz imports d3 7 (and d3-axis, d3-scale, d3-zoom, d3-brush) from cdn.jsdelivr.net; a page generated here maps
// those URLs, and the bare names d3's ES modules import, onto the d3 packages in tests/browser/node_modules with an
// import map, so it runs offline (any request off the loopback origin is reported). MemoryViz cannot read gzip, so a
// .gz file is inflated once into a temporary folder and both viewers get the inflated bytes; the folder is removed at
// the end.
//
// Timing, on the page's own clock for both viewers: from the input's change event (a capture listener on the window,
// so it runs before the viewer's own handler) to the animation frame after the picture is in place, then a task (the
// frame's paint done):
//   MemoryViz, first timeline: its Active Memory Timeline (the default view) is an SVG of <polygon>s built in one task
//     (read, unpickle, process_alloc_data, d3); timed to the first <polygon> in the document.
//   ours, first picture: the memory curve drawn while the file still loads (the page sets
//     data-first-preview-ms on <html>); "—" where it is not drawn.
//   ours, timeline ready: <html data-state="ready">, set when the Active Memory Timeline has painted.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const zlib = require('zlib');
const { execSync } = require('child_process');
const { serve } = require('./serve.js');
const { launch, watchedPage, waitWarm } = require('./browser.js');

const ROOT = path.resolve(__dirname, '..', '..');
const NODE_MODULES = path.join(__dirname, 'node_modules');
const VIEWPORT = { width: 1600, height: 900 };

function parseArgs(argv) {
  const o = { site: null, memoryviz: path.resolve(ROOT, '..', 'shared', 'anchors', 'memoryviz'), runs: 2, timeout: 900, files: [] };
  for (const a of argv) {
    const m = /^--([a-z]+)=(.*)$/.exec(a);
    if (m && m[1] === 'memoryviz') o.memoryviz = path.resolve(m[2]);
    else if (m && m[1] === 'runs') o.runs = Math.max(1, Number(m[2]) || 1);
    else if (m && m[1] === 'timeout') o.timeout = Math.max(1, Number(m[2]) || 900);
    else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
    else if (!o.site) o.site = path.resolve(a);
    else o.files.push(path.resolve(a));
  }
  if (!o.site) throw new Error('usage: node tests/browser/bench_memoryviz.js SITE_DIR [--memoryviz=DIR] [--runs=N] [--timeout=SECONDS] [FILE...]');
  if (!o.files.length) o.files = ['gpt2_big_1M.pickle.gz', 'resnet50_train.pickle'].map((f) => path.join(ROOT, 'tests', 'fixtures', f));
  return o;
}

// The import map for MemoryViz: each CDN URL it imports (https://cdn.jsdelivr.net/npm/NAME@VERSION/+esm) and each bare
// name the d3 packages' ES modules import, onto the package's ES module entry under /nm/ (tests/browser/node_modules).
function importMap(memoryvizSource) {
  const entry = (name) => {
    const dir = path.join(NODE_MODULES, name);
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
    const exp = pkg.exports && (pkg.exports['.'] || pkg.exports);
    const rel = pkg.module || (exp && (typeof exp === 'string' ? exp : exp.import || exp.default)) || pkg.main || 'index.js';
    if (!fs.existsSync(path.join(dir, rel))) throw new Error(`${name}: no ES module entry (${rel})`);
    return `/nm/${name}/${rel.replace(/^\.\//, '')}`;
  };
  const imports = {};
  for (const m of memoryvizSource.matchAll(/["'](https:\/\/cdn\.jsdelivr\.net\/npm\/((?:@[^/]+\/)?[^@/]+)@[^"']*)["']/g)) {
    if (!fs.existsSync(path.join(NODE_MODULES, m[2]))) throw new Error(`MemoryViz imports ${m[1]}: run npm ci --prefix tests/browser`);
    imports[m[1]] = entry(m[2]);
  }
  // d3 and everything it depends on, as npm installed them (d3-*, internmap, delaunator, robust-predicates).
  const seen = new Set();
  const visit = (name) => {
    if (seen.has(name) || !fs.existsSync(path.join(NODE_MODULES, name, 'package.json'))) return;
    seen.add(name);
    const pkg = JSON.parse(fs.readFileSync(path.join(NODE_MODULES, name, 'package.json'), 'utf8'));
    imports[name] = entry(name);
    for (const dep of Object.keys(pkg.dependencies || {})) if (/^(d3(-.*)?|internmap|delaunator|robust-predicates)$/.test(dep)) visit(dep);
  };
  visit('d3');
  return { imports };
}

function memoryvizPage(map) {
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>MemoryViz (allocscope benchmark, served offline)</title>
<script type="importmap">${JSON.stringify(map)}</script>
</head><body><script type="module" src="/memoryviz/MemoryViz.js"></script></body></html>
`;
}

// Runs in every page before its own scripts: stamps the file input's change event and, on request, the frame after a
// condition first holds.
function benchProbe() {
  const b = (window.__bench = { t0: null, marks: {} });
  const stamp = (e) => {
    if (b.t0 === null && e.target && e.target.type === 'file') b.t0 = performance.now();
  };
  addEventListener('input', stamp, true);
  addEventListener('change', stamp, true);
  b.mark = (name) => {
    if (name in b.marks || b.t0 === null) return;
    const seen = performance.now() - b.t0;
    b.marks[name] = null;
    requestAnimationFrame(() => setTimeout(() => { b.marks[name] = { seen, painted: performance.now() - b.t0 }; }, 0));
  };
}

// Opens `url` in a fresh browser, waits for `armed` (the page ready for a file), arms `observe`, hands over `file` and
// waits until every name in `want` is marked (or the page sets an error), then evaluates `describe` (what was drawn)
// and saves a screenshot. Returns {marks, drawn, foreign} or {error}.
async function measure(origin, url, armed, observe, inputSelector, file, want, optional, describe, shot, timeoutMs) {
  const browser = await launch();
  try {
    const { page, watch } = await watchedPage(browser, origin, VIEWPORT);
    await page.addInitScript(benchProbe);
    let failed = null;
    const failure = new Promise((resolve) => {
      page.on('pageerror', (e) => { failed = failed || `page error: ${String(e.message || e).slice(0, 200)}`; resolve(); });
      page.on('crash', () => { failed = failed || 'renderer crashed'; resolve(); });
    });
    await page.goto(origin + url);
    await page.waitForFunction(armed, null, { timeout: 60000 });
    // Ours warms its core up on the start page (Engine.warmUp); the drop comes after it, as a user's drag would.
    if (url.startsWith('/app/')) await waitWarm(page);
    await page.evaluate(observe);
    await page.setInputFiles(inputSelector, file);
    const done = page.waitForFunction((w) => w.every((n) => window.__bench.marks[n]) || window.__bench.error,
                                      want, { timeout: timeoutMs, polling: 250 });
    done.catch(() => {});  // settled by the race below; a failure that wins it leaves this one to the browser's close
    try {
      await Promise.race([done, failure]);
    } catch (e) {
      return { error: /Timeout/.test(String(e)) ? `no timeline after ${timeoutMs / 1000} s` : String(e.message || e).slice(0, 200) };
    }
    if (failed) return { error: failed };
    const b = await page.evaluate(() => ({ marks: window.__bench.marks, error: window.__bench.error || null,
                                           firstPreviewMs: document.documentElement.dataset.firstPreviewMs || null }));
    if (b.error) return { error: b.error };
    // Give a picture drawn while loading a moment to be stamped (its frame).
    for (const n of optional) if (b.marks[n] === null) await page.waitForFunction((k) => window.__bench.marks[k], n).catch(() => {});
    const marks = await page.evaluate(() => window.__bench.marks);
    const drawn = await page.evaluate(describe);
    await page.screenshot({ path: path.join(__dirname, 'artifacts', shot) }).catch(() => {});
    return { marks, drawn, firstPreviewMs: b.firstPreviewMs, foreign: watch.foreign };
  } finally {
    await browser.close();
  }
}

// MemoryViz: ready once its module ran (its file input exists); the timeline is the first <polygon> of its plot.
const memoryvizArmed = () => !!document.querySelector('input[type=file]');
function memoryvizObserve() {
  const b = window.__bench;
  const obs = new MutationObserver(() => {
    if (document.querySelector('svg polygon')) { obs.disconnect(); b.mark('timeline'); }
  });
  obs.observe(document.body, { childList: true, subtree: true });
}
const memoryvizDrawn = () => {
  const label = [...document.querySelectorAll('label')].find((l) => /^Detail:/.test(l.textContent));
  return `${document.querySelectorAll('svg polygon').length} polygons${label ? ` (${label.textContent})` : ''}`;
};

// Ours: ready for a file at data-state="empty"; the picture while loading and the timeline, from <html>'s attributes.
const oursArmed = () => document.documentElement.dataset.state === 'empty';
function oursObserve() {
  const b = window.__bench;
  const html = document.documentElement;
  const obs = new MutationObserver(() => {
    if (html.dataset.firstPreviewMs !== undefined) b.mark('picture');
    if (html.dataset.state === 'ready') { b.mark('ready'); obs.disconnect(); }
    if (html.dataset.state === 'error') {
      const m = document.getElementById('error-message');
      b.error = `viewer error: ${m ? m.textContent.slice(0, 200) : 'data-state=error'}`;
    }
  });
  obs.observe(html, { attributes: true, attributeFilter: ['data-state', 'data-first-preview-ms'] });
}
const oursDrawn = () => {
  const c = document.querySelector('canvas[data-window]') || document.querySelector('#view canvas, canvas');
  return c ? `canvas ${c.width}x${c.height}` : 'no canvas';
};

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const mib = (b) => `${(b / (1 << 20)).toFixed(b < (10 << 20) ? 1 : 0)} MiB`;
  const sec = (ms) => (ms === undefined || ms === null ? '—' : (ms / 1000).toFixed(2));
  const hasMemoryviz = fs.existsSync(path.join(o.memoryviz, 'MemoryViz.js'));
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'allocscope-bench-memoryviz-'));
  const cleanup = () => fs.rmSync(tmp, { recursive: true, force: true });
  process.on('SIGINT', () => { cleanup(); process.exit(130); });
  let server = null;
  try {
    const roots = { '/app/': o.site };
    if (hasMemoryviz) {
      const page = path.join(tmp, 'memoryviz.html');
      fs.writeFileSync(page, memoryvizPage(importMap(fs.readFileSync(path.join(o.memoryviz, 'MemoryViz.js'), 'utf8'))));
      Object.assign(roots, { '/memoryviz/': o.memoryviz, '/memoryviz/index.html': page, '/nm/': NODE_MODULES });
    } else {
      console.log(`MemoryViz was not found at ${o.memoryviz} (no MemoryViz.js there): measuring only our viewer.`);
    }
    let origin;
    ({ server, origin } = await serve(roots));
    console.log(`machine: ${os.cpus().length} cores, ${os.cpus()[0].model}, load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}; ` +
                `Chromium ${execSync('/usr/bin/chromium --version 2>/dev/null || true', { encoding: 'utf8' }).trim() || '?'}, headless, ${VIEWPORT.width}x${VIEWPORT.height}`);
    console.log('');
    console.log('| file (size) | run | MemoryViz: drop → first timeline (s) | ours: drop → first picture (s) | ours: drop → timeline ready (s) | MemoryViz / ours (ready) |');
    console.log('|---|---|---|---|---|---|');
    const notes = [];
    for (const original of o.files) {
      let file = original;
      let label = `${path.basename(original)} (${mib(fs.statSync(original).size)})`;
      if (/\.gz$/i.test(original)) {
        // One inflated copy for both viewers: MemoryViz reads no gzip.
        file = path.join(tmp, path.basename(original).replace(/\.gz$/i, ''));
        fs.writeFileSync(file, zlib.gunzipSync(fs.readFileSync(original)));
        label = `${path.basename(original)} (${mib(fs.statSync(original).size)}; inflated to ${mib(fs.statSync(file).size)} for both)`;
      }
      for (let r = 1; r <= o.runs; ++r) {
        let mv = null;
        if (hasMemoryviz) {
          mv = await measure(origin, '/memoryviz/index.html', memoryvizArmed, memoryvizObserve, 'input[type=file]', file,
                             ['timeline'], [], memoryvizDrawn, 'bench-memoryviz-theirs.png', o.timeout * 1000);
          if (mv.foreign && mv.foreign.length) notes.push(`MemoryViz, ${path.basename(file)} run ${r}: requests off the loopback origin: ${mv.foreign.join(', ')}`);
        }
        const ours = await measure(origin, '/app/#view=timeline', oursArmed, oursObserve, '#file-input', file,
                                   ['ready'], ['picture'], oursDrawn, 'bench-memoryviz-ours.png', o.timeout * 1000);
        if (ours.foreign && ours.foreign.length) notes.push(`ours, ${path.basename(file)} run ${r}: requests off the loopback origin: ${ours.foreign.join(', ')}`);
        const mvMs = mv && !mv.error ? mv.marks.timeline.painted : null;
        const readyMs = !ours.error ? ours.marks.ready.painted : null;
        const pictureMs = !ours.error && ours.marks.picture ? ours.marks.picture.painted : null;
        const mvCell = !hasMemoryviz ? 'not found' : mv.error ? `error: ${mv.error}` : sec(mvMs);
        const oursCells = ours.error ? [`error: ${ours.error}`, '—'] : [sec(pictureMs), sec(readyMs)];
        const ratio = mvMs !== null && readyMs ? `${(mvMs / readyMs).toFixed(1)}×` : '—';
        console.log(`| ${label} | ${r} | ${mvCell} | ${oursCells[0]} | ${oursCells[1]} | ${ratio} |`);
        if (r === 1 && mv && !mv.error) notes.push(`MemoryViz, ${path.basename(file)}: drew ${mv.drawn}`);
        if (r === 1 && !ours.error) notes.push(`ours, ${path.basename(file)}: drew ${ours.drawn}` +
          (ours.firstPreviewMs !== null ? `; the page's own data-first-preview-ms ${ours.firstPreviewMs} (from its previewStart, after the ranks-file check; the table counts from the change event)` : ''));
      }
    }
    console.log('');
    console.log(`load after: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
    for (const n of notes) console.log(`- ${n}`);
  } finally {
    if (server) server.close();
    cleanup();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
