// The jump pad's shared area in one traced process: a memfd the tracee
// creates and maps by system calls the stub injects (no LD_PRELOAD: works on
// `run` and `attach`), mapped by the stub too so it writes pad code and
// switches and reads the rings. jumppad_layout.h is its layout.
//
// A process whose sites lie further apart than a rel32 jump (an executable
// and libc: ~40 TB apart) gets the area mapped again near the far sites
// (`view_for`): the same pages (mremap of the shared mapping, no second
// memfd), so tp slots, TSVs, rings and code are one; a pad is emitted for the
// view its site reaches and addresses everything through it.
//
// The area is never unmapped from the tracee: a thread preempted inside a pad
// at tstop, or holding a pad address in a signal frame, must find it there.
// Pad code is bump-allocated and never overwritten; a tp slot serves one site
// (the collector gives it back to the same site's location in a later run).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "jumppad/jumppad_layout.h"
#include "target/native_target.h"
#include "target/proc_files.h"

namespace gdbtrace::jumppad {

// Where to map SIZE bytes so every byte is within a rel32 jump of SITE: the
// free gap nearest SITE between the mappings MAPS (sorted, as /proc/PID/maps).
Result<uint64_t> choose_address(const std::vector<procfs::MapsEntry>& maps, uint64_t site,
                                uint64_t size);

// The rings at RING_BASE (TAILS.size() rings of SLOTS slots, ring_stride
// bytes each): init_rings makes them empty; take_records copies out the
// committed records (the tracee may rewrite a slot at any time: nothing is
// read twice, at most one lap per ring per call) and frees their slots.
void init_rings(uint8_t* ring_base, uint32_t rings, uint32_t slots);
std::vector<Record> take_records(uint8_t* ring_base, uint32_t slots, std::vector<uint64_t>& tails);
// At most MAX positions of each ring, their records appended to OUT. Returns
// the largest stamp a later record of a ring cut at MAX may come after (the
// smallest of those rings' last stamps: records stamped later may be preceded
// by ones not yet taken), UINT64_MAX when no ring was cut.
uint64_t take_batch(uint8_t* ring_base, uint32_t slots, std::vector<uint64_t>& tails, uint32_t max,
                    std::vector<Record>& out);
// The most records any ring holds past the stub's position (TAILS), read from
// the ring heads at HEADS (kRingHeadsOffset) without touching a slot. The heads
// are the tracee's to write: garbage only makes this large (a drain, harmless).
uint64_t ring_backlog(const uint8_t* heads, const std::vector<uint64_t>& tails);

class Area {
public:
  // Creates the memfd in PID (every thread stopped), maps it near SITE, and
  // maps it here. SITE also lends two bytes of code for the injected syscalls.
  // The rings are sized for a run that stages STAGING bytes (kept for the
  // area's life: it is never unmapped).
  static Result<std::unique_ptr<Area>> create(NativeTarget& target, Pid pid, uint64_t site,
                                              size_t staging);

  // Still the same mapping in the same process (a pid can be reused).
  bool still_mapped(Pid pid) const;
  // The tracee address of a mapping of the area (a view) with every byte
  // within rel32 reach of SITE: an existing one, or a new one mapped near SITE
  // (every thread stopped; SITE lends two bytes for the injected syscalls).
  Result<uint64_t> view_for(NativeTarget& target, Pid pid, uint64_t site);
  size_t views() const { return views_.size(); }

  // The armed word of VIEW: the first byte of the private page just below it.
  static uint64_t armed(uint64_t view) { return view - kArmedPage; }
  static constexpr uint64_t kArmedPage = 4096;
  uint8_t* local() const { return static_cast<uint8_t*>(map_.get()); }
  uint32_t rings() const { return rings_; }
  uint32_t slots() const { return slots_; }
  uint32_t ring_stride() const { return uint32_t(jumppad::ring_stride(slots_)); }

  TpSlot& tp_slot(uint32_t i) const {
    return reinterpret_cast<TpSlot*>(local() + kTpSlotsOffset)[i];
  }
  // The guard word (jumppad_guard.h), in the stub's mapping.
  uint32_t* guard() const { return reinterpret_cast<uint32_t*>(local() + kGuardOffset); }
  int64_t& tsv(uint32_t i) const { return reinterpret_cast<int64_t*>(local() + kTsvOffset)[i]; }
  Result<uint32_t> new_tp_slot();
  uint32_t tp_slots_used() const { return tp_slots_used_; }
  // The TSV table index of TSV NUMBER (allocated on first use).
  Result<uint32_t> tsv_index(uint32_t number);
  std::optional<uint32_t> find_tsv(uint32_t number) const {
    auto it = tsv_index_.find(number);
    return it == tsv_index_.end() ? std::nullopt : std::optional<uint32_t>(it->second);
  }
  // Copies CODE into the code region; returns its tracee address in VIEW.
  Result<uint64_t> place_code(const std::vector<uint8_t>& code, uint64_t view);
  uint64_t next_code(uint64_t view) const { return view + kCodeOffset + code_used_; }

  std::vector<Record> take_records() {
    return jumppad::take_records(local() + kRingOffset, slots_, tails_);
  }
  uint64_t take_batch(uint32_t max, std::vector<Record>& out) {
    return jumppad::take_batch(local() + kRingOffset, slots_, tails_, max, out);
  }
  uint64_t ring_backlog() const {
    return jumppad::ring_backlog(local() + kRingHeadsOffset, tails_);
  }

private:
  Area() = default;

public:
  ~Area();

private:
  UniqueFd fd_;
  Mapping below_; // the private page under map_: the guard word's robust-list entry
  Mapping map_;
  bool reaches(uint64_t view, uint64_t site) const;
  uint64_t remote_ = 0, size_ = 0;
  std::vector<uint64_t> views_; // views_[0] == remote_, the mapping made at create
  uint32_t rings_ = 0, slots_ = 0;
  uint64_t ring_stride_ = 0;
  uint64_t code_used_ = 0;
  uint32_t tp_slots_used_ = 0;
  std::map<uint32_t, uint32_t> tsv_index_;
  std::vector<uint64_t> tails_; // the stub's consumer position per ring
};

} // namespace gdbtrace::jumppad
