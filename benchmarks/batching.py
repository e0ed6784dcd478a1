"""Batched host calls: sequential vs Threads, Processes, Ray and a hand-written thread pool.

Run: `python benchmarks/batching.py [--quick] [--no-ray]`. Prints, for the same run:

  (a) a GIL-releasing host function (NumPy linear solve of N unknowns per element),
  (b) a pure-Python host function that holds the GIL,
  (c) a GIL-releasing NumPy kernel without BLAS (elementwise maths and a sort per element):
      on machines whose OpenBLAS serialises concurrent calls (this project's 2-core machines:
      even a plain ThreadPoolExecutor over np.linalg.solve runs no faster than a loop), (c)
      shows what threads give to host code that really runs in parallel,

each over a batch under `jax.jit(jax.vmap(...))`, as milliseconds per batched call and as
speed-up over `vmap="sequential"`; then Ray's overhead per call and per element.

BLAS runs single-threaded here (set before NumPy loads) so that the parallelism measured is the
executors' over elements, not OpenBLAS's inside one solve.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import concurrent.futures  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxbridge  # noqa: E402

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


def hand_written(fn, result, pool):
    """The baseline: pure_callback(vmap_method="broadcast_all") fanning out on a thread pool."""

    def batched(*arrays):
        if arrays[0].ndim == result.ndim:  # unbatched
            return np.asarray(fn(*arrays), result.dtype)
        size = arrays[0].shape[0]
        out = np.empty((size, *result.shape), result.dtype)
        bounds = np.linspace(0, size, WORKERS + 1).astype(int)

        def chunk(lo, hi):
            for i in range(lo, hi):
                out[i] = fn(*(x[i] for x in arrays))

        list(pool.map(chunk, bounds[:-1], bounds[1:]))
        return out

    return lambda *args: jax.pure_callback(batched, result, *args, vmap_method="broadcast_all")


def timed(f, args, repeats):
    jax.block_until_ready(f(*args))  # compile, start pools, send the function to workers
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - t)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    parser.add_argument("--no-ray", action="store_true", help="skip Ray")
    opts = parser.parse_args()
    batch, n, repeats = (64, 128, 1) if opts.quick else (256, 256, 5)
    span = 100 if opts.quick else 300

    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((batch, n, n)) + n * np.eye(n), jnp.float32)
    b = jnp.asarray(rng.standard_normal((batch, n)), jnp.float32)
    starts = jnp.stack([jnp.arange(batch) * span + 1, jnp.full(batch, span)], 1).astype(jnp.int32)
    c = jnp.asarray(rng.standard_normal((batch, n, n)), jnp.float32)

    executors: dict = {
        "sequential": "sequential",
        f"Threads({WORKERS})": jaxbridge.Threads(WORKERS),
        f"Processes({WORKERS})": jaxbridge.Processes(WORKERS),
    }
    rows = {}
    for label, vmap in executors.items():
        fa = jax.jit(jax.vmap(jaxbridge.host(solve, vmap=vmap, result=lambda a, b: b)))
        fb = jax.jit(jax.vmap(jaxbridge.host(collatz, vmap=vmap)))
        fc = jax.jit(jax.vmap(jaxbridge.host(kernel, vmap=vmap)))
        rows[label] = (
            timed(fa, (a, b), repeats),
            timed(fb, (starts,), repeats),
            timed(fc, (c,), repeats),
        )
    if not opts.no_ray:  # after the others: a starting cluster keeps the CPUs busy a while
        import ray

        ray.init(num_cpus=WORKERS, include_dashboard=False, log_to_driver=False)
        time.sleep(5.0)
        ray_executor = executors[f"Ray(num_workers={WORKERS})"] = jaxbridge.Ray(num_workers=WORKERS)
        fa = jax.jit(jax.vmap(jaxbridge.host(solve, vmap=ray_executor, result=lambda a, b: b)))
        fb = jax.jit(jax.vmap(jaxbridge.host(collatz, vmap=ray_executor)))
        fc = jax.jit(jax.vmap(jaxbridge.host(kernel, vmap=ray_executor)))
        rows[f"Ray(num_workers={WORKERS})"] = (
            timed(fa, (a, b), repeats),
            timed(fb, (starts,), repeats),
            timed(fc, (c,), repeats),
        )
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        fa = jax.jit(jax.vmap(hand_written(solve, jax.ShapeDtypeStruct((n,), jnp.float32), pool)))
        fb = jax.jit(jax.vmap(hand_written(collatz, jax.ShapeDtypeStruct((2,), jnp.int32), pool)))
        fc = jax.jit(jax.vmap(hand_written(kernel, jax.ShapeDtypeStruct((n,), jnp.float32), pool)))
        rows["ThreadPoolExecutor + pure_callback"] = (
            timed(fa, (a, b), repeats),
            timed(fb, (starts,), repeats),
            timed(fc, (c,), repeats),
        )

    base = rows["sequential"]
    print(
        f"\n{batch} elements, {WORKERS} workers; (a) solve of {n} unknowns, (b) pure Python, "
        f"(c) NumPy kernel on {n}x{n}"
    )
    print(f"{'executor':<38}" + "".join(f"{f'({k}) ms':>9}{'speed-up':>10}" for k in "abc"))
    for label, times in rows.items():
        print(
            f"{label:<38}"
            + "".join(f"{t * 1e3:>9.1f}{b / t:>9.2f}x" for t, b in zip(times, base, strict=True))
        )
    hand = rows["ThreadPoolExecutor + pure_callback"]
    threads = rows[f"Threads({WORKERS})"]
    print(
        f"\nThreads vs the hand-written pool: (a) {hand[0] / threads[0]:.2f}x, "
        f"(c) {hand[2] / threads[2]:.2f}x"
    )

    if not opts.no_ray:
        tiny = jax.jit(jax.vmap(jaxbridge.host(lambda x: x + 1, vmap=ray_executor)))
        small = timed(tiny, (jnp.zeros(WORKERS),), repeats * 4)
        large = timed(tiny, (jnp.zeros(4096),), repeats * 4)
        seq = jax.jit(jax.vmap(jaxbridge.host(lambda x: x + 1)))
        host = timed(seq, (jnp.zeros(4096),), repeats * 4) / 4096
        per_element = (large - small) / (4096 - WORKERS) - host
        print(
            f"Ray overhead: {small * 1e3:.2f} ms per call ({WORKERS} tasks), "
            f"{per_element * 1e6:.2f} us per element beyond the host function"
        )
        ray.shutdown()


if __name__ == "__main__":
    main()
