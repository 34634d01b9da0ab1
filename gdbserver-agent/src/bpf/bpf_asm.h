// A tiny assembler for generated BPF code: an instruction vector with labels
// and forward/backward jump fix-ups (BPF jump offsets count instructions).
#pragma once

#include <cstdint>
#include <vector>

#include "bpf/bpf_insn.h"

namespace gdbtrace::bpf {

class Assembler {
public:
  int new_label() {
    labels_.push_back(-1);
    return int(labels_.size() - 1);
  }
  void bind(int label) { labels_[label] = int(code_.size()); }
  bool bound(int label) const { return labels_[label] >= 0; }
  // Whether any jump targets LABEL (the verifier rejects unreachable code).
  bool referenced(int label) const {
    for (const auto& f : fixups_)
      if (f.label == label)
        return true;
    return false;
  }

  void emit(const bpf_insn& i) { code_.push_back(i); }
  void emit(const Wide& w) {
    code_.push_back(w.lo);
    code_.push_back(w.hi);
  }
  // Emit a jump instruction (any BPF_JMP op) whose target is LABEL.
  void jump(const bpf_insn& j, int label) {
    fixups_.push_back({int(code_.size()), label});
    code_.push_back(j);
  }
  void ja(int label) { jump(bpf::ja(0), label); }

  void patch(size_t at, const bpf_insn& i) { code_[at] = i; }
  size_t size() const { return code_.size(); }

  // Resolve jumps; false if a label was never bound or is out of range.
  bool finish(std::vector<bpf_insn>& out) {
    for (const auto& f : fixups_) {
      int target = labels_[f.label];
      if (target < 0)
        return false;
      int off = target - (f.at + 1);
      if (off < INT16_MIN || off > INT16_MAX)
        return false;
      code_[f.at].off = int16_t(off);
    }
    out = code_;
    return true;
  }

private:
  struct Fixup {
    int at, label;
  };
  std::vector<bpf_insn> code_;
  std::vector<int> labels_;
  std::vector<Fixup> fixups_;
};

} // namespace gdbtrace::bpf
