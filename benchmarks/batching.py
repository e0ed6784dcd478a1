"""Batched host calls: Threads, Processes and Ray against a hand-written thread pool.

Run: `python benchmarks/batching.py [--quick] [--no-ray]`. Workloads, each over a batch under
`jax.jit(jax.vmap(...))`:

  (a) a LAPACK solve of N unknowns per element (GIL released, BLAS inside the host function),
  (b) a pure-Python function that holds the GIL (Collatz steps),
  (c) a GIL-releasing NumPy kernel without BLAS (elementwise maths and a sort per element),
  (c+) (c) again, each call right after BLAS work in the calling thread (a matrix product at
       the process's own BLAS settings), as in a program that mixes both,
  (d) issue 24's kernel: 64 rows of 300 values, each repeated 1000 times, sin * cos, sorted:
      a few MiB of temporaries a call, which glibc's main arena gave back to the system after
      every call and faulted in again, on the calling thread only (`jaxbridge._malloc`).

The reference is what a user writes without JAX: the same function over NumPy arrays on a
`concurrent.futures.ThreadPoolExecutor(2)` ("hand pool"), and a plain loop; and, for (c) and
(d), the same pool mapping the function over the rows inside one `vmap="vectorized"` host call
(issue 24's reference: the calling thread waits while the pool's two threads work). Calls of every
method and workload are interleaved in shuffled rounds (load on a shared machine hits each
alike); the tables show medians, the load average beside them, and the targets.

BLAS keeps the process's settings (this benchmark is about threads): OpenBLAS starts a thread
per core for each call unless OPENBLAS_NUM_THREADS says otherwise; the output says which.
XLA's own thread settings stay at their defaults. `JAXBRIDGE_MALLOPT=0` runs it with glibc's
dynamic malloc thresholds, as before jaxbridge raised them (the output names the setting).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import resource
import statistics
import subprocess
import sys
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


def repeat_sort(b):
    """(d): issue 24's kernel, written to work on stacked rows too (for `"vectorized"`)."""
    y = np.repeat(b, 1000, axis=-1)
    return np.sort(np.sin(y) * np.cos(y), axis=-1)[..., ::1000].astype(np.float32)


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


def pool_inside(fn, pool):
    """Issue 24's reference: one host call whose body maps `fn` over its rows on `pool`."""

    def rows(x):
        return np.stack(list(pool.map(fn, x)))

    return rows


def blas_work(w):
    """BLAS in the calling thread at the process's settings: OpenBLAS wakes its own threads."""
    return w @ w


def measure(methods, workloads, rounds, blas, cost=None):
    """Median seconds of each (method, workload), calls interleaved in shuffled rounds.

    With a dict `cost`, also fills `cost[m, w]` with the medians of this process's CPU
    seconds (every thread's; not a worker process's) and minor page faults per call: on a
    loaded machine they show the work a call costs, which wall time mixes with waiting.
    """
    pairs = [(m, w) for m in methods for w in workloads if methods[m].get(w) is not None]
    for m, w in pairs:  # compile, start pools, send the functions to the workers
        jax.block_until_ready(methods[m][w]())
    times: dict[tuple[str, str], list[float]] = {p: [] for p in pairs}
    cpu: dict[tuple[str, str], list[float]] = {p: [] for p in pairs}
    faults: dict[tuple[str, str], list[int]] = {p: [] for p in pairs}
    shuffle = random.Random(0).shuffle
    for _ in range(rounds):
        shuffle(pairs)
        for m, w in pairs:
            fn = methods[m][w]
            if w == "c+":
                blas_work(blas)
            c, f = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t = time.perf_counter()
            jax.block_until_ready(fn())
            times[m, w].append(time.perf_counter() - t)
            cpu[m, w].append(time.process_time() - c)
            faults[m, w].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f)
    if cost is not None:
        for p in pairs:
            cost[p] = (statistics.median(cpu[p]), statistics.median(faults[p]))
    return {p: statistics.median(v) for p, v in times.items()}


def setup(opts, only=None):
    """The workloads' functions, arguments and results; with `only`, that workload's alone
    (so that no other workload's arrays pass through malloc first)."""
    batch, n = (64, 128) if opts.quick else (256, 256)
    # (a) smaller: on a loaded machine OpenBLAS's own threads make a multi-threaded solve slow
    # by orders of magnitude (they wait for each other at every step), and (a) runs that way
    # wherever BLAS keeps the process's settings.
    n_a = n // 2
    span = 100 if opts.quick else 300
    rng = np.random.default_rng(0)
    want = (lambda w: True) if only is None else (lambda w: w == only)
    fns = {"a": solve, "b": collatz, "c": kernel, "c+": kernel, "d": repeat_sort}
    args, results = {}, {}
    if want("a"):
        a = rng.standard_normal((batch, n_a, n_a)) + n_a * np.eye(n_a)
        b = rng.standard_normal((batch, n_a))
        args["a"] = (jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))
        results["a"] = jax.ShapeDtypeStruct((n_a,), jnp.float32)
    if want("b"):
        starts = jnp.stack([jnp.arange(batch) * span + 1, jnp.full(batch, span)], 1)
        args["b"] = (starts.astype(jnp.int32),)
        results["b"] = jax.ShapeDtypeStruct((2,), jnp.int32)
    for w in ("c", "c+"):
        if want(w):
            args[w] = (jnp.asarray(rng.standard_normal((batch, n, n)), jnp.float32),)
            results[w] = jax.ShapeDtypeStruct((n,), jnp.float32)
    if want("d"):  # issue 24's size, always
        args["d"] = (jnp.asarray(rng.standard_normal((64, 300)), jnp.float32),)
        results["d"] = jax.ShapeDtypeStruct((300,), jnp.float32)
    fns = {w: fns[w] for w in args}
    sizes = {"a": f"(a) solve {n_a}", "b": "(b) pure Python", "c": f"(c) kernel {n}x{n}"}
    sizes |= {"c+": "(c+) after BLAS", "d": "(d) repeat-sort 300"}
    return fns, args, results, batch, sizes


STACKED = ("a", "c", "c+", "d")  # the functions that take stacked rows as they are
INSIDE = "hand pool in one host call"


def run_workload(opts, w, rounds):
    """One workload's methods, interleaved in a fresh interpreter: medians and costs."""
    fns, args, results, _, _ = setup(opts, only=w)
    blas = np.random.default_rng(1).standard_normal((256, 256)) if w == "c+" else None
    executors: dict = {"sequential": "sequential"}
    if w in STACKED:
        executors["vectorized"] = "vectorized"
    executors[f"Threads({WORKERS})"] = jaxbridge.Threads(WORKERS)
    if peer("cloudpickle", rows=f"the Processes({WORKERS}) rows"):
        executors[f"Processes({WORKERS})"] = jaxbridge.Processes(WORKERS)
    methods: dict[str, dict] = {}
    for label, vmap in executors.items():
        f = jax.jit(jax.vmap(jaxbridge.host(fns[w], vmap=vmap, result=results[w])))
        methods[label] = {w: lambda f=f, x=args[w]: f(*x)}
    pool = concurrent.futures.ThreadPoolExecutor(WORKERS)
    if w in ("c", "d"):
        f = jaxbridge.host(pool_inside(fns[w], pool), vmap="vectorized", result=results[w])
        methods[INSIDE] = {w: lambda f=jax.jit(jax.vmap(f)), x=args[w]: f(*x)}
    methods["hand pool (no JAX)"] = {w: outside_jax(fns[w], args[w], results[w], pool)}
    methods["loop (no JAX)"] = {w: outside_jax(fns[w], args[w], results[w], None)}

    # Every method's numbers, once: a fast wrong answer would be worse than a slow one.
    for label, by_workload in methods.items():
        # A vectorised LAPACK solve may round differently from one solve at a time.
        same = np.testing.assert_allclose if w == "a" else np.testing.assert_array_equal
        same(np.asarray(by_workload[w]()), np.asarray(methods["sequential"][w]()), err_msg=label)

    cost: dict = {}
    median = measure(methods, [w], rounds, blas, cost)
    pool.shutdown()
    return {
        "median": {m: median[m, w] for m, _ in median},
        "cost": {m: cost[m, w] for m, _ in cost},
        "settings": settings(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, three rounds")
    parser.add_argument("--no-ray", action="store_true", help="skip Ray")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (9; 3 quick)")
    parser.add_argument("--workload", help=argparse.SUPPRESS)  # a child's one workload
    opts = parser.parse_args()
    rounds = opts.rounds or (3 if opts.quick else 9)
    if opts.workload:
        print(json.dumps(run_workload(opts, opts.workload, rounds)))
        return

    # glibc's malloc thresholds follow a process's history (a freed block raises them for
    # good), so one workload's temporaries would change how another's allocate: each runs in
    # an interpreter of its own, its methods interleaved there.
    fns, args, results, batch, sizes = setup(opts)
    workloads = list(fns)
    flags = [*(["--quick"] if opts.quick else []), "--rounds", str(rounds)]
    load = os.getloadavg()
    by_workload = {}
    for w in workloads:
        done = subprocess.run(
            [sys.executable, __file__, "--workload", w, *flags],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            sys.exit(f"workload {w} failed:\n{done.stdout}{done.stderr}")
        by_workload[w] = json.loads(done.stdout.strip().splitlines()[-1])
    load_after = os.getloadavg()
    median = {(m, w): t for w, r in by_workload.items() for m, t in r["median"].items()}
    cost = {(m, w): c for w, r in by_workload.items() for m, c in r["cost"].items()}
    methods = list(dict.fromkeys(m for m, _ in median))
    base = {w: median["sequential", w] for w in workloads}
    hand = {w: median["hand pool (no JAX)", w] for w in workloads}

    def cell(label, w):
        if (label, w) not in median:
            return "-"
        return f"{median[label, w] * 1e3:.1f} ms, {base[w] / median[label, w]:.2f}x"

    def vs_hand(label, w):
        return f"{hand[w] / median[label, w]:.2f}" if (label, w) in median else "-"

    compared = ("c", "c+", "d")
    rows = [
        (label, *(cell(label, w) for w in workloads), *(vs_hand(label, w) for w in compared))
        for label in methods
    ]
    print(
        table(
            f"{batch} elements ((d): 64), {WORKERS} workers, {rounds} interleaved rounds "
            f"(medians; each workload in its own interpreter); load average {load[0]:.2f} "
            f"before, {load_after[0]:.2f} after, {os.cpu_count()} CPUs; "
            f"{by_workload[workloads[0]]['settings']}",
            rows,
            ("method", *(sizes[w] for w in workloads), *(f"({w}) vs hand pool" for w in compared)),
        )
    )
    in_process = [m for m in methods if not m.startswith("Processes")]

    def spent(label, w):
        if (label, w) not in cost:
            return "-"
        return f"{cost[label, w][0] * 1e3:.1f} ms, {cost[label, w][1]:.0f}"

    print(
        table(
            "CPU time and minor page faults per call in the calling process (medians; every "
            "thread; a worker process's are not counted)",
            [(label, *(spent(label, w) for w in ("c", "d"))) for label in in_process],
            ("method", "(c) CPU, faults", "(d) CPU, faults"),
        )
    )
    threads = f"Threads({WORKERS})"
    targets = [
        (f"{threads} / hand pool, (c)", hand["c"] / median[threads, "c"], 0.9),
        (f"{threads} / hand pool, (c+) after BLAS", hand["c+"] / median[threads, "c+"], 0.9),
        (f"{threads} / hand pool, (d)", hand["d"] / median[threads, "d"], 0.9),
        (f"{threads} / {INSIDE}, (d)", median[INSIDE, "d"] / median[threads, "d"], 0.9),
        (f"{threads} speed-up, (c)", base["c"] / median[threads, "c"], 1.6),
        (f"{threads} speed-up, (d)", base["d"] / median[threads, "d"], 1.6),
    ]
    if (f"Processes({WORKERS})", "b") in median:
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
        ray_rows(ray, fns, args, results, ["a", "b", "c"], rounds)


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


def settings():
    """The settings the numbers depend on: BLAS threads and glibc's malloc thresholds."""
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "unset")
    try:
        from jaxbridge import _malloc
    except ImportError:  # a jaxbridge from before it set them
        return f"OPENBLAS_NUM_THREADS={blas}, malloc thresholds: glibc's dynamic ones"
    return f"OPENBLAS_NUM_THREADS={blas}, malloc thresholds: {_malloc.status()}"


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
