/*
 * Agent printf: format checking (for the verifier) and a bounded formatter
 * (for whoever prints: the server, the kernel module). Freestanding: no libc
 * printf, no allocation; every loop is bounded by the format length, the
 * clamped width/precision or AX_FORMAT_MAX_STR.
 *
 * The accepted language is what gdbserver's ax_printf accepts via gdb's
 * format_pieces (gdbsupport/format.cc, gdb_extensions = false): backslash
 * escapes are processed here because gdb sends the text between the quotes
 * of `dprintf` raw, then C89 conversions d i u o x X c s (and p, which
 * gdbserver refuses but glibc prints as 0x... / (nil)) with flags, width,
 * precision and the length modifiers h l ll z. Floating point, wide
 * characters, `*` widths and %n are rejected.
 */
#include "ax/ax.h"

/* Width and precision above this are clamped (the output is bounded anyway). */
#define AX_FORMAT_MAX_FIELD 4096u

enum fmt_len { LEN_INT, LEN_SHORT, LEN_LONG, LEN_LONG_LONG, LEN_SIZE_T };

struct fmt_spec {
  uint8_t minus, plus, space, hash, zero;
  uint8_t has_prec;
  uint8_t len; /* enum fmt_len */
  char conv;
  uint32_t width, prec;
};

enum piece_kind { PIECE_END, PIECE_CHAR, PIECE_CONV };

struct fmt_cursor {
  const char* fmt;
  uint32_t n; /* characters before the terminating NUL */
  uint32_t pos;
};

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

/* Digits at the cursor, clamped to AX_FORMAT_MAX_FIELD. */
static uint32_t read_number(struct fmt_cursor* c) {
  uint32_t v = 0;
  while (c->pos < c->n && is_digit(c->fmt[c->pos])) {
    v = v * 10u + (uint32_t)(c->fmt[c->pos] - '0');
    if (v > AX_FORMAT_MAX_FIELD)
      v = AX_FORMAT_MAX_FIELD;
    c->pos++;
  }
  return v;
}

static int escape_char(char e, char* out) {
  switch (e) {
  case '\\':
    *out = '\\';
    return 0;
  case 'a':
    *out = '\a';
    return 0;
  case 'b':
    *out = '\b';
    return 0;
  case 'e':
    *out = 27;
    return 0;
  case 'f':
    *out = '\f';
    return 0;
  case 'n':
    *out = '\n';
    return 0;
  case 'r':
    *out = '\r';
    return 0;
  case 't':
    *out = '\t';
    return 0;
  case 'v':
    *out = '\v';
    return 0;
  case '"':
    *out = '"';
    return 0;
  default:
    return AX_ERR_BAD_PRINTF;
  }
}

/* Flag combinations format_pieces refuses ("Inappropriate modifiers"). */
static int spec_is_valid(const struct fmt_spec* s) {
  switch (s->conv) {
  case 'u':
    return !s->hash;
  case 'o':
  case 'x':
  case 'X':
    return !s->space && !s->plus;
  case 'd':
  case 'i':
    return 1;
  case 'c': /* %lc is a wide character: unsupported */
    return s->len == LEN_INT && !s->has_prec && !s->zero && !s->space && !s->plus;
  case 'p':
    return s->len == LEN_INT && !s->has_prec && !s->hash && !s->zero && !s->space && !s->plus;
  case 's': /* %ls is a wide string: unsupported */
    return s->len == LEN_INT && !s->zero && !s->space && !s->plus;
  default: /* floating point, %n, '*', anything else */
    return 0;
  }
}

/* Parse the conversion after a '%' (the cursor is past it). */
static int parse_spec(struct fmt_cursor* c, struct fmt_spec* s) {
  *s = (struct fmt_spec){0};
  for (; c->pos < c->n; c->pos++) {
    char f = c->fmt[c->pos];
    if (f == '-')
      s->minus = 1;
    else if (f == '+')
      s->plus = 1;
    else if (f == ' ')
      s->space = 1;
    else if (f == '#')
      s->hash = 1;
    else if (f == '0')
      s->zero = 1;
    else
      break;
  }
  s->width = read_number(c);
  if (c->pos < c->n && c->fmt[c->pos] == '.') {
    c->pos++;
    s->has_prec = 1;
    s->prec = read_number(c);
  }
  if (c->pos < c->n) {
    char m = c->fmt[c->pos];
    if (m == 'h') {
      s->len = LEN_SHORT;
      c->pos++;
    } else if (m == 'z') {
      s->len = LEN_SIZE_T;
      c->pos++;
    } else if (m == 'l') {
      s->len = LEN_LONG;
      c->pos++;
      if (c->pos < c->n && c->fmt[c->pos] == 'l') {
        s->len = LEN_LONG_LONG;
        c->pos++;
      }
    }
  }
  if (c->pos >= c->n)
    return AX_ERR_BAD_PRINTF; /* "Incomplete format specifier at end of format string" */
  s->conv = c->fmt[c->pos++];
  return spec_is_valid(s) ? AX_OK : AX_ERR_BAD_PRINTF;
}

/* Next piece of the format: one literal character (escapes processed, "%%"
 * folded) or one conversion. */
static int next_piece(struct fmt_cursor* c, char* ch, struct fmt_spec* s) {
  char f;
  if (c->pos >= c->n)
    return PIECE_END;
  f = c->fmt[c->pos++];
  if (f == '\\') {
    if (c->pos >= c->n)
      return AX_ERR_BAD_PRINTF;
    return escape_char(c->fmt[c->pos++], ch) < 0 ? AX_ERR_BAD_PRINTF : PIECE_CHAR;
  }
  if (f == '"') /* gdb never sends an unescaped quote (it ends the format there) */
    return AX_ERR_BAD_PRINTF;
  if (f != '%') {
    *ch = f;
    return PIECE_CHAR;
  }
  if (c->pos < c->n && c->fmt[c->pos] == '%') {
    c->pos++;
    *ch = '%';
    return PIECE_CHAR;
  }
  return parse_spec(c, s) < 0 ? AX_ERR_BAD_PRINTF : PIECE_CONV;
}

/* The format must be exactly FMT_LEN bytes with its only NUL at the end. */
static int open_cursor(struct fmt_cursor* c, const char* fmt, uint32_t fmt_len) {
  uint32_t i;
  if (!fmt || fmt_len == 0 || fmt[fmt_len - 1] != '\0')
    return AX_ERR_BAD_PRINTF;
  for (i = 0; i + 1 < fmt_len; i++)
    if (fmt[i] == '\0')
      return AX_ERR_BAD_PRINTF;
  c->fmt = fmt;
  c->n = fmt_len - 1;
  c->pos = 0;
  return AX_OK;
}

int ax_printf_check(const char* fmt, uint32_t fmt_len, uint32_t* nargs, int* uses_str) {
  struct fmt_cursor c;
  struct fmt_spec s;
  uint32_t count = 0;
  int str = 0, kind;
  char ch;
  if (open_cursor(&c, fmt, fmt_len) < 0)
    return AX_ERR_BAD_PRINTF;
  while ((kind = next_piece(&c, &ch, &s)) != PIECE_END) {
    if (kind < 0)
      return kind;
    if (kind == PIECE_CONV) {
      count++;
      if (s.conv == 's')
        str = 1;
    }
  }
  if (nargs)
    *nargs = count;
  if (uses_str)
    *uses_str = str;
  return AX_OK;
}

/* ---- output ---- */

struct outbuf {
  char* p;
  uint32_t cap; /* characters that fit (outlen - 1) */
  uint32_t len;
};

static void put(struct outbuf* o, char c) {
  if (o->len < o->cap)
    o->p[o->len++] = c;
}

static void put_n(struct outbuf* o, char c, uint32_t count) {
  while (count-- > 0 && o->len < o->cap)
    o->p[o->len++] = c;
}

static uint32_t pad_for(uint32_t width, uint32_t body) {
  return width > body ? width - body : 0;
}

/* The argument as the C type printf would see for this conversion. */
static uint64_t unsigned_arg(const struct fmt_spec* s, uint64_t raw) {
  switch (s->len) {
  case LEN_INT:
    return (uint32_t)raw;
  case LEN_SHORT:
    return (uint16_t)raw;
  default:
    return raw;
  }
}

static void format_integer(struct outbuf* o, const struct fmt_spec* s, uint64_t raw) {
  static const char lower[] = "0123456789abcdef", upper[] = "0123456789ABCDEF";
  const char* digit = s->conv == 'X' ? upper : lower;
  uint32_t base = 10, nd = 0, zeros = 0, prefix = 0, body;
  char sign = 0, buf[24];
  uint64_t mag;

  if (s->conv == 'd' || s->conv == 'i') {
    /* Sign-extend from the argument's width, then take the magnitude in
     * unsigned arithmetic (no signed overflow, INT64_MIN included). */
    uint64_t v = unsigned_arg(s, raw);
    uint32_t bits = s->len == LEN_INT ? 32 : s->len == LEN_SHORT ? 16 : 64;
    if (bits < 64 && (v >> (bits - 1)) & 1u)
      v |= ~0ull << bits;
    if (v >> 63) {
      sign = '-';
      mag = 0 - v;
    } else {
      mag = v;
      sign = s->plus ? '+' : s->space ? ' ' : 0;
    }
  } else {
    mag = unsigned_arg(s, raw);
    if (s->conv == 'o')
      base = 8;
    else if (s->conv == 'x' || s->conv == 'X')
      base = 16;
  }

  if (!(s->has_prec && s->prec == 0 && mag == 0)) {
    uint64_t m = mag;
    do {
      buf[nd++] = digit[m % base];
      m /= base;
    } while (m != 0);
  }
  if (s->has_prec && s->prec > nd)
    zeros = s->prec - nd;
  if (s->hash && base == 16 && mag != 0)
    prefix = 2;
  if (s->hash && base == 8 && zeros == 0 && (nd == 0 || buf[nd - 1] != '0'))
    zeros = 1;
  body = (sign ? 1u : 0u) + prefix + zeros + nd;
  if (s->zero && !s->minus && !s->has_prec) {
    zeros += pad_for(s->width, body);
    body += pad_for(s->width, body);
  }
  if (!s->minus)
    put_n(o, ' ', pad_for(s->width, body));
  if (sign)
    put(o, sign);
  if (prefix) {
    put(o, '0');
    put(o, s->conv == 'X' ? 'X' : 'x');
  }
  put_n(o, '0', zeros);
  while (nd > 0)
    put(o, buf[--nd]);
  if (s->minus)
    put_n(o, ' ', pad_for(s->width, body));
}

/* Text with width padding (for %c, (null), (nil)). */
static void format_text(struct outbuf* o, const struct fmt_spec* s, const char* text, uint32_t n) {
  uint32_t i;
  if (!s->minus)
    put_n(o, ' ', pad_for(s->width, n));
  for (i = 0; i < n; i++)
    put(o, text[i]);
  if (s->minus)
    put_n(o, ' ', pad_for(s->width, n));
}

/* Walk the NUL-terminated string at ADDR (at most LIMIT bytes), copying it
 * to O when O is non-NULL; *COUNT = characters seen. Reads in chunks that
 * never cross a page boundary, and byte by byte where a chunk fails, so a
 * string that ends just before unreadable memory reads fine. */
static int walk_string(uint64_t addr, uint32_t limit, ax_read_mem_fn rd, void* opaque,
                       struct outbuf* o, uint32_t* count) {
  uint8_t chunk[64];
  uint32_t n = 0, i;
  while (n < limit) {
    uint64_t a = addr + n;
    uint32_t want = limit - n, to_page = 4096u - (uint32_t)(a & 4095u);
    int rc;
    if (want > sizeof chunk)
      want = sizeof chunk;
    if (want > to_page)
      want = to_page;
    rc = rd(opaque, a, chunk, want);
    if (rc != 0 && want > 1) {
      /* The chunk may run past the end of the readable object (the string
       * ended earlier): fall back to reading one byte. */
      want = 1;
      rc = rd(opaque, a, chunk, want);
    }
    if (rc != 0)
      return rc < 0 ? rc : AX_ERR_MEM;
    for (i = 0; i < want; i++) {
      if (chunk[i] == 0) {
        *count = n;
        return AX_OK;
      }
      if (o)
        put(o, (char)chunk[i]);
      n++;
    }
  }
  *count = n;
  return AX_OK;
}

static int format_string(struct outbuf* o, const struct fmt_spec* s, uint64_t addr,
                         ax_read_mem_fn rd, void* opaque) {
  uint32_t limit = AX_FORMAT_MAX_STR, n = 0;
  int rc;
  if (addr == 0) {
    format_text(o, s, "(null)", 6);
    return AX_OK;
  }
  if (!rd)
    return AX_ERR_MEM;
  if (s->has_prec && s->prec < limit)
    limit = s->prec;
  if (s->width > 0 && !s->minus) { /* right-justified: measure first */
    rc = walk_string(addr, limit, rd, opaque, 0, &n);
    if (rc < 0)
      return rc;
    put_n(o, ' ', pad_for(s->width, n));
  }
  rc = walk_string(addr, limit, rd, opaque, o, &n);
  if (rc < 0)
    return rc;
  if (s->minus)
    put_n(o, ' ', pad_for(s->width, n));
  return AX_OK;
}

static int format_conversion(struct outbuf* o, const struct fmt_spec* s, uint64_t arg,
                             ax_read_mem_fn rd, void* opaque) {
  switch (s->conv) {
  case 's':
    return format_string(o, s, arg, rd, opaque);
  case 'c': {
    char ch = (char)(uint8_t)arg;
    format_text(o, s, &ch, 1);
    return AX_OK;
  }
  case 'p':
    if (arg == 0) {
      format_text(o, s, "(nil)", 5);
    } else {
      struct fmt_spec hex = *s;
      hex.conv = 'x';
      hex.hash = 1;
      hex.len = LEN_LONG;
      format_integer(o, &hex, arg);
    }
    return AX_OK;
  default:
    format_integer(o, s, arg);
    return AX_OK;
  }
}

int ax_format(char* out, uint32_t outlen, const char* fmt, uint32_t fmt_len, uint32_t nargs,
              const uint64_t* args, ax_read_mem_fn read_mem, void* opaque) {
  struct fmt_cursor c;
  struct fmt_spec s;
  struct outbuf o;
  uint32_t wanted = 0, used = 0;
  int kind, rc;
  char ch;

  if (outlen > 0 && out)
    out[0] = '\0';
  rc = ax_printf_check(fmt, fmt_len, &wanted, 0);
  if (rc < 0)
    return rc;
  if (wanted != nargs || (nargs > 0 && !args))
    return AX_ERR_BAD_PRINTF;
  o.p = out;
  o.cap = (out && outlen > 0) ? outlen - 1 : 0;
  o.len = 0;
  open_cursor(&c, fmt, fmt_len);
  while ((kind = next_piece(&c, &ch, &s)) != PIECE_END) {
    if (kind == PIECE_CHAR) {
      put(&o, ch);
      continue;
    }
    rc = format_conversion(&o, &s, args[used++], read_mem, opaque);
    if (rc < 0) {
      if (o.cap > 0)
        out[o.len] = '\0';
      return rc;
    }
  }
  if (out && outlen > 0)
    out[o.len] = '\0';
  return (int)o.len;
}
