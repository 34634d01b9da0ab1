"""Summary statistics and terminal histograms (no gdb import)."""

import math


class Summary:
    __slots__ = ("count", "min", "max", "mean", "p50", "p90", "p99")

    def __init__(self, values):
        if not values:
            raise ValueError("no values")
        ordered = sorted(values)
        self.count = len(ordered)
        self.min = ordered[0]
        self.max = ordered[-1]
        self.mean = math.fsum(ordered) / self.count
        self.p50 = percentile(ordered, 50)
        self.p90 = percentile(ordered, 90)
        self.p99 = percentile(ordered, 99)

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}


def percentile(ordered, p):
    """Linear interpolation between closest ranks (numpy's default) on sorted data."""
    if not ordered:
        raise ValueError("no values")
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * p / 100.0
    lo = int(math.floor(rank))
    hi = min(lo + 1, len(ordered) - 1)
    frac = rank - lo
    return ordered[lo] + (ordered[hi] - ordered[lo]) * frac


def fmt_number(v):
    """Compact number: integers stay integers, floats get 6 significant digits."""
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        if abs(v) >= 1e5:
            return "%.1f" % v
        return "%.6g" % v
    return str(v)


def summary_table(groups, unit=""):
    """Text table, one row per (label, Summary)."""
    head = ["group", "count", "min", "max", "mean", "p50", "p90", "p99"]
    rows = []
    for label, s in groups:
        rows.append(
            [str(label), str(s.count)]
            + [fmt_number(getattr(s, k)) + unit for k in ("min", "max", "mean", "p50", "p90", "p99")]
        )
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head))]
    lines = ["  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(head, widths)))]
    for r in rows:
        lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)


def histogram_bins(values, bins=10):
    """[(low, high, count)] over [min, max] in BINS equal-width bins; integer
    data with a small range gets one bin per value."""
    lo, hi = min(values), max(values)
    if all(float(v).is_integer() for v in (lo, hi)) and all(isinstance(v, int) for v in values[:1000]):
        span = int(hi - lo) + 1
        if span <= bins:
            counts = [0] * span
            for v in values:
                counts[int(v - lo)] += 1
            return [(lo + i, lo + i, c) for i, c in enumerate(counts)]
    if hi == lo:
        return [(lo, hi, len(values))]
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / width), bins - 1)] += 1
    return [(lo + i * width, lo + (i + 1) * width, c) for i, c in enumerate(counts)]


def ascii_histogram(values, bins=10, width=40, unit=""):
    rows = histogram_bins(values, bins)
    peak = max(c for _, _, c in rows) or 1
    labels = []
    for i, (low, high, _) in enumerate(rows):
        if low == high:
            labels.append(fmt_number(low) + unit)
        else:
            closer = "]" if i == len(rows) - 1 else ")"
            labels.append("[%s, %s%s" % (fmt_number(low) + unit, fmt_number(high) + unit, closer))
    lw = max(len(x) for x in labels)
    cw = max(len(str(c)) for _, _, c in rows)
    out = []
    for label, (_, _, c) in zip(labels, rows):
        bar = "#" * int(round(c * width / peak)) if c else ""
        if c and not bar:
            bar = "."
        out.append("%s | %s %s" % (label.rjust(lw), str(c).rjust(cw), bar))
    return "\n".join(out)
