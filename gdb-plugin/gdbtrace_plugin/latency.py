"""Pairing function entries with returns (no gdb import).

At a function's first instruction rsp points at the return address; at each
`ret` it points there again (the frame has been popped). So an entry and the
return of the same call share (thread, rsp); recursion and other threads get
different rsp values. Events are paired in timestamp order with a stack per key.
"""

import re

RET = re.compile(r"^\s*(?:(?:rep|repz|bnd|notrack)\s+)*ret[lqw]?\b")


def is_return(asm):
    """Whether a disassembled instruction (gdb's AT&T text) returns."""
    return bool(RET.match(asm))


class Pairing:
    def __init__(self):
        self.durations = []  # (entry_ts, duration, key)
        self.unmatched_returns = 0
        self.open_entries = 0


def pair_calls(events):
    """EVENTS: iterable of (ts, order, kind, key), kind 'entry' or 'return'.
    Returns a Pairing: durations of matched calls, counts of returns without an
    entry (the call began before tracing) and entries without a return (still
    running, or its return frame was dropped)."""
    open_calls = {}
    result = Pairing()
    for ts, _order, kind, key in sorted(events, key=lambda e: (e[0], e[1])):
        if kind == "entry":
            open_calls.setdefault(key, []).append(ts)
        else:
            stack = open_calls.get(key)
            if stack:
                start = stack.pop()
                result.durations.append((start, ts - start, key))
            else:
                result.unmatched_returns += 1
    result.open_entries = sum(len(s) for s in open_calls.values())
    return result
