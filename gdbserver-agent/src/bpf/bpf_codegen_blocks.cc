// The eBPF code generator's collection blocks: registers, memory, stack
// pieces and trace state variables, each written into the frame being built.
#include "bpf/bpf_codegen_generator.h"
#include "trace/compact_frame.h"

namespace gdbtrace::bpf::codegen {

// --- registers ---

Result<void> Generator::load_register(uint8_t dst, unsigned regno) {
  if (regno == GT_FS_BASE && opts_.task_fsbase_offset) {
    // current->thread.fsbase: kept up to date by arch_prctl(ARCH_SET_FS).
    a_.emit(call(BPF_FUNC_get_current_task));
    a_.emit(mov64_reg(R3, R0));
    a_.emit(alu64_imm(BPF_ADD, R3, int32_t(*opts_.task_fsbase_offset)));
    a_.emit(st_imm(BPF_DW, R10, kKey, 0));
    a_.emit(mov64_reg(R1, R10));
    a_.emit(alu64_imm(BPF_ADD, R1, kKey));
    a_.emit(mov64_imm(R2, 8));
    a_.emit(call(BPF_FUNC_probe_read_kernel));
    a_.emit(ldx(BPF_DW, dst, R10, kKey));
    return ok();
  }
  int off = pt_regs_offset(regno);
  if (off < 0)
    return refuse("register " + std::to_string(regno) + " is not visible to a uprobe");
  uint8_t size = BPF_DW;
  if (regno == GT_EFLAGS)
    size = BPF_W;
  if (regno == GT_CS || regno == GT_SS)
    size = BPF_H;
  a_.emit(ldx(size, dst, R6, int16_t(off)));
  return ok();
}

// The compact register block (trace/compact_frame.h): the tag, then a u64 per register
// the uprobe can read; the collector spreads them over the 'R' block.
void Generator::registers_block() {
  uint32_t n = opts_.regblock_size;
  out_.registers.assign(GT_NUM_REGS_AVX, false);
  out_.compact_registers.clear(); // `collect $regs` twice writes the same block twice
  bool fsbase = register_available(GT_FS_BASE, opts_);
  if (fsbase) {
    (void)load_register(R4, GT_FS_BASE); // the helper calls clobber r1-r5: read it first
    a_.emit(stx(BPF_DW, R10, kAddr, R4));
  }
  a_.emit(mov64_reg(R1, R7));
  a_.emit(alu64_reg(BPF_ADD, R1, R8));
  a_.emit(st_imm(BPF_B, R1, 0, GT_TFRAME_COMPACT_REGS));
  int32_t at = 1;
  for (unsigned r = 0; r < GT_NUM_REGS_AVX; r++) {
    if (gt_reg_offset(r) + gt_reg_size(r) > n)
      continue;
    if (r == GT_FS_BASE && fsbase) {
      a_.emit(ldx(BPF_DW, R2, R10, kAddr));
    } else if (pt_regs_offset(r) >= 0) {
      (void)load_register(R2, r); // narrower registers are zero-extended
    } else {
      continue;
    }
    a_.emit(stx(BPF_DW, R1, int16_t(at), R2));
    at += 8;
    out_.registers[r] = true;
    out_.compact_registers.push_back(r);
  }
  a_.emit(alu64_imm(BPF_ADD, R8, at));
  out_.frame_max += uint32_t(at);
}

// --- memory blocks ---

// 'M' + addr + u16 len + bytes at r7+r8, address in kAddr. Unreadable memory
// leaves the block out (gdb then shows <unavailable>), without a branch so the
// verifier sees one path: r8 += ok * (kMemHeader + len).
void Generator::memory_block_const(uint32_t len, std::optional<uint32_t> error_pc) {
  for (uint32_t done = 0; done < len;) {
    uint32_t n = std::min<uint32_t>(len - done, GT_TFRAME_MEM_MAX);
    a_.emit(mov64_reg(R1, R7));
    a_.emit(alu64_reg(BPF_ADD, R1, R8));
    a_.emit(st_imm(BPF_B, R1, 0, GT_TFRAME_MEM));
    a_.emit(ldx(BPF_DW, R3, R10, kAddr));
    if (done)
      a_.emit(alu64_imm(BPF_ADD, R3, int32_t(done)));
    a_.emit(stx(BPF_DW, R1, kMemAddr, R3));
    a_.emit(st_imm(BPF_H, R1, kMemLen, int32_t(n)));
    read_user([&] {
      a_.emit(mov64_reg(R1, R7));
      a_.emit(alu64_reg(BPF_ADD, R1, R8));
      a_.emit(alu64_imm(BPF_ADD, R1, kMemHeader));
      a_.emit(mov64_imm(R2, int32_t(n)));
      a_.emit(ldx(BPF_DW, R3, R10, kAddr));
      if (done)
        a_.emit(alu64_imm(BPF_ADD, R3, int32_t(done)));
    });
    if (error_pc) {
      int readable = a_.new_label();
      a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), readable);
      raise(AX_ERR_MEM, *error_pc, false);
      a_.bind(readable);
      a_.emit(alu64_imm(BPF_ADD, R8, int32_t(kMemHeader + n)));
    } else {
      a_.emit(alu64_imm(BPF_RSH, R0, 63)); // 1 on error (negative), 0 on success
      a_.emit(alu64_imm(BPF_XOR, R0, 1));
      a_.emit(alu64_imm(BPF_MUL, R0, int32_t(kMemHeader + n)));
      a_.emit(alu64_reg(BPF_ADD, R8, R0));
    }
    out_.frame_max += kMemHeader + n;
    done += n;
  }
}

// Same with the length in SIZE_REG (already bounded by MAX). NZ: tracenz, stop
// after the first NUL (collected too): read MAX+1 bytes with
// probe_read_user_str, which returns the bytes copied including the NUL it
// adds; a return of size+1 means no NUL within size bytes, so size are kept.
void Generator::memory_block_dynamic(uint8_t size_reg, bool nz, uint32_t max, uint32_t error_pc) {
  a_.emit(mov64_reg(R9, size_reg)); // callee-saved: keeps its verifier bounds across the call
  a_.emit(mov64_reg(R1, R7));
  a_.emit(alu64_reg(BPF_ADD, R1, R8));
  a_.emit(st_imm(BPF_B, R1, 0, GT_TFRAME_MEM));
  a_.emit(ldx(BPF_DW, R3, R10, kAddr));
  a_.emit(stx(BPF_DW, R1, kMemAddr, R3));
  a_.emit(alu64_imm(BPF_ADD, R1, kMemHeader));
  a_.emit(mov64_reg(R2, R9));
  if (!nz) {
    a_.emit(stx(BPF_H, R1, kMemLen - kMemHeader, R9));
    read_user([&] {
      a_.emit(mov64_reg(R1, R7));
      a_.emit(alu64_reg(BPF_ADD, R1, R8));
      a_.emit(alu64_imm(BPF_ADD, R1, kMemHeader));
      a_.emit(mov64_reg(R2, R9));
      a_.emit(ldx(BPF_DW, R3, R10, kAddr));
    });
    int readable = a_.new_label();
    a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), readable);
    raise(AX_ERR_MEM, error_pc, false);
    a_.bind(readable);
    a_.emit(alu64_imm(BPF_ADD, R9, kMemHeader));
    a_.emit(alu64_reg(BPF_ADD, R8, R9));
    out_.frame_max += kMemHeader + max;
    return;
  }
  int positive = a_.new_label(), have = a_.new_label();
  if (opts_.sleepable) {
    // probe_read_user_str never faults pages in, so a string on a page the
    // tracee has not touched yet (e.g. .rodata) would read as unreadable.
    // Touch its first byte with copy_from_user (which may fault) first; its
    // result does not matter, the string read below decides.
    a_.emit(mov64_imm(R2, 1));
    a_.emit(call(BPF_FUNC_copy_from_user));
    a_.emit(mov64_reg(R1, R7));
    a_.emit(alu64_reg(BPF_ADD, R1, R8));
    a_.emit(alu64_imm(BPF_ADD, R1, kMemHeader));
    a_.emit(ldx(BPF_DW, R3, R10, kAddr));
    a_.emit(mov64_reg(R2, R9));
  }
  a_.emit(alu64_imm(BPF_ADD, R2, 1));
  a_.emit(call(BPF_FUNC_probe_read_user_str));
  // r0: bytes copied incl. the NUL (1..size+1), or negative: unreadable.
  a_.jump(jmp_imm(BPF_JSGT, R0, 0, 0), positive);
  raise(AX_ERR_MEM, error_pc, false);
  a_.bind(positive);
  a_.jump(jmp_reg(BPF_JLE, R0, R9, 0), have);
  a_.emit(mov64_reg(R0, R9));
  a_.bind(have);
  a_.emit(mov64_reg(R1, R7));
  a_.emit(alu64_reg(BPF_ADD, R1, R8));
  a_.emit(stx(BPF_H, R1, kMemLen, R0));
  a_.emit(alu64_imm(BPF_ADD, R0, kMemHeader));
  a_.emit(alu64_reg(BPF_ADD, R8, R0));
  out_.frame_max += kMemHeader + max + 1;
}

// One piece of a stack snapshot (trace/stack_actions.h), address in kAddr:
// read whole when it can be, else only the part before the next page
// boundary. Near the top of the stack the piece runs past the end of the
// mapping, and the bytes before that end hold the outermost frames an
// unwinder needs: a program started with a small environment has main's
// frame within one piece of the end, so leaving the whole piece out lost
// every caller. A piece is smaller than a page (at most 2 KiB), so it crosses
// at most one boundary, and the end of a mapping is one.
void Generator::stack_piece(uint32_t len) {
  int whole = a_.new_label(), done = a_.new_label();
  auto args = [&](uint8_t size_reg) {
    a_.emit(mov64_reg(R1, R7));
    a_.emit(alu64_reg(BPF_ADD, R1, R8));
    a_.emit(alu64_imm(BPF_ADD, R1, kMemHeader));
    if (size_reg == R0)
      a_.emit(mov64_imm(R2, int32_t(len)));
    else
      a_.emit(mov64_reg(R2, size_reg));
    a_.emit(ldx(BPF_DW, R3, R10, kAddr));
  };
  a_.emit(mov64_reg(R1, R7));
  a_.emit(alu64_reg(BPF_ADD, R1, R8));
  a_.emit(st_imm(BPF_B, R1, 0, GT_TFRAME_MEM));
  a_.emit(ldx(BPF_DW, R3, R10, kAddr));
  a_.emit(stx(BPF_DW, R1, kMemAddr, R3));
  a_.emit(st_imm(BPF_H, R1, kMemLen, int32_t(len)));
  read_user([&] { args(R0); });
  a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), whole);
  // r9 = 4096 - (addr & 4095): 1..4096 bytes up to the next page boundary.
  a_.emit(ldx(BPF_DW, R9, R10, kAddr));
  a_.emit(alu64_imm(BPF_AND, R9, 4095));
  a_.emit(mov64_imm(R2, 4096));
  a_.emit(alu64_reg(BPF_SUB, R2, R9));
  a_.emit(mov64_reg(R9, R2));
  a_.jump(jmp_imm(BPF_JGE, R9, int32_t(len), 0), done); // no boundary inside: the piece is lost
  a_.emit(mov64_reg(R1, R7));
  a_.emit(alu64_reg(BPF_ADD, R1, R8));
  a_.emit(stx(BPF_H, R1, kMemLen, R9));
  read_user([&] { args(R9); });
  a_.jump(jmp_imm(BPF_JNE, R0, 0, 0), done);
  a_.emit(alu64_imm(BPF_ADD, R9, kMemHeader));
  a_.emit(alu64_reg(BPF_ADD, R8, R9));
  a_.ja(done);
  a_.bind(whole);
  a_.emit(alu64_imm(BPF_ADD, R8, int32_t(kMemHeader + len)));
  a_.bind(done);
  out_.frame_max += kMemHeader + len;
}

Result<void> Generator::memory_action(const CollectMemory& m) {
  if (m.basereg >= 0) {
    if (!register_available(unsigned(m.basereg), opts_))
      return refuse("register " + std::to_string(m.basereg) + " is not visible to a uprobe");
    if (auto r = load_register(R0, unsigned(m.basereg)); !r)
      return r;
    a_.emit(ld_imm64(R1, uint64_t(m.offset)));
    a_.emit(alu64_reg(BPF_ADD, R0, R1));
    a_.emit(stx(BPF_DW, R10, kAddr, R0));
  } else {
    store_const(kAddr, uint64_t(m.offset));
  }
  if (m.stack && m.length <= GT_TFRAME_MEM_MAX && m.length < 4096)
    stack_piece(m.length);
  else
    memory_block_const(m.length, std::nullopt);
  return ok();
}

void Generator::load_tsv(uint8_t dst, uint32_t number, uint32_t index) {
  if (opts_.timestamp_tsv && number == *opts_.timestamp_tsv) {
    a_.emit(call(BPF_FUNC_ktime_get_ns));
    a_.emit(alu64_imm(BPF_DIV, R0, 1000));
    if (opts_.timestamp_offset_us) {
      a_.emit(ld_imm64(R1, uint64_t(opts_.timestamp_offset_us)));
      a_.emit(alu64_reg(BPF_ADD, R0, R1));
    }
    if (dst != R0)
      a_.emit(mov64_reg(dst, R0));
    return;
  }
  a_.emit(ld_map_value(R1, maps_.tsv_fd, index * 8));
  a_.emit(ldx(BPF_DW, dst, R1, 0));
}

void Generator::tsv_block(uint32_t number, uint32_t index) {
  load_tsv(R2, number, index);
  a_.emit(mov64_reg(R1, R7));
  a_.emit(alu64_reg(BPF_ADD, R1, R8));
  a_.emit(st_imm(BPF_B, R1, 0, GT_TFRAME_TSV));
  a_.emit(st_imm(BPF_W, R1, GT_TFRAME_TSV_NUM_OFFSET, int32_t(number)));
  a_.emit(stx(BPF_DW, R1, GT_TFRAME_TSV_VALUE_OFFSET, R2));
  a_.emit(alu64_imm(BPF_ADD, R8, kTsvBlock));
  out_.frame_max += kTsvBlock;
}

Result<uint32_t> Generator::tsv(uint32_t number) {
  if (opts_.timestamp_tsv && number == *opts_.timestamp_tsv)
    return 0u;
  auto idx = opts_.tsv_index ? opts_.tsv_index(number) : std::nullopt;
  if (!idx)
    return refuse("no room for trace state variable " + std::to_string(number));
  return *idx;
}

} // namespace gdbtrace::bpf::codegen
