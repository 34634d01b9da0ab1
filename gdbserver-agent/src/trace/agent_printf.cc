#include "trace/agent_printf.h"

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>

namespace gdbtrace {

Result<std::string> agent_printf(std::string_view fmt, std::span<const uint64_t> args,
                                 const std::function<Result<std::string>(uint64_t)>& read_string) {
  std::string out;
  size_t next_arg = 0;
  auto take_arg = [&](uint64_t& v) {
    if (next_arg >= args.size())
      return false;
    v = args[next_arg++];
    return true;
  };
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '%') {
      out.push_back('%');
      ++i;
      continue;
    }
    // One directive: flags, width, precision (no '*'), length, conversion.
    size_t start = i++;
    while (i < fmt.size() && std::string_view("-+ #0'").find(fmt[i]) != std::string_view::npos)
      ++i;
    while (i < fmt.size() && (std::isdigit(static_cast<unsigned char>(fmt[i])) || fmt[i] == '.'))
      ++i;
    std::string length;
    while (i < fmt.size() && std::string_view("hlLqjzt").find(fmt[i]) != std::string_view::npos)
      length.push_back(fmt[i++]);
    if (i >= fmt.size())
      return make_error(EINVAL, "printf format ends inside a directive");
    char conv = fmt[i];
    std::string spec(fmt.substr(start, i - start - length.size()));
    uint64_t v = 0;
    if (!take_arg(v))
      return make_error(EINVAL, "printf format wants more arguments than given");
    char buf[512];
    switch (conv) {
    case 'd':
    case 'i': {
      int64_t sv = int64_t(v);
      if (length.empty())
        sv = int32_t(v);
      else if (length == "h")
        sv = int16_t(v);
      else if (length == "hh")
        sv = int8_t(v);
      std::snprintf(buf, sizeof buf, (spec + PRId64).c_str(), sv);
      break;
    }
    case 'u':
    case 'x':
    case 'X':
    case 'o': {
      uint64_t uv = v;
      if (length.empty())
        uv = uint32_t(v);
      else if (length == "h")
        uv = uint16_t(v);
      else if (length == "hh")
        uv = uint8_t(v);
      const char* l = conv == 'u' ? PRIu64 : conv == 'x' ? PRIx64 : conv == 'X' ? PRIX64 : PRIo64;
      std::snprintf(buf, sizeof buf, (spec + l).c_str(), uv);
      break;
    }
    case 'c':
      std::snprintf(buf, sizeof buf, (spec + "c").c_str(), int(uint8_t(v)));
      break;
    case 'p':
      std::snprintf(buf, sizeof buf, (spec + "p").c_str(), reinterpret_cast<void*>(v));
      break;
    case 's': {
      auto s = read_string(v);
      if (!s)
        return s.error();
      std::snprintf(buf, sizeof buf, (spec + "s").c_str(), s->c_str());
      break;
    }
    default:
      return make_error(EINVAL, std::string("printf conversion %") + conv + " is not supported");
    }
    out += buf;
  }
  return out;
}

} // namespace gdbtrace
