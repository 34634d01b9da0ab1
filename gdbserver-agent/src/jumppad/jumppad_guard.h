// The jump pad areas' guard words (jumppad_layout.h kGuardOffset): what keeps
// a memory-reading pad from crashing the tracee once the stub, whose ptrace
// fault fixup makes its reads safe, is gone.
//
// Each word is named in the stub's tracer thread's robust futex list
// (set_robust_list) and holds that thread's tid while pads may read memory.
// However the thread ends (SIGKILL included), the kernel walks the list in
// exit_mm, before exit_notify detaches the tracees, and marks each word holding
// its tid "owner died" (FUTEX_OWNER_DIED, tid bits 0): the pads test the tid
// bits and read nothing from then on. The list entries live in stub-private
// memory (a page the area keeps just below its shared mapping), never in the
// area the tracee can write: only the words themselves are shared.
//
// This replaces glibc's robust list for the tracer thread: the stub uses no
// robust mutexes (tests/lint would be the place to keep it so).
#pragma once

#include <cstdint>

namespace gdbtrace::jumppad::guard {

// Bytes from an entry to its word (the robust list's futex_offset): the entry
// sits in the private page below the area's shared mapping.
inline constexpr long kEntryToWord = 4096;
// The bits the pads test: the tid (FUTEX_TID_MASK).
inline constexpr uint32_t kTidMask = 0x3fffffff;

// Puts WORD (in a local mapping; WORD - kEntryToWord private and writable) in
// the calling thread's robust list, registers the list with the kernel for
// that thread, and stores the thread's tid in WORD: pads may read memory.
// Call it from the tracer thread. False (WORD left 0) when the kernel refuses
// the list: then nothing would clear WORD at the stub's death.
bool arm(uint32_t* word);
// Pads read no memory any more (WORD = 0); WORD stays listed.
void disarm(uint32_t* word);
// WORD is about to be unmapped: disarmed and taken off the list.
void forget(uint32_t* word);
// Every listed word to 0: the fatal-signal path, before it detaches the
// tracees (async-signal-safe: plain stores, no allocation).
void disarm_all();

} // namespace gdbtrace::jumppad::guard
