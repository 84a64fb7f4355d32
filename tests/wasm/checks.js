// The golden checks shared by the node test and the bad-input test: each compares one method's answer with a file
// in tests/fixtures/expected.
'use strict';

function hasMethod(engine, name) {
  try { engine.call({ method: name, id: 0 }); return true; } catch (e) { return !/unknown method/.test(e.message); }
}

const all = [
  {
    name: 'facts equal PyTorch facts.json',
    golden: 'facts.json',
    run(engine, id, expected, assert) {
      assert.deepStrictEqual(engine.call({ method: 'facts', id }).body, expected);
    },
  },
  {
    // PyTorch's viewer only offers devices with events; each must agree on allocations, peak, final and every
    // distinct total (for the 1M-event file only their count was recorded).
    name: 'Active Memory Timeline numbers equal PyTorch memoryviz.json',
    golden: 'memoryviz.json',
    available: (engine) => hasMethod(engine, 'memoryviz'),
    run(engine, id, expected, assert) {
      for (const [device, want] of Object.entries(expected.devices)) {
        const withTotals = Array.isArray(want.distinct_totals);
        const { body, blobs } = engine.call({ method: 'memoryviz', id, device: Number(device), with_totals: withTotals });
        assert.strictEqual(body.allocations, want.allocations, `device ${device} allocations`);
        assert.strictEqual(body.peak_active_bytes, want.peak_active_bytes, `device ${device} peak`);
        assert.strictEqual(body.final_active_bytes, want.final_active_bytes, `device ${device} final`);
        if (withTotals) assert.deepStrictEqual(Array.from(blobs.distinct_totals), want.distinct_totals, `device ${device} totals`);
        else assert.strictEqual(body.distinct_totals_count, want.distinct_totals_count, `device ${device} totals count`);
      }
    },
  },
  {
    // The draw query keeps the envelope exact: at any pixel width its highest column is PyTorch's peak, and the
    // state it shows there is the peak step.
    name: 'timeline_draw envelope reaches PyTorch\'s peak at 1000 and 37 px',
    golden: 'memoryviz.json',
    available: (engine) => hasMethod(engine, 'timeline_draw'),
    run(engine, id, expected, assert) {
      for (const [device, want] of Object.entries(expected.devices)) {
        const steps = engine.call({ method: 'axis', id, device: Number(device) }).body.step_count;
        for (const width of [1000, 37]) {
          const { body, blobs } = engine.call({ method: 'timeline_draw', id, device: Number(device), x0: 0, x1: steps, width, height: 400 });
          assert.strictEqual(Math.max(...blobs.column_total), want.peak_active_bytes, `device ${device} width ${width}`);
          assert.strictEqual(body.peak_bytes, want.peak_active_bytes, `device ${device} peak_bytes`);
          assert.ok(body.rects > 0 && blobs.x0.length === body.rects, 'rectangles come back as typed arrays');
          // Columns go out as 16 bits and counts as 8 (saturated): every rectangle still lies inside the width, and
          // one run of several allocations still reads as more than one.
          for (let i = 0; i < body.rects; ++i)
            assert.ok(blobs.x0[i] < blobs.x1[i] && blobs.x1[i] <= width && blobs.count[i] >= 1, `rectangle ${i} at width ${width}`);
        }
      }
    },
  },
];

module.exports = { all, hasMethod };
