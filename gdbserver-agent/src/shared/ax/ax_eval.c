/*
 * Agent-expression interpreter. Runs only programs ax_verify() accepted, but
 * does not rely on that for memory safety: every operand fetch, jump and
 * stack access is still bounds-checked (a caller passing the wrong code or a
 * forged ax_verified gets an error, not a crash), and a step budget ends
 * loops. Semantics follow gdbserver's gdb_eval_agent_expr (gdbserver/ax.cc),
 * minus its undefined behaviour: shifts by >= 64 give 0 (or the sign fill for
 * rsh_signed), INT64_MIN / -1 wraps to INT64_MIN (remainder 0), and ext/
 * zero_ext work for every width 1..64.
 * Target memory is read as little-endian (x86-64).
 */
#include "abi/ax_opcodes.h"
#include "ax/ax.h"

struct machine {
  const uint8_t* code;
  uint32_t len;
  uint32_t pc;
  uint32_t sp; /* values on the stack */
  uint64_t stack[AX_MAX_STACK];
  const struct ax_env* env;
};

static int push(struct machine* m, uint64_t v) {
  if (m->sp >= AX_MAX_STACK)
    return AX_ERR_STACK_OVERFLOW;
  m->stack[m->sp++] = v;
  return AX_OK;
}

static int pop(struct machine* m, uint64_t* v) {
  if (m->sp == 0)
    return AX_ERR_STACK_UNDERFLOW;
  *v = m->stack[--m->sp];
  return AX_OK;
}

/* Operand bytes at pc+1.. as a big-endian number (gdb emits big-endian). */
static int operand(const struct machine* m, uint32_t bytes, uint64_t* v) {
  if (bytes > m->len - m->pc - 1u)
    return AX_ERR_TRUNCATED;
  *v = ax_operand(m->code + m->pc + 1u, bytes);
  return AX_OK;
}

static int64_t as_signed(uint64_t v) {
  /* Two's-complement reinterpretation without implementation-defined casts. */
  return v >> 63 ? -(int64_t)(~v) - 1 : (int64_t)v;
}

#define AX_INT64_MIN_BITS 0x8000000000000000ull

/* a OP b for the two-operand arithmetic and comparison opcodes. */
static int binary(uint8_t op, uint64_t a, uint64_t b, uint64_t* r) {
  switch (op) {
  case AX_OP_ADD:
    *r = a + b;
    return AX_OK;
  case AX_OP_SUB:
    *r = a - b;
    return AX_OK;
  case AX_OP_MUL:
    *r = a * b;
    return AX_OK;
  case AX_OP_BIT_AND:
    *r = a & b;
    return AX_OK;
  case AX_OP_BIT_OR:
    *r = a | b;
    return AX_OK;
  case AX_OP_BIT_XOR:
    *r = a ^ b;
    return AX_OK;
  case AX_OP_EQUAL:
    *r = a == b;
    return AX_OK;
  case AX_OP_LESS_SIGNED:
    *r = as_signed(a) < as_signed(b);
    return AX_OK;
  case AX_OP_LESS_UNSIGNED:
    *r = a < b;
    return AX_OK;
  case AX_OP_LSH:
    *r = b >= 64 ? 0 : a << b;
    return AX_OK;
  case AX_OP_RSH_UNSIGNED:
    *r = b >= 64 ? 0 : a >> b;
    return AX_OK;
  case AX_OP_RSH_SIGNED: {
    uint64_t fill = (a >> 63) ? ~0ull : 0;
    if (b >= 64)
      *r = fill;
    else
      *r = b == 0 ? a : (a >> b) | (fill << (64 - b));
    return AX_OK;
  }
  default:
    break;
  }
  if (b == 0)
    return AX_ERR_DIV_ZERO;
  switch (op) {
  case AX_OP_DIV_UNSIGNED:
    *r = a / b;
    return AX_OK;
  case AX_OP_REM_UNSIGNED:
    *r = a % b;
    return AX_OK;
  case AX_OP_DIV_SIGNED:
    if (a == AX_INT64_MIN_BITS && b == ~0ull)
      *r = a; /* overflows: wrap as the hardware would without trapping */
    else
      *r = (uint64_t)(as_signed(a) / as_signed(b));
    return AX_OK;
  case AX_OP_REM_SIGNED:
    if (a == AX_INT64_MIN_BITS && b == ~0ull)
      *r = 0;
    else
      *r = (uint64_t)(as_signed(a) % as_signed(b));
    return AX_OK;
  default:
    return AX_ERR_UNKNOWN_OP;
  }
}

/* ext n: sign-extend from bit n-1; zero_ext n: clear bits n and up. */
static uint64_t extend(uint64_t v, uint32_t bits, int sign) {
  uint64_t mask;
  if (bits >= 64)
    return v;
  mask = (1ull << bits) - 1u;
  v &= mask;
  if (sign && bits > 0 && (v >> (bits - 1)) & 1u)
    v |= ~mask;
  return v;
}

static int callback_status(int rc, int fallback) {
  if (rc == 0)
    return AX_OK;
  return rc < 0 ? rc : fallback;
}

/* ref8..ref64: load SIZE bytes little-endian, zero-extended (gdb emits ext after). */
static int load(struct machine* m, uint64_t addr, uint32_t size, uint64_t* v) {
  uint8_t buf[8];
  uint32_t i;
  int rc;
  if (!m->env->read_mem)
    return AX_ERR_MEM;
  /* SIZE comes from the opcode; a mispredicted dispatch must not index past BUF. */
  if (size > sizeof(buf))
    return AX_ERR_BAD_OPERAND;
  size = AX_INDEX_NOSPEC(size, (uint32_t)sizeof(buf) + 1u);
  rc = callback_status(m->env->read_mem(m->env->opaque, addr, buf, size), AX_ERR_MEM);
  if (rc < 0)
    return rc;
  *v = 0;
  for (i = size; i > 0; i--)
    *v = (*v << 8) | buf[i - 1];
  return AX_OK;
}

static int trace_mem(struct machine* m, uint64_t addr, uint64_t size, int nz) {
  /* tracenz's size is only a limit: `collect/s` under `set print elements
   * unlimited` sends -1. A plain trace of 4 GiB or more is refused. */
  if (nz && size > 0xffffffffull)
    size = 0xffffffffull;
  if (!m->env->trace_mem || size > 0xffffffffull)
    return AX_ERR_TRACE;
  return callback_status(m->env->trace_mem(m->env->opaque, addr, (uint32_t)size, nz), AX_ERR_TRACE);
}

/* printf: pops function and channel (ignored, gdb sends 0) then NARGS
 * arguments, the first argument on top. The arguments are reversed in place
 * so ARGS[0] is the first conversion's, without a second array. */
static int do_printf(struct machine* m) {
  uint32_t nargs = m->code[m->pc + 1], fmt_len, i, base;
  uint64_t ignored, tmp;
  int rc;
  fmt_len = ((uint32_t)m->code[m->pc + 2] << 8) | m->code[m->pc + 3];
  if (fmt_len > m->len - m->pc - 4u)
    return AX_ERR_TRUNCATED;
  if (fmt_len == 0 || m->code[m->pc + 3u + fmt_len] != 0)
    return AX_ERR_BAD_PRINTF; /* the callback is promised a NUL-terminated format */
  rc = pop(m, &ignored);      /* function */
  if (rc == AX_OK)
    rc = pop(m, &ignored); /* channel */
  if (rc < 0)
    return rc;
  if (m->sp < nargs)
    return AX_ERR_STACK_UNDERFLOW;
  base = m->sp - nargs;
  for (i = 0; i < nargs / 2; i++) {
    tmp = m->stack[base + i];
    m->stack[base + i] = m->stack[m->sp - 1 - i];
    m->stack[m->sp - 1 - i] = tmp;
  }
  m->sp = base;
  if (!m->env->printf)
    return AX_ERR_NOT_ALLOWED;
  return callback_status(m->env->printf(m->env->opaque, (const char*)m->code + m->pc + 4, fmt_len,
                                        nargs, m->stack + base),
                         AX_ERR_BAD_PRINTF);
}

/* Jump to TARGET (validated by the verifier, checked again). */
static int jump(struct machine* m, uint64_t target) {
  if (target >= m->len)
    return AX_ERR_BAD_JUMP;
  m->pc = (uint32_t)target;
  return AX_OK;
}

/* dup, pop, swap, rot, pick: the value stack rearranged. */
static int stack_op(struct machine* m, uint8_t op, uint64_t k) {
  uint64_t a = 0, b = 0, c = 0;
  int rc;
  switch (op) {
  case AX_OP_DUP:
    if ((rc = pop(m, &a)) < 0 || (rc = push(m, a)) < 0)
      return rc;
    return push(m, a);
  case AX_OP_POP:
    return pop(m, &a);
  case AX_OP_SWAP:
    if ((rc = pop(m, &b)) < 0 || (rc = pop(m, &a)) < 0 || (rc = push(m, b)) < 0)
      return rc;
    return push(m, a);
  case AX_OP_ROT: /* a b c => c a b (gdbserver/ax.cc) */
    if ((rc = pop(m, &c)) < 0 || (rc = pop(m, &b)) < 0 || (rc = pop(m, &a)) < 0)
      return rc;
    if ((rc = push(m, c)) < 0 || (rc = push(m, a)) < 0)
      return rc;
    return push(m, b);
  default: /* AX_OP_PICK: pick 0 == dup */
    if (k >= m->sp)
      return AX_ERR_STACK_UNDERFLOW;
    return push(m, m->stack[AX_INDEX_NOSPEC(m->sp - 1u - (uint32_t)k, m->sp)]);
  }
}

/* getv, setv, tracev: trace state variables through the environment. */
static int tsv_op(struct machine* m, uint8_t op, uint64_t k) {
  const struct ax_env* env = m->env;
  int rc;
  switch (op) {
  case AX_OP_GETV: {
    int64_t value = 0;
    if (!env->get_tsv)
      return AX_ERR_BAD_TSV;
    if ((rc = callback_status(env->get_tsv(env->opaque, (uint32_t)k, &value), AX_ERR_BAD_TSV)) < 0)
      return rc;
    return push(m, (uint64_t)value);
  }
  case AX_OP_SETV: /* leaves the value on the stack */
    if (m->sp == 0)
      return AX_ERR_STACK_UNDERFLOW;
    if (!env->set_tsv)
      return AX_ERR_BAD_TSV;
    return callback_status(env->set_tsv(env->opaque, (uint32_t)k, as_signed(m->stack[m->sp - 1])),
                           AX_ERR_BAD_TSV);
  default: /* AX_OP_TRACEV */
    if (!env->trace_tsv)
      return AX_ERR_TRACE;
    return callback_status(env->trace_tsv(env->opaque, (uint32_t)k), AX_ERR_TRACE);
  }
}

/* trace, tracenz, trace_quick, trace16: memory into the frame. */
static int trace_op(struct machine* m, uint8_t op, uint64_t k) {
  uint64_t a = 0, b = 0;
  int rc;
  switch (op) {
  case AX_OP_TRACE: /* addr size => */
  case AX_OP_TRACENZ:
    if ((rc = pop(m, &b)) < 0 || (rc = pop(m, &a)) < 0)
      return rc;
    return trace_mem(m, a, b, op == AX_OP_TRACENZ);
  default: /* AX_OP_TRACE_QUICK, AX_OP_TRACE16: addr => addr */
    if (m->sp == 0)
      return AX_ERR_STACK_UNDERFLOW;
    return trace_mem(m, m->stack[m->sp - 1], k, 0);
  }
}

/* Execute the instruction at m->pc. Sets *DONE at `end`. */
static int step(struct machine* m, int* done) {
  uint8_t op = m->code[m->pc];
  const struct ax_opinfo* info = ax_opinfo(op);
  const struct ax_env* env = m->env;
  uint64_t a = 0, b = 0, c = 0, k = 0;
  uint32_t next;
  int rc;

  if (!(info->flags & AX_F_KNOWN))
    return AX_ERR_UNKNOWN_OP;
  if (info->flags & AX_F_FLOAT)
    return AX_ERR_FLOAT_OP;
  rc = operand(m, info->operand_bytes, &k);
  if (rc < 0)
    return rc;
  next = m->pc + 1u + info->operand_bytes;

  switch (op) {
  case AX_OP_ADD:
  case AX_OP_SUB:
  case AX_OP_MUL:
  case AX_OP_DIV_SIGNED:
  case AX_OP_DIV_UNSIGNED:
  case AX_OP_REM_SIGNED:
  case AX_OP_REM_UNSIGNED:
  case AX_OP_LSH:
  case AX_OP_RSH_SIGNED:
  case AX_OP_RSH_UNSIGNED:
  case AX_OP_BIT_AND:
  case AX_OP_BIT_OR:
  case AX_OP_BIT_XOR:
  case AX_OP_EQUAL:
  case AX_OP_LESS_SIGNED:
  case AX_OP_LESS_UNSIGNED:
    if ((rc = pop(m, &b)) < 0 || (rc = pop(m, &a)) < 0 || (rc = binary(op, a, b, &c)) < 0)
      return rc;
    rc = push(m, c);
    break;
  case AX_OP_LOG_NOT:
  case AX_OP_BIT_NOT:
    if ((rc = pop(m, &a)) < 0)
      return rc;
    rc = push(m, op == AX_OP_LOG_NOT ? (uint64_t)(a == 0) : ~a);
    break;
  case AX_OP_EXT:
  case AX_OP_ZERO_EXT:
    if ((rc = pop(m, &a)) < 0)
      return rc;
    rc = push(m, extend(a, (uint32_t)k, op == AX_OP_EXT));
    break;
  case AX_OP_REF8:
  case AX_OP_REF16:
  case AX_OP_REF32:
  case AX_OP_REF64:
    if ((rc = pop(m, &a)) < 0 || (rc = load(m, a, 1u << (op - AX_OP_REF8), &b)) < 0)
      return rc;
    rc = push(m, b);
    break;
  case AX_OP_CONST8:
  case AX_OP_CONST16:
  case AX_OP_CONST32:
  case AX_OP_CONST64:
    rc = push(m, k);
    break;
  case AX_OP_REG:
    if (!env->read_reg)
      return AX_ERR_REG_UNAVAILABLE;
    if ((rc = callback_status(env->read_reg(env->opaque, (uint32_t)k, &a),
                              AX_ERR_REG_UNAVAILABLE)) < 0)
      return rc;
    rc = push(m, a);
    break;
  case AX_OP_IF_GOTO:
    if ((rc = pop(m, &a)) < 0)
      return rc;
    if (a != 0)
      return jump(m, k);
    break;
  case AX_OP_GOTO:
    return jump(m, k);
  case AX_OP_END:
    *done = 1;
    return AX_OK;
  case AX_OP_DUP:
  case AX_OP_POP:
  case AX_OP_SWAP:
  case AX_OP_ROT:
  case AX_OP_PICK:
    rc = stack_op(m, op, k);
    break;
  case AX_OP_GETV:
  case AX_OP_SETV:
  case AX_OP_TRACEV:
    rc = tsv_op(m, op, k);
    break;
  case AX_OP_TRACE:
  case AX_OP_TRACENZ:
  case AX_OP_TRACE_QUICK:
  case AX_OP_TRACE16:
    rc = trace_op(m, op, k);
    break;
  case AX_OP_PRINTF:
    rc = do_printf(m);
    next += ((uint32_t)m->code[m->pc + 2] << 8) | m->code[m->pc + 3];
    break;
  default:
    return AX_ERR_UNKNOWN_OP;
  }
  if (rc < 0)
    return rc;
  if (next >= m->len)
    return AX_ERR_NO_END;
  m->pc = next;
  return AX_OK;
}

int ax_eval(const uint8_t* code, const struct ax_verified* verified, const struct ax_env* env,
            uint64_t* result) {
  struct machine m;
  uint32_t budget, steps;
  int done = 0, rc = AX_OK;

  if (!code || !verified || !env || verified->code_len == 0 || verified->code_len > AX_MAX_CODE_LEN)
    return AX_ERR_BAD_ARG;
  m.code = code;
  m.len = verified->code_len;
  m.pc = 0;
  m.sp = 0;
  m.env = env;
  budget = env->step_budget ? env->step_budget : AX_DEFAULT_STEP_BUDGET;

  for (steps = 0; !done; steps++) {
    if (steps >= budget) {
      rc = AX_ERR_STEP_BUDGET;
      break;
    }
    rc = step(&m, &done);
    if (rc < 0)
      break;
  }
  if (env->steps_used)
    *env->steps_used = steps;
  if (rc < 0)
    return rc;
  if (result)
    *result = m.sp > 0 ? m.stack[m.sp - 1] : 0;
  return AX_OK;
}
