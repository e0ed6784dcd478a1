"""glibc's malloc thresholds, raised once per process for allocation-heavy host functions.

jaxbridge's host calls run on the thread that runs the computation, which under `jax.jit` on
CPU is the calling (main) thread. glibc serves that thread from its main arena, which gives
free memory at the top of its heap back to the operating system once it exceeds the trim
threshold; glibc sets that threshold dynamically, to twice the largest mmapped block freed so
far (128 KiB at the start, at most 64 MiB). A host function whose temporaries are a few MiB,
freed at every call, then returns them to the system after each call and page-faults them in
again at the next, paying minor page faults a worker thread does not (issue 24, on
`np.sort(np.sin(y) * np.cos(y))` of 300,000 values). `vmap="sequential"`, `"vectorized"` and
the calling thread's share of `Threads` all paid it.

`tune` fixes the thresholds instead, with `mallopt`: blocks below 64 MiB come from the arenas,
and up to 128 MiB of free memory at the top of a heap is kept for the next call (the values
that removed the gap as `MALLOC_MMAP_THRESHOLD_`/`MALLOC_TRIM_THRESHOLD_`). The cost is
memory: a process can hold that much freed memory per arena rather than return it.

It runs once, at the first `jaxbridge.host` of a process (and in each `Processes` worker),
and leaves malloc alone where the user decided already: `JAXBRIDGE_MALLOPT=0` turns it off,
and so does any of glibc's own malloc variables in the environment. Elsewhere than glibc
(musl, macOS, Windows) it does nothing.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

# glibc's <malloc.h>: the parameters `mallopt` takes.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

TRIM_THRESHOLD = 128 * 1024 * 1024
MMAP_THRESHOLD = 64 * 1024 * 1024

ENV = "JAXBRIDGE_MALLOPT"

# Environment variables by which a user has set glibc's malloc already: theirs wins.
GLIBC_VARIABLES = (
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "MALLOC_MMAP_MAX_",
    "MALLOC_ARENA_MAX",
)

# What `tune` did in this process, once it has run (`status`):
APPLIED = "applied"
OPTED_OUT = "opted out"  # JAXBRIDGE_MALLOPT=0
USER_SETTINGS = "user settings"  # a MALLOC_*_ or GLIBC_TUNABLES malloc variable is set
NOT_GLIBC = "not glibc"
FAILED = "failed"  # glibc refused a value: the thresholds stay dynamic

_lock = threading.Lock()
_status: str | None = None


def _glibc() -> Any:
    """The process's C library through ctypes if it is glibc, else None."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"; absent off glibc
    except (AttributeError, ValueError, OSError):
        return None
    if not version or not version.startswith("glibc"):
        return None
    try:
        libc = ctypes.CDLL(None)  # the symbols already loaded: the process's own libc
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return libc


def _user_decided(environ: Any) -> str | None:
    """Why malloc is left alone by the environment's choice, or None."""
    if environ.get(ENV, "").strip().lower() in ("0", "false", "no", "off"):
        return OPTED_OUT
    if any(v in environ for v in GLIBC_VARIABLES) or "glibc.malloc." in environ.get(
        "GLIBC_TUNABLES", ""
    ):
        return USER_SETTINGS
    return None


def tune() -> str:
    """Raises glibc's trim and mmap thresholds once per process, unless opted out.

    Returns:
        What happened: `APPLIED`, `OPTED_OUT`, `USER_SETTINGS`, `NOT_GLIBC` or `FAILED`; the
        first call decides, later calls return the same.
    """
    global _status
    if _status is not None:  # the hot path: one global read
        return _status
    with _lock:
        if _status is None:
            _status = _apply()
    return _status


def _apply() -> str:
    decided = _user_decided(os.environ)
    if decided is not None:
        return decided
    libc = _glibc()
    if libc is None:
        return NOT_GLIBC
    # The mmap threshold first: setting either one turns glibc's dynamic thresholds off, and a
    # trim threshold alone would leave blocks above 128 KiB to mmap and munmap at every call.
    if not libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        return FAILED
    if not libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD):
        return FAILED
    return APPLIED


def status() -> str | None:
    """What `tune` did in this process, or None before it ran."""
    return _status
