// SHA-256 and base64 for the self-contained report (CSP script hashes, embedded binaries).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace allocscope::cli {

std::string sha256_raw(std::string_view data);  // 32 raw bytes
std::string base64(std::string_view data);

}  // namespace allocscope::cli
