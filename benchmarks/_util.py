"""Shared helpers for the benchmark scripts: timing and the ratio table."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax

QUICK = "--quick" in sys.argv


def timeit(fn: Callable[[], Any], *, number: int, repeat: int = 5) -> float:
    """Median seconds per call of `fn` (results blocked on), after one warm-up call."""
    jax.block_until_ready(fn())
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            out = fn()
        jax.block_until_ready(out)
        runs.append((time.perf_counter() - start) / number)
    return statistics.median(runs)


def fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def table(title: str, rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    """A Markdown table, so the output pastes into notes and docs as is."""
    lines = [
        f"### {title}",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def verdict(ratio: float, target: float, lower_is_better: bool = True) -> str:
    ok = ratio <= target if lower_is_better else ratio >= target
    sign = "≤" if lower_is_better else "≥"
    return f"{'met' if ok else 'MISSED'} ({sign} {target:g})"
