// gzip in and out: zlib natively; in WebAssembly the browser inflates (DecompressionStream) before calling us.
#include <cstring>
#include <string>

#include "allocscope/loader.h"

#ifdef ALLOCSCOPE_HAVE_ZLIB
#include <zlib.h>
#endif

namespace allocscope {

#ifdef ALLOCSCOPE_HAVE_ZLIB

Result<std::vector<uint8_t>> gunzip(std::span<const uint8_t> in, uint64_t max_out,
                                    const std::function<void(uint64_t, uint64_t)>& progress) {
  // Size the output once from the gzip trailer (ISIZE: the inflated size mod 2^32) when it is plausible — deflate
  // cannot expand more than ~1032:1 — so a normal file inflates without regrowing and a bomb stops at max_out.
  uint64_t hint = std::max<uint64_t>(in.size() * 4, 1 << 16);
  if (in.size() >= 18) {
    uint32_t isize;
    std::memcpy(&isize, in.data() + in.size() - 4, 4);
    if (isize > 0 && isize <= in.size() * 1032ull) hint = isize;
  }
  std::vector<uint8_t> out;
  out.resize(std::min<uint64_t>(hint, max_out));
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return Error{"zlib could not start"};
  const uint8_t* next = in.data();
  uint64_t left = in.size();
  uint64_t produced = 0;
  uint64_t next_report = 8u << 20;
  for (;;) {
    const uInt chunk_in = static_cast<uInt>(std::min<uint64_t>(left, 1u << 30));
    z.next_in = const_cast<Bytef*>(next);
    z.avail_in = chunk_in;
    if (produced == out.size()) {
      if (out.size() >= max_out) {
        inflateEnd(&z);
        return Error{"inflated data exceeds " + std::to_string(max_out) + " bytes (limit; a gzip bomb?)",
                     static_cast<uint64_t>(next - in.data())};
      }
      out.resize(std::min<uint64_t>(out.size() + out.size() / 2 + (1 << 16), max_out));
    }
    z.next_out = out.data() + produced;
    z.avail_out = static_cast<uInt>(std::min<uint64_t>(out.size() - produced, 1u << 30));
    const uInt avail_out_before = z.avail_out;
    int rc = inflate(&z, Z_NO_FLUSH);
    produced += avail_out_before - z.avail_out;
    const uInt consumed = chunk_in - z.avail_in;
    next += consumed;
    left -= consumed;
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
    if (rc == Z_BUF_ERROR && left == 0) {
      inflateEnd(&z);
      return Error{"gzip data ends early (truncated .gz file)", in.size()};
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const std::string msg = z.msg ? z.msg : "error " + std::to_string(rc);
      inflateEnd(&z);
      return Error{"gzip data is corrupt: " + msg, static_cast<uint64_t>(next - in.data())};
    }
    if (rc == Z_BUF_ERROR && z.avail_out != 0 && consumed == 0) {
      inflateEnd(&z);
      return Error{"gzip data ends early (truncated .gz file)", in.size()};
    }
  }
  inflateEnd(&z);
  out.resize(produced);
  if (progress) progress(in.size(), in.size());
  return out;
}

Result<std::vector<uint8_t>> gzip(std::span<const uint8_t> in, int level) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return Error{"zlib could not start"};
  std::vector<uint8_t> out(deflateBound(&z, static_cast<uLong>(in.size())) + 64);
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return Error{"gzip compression failed"};
  return out;
}

#else

Result<std::vector<uint8_t>> gunzip(std::span<const uint8_t>, uint64_t, const std::function<void(uint64_t, uint64_t)>&) {
  return Error{"this is gzip data; this build has no zlib, so decompress it first (the viewer does it with the "
               "browser's DecompressionStream)",
               0};
}
Result<std::vector<uint8_t>> gzip(std::span<const uint8_t>, int) { return Error{"this build has no zlib"}; }

#endif

}  // namespace allocscope
