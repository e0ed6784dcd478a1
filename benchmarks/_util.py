"""Shared helpers for the benchmark scripts: timing, the ratio table, and optional peers."""

from __future__ import annotations

import importlib
import statistics
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import jax

QUICK = "--quick" in sys.argv

SKIPPED = (
    "skipped: {rows} (they need {module}, which does not import: {etype}: {emsg}). "
    "Install the peers the benchmarks compare against: `pip install 'jaxbridge[bench]'` "
    "or `make bench`."
)


def peer(module: str, *, rows: str) -> ModuleType | None:
    """`module` imported, or None after printing which rows are skipped without it.

    For the packages a benchmark compares against (the `bench` extra: mujoco-mjx, sympy2jax,
    equinox, ...): a missing one skips its rows with a line that says so, never a traceback.

    Args:
        module: the import name, dotted for a submodule (`"mujoco.mjx"`).
        rows: what is skipped without it, for the message (`"the sympy2jax rows"`).
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        skipped(rows, module, e)
        return None


def skipped(rows: str, module: str, error: ImportError) -> None:
    """Prints that `rows` are skipped because `module` failed to import with `error`."""
    print(SKIPPED.format(rows=rows, module=module, etype=type(error).__name__, emsg=error))
    sys.stdout.flush()


def require(module: str, *, script: str) -> ModuleType:
    """`module` imported, or exits this script (status 0) after saying it was skipped."""
    found = peer(module, rows=f"every row of {script}")
    if found is None:
        sys.exit(0)
    return found


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
