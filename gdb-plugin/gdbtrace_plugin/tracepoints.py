"""gdb's tracepoint definitions, read from `info tracepoints` (gdb 13's Python
API does not expose tracepoints: gdb.breakpoints() skips them). No gdb import:
`parse_info_tracepoints` takes the command's text.
"""

import re

_HEADER = re.compile(
    r"^(\d+)\s+((?:fast |static )?tracepoint)\s+\S+\s+([yn])\s+(0x[0-9a-fA-F]+|<MULTIPLE>|<PENDING>)\s*(.*)$"
)
_LOCATION = re.compile(r"^(\d+)\.(\d+)\s+([yn-])\s+(0x[0-9a-fA-F]+)\s*(.*)$")
_HITS = re.compile(r"^\ttracepoint already hit (\d+) times?")
_FUNC = re.compile(r"\bin (\S+)")


class Location:
    __slots__ = ("address", "enabled", "what")

    def __init__(self, address, enabled, what):
        self.address, self.enabled, self.what = address, enabled, what

    @property
    def function(self):
        m = _FUNC.match(self.what)
        return m.group(1) if m else None

    def __repr__(self):
        return "Location(0x%x, %r)" % (self.address, self.what)


class TracepointDef:
    """One tracepoint: number, kind, locations, and its collect expressions
    (`collect` lines, split at top-level commas, `/s` modifiers removed)."""

    def __init__(self, number, kind, enabled):
        self.number = number
        self.kind = kind
        self.enabled = enabled
        self.locations = []
        self.collect = []  # expressions collected at the hit
        self.step_collect = []  # expressions collected while stepping
        self.step_count = 0
        self.hits = None

    def label(self):
        where = self.locations[0].what if self.locations else ""
        m = re.search(r"in (\S+) at (\S+)", where)
        where = "%s (%s)" % (m.group(1), m.group(2).rsplit("/", 1)[-1]) if m else where
        return "tp %d %s" % (self.number, where) if where else "tp %d" % self.number

    def __repr__(self):
        return "TracepointDef(%d, %r, %r)" % (self.number, self.locations, self.collect)


def split_expressions(text):
    """'a, f(b, c), s.x' -> ['a', 'f(b, c)', 's.x'] (commas inside brackets or quotes stay)."""
    out, depth, cur, quote = [], 0, [], None
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _collect_items(line):
    """Expressions of one `collect` action line, or [] for other actions."""
    m = re.match(r"^collect(/\w+)?\s+(.*)$", line)
    if not m:
        return []
    return split_expressions(m.group(2))


def parse_info_tracepoints(text):
    """{number: TracepointDef} from `info tracepoints` output."""
    tps = {}
    cur = None
    stepping = False
    for raw in text.splitlines():
        m = _HEADER.match(raw)
        if m:
            number = int(m.group(1))
            cur = TracepointDef(number, m.group(2), m.group(3) == "y")
            tps[number] = cur
            stepping = False
            if m.group(4).startswith("0x"):
                cur.locations.append(Location(int(m.group(4), 16), cur.enabled, m.group(5).strip()))
            continue
        if cur is None:
            continue
        m = _LOCATION.match(raw)
        if m and int(m.group(1)) == cur.number:
            cur.locations.append(Location(int(m.group(4), 16), m.group(3) == "y", m.group(5).strip()))
            continue
        m = _HITS.match(raw)
        if m:
            cur.hits = int(m.group(1))
            continue
        if raw.startswith("\t") or not raw.startswith(" "):
            continue  # status lines ("\tinstalled on target", ...) and other tables
        line = raw.strip()
        ws = re.match(r"^(while-stepping|stepping|ws)\s+(\d+)", line)
        if ws:
            stepping = True
            cur.step_count = int(ws.group(2))
            continue
        if line == "end":
            stepping = False
            continue
        items = _collect_items(line)
        (cur.step_collect if stepping else cur.collect).extend(items)
    return tps
