// The eBPF collector's lookups into its probe list (a vector the records, the
// status and the pass counts index by position): by slot (one load per
// record), by location (tracepoint number, address: per status row), by site
// (process, address: the probes sharing one uprobe) and the probes with a pass
// count. Removing one probe is O(log n): the list swaps its last probe into the
// hole and pops (its order means nothing), and the index moves that one
// probe's entries; rebuilding the index after each removal made removing
// thousands of tracepoints during a run quadratic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

namespace gdbtrace::bpf_collector_internal {

// What the index knows of the probe at one position (fixed for its lifetime).
struct ProbeKeys {
  uint32_t slot = 0;
  uint32_t tp = 0;
  uint64_t address = 0;
  int pid = 0;
  bool pass_counted = false; // its tracepoint has a pass count
};

class ProbeIndex {
public:
  static constexpr uint32_t kNoProbe = UINT32_MAX;
  using Location = std::pair<uint32_t, uint64_t>; // tracepoint number, address
  using Site = std::pair<int, uint64_t>;          // pid, address

  size_t size() const { return keys_.size(); }
  // The probe appended at position size().
  void add(const ProbeKeys& k);
  // Position POS leaves; the last position moves into it (as the probe list
  // does with std::swap + pop_back). Returns the position that moved (or POS
  // itself when POS was the last).
  size_t remove(size_t pos);
  void clear();

  // Position of SLOT's probe, or kNoProbe.
  uint32_t at_slot(uint32_t slot) const {
    return slot < by_slot_.size() ? by_slot_[slot] : kNoProbe;
  }
  std::span<const size_t> at_location(uint32_t tp, uint64_t address) const;
  std::span<const size_t> at_site(int pid, uint64_t address) const;
  const std::vector<size_t>& pass_counted() const { return pass_counted_; }

  // Index entries written since construction: what keeping the index costs
  // (a test bounds it per removal, where a timing would be flaky).
  uint64_t writes() const { return writes_; }

private:
  template <class Key>
  void move_entry(std::map<Key, std::vector<size_t>>& m, const Key& key, size_t from, size_t to);
  void unlink(size_t pos);
  void link(size_t pos);

  std::vector<ProbeKeys> keys_; // by position
  std::vector<uint32_t> by_slot_;
  std::map<Location, std::vector<size_t>> by_location_;
  std::map<Site, std::vector<size_t>> by_site_;
  std::vector<size_t> pass_counted_; // positions
  std::vector<size_t> pass_entry_;   // by position: its index in pass_counted_, if counted
  uint64_t writes_ = 0;
};

} // namespace gdbtrace::bpf_collector_internal
