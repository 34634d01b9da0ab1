/*
 * Agent-expression verifier. Bytecode comes from the network, so before a
 * program may run we prove, without recursion or allocation:
 *  1. decode: every byte belongs to a known, non-float instruction whose
 *     operands are present and sane (reg < num_regs, tsv defined, ext widths,
 *     printf format), and trace ops only where allowed;
 *  2. jumps: every goto/if_goto lands on an instruction start inside the code;
 *  3. stack: an abstract interpretation over the control-flow graph (worklist)
 *     gives each reachable instruction one stack depth; depths agree where
 *     paths join, never go below zero or above AX_MAX_STACK, and no path runs
 *     off the end without `end`.
 * Because depths agree at joins, a loop cannot grow the stack, so the
 * computed max_stack bounds every execution.
 */
#include "abi/ax_opcodes.h"
#include "ax/ax.h"

_Static_assert(AX_MAX_STACK < 255u, "depth + 1 is stored in a uint8_t");
_Static_assert(AX_MAX_CODE_LEN <= 65536u, "pcs are stored in a uint16_t");

struct verifier {
  const uint8_t* code;
  uint32_t len;
  const struct ax_verify_ctx* ctx;
  struct ax_verify_scratch* ws;
  struct ax_verified* out;
  uint32_t err_pc;
};

static uint32_t be16(const uint8_t* p) {
  return (uint32_t)ax_operand(p, 2);
}

static int is_insn_start(const struct verifier* v, uint32_t pc) {
  return pc < v->len && (v->ws->insn_start[pc >> 3] >> (pc & 7u)) & 1u;
}

/* Bytes taken by the instruction at PC (opcode, operands, printf string). */
static int insn_size(const struct verifier* v, uint32_t pc, uint32_t* size) {
  const struct ax_opinfo* info = ax_opinfo(v->code[pc]);
  uint32_t n;
  if (!(info->flags & AX_F_KNOWN))
    return AX_ERR_UNKNOWN_OP;
  if (info->flags & AX_F_FLOAT)
    return AX_ERR_FLOAT_OP;
  n = 1u + info->operand_bytes;
  if (n > v->len - pc)
    return AX_ERR_TRUNCATED;
  if (v->code[pc] == AX_OP_PRINTF) {
    n += be16(v->code + pc + 2); /* printf: nargs, 16-bit string length, string */
    if (n > v->len - pc)
      return AX_ERR_TRUNCATED;
  }
  *size = n;
  return AX_OK;
}

static int check_printf(struct verifier* v, uint32_t pc) {
  uint32_t nargs = v->code[pc + 1], slen = be16(v->code + pc + 2), wanted = 0;
  int uses_str = 0;
  if (ax_printf_check((const char*)v->code + pc + 4, slen, &wanted, &uses_str) < 0 ||
      wanted != nargs)
    return AX_ERR_BAD_PRINTF;
  v->out->uses_printf = 1;
  if (uses_str)
    v->out->uses_mem = 1;
  return AX_OK;
}

/* Checks on one instruction that do not depend on the stack. */
static int check_operands(struct verifier* v, uint32_t pc) {
  uint8_t op = v->code[pc];
  const struct ax_opinfo* info = ax_opinfo(op);
  const struct ax_verify_ctx* ctx = v->ctx;

  if ((info->flags & AX_F_TRACE) && !ctx->allow_trace_ops)
    return AX_ERR_NOT_ALLOWED;
  if (info->flags & AX_F_TRACE)
    v->out->uses_trace = 1;
  if (info->flags & AX_F_MEM)
    v->out->uses_mem = 1;
  if (info->flags & AX_F_TSV) {
    uint32_t num = be16(v->code + pc + 1);
    v->out->uses_tsv = 1;
    if (ctx->tsv_exists && !ctx->tsv_exists(ctx->opaque, num))
      return AX_ERR_BAD_TSV;
    if (ctx->note_tsv)
      ctx->note_tsv(ctx->opaque, num, op == AX_OP_SETV ? AX_TSV_WRITE : AX_TSV_READ);
  }
  switch (op) {
  case AX_OP_REG:
    v->out->uses_regs = 1;
    return be16(v->code + pc + 1) < ctx->num_regs ? AX_OK : AX_ERR_BAD_REG;
  case AX_OP_EXT:
  case AX_OP_ZERO_EXT:
    return v->code[pc + 1] >= 1 && v->code[pc + 1] <= 64 ? AX_OK : AX_ERR_BAD_OPERAND;
  case AX_OP_PRINTF:
    return check_printf(v, pc);
  default:
    return AX_OK;
  }
}

/* Pass 1: decode linearly, mark instruction starts, check operands. */
static int decode(struct verifier* v) {
  uint32_t pc = 0, size = 0;
  int rc;
  for (pc = 0; pc < (v->len + 7u) / 8u; pc++)
    v->ws->insn_start[pc] = 0;
  for (pc = 0; pc < v->len; pc += size) {
    v->err_pc = pc;
    rc = insn_size(v, pc, &size);
    if (rc == AX_OK)
      rc = check_operands(v, pc);
    if (rc < 0)
      return rc;
    v->ws->insn_start[pc >> 3] |= (uint8_t)(1u << (pc & 7u));
    v->out->num_insns++;
  }
  return AX_OK;
}

/* Pass 2: every jump lands on an instruction start. */
static int check_jumps(struct verifier* v) {
  uint32_t pc, size = 0;
  for (pc = 0; pc < v->len; pc += size) {
    insn_size(v, pc, &size); /* cannot fail after decode() */
    if (ax_opinfo(v->code[pc])->flags & AX_F_JUMP) {
      uint32_t target = be16(v->code + pc + 1);
      v->err_pc = pc;
      if (!is_insn_start(v, target))
        return AX_ERR_BAD_JUMP;
    }
  }
  return AX_OK;
}

/* Record that control reaches TARGET with DEPTH values on the stack. */
static int reach(struct verifier* v, uint32_t* wl_n, uint32_t target, uint32_t depth) {
  uint8_t want = (uint8_t)(depth + 1u);
  if (v->ws->depth[target] == 0) {
    v->ws->depth[target] = want;
    v->ws->worklist[(*wl_n)++] = (uint16_t)target;
    return AX_OK;
  }
  if (v->ws->depth[target] != want) {
    v->err_pc = target;
    return AX_ERR_INCONSISTENT_STACK;
  }
  return AX_OK;
}

/* Pass 3: stack depth along every path. Each pc enters the worklist once
 * (when first reached), so the loop runs at most num_insns times. */
static int check_stack(struct verifier* v) {
  uint32_t wl_n = 0, pc, size = 0, depth, pops, pushes, next;
  int rc;
  for (pc = 0; pc < v->len; pc++)
    v->ws->depth[pc] = 0;
  rc = reach(v, &wl_n, 0, 0);
  while (rc == AX_OK && wl_n > 0) {
    pc = v->ws->worklist[--wl_n];
    depth = v->ws->depth[pc] - 1u;
    v->err_pc = pc;
    insn_size(v, pc, &size);
    ax_stack_effect(v->code + pc, &pops, &pushes);
    if (depth < pops)
      return AX_ERR_STACK_UNDERFLOW;
    depth = depth - pops + pushes;
    if (depth > AX_MAX_STACK)
      return AX_ERR_STACK_OVERFLOW;
    if (depth > v->out->max_stack)
      v->out->max_stack = depth;

    if (ax_opinfo(v->code[pc])->flags & AX_F_JUMP) {
      /* Only a reachable backward jump can loop: the eBPF code generator
       * (which cannot loop) and the module's step budget go by this flag. */
      uint32_t target = be16(v->code + pc + 1);
      if (target <= pc)
        v->out->has_backward_jump = 1;
      rc = reach(v, &wl_n, target, depth);
      if (rc < 0 || v->code[pc] == AX_OP_GOTO)
        continue;
    } else if (v->code[pc] == AX_OP_END) {
      continue;
    }
    next = pc + size;
    if (next >= v->len)
      return AX_ERR_NO_END; /* err_pc: the last instruction, which is not `end` */
    rc = reach(v, &wl_n, next, depth);
  }
  return rc;
}

static int verify(struct verifier* v) {
  int rc;
  v->err_pc = 0;
  if (v->len > AX_MAX_CODE_LEN)
    return AX_ERR_TOO_LONG;
  if (v->len == 0)
    return AX_ERR_NO_END;
  rc = decode(v);
  if (rc == AX_OK)
    rc = check_jumps(v);
  if (rc == AX_OK)
    rc = check_stack(v);
  return rc;
}

int ax_verify(const uint8_t* code, uint32_t len, const struct ax_verify_ctx* ctx,
              struct ax_verified* out, uint32_t* err_pc) {
  struct verifier v;
  struct ax_verified result = {0};
  int rc;
#ifndef __KERNEL__
  struct ax_verify_scratch local;
#endif

  if (err_pc)
    *err_pc = 0;
  if (!ctx || (!code && len > 0))
    return AX_ERR_BAD_ARG;
  v.code = code;
  v.len = len;
  v.ctx = ctx;
  v.out = &result;
  v.ws = ctx->scratch;
#ifndef __KERNEL__
  if (!v.ws)
    v.ws = &local;
#endif
  if (!v.ws)
    return AX_ERR_NO_SCRATCH;

  rc = verify(&v);
  if (rc < 0) {
    if (err_pc)
      *err_pc = v.err_pc;
    return rc;
  }
  result.code_len = len;
  if (out)
    *out = result;
  return AX_OK;
}
