// Hex helpers for the Remote Serial Protocol (most payloads are hex text).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gdbtrace::rsp {

int hex_digit_value(char c); // -1 when C is not a hex digit
std::string to_hex(std::span<const uint8_t> bytes);
std::string to_hex(std::string_view bytes);
// Decodes an even-length hex string; nullopt on odd length or a non-hex char.
std::optional<std::string> from_hex(std::string_view hex);
// Parses a whole hex number (no sign, no prefix); nullopt when empty, not hex or overflowing.
std::optional<uint64_t> parse_hex_u64(std::string_view text);
// Lower-case hex without leading zeros ("0" for zero).
std::string hex_number(uint64_t value);

} // namespace gdbtrace::rsp
