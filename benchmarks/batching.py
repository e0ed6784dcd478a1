"""Batched host calls: Threads, Processes and Ray against a hand-written thread pool.

Run: `python benchmarks/batching.py [--quick] [--no-ray]`. Workloads, each over a batch under
`jax.jit(jax.vmap(...))`:

  (a) a LAPACK solve of N unknowns per element (GIL released, BLAS inside the host function),
  (b) a pure-Python function that holds the GIL (Collatz steps),
  (c) a GIL-releasing NumPy kernel without BLAS (elementwise maths and a sort per element),
  (c+) (c) again, each call right after BLAS work in the calling thread (a matrix product at
       the process's own BLAS settings), as in a program that mixes both.

The reference is what a user writes without JAX: the same function over NumPy arrays on a
`concurrent.futures.ThreadPoolExecutor(2)` ("hand pool"), and a plain loop. Calls of every
method and workload are interleaved in shuffled rounds (load on a shared machine hits each
alike); the tables show medians, the load average beside them, and the targets.

BLAS keeps the process's settings (this benchmark is about threads): OpenBLAS starts a thread
per core for each call unless OPENBLAS_NUM_THREADS says otherwise.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import random
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from _util import peer, table, verdict

import jaxbridge

WORKERS = 2


def solve(a, b):
    """(a): a dense solve, GIL released inside LAPACK."""
    return np.linalg.solve(a, b[..., None])[..., 0]


def kernel(x):
    """(c): elementwise maths and a sort, GIL released, no BLAS."""
    return np.sort(np.sin(x) * np.exp(0.01 * x), axis=-1)[..., -1]


def collatz(x):
    """(b): pure Python, holds the GIL: total Collatz steps of a range of start values."""
    start, steps = int(x[0]), 0
    for n in range(start, start + int(x[1])):
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            steps += 1
    return np.asarray([steps, 0], np.int32)


def outside_jax(fn, args, result, pool):
    """The reference: `fn` over NumPy arrays, by a loop (pool=None) or two halves on `pool`."""
    arrays = [np.asarray(x) for x in args]
    size = arrays[0].shape[0]
    out = np.empty((size, *result.shape), result.dtype)

    def chunk(lo, hi):
        for i in range(lo, hi):
            out[i] = fn(*(x[i] for x in arrays))

    def run():
        if pool is None:
            chunk(0, size)
        else:
            bounds = np.linspace(0, size, WORKERS + 1).astype(int)
            list(pool.map(chunk, bounds[:-1], bounds[1:]))
        return out

    return run


def blas_work(w):
    """BLAS in the calling thread at the process's settings: OpenBLAS wakes its own threads."""
    return w @ w


def measure(methods, workloads, rounds, blas):
    """Median seconds of each (method, workload), calls interleaved in shuffled rounds."""
    pairs = [(m, w) for m in methods for w in workloads if methods[m].get(w) is not None]
    for m, w in pairs:  # compile, start pools, send the functions to the workers
        jax.block_until_ready(methods[m][w]())
    times: dict[tuple[str, str], list[float]] = {p: [] for p in pairs}
    shuffle = random.Random(0).shuffle
    for _ in range(rounds):
        shuffle(pairs)
        for m, w in pairs:
            fn = methods[m][w]
            if w == "c+":
                blas_work(blas)
            t = time.perf_counter()
            jax.block_until_ready(fn())
            times[m, w].append(time.perf_counter() - t)
    return {p: statistics.median(v) for p, v in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, three rounds")
    parser.add_argument("--no-ray", action="store_true", help="skip Ray")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (9; 3 quick)")
    opts = parser.parse_args()
    batch, n, rounds = (64, 128, 3) if opts.quick else (256, 256, 9)
    rounds = opts.rounds or rounds
    # (a) smaller: on a loaded machine OpenBLAS's own threads make a multi-threaded solve slow
    # by orders of magnitude (they wait for each other at every step), and (a) runs that way
    # wherever BLAS keeps the process's settings.
    n_a = n // 2
    span = 100 if opts.quick else 300

    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((batch, n_a, n_a)) + n_a * np.eye(n_a), jnp.float32)
    b = jnp.asarray(rng.standard_normal((batch, n_a)), jnp.float32)
    starts = jnp.stack([jnp.arange(batch) * span + 1, jnp.full(batch, span)], 1).astype(jnp.int32)
    c = jnp.asarray(rng.standard_normal((batch, n, n)), jnp.float32)
    blas = rng.standard_normal((256, 256))
    args = {"a": (a, b), "b": (starts,), "c": (c,), "c+": (c,)}
    fns = {"a": solve, "b": collatz, "c": kernel, "c+": kernel}
    results = {
        "a": jax.ShapeDtypeStruct((n_a,), jnp.float32),
        "b": jax.ShapeDtypeStruct((2,), jnp.int32),
        "c": jax.ShapeDtypeStruct((n,), jnp.float32),
        "c+": jax.ShapeDtypeStruct((n,), jnp.float32),
    }
    workloads = list(fns)

    executors: dict = {
        "sequential": "sequential",
        f"Threads({WORKERS})": jaxbridge.Threads(WORKERS),
    }
    if peer("cloudpickle", rows=f"the Processes({WORKERS}) rows"):
        executors[f"Processes({WORKERS})"] = jaxbridge.Processes(WORKERS)
    methods: dict[str, dict] = {}
    for label, vmap in executors.items():
        methods[label] = {}
        for w in workloads:
            f = jax.jit(jax.vmap(jaxbridge.host(fns[w], vmap=vmap, result=results[w])))
            methods[label][w] = lambda f=f, x=args[w]: f(*x)
    pool = concurrent.futures.ThreadPoolExecutor(WORKERS)
    methods["hand pool (no JAX)"] = {
        w: outside_jax(fns[w], args[w], results[w], pool) for w in workloads
    }
    methods["loop (no JAX)"] = {
        w: outside_jax(fns[w], args[w], results[w], None) for w in workloads
    }

    # Every method's numbers, once: a fast wrong answer would be worse than a slow one.
    for label, by_workload in methods.items():
        for w, fn in by_workload.items():
            np.testing.assert_array_equal(
                np.asarray(fn()), np.asarray(methods["sequential"][w]()), err_msg=f"{label} {w}"
            )

    load = os.getloadavg()
    median = measure(methods, workloads, rounds, blas)
    load_after = os.getloadavg()
    pool.shutdown()
    base = {w: median["sequential", w] for w in workloads}
    hand = {w: median["hand pool (no JAX)", w] for w in workloads}
    rows = [
        (
            label,
            *(
                f"{median[label, w] * 1e3:.1f} ms, {base[w] / median[label, w]:.2f}x"
                for w in workloads
            ),
            *(f"{hand[w] / median[label, w]:.2f}" for w in ("c", "c+")),
        )
        for label in methods
    ]
    print(
        table(
            f"{batch} elements, {WORKERS} workers, {rounds} interleaved rounds (medians); "
            f"load average {load[0]:.2f} before, {load_after[0]:.2f} after, "
            f"{os.cpu_count()} CPUs",
            rows,
            (
                "method",
                f"(a) solve {n_a}",
                "(b) pure Python",
                f"(c) kernel {n}x{n}",
                "(c+) after BLAS",
                "(c) vs hand pool",
                "(c+) vs hand pool",
            ),
        )
    )
    threads = f"Threads({WORKERS})"
    targets = [
        (f"{threads} / hand pool, (c)", hand["c"] / median[threads, "c"], 0.9),
        (f"{threads} / hand pool, (c+) after BLAS", hand["c+"] / median[threads, "c+"], 0.9),
        (f"{threads} speed-up, (c)", base["c"] / median[threads, "c"], 1.6),
    ]
    if f"Processes({WORKERS})" in executors:
        proc = median[f"Processes({WORKERS})", "b"]
        targets.append((f"Processes({WORKERS}) speed-up, (b)", base["b"] / proc, 1.6))
    print(
        table(
            "Targets (ratios > 1 are faster)",
            [(k, f"{v:.2f}", verdict(v, t, lower_is_better=False)) for k, v, t in targets],
            ("measure", "value", "target"),
        )
    )

    ray = None if opts.no_ray else peer("ray", rows="the Ray rows")
    if ray is not None:
        ray_rows(ray, fns, args, results, workloads, rounds)


def ray_rows(ray, fns, args, results, workloads, rounds):
    """Ray's rows and overhead: after the others, since a starting cluster keeps CPUs busy."""
    # A private local instance, never a cluster already registered on this machine.
    ray.init(address="local", num_cpus=WORKERS, include_dashboard=False, log_to_driver=False)
    try:
        time.sleep(5.0)
        executor = jaxbridge.Ray(num_workers=WORKERS)
        methods: dict[str, dict] = {}
        for label, vmap in (("sequential", "sequential"), (repr(executor), executor)):
            methods[label] = {}
            for w in workloads[:3]:
                f = jax.jit(jax.vmap(jaxbridge.host(fns[w], vmap=vmap, result=results[w])))
                methods[label][w] = lambda f=f, x=args[w]: f(*x)
        median = measure(methods, workloads[:3], rounds, None)
        rows = [
            (
                label,
                *(
                    f"{median[label, w] * 1e3:.1f} ms, "
                    f"{median['sequential', w] / median[label, w]:.2f}x"
                    for w in workloads[:3]
                ),
            )
            for label in methods
        ]
        print(table("Ray, a local 2-CPU instance", rows, ("method", "(a)", "(b)", "(c)")))
        tiny = jax.jit(jax.vmap(jaxbridge.host(lambda x: x + 1, vmap=executor)))
        small = min_time(tiny, jnp.zeros(WORKERS), rounds * 4)
        large = min_time(tiny, jnp.zeros(4096), rounds * 4)
        seq = jax.jit(jax.vmap(jaxbridge.host(lambda x: x + 1)))
        host = min_time(seq, jnp.zeros(4096), rounds * 4) / 4096
        per_element = (large - small) / (4096 - WORKERS) - host
        print(
            f"Ray overhead: {small * 1e3:.2f} ms per call ({WORKERS} tasks), "
            f"{per_element * 1e6:.2f} us per element beyond the host function"
        )
    finally:
        ray.shutdown()


def min_time(f, x, repeats):
    jax.block_until_ready(f(x))
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f(x))
        best = min(best, time.perf_counter() - t)
    return best


if __name__ == "__main__":
    main()
