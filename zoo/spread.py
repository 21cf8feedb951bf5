"""Seed spreads: every headline is a mean over seeds with its spread, and a comparison of two
settings is a paired difference (same seeds) with its standard error. Used by ``zoo.sweep`` and
the benchmarks (``benchmarks/spread.py`` re-exports these)."""

from __future__ import annotations

import math
import statistics


def spread(values: list[float]) -> dict:
    """Mean, sample standard deviation, min, max and every value (None entries are failed runs)."""
    ok = [float(v) for v in values if v is not None and math.isfinite(v)]
    return {
        "mean": statistics.fmean(ok) if ok else None,
        "sd": statistics.stdev(ok) if len(ok) > 1 else None,
        "min": min(ok) if ok else None,
        "max": max(ok) if ok else None,
        "n": len(ok),
        "failed": len(values) - len(ok),
        "values": list(values),
    }


def median_range(values: list[float]) -> dict:
    """Median, min, max and every value: for timings, and where a few seeds are summarised by their middle."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "values": values}


def paired(a: list[float], b: list[float]) -> dict:
    """a - b seed by seed: the differences, their mean and its standard error (sd / sqrt(n))."""
    diffs = [x - y for x, y in zip(a, b)]
    out = {"diffs": diffs, "mean": statistics.fmean(diffs) if diffs else None, "se": None}
    if len(diffs) > 1:
        out["se"] = statistics.stdev(diffs) / math.sqrt(len(diffs))
    return out


def fmt(s: dict, digits: int = 2) -> str:
    """'mean ± sd' (or the single value)."""
    if s["mean"] is None:
        return "failed"
    if s["sd"] is None:
        return f"{s['mean']:.{digits}f}"
    return f"{s['mean']:.{digits}f} ± {s['sd']:.{digits}f}"
