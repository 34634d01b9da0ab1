// Hex helpers for tracepoint packets (the RSP's varlen-hex numbers and
// hex-encoded strings), kept local so the trace engine does not depend on the
// packet codec.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gdbtrace::hex {

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

// Consumes C from the front of S.
inline bool take_char(std::string_view& s, char c) {
  if (s.empty() || s.front() != c)
    return false;
  s.remove_prefix(1);
  return true;
}

inline bool take_prefix(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix)
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

// Exactly 16 digits, like gdb's phex (v, 8) (addresses in uploads).
inline std::string u64_padded(uint64_t v) {
  std::string s = u64(v);
  return std::string(16 - s.size(), '0') + s;
}

} // namespace gdbtrace::hex
