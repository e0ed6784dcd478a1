"""A host call on one of XLA's own threads keeps that thread's Python state between calls.

XLA hands the kernels of a program with many independent ones to its pool, so host calls run
on threads Python did not start. CPython would make a thread state for each such call and
delete it on return (about 50 µs a call, and every `threading.local` lost); the first call on
a thread keeps its state instead (`_primitive.keep_thread_state`).
"""

from __future__ import annotations

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxbridge
from jaxbridge import _primitive

N = 24  # independent host calls in one program: XLA runs them on its pool threads too


def test_a_pool_threads_locals_survive_from_call_to_call():
    local = threading.local()
    python_threads = {t.ident for t in threading.enumerate()}
    seen: list[tuple[int, int, bool]] = []  # (run, thread, whether its local was already set)
    lock = threading.Lock()

    @jaxbridge.host
    def tag(x, run):
        time.sleep(0.002)  # the GIL released: other threads take the other calls meanwhile
        ident = threading.get_ident()
        with lock:
            seen.append((int(run), ident, getattr(local, "mark", None) == ident))
        local.mark = ident
        return x + 1.0

    @jax.jit
    def program(xs, run):
        return [tag(x, run) for x in xs]

    xs = [jnp.full(256, float(i)) for i in range(N)]
    for run in range(2):
        out = program(xs, jnp.asarray(run))
        np.testing.assert_array_equal(np.stack(out), np.stack(xs) + 1.0)
    foreign = {ident for _, ident, _ in seen if ident not in python_threads}
    if not foreign:
        pytest.skip("XLA ran every call on Python's own threads this time")
    assert foreign <= _primitive._KEPT_THREADS
    # The second run's calls on a pool thread the first run used find its local still set.
    first = {ident for run, ident, _ in seen if run == 0}
    again = [had for run, ident, had in seen if run == 1 and ident in foreign & first]
    assert again and all(again), seen


def test_init_state_is_made_once_per_thread_xla_calls_on():
    python_threads = {t.ident for t in threading.enumerate()}
    made = []
    threads: set[int] = set()
    lock = threading.Lock()

    def make():
        with lock:
            made.append(threading.get_ident())
        return object()

    @jaxbridge.host(init=make)
    def tag(x, *, state):
        time.sleep(0.002)
        with lock:
            threads.add(threading.get_ident())
        return x + 1.0

    @jax.jit
    def program(xs):
        return [tag(x) for x in xs]

    xs = [jnp.full(256, float(i)) for i in range(N)]
    for _ in range(3):
        np.testing.assert_array_equal(np.stack(program(xs)), np.stack(xs) + 1.0)
    if threads <= python_threads:
        pytest.skip("XLA ran every call on Python's own threads this time")
    assert sorted(made) == sorted(threads)  # one state for each thread that ran a call
