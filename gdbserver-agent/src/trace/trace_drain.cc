// The engine's drains: every collector's staged frames into the trace buffer,
// in hit order across collectors that stamp their hits, and the heartbeat
// that drains while a run goes on.
#include <chrono>

#include "trace/trace_engine_impl.h"

namespace gdbtrace {

namespace {
// Kernel collectors stage frames in their rings and wake the stub when a ring
// passes a fill mark (half full, eBPF and module alike), and everything that
// reads frames or counts (qTStatus, qTP, qTBuffer, tfind, tsave, tstop)
// drains first (a ptrace hit does not: docs/collectors.md); this heartbeat only bounds how long a
// trickle of frames waits. Every drain takes a CPU from the tracee's threads (~1 us per `collect
// $regs` frame on the VM of docs/benchmarks.md): at 50 ms, a burst of hits from two threads on two
// CPUs paid a third of that cost during the burst, at one second it is paid when the burst has
// passed or the ring needs it.
// Between beats, a tick every kIdleTick does the work that can wait for an
// idle CPU, when one is idle: it drains what the rings hold below their marks
// (left there, those frames were drained during the next burst, on a CPU a
// traced thread wanted) and makes the buffer's next pages present
// (TraceBuffer::prepare_idle). Two threads on two CPUs draining into a 1 GB
// buffer through 1 MB rings scaled 0.77-0.85x the raw floor's before it (and
// the other changes of docs/benchmarks.md's "Thread rows: the drain's page
// work moved to idle time"), 0.93x in the median round after.
constexpr auto kDrainPeriod = std::chrono::seconds(1);
constexpr auto kIdleTick = std::chrono::milliseconds(10);
constexpr int kTicksPerPeriod = int(kDrainPeriod / kIdleTick);
constexpr int kIdleBatches = 4; // of TraceBuffer::prepare_idle's 1 MB: 4 MB a tick
} // namespace

void TraceEngine::Impl::drain_all() {
  hold_frames = several_stamping_collectors();
  for (auto& c : collectors)
    c->drain();
  hold_frames = false;
  held.release([this](std::span<const uint8_t> frame, const RegisterMask* compact,
                      uint64_t address) { append(frame, compact, address); });
  stream_new_frames(); // a drain's frames in few large writes
}

bool TraceEngine::Impl::several_stamping_collectors() const {
  const Collector* first = nullptr;
  for (const auto& e : tracepoints) {
    if (!e->installed || !e->collector || !(e->collector->caps() & Collector::kStampsHits))
      continue;
    if (first && first != e->collector)
      return true;
    first = e->collector;
  }
  return false;
}

// gdb reads counts with one qTP per location (tstatus, info tracepoints), and
// a drain costs a kernel collector time in proportion to its probes (eBPF
// reads each probe's stats slot): a drain per qTP made one tstatus of n
// tracepoints O(n^2). With the process stopped and not resumed since the last
// drain, no probe can have fired (a probe hits only in the traced process).
void TraceEngine::Impl::drain_for_counts() {
  std::optional<uint64_t> epoch = target.stopped_epoch(traced_pid);
  if (epoch && drained_stopped_epoch == epoch)
    return;
  drain_all();
  drained_stopped_epoch = epoch;
}

void TraceEngine::Impl::arm_drain_timer() {
  drain_timer.expires_after(kIdleTick);
  drain_timer.async_wait([this](const std::error_code& ec) {
    if (ec || !running)
      return;
    bool beat = ++drain_ticks >= kTicksPerPeriod;
    if (beat) {
      drain_all();
    } else {
      // While a CPU is idle: up to kIdleBatches of prepare_idle, each after a
      // drain. The rings fill while the stub's thread makes pages present: a
      // thread at the floor's rate writes ~0.5 MB of its 1 MB ring in 1.5 ms,
      // and a 4-thread bench round lost 136 frames with 4 MB between drains.
      for (int i = 0; i < kIdleBatches && running && idle_cpu_for_drain(); ++i) {
        drain_all();
        if (!buffer.prepare_idle())
          break;
      }
    }
    if (!running)
      return;
    if (beat) {
      drain_ticks = 0;
      drain_placement.place(traced_pid); // threads come and go, masks change
    }
    arm_drain_timer();
  });
}

} // namespace gdbtrace
