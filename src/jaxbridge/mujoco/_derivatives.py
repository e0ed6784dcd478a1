"""Step Jacobians for a whole batch, in the coordinates of the state array the user holds.

MuJoCo differentiates in tangent space: `mjd_transitionFD` returns `A = d x_next / d x` and
`B = d x_next / d u` for `x = (dq, qvel, act)` of size `2 nv + na`, and `C`, `D` for the
sensors. Here they are mapped to and from the `mjSTATE_FULLPHYSICS` vector by `_tangent`'s
`coordinate_maps`.

`mjd_transitionFD` refuses the RK4 integrator (which most gymnasium models use); there the
same differences are taken over perturbed copies of the batch, all in one batched call
(`mujoco.batch` from MuJoCo 4.0 on, else `mujoco.rollout`).
Time, history, plugin state and plasticity are treated as constants (time passes through).

Every difference is a pair of one-sided ones with step `EPS = 1e-7`, combined by
`straddle_safe`: their mean where they agree, and where they do not (a contact appeared inside
the step: MuJoCo's contact force jumps), a second look at `EPS / REFINE` decides between a kink
(the mean) and a jump (the side that did not cross). `mjd_transitionFD` gives both sides when
called forward-only with `eps` and with `-eps`; the batch is split over the engine's worker
`MjData`s, one thread each (the bindings release the GIL inside every MuJoCo call).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ._differences import EPS, REFINE, straddle_safe
from ._engine import Engine
from ._model import mujoco as _mujoco
from ._state import FULLPHYSICS, flat
from ._tangent import QposMap, coordinate_maps, slices

# The bindings are compiled modules that pyright cannot read: use them untyped.
mujoco: Any = _mujoco
MjModel = MjData = Any  # for annotations

__all__ = [
    "EPS",
    "REFINE",
    "carries_warmstart",
    "primal_warmstarts",
    "split_batch",
    "step_jacobians",
    "straddle_safe",
]


def split_batch(run: Callable[[Any, int, int], None], B: int, datas: Sequence[Any]) -> None:
    """Runs `run(data, lo, hi)` over contiguous chunks of `range(B)`, one per `MjData`, each
    on its own thread (the calling thread takes the first). MuJoCo's bindings release the GIL
    inside every C call, so the chunks run in parallel."""
    k = max(1, min(len(datas), B))
    bounds = [B * j // k for j in range(k + 1)]
    futures = [_executor().submit(run, datas[j], bounds[j], bounds[j + 1]) for j in range(1, k)]
    try:
        run(datas[0], bounds[0], bounds[1])
    finally:
        for f in futures:
            f.result()


_EXECUTOR: ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:  # made on first use: importing jaxbridge.mujoco starts no threads
            _EXECUTOR = ThreadPoolExecutor(
                max_workers=max(2, os.cpu_count() or 1), thread_name_prefix="jaxbridge-mjd"
            )
        return _EXECUTOR


def primal_warmstarts(
    engine: Engine, state: np.ndarray, ctrls: np.ndarray, nstep: int
) -> np.ndarray:
    """The constraint solver's warm start (`qacc_warmstart`) before each step of a rollout.

    `mujoco.rollout` carries the warm start from one physics step to the next, and PGS (which
    stops at a fixed iteration count) gives forces that depend on it. This replays the rollout
    of `(B, nstate)` states and `(B, T, nu)` controls (each held for `nstep` physics steps)
    with `mj_step` from the condition `mujoco.rollout` starts an element from, on the
    worker's threads, and returns the `(B, T, nv)` warm starts each step began with (row 0 is
    zeros, a fresh `MjData`'s). It costs one rollout: a step's Jacobian costs `2 n + 1`.
    """
    m = engine.model
    B, T = ctrls.shape[:2]
    out = np.empty((B, T, m.nv))

    def run(d: MjData, lo: int, hi: int) -> None:
        for i in range(lo, hi):
            engine.reset(d, state[i])
            for t in range(T):
                out[i, t] = d.qacc_warmstart
                d.ctrl[:] = ctrls[i, t]
                for _ in range(nstep):
                    mujoco.mj_step(m, d)

    with engine.worker() as w:
        split_batch(run, B, w.datas)
    return out


def _tangent_mjd(
    engine: Engine,
    state: np.ndarray,
    ctrl: np.ndarray,
    nstep: int,
    warmstart: np.ndarray | None,
):
    """Tangent A, B, C, D of `nstep` physics steps by `mjd_transitionFD`, chained.

    Each physics step is differenced twice, forward (`eps = h`) and backward (`eps = -h`,
    which `mjd_transitionFD` takes as a one-sided step to the left): together the cost of its
    centred difference plus one step, and `straddle_safe` chooses from the two sides. The
    batch is split over the worker's `MjData`s, one thread each. Each element starts from its
    `warmstart` row (`qacc_warmstart`, which `mjd_transitionFD` holds fixed), or zeros.
    """
    m = engine.model
    nt, nu, ns, B = 2 * m.nv + m.na, m.nu, m.nsensordata, state.shape[0]
    A_out, B_out = np.empty((B, nt, nt)), np.empty((B, nt, nu))
    C_out, D_out = np.empty((B, ns, nt)), np.empty((B, ns, nu))
    last = np.empty((B, state.shape[1]))

    def run(d: MjData, lo: int, hi: int) -> None:
        mats = [
            (np.empty((nt, nt)), np.empty((nt, nu)), np.empty((ns, nt)), np.empty((ns, nu)))
            for _ in range(2)
        ]

        def sides(h: float) -> tuple[np.ndarray, np.ndarray]:  # [[A, B], [C, D]] of each side
            for eps, (A, Bm, C, D) in zip((h, -h), mats, strict=True):
                mujoco.mjd_transitionFD(m, d, eps, False, A, Bm, C, D)
            plus, minus = (np.block([[A, Bm], [C, D]]) for A, Bm, C, D in mats)
            return plus, minus

        def refine(index: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
            plus, minus = sides(EPS / REFINE)
            return plus.T[index[0]], minus.T[index[0]]

        for i in range(lo, hi):
            engine.reset(d, state[i], ctrl[i])
            if warmstart is not None:
                d.qacc_warmstart[:] = warmstart[i]
            Phi, Gam = np.eye(nt), np.zeros((nt, nu))
            for k in range(nstep):
                plus, minus = sides(EPS)
                Z = straddle_safe(plus, minus, refine)
                A, Bm, C, D = Z[:nt, :nt], Z[:nt, nt:], Z[nt:, :nt], Z[nt:, nt:]
                if k == nstep - 1:  # sensors are read in the last physics step
                    C_out[i], D_out[i] = C @ Phi, C @ Gam + D
                Phi, Gam = A @ Phi, A @ Gam + Bm
                mujoco.mj_step(m, d)  # with the warm start the rollout itself would carry
            A_out[i], B_out[i] = Phi, Gam
            mujoco.mj_getState(m, d, last[i], FULLPHYSICS)

    with engine.worker() as w:
        split_batch(run, B, w.datas)
    return (A_out, B_out, C_out, D_out), last


def perturbations(
    model: Any,
    layout: Any,
    qmap: QposMap,
    state: np.ndarray,
    ctrl: np.ndarray,
    dirs: np.ndarray,
    h: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The points `+h` and `-h` along tangent direction `dirs[k]` from `(state[k], ctrl[k])`.

    Directions are numbered as the tangent state then the controls: positions (moved by
    `mj_integratePos`, which also normalises quaternions), velocities, activations, controls.
    `state` is `(K, nstate)`, `ctrl` `(K, nu)`, `dirs` `(K,)`; returns `(K, 2, nstate)` and
    `(K, 2, nu)`.
    """
    nv, nt, nu = model.nv, 2 * model.nv + model.na, ctrl.shape[-1]
    qs, vs, acts = slices(layout)
    K = len(dirs)
    step = np.zeros((K, 2, nt + nu))
    step[np.arange(K), :, dirs] = np.array([h, -h])
    x = np.repeat(state[:, None, :], 2, axis=1)
    u = np.repeat(ctrl[:, None, :], 2, axis=1) + step[..., nt:]
    pos = dirs < nv  # only position directions touch qpos
    x[pos, :, qs] = qmap.integrate(x[pos][..., qs], step[pos][..., :nv])
    x[..., vs] += step[..., nv : 2 * nv]
    x[..., acts] += step[..., 2 * nv : nt]
    return x, u


def _tangent_fd(
    engine: Engine,
    qmap: QposMap,
    state: np.ndarray,
    ctrl: np.ndarray,
    nstep: int,
    warmstart: np.ndarray | None,
):
    """The same one-sided pairs of differences, over batched rollouts (on the thread pool),
    every perturbed copy starting from its element's `warmstart` row (or zeros)."""
    m, L = engine.model, engine.layout
    nu, nt = m.nu, 2 * m.nv + m.na
    B, n = state.shape[0], nt + nu
    qs, vs, acts = slices(L)

    def simulate(x: np.ndarray, u: np.ndarray, warm: np.ndarray | None) -> np.ndarray:
        # states and sensors, joined; `warm` holds one warm start per point (or None)
        x2 = flat(x)
        if warm is not None:
            warm = flat(np.broadcast_to(warm, (*x.shape[:-1], m.nv)))
        if engine.batched():  # one batch call; NaN where MuJoCo warned
            joined = engine.step_points(x2, flat(u), warm, nstep)[:, : L.nstate + m.nsensordata]
            return joined.reshape(*x.shape[:-1], -1)
        states, sensors, diverged = engine.rollout(x2, flat(u)[:, None], nstep, warm)
        joined = np.concatenate([states[:, 0], sensors[:, 0]], axis=-1)
        joined[diverged] = np.nan  # as `step_points`: no difference taken around a reset
        return joined.reshape(*x.shape[:-1], -1)

    def tangent(a: np.ndarray, b: np.ndarray) -> np.ndarray:  # b - a: tangent state, sensors
        return np.concatenate(
            [
                qmap.difference(a[..., qs], b[..., qs]),
                b[..., vs] - a[..., vs],
                b[..., acts] - a[..., acts],
                b[..., L.nstate :] - a[..., L.nstate :],
            ],
            axis=-1,
        )

    def sides(points: np.ndarray, nominal: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray]:
        return tangent(nominal, points[..., 0, :]) / h, tangent(points[..., 1, :], nominal) / h

    dirs = np.tile(np.arange(n), B)
    x, u = perturbations(m, L, qmap, np.repeat(state, n, 0), np.repeat(ctrl, n, 0), dirs, EPS)
    # Row 0 of each element is the unperturbed point, then the + and - points of each direction.
    x = np.concatenate([state[:, None], x.reshape(B, 2 * n, L.nstate)], axis=1)
    u = np.concatenate([ctrl[:, None], u.reshape(B, 2 * n, nu)], axis=1)
    out = simulate(x, u, None if warmstart is None else warmstart[:, None])
    nominal = out[:, 0]
    plus, minus = sides(out[:, 1:].reshape(B, n, 2, -1), nominal[:, None], EPS)

    def refine(index: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
        b, j = index
        h = EPS / REFINE
        xr, ur = perturbations(m, L, qmap, state[b], ctrl[b], j, h)
        warm = None if warmstart is None else warmstart[b][:, None]
        return sides(simulate(xr, ur, warm), nominal[b], h)

    Z = straddle_safe(np.swapaxes(plus, 1, 2), np.swapaxes(minus, 1, 2), refine)
    tangents = (Z[:, :nt, :nt], Z[:, :nt, nt:], Z[:, nt:, :nt], Z[:, nt:, nt:])
    return tangents, nominal[:, : L.nstate]


def carries_warmstart(model: MjModel) -> bool:
    """Whether a physics step's result may depend on the warm start (`qacc_warmstart`) it
    starts from, so that derivatives must carry it: unless `mjDSBL_WARMSTART`, always.

    PGS stops after `opt.iterations`, short of convergence. CG and Newton iterate to
    `opt.tolerance`, and usually the warm start moves their result only within it (on the
    gymnasium humanoid, Newton's rollout gradients moved by less than 1e-7 with it carried,
    CG's by up to 7e-4), but where the warm start already meets the tolerance they stop at
    once and return accelerations that move with the warm start itself: the gymnasium
    inverted double pendulum (Newton) at its cart's joint limit had rollout gradients 0.2%
    to 2% off raw central differences without it.
    """
    return not int(model.opt.disableflags) & int(mujoco.mjtDisableBit.mjDSBL_WARMSTART)


def uses_mjd(model: MjModel) -> bool:
    """Whether `mjd_transitionFD` accepts this model (it refuses RK4)."""
    return int(model.opt.integrator) != int(mujoco.mjtIntegrator.mjINT_RK4)


def step_jacobians(
    engine: Engine,
    qmap: QposMap,
    state: np.ndarray,
    ctrl: np.ndarray,
    nstep: int,
    next_state: np.ndarray | None = None,
    method: str = "auto",
    warmstart: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Jacobians of one step (`nstep` physics steps) at each of `B` states and controls.

    Args:
        engine: the batched engine.
        qmap: the model's `QposMap`.
        state: `(B, nstate)` states.
        ctrl: `(B, nu)` controls.
        nstep: physics steps per step.
        next_state: the `(B, nstate)` states after the step, if known (else simulated).
        method: `"mjd"` (`mjd_transitionFD`), `"fd"` (batched rollouts) or `"auto"`
            (`"mjd"` unless the model integrates with RK4).
        warmstart: `(B, nv)` constraint-solver warm starts (`qacc_warmstart`) each step
            starts from (a rollout's, from `primal_warmstarts`), held fixed under the
            perturbations as `mjd_transitionFD` holds them; None for a fresh `MjData`'s
            (zeros, what `Simulator.step` starts from).

    Returns:
        `(Jx, Ju, Sx, Su)`: `d next_state / d state` `(B, nstate, nstate)`, `d next_state /
        d ctrl` `(B, nstate, nu)`, and `d sensordata / d state`, `d sensordata / d ctrl`
        `(B, nsensordata, nstate)`, `(B, nsensordata, nu)`, in the coordinates of the state
        vector. Each physics step (`"mjd"`) or step (`"fd"`) is differenced with step `EPS`
        on each side; where a side crosses a discontinuity it is dropped (`straddle_safe`).
    """
    m = engine.model
    state = np.ascontiguousarray(state, dtype=np.float64)
    ctrl = np.ascontiguousarray(ctrl, dtype=np.float64)
    if method == "auto":
        method = "mjd" if uses_mjd(m) else "fd"
    if method == "mjd" and nstep > 1 and carries_warmstart(m):
        # `mjd_transitionFD` holds the warm start fixed, so its physics steps cannot be
        # chained where the solver's result depends on it: difference the whole step, which
        # carries it from one physics step to the next as `mj_step` does.
        method = "fd"
    if method == "mjd":
        (A, Bm, C, D), reached = _tangent_mjd(engine, state, ctrl, nstep, warmstart)
    else:
        (A, Bm, C, D), reached = _tangent_fd(engine, qmap, state, ctrl, nstep, warmstart)
    if next_state is None:
        next_state = reached
    T_in, T_out = coordinate_maps(engine, qmap, state, next_state)
    Jx = T_out @ A @ T_in
    Jx[:, 0, 0] = 1.0  # time passes through; nothing here depends on it
    return Jx, T_out @ Bm, C @ T_in, D
