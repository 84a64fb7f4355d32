// Browser tests of the views on real fixtures: each view paints (data-state=ready), its headline numbers equal the
// golden files where PyTorch has an answer, and the interactions work (hover, pin, search, keys, axis toggle).
'use strict';
const path = require('path');
const { watchedPage, waitState } = require('./browser.js');

async function run(browser, origin, { artifacts, ok, eq, golden }) {
  console.log('views');
  const { context, page, watch } = await watchedPage(browser, origin);
  const open = async (files, view) => {
    const q = files.map((f) => 'url=' + encodeURIComponent('/fixtures/' + f)).join('&');
    await page.goto('about:blank');  // a hash-only change would not reload the page
    await page.goto(`${origin}/app/?${q}#view=${view}`);
    const st = await waitState(page, ['ready', 'error'], 90000);
    if (st !== 'ready') console.log('    ' + (await page.textContent('#error-message')));
    return st;
  };
  const attr = (sel, name) => page.getAttribute(sel, name).catch(() => null);

  // Active Memory Timeline: PyTorch's peak for every small fixture with a trace.
  for (const f of ['resnet50_train.pickle', 'linear_seed.pickle', 'gpt2_cpp.pickle.gz', 'expandable_segments.pickle']) {
    const base = f.replace(/\.pickle(\.gz)?$/, '');
    const mv = golden(base, 'memoryviz.json');
    eq(await open([f], 'timeline'), 'ready', `${base} timeline reaches ready`);
    const dev = Object.keys(mv.devices)[0];
    eq(Number(await attr('[data-peak-bytes]', 'data-peak-bytes')), mv.devices[dev].peak_active_bytes, `${base} timeline peak equals PyTorch's`);
    await page.waitForTimeout(300);
    await page.screenshot({ path: path.join(artifacts, `timeline-${base}.png`) });
  }

  // Interactions on resnet50: hover shows a stack, click pins, keys zoom, t toggles the axis, search marks hits.
  await open(['resnet50_train.pickle'], 'timeline');
  await page.waitForTimeout(300);
  const box = await page.locator('.canvas-wrap canvas').boundingBox();
  await page.mouse.move(box.x + box.width * 0.45, box.y + box.height * 0.8);
  await page.waitForSelector('#detail:not(.hidden) .alloc-card', { timeout: 10000 }).catch(() => null);
  const card = await page.textContent('#detail').catch(() => '');
  ok(/address/.test(card) && /0x[0-9a-f]+/.test(card), 'hovering a band shows its address');
  ok(/Stack/.test(card), 'hover card shows the stack');
  await page.mouse.click(box.x + box.width * 0.45, box.y + box.height * 0.8);
  await page.waitForTimeout(300);
  ok(/pinned/.test(await page.textContent('#detail')), 'click pins the allocation');
  await page.screenshot({ path: path.join(artifacts, 'timeline-hover.png') });
  await page.keyboard.press('Escape');
  await page.keyboard.press('+');
  await page.keyboard.press('+');
  await page.waitForTimeout(400);
  ok(/window=/.test(await page.evaluate(() => location.hash)), 'zoom keys put the window in the URL hash');
  // Pan/zoom moves the pixels already drawn at once, before the worker's draw for the new window comes back.
  const moved = await page.evaluate(() => {
    const c = document.querySelector('canvas[data-window]');
    if (!c) return 'no canvas with data-window';
    const before = c.dataset.window;
    document.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowRight', bubbles: true }));
    return c.dataset.window !== before ? 'moved' : 'unchanged';
  });
  eq(moved, 'moved', 'a pan key moves the drawn frame at once (synchronously, before the new draw arrives)');
  await page.keyboard.press('t');
  await page.waitForTimeout(400);
  ok(/axis=time/.test(await page.evaluate(() => location.hash)), 't switches to the time axis');
  await page.fill('#search', 'conv2d|batch_norm');
  await page.waitForTimeout(800);
  const info = await page.textContent('.timeline-info');
  ok(/\d[\d,]* of [\d,]+ allocations match/.test(info), `regex search reports matches (${info.trim().slice(-40)})`);
  await page.screenshot({ path: path.join(artifacts, 'timeline-search.png') });
  await page.fill('#search', '0x7f');
  await page.waitForTimeout(500);
  ok(/allocations match/.test(await page.textContent('.timeline-info')), 'hex address search runs');
  await page.fill('#search', '');
  await page.locator('#search').blur();
  await page.keyboard.press('?');
  ok(await page.isVisible('#help'), '? opens the keyboard help');
  await page.keyboard.press('Escape');

  // Segments, allocator state, flame graph.
  eq(await open(['expandable_segments.pickle'], 'segments'), 'ready', 'segment timeline reaches ready');
  await page.waitForTimeout(300);
  await page.screenshot({ path: path.join(artifacts, 'segments-expandable.png') });
  eq(await open(['resnet50_train.pickle'], 'state'), 'ready', 'allocator state history reaches ready');
  const reserved = Number(await attr('[data-state-value="reserved"]', 'data-value'));
  ok(reserved > 0, `allocator state shows reserved bytes (${reserved})`);
  await page.keyboard.press('ArrowRight');
  await page.waitForTimeout(300);
  ok(/step=/.test(await page.evaluate(() => location.hash)), 'arrow keys move the state and the hash follows');
  await page.screenshot({ path: path.join(artifacts, 'state-resnet50.png') });
  eq(await open(['resnet50_train.pickle'], 'flame'), 'ready', 'flame graph reaches ready');
  await page.waitForTimeout(300);
  eq(Number(await attr('[data-total]', 'data-total')), golden('resnet50_train', 'memoryviz.json').devices['0'].peak_active_bytes,
     'flame graph at the peak holds exactly the peak bytes');
  await page.screenshot({ path: path.join(artifacts, 'flame-resnet50.png') });

  // Answers: peak, leaks, OOM.
  eq(await open(['transformer_leak.pickle'], 'peak'), 'ready', 'peak view reaches ready');
  eq(Number(await attr('[data-peak-allocated]', 'data-peak-allocated')),
     golden('transformer_leak', 'memoryviz.json').devices['0'].peak_active_bytes, 'peak view equals PyTorch\'s peak');
  await page.screenshot({ path: path.join(artifacts, 'peak-transformer_leak.png') });
  for (const [f, want] of [['transformer_leak.pickle', 'yes'], ['resnet18_grad_bug.pickle', 'held'], ['resnet50_train.pickle', 'no']]) {
    eq(await open([f], 'leaks'), 'ready', `${f} leaks view reaches ready`);
    eq(await attr('[data-leak]', 'data-leak'), want, `${f}: leak verdict`);
    if (want !== 'no') await page.screenshot({ path: path.join(artifacts, `leaks-${f.replace('.pickle', '')}.png`) });
  }
  eq(await open(['oom.pickle'], 'oom'), 'ready', 'OOM view reaches ready');
  eq(Number(await attr('[data-ooms]', 'data-ooms')), golden('oom', 'facts.json').actions.oom, 'OOM view lists every oom event');
  await page.screenshot({ path: path.join(artifacts, 'oom.png') });

  // Two files: diff. The two Active Memory Timelines (rank 0 traced cuda:0, rank 1 cuda:1) one above the other, each
  // painted with PyTorch's peak for its device, zoom/pan linked; the tables' totals equal the facts' difference.
  eq(await open(['ddp_rank0.pickle', 'ddp_rank1.pickle'], 'diff'), 'ready', 'diff reaches ready');
  const fa = golden('ddp_rank0', 'facts.json'), fb = golden('ddp_rank1', 'facts.json');
  eq(Number(await attr('[data-diff-live]', 'data-diff-live')), fb.total_allocated - fa.total_allocated, 'diff of live bytes equals the facts\' difference');
  eq(Number(await attr('[data-diff-reserved]', 'data-diff-reserved')), fb.total_reserved - fa.total_reserved, 'diff of reserved bytes equals the facts\' difference');
  const panelPeak = async (w) => Number(await attr(`[data-diff-panel="${w}"] [data-peak-bytes]`, 'data-peak-bytes'));
  eq(await panelPeak('a'), golden('ddp_rank0', 'memoryviz.json').devices['0'].peak_active_bytes, 'diff timeline A: peak equals PyTorch\'s (rank 0, cuda:0)');
  eq(await panelPeak('b'), golden('ddp_rank1', 'memoryviz.json').devices['1'].peak_active_bytes, 'diff timeline B: peak equals PyTorch\'s (rank 1, cuda:1)');
  // Painted: rectangles drawn and coloured pixels inside each plot (not just a blank canvas with attributes).
  const painted = () => page.$$eval('[data-diff-panel] canvas', (cs) => cs.map((c) => {
    const g = c.getContext('2d');
    const d = g.getImageData(Math.round(80 * devicePixelRatio), 0, c.width - Math.round(100 * devicePixelRatio), c.height - Math.round(30 * devicePixelRatio)).data;
    let coloured = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 40) ++coloured;
    return { rects: Number(c.dataset.rects), coloured, window: c.dataset.window };
  }));
  const before = await painted();
  eq(before.length, 2, 'diff shows two timelines');
  ok(before.every((p) => p.rects > 0 && p.coloured > 1000), `both timelines paint their bands (${JSON.stringify(before.map((p) => [p.rects, p.coloured]))})`);
  eq(before[0].window, before[1].window, 'both timelines show the same window');
  await page.screenshot({ path: path.join(artifacts, 'diff-ddp.png') });
  await page.keyboard.press('+');
  await page.keyboard.press('+');
  await page.keyboard.press('ArrowRight');
  await page.waitForFunction(() => {
    const cs = [...document.querySelectorAll('[data-diff-panel] canvas')];
    return cs.length === 2 && cs[0].dataset.window === cs[1].dataset.window && !/^0,/.test(cs[0].dataset.window);
  }, null, { timeout: 10000 }).catch(() => null);
  const after = await painted();
  ok(after[0].window !== before[0].window && after[0].window === after[1].window,
     `zoom and pan move both timelines together (${before[0].window} -> ${after[0].window} / ${after[1].window})`);
  const [w0, w1] = after[0].window.split(',').map(Number);
  ok(w1 - w0 < 0.6 * Number(before[0].window.split(',')[1]), 'two zoom steps narrowed the window');
  ok(after.every((p) => p.rects > 0 && p.coloured > 1000), 'both timelines repaint after zooming');
  // The linked window is view state in the URL hash (never data): a reload of that URL shows the same window.
  const diffHash = await page.evaluate(() => location.hash);
  const hashWindow = new URLSearchParams(diffHash.slice(1)).get('window');
  ok(hashWindow && hashWindow.split(',').map(Number).every((v, i) => Math.abs(v - [w0, w1][i]) <= 1e-6 * Math.max(1, w1)),
     `the diff's zoomed window is in the URL hash (${diffHash} vs ${after[0].window})`);
  await page.goto('about:blank');
  await page.goto(`${origin}/app/?url=${encodeURIComponent('/fixtures/ddp_rank0.pickle')}&url=${encodeURIComponent('/fixtures/ddp_rank1.pickle')}${diffHash}`);
  eq(await waitState(page, ['ready', 'error'], 90000), 'ready', 'diff reopens from the URL with the window in its hash');
  await page.waitForFunction(() => [...document.querySelectorAll('[data-diff-panel] canvas')].every((c) => c.dataset.rects), null, { timeout: 10000 }).catch(() => null);
  const reopened = await painted();
  ok(reopened.length === 2 && reopened.every((p) => p.window === reopened[0].window && p.rects > 0 && p.coloured > 1000) &&
     reopened[0].window.split(',').map(Number).every((v, i) => Math.abs(v - [w0, w1][i]) <= 1e-6 * Math.max(1, w1)),
     `both reopened timelines show the window from the hash (${reopened.map((p) => p.window).join(' / ')})`);
  const bBox = await page.locator('[data-diff-panel="b"] canvas').boundingBox();
  await page.mouse.move(bBox.x + bBox.width * 0.5, bBox.y + bBox.height * 0.7);
  await page.waitForSelector('#detail:not(.hidden) .alloc-card', { timeout: 10000 }).catch(() => null);
  const dcard = await page.textContent('#detail').catch(() => '');
  ok(/ddp_rank1\.pickle/.test(dcard) && /address/.test(dcard), 'hovering timeline B shows the allocation of rank 1');
  await page.keyboard.press('t');
  await page.waitForTimeout(600);
  ok(/axis=time/.test(await page.evaluate(() => location.hash)) && (await painted()).every((p) => p.rects > 0), 't puts both timelines on the time axis');
  await page.keyboard.press('t');
  await page.mouse.move(0, 0);
  await page.waitForTimeout(300);
  await page.screenshot({ path: path.join(artifacts, 'diff-ddp-zoomed.png') });
  // On the time axis the Diff window counts from each trace's first event, which a single-file view does not: it is
  // not carried over (the event axis's window is, both count events from the start).
  await page.keyboard.press('t');
  await page.keyboard.press('+');
  await page.waitForTimeout(300);
  ok(/axis=time/.test(await page.evaluate(() => location.hash)) && /window=/.test(await page.evaluate(() => location.hash)),
     'zoomed Diff on the time axis has its window in the hash');
  await page.keyboard.press('1');
  await page.waitForSelector('.view-timeline canvas[data-window]', { timeout: 10000 }).catch(() => null);
  ok(!/window=/.test(await page.evaluate(() => location.hash)), 'switching to Active memory from the Diff time axis starts from the whole trace');

  // Ranks: each file's busiest device (rank 1 traced cuda:1), the outlier marked wherever it is, none among equals.
  eq(await open(['ddp_rank0.pickle', 'ddp_rank1.pickle', 'ddp_rank0.pickle'], 'ranks'), 'ready', 'ranks reaches ready');
  eq(Number(await attr('[data-outliers]', 'data-outliers')), 1, 'one outlier rank');
  const rankRows = () => page.$$eval('[data-rank-row]', (rs) => rs.map((r) => [r.children[1].textContent, r.classList.contains('outlier')]));
  eq(await rankRows(), [['cuda:0', false], ['cuda:1', true], ['cuda:0', false]], 'rank 1 is on cuda:1 and is the one marked outlier');
  await page.screenshot({ path: path.join(artifacts, 'ranks-ddp.png') });
  // Its row opens rank 1's timeline on cuda:1, whose peak is PyTorch's for that device.
  await page.click('[data-rank-row="1"]');
  await page.waitForSelector('[data-peak-bytes]', { timeout: 30000 }).catch(() => null);
  eq(Number(await attr('[data-peak-bytes]', 'data-peak-bytes')), golden('ddp_rank1', 'memoryviz.json').devices['1'].peak_active_bytes,
     'clicking the outlier opens its timeline on cuda:1 with PyTorch\'s peak');
  eq(await open(['ddp_rank0.pickle', 'ddp_rank0.pickle', 'ddp_rank1.pickle', 'ddp_rank0.pickle'], 'ranks'), 'ready', 'four ranks reach ready');
  eq((await rankRows()).map((r) => r[1]), [false, false, true, false], 'the outlier is marked in third place too');
  eq(await open(['ddp_rank1.pickle', 'ddp_rank1.pickle', 'ddp_rank1.pickle'], 'ranks'), 'ready', 'three equal ranks reach ready');
  eq(Number(await attr('[data-outliers]', 'data-outliers')), 0, 'equal ranks: no outlier');
  eq(await open(['ddp_rank0.pickle', 'ddp_rank1.pickle'], 'ranks'), 'ready', 'two ranks reach ready');
  ok(/three or more/.test(await page.textContent('[data-outliers]')), 'two ranks: says an outlier needs three or more');

  eq(watch.foreign, [], 'no request left the origin');
  eq(watch.errors, [], 'no console errors');
  await context.close();

  // Dark mode timeline for the docs.
  const dark = await watchedPage(browser, origin, null, 'dark');
  await dark.page.goto(`${origin}/app/?url=${encodeURIComponent('/fixtures/transformer_leak.pickle')}#view=timeline`);
  await waitState(dark.page, ['ready', 'error'], 60000);
  await dark.page.waitForTimeout(300);
  await dark.page.screenshot({ path: path.join(artifacts, 'timeline-dark.png') });
  await dark.context.close();
}

module.exports = { run };
