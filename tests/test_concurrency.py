"""Concurrent callers: 8 Python threads calling the same jitted host function at once.

Each thread makes several calls with its own inputs; every result must equal the serial one,
and the whole run must finish well inside a time bound (a deadlock shows as a timeout, not a
hung suite).
"""

from __future__ import annotations

import concurrent.futures
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cases import make_strategy

import jaxbridge

N_THREADS = 8
CALLS = 6
BOUND_S = 120  # generous: 2 cores, first calls compile


def strategies() -> list[str]:
    return ["sequential", "vectorized", "threads", "threads-vec", "processes"]


def make(name: str):
    return make_strategy(name, chunk_size=2)


def physics(q, v, *, dt):
    """A damped step over the trailing dimension, batch-agnostic (works stacked too)."""
    acc = -np.sin(q) - 0.1 * v
    return {"q": q + dt * v, "v": v + dt * acc, "e": np.sum(v**2, axis=-1)}


def reference(q, v, *, dt):
    acc = -jnp.sin(q) - 0.1 * v
    return {"q": q + dt * v, "v": v + dt * acc, "e": jnp.sum(v**2, axis=-1)}


def run_threads(work, n=N_THREADS, bound=BOUND_S):
    """Runs `work(i)` on `n` threads released at once; returns results in order."""
    barrier = threading.Barrier(n)

    def task(i):
        barrier.wait(timeout=bound)
        return work(i)

    pool = concurrent.futures.ThreadPoolExecutor(n)
    try:
        futures = [pool.submit(task, i) for i in range(n)]
        done, pending = concurrent.futures.wait(futures, timeout=bound)
        assert not pending, f"{len(pending)} of {n} threads still running after {bound} s"
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def inputs(i, batch=5):
    rng = np.random.default_rng(i)
    q = jnp.asarray(rng.normal(size=(batch, 3)), jnp.float32)
    v = jnp.asarray(rng.normal(size=(batch, 3)), jnp.float32)
    return q, v


@pytest.mark.timeout(300)
@pytest.mark.parametrize("strategy", strategies())
def test_eight_threads_same_jitted_function(strategy, lowering):
    f = jaxbridge.host(physics, vmap=make(strategy), static_argnames="dt")
    step = jax.jit(jax.vmap(lambda q, v: f(q, v, dt=0.01)))
    single = jax.jit(lambda q, v: f(q, v, dt=0.01))
    want = [jax.vmap(lambda q, v: reference(q, v, dt=0.01))(*inputs(i)) for i in range(N_THREADS)]

    def work(i):
        q, v = inputs(i)
        outs = []
        for k in range(CALLS):
            outs.append(step(q, v) if k % 2 else jax.vmap(single)(q, v))
        return outs

    # First calls race on tracing and the signature cache, later ones on the executors.
    for i, outs in enumerate(run_threads(work)):
        for got in outs:
            for key in want[i]:
                np.testing.assert_allclose(got[key], want[i][key], rtol=1e-5, atol=1e-6)


@pytest.mark.timeout(300)
def test_threads_mixing_transformations_and_signatures(lowering):
    """Eager, jit, vmap and grad of one host function at several shapes, all at once."""
    f = jaxbridge.host(
        lambda x: np.sin(x) * 2,
        vmap="vectorized",
        derivative=jaxbridge.FiniteDifferences(),
    )
    sizes = [1, 2, 3, 4]

    def work(i):
        n = sizes[i % len(sizes)]
        x = jnp.linspace(0.0, 1.0, n, dtype=jnp.float32) + i
        kinds = [
            lambda: f(x),
            lambda: jax.jit(f)(x),
            lambda: jax.vmap(f)(jnp.stack([x, x])),
            lambda: jax.grad(lambda y: jnp.sum(f(y)))(x),
        ]
        return [np.asarray(kinds[(i + k) % 4]()) for k in range(4)], x

    for i, (outs, x) in enumerate(run_threads(work)):
        want = [
            np.sin(np.asarray(x)) * 2,
            np.sin(np.asarray(x)) * 2,
            np.stack([np.sin(np.asarray(x)) * 2] * 2),
            np.cos(np.asarray(x)) * 2,
        ]
        for k, got in enumerate(outs):
            kind = (i + k) % 4
            np.testing.assert_allclose(got, want[kind], rtol=2e-3, atol=2e-3)


@pytest.mark.timeout(300)
def test_per_thread_init_state_under_concurrent_callers():
    """`init` state is per thread: concurrent callers never share one object."""
    made = []
    lock = threading.Lock()

    def init():
        state = {"owner": threading.get_ident(), "uses": 0}
        with lock:
            made.append(state)
        return state

    def fn(x, *, state):
        assert state["owner"] == threading.get_ident()
        state["uses"] += 1
        return x + 1

    f = jax.jit(jaxbridge.host(fn, init=init))
    outs = run_threads(lambda i: [float(f(jnp.float32(i))) for _ in range(CALLS)])
    assert outs == [[i + 1.0] * CALLS for i in range(N_THREADS)]
    owners = [s["owner"] for s in made]
    assert len(owners) == len(set(owners))  # one state per thread that ran the function


@pytest.mark.timeout(300)
def test_concurrent_failures_stay_with_their_caller(lowering):
    """One thread's host exception never leaks into another thread's result or error."""

    def fn(x):
        if float(x) < 0:
            raise ArithmeticError(f"negative {float(x)}")
        return x * 2

    f = jax.jit(jaxbridge.host(fn))

    def work(i):
        value = jnp.float32(-i if i % 2 else i)
        try:
            return float(f(value))
        except Exception as e:  # crossed XLA: the text names this thread's value
            return str(e)

    for i, got in enumerate(run_threads(work)):
        if i % 2:
            assert isinstance(got, str) and f"negative {-float(i)}" in got
        else:
            assert got == 2.0 * i
