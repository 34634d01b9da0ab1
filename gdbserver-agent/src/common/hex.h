// Hex text, the one library for it: the RSP's hex payloads and varlen-hex
// numbers, hex-encoded strings in tracepoint packets and tfile headers.
// Header-only so every room (rsp/, server/, trace/, collectors) can use it
// without a link dependency.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gdbtrace::hex {

// -1 when C is not a hex digit.
inline int digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

// Consumes hex digits from the front of S. False when there is none (or more
// than 16, which would overflow a u64).
inline bool take_u64(std::string_view& s, uint64_t& out) {
  size_t n = 0;
  uint64_t v = 0;
  while (n < s.size() && digit(s[n]) >= 0) {
    if (n == 16)
      return false;
    v = (v << 4) | uint64_t(digit(s[n]));
    ++n;
  }
  if (n == 0)
    return false;
  s.remove_prefix(n);
  out = v;
  return true;
}

// A whole hex number (no sign, no prefix); nullopt when empty, not hex or overflowing.
inline std::optional<uint64_t> parse_u64(std::string_view text) {
  uint64_t v = 0;
  if (!take_u64(text, v) || !text.empty())
    return std::nullopt;
  return v;
}

// Consumes C from the front of S.
inline bool take_char(std::string_view& s, char c) {
  if (s.empty() || s.front() != c)
    return false;
  s.remove_prefix(1);
  return true;
}

// Consumes PREFIX from the front of S.
inline bool take_prefix(std::string_view& s, std::string_view prefix) {
  if (!s.starts_with(prefix))
    return false;
  s.remove_prefix(prefix.size());
  return true;
}

// Decodes an even-length hex string; false on odd length or a non-hex digit.
inline bool decode(std::string_view s, std::vector<uint8_t>& out) {
  if (s.size() % 2)
    return false;
  out.clear();
  out.reserve(s.size() / 2);
  for (size_t i = 0; i < s.size(); i += 2) {
    int hi = digit(s[i]), lo = digit(s[i + 1]);
    if (hi < 0 || lo < 0)
      return false;
    out.push_back(uint8_t(hi << 4 | lo));
  }
  return true;
}

inline bool decode_string(std::string_view s, std::string& out) {
  std::vector<uint8_t> bytes;
  if (!decode(s, bytes))
    return false;
  out.assign(bytes.begin(), bytes.end());
  return true;
}

// The bytes of an even-length hex string; nullopt on odd length or a non-hex char.
inline std::optional<std::string> decode_string(std::string_view s) {
  std::string out;
  if (!decode_string(s, out))
    return std::nullopt;
  return out;
}

inline std::string encode(const void* data, size_t len) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < len; ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 15]);
  }
  return out;
}

inline std::string encode(std::string_view s) {
  return encode(s.data(), s.size());
}

inline std::string encode(std::span<const uint8_t> bytes) {
  return encode(bytes.data(), bytes.size());
}

// Lower-case hex without leading zeros ("0" for zero), like gdb's phex_nz.
inline std::string u64(uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  char buf[17];
  int n = 0;
  do {
    buf[n++] = digits[v & 15];
    v >>= 4;
  } while (v);
  std::string out;
  while (n)
    out.push_back(buf[--n]);
  return out;
}

} // namespace gdbtrace::hex
