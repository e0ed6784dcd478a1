"""Per-call overhead of jaxbridge.host against jax.pure_callback and native jax.numpy.

Run: `python benchmarks/overhead.py [--quick]`. Everything is measured side by side in this
process; absolute times vary between machines, the ratios are what to read.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
from _util import QUICK, fmt_time, table, timeit, verdict
from jax import lax

import jaxbridge

N = 200 if QUICK else 2000


def trivial(x):
    return x + 1


def main() -> None:
    x = jnp.ones(8, jnp.float32)
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
    jb_buffer = jaxbridge.host(trivial, lowering="buffer")
    jb_pure = jaxbridge.host(trivial, lowering="pure")
    pc = lambda x: jax.pure_callback(trivial, spec, x)  # noqa: E731
    rows = []

    # 1. one jitted call
    t = {
        "jaxbridge (buffer_callback)": timeit(lambda f=jax.jit(jb_buffer): f(x), number=N),
        "jaxbridge (pure_callback lowering)": timeit(lambda f=jax.jit(jb_pure): f(x), number=N),
        "jax.pure_callback": timeit(lambda f=jax.jit(pc): f(x), number=N),
        "native jnp": timeit(lambda f=jax.jit(lambda x: x + 1): f(x), number=N),
    }
    base = t["jax.pure_callback"]
    for k, v in t.items():
        rows.append(("jitted call", k, fmt_time(v), f"{v / base:.3f}"))
    call_ratio = t["jaxbridge (buffer_callback)"] / base

    # 2. one lax.scan step
    steps = 200 if QUICK else 1000

    def scanned(f):
        return jax.jit(lambda x: lax.scan(lambda c, _: (f(c), None), x, None, length=steps)[0])

    t = {
        "jaxbridge": timeit(lambda f=scanned(jb_buffer): f(x), number=3) / steps,
        "jax.pure_callback": timeit(lambda f=scanned(pc): f(x), number=3) / steps,
        "native jnp": timeit(lambda f=scanned(lambda c: c + 1): f(x), number=3) / steps,
    }
    base = t["jax.pure_callback"]
    for k, v in t.items():
        rows.append(("scan step", k, fmt_time(v), f"{v / base:.3f}"))
    scan_ratio = t["jaxbridge"] / base

    # 3. vmap of 1000 elements, sequential
    xs = jnp.ones((1000, 8), jnp.float32)
    pc_seq = lambda x: jax.pure_callback(trivial, spec, x, vmap_method="sequential")  # noqa: E731
    t = {
        "jaxbridge sequential": timeit(lambda f=jax.jit(jax.vmap(jb_buffer)): f(xs), number=5),
        "jaxbridge vectorized": timeit(
            lambda f=jax.jit(jax.vmap(jaxbridge.host(trivial, vmap="vectorized"))): f(xs),
            number=5,
        ),
        "jax.pure_callback sequential": timeit(
            lambda f=jax.jit(jax.vmap(pc_seq)): f(xs), number=2, repeat=3
        ),
    }
    base = t["jax.pure_callback sequential"]
    for k, v in t.items():
        rows.append(("vmap, 1000 elements", k, fmt_time(v), f"{v / base:.3f}"))
    vmap_speedup = base / t["jaxbridge sequential"]

    # 4. 64 MB identity round trip
    big = jnp.ones((16 * 1024 * 1024,), jnp.float32)
    big_spec = jax.ShapeDtypeStruct(big.shape, big.dtype)
    ident = lambda a: a  # noqa: E731
    t = {
        "jaxbridge": timeit(lambda f=jax.jit(jaxbridge.host(ident)): f(big), number=5),
        "jax.pure_callback": timeit(
            lambda f=jax.jit(lambda a: jax.pure_callback(ident, big_spec, a)): f(big), number=5
        ),
    }
    base = t["jax.pure_callback"]
    for k, v in t.items():
        rows.append(("64 MB identity", k, fmt_time(v), f"{v / base:.3f}"))
    big_ratio = t["jaxbridge"] / base

    print(
        table(
            f"Host-call overhead (jax {jax.__version__}, {os.cpu_count()} CPUs)",
            rows,
            ("case", "implementation", "time", "ratio to pure_callback"),
        )
    )
    summary = [
        ("jitted call, jaxbridge / pure_callback", f"{call_ratio:.3f}", verdict(call_ratio, 0.3)),
        ("scan step, jaxbridge / pure_callback", f"{scan_ratio:.3f}", verdict(scan_ratio, 0.1)),
        (
            "1000-element sequential vmap, speed-up",
            f"{vmap_speedup:.1f}x",
            verdict(vmap_speedup, 10, lower_is_better=False),
        ),
        (
            "64 MB round trip, jaxbridge / pure_callback",
            f"{big_ratio:.3f}",
            verdict(big_ratio, 0.5),
        ),
    ]
    print(table("Targets", summary, ("measure", "value", "target")))


if __name__ == "__main__":
    main()
