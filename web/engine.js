// The JS half of the bridge, shared by the Web Worker (importScripts) and the node tests (require): streams a file
// (inflating gzip by its magic bytes with DecompressionStream) into the wasm core, runs methods and turns answer
// blobs into typed arrays. Nothing here touches the DOM.
(function (root) {
  'use strict';

  const TYPES = { u8: Uint8Array, u32: Uint32Array, i32: Int32Array, f32: Float32Array, f64: Float64Array };

  function isGzip(head) { return head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b; }

  // Opens a Blob/File (or bytes) as a stream of raw pickle chunks, inflating gzip (by its magic bytes) on the way.
  // progress(phase, done, total) counts the file's bytes. Returns {gz, total, next}: next() resolves to the next chunk
  // or null at the end, and turns an inflate failure into a message that says so.
  async function openChunks(source, progress, phase) {
    const blob = source instanceof Uint8Array ? new Blob([source]) : source;
    const total = blob.size;
    const head = new Uint8Array(await blob.slice(0, 2).arrayBuffer());
    const gz = isGzip(head);
    const name = phase || (gz ? 'inflate' : 'read');
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
        if (gz) throw new Error(`the file starts like gzip but does not inflate (${e && e.message ? e.message : e}); ` +
                                `after ${read} of ${total} compressed bytes`);
        throw e;
      }
    }
    return { blob, gz, total, next, cancel: () => reader.cancel().catch(() => {}) };
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

  class Engine {
    constructor(module) { this.m = module; }

    // Reads a Blob/File (or bytes), inflating gzip by its magic bytes, and feeds the core chunk by chunk as the
    // browser produces them: the wasm heap never holds the whole file, only the model being built. progress(phase,
    // done, total) counts the file's bytes. Returns the file id or throws Error(message).
    async loadStream(source, name, progress) {
      const m = this.m;
      const input = await openChunks(source, progress, 'load');
      if (input.total === 0) throw new Error('the file is empty');
      m._as_stream_begin(await sizeHint(input.blob, input.gz));
      let buf = 0;
      let cap = 0;
      let fed = 0;
      try {
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
        }
      } catch (e) {
        input.cancel();
        throw e;
      } finally {
        if (buf) m._as_free(buf);
      }
      if (fed === 0) throw new Error('the file is empty');
      const nameBytes = m.lengthBytesUTF8(name) + 1;
      const namePtr = m._as_malloc(nameBytes);
      m.stringToUTF8(name, namePtr, nameBytes);
      const id = m._as_stream_end(namePtr);
      m._as_free(namePtr);
      if (!id) throw new Error(m.UTF8ToString(m._as_error()));
      return id;
    }

    // Copies the chunks into the wasm heap and parses them; returns the file id or throws Error(message).
    load(chunks, length, name) {
      const m = this.m;
      const ptr = m._as_malloc(length);
      if (!ptr) throw new Error(`not enough memory for ${length} bytes`);
      let at = ptr;
      for (const c of chunks) { m.HEAPU8.set(c, at); at += c.byteLength; }
      const nameBytes = m.lengthBytesUTF8(name) + 1;
      const namePtr = m._as_malloc(nameBytes);
      m.stringToUTF8(name, namePtr, nameBytes);
      const id = m._as_load(ptr, length, namePtr);  // frees ptr
      m._as_free(namePtr);
      if (!id) throw new Error(m.UTF8ToString(m._as_error()));
      return id;
    }

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
