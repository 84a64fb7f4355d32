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
];

module.exports = { all, hasMethod };
