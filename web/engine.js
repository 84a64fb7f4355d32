// The JS half of the bridge, shared by the Web Worker (importScripts) and the node tests (require): streams a file
// (inflating gzip by its magic bytes with DecompressionStream) into the wasm core, runs methods and turns answer
// blobs into typed arrays. Nothing here touches the DOM.
(function (root) {
  'use strict';

  const TYPES = { u8: Uint8Array, u16: Uint16Array, u32: Uint32Array, i32: Int32Array, f32: Float32Array, f64: Float64Array };

  function isGzip(head) { return head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b; }

  function inflateError(e, read, total) {
    return new Error(`the file starts like gzip but does not inflate (${e && e.message ? e.message : e}); ` +
                     `after ${read} of ${total} compressed bytes`);
  }

  // The inflater's worker: reads the Blob through DecompressionStream and posts the inflated bytes back in batches of
  // about 1 MiB, at most `window` batches ahead of the engine (which sends 'more' as it parses them), so memory stays
  // bounded however fast inflate runs. Built from this function's source (no second script: the offline report is
  // one HTML file).
  function inflaterMain() {
    const BATCH = 1 << 20;
    let credit = 0;
    let wake = null;
    self.onmessage = async (event) => {
      const msg = event.data;
      if (msg.op === 'more') {
        credit += msg.n;
        if (wake) { const w = wake; wake = null; w(); }
        return;
      }
      if (msg.op !== 'start') return;
      credit = msg.window;
      let read = 0;
      let parts = [];
      let size = 0;
      const flush = async () => {
        if (size === 0) return;
        while (credit <= 0) await new Promise((resolve) => { wake = resolve; });
        --credit;
        // The inflated chunks go as they are, their buffers moved, not copied (a copy here cost more than it saved).
        const transfer = [...new Set(parts.map((p) => p.buffer))];
        self.postMessage({ op: 'chunk', parts, read }, transfer);
        parts = [];
        size = 0;
      };
      try {  // everything, the stream's setup included: a failure must reach the engine, never leave it waiting
        const counter = new TransformStream({ transform(chunk, c) { read += chunk.byteLength; c.enqueue(chunk); } });
        const reader = msg.blob.stream().pipeThrough(counter).pipeThrough(new DecompressionStream('gzip')).getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          parts.push(value);
          size += value.byteLength;
          if (size >= BATCH) await flush();
        }
        await flush();
        self.postMessage({ op: 'end', read });
      } catch (e) {
        self.postMessage({ op: 'error', message: e && e.message ? e.message : String(e), read });
      }
    };
  }

  // Whether gzip inflates on a worker of its own: only inside a worker (the engine's), where the parse would otherwise
  // wait for each inflated chunk and inflate for each parse; on the page's thread and under node it stays inline.
  // self.allocscopeInflateInline = true turns it off (the benchmark compares both in one run).
  function canInflateOffThread() {
    return typeof importScripts === 'function' && typeof Worker === 'function' &&
           typeof DecompressionStream === 'function' && !(typeof self !== 'undefined' && self.allocscopeInflateInline);
  }

  // The same {next, cancel} as openChunks' inline stream, fed by the inflater's worker. Returns null when the worker
  // cannot be made (a policy that forbids blob: workers): the caller inflates inline then.
  function inflateOffThread(blob, total, progress, name) {
    let worker;
    const url = URL.createObjectURL(new Blob([`(${inflaterMain.toString()})()`], { type: 'text/javascript' }));
    try {
      worker = new Worker(url);
    } catch (e) {
      URL.revokeObjectURL(url);
      return null;
    }
    const queue = [];  // messages not yet taken by next()
    let waiting = null;
    let lastReport = 0;
    let finished = false;
    const stop = () => {
      if (finished) return;
      finished = true;
      worker.terminate();
      URL.revokeObjectURL(url);
      // A next() still waiting ends as the stream would (cancelled: nothing more comes).
      if (waiting) { const w = waiting; waiting = null; w({ op: 'end' }); }
    };
    const push = (msg) => {
      if (waiting) { const w = waiting; waiting = null; w(msg); } else queue.push(msg);
    };
    worker.onmessage = (event) => push(event.data);
    worker.onerror = (event) => {
      event.preventDefault();
      push({ op: 'failed', message: event.message || 'the inflater worker failed to start' });
    };
    worker.postMessage({ op: 'start', blob, window: 32 });
    let parts = [];  // the chunks of the batch being handed out
    async function next() {
      if (parts.length) return parts.shift();
      if (finished && !queue.length) return null;  // after the end, an error or cancel(), as the inline stream does
      const msg = queue.length ? queue.shift() : await new Promise((resolve) => { waiting = resolve; });
      if (msg.op === 'chunk') {
        if (progress && (msg.read - lastReport > (1 << 22) || msg.read === total)) {
          lastReport = msg.read;
          progress(name, msg.read, total);
        }
        worker.postMessage({ op: 'more', n: 1 });
        parts = msg.parts;
        return parts.shift();
      }
      stop();
      if (msg.op === 'end') {
        if (progress && lastReport !== total) progress(name, total, total);
        return null;
      }
      if (msg.op === 'failed') throw Object.assign(new Error(msg.message), { workerFailed: true });
      throw inflateError(msg.message, msg.read, total);
    }
    return { next, cancel: stop };
  }

  // An inflater worker that fails before its first chunk (a browser or policy that will not start it) is replaced by
  // the inline stream; after a chunk, its failure is the file's.
  function withInlineFallback(off, openInline, blob, gz, total) {
    let source = off;
    let started = false;
    async function next() {
      try {
        const chunk = await source.next();
        started = true;
        return chunk;
      } catch (e) {
        if (started || !e.workerFailed) throw e;
        started = true;
        source = await openInline();
        return source.next();
      }
    }
    return { blob, gz, total, next, where: () => (source === off ? 'worker' : source.where()), cancel: () => source.cancel() };
  }

  // Opens a Blob/File (or bytes) as a stream of raw pickle chunks, inflating gzip (by its magic bytes) on the way.
  // progress(phase, done, total) counts the file's bytes. Returns {gz, total, next}: next() resolves to the next chunk
  // or null at the end, and turns an inflate failure into a message that says so.
  async function openChunks(source, progress, phase, inline) {
    const blob = source instanceof Uint8Array ? new Blob([source]) : source;
    const total = blob.size;
    const head = new Uint8Array(await blob.slice(0, 2).arrayBuffer());
    const gz = isGzip(head);
    const name = phase || (gz ? 'inflate' : 'read');
    if (gz && !inline && canInflateOffThread()) {
      const off = inflateOffThread(blob, total, progress, name);
      if (off) return withInlineFallback(off, () => openChunks(source, progress, phase, true), blob, gz, total);
    }
    const where = gz ? 'inline' : 'none';
    let read = 0;
    let lastReport = 0;
    const counter = new TransformStream({
      transform(chunk, controller) {
        read += chunk.byteLength;
        if (progress && (read - lastReport > (1 << 22) || read === total)) {
          lastReport = read;
          progress(name, read, total);
        }
        controller.enqueue(chunk);
      },
    });
    let stream = blob.stream().pipeThrough(counter);
    if (gz) {
      if (typeof DecompressionStream === 'undefined')
        throw new Error('this browser cannot decompress gzip (no DecompressionStream); gunzip the file first');
      stream = stream.pipeThrough(new DecompressionStream('gzip'));
    }
    const reader = stream.getReader();
    async function next() {
      try {
        const { done, value } = await reader.read();
        return done ? null : value;
      } catch (e) {
        if (gz) throw inflateError(e, read, total);
        throw e;
      }
    }
    return { blob, gz, total, next, where: () => where, cancel: () => reader.cancel().catch(() => {}) };
  }

  // Reads a Blob/File (or bytes) fully (gzip inflated). Returns the chunks and their total length, so a caller that
  // needs one buffer copies once. The page streams instead (Engine.loadStream); tests use this to compare.
  async function readChunks(source, progress) {
    const input = await openChunks(source, progress);
    const chunks = [];
    let length = 0;
    for (let c; (c = await input.next()) !== null;) {
      chunks.push(c);
      length += c.byteLength;
    }
    return { chunks, length, gzip: input.gz, fileBytes: input.total };
  }

  // The inflated size a gzip file claims in its trailer (mod 2^32), trusted up to 32x the compressed size; it only
  // sizes buffers in the core.
  async function sizeHint(blob, gz) {
    if (!gz || blob.size < 18) return blob.size;
    const tail = new DataView(await blob.slice(blob.size - 4).arrayBuffer());
    return Math.min(tail.getUint32(0, true) || blob.size * 4, blob.size * 32);
  }

  // How often a streamed load hands its first picture to the page (each costs the new rows' scan and ~20 KB of JSON).
  const PREVIEW_MS = 100;
  // The warm-up's feeds: one per task, so a file dropped meanwhile waits at most one feed.
  const WARM_FEED = 1 << 20;

  class Engine {
    constructor(module) { this.m = module; }

    // Reads a Blob/File (or bytes), inflating gzip by its magic bytes, and feeds the core chunk by chunk as the
    // browser produces them: the wasm heap never holds the whole file, only the model being built. progress(phase,
    // done, total) counts the file's bytes. onPreview(curve), when given, gets the memory curve of the trace rows
    // parsed so far (as_stream_preview) every PREVIEW_MS while the file streams in, and once more when it is all
    // read, before the model is finished: the page's first picture. window: {from, to} (texts as the CLI's --from and
    // --to, either may be empty) loads only that window of each device's trace; a window that does not parse throws.
    // Returns the file id or throws Error(message).
    async loadStream(source, name, progress, onPreview, window) {
      const m = this.m;
      const input = await openChunks(source, progress, 'load');
      let buf = 0;
      let cap = 0;
      let fed = 0;
      try {  // from here on, any failure cancels the input (and so stops the inflater's worker)
        if (input.total === 0) throw new Error('the file is empty');
        const hint = await sizeHint(input.blob, input.gz);
        this.withName(window && window.from ? String(window.from) : '', (fromPtr) =>
          this.withName(window && window.to ? String(window.to) : '', (toPtr) =>
            m._as_stream_begin(hint, input.gz ? 1 : 0, fromPtr, toPtr)));
        let lastPreview = performance.now();
        const preview = (total) => Object.assign(JSON.parse(m.UTF8ToString(m._as_stream_preview())), { total });
        for (let value; (value = await input.next()) !== null;) {
          if (value.byteLength > cap) {
            if (buf) m._as_free(buf);
            cap = Math.max(value.byteLength, 1 << 16);
            buf = m._as_malloc(cap);
            if (!buf) throw new Error(`not enough memory for a ${cap}-byte chunk`);
          }
          m.HEAPU8.set(value, buf);  // HEAPU8 is re-read each time: the heap may have grown during the last feed
          if (!m._as_stream_feed(buf, value.byteLength)) throw new Error(m.UTF8ToString(m._as_error()));
          fed += value.byteLength;
          if (onPreview && performance.now() - lastPreview >= PREVIEW_MS) {
            lastPreview = performance.now();
            onPreview(preview(hint));
          }
        }
        if (onPreview && fed) onPreview(Object.assign(preview(hint), { complete: true }));
      } catch (e) {
        input.cancel();
        throw e;
      } finally {
        if (buf) m._as_free(buf);
      }
      if (fed === 0) throw new Error('the file is empty');
      this.lastInflate = input.where();  // 'worker', 'inline' or 'none': the browser test checks the viewer's way
      return this.withName(name, (namePtr) => m._as_stream_end(namePtr));
    }

    // Copies the chunks into the wasm heap and parses them; returns the file id or throws Error(message).
    // `inflated`: the chunks are a .gz's inflated bytes (error offsets then say so).
    load(chunks, length, name, inflated = false) {
      const m = this.m;
      const ptr = m._as_malloc(length);
      if (!ptr) throw new Error(`not enough memory for ${length} bytes`);
      let at = ptr;
      for (const c of chunks) { m.HEAPU8.set(c, at); at += c.byteLength; }
      return this.withName(name, (namePtr) => m._as_load(ptr, length, namePtr, inflated ? 1 : 0));  // frees ptr
    }

    // Runs a made-up snapshot (wasm/warm_up.cpp says why) through the streamed load and the first view's answers
    // `rounds` times while the page waits for a file, one 1 MiB feed per task, so that V8 has optimised that code when
    // the user's file comes. A small snapshot loaded again and again warms as much as a big one and keeps the heap
    // small (~6 MB of pickle and ~3 MB of model at a time). Stops at the first pause after isCancelled() turns true (a
    // real load began: its as_stream_begin replaced this stream). Returns {ms, rows, rounds} or null when it stopped.
    async warmUp(isCancelled, allocations = 20000, rounds = 4) {
      const m = this.m;
      const t0 = performance.now();
      const pause = () => new Promise((resolve) => setTimeout(resolve, 0));
      const size = m._as_warm_up_pickle(allocations);
      const data = m._as_warm_up_data();  // the heap may grow, but wasm addresses never move
      let rows = 0;
      try {
        for (let round = 0; round < rounds; ++round) {
          await pause();
          if (isCancelled()) return null;
          m._as_stream_begin(size, 0, 0, 0);
          for (let at = 0; at < size; at += WARM_FEED) {
            if (!m._as_stream_feed(data + at, Math.min(WARM_FEED, size - at))) throw new Error(m.UTF8ToString(m._as_error()));
            m._as_stream_preview();
            await pause();
            if (isCancelled()) return null;
          }
          const id = this.withName('warm-up', (namePtr) => m._as_stream_end(namePtr));
          try {
            const info = this.call({ method: 'info', id }).body;
            const steps = this.call({ method: 'axis', id, device: 0 }).body.step_count;
            this.call({ method: 'timeline_draw', id, device: 0, x0: 0, x1: steps, width: 1200, height: 600 });
            this.call({ method: 'memoryviz', id, device: 0, with_totals: false });
            rows += info.facts.trace_events_per_device[0];
          } finally {
            this.unload(id);
          }
        }
        return { ms: performance.now() - t0, rows, rounds, bytes: size };
      } finally {
        m._as_warm_up_free();
      }
    }

    // Calls make(namePtr) with `name` in the heap for the call's length, for the exports that take a text (the file's
    // name, a window's ends); returns what it gives (a file id), or throws the core's reason when it gives 0.
    withName(name, make) {
      const m = this.m;
      const bytes = m.lengthBytesUTF8(name) + 1;
      const namePtr = m._as_malloc(bytes);
      m.stringToUTF8(name, namePtr, bytes);
      let id;
      try { id = make(namePtr); } finally { m._as_free(namePtr); }
      if (!id) throw new Error(m.UTF8ToString(m._as_error()));
      return id;
    }

    // Opens file `id`'s pinned host memory as a file of its own; returns its id, or 0 when the file holds none.
    openHost(id) { return this.m._as_open_host(id); }

    unload(id) { this.m._as_unload(id); }

    // Runs a method; returns {body, blobs: {name: TypedArray}} (typed arrays are copies, safe to transfer).
    call(request) {
      const m = this.m;
      const text = JSON.stringify(request);
      const n = m.lengthBytesUTF8(text) + 1;
      const p = m._as_malloc(n);
      m.stringToUTF8(text, p, n);
      const out = m._as_call(p);
      m._as_free(p);
      const body = JSON.parse(m.UTF8ToString(out));
      const blobs = {};
      (body._blobs || []).forEach((b, i) => {
        const ptr = m._as_blob_ptr(i);
        const size = m._as_blob_size(i);
        const T = TYPES[b.type] || Uint8Array;
        blobs[b.name] = new T(m.HEAPU8.slice(ptr, ptr + size).buffer);
      });
      delete body._blobs;
      if (body.error) throw new Error(body.error);
      return { body, blobs };
    }
  }

  // Instantiates the wasm module. `wasmBinary` (bytes) is required under node (TOOLCHAIN.md: fetch on paths fails).
  async function openEngine(factory, options) {
    const m = await factory(options || {});
    return new Engine(m);
  }

  const api = { isGzip, readChunks, openEngine, Engine };
  if (typeof module === 'object' && module.exports) module.exports = api;
  else root.AllocscopeEngine = api;
})(typeof self !== 'undefined' ? self : this);
