/* Text for ax_status codes. */
#include "ax/ax.h"

const char* ax_strerror(int status) {
  switch (status) {
  case AX_OK:
    return "success";
  case AX_ERR_UNKNOWN_OP:
    return "unknown agent-expression opcode";
  case AX_ERR_FLOAT_OP:
    return "floating-point agent-expression opcodes are not supported";
  case AX_ERR_TRUNCATED:
    return "agent expression truncated: operand bytes missing";
  case AX_ERR_BAD_JUMP:
    return "jump target outside the expression or inside an instruction";
  case AX_ERR_STACK_OVERFLOW:
    return "agent-expression stack overflow";
  case AX_ERR_STACK_UNDERFLOW:
    return "agent-expression stack underflow";
  case AX_ERR_BAD_REG:
    return "register number out of range";
  case AX_ERR_BAD_TSV:
    return "trace state variable not defined";
  case AX_ERR_NO_END:
    return "control can run off the end of the expression without `end'";
  case AX_ERR_TOO_LONG:
    return "agent expression too long";
  case AX_ERR_STEP_BUDGET:
    return "agent expression exceeded its step budget (runaway loop?)";
  case AX_ERR_DIV_ZERO:
    return "division by zero in agent expression";
  case AX_ERR_MEM:
    return "memory unreadable";
  case AX_ERR_REG_UNAVAILABLE:
    return "register unavailable";
  case AX_ERR_TRACE:
    return "trace collection failed";
  case AX_ERR_BAD_PRINTF:
    return "malformed or unsupported printf format / argument count";
  case AX_ERR_NOT_ALLOWED:
    return "opcode not allowed in this context";
  case AX_ERR_INCONSISTENT_STACK:
    return "inconsistent stack depth where paths join";
  case AX_ERR_BAD_OPERAND:
    return "bad operand (ext/zero_ext width must be 1..64)";
  case AX_ERR_NO_SCRATCH:
    return "verifier scratch area missing";
  case AX_ERR_BAD_ARG:
    return "bad argument to the agent-expression VM";
  default:
    return "unknown agent-expression error";
  }
}
