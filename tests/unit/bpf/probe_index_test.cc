// The eBPF collector's probe index (bpf/bpf_probe_index.h): after any mix of
// additions and removals it answers as an index rebuilt from scratch would,
// and removing one probe of thousands rewrites a few entries, not the index.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "bpf/bpf_probe_index.h"

namespace gdbtrace::bpf_collector_internal {
namespace {

// A probe list as the collector keeps it: removal swaps the last one in.
struct Model {
  std::vector<ProbeKeys> probes;
  ProbeIndex index;
  void add(const ProbeKeys& k) {
    probes.push_back(k);
    index.add(k);
  }
  void remove(size_t i) {
    std::swap(probes[i], probes.back());
    probes.pop_back();
    index.remove(i);
  }
};

ProbeKeys keys(uint32_t n, bool pass = false) {
  // Several tracepoints share an address (and a site), as gdb's `trace` twice at one line does.
  return {n, n, 0x1000 + 16 * uint64_t(n % 97), int(1 + n % 2), pass};
}

// What a rebuilt index would say, checked against the kept one.
void expect_consistent(const Model& m, uint32_t max_slot) {
  ASSERT_EQ(m.index.size(), m.probes.size());
  std::set<uint32_t> live;
  for (size_t i = 0; i < m.probes.size(); i++) {
    const ProbeKeys& k = m.probes[i];
    live.insert(k.slot);
    ASSERT_EQ(m.index.at_slot(k.slot), i);
    auto at = m.index.at_location(k.tp, k.address);
    EXPECT_EQ(std::count(at.begin(), at.end(), i), 1);
    auto site = m.index.at_site(k.pid, k.address);
    EXPECT_EQ(std::count(site.begin(), site.end(), i), 1);
  }
  for (uint32_t s = 0; s <= max_slot; s++)
    if (!live.count(s))
      EXPECT_EQ(m.index.at_slot(s), ProbeIndex::kNoProbe) << "slot " << s;
  std::multiset<size_t> counted(m.index.pass_counted().begin(), m.index.pass_counted().end());
  std::multiset<size_t> want;
  for (size_t i = 0; i < m.probes.size(); i++)
    if (m.probes[i].pass_counted)
      want.insert(i);
  EXPECT_EQ(counted, want);
  for (const auto& k : m.probes) { // the lists hold live positions only
    for (size_t i : m.index.at_location(k.tp, k.address))
      EXPECT_EQ(m.probes[i].tp, k.tp);
    for (size_t i : m.index.at_site(k.pid, k.address))
      EXPECT_TRUE(m.probes[i].pid == k.pid && m.probes[i].address == k.address);
  }
}

TEST(ProbeIndex, AnswersAsARebuiltIndexAfterAddsAndRemovals) {
  Model m;
  std::mt19937 rng(30);
  uint32_t next = 0;
  for (int step = 0; step < 3000; step++) {
    if (m.probes.empty() || rng() % 3) {
      m.add(keys(next, rng() % 4 == 0));
      next++;
    } else {
      m.remove(rng() % m.probes.size());
    }
    if (step % 250 == 0)
      expect_consistent(m, next);
  }
  expect_consistent(m, next);
  while (!m.probes.empty())
    m.remove(0);
  expect_consistent(m, next);
  EXPECT_TRUE(m.index.at_location(0, 0x1000).empty());
  EXPECT_TRUE(m.index.at_site(1, 0x1000).empty());
}

// Removing all of 10 000 probes one at a time, the first position each time
// (where an erase shifts, and a rebuild rewrites, every other probe's
// entries): a bounded number of entries per removal, not a rebuild each
// (which wrote ~50 million entries here).
TEST(ProbeIndex, RemovingOneRewritesAFewEntries) {
  constexpr uint32_t kProbes = 10000;
  Model m;
  for (uint32_t n = 0; n < kProbes; n++)
    m.add(keys(n, n % 2 == 0));
  uint64_t before = m.index.writes();
  while (!m.probes.empty())
    m.remove(0);
  uint64_t per_removal = (m.index.writes() - before) / kProbes;
  EXPECT_LE(per_removal, 12u) << "removals rewrote " << m.index.writes() - before << " entries";
  expect_consistent(m, kProbes);
}

} // namespace
} // namespace gdbtrace::bpf_collector_internal
