// gzip in and out: zlib natively; in WebAssembly the browser inflates (DecompressionStream) before calling us.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "allocscope/loader.h"

#ifdef ALLOCSCOPE_HAVE_ZLIB
#include <zlib.h>
#endif

namespace allocscope {

#ifdef ALLOCSCOPE_HAVE_ZLIB

namespace {
struct OutBuffer {
  explicit OutBuffer(size_t n) : p(new uint8_t[n]), n(n) {}
  uint8_t* data() { return p.get(); }
  size_t size() const { return n; }
  std::unique_ptr<uint8_t[]> p;
  size_t n;
};
}  // namespace

Status gunzip_chunks(std::span<const uint8_t> in, uint64_t max_out,
                     const std::function<Status(std::span<const uint8_t>)>& sink, size_t chunk,
                     const std::function<void(uint64_t, uint64_t)>& progress) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return Error{"zlib could not start"};
  // Ended on every way out, an exception from `sink` or `progress` included (the loader's reading thread carries
  // out-of-memory to the caller: ASan found zlib's state leaked).
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  // Never more buffer than the limit allows (a tiny max_out must not cost a 4 MB buffer), nor than the file needs:
  // the gzip trailer's ISIZE (the last member's inflated size mod 2^32) is only a hint, but a 150 KB rank file
  // inflated through a zeroed 4 MB buffer spent a fifth of `allocscope ranks` in memset and page faults.
  uint64_t want = std::max<size_t>(chunk, 4096);
  if (in.size() >= 18) {
    const uint8_t* t = in.data() + in.size() - 4;
    const uint64_t isize = t[0] | (uint64_t{t[1]} << 8) | (uint64_t{t[2]} << 16) | (uint64_t{t[3]} << 24);
    if (isize < want && in.size() < (1u << 30)) want = std::max<uint64_t>(isize + 1, 64u << 10);
  }
  // Not zeroed: zlib writes every byte before we read it.
  OutBuffer buf(std::clamp<uint64_t>(max_out + 1, 4096, want));
  const uint8_t* next = in.data();
  uint64_t left = in.size();
  uint64_t produced = 0;
  uint64_t next_report = 8u << 20;
  auto fail = [](Error e) { return Status(std::move(e)); };
  for (;;) {
    const uInt chunk_in = static_cast<uInt>(std::min<uint64_t>(left, 1u << 30));
    z.next_in = const_cast<Bytef*>(next);
    z.avail_in = chunk_in;
    z.next_out = buf.data();
    z.avail_out = static_cast<uInt>(buf.size());
    const int rc = inflate(&z, Z_NO_FLUSH);
    const size_t got = buf.size() - z.avail_out;
    const uInt consumed = chunk_in - z.avail_in;
    next += consumed;
    left -= consumed;
    if (got) {
      if (produced + got > max_out)
        return fail(Error{"inflated data exceeds " + std::to_string(max_out) + " bytes (limit; a gzip bomb?)",
                          static_cast<uint64_t>(next - in.data())});
      produced += got;
      Status st = sink({buf.data(), got});
      if (!st.ok()) return fail(st.error());
    }
    if (progress && produced >= next_report) {
      progress(in.size() - left, in.size());
      next_report = produced + (8u << 20);
    }
    if (rc == Z_STREAM_END) {
      // Concatenated members are legal gzip; trailing zero padding is tolerated.
      while (left && *next == 0) ++next, --left;
      if (!left) break;
      if (inflateReset(&z) != Z_OK) break;
      continue;
    }
    if (rc == Z_BUF_ERROR && left == 0 && got == 0)
      return fail(Error{"gzip data ends early (truncated .gz file)", in.size()});
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const std::string msg = z.msg ? z.msg : "error " + std::to_string(rc);
      return fail(Error{"gzip data is corrupt: " + msg, static_cast<uint64_t>(next - in.data())});
    }
    if (rc == Z_BUF_ERROR && got == 0 && consumed == 0)
      return fail(Error{"gzip data ends early (truncated .gz file)", in.size()});
  }
  if (progress) progress(in.size(), in.size());
  return {};
}

Result<std::vector<uint8_t>> gunzip(std::span<const uint8_t> in, uint64_t max_out,
                                    const std::function<void(uint64_t, uint64_t)>& progress) {
  // Size the output once from the gzip trailer (ISIZE: the inflated size mod 2^32), so a normal file inflates
  // without regrowing.
  std::vector<uint8_t> out;
  if (in.size() >= 18) {
    uint32_t isize;
    std::memcpy(&isize, in.data() + in.size() - 4, 4);
    // ISIZE is the file's claim, not a fact: trust it only up to 32x the compressed size (snapshots compress ~14x).
    if (isize > 0) out.reserve(std::min<uint64_t>({isize, max_out, in.size() * 32ull}));
  }
  Status st = gunzip_chunks(
      in, max_out,
      [&](std::span<const uint8_t> c) {
        // Grow at most to the limit (a vector's own doubling could allocate up to twice max_out).
        if (out.size() + c.size() > out.capacity())
          out.reserve(std::min<uint64_t>(max_out, std::max<uint64_t>(out.capacity() * 2, out.size() + c.size())));
        out.insert(out.end(), c.begin(), c.end());
        return Status{};
      },
      1u << 16, progress);
  if (!st.ok()) return st.error();
  return out;
}

Result<std::vector<uint8_t>> gzip(std::span<const uint8_t> in, int level) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return Error{"zlib could not start"};
  struct End {  // also when the buffer's allocation throws
    z_stream* z;
    ~End() { deflateEnd(z); }
  } end{&z};
  std::vector<uint8_t> out(deflateBound(&z, static_cast<uLong>(in.size())) + 64);
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  if (rc != Z_STREAM_END) return Error{"gzip compression failed"};
  return out;
}

#else

Status gunzip_chunks(std::span<const uint8_t>, uint64_t, const std::function<Status(std::span<const uint8_t>)>&, size_t,
                     const std::function<void(uint64_t, uint64_t)>&) {
  return Error{"this is gzip data; this build has no zlib, so decompress it first (the viewer does it with the "
               "browser's DecompressionStream)",
               0};
}

Result<std::vector<uint8_t>> gunzip(std::span<const uint8_t>, uint64_t, const std::function<void(uint64_t, uint64_t)>&) {
  return Error{"this is gzip data; this build has no zlib, so decompress it first (the viewer does it with the "
               "browser's DecompressionStream)",
               0};
}
Result<std::vector<uint8_t>> gzip(std::span<const uint8_t>, int) { return Error{"this build has no zlib"}; }

#endif

}  // namespace allocscope
