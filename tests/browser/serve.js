// A loopback-only static server for the browser tests: serves the assembled site and, under /fixtures/, the test
// snapshots (so ?url= can be tested), and records every request path.
'use strict';
const http = require('http');
const fs = require('fs');
const path = require('path');

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8', '.wasm': 'application/wasm', '.json': 'application/json', '.png': 'image/png',
  '.svg': 'image/svg+xml', '.pickle': 'application/octet-stream', '.gz': 'application/octet-stream',
};

function serve(roots, headers) {
  // roots: {urlPrefix: directory}, longest prefix wins; a key without a trailing slash maps that one path to a file
  // (the memory test swaps in the capped wasm build that way). headers: added to every file served (a host's
  // Content-Security-Policy).
  const prefixes = Object.keys(roots).sort((a, b) => b.length - a.length);
  const requests = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    requests.push(url.pathname);
    const prefix = prefixes.find((p) => (p.endsWith('/') ? url.pathname.startsWith(p) : url.pathname === p));
    let file = null;
    if (prefix && !prefix.endsWith('/')) file = path.resolve(roots[prefix]);
    else if (prefix) {
      let rel = decodeURIComponent(url.pathname.slice(prefix.length));
      if (rel === '' || rel.endsWith('/')) rel += 'index.html';
      file = path.resolve(roots[prefix], rel);
      if (!file.startsWith(path.resolve(roots[prefix]) + path.sep)) file = null;
    }
    if (!file || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found');
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] || 'application/octet-stream',
                         'cache-control': 'no-store', ...(headers || {}) });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    resolve({ server, requests, origin: `http://127.0.0.1:${server.address().port}` });
  }));
}

module.exports = { serve };
