#include "rsp/hex.h"

namespace gdbtrace::rsp {

int hex_digit_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

std::string to_hex(std::span<const uint8_t> bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

std::string to_hex(std::string_view bytes) {
  return to_hex(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0)
    return std::nullopt;
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = hex_digit_value(hex[i]), lo = hex_digit_value(hex[i + 1]);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

std::optional<uint64_t> parse_hex_u64(std::string_view text) {
  if (text.empty() || text.size() > 16)
    return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    int d = hex_digit_value(c);
    if (d < 0)
      return std::nullopt;
    value = value * 16 + static_cast<uint64_t>(d);
  }
  return value;
}

std::string hex_number(uint64_t value) {
  static const char digits[] = "0123456789abcdef";
  if (value == 0)
    return "0";
  std::string out;
  while (value) {
    out.insert(out.begin(), digits[value & 15]);
    value >>= 4;
  }
  return out;
}

} // namespace gdbtrace::rsp
