/*
 * libFuzzer target for the agent-expression VM. Input layout:
 *   byte 0: mode bits
 *     bit 0: allow trace ops        bit 1: memory reads fail in some pages
 *     bit 2: trace collection fails bit 3: registers unavailable (odd numbers)
 *     bit 4: caller-provided scratch bit 5: no AVX registers (60 instead of 76)
 *     bit 6: fuzz the printf formatter directly instead of bytecode
 *   bytes 1..: bytecode (or a printf format and its arguments)
 * Invariants (abort on violation): no crash or sanitizer report; a program
 * ax_verify() accepted never fails at run time with a structural error
 * (stack over/underflow, bad jump, truncation, unknown op, falling off the
 * end); max_stack <= AX_MAX_STACK; a format ax_printf_check() accepted is
 * never refused by ax_format() and its output stays in bounds; ax_eval()
 * on refused code (with a forged ax_verified) still returns, never crashes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi/amd64_regs.h"
#include "ax/ax.h"

struct fuzz_state {
  uint8_t mode;
  int64_t tsv[8];
  unsigned prints;
};

static int read_mem(void* o, uint64_t addr, void* buf, uint32_t len) {
  struct fuzz_state* s = o;
  uint8_t* b = buf;
  uint32_t i;
  if ((s->mode & 2) && ((addr >> 12) % 5 == 3 || ((addr + len - 1) >> 12) % 5 == 3))
    return AX_ERR_MEM;
  for (i = 0; i < len; i++) {
    uint64_t a = addr + i;
    /* Mostly printable text with a NUL now and then (strings end). */
    b[i] = (a % 61 == 0) ? 0 : (uint8_t)(' ' + (a * 7) % 90);
  }
  return 0;
}

static int read_reg(void* o, uint32_t regno, uint64_t* v) {
  struct fuzz_state* s = o;
  if ((s->mode & 8) && (regno & 1))
    return AX_ERR_REG_UNAVAILABLE;
  *v = 0x1111111111111111ull * (regno % 16) + regno;
  return 0;
}

static int tsv_exists(void* o, uint32_t num) {
  return num < 8;
}

static int get_tsv(void* o, uint32_t num, int64_t* v) {
  struct fuzz_state* s = o;
  if (num >= 8)
    abort(); /* the verifier let an undefined tsv through */
  *v = s->tsv[num];
  return 0;
}

static int set_tsv(void* o, uint32_t num, int64_t v) {
  struct fuzz_state* s = o;
  if (num >= 8)
    abort();
  s->tsv[num] = v;
  return 0;
}

static int trace_mem(void* o, uint64_t addr, uint32_t len, int nz) {
  struct fuzz_state* s = o;
  if (!(s->mode & 1))
    abort(); /* trace op ran although trace ops were not allowed */
  return (s->mode & 4) && (addr & 1) ? AX_ERR_TRACE : 0;
}

static int trace_tsv(void* o, uint32_t num) {
  struct fuzz_state* s = o;
  if (!(s->mode & 1) || num >= 8)
    abort();
  return 0;
}

/* Render like the server would, into a small buffer with a guard byte. */
static int printf_cb(void* o, const char* fmt, uint32_t fmt_len, uint32_t nargs,
                     const uint64_t* args) {
  struct fuzz_state* s = o;
  char out[65];
  int n;
  out[64] = 0x5a;
  n = ax_format(out, 64, fmt, fmt_len, nargs, args, read_mem, o);
  if (out[64] != 0x5a || n > 63)
    abort();
  if (n == AX_ERR_BAD_PRINTF)
    abort(); /* the verifier accepted this format and argument count */
  s->prints++;
  return n < 0 ? n : 0;
}

static int structural_error(int rc) {
  return rc == AX_ERR_STACK_OVERFLOW || rc == AX_ERR_STACK_UNDERFLOW || rc == AX_ERR_BAD_JUMP ||
         rc == AX_ERR_TRUNCATED || rc == AX_ERR_UNKNOWN_OP || rc == AX_ERR_FLOAT_OP ||
         rc == AX_ERR_NO_END || rc == AX_ERR_BAD_ARG || rc == AX_ERR_INCONSISTENT_STACK ||
         rc == AX_ERR_BAD_OPERAND || rc == AX_ERR_NOT_ALLOWED || rc == AX_ERR_BAD_TSV;
}

static void fuzz_format(struct fuzz_state* s, const uint8_t* data, size_t size) {
  /* [nul-terminated format][8-byte args...] */
  const uint8_t* nul = memchr(data, 0, size);
  uint64_t args[16];
  uint32_t nargs = 0, wanted = 0, fmt_len, i, outlen;
  char out[130];
  int rc, uses_str = 0;
  if (!nul)
    return;
  fmt_len = (uint32_t)(nul - data) + 1;
  for (i = 0; i < 16 && fmt_len + 8 * (i + 1) <= size; i++) {
    memcpy(&args[i], data + fmt_len + 8 * i, 8);
    nargs++;
  }
  rc = ax_printf_check((const char*)data, fmt_len, &wanted, &uses_str);
  outlen = fmt_len % 129; /* vary the output size, 0 included */
  memset(out, 0x5a, sizeof out);
  if (rc == AX_OK && wanted <= nargs) {
    int n = ax_format(out, outlen, (const char*)data, fmt_len, wanted, args, read_mem, s);
    if (n == AX_ERR_BAD_PRINTF || n >= (int)(outlen ? outlen : 1) || out[129] != 0x5a)
      abort();
    if (outlen > 0 && n >= 0 && out[n] != 0)
      abort();
    if (outlen < sizeof out && out[outlen] != 0x5a)
      abort();
  } else {
    int n = ax_format(out, outlen, (const char*)data, fmt_len, nargs, args, read_mem, s);
    if (rc != AX_OK && n != AX_ERR_BAD_PRINTF)
      abort(); /* check and format disagree */
  }
}

static void init_env(struct ax_env* env, struct fuzz_state* s, uint32_t budget) {
  memset(env, 0, sizeof *env);
  env->opaque = s;
  env->read_reg = read_reg;
  env->read_mem = read_mem;
  env->get_tsv = get_tsv;
  env->set_tsv = set_tsv;
  env->trace_mem = trace_mem;
  env->trace_tsv = trace_tsv;
  env->printf = printf_cb;
  env->step_budget = budget;
}

/* ax_eval must stay memory-safe even on code the verifier refused (a caller
 * bug): run it with a forged ax_verified; any error is fine, a crash is not.
 * Callbacks that would abort on unverified input (tsv range, trace allowed)
 * are left out. */
static void forged_eval(struct fuzz_state* s, const uint8_t* data, size_t size) {
  struct ax_verified forged;
  struct ax_env env;
  uint64_t result;
  int rc;
  if (size == 0 || size > AX_MAX_CODE_LEN)
    return;
  memset(&forged, 0, sizeof forged);
  forged.code_len = (uint32_t)size;
  init_env(&env, s, 500);
  env.get_tsv = NULL;
  env.set_tsv = NULL;
  env.trace_tsv = NULL;
  env.trace_mem = NULL;
  env.printf = NULL;
  rc = ax_eval(data, &forged, &env, &result);
  if (rc > 0)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static struct ax_verify_scratch scratch;
  struct fuzz_state s;
  struct ax_verify_ctx ctx;
  struct ax_verified info;
  struct ax_env env;
  uint32_t err_pc = 0;
  uint64_t result = 0;
  int rc;

  if (size < 1)
    return 0;
  memset(&s, 0, sizeof s);
  s.mode = data[0];
  data++;
  size--;
  if (s.mode & 64) {
    fuzz_format(&s, data, size);
    return 0;
  }
  if (size > AX_MAX_CODE_LEN + 16)
    return 0;

  memset(&ctx, 0, sizeof ctx);
  ctx.num_regs = (s.mode & 32) ? GT_NUM_REGS_NOAVX : GT_NUM_REGS_AVX;
  ctx.tsv_exists = tsv_exists;
  ctx.opaque = &s;
  ctx.allow_trace_ops = s.mode & 1;
  ctx.scratch = (s.mode & 16) ? &scratch : NULL;
  memset(&info, 0xa5, sizeof info); /* must be fully overwritten on success */
  rc = ax_verify(data, (uint32_t)size, &ctx, &info, &err_pc);
  if (rc != AX_OK) {
    if (rc > 0 || (size > 0 && err_pc >= size) || !ax_strerror(rc))
      abort();
    forged_eval(&s, data, size);
    return 0;
  }
  if (info.code_len != size || info.max_stack > AX_MAX_STACK || info.num_insns > size)
    abort();

  init_env(&env, &s, 2000);
  rc = ax_eval(data, &info, &env, &result);
  if (structural_error(rc))
    abort();
  /* Straight-line code runs each instruction at most once: it cannot run out
   * of a 2000-step budget unless it has more than 2000 instructions. */
  if (rc == AX_ERR_STEP_BUDGET && !info.has_backward_jump && info.num_insns <= 2000)
    abort();
  if (rc == AX_ERR_MEM && !info.uses_mem)
    abort();
  return 0;
}
