"""Soak: many host calls in one process; resident memory must not grow beyond noise.

Run: `python benchmarks/soak.py [--quick]` (`--quick` makes 10x fewer calls). Phases, each
measured separately (RSS after a full garbage collection at the start, middle and end):

- `host call`: 100,000 jitted calls of a host function (both lowerings, alternating);
- `batched derivative`: 10,000 calls of `jit(vmap(grad))` through a host function, cycling
  over the `jacobian=`, `jvp=`/`vjp=` and finite-difference rules;
- `failing call`: 10,000 jitted calls whose host function raises (exceptions and their
  tracebacks must be released);
- `eager call`: 100,000 calls outside jit.

Growth per call is measured over the second half of each phase (after caches and allocator
pools have warmed up), so a real leak shows as bytes per call and noise as about zero.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from _util import QUICK, require, table

import jaxbridge

psutil = require("psutil", script="soak.py")  # resident memory; in the `test` extra

SCALE = 10 if QUICK else 1
PROCESS = psutil.Process(os.getpid())


def rss() -> int:
    gc.collect()
    return PROCESS.memory_info().rss


def mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def soak(name: str, calls: int, step: Callable[[int], Any]) -> tuple[str, ...]:
    """Runs `step(i)` for `calls` iterations after a warm-up; returns the table row."""
    for i in range(min(100, calls)):  # warm-up: compile every variant the loop will use
        jax.block_until_ready(step(i))
    start = rss()
    t0 = time.perf_counter()
    half = calls // 2
    for i in range(half):
        out = step(i)
    jax.block_until_ready(out)
    middle = rss()
    for i in range(half, calls):
        out = step(i)
    jax.block_until_ready(out)
    end = rss()
    seconds = time.perf_counter() - t0
    per_call = (end - middle) / (calls - half)
    return (
        name,
        f"{calls:,}",
        mib(start),
        mib(middle),
        mib(end),
        f"{per_call:+.1f} B",
        f"{(end - start) / calls:+.1f} B",
        f"{seconds / calls * 1e6:.0f} µs",
    )


def host_calls() -> Callable[[int], Any]:
    f = {
        lowering: jax.jit(jaxbridge.host(lambda x: np.sin(x) + 1, lowering=lowering))
        for lowering in ("buffer", "pure")
    }
    x = jnp.linspace(0.0, 1.0, 16, dtype=jnp.float32)
    return lambda i: f["buffer" if i % 2 else "pure"](x)


def batched_derivatives() -> Callable[[int], Any]:
    def host_fn(x):
        return np.sin(x) * np.sum(x**2, axis=-1, keepdims=True)

    def jacobian(x):
        s = np.sum(x**2, axis=-1)[..., None, None]
        eye = np.eye(x.shape[-1], dtype=x.dtype)
        return eye * (np.cos(x)[..., :, None] * s) + 2 * np.sin(x)[..., :, None] * x[..., None, :]

    def jvp(x, t):
        return np.einsum("...ij,...j->...i", jacobian(x), t)

    def vjp(x, ct):
        return (np.einsum("...ij,...i->...j", jacobian(x), ct),)

    rules = [
        jaxbridge.host(host_fn, vmap="vectorized", jacobian=jacobian),
        jaxbridge.host(host_fn, vmap="vectorized", jvp=jvp, vjp=vjp),
        jaxbridge.host(host_fn, vmap="vectorized", derivative=jaxbridge.FiniteDifferences()),
    ]
    grads = [jax.jit(jax.vmap(jax.grad(lambda x, f=f: jnp.sum(f(x))))) for f in rules]
    xs = jnp.linspace(0.1, 1.0, 32, dtype=jnp.float32).reshape(8, 4)
    return lambda i: grads[i % 3](xs)


class SoakError(Exception):
    pass


def failing_calls() -> Callable[[int], Any]:
    def explode(x):
        raise SoakError(f"failing on purpose with {x.shape}")

    f = jax.jit(jaxbridge.host(explode, result=jax.ShapeDtypeStruct((4,), jnp.float32)))
    x = jnp.ones(4, jnp.float32)

    def step(i):
        try:
            jax.block_until_ready(f(x))
        except Exception as e:  # crossed XLA: the text names our exception
            assert "SoakError" in str(e)
        return x

    return step


def eager_calls() -> Callable[[int], Any]:
    f = jaxbridge.host(lambda x: x * 2)
    x = np.ones(16, np.float32)
    return lambda i: f(x)


def main() -> None:
    rows = [
        soak("host call (jit)", 100_000 // SCALE, host_calls()),
        soak("batched derivative (jit(vmap(grad)))", 10_000 // SCALE, batched_derivatives()),
        soak("failing call (jit)", 10_000 // SCALE, failing_calls()),
        soak("eager call", 100_000 // SCALE, eager_calls()),
    ]
    header = (
        "phase",
        "calls",
        "RSS start",
        "RSS middle",
        "RSS end",
        "growth/call (2nd half)",
        "growth/call (all)",
        "time/call",
    )
    print(table("Soak: resident memory over many calls", rows, header))
    print(
        "A leak shows as a steady growth per call in the second half; allocator noise is a "
        "few bytes per call either way."
    )


if __name__ == "__main__":
    main()
