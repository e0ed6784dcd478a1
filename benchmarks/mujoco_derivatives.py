"""Cost of `jaxbridge.mujoco`'s derivatives, against the forward call and the physics floors.

Run: `python benchmarks/mujoco_derivatives.py [--quick]`. Every row is measured in this one
process, the methods of a table interleaved round by round (so a slowdown of the machine
falls on all of them alike), medians reported.

1. `forward` Jacobians of 64 humanoid poses: `jit(vmap(jacrev))` of `geom_xpos` (analytic,
   `mj_jac*` formulas) against the forward call itself and against the central differences
   jaxbridge used before (46 `mj_forward` per pose, reproduced here on the host, without JAX's
   own overhead, so the ratio flatters them).
2. Step Jacobians as `rollout`'s derivative computes them (the warm start carried,
   `warm_step_jacobians`) and as `step`'s does (`step_jacobians`), in Jacobians/s, against the
   finite-difference floors: raw physics steps/s (raw `mujoco.rollout` of one environment step
   from each of the same states, on one thread and on two; on two, also the rows of one raw
   `mujoco.batch.Batch` where MuJoCo has it, and the faster of the two) divided by the
   physics steps one
   Jacobian needs, `(2 d + 1) frame_skip` with `d = 2 nv + na + nu` directions, plus `nv` for
   the warm start in a rollout step (an ideal centred difference).
"""

from __future__ import annotations

import copy
import os
import random
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads
import jax
import jax.numpy as jnp
import mujoco
import mujoco.rollout
import numpy as np
from _util import QUICK, fmt_time, table, verdict

from jaxbridge.mujoco import Simulator, _jacobians, _warmstart
from jaxbridge.mujoco._derivatives import step_jacobians

jax.config.update("jax_enable_x64", True)
FULL = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)
ROUNDS = 3 if QUICK else 7


def interleaved(fns: dict[str, Callable[[], object]], rounds: int = ROUNDS) -> dict[str, float]:
    """Median seconds per call of each function, calling them in a shuffled order each round."""
    for fn in fns.values():
        jax.block_until_ready(fn())  # warm up (and compile)
    times: dict[str, list[float]] = {k: [] for k in fns}
    order = list(fns)
    for _ in range(rounds):
        random.shuffle(order)
        for k in order:
            start = time.perf_counter()
            jax.block_until_ready(fns[k]())
            times[k].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def poses(sim: Simulator, B: int) -> np.ndarray:
    """B humanoid states, on or near the ground (a short random rollout from the start)."""
    rng = np.random.default_rng(0)
    S = np.tile(np.asarray(sim.initial_state()), (B, 1))
    S[:, 1 : 1 + sim.model.nq] += 0.05 * rng.standard_normal((B, sim.model.nq))
    U = 0.3 * rng.uniform(-1, 1, (B, 10, sim.nu))
    return np.asarray(sim.rollout(S, U).state[:, -1])


def old_forward_fd(sim: Simulator, state: np.ndarray, name: str) -> np.ndarray:
    """The former rule: central differences (step 1e-6) of full `mj_forward`s over the nv
    position directions, each after `mj_resetData`, in one serial loop."""
    m, eng = sim.model, sim.core.engine
    d = mujoco.MjData(m)
    qs = eng.layout.slice("qpos")
    out = np.empty((len(state), *getattr(d, name).shape, m.nv))
    for i, s in enumerate(state):
        for j in range(m.nv):
            vals = []
            for h in (1e-6, -1e-6):
                x = s.copy()
                v = np.zeros(m.nv)
                v[j] = h
                q = x[qs].copy()
                mujoco.mj_integratePos(m, q, v, 1.0)
                x[qs] = q
                eng.reset(d, x)
                mujoco.mj_forward(m, d)
                vals.append(getattr(d, name).copy())
            out[i, ..., j] = (vals[0] - vals[1]) / 2e-6
    return out


def forward_table() -> str:
    sim = Simulator.from_gymnasium("Humanoid-v5")
    B = 64
    S = jnp.asarray(poses(sim, B))
    fwd = jax.jit(jax.vmap(lambda s: sim.forward(s, outputs=("geom_xpos",))["geom_xpos"]))
    jac = jax.jit(
        jax.vmap(jax.jacrev(lambda s: sim.forward(s, outputs=("geom_xpos",))["geom_xpos"]))
    )
    S_np, U_np = np.asarray(S), np.zeros((B, sim.nu))
    jvp = jax.jit(
        jax.vmap(
            lambda s: jax.jvp(
                lambda x: sim.forward(x, outputs=("geom_xpos",))["geom_xpos"], (s,), (s,)
            )[1]
        )
    )
    eye, J0 = jnp.eye(18 * 3), jnp.ones((B, 18, 3, sim.nstate))
    # What jacrev adds to a `jacobian=` rule: contracting the Jacobian with an identity basis.
    contraction = jax.jit(
        lambda e, J: jax.lax.dot_general(e.reshape(-1, 18, 3), J, (((1, 2), (1, 2)), ((), ())))
    )
    t = interleaved(
        {
            "forward": lambda: fwd(S),
            "analytic": lambda: jac(S),
            "host": lambda: _jacobians.forward_jacobian(
                sim.core.engine, sim.core.qmap, S_np, U_np, ("geom_xpos",), sim.max_contacts
            ),
            "jvp": lambda: jvp(S),
            "contraction": lambda: contraction(eye, J0),
            "old FD": lambda: old_forward_fd(sim, S_np, "geom_xpos"),
        }
    )
    r = {k: v / t["forward"] for k, v in t.items()}
    rows = [
        ("forward call (`jit(vmap(forward))`)", fmt_time(t["forward"]), "1", ""),
        (
            "Jacobian, analytic (`jit(vmap(jacrev))`)",
            fmt_time(t["analytic"]),
            f"{r['analytic']:.2f}",
            verdict(r["analytic"], 3.0),
        ),
        ("  of which: the host Jacobian alone", fmt_time(t["host"]), f"{r['host']:.2f}", ""),
        (
            "  of which: XLA's identity contraction in jacrev",
            fmt_time(t["contraction"]),
            f"{r['contraction']:.2f}",
            "",
        ),
        ("one JVP (`jit(vmap(jvp))`)", fmt_time(t["jvp"]), f"{r['jvp']:.2f}", ""),
        (
            "Jacobian, old central differences (host only)",
            fmt_time(t["old FD"]),
            f"{r['old FD']:.1f}",
            "",
        ),
        ("old FD / analytic host Jacobian", "", f"{t['old FD'] / t['host']:.1f}", ""),
    ]
    return table(
        f"forward Jacobian of geom_xpos, Humanoid-v5, {B} poses",
        rows,
        ("method", "time", "ratio to forward", "target ≤ 3"),
    )


def raw_rollout(model: mujoco.MjModel, S: np.ndarray, nthread: int, nstep: int):
    """A function running one long raw `mujoco.rollout` of `nstep` physics steps from `S`."""
    B = len(S)
    datas = [mujoco.MjData(model) for _ in range(max(1, nthread))]
    ctrl = np.zeros((B, nstep, model.nu))
    nstate = mujoco.mj_stateSize(model, FULL)
    out_state, out_sensor = np.empty((B, nstep, nstate)), np.empty((B, nstep, model.nsensordata))
    runner = mujoco.rollout.Rollout(nthread=nthread)
    models = [model] * B
    return lambda: runner.rollout(
        models,
        datas,
        S,
        ctrl,
        nstep=nstep,
        skip_checks=True,
        state=out_state,
        sensordata=out_sensor,
    )


def raw_batch(model: mujoco.MjModel, S: np.ndarray, nthread: int, nstep: int):
    """A function stepping every state of `S` by `nstep` physics steps as rows of one raw
    `mujoco.batch.Batch` (MuJoCo 4.0 and later; None before), zero controls and warm start:
    the same physics as `raw_rollout`, on `Batch`'s own thread pool."""
    try:
        from mujoco import batch
    except ImportError:
        return None
    B = len(S)
    b = batch.Batch(model, B, nthread)
    qpos, qvel, warm = b.bind("qpos"), b.bind("qvel"), b.bind("qacc_warmstart")
    nq, nv = model.nq, model.nv

    def run():
        qpos[...] = S[:, 1 : 1 + nq]
        qvel[...] = S[:, 1 + nq : 1 + nq + nv]
        warm[...] = 0.0
        b.step(None, nstep)

    return run


def rollout_table() -> str:
    rows = []
    variants = (("Euler/PGS", 0), ("RK4/PGS as shipped", 1))
    for (label, integrator), path in [(v, p) for v in variants for p in ("rollout", "step")]:
        sim = Simulator.from_gymnasium("Humanoid-v5", nthread=2)
        model = copy.copy(sim.model)
        model.opt.integrator = integrator
        sim = Simulator(model, frame_skip=sim.frame_skip, nthread=2)
        B = 8 if QUICK else 32
        S = poses(sim, B)
        U = np.full((B, model.nu), 0.1)
        n = 2 * model.nv + model.na + model.nu
        fs = sim.frame_skip
        if path == "rollout":
            # A rollout step's Jacobian with the warm start carried: n + nv directions (the
            # warm start's own), at the warm starts one environment step leaves.
            ndir = n + model.nv
            warm = _warmstart.simulate(sim.core.engine, S, U, np.zeros((B, model.nv)), fs)
            warm = np.ascontiguousarray(warm[:, -model.nv :])
            jac = lambda sim=sim, S=S, U=U, warm=warm, fs=fs: _warmstart.warm_step_jacobians(  # noqa: E731
                sim.core.engine, sim.core.qmap, S, U, warm, fs, np.ones(len(S), bool)
            )
            what = f"{label}, rollout step (warm start carried)"
        else:
            ndir = n
            jac = lambda sim=sim, S=S, U=U, fs=fs: step_jacobians(  # noqa: E731
                sim.core.engine, sim.core.qmap, S, U, fs
            )
            what = f"{label}, `step` (frame_skip {fs}, batched differences)"
        per_jac = (2 * ndir + 1) * fs
        # The floor's physics steps start at the same states: one environment step from each,
        # repeated (the cost of a step depends on the contacts it has).
        reps = 16
        many = np.repeat(S, reps, axis=0)
        fns = {
            "jac": jac,
            "raw1": raw_rollout(model, many, 0, fs),
            "raw2": raw_rollout(model, many, 2, fs),
        }
        batched = raw_batch(model, many, 2, fs)
        if batched is not None:
            fns["batch2"] = batched
        t = interleaved(fns)
        # The two-core floor is the faster of the two raw ways to step many states at once.
        raw2 = min(t["raw2"], t.get("batch2", float("inf")))
        rate1, rate2 = B * reps * fs / t["raw1"], B * reps * fs / raw2
        jac_per_s = B / t["jac"]
        floor1, floor2 = rate1 / per_jac, rate2 / per_jac
        rows.append(
            (
                what,
                f"{jac_per_s:.1f}",
                f"{floor1:.1f}",
                f"{floor2:.1f}",
                f"{jac_per_s / floor1:.2f}",
                f"{jac_per_s / floor2:.2f}",
                verdict(jac_per_s / floor2, 0.9, lower_is_better=False),
            )
        )
    return table(
        "step Jacobians (frame_skip 5) for rollout's and step's derivatives, Humanoid-v5, "
        "2 threads",
        rows,
        (
            "variant",
            "Jacobians/s",
            "1-core floor",
            "2-core floor",
            "vs 1-core",
            "vs 2-core",
            "target ≥ 0.9 of 2-core",
        ),
    )


if __name__ == "__main__":
    print(f"jax {jax.__version__}, mujoco {mujoco.__version__}, {os.cpu_count()} CPUs\n")
    print(forward_table())
    print(rollout_table())
