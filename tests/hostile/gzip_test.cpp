// gzip input: truncated, corrupted and bomb files. Inflating stops at max_out with an error naming the compressed
// offset, and what is allocated stays within a small multiple of that limit.
#include <algorithm>

#include "hostile.h"

namespace hostile {
namespace {

using allocscope::gunzip;
using allocscope::gzip;
using allocscope::LoadOptions;

Bytes zeros_gz(size_t n) {
  Bytes z(n, 0);
  auto g = gzip(z, 9);
  return g.ok() ? std::move(g).value() : Bytes{};
}

TEST(Gzip, TruncatedAtManyPoints) {
  Bytes gz = fixture_raw("gpt2_cpp.pickle.gz");
  ASSERT_GT(gz.size(), 1000u);
  for (size_t i = 0; i <= 300; ++i) {
    const size_t k = 2 + (gz.size() - 3) * i / 300;  // keep the magic so it is taken as gzip
    Bytes cut(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(k));
    Outcome o = load_metered(cut);
    const std::string what = "gz cut at " + std::to_string(k);
    expect_good_error(o, std::max<size_t>(cut.size(), 1 << 20), what);
    ASSERT_FALSE(o.ok) << what;
    EXPECT_NE(o.error.message.find("gzip"), std::string::npos) << what << ": " << o.error.describe();
    EXPECT_LE(o.error.offset, cut.size()) << what;
  }
}

TEST(Gzip, CorruptedBytes) {
  Bytes gz = fixture_raw("gpt2_cpp.pickle.gz");
  ASSERT_GT(gz.size(), 1000u);
  size_t loaded = 0;
  for (size_t i = 0; i < 300; ++i) {
    Bytes b = gz;
    const size_t pos = 2 + (i * 7919) % (b.size() - 2);
    b[pos] ^= static_cast<uint8_t>(1 + i % 255);
    Outcome o = load_metered(b);
    expect_good_error(o, std::max<size_t>(b.size(), 1 << 20), "gz byte " + std::to_string(pos));
    loaded += o.ok;
  }
  // Flips in the header's optional fields or mtime can still load; a flip in the data fails the CRC.
  EXPECT_LT(loaded, 150u);
}

TEST(Gzip, BombStopsAtTheLimit) {
  Bytes bomb = zeros_gz(size_t{256} << 20);  // 256 MiB of zeros in ~250 KB
  ASSERT_FALSE(bomb.empty());
  EXPECT_LT(bomb.size(), size_t{1} << 20);
  for (uint64_t max_out : {uint64_t{0}, uint64_t{1}, uint64_t{4096}, uint64_t{1} << 20, uint64_t{8} << 20}) {
    Meter m(int64_t{64} << 20);
    auto r = gunzip(bomb, max_out);
    ASSERT_FALSE(r.ok()) << max_out;
    EXPECT_NE(r.error().message.find("exceeds"), std::string::npos) << r.error().describe();
    EXPECT_LE(r.error().offset, bomb.size());
    // The output buffer never grows past the limit: at most the old and the new buffer while it grows.
    EXPECT_LE(m.peak_bytes(), 2 * static_cast<int64_t>(max_out) + (1 << 17)) << max_out;
  }
  LoadOptions opt;
  opt.max_inflated_bytes = 1 << 20;
  Outcome o = load_metered(bomb, opt, int64_t{8} << 20);
  ASSERT_FALSE(o.ok);
  EXPECT_FALSE(o.over_budget);
  EXPECT_NE(o.error.message.find("gzip bomb"), std::string::npos) << o.error.describe();
}

TEST(Gzip, ConcatenatedBombMembers) {
  Bytes one = zeros_gz(size_t{4} << 20);
  Bytes many;
  for (int i = 0; i < 64; ++i) many.insert(many.end(), one.begin(), one.end());  // 256 MiB over 64 members
  Meter m(int64_t{64} << 20);
  auto r = gunzip(many, uint64_t{16} << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("exceeds"), std::string::npos);
  EXPECT_LE(m.peak_bytes(), int64_t{33} << 20);
}

// With the default limits (16 GiB inflated) a bomb of 64 MiB of zeros is inflated before the pickle fails at byte 0:
// memory follows the inflated size (or the streaming buffer), never more. The peak is printed for docs/reliability.md.
TEST(Gzip, DefaultLimitsBoundABomb) {
  Bytes bomb = zeros_gz(size_t{64} << 20);
  Outcome o = load_metered(bomb, {}, int64_t{512} << 20);
  ASSERT_FALSE(o.ok);
  EXPECT_FALSE(o.over_budget);
  EXPECT_LE(o.peak_bytes, int64_t{200} << 20);
  std::printf("default limits: %zu-byte gzip -> peak %lld bytes before the pickle error '%s'\n", bomb.size(),
              static_cast<long long>(o.peak_bytes), o.error.describe().c_str());
}

// The gzip trailer's ISIZE is the attacker's to choose: output sized from it must not be allocated before the data
// proves it (a 1 MB file claiming 1 GB).
TEST(Gzip, LyingSizeTrailerDoesNotPreallocate) {
  Bytes data(size_t{1} << 20);
  uint64_t x = 88172645463325252ULL;
  for (auto& b : data) x ^= x << 13, x ^= x >> 7, x ^= x << 17, b = static_cast<uint8_t>(x);  // incompressible
  Bytes gz = gzip(data, 1).value();
  const uint32_t claim = static_cast<uint32_t>(std::min<uint64_t>(gz.size() * 1000, 0xffffffffu));
  std::memcpy(gz.data() + gz.size() - 4, &claim, 4);
  {
    Meter m(int64_t{256} << 20);
    bool over = false;
    try {
      auto r = gunzip(gz);
      EXPECT_FALSE(r.ok());  // the length check fails at the end
    } catch (const std::bad_alloc&) {
      over = true;
    }
    EXPECT_FALSE(over) << "gunzip allocated more than 256 MiB for a " << gz.size() << "-byte file claiming " << claim;
    EXPECT_LT(m.peak_bytes(), int64_t{64} << 20);
  }
  Outcome o = load_metered(gz, {}, int64_t{256} << 20);
  expect_good_error(o, gz.size(), "lying ISIZE");
  EXPECT_LT(o.peak_bytes, int64_t{64} << 20);
}

TEST(Gzip, OddButValidShapes) {
  // A gzip of nothing is an empty file; trailing zeros after a member are tolerated; trailing junk is corrupt.
  Bytes empty = gzip(Bytes{}).value();
  Outcome e = load_metered(empty);
  ASSERT_FALSE(e.ok);
  EXPECT_NE(e.error.message.find("empty"), std::string::npos) << e.error.describe();

  Bytes pickle = P(2).dict().str("segments").list().setitem().done();  // {'segments': []}
  Bytes gz = gzip(pickle).value();
  Bytes padded = gz;
  padded.insert(padded.end(), 1000, 0);
  EXPECT_TRUE(load_metered(padded).ok);
  Bytes junk = gz;
  for (int i = 0; i < 100; ++i) junk.push_back(static_cast<uint8_t>(i + 1));
  Outcome j = load_metered(junk);
  expect_good_error(j, junk.size(), "trailing junk");
  EXPECT_FALSE(j.ok);
  Bytes header_only(gz.begin(), gz.begin() + 10);
  Outcome h = load_metered(header_only);
  EXPECT_FALSE(h.ok);
  expect_good_error(h, header_only.size(), "header only");
  Bytes magic_only = {0x1f, 0x8b};
  Outcome mo = load_metered(magic_only);
  EXPECT_FALSE(mo.ok);
  expect_good_error(mo, magic_only.size(), "magic only");
}

}  // namespace
}  // namespace hostile
