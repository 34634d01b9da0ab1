#include "jumppad/jumppad_guard.h"

#include <atomic>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace gdbtrace::jumppad::guard {
namespace {

// The list the kernel walks at the tracer thread's exit. Only the tracer
// thread changes it; the fatal-signal handler and the kernel only walk it, so
// an entry is linked by one pointer store after it is complete.
robust_list_head head = {{&head.list}, kEntryToWord, nullptr};
pid_t registered_tid = 0; // the thread whose robust list is `head`

uint32_t* word_of(robust_list* entry) {
  return reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(entry) + kEntryToWord);
}

robust_list* entry_of(uint32_t* word) {
  return reinterpret_cast<robust_list*>(reinterpret_cast<char*>(word) - kEntryToWord);
}

void store(uint32_t* word, uint32_t v) {
  std::atomic_ref<uint32_t>(*word).store(v, std::memory_order_release);
}

} // namespace

bool arm(uint32_t* word) {
  const pid_t tid = pid_t(syscall(SYS_gettid));
  if (registered_tid != tid) { // the word must hold the tid of a thread listing it
    if (syscall(SYS_set_robust_list, &head, sizeof head) != 0)
      return false;
    registered_tid = tid;
  }
  robust_list* e = entry_of(word);
  bool listed = false;
  for (robust_list* p = head.list.next; p != &head.list; p = p->next)
    listed |= p == e;
  if (!listed) {
    e->next = head.list.next;
    std::atomic_ref<robust_list*>(head.list.next).store(e, std::memory_order_release);
  }
  store(word, uint32_t(tid) & kTidMask);
  return true;
}

void disarm(uint32_t* word) {
  store(word, 0);
}

void forget(uint32_t* word) {
  store(word, 0);
  robust_list* e = entry_of(word);
  for (robust_list* p = &head.list; p->next != &head.list; p = p->next)
    if (p->next == e) {
      p->next = e->next;
      return;
    }
}

void disarm_all() {
  for (robust_list* p = head.list.next; p != &head.list; p = p->next)
    store(word_of(p), 0);
}

} // namespace gdbtrace::jumppad::guard
