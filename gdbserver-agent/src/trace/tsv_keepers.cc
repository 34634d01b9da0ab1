// Trace state variables that several collectors keep in one run.
//
// A kernel collector keeps the TSVs its tracepoints use in its own memory (a
// BPF map, the module's table, the jump pad's shared area), the ptrace
// collector in the engine's (TsvEntry::value), each copy starting the run at
// the engine's value. When the tracepoints using one variable run in two
// collectors (`ftrace` in the jump pad beside `trace` in eBPF, or a tracepoint
// the eBPF collector cannot compile beside one it can), each copy sees only
// its own collector's hits. `$v = $v + K` everywhere still adds up: the value
// is the start plus what every copy added. A tracepoint that reads or sets the
// variable would see (and record) a wrong value: such a run is refused, with
// the reason, rather than give gdb wrong data.
#include <set>

#include "trace/trace_engine_impl.h"
#include "trace/tsv_increment.h"

namespace gdbtrace {

void TraceEngine::Impl::note_tsv_start() {
  tsv_start.clear();
  tsv_keepers.clear();
  for (const auto& [number, tsv] : tsvs)
    if (!tsv.builtin)
      tsv_start[number] = tsv.value;
}

namespace {
// Calls FN(number, adds_only) for each use of a kept TSV by TP (not builtins
// such as $trace_timestamp, a clock every collector reads): adds_only for an
// action that is `$number = $number + K` and nothing else.
template <class Fn>
void for_each_tsv_use(const Tracepoint& tp, const std::map<uint32_t, TsvEntry>& tsvs, Fn&& fn) {
  auto note = [&](const AgentExpr& x, bool action) {
    const auto inc = action ? tsv_increment(x) : std::nullopt;
    for (const auto* list : {&x.tsvs_read, &x.tsvs_written})
      for (uint32_t n : *list)
        if (auto it = tsvs.find(n); it == tsvs.end() || !it->second.builtin)
          fn(n, inc && inc->number == n);
  };
  if (tp.has_condition)
    note(tp.condition, false);
  for (const auto* list : {&tp.actions, &tp.step_actions})
    for (const auto& a : *list)
      if (auto* x = std::get_if<CollectExpr>(&a))
        note(x->expr, true);
}
} // namespace

// Why ENTRY's TSV increments cannot be kept apart from the others' copies:
// another tracepoint reads or sets one of them; empty when none does.
std::string TraceEngine::Impl::shared_tsv_conflict(const TracepointEntry& entry) const {
  std::set<uint32_t> adds;
  for_each_tsv_use(entry.tp, tsvs, [&](uint32_t n, bool adds_only) {
    if (adds_only)
      adds.insert(n);
  });
  std::string why;
  for (const auto& e : tracepoints) {
    if (e.get() == &entry || e->tp.number == entry.tp.number || !why.empty())
      continue;
    for_each_tsv_use(e->tp, tsvs, [&](uint32_t n, bool adds_only) {
      if (!adds_only && adds.count(n) && why.empty()) {
        auto it = tsvs.find(n);
        why = "tracepoint " + std::to_string(e->tp.number) + " reads or sets $" +
              (it != tsvs.end() ? it->second.name : std::to_string(n)) + ", which this one adds to";
      }
    });
  }
  return why;
}

Result<void> TraceEngine::Impl::check_shared_tsvs() {
  struct Use {
    const TracepointEntry* e;
    bool adds_only; // `$v = $v + K`, the whole action
  };
  std::map<uint32_t, std::vector<Use>> uses;
  std::set<Collector*> keepers;
  for (const auto& e : tracepoints) {
    if (!e->installed || !e->collector)
      continue;
    keepers.insert(e->collector);
    for_each_tsv_use(e->tp, tsvs, [&](uint32_t n, bool adds_only) {
      uses[n].push_back({e.get(), adds_only});
    });
  }
  tsv_keepers.assign(keepers.begin(), keepers.end());
  for (const auto& [number, list] : uses) {
    std::set<Collector*> by;
    for (const Use& u : list)
      by.insert(u.e->collector);
    if (by.size() < 2)
      continue;
    const Use* bad = nullptr;
    for (const Use& u : list)
      if (!u.adds_only && !bad)
        bad = &u;
    if (!bad)
      continue; // increments only: summed (kept_tsv_value)
    std::string who;
    std::set<std::pair<uint32_t, Collector*>> named;
    for (const Use& u : list)
      if (named.insert({u.e->tp.number, u.e->collector}).second)
        who += (who.empty() ? "" : ", ") + std::to_string(u.e->tp.number) + " in " +
               u.e->collector->name();
    auto it = tsvs.find(number);
    const std::string name = it != tsvs.end() && !it->second.name.empty()
                                 ? "$" + it->second.name
                                 : "number " + std::to_string(number);
    return make_error(EINVAL, "trace state variable " + name +
                                  " is used by tracepoints that different collectors serve (" +
                                  who + ") and tracepoint " + std::to_string(bad->e->tp.number) +
                                  " reads or sets it: each collector keeps its own copy and "
                                  "would not see the others' changes (only `teval " +
                                  name + " = " + name +
                                  " + K` is shared, by adding up); `monitor gdbtrace backend "
                                  "NAME` puts every tracepoint in one collector");
  }
  return ok();
}

std::optional<int64_t> TraceEngine::Impl::tsv_seed(uint32_t number) {
  if (auto start = tsv_start.find(number); running && start != tsv_start.end())
    return start->second;
  return get_tsv(number);
}

std::optional<int64_t> TraceEngine::Impl::kept_tsv_value(uint32_t number) {
  auto value = get_tsv(number); // the engine's copy: the ptrace collector's
  auto start = tsv_start.find(number);
  if (!value || start == tsv_start.end())
    return value; // builtin, or defined after the run began: no collector has it
  uint64_t sum = uint64_t(*value);
  for (Collector* c : tsv_keepers)
    if (auto v = c->tsv_value(number))
      sum += uint64_t(*v) - uint64_t(start->second);
  return int64_t(sum);
}

} // namespace gdbtrace
