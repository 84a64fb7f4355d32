// The viewer's byte sizes (web/format.js `bytes`) against Python's own formatting of the same value, the rule of
// PyTorch's _format_size and of the CLI's sizes: the exact binary value, a value exactly halfway rounded to even.
// JavaScript's toFixed rounds such ties up, so 12.25 MiB read "12.3 MiB" on the page and "12.2MiB" in the CLI.
// usage: node format_test.mjs WEB_DIR
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const { bytes } = await import(pathToFileURL(path.join(process.argv[2], 'format.js')).href);
const sizes = [12845056, 32000, 32768000, 1536, 2560, 3584, 10496, 1048064, 5 * 1024 ** 3 + 5 * 1024 ** 2];
let seed = 12345;
const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
for (let i = 0; i < 400; ++i) {
  const u = 1 + Math.floor(rand() * 3);
  // Many exact ties: a whole number of 1/256ths of the unit.
  sizes.push(rand() < 0.5 ? Math.floor(rand() * 200 * 1024 ** u) : Math.floor(rand() * 200 * 256) * 1024 ** u / 256);
}
const script = `import sys
for line in sys.stdin:
    n = int(line)
    u = 0
    v = float(n)
    while v >= 1024 and u < 8:
        v /= 1024
        u += 1
    d = 0 if v >= 100 else 1 if v >= 10 else 2
    print(str(n) if u == 0 else f"{v:.{d}f}")`;
const want = execFileSync('python3', ['-c', script], { input: sizes.join('\n') + '\n', encoding: 'utf8' }).trim().split('\n');
let failed = 0;
sizes.forEach((n, i) => {
  const got = bytes(n).split(' ')[0];
  if (got !== want[i]) { ++failed; if (failed < 10) console.log(`  FAIL ${n}: page ${got}, Python ${want[i]}`); }
});
console.log(`${sizes.length - failed} of ${sizes.length} sizes read as Python formats them`);
process.exit(failed ? 1 : 0);
