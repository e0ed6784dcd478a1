"""jaxbridge.mujoco against raw `mujoco.rollout` and MJX, side by side in one run.

    python benchmarks/mujoco_simulator.py [--quick] [--nthread N] [--mjx-256]

1. The closed loop, per call: `jax.jit` of a `lax.scan` over `jax.vmap(sim.step)` (one host
   call per scan step) on the gymnasium humanoid as shipped (RK4, PGS) and an Euler/Newton
   variant, at batch 1, 16 and 64 and frame_skip 1 and 5, against
   - raw per-step calls, the best a user could write: `mujoco.rollout` once per step with a
     persistent `Rollout` (the same thread count), preallocated outputs and control buffer;
   - one long raw rollout of the same number of physics steps;
   - the floor: MuJoCo's own time in the same calls (serial or pool, as jaxbridge chooses)
     plus XLA's bare `buffer_callback` (a callback doing nothing, same shapes).
   `own` is jaxbridge's cost per call outside MuJoCo and outside XLA's callback: the time of
   a scan outside its own MuJoCo calls (timed, on a second simulator), less the bare callback.
   With `mujoco.batch` (MuJoCo 4.0+), also against the callback a user could write instead
   (`HandWritten`: one `Batch.step` per scan step, the fewest copies, no checks), whose own
   cost, measured the same way, is what MuJoCo's step leaving the caches cold costs any
   design built on a host callback.
2. Open loop: `jax.jit(sim.rollout)` against raw `mujoco.rollout` and MJX (Euler/Newton only:
   MJX cannot load the shipped humanoid, it lacks PGS), with compile times.
3. Gradients per second of a 50-step rollout loss.
4. The closed loop of `examples/07_closed_loop.py` (a Flax NNX policy on Reacher-v5):
   environment steps per second and gradients per second (backpropagation through the
   `lax.scan`), against the same loop on MJX.

Rows whose peer is not installed say so and are skipped. `--quick` measures fewer sizes.
MJX at batch 256 needs `--mjx-256` (it deadlocked in jaxlib's batched Cholesky on 2 CPUs).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax.experimental.buffer_callback import buffer_callback
from mujoco import rollout as mj_rollout

from jaxbridge.mujoco import Simulator

jax.config.update("jax_enable_x64", True)


def optional(name: str) -> tuple[Any, str]:
    """(module, "") or (None, why): a peer that is missing skips its rows."""
    try:
        if name == "mjx":
            from mujoco import mjx

            return mjx, ""
        return __import__(name), ""
    except Exception as e:  # ImportError, or a broken install
        return (
            None,
            f"{name} not available ({type(e).__name__}: {e}); `pip install jaxbridge[bench]`",
        )


def humanoid(variant: str) -> mujoco.MjModel:
    import gymnasium

    path = os.path.join(os.path.dirname(gymnasium.__file__), "envs/mujoco/assets/humanoid.xml")
    model = mujoco.MjModel.from_xml_path(path)
    if variant == "euler-newton":
        model.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
        model.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    return model


def has_batch() -> bool:
    """Whether this MuJoCo has `mujoco.batch` (4.0 and later)."""
    try:
        from mujoco import batch  # noqa: F401
    except ImportError:
        return False
    return True


def once(f: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(f())
    return time.perf_counter() - t0


def best_interleaved(fns: dict[Any, Callable[[], Any]], rounds: int, cpu: dict | None = None):
    """The best seconds per call of each, measured in turn round after round.

    The best, not the mean: on a shared machine the noise only ever adds; in turn, so that a
    slow phase of the machine hits every method alike. With `cpu`, it also receives the best
    CPU seconds of this process (all its threads) per call: work done, which time slices
    taken by other processes do not inflate.
    """
    best = dict.fromkeys(fns, float("inf"))
    if cpu is not None:
        cpu.update(dict.fromkeys(fns, float("inf")))
    for _ in range(rounds):
        for name, f in fns.items():
            c0 = time.process_time()
            best[name] = min(best[name], once(f))
            if cpu is not None:
                cpu[name] = min(cpu[name], time.process_time() - c0)
    return best


def inputs(sim: Simulator, B: int, T: int, seed: int = 0):
    """`B` humanoids standing on the ground with random velocities, and `(T, B, nu)` controls."""
    rng = np.random.default_rng(seed)
    parts = sim.split_state(sim.initial_state())
    qvel = 0.1 * rng.standard_normal((B, sim.model.nv))
    S = np.asarray(sim.make_state(qvel=jnp.asarray(qvel), qpos=parts.qpos))
    U = rng.uniform(-0.4, 0.4, (T, B, sim.nu))
    return S, U


# -- 1. the closed loop, per call --------------------------------------------------------


class RawPerStep:
    """Raw `mujoco.rollout`, one call per environment step, as a careful user writes it."""

    def __init__(self, model: mujoco.MjModel, B: int, fs: int, nthread: int, pool: bool):
        nstate = mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        self.model, self.fs = model, fs
        self.models = [model] * B
        self.datas = [mujoco.MjData(model) for _ in range(max(nthread, 1))]
        self.datas = self.datas if pool else self.datas[:1]
        self.runner = mj_rollout.Rollout(nthread=nthread if pool else 0)
        self.state = np.empty((B, nstate))
        self.ctrl = np.empty((B, fs, model.nu))
        self.out = np.empty((B, fs, nstate))
        self.sensors = np.empty((B, fs, model.nsensordata))
        self.in_mujoco = self.in_mujoco_cpu = 0.0

    def __call__(self, S: np.ndarray, U: np.ndarray) -> np.ndarray:
        self.state[...] = S
        self.in_mujoco = self.in_mujoco_cpu = 0.0
        for u in U:
            self.ctrl[...] = u[:, None]
            t0, c0 = time.perf_counter(), time.process_time()
            self.runner.rollout(
                self.models,
                self.datas,
                self.state,
                self.ctrl,
                nstep=self.fs,
                skip_checks=True,
                state=self.out,
                sensordata=self.sensors,
            )
            self.in_mujoco += time.perf_counter() - t0
            self.in_mujoco_cpu += time.process_time() - c0
            self.state[...] = self.out[:, -1]
        return self.state


class RawBatchPerStep:
    """Raw `mujoco.batch` (MuJoCo 4.0 and later), one `Batch.step` per environment step, as a
    careful user writes it: the states stay in the batch's rows, each step writes the controls
    and a zero warm start (each step starts as a fresh `MjData`, as `sim.step` and per-step
    `mujoco.rollout` calls do: the same physics), and reads nothing else."""

    def __init__(self, model: mujoco.MjModel, B: int, fs: int, nthread: int):
        from mujoco import batch

        self.fs = fs
        self.batch = batch.Batch(model, B, max(nthread, 1))
        self.qpos, self.qvel = self.batch.bind("qpos"), self.batch.bind("qvel")
        self.time, self.ctrl = self.batch.bind("time"), self.batch.bind("ctrl")
        self.warm = self.batch.bind("qacc_warmstart")
        self.nq, self.nv = model.nq, model.nv

    def __call__(self, S: np.ndarray, U: np.ndarray) -> np.ndarray:
        nq = self.nq
        self.time[...] = S[:, 0].reshape(self.time.shape)
        self.qpos[...] = S[:, 1 : 1 + nq]
        self.qvel[...] = S[:, 1 + nq : 1 + nq + self.nv]
        self.in_mujoco = self.in_mujoco_cpu = 0.0
        for u in U:
            self.ctrl[...] = u
            self.warm[...] = 0.0
            t0, c0 = time.perf_counter(), time.process_time()
            self.batch.step(None, self.fs)
            self.in_mujoco += time.perf_counter() - t0
            self.in_mujoco_cpu += time.process_time() - c0
        return np.concatenate([self.time.reshape(-1, 1), self.qpos, self.qvel], axis=1)


class HandWritten:
    """The closed loop's callback a user could write instead on `mujoco.batch` (MuJoCo 4.0+):
    XLA's `buffer_callback` around one `Batch.step` per scan step, in the fewest NumPy calls
    (one copy of the state, a zero warm start and the controls into the batch's rows, one copy
    of the states out) and with no checks at all: no non-finite input is flagged, no warning
    read. What any design on a host callback pays outside MuJoCo, on the same threads (serial
    or pool) as jaxbridge. With `timed`, its `Batch.step` calls are summed in `seconds`. With
    `step_only`, it calls `Batch.step` and nothing else (its output is not the next state):
    what XLA's callback costs beyond the bare one once MuJoCo has filled the caches."""

    def __init__(
        self,
        model: mujoco.MjModel,
        shape,
        fs: int,
        threads: int,
        timed: bool,
        step_only: bool = False,
    ):
        from mujoco import batch as mj_batch

        B = shape[0]
        b = mj_batch.Batch(model, B, threads)
        b.set_models(model)
        integration = int(mujoco.mjtState.mjSTATE_INTEGRATION)
        warm, ctrl = (
            mujoco.mj_stateSize(model, integration & (int(bit) - 1))
            for bit in (mujoco.mjtState.mjSTATE_WARMSTART, mujoco.mjtState.mjSTATE_CTRL)
        )
        n = mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        assert warm == n and ctrl == n + model.nv  # state, warm start, controls: adjacent
        head, full = b.state[:, : ctrl + model.nu], b.state[:, :n]
        zeros = np.zeros((B, model.nv))
        step, self.seconds = b.step, 0.0

        def untimed(ctx, outs, s, u):
            out = outs[0].__array__()
            np.concatenate((s.__array__(), zeros, u.__array__()), axis=1, out=head)
            step(None, fs)
            np.copyto(out, full)

        def alone(ctx, outs, s, u):
            t0 = time.perf_counter()
            step(None, fs)
            self.seconds += time.perf_counter() - t0

        def with_timer(ctx, outs, s, u):
            out = outs[0].__array__()
            np.concatenate((s.__array__(), zeros, u.__array__()), axis=1, out=head)
            t0 = time.perf_counter()
            step(None, fs)
            self.seconds += time.perf_counter() - t0
            np.copyto(out, full)

        fn = alone if step_only else with_timer if timed else untimed
        cb = buffer_callback(fn, [jax.ShapeDtypeStruct(shape, "f8")])
        self.scan = jax.jit(lambda S, U: jax.lax.scan(lambda s, u: (cb(s, u)[0], None), S, U)[0])


class TimedCall:
    """A MuJoCo call whose time is summed: MuJoCo's own time inside jaxbridge's calls."""

    def __init__(self, inner: Callable[..., Any]):
        self.inner, self.seconds = inner, 0.0

    def __call__(self, *args: Any) -> Any:
        t0 = time.perf_counter()
        out = self.inner(*args)
        self.seconds += time.perf_counter() - t0
        return out


class TimedRollout:
    """A native `Rollout` whose calls are timed."""

    def __init__(self, inner: Any):
        self.rollout = TimedCall(inner.rollout)


def timed_engine(sim: Simulator) -> list[TimedCall]:
    """Wraps the MuJoCo calls of `sim`'s engine (its workers and steppers, made by a first
    call) in timers: `mujoco.rollout`'s, and the `Batch.step` C call of each batch `mujoco.batch`
    steps them on."""
    timers = []
    for _, exact in sim.core.engine._steppers.values():
        if exact is not None:
            exact.step = TimedCall(exact.step)
            timers.append(exact.step)
    for w in sim.core.engine._free:
        w.serial = TimedRollout(w.serial)
        timers.append(w.serial.rollout)
        if w.pool is not None:
            w.pool = TimedRollout(w.pool)
            timers.append(w.pool.rollout)
        if w._batch is not None:
            for exact in w._batch._exact.values():
                exact.step = TimedCall(exact.step)
                timers.append(exact.step)
    return timers


def bench_closed_loop(model, variant, B, fs, nthread, T, rounds):
    """Per-call microseconds of each method, from the difference of `T` and `T // 3` steps.

    The difference cancels what is paid once per run (jit dispatch, the first call), and short
    runs measured many times, in turn, find the machine's quiet moments.
    """
    sim = Simulator(model, nthread=nthread, frame_skip=fs)
    S, U = inputs(sim, B, T)
    T1 = max(1, T // 3)

    @jax.jit
    def scan(S, U):
        return jax.lax.scan(lambda s, u: (jax.vmap(sim.step)(s, u), None), S, U)[0]

    noop = buffer_callback(lambda ctx, out, s, u: None, jax.ShapeDtypeStruct(S.shape, S.dtype))

    @jax.jit
    def bare(S, U):
        return jax.lax.scan(lambda s, u: (noop(s, u), None), S, U)[0]

    raw = RawPerStep(model, B, fs, sim.nthread, pool=B > 1 and sim.nthread > 1)
    same = RawPerStep(model, B, fs, sim.nthread, pool=sim.core.engine.uses_pool(B, fs))
    raw_batch = RawBatchPerStep(model, B, fs, sim.nthread) if has_batch() else None
    # jaxbridge steps a call that goes to the pool on mujoco.batch's, where MuJoCo has it
    path = "serial" if not sim.core.engine.uses_pool(B, fs) else "batch" if raw_batch else "pool"
    if path == "batch":
        same = raw_batch
    datas = [mujoco.MjData(model) for _ in range(max(sim.nthread, 1))]
    long_pool = mj_rollout.Rollout(nthread=sim.nthread if B > 1 else 0)
    U_long = np.ascontiguousarray(np.repeat(np.swapaxes(U, 0, 1), fs, axis=1))
    out_long = np.empty((B, T * fs, sim.nstate))

    def long(n):
        long_pool.rollout(
            [model] * B,
            datas if B > 1 else datas[:1],
            S,
            np.ascontiguousarray(U_long[:, : n * fs]),
            skip_checks=True,
            nstep=n * fs,
            state=out_long[:, : n * fs] if n == T else np.empty((B, n * fs, sim.nstate)),
        )

    threads = sim.nthread if sim.core.engine.uses_pool(B, fs) else 1
    hand = HandWritten(model, S.shape, fs, threads, timed=False) if has_batch() else None
    hand_timed = HandWritten(model, S.shape, fs, threads, timed=True) if has_batch() else None
    step_only = (
        HandWritten(model, S.shape, fs, threads, True, step_only=True) if has_batch() else None
    )
    equal = np.array_equal(np.asarray(scan(S, U)), raw(S, U))
    if hand is not None:
        equal &= np.array_equal(np.asarray(scan(S, U)), np.asarray(hand.scan(S, U)))
    if raw_batch is not None:
        equal &= np.array_equal(
            np.asarray(scan(S, U))[:, : 1 + model.nq + model.nv], raw_batch(S, U)
        )
    in_mujoco, in_mujoco_cpu = [], []

    # The same scan on a second simulator whose MuJoCo calls are timed: MuJoCo's own time in
    # jaxbridge's calls, which can exceed its time in raw calls (XLA runs between the steps).
    sim_timed = Simulator(model, nthread=nthread, frame_skip=fs)

    @jax.jit
    def scan_timed_fn(S, U):
        return jax.lax.scan(lambda s, u: (jax.vmap(sim_timed.step)(s, u), None), S, U)[0]

    jax.block_until_ready(scan_timed_fn(S, U))  # makes the engine's workers
    timers = timed_engine(sim_timed)
    in_scan: list[float] = []
    outside: dict[int, list[float]] = {T: [], T1: []}  # seconds of a run not inside MuJoCo

    def scan_timed(n):
        for timer in timers:
            timer.seconds = 0.0
        t0 = time.perf_counter()
        jax.block_until_ready(scan_timed_fn(S, U[:n]))
        wall = time.perf_counter() - t0
        mujoco_seconds = sum(timer.seconds for timer in timers)
        in_scan.append(mujoco_seconds / n)
        outside[n].append(wall - mujoco_seconds)

    hand_outside: dict[Any, list[float]] = {k: [] for k in ((0, T), (0, T1), (1, T), (1, T1))}

    def hand_run(n, which):  # which: 0 the hand-written callback, 1 the step-only one
        h = (hand_timed, step_only)[which]
        assert h is not None
        h.seconds = 0.0
        t0 = time.perf_counter()
        jax.block_until_ready(h.scan(S, U[:n]))
        hand_outside[which, n].append(time.perf_counter() - t0 - h.seconds)

    def floor(n):
        same(S, U[:n])
        in_mujoco.append(same.in_mujoco / n)
        in_mujoco_cpu.append(same.in_mujoco_cpu / n)

    fns = {}
    for n in (T, T1):
        Un = U[:n]
        fns[("scan", n)] = lambda Un=Un: scan(S, Un)
        fns[("raw", n)] = lambda Un=Un: raw(S, Un)
        fns[("bare", n)] = lambda Un=Un: bare(S, Un)
        fns[("long", n)] = lambda n=n: long(n)
        if raw_batch is not None:
            fns[("raw_batch", n)] = lambda Un=Un: raw_batch(S, Un)
        if hand is not None:
            fns[("hand", n)] = lambda Un=Un: hand.scan(S, Un)
            fns[("hand_timed", n)] = lambda n=n: hand_run(n, 0)
            fns[("step_only", n)] = lambda n=n: hand_run(n, 1)
    fns[("floor", T)] = lambda: floor(T)
    fns[("timed", T)] = lambda: scan_timed(T)
    if T1 < T:
        fns[("timed", T1)] = lambda: scan_timed(T1)
    for f in fns.values():  # compile both lengths, warm every path
        f()
    cpu: dict = {}
    t = best_interleaved(fns, rounds, cpu)

    def per_call(t):
        return {
            k: (t[(k, T)] - t[(k, T1)]) / (T - T1) * 1e6 if T > T1 else t[(k, T)] / T * 1e6
            for k in ("scan", "raw", "bare", "long", "raw_batch", "hand")
            if (k, T) in t
        }

    us, cpu_us = per_call(t), per_call(cpu)
    mj = min(in_mujoco) * 1e6
    mj_cpu = min(in_mujoco_cpu) * 1e6
    mj_scan = min(in_scan) * 1e6
    # The time outside MuJoCo in the timed scan, per call, by the same difference of lengths.
    out_scan = (
        (min(outside[T]) - min(outside[T1])) / (T - T1) * 1e6
        if T > T1
        else min(outside[T]) / T * 1e6
    )

    def hand_out(which):
        if hand is None:
            return float("nan")
        if T > T1:
            return (min(hand_outside[which, T]) - min(hand_outside[which, T1])) / (T - T1) * 1e6
        return min(hand_outside[which, T]) / T * 1e6

    return dict(
        hand=us.get("hand", float("nan")),
        hand_own=hand_out(0) - us["bare"],
        step_only_own=hand_out(1) - us["bare"],
        variant=variant,
        B=B,
        fs=fs,
        scan=us["scan"],
        raw=us["raw"],
        raw_batch=us.get("raw_batch", float("nan")),
        long=us["long"],
        mujoco=mj,
        bare=us["bare"],
        mujoco_scan=mj_scan,
        own=us["scan"] - mj - us["bare"],
        own_scan=out_scan - us["bare"],
        own_cpu=cpu_us["scan"] - mj_cpu - cpu_us["bare"],
        scan_cpu=cpu_us["scan"],
        bare_cpu=cpu_us["bare"],
        mujoco_cpu=mj_cpu,
        equal=equal,
        path=path,
    )


def print_closed_loop_hand(rows):
    print(
        "\nAgainst the callback a user could write instead on `mujoco.batch` (MuJoCo 4.0+; "
        "`HandWritten`: a `buffer_callback` around one `Batch.step`, the fewest copies, no "
        "checks), the same threads, µs per call. `own`: the scan's time outside MuJoCo's "
        "calls, less the bare callback, for each; what MuJoCo's step leaves in the caches "
        "costs both alike. `step-only own`: the same for a callback that calls `Batch.step` "
        "and nothing else (no copy in or out): XLA's own callback, after MuJoCo's step, "
        "beyond the bare one; no design built on a host callback costs less.\n"
    )
    print(
        "| model | B | frame_skip | scan | hand-written scan | hand-written/scan | own | "
        "hand-written own | step-only own | own − hand-written own |"
    )
    print("|" + "---|" * 10)
    for r in rows:
        print(
            f"| {r['variant']} | {r['B']} | {r['fs']} | {r['scan']:.1f} | {r['hand']:.1f} | "
            f"{r['hand'] / r['scan']:.2f} | {r['own_scan']:.1f} | {r['hand_own']:.1f} | "
            f"{r['step_only_own']:.1f} | {r['own_scan'] - r['hand_own']:.1f} |"
        )


def print_closed_loop_cpu(rows):
    print(
        "\nThe same calls in CPU µs of this process (all threads; not inflated by other "
        "processes' time slices, so steadier on a shared machine), against MuJoCo's CPU time "
        "in the raw per-step calls:\n"
    )
    print("| model | B | frame_skip | scan | MuJoCo raw | bare cb | scan − MuJoCo raw − bare |")
    print("|" + "---|" * 7)
    for r in rows:
        own = f"{r['own_cpu']:.1f}"
        print(
            f"| {r['variant']} | {r['B']} | {r['fs']} | {r['scan_cpu']:.1f} | "
            f"{r['mujoco_cpu']:.1f} | {r['bare_cpu']:.1f} | {own} |"
        )


def print_closed_loop(rows, nthread):
    print(
        f"\n### 1. Closed loop, per call: jit(scan(vmap(sim.step))), humanoid, {nthread} "
        "threads, float64\n"
    )
    print(
        "µs per call (best of interleaved rounds). `raw per-step`: `mujoco.rollout` once per "
        "step; `raw batch per-step`: `mujoco.batch`'s `Batch.step` once per step (MuJoCo 4.0+); "
        "`scan/raw` is against the faster of the two. `MuJoCo raw`: time inside MuJoCo in raw "
        "per-step calls on the path jaxbridge takes (serial `mujoco.rollout`, or on the pool: "
        "`mujoco.batch` where MuJoCo has it, else `mujoco.rollout`'s); `MuJoCo in scan`: "
        "time inside MuJoCo's calls within the scan itself (timed on a second simulator); "
        "`bare cb`: XLA's buffer_callback doing nothing; `own`: the timed scan's time outside "
        "MuJoCo's calls, less bare cb; floor = MuJoCo raw + bare cb.\n"
    )
    print(
        "| model | B | frame_skip | path | scan | raw per-step | raw batch per-step | "
        "one long rollout | MuJoCo raw | MuJoCo in scan | bare cb | own (≤ 10) | scan/raw | "
        "scan/long | floor/scan | bit-equal |"
    )
    print("|" + "---|" * 16)
    for r in rows:
        checks = []
        heavy = r["fs"] >= 5 or r["B"] >= 16
        best_raw = r["raw"] if np.isnan(r["raw_batch"]) else min(r["raw"], r["raw_batch"])
        scan_raw = best_raw / r["scan"]
        scan_long = r["long"] / r["scan"]
        floor = (r["mujoco"] + r["bare"]) / r["scan"]
        own = f"{r['own_scan']:.1f} {'met' if r['own_scan'] <= 10 else 'MISSED'}"
        sr = f"{scan_raw:.2f}" + (
            f" {'met' if scan_raw >= 0.9 else 'MISSED'} (≥ 0.9)" if heavy else ""
        )
        target_long = r["fs"] >= 5 and r["B"] >= 16
        sl = f"{scan_long:.2f}" + (
            f" {'met' if scan_long >= 0.85 else 'MISSED'} (≥ 0.85)" if target_long else ""
        )
        fl = f"{floor:.2f}" + (" (floor)" if r["B"] == 1 and r["fs"] == 1 else "")
        checks.append(r["equal"])
        print(
            f"| {r['variant']} | {r['B']} | {r['fs']} | {r['path']} | "
            f"{r['scan']:.1f} | {r['raw']:.1f} | {r['raw_batch']:.1f} | {r['long']:.1f} | "
            f"{r['mujoco']:.1f} | "
            f"{r['mujoco_scan']:.1f} | {r['bare']:.1f} | {own} | {sr} | {sl} | {fl} | "
            f"{'yes' if r['equal'] else 'NO'} |"
        )


# -- 2. open loop: rollout against raw and MJX --------------------------------------------


def bench_rollout(sim: Simulator, model, B: int, T: int, nthread: int):
    S, U = inputs(sim, B, T)
    U = np.ascontiguousarray(np.swapaxes(U, 0, 1))
    rollout = jax.jit(lambda S, U: sim.rollout(S, U).state)
    c_roll = once(lambda: rollout(S, U))
    datas = [mujoco.MjData(model) for _ in range(max(nthread, 1))]
    pool = mj_rollout.Rollout(nthread=nthread if B > 1 else 0)
    raw = lambda: pool.rollout(model, datas if B > 1 else datas[0], S, U)  # noqa: E731
    t = best_interleaved({"rollout": lambda: rollout(S, U), "raw": raw}, 5)
    return B * T / t["rollout"], B * T / t["raw"], c_roll


def bench_mjx(mjx, model: mujoco.MjModel, B: int, T: int):
    with jax.enable_x64(False):  # MJX's own precision; its scan carry breaks under x64
        mx = mjx.put_model(model)
        d0 = mjx.make_data(mx)
        noise = 0.01 * jax.random.normal(jax.random.key(0), (B, *d0.qvel.shape))
        batch = jax.vmap(lambda n: d0.replace(qvel=d0.qvel + n))(noise)
        step = jax.vmap(lambda d: mjx.step(mx, d))

        @jax.jit
        def run(d):
            return jax.lax.scan(lambda d, _: (step(d), None), d, None, length=T)[0].qpos

        first = once(lambda: run(batch))
        t = best_interleaved({"mjx": lambda: run(batch)}, 3)["mjx"]
    return B * T / t, first - t


def bench_grad(sim: Simulator, B: int, T: int = 50):
    S, U = inputs(sim, B, T)
    U = np.ascontiguousarray(np.swapaxes(U, 0, 1))

    def loss(s, u):
        traj = sim.rollout(s, u)
        return jnp.sum(traj.state[..., -1, 1:4] ** 2) + 1e-3 * jnp.sum(u**2)

    g = jax.jit(jax.vmap(jax.grad(loss, argnums=1)))
    c = once(lambda: g(S, U))
    t = best_interleaved({"grad": lambda: g(S, U)}, 3)["grad"]
    return B / t, c


# -- 4. the closed loop of examples/07_closed_loop.py, against MJX ---------------------------


def reacher_loops(B: int, T: int, with_mjx: bool):
    """Forward and gradient functions of the Reacher closed loop, for jaxbridge and MJX."""
    from flax import nnx

    sim = Simulator.from_gymnasium("Reacher-v5")
    model, fs = sim.model, sim.frame_skip

    class Policy(nnx.Module):
        def __init__(self, rngs):
            self.hidden = nnx.Linear(8, 64, rngs=rngs)
            self.out = nnx.Linear(64, sim.nu, rngs=rngs)

        def __call__(self, obs):
            return 0.3 * jnp.tanh(self.out(jnp.tanh(self.hidden(obs))))

    graphdef, params = nnx.split(Policy(nnx.Rngs(0)))

    def fingertip(q):
        a, b = q[..., 0], q[..., 0] + q[..., 1]
        return jnp.stack(
            [0.1 * jnp.cos(a) + 0.11 * jnp.cos(b), 0.1 * jnp.sin(a) + 0.11 * jnp.sin(b)], -1
        )

    def observe(qpos, qvel):
        q, v, target = qpos[..., :2], qvel[..., :2], qpos[..., 2:]
        return jnp.concatenate(
            [jnp.cos(q), jnp.sin(q), 0.1 * v, 10.0 * (target - fingertip(qpos))], -1
        )

    rng = np.random.default_rng(0)
    qpos0 = np.concatenate(
        [rng.uniform(-1, 1, (B, 2)), rng.uniform(-0.1, 0.1, (B, 2))], axis=1
    ).astype(np.float32)

    def make(step_fn, init):
        def episode(params, start):
            policy = nnx.merge(graphdef, params)

            def body(carry, _):
                qpos, qvel = carry.qpos, carry.qvel
                ctrl = policy(observe(qpos, qvel))
                carry = step_fn(carry, ctrl)
                dist = jnp.linalg.norm(fingertip(carry.qpos) - carry.qpos[..., 2:], axis=-1)
                return carry, dist

            return jax.lax.scan(body, start, length=T)[1]

        def loss(params, starts):
            return jnp.mean(jax.vmap(lambda s: episode(params, s))(starts) ** 2)

        starts = init(qpos0)
        fwd = jax.jit(lambda p: jax.vmap(lambda s: episode(p, s))(starts))
        grad = jax.jit(jax.grad(loss))
        return lambda: fwd(params), lambda: grad(params, starts)

    # jaxbridge's carry is the flat state array; give it .qpos/.qvel through split_state.
    class JB:
        @staticmethod
        def step(state, ctrl):
            return _State(sim.step(state.flat, ctrl))

        @staticmethod
        def init(q):
            return _State(sim.make_state(qpos=jnp.asarray(q)))

    @jax.tree_util.register_pytree_node_class
    class _State:
        def __init__(self, flat):
            self.flat = flat

        @property
        def qpos(self):
            return sim.split_state(self.flat).qpos

        @property
        def qvel(self):
            return sim.split_state(self.flat).qvel

        def tree_flatten(self):
            return (self.flat,), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    loops = {"jaxbridge": make(JB.step, JB.init)}
    mjx, why = optional("mjx")
    if mjx is None or not with_mjx:
        return loops, fs, why
    try:
        mx = mjx.put_model(model)
        # MJX's solver loop is a while_loop, which reverse mode cannot differentiate; one
        # iteration makes it a fixed loop (the common setting for gradients through MJX).
        mx = mx.replace(opt=mx.opt.replace(iterations=1, ls_iterations=4))
        d0 = mjx.make_data(mx)

        def mjx_step(d, ctrl):
            d = d.replace(ctrl=ctrl)
            for _ in range(fs):
                d = mjx.step(mx, d)
            return d

        loops["MJX"] = make(
            mjx_step, lambda q: jax.vmap(lambda q: d0.replace(qpos=q))(jnp.asarray(q))
        )
    except Exception as e:  # MJX cannot load the model: say so in the row
        why = f"MJX cannot run Reacher-v5: {type(e).__name__}: {e}"
    return loops, fs, why


def bench_reacher(B: int, T: int, with_mjx: bool):
    with jax.enable_x64(False):  # float32, as policies train; MuJoCo itself runs in float64
        loops, fs, why = reacher_loops(B, T, with_mjx)
        rows = []
        for name, (fwd, grad) in loops.items():
            c_fwd, c_grad = once(fwd), once(grad)
            t = best_interleaved({"fwd": fwd, "grad": grad}, 3)
            rows.append((name, B * T / t["fwd"], 1 / t["grad"], c_fwd, c_grad))
    return rows, fs, why


# -- main -------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and rounds")
    parser.add_argument("--nthread", type=int, default=None, help="threads (default: all CPUs)")
    parser.add_argument("--mjx-256", action="store_true", help="also MJX at batch 256")
    parser.add_argument(
        "--sections", default="1,2,3,4", help="which tables to measure, e.g. 1,4 (default all)"
    )
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (table 1)")
    args = parser.parse_args()
    quick = args.quick
    sections = {int(x) for x in args.sections.split(",") if x}
    mjx, mjx_why = optional("mjx")
    variants = ("shipped (RK4, PGS)", "euler-newton")
    if 1 in sections:
        closed_loop_section(args, variants)
    if sections & {2, 3}:
        open_loop_sections(args, variants, mjx, mjx_why, sections)
    if 4 in sections:
        reacher_section(quick, mjx_why)
    print("\n(measured on a shared machine: absolute numbers vary, ratios within a row hold)")


def closed_loop_section(args, variants):
    quick = args.quick
    closed_batches = (1, 16) if quick else (1, 16, 64)
    rounds = args.rounds or (5 if quick else 40)  # best of 40: this machine is noisy
    closed = []
    nthread = 1
    for B in closed_batches:
        for fs in (1, 5):
            for variant in variants:
                model = humanoid("euler-newton" if variant == "euler-newton" else "shipped")
                # Runs of about 2 ms (quick: 1 ms), so that some find the machine quiet.
                T = int(np.clip((1e-3 if quick else 2e-3) / (B * fs * 25e-6), 6, 60))
                row = bench_closed_loop(model, variant, B, fs, args.nthread, int(T), rounds)
                closed.append(row)
                nthread = Simulator(model, nthread=args.nthread).nthread
                print(".", end="", flush=True)
    print_closed_loop(closed, nthread)
    if has_batch():
        print_closed_loop_hand(closed)
    print_closed_loop_cpu(closed)


def open_loop_sections(args, variants, mjx, mjx_why, sections):
    quick = args.quick
    batches = (1, 16) if quick else (1, 16, 256)
    mjx_batches = () if quick else (1, 16, 256) if args.mjx_256 else (1, 16)
    steps = {1: 400, 16: 100, 256: 20}
    rows, grads = [], []
    for variant in variants:
        model = humanoid("euler-newton" if variant == "euler-newton" else "shipped")
        sim = Simulator(model, nthread=args.nthread)
        for B in batches:
            T = steps[B] // (4 if quick else 1)
            if 2 not in sections:
                break
            roll_sps, raw_sps, c_roll = bench_rollout(sim, model, B, T, sim.nthread)
            mjx_sps = mjx_compile = float("nan")
            if variant == "euler-newton" and B in mjx_batches and mjx is not None:
                mjx_sps, mjx_compile = bench_mjx(mjx, model, B, min(T, 20))
            rows.append((variant, B, roll_sps, raw_sps, mjx_sps, c_roll, mjx_compile))
            print(".", end="", flush=True)
        if 3 in sections:
            grads.append((variant, *bench_grad(sim, 1, 20 if quick else 50)))
    if 2 in sections:
        print_open_loop(rows, mjx, mjx_why, quick)
    if 3 in sections:
        print("\n### 3. Gradients of a rollout loss (w.r.t. all controls), jit(grad), batch 1\n")
        for v, g, c in grads:
            print(f"- {v}: {g:.2f} gradients/s (compile {c:.2f} s)")


def print_open_loop(rows, mjx, mjx_why, quick):
    print(
        f"\n\n### 2. Open loop: jit(sim.rollout), physics steps per second (frame_skip 1), "
        f"float64, jax {jax.__version__}, mujoco {mujoco.__version__}\n"
    )
    if mjx is None:
        print(f"MJX rows skipped: {mjx_why}\n")
    elif quick:
        print("MJX rows skipped with --quick (MJX compiles the humanoid for minutes).\n")
    print(
        "| model | batch | rollout | raw | MJX | rollout/raw | rollout/MJX | compile s "
        "| MJX compile s |"
    )
    print("|" + "---|" * 9)
    for v, B, roll, raw, mjx_sps, c_roll, c_mjx in rows:
        if np.isnan(mjx_sps):
            mjx_cells = "n/a | n/a"
            c_mjx_cell = "n/a"
        else:
            mjx_cells = f"{mjx_sps:.0f} | {roll / mjx_sps:.1f}"
            c_mjx_cell = f"{c_mjx:.1f}"
        print(
            f"| {v} | {B} | {roll:.0f} | {raw:.0f} | {mjx_cells.split(' | ')[0]} | "
            f"{roll / raw:.2f} | {mjx_cells.split(' | ')[1]} | {c_roll:.2f} | {c_mjx_cell} |"
        )


def reacher_section(quick, mjx_why):
    B, T = (16, 25) if quick else (64, 50)
    flax, flax_why = optional("flax")
    if flax is None:
        print(f"\n### 4. Closed-loop policy (examples/07_closed_loop.py): skipped, {flax_why}")
        return
    reacher, fs, why = bench_reacher(B, T, with_mjx=not quick)
    if quick and not why:
        why = "with --quick (MJX compiles this loop's gradient for minutes)"
    print(
        f"\n### 4. Closed-loop policy (examples/07_closed_loop.py): Reacher-v5, batch {B}, "
        f"{T} env steps of {fs} physics steps, float32 policy\n"
    )
    print("| engine | env steps/s | gradients/s | compile s (forward, grad) |")
    print("|---|---|---|---|")
    for name, sps, gps, c_fwd, c_grad in reacher:
        print(f"| {name} | {sps:.0f} | {gps:.2f} | {c_fwd:.1f}, {c_grad:.1f} |")
    if why:
        print(f"| MJX | skipped: {why} | | |")
    else:
        jb = {r[0]: r for r in reacher}
        if "MJX" in jb:
            print(
                f"\njaxbridge/MJX: {jb['jaxbridge'][1] / jb['MJX'][1]:.2f}x env steps/s, "
                f"{jb['jaxbridge'][2] / jb['MJX'][2]:.2f}x gradients/s (MJX with "
                "opt.iterations=1: its solver's while_loop is not reverse-differentiable)"
            )


if __name__ == "__main__":
    main()
