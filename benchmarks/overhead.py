"""Per-call overhead of jaxbridge.host against jax.pure_callback and native jax.numpy.

Run: `python benchmarks/overhead.py [--quick]`. Everything is measured side by side in this
process; absolute times vary between machines, the ratios are what to read. The process has 4
CPU devices (`jax_num_cpu_devices`) for the sharded rows; every other row runs on one.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads

import jax
import jax.numpy as jnp
import numpy as np
from _util import QUICK, fmt_time, table, timeit, verdict
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxbridge

jax.config.update("jax_num_cpu_devices", 4)

N = 200 if QUICK else 2000


def trivial(x):
    return x + 1


def _sort_sin(x):
    # NumPy releases the GIL in both, so calls of several devices can overlap.
    return np.sort(np.sin(x), axis=-1)


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

    # 5. a batch sharded over 4 devices: one host call per device on its rows, against the same
    # batch on one device, and against pure_callback, which gathers it onto device 0 (and
    # leaves a result whose other shards are wrong). Each call is waited for: back-to-back
    # dispatch of collective programs over virtual CPU devices can deadlock jax 0.10.2.
    mesh = jax.make_mesh((4,), ("d",), axis_types=(jax.sharding.AxisType.Auto,))
    sharded_rows = {}
    for case, width, kernel in [
        ("sharded vmap, 16 x 8, x + 1", 8, trivial),
        ("sharded vmap, 16 x 2^18, sort(sin x)", 2**18, _sort_sin),
    ]:
        batch = jnp.ones((16, width), jnp.float32) * jnp.arange(16.0, dtype=jnp.float32)[:, None]
        on4 = jax.device_put(batch, NamedSharding(mesh, P("d")))
        on1 = jax.device_put(batch, jax.devices()[0])
        jb = jax.jit(jax.vmap(jaxbridge.host(kernel, vmap="vectorized")))
        row_spec = jax.ShapeDtypeStruct((width,), jnp.float32)
        pc_vec = jax.jit(
            jax.vmap(
                lambda r, k=kernel, spec=row_spec: jax.pure_callback(
                    k, spec, r, vmap_method="expand_dims"
                )
            )
        )
        number = 20 if width == 8 else 3
        t = {
            "jaxbridge, 4 devices (each its rows)": timeit(
                lambda f=jb, a=on4: f(a).block_until_ready(), number=number
            ),
            "jaxbridge, 1 device (same batch)": timeit(
                lambda f=jb, a=on1: f(a).block_until_ready(), number=number
            ),
            "jax.pure_callback, 4 devices (gathered)": timeit(
                lambda f=pc_vec, a=on4: f(a).block_until_ready(), number=number
            ),
        }
        if kernel is trivial:  # the floor: any program over the 4 devices
            t["native jnp, 4 devices"] = timeit(
                lambda f=jax.jit(trivial), a=on4: f(a).block_until_ready(), number=number
            )
        base = t["jax.pure_callback, 4 devices (gathered)"]
        for k, v in t.items():
            rows.append((case, k, fmt_time(v), f"{v / base:.3f}"))
        sharded_rows[width] = t

    print(
        table(
            f"Host-call overhead (jax {jax.__version__}, {os.cpu_count()} CPUs, "
            f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')})",
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
    heavy = sharded_rows[2**18]
    split_speedup = (
        heavy["jaxbridge, 1 device (same batch)"] / heavy["jaxbridge, 4 devices (each its rows)"]
    )
    summary.append(
        (
            "sharded sort(sin x), 1 device / 4 devices",
            f"{split_speedup:.2f}x",
            # the 4 devices' calls share this machine's cores; more than 1 means they overlap
            verdict(split_speedup, 1.0, lower_is_better=False),
        )
    )
    print(table("Targets", summary, ("measure", "value", "target")))


if __name__ == "__main__":
    main()
