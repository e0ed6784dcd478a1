"""Step Jacobians that carry the constraint solver's warm start as part of the state.

`mj_step` ends by copying `d.qacc` into `d.qacc_warmstart` (`mj_advance` in
engine_forward.c): the solver's accelerations from the step's `mj_forward` for Euler and the
implicit integrators, from the last stage's for RK4 (all four stages start from the step's
incoming warm start). The next step's solver starts from it, and PGS, which stops after
`opt.iterations`, gives forces that depend on where it started. So a rollout is
`x' = f(x, u, w)`, `w' = g(x, u, w)` with `w` the warm start, and its derivative chains
`z' = [[A, A_w], [G_x, G_w]] z + [B; G_u] du` over `z = (dx, dw)`.

`mjd_transitionFD` holds `w` fixed and `mujoco.rollout` does not return `w'`, so these
differences are taken here. With `mujoco.batch` (MuJoCo 4.0 and later) every perturbed point is
a row of one batch, which keeps each row's warm start (`Engine.step_points`). Before 4.0 every
point is rolled out on its own (`mujoco.rollout`, which sets the point's warm start and carries
it between the `nstep` physics steps), and the warm start it left is read from the `MjData`
after; the points are split over the worker's `MjData`s, one thread each (the bindings release
the GIL inside the rollout).
The pairs of one-sided differences and `straddle_safe` are as in `_derivatives`.
"""

from __future__ import annotations

from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np

from ._derivatives import perturbations, split_batch
from ._differences import EPS, REFINE, straddle_safe
from ._engine import Engine
from ._model import mujoco as _mujoco
from ._tangent import QposMap, coordinate_maps, slices
from ._worker import any_warning, native_rollout

mujoco: Any = _mujoco
MjData = Any
_CTRL = int(mujoco.mjtState.mjSTATE_CTRL)
A = TypeVar("A")

__all__ = ["EPS_W", "WarmJacobians", "warm_step_jacobians"]

EPS_W = 1e-6  # the warm start's difference step, relative to its size (at least 1)


class WarmJacobians(NamedTuple, Generic[A]):
    """The blocks of one step's Jacobian over `(state, ctrl, warmstart)`, each `(B, ., .)`:
    `J*` of the next state, `S*` of the sensors, `W*` of the next warm start, with respect to
    the state (`x`), the control (`u`) and the incoming warm start (`w`). NumPy arrays on the
    host; the same tuple of `jax.ShapeDtypeStruct`s or arrays in JAX."""

    Jx: A
    Ju: A
    Jw: A
    Sx: A
    Su: A
    Sw: A
    Wx: A
    Wu: A
    Ww: A


def simulate(
    engine: Engine, state: np.ndarray, ctrl: np.ndarray, warmstart: np.ndarray, nstep: int
) -> np.ndarray:
    """`nstep` physics steps from each of `P` points; `(P, nstate + nsensordata + nv)`: the
    state, the sensors of the last physics step and the warm start the steps leave; NaN for
    a point where MuJoCo warned (it reset or stopped that simulation, so no difference taken
    from it means anything).

    With `mujoco.batch` (MuJoCo 4.0 and later) every point is a row of one batch, stepped in
    one C call on the worker's threads, and the rows hold the warm starts after. Before it,
    `simulate_per_point`.
    """
    if not engine.batched():
        return simulate_per_point(engine, state, ctrl, warmstart, nstep)
    return engine.step_points(state, ctrl, warmstart, nstep)


def simulate_per_point(
    engine: Engine, state: np.ndarray, ctrl: np.ndarray, warmstart: np.ndarray, nstep: int
) -> np.ndarray:
    """`simulate` without `mujoco.batch`: each point is one `mujoco.rollout` call of its own
    on a worker thread's `MjData` (the rollout starts it as it starts any element, from the
    point's warm start), after which that `MjData` holds the warm start the steps left: one C
    call per point, where a Python loop of `mj_step`s would pay the bindings' overhead on
    every step. The per-point calls cost more than one batched call of the same points (see
    docs/mujoco.md).
    """
    m, L = engine.model, engine.layout
    n, ns, nv = L.nstate, int(m.nsensordata), int(m.nv)
    P = state.shape[0]
    state = np.ascontiguousarray(state, dtype=np.float64)
    warmstart = np.ascontiguousarray(warmstart, dtype=np.float64)
    held = np.ascontiguousarray(np.repeat(np.asarray(ctrl, np.float64)[:, None], nstep, axis=1))
    states = np.empty((P, nstep, n))
    sensors = np.empty((P, nstep, ns)) if ns else None
    warm_out = np.empty((P, nv))
    warned: list[int] = []  # list.append is atomic under the GIL
    models = [m]

    def run(d: MjData, lo: int, hi: int) -> None:
        rollout = native_rollout(0).rollout  # on this thread, GIL released inside
        one = [d]
        left = d.qacc_warmstart  # a view of the MjData's own array: read after each rollout
        for p in order[lo:hi].tolist():
            q = slice(p, p + 1)
            rollout(
                models,
                one,
                nstep,
                _CTRL,
                state[q],
                warmstart[q],
                held[q],
                states[q],
                None if sensors is None else sensors[q],
            )
            warm_out[p] = left
            if any_warning(d):  # the rollout cleared the counters before this point
                warned.append(p)

    with engine.worker() as w:
        # Each thread takes every k-th point, not a contiguous run: the points of one element
        # follow each other, and elements differ in cost (their contacts).
        k = max(1, min(len(w.datas), P))
        order = np.concatenate([np.arange(j, P, k) for j in range(k)])
        split_batch(run, P, w.datas)
    out = np.empty((P, n + ns + nv))
    out[:, :n] = states[:, -1]
    if sensors is not None:
        out[:, n : n + ns] = sensors[:, -1]
    out[:, n + ns :] = warm_out
    out[warned] = np.nan
    return out


def warm_step_jacobians(
    engine: Engine,
    qmap: QposMap,
    state: np.ndarray,
    ctrl: np.ndarray,
    warmstart: np.ndarray,
    nstep: int,
    with_w: np.ndarray,
    next_state: np.ndarray | None = None,
) -> WarmJacobians[np.ndarray]:
    """Jacobians of one step (`nstep` physics steps) over `(state, ctrl, warmstart)`.

    Args:
        engine: the batched engine.
        qmap: the model's `QposMap`.
        state: `(B, nstate)` states.
        ctrl: `(B, nu)` controls.
        warmstart: `(B, nv)` warm starts each step starts from (a rollout's, from
            `primal_warmstarts`).
        nstep: physics steps per step.
        with_w: `(B,)` booleans: where false, the warm start's columns are not differenced
            and come back zero (a rollout's first step, whose warm start is no input).
        next_state: the `(B, nstate)` states after the step, if known (else simulated).

    Returns:
        A `WarmJacobians` in the coordinates of the state vector (the warm start's are its
        own). Every direction (tangent state, control, warm start) is differenced with step
        `EPS` on each side and the sides combined by `straddle_safe`.
    """
    m, L = engine.model, engine.layout
    state = np.ascontiguousarray(state, dtype=np.float64)
    ctrl = np.ascontiguousarray(ctrl, dtype=np.float64)
    warmstart = np.ascontiguousarray(warmstart, dtype=np.float64)
    nv, nu, ns = int(m.nv), int(m.nu), int(m.nsensordata)
    nt = 2 * nv + int(m.na)
    nxu = nt + nu
    ndir = nxu + nv
    B, n = state.shape
    qs, vs, acts = slices(L)

    # The warm start's step is its own: the solver's result moves with it by about 1e-7 of
    # a state per unit of acceleration (the humanoid), so at EPS the change drowns in
    # rounding. It moves no contact (contacts depend on positions), so a larger step does
    # not reach over an activation; it scales with the warm start's size.
    h_w = EPS_W * np.maximum(1.0, np.abs(warmstart).max(axis=-1, initial=0.0))

    def points(b: np.ndarray, j: np.ndarray, r: float):
        """The `(2 K, .)` states, controls and warm starts `+h` and `-h` (alternating) along
        direction `j[k]` (tangent state, control, then warm start) from element `b[k]`, with
        `h = r EPS` for the state and control and `r h_w` for the warm start; and the `h`s."""
        K = len(b)
        x = np.repeat(state[b][:, None], 2, axis=1)
        u = np.repeat(ctrl[b][:, None], 2, axis=1)
        w = np.repeat(warmstart[b][:, None], 2, axis=1)
        h = np.full(K, r * EPS)
        xu = j < nxu
        if xu.any():
            x[xu], u[xu] = perturbations(m, L, qmap, state[b[xu]], ctrl[b[xu]], j[xu], r * EPS)
        k = np.flatnonzero(~xu)
        h[k] = r * h_w[b[k]]
        w[k, 0, j[k] - nxu] += h[k]
        w[k, 1, j[k] - nxu] -= h[k]
        return (x.reshape(2 * K, n), u.reshape(2 * K, nu), w.reshape(2 * K, nv)), h[:, None]

    def tangent(a: np.ndarray, b: np.ndarray) -> np.ndarray:  # b - a: tangent state, rest
        return np.concatenate(
            [
                qmap.difference(a[..., qs], b[..., qs]),
                b[..., vs] - a[..., vs],
                b[..., acts] - a[..., acts],
                b[..., n:] - a[..., n:],
            ],
            axis=-1,
        )

    def sides(out: np.ndarray, nominal: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = out.reshape(-1, 2, out.shape[-1])
        return tangent(nominal, out[:, 0]) / h, tangent(out[:, 1], nominal) / h

    nominal = simulate(engine, state, ctrl, warmstart, nstep)
    active = np.ones((B, ndir), bool)
    active[:, nxu:] = np.asarray(with_w, bool)[:, None]
    b_idx, j_idx = np.nonzero(active)
    pts, h = points(b_idx, j_idx, 1.0)
    plus_k, minus_k = sides(simulate(engine, *pts, nstep), nominal[b_idx], h)
    nout = nt + ns + nv
    plus, minus = np.zeros((B, ndir, nout)), np.zeros((B, ndir, nout))
    plus[b_idx, j_idx], minus[b_idx, j_idx] = plus_k, minus_k

    def refine(index: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
        b, j = index
        pts, h = points(b, j, 1 / REFINE)
        return sides(simulate(engine, *pts, nstep), nominal[b], h)

    Z = straddle_safe(np.swapaxes(plus, 1, 2), np.swapaxes(minus, 1, 2), refine)
    if next_state is None:
        next_state = nominal[:, :n]
    T_in, T_out = coordinate_maps(engine, qmap, state, next_state)
    x_rows, s_rows, w_rows = slice(0, nt), slice(nt, nt + ns), slice(nt + ns, nout)
    x_cols, u_cols, w_cols = slice(0, nt), slice(nt, nxu), slice(nxu, ndir)
    Jx = T_out @ Z[:, x_rows, x_cols] @ T_in
    Jx[:, 0, 0] = 1.0  # time passes through; nothing here depends on it
    return WarmJacobians(
        Jx=Jx,
        Ju=T_out @ Z[:, x_rows, u_cols],
        Jw=T_out @ Z[:, x_rows, w_cols],
        Sx=Z[:, s_rows, x_cols] @ T_in,
        Su=Z[:, s_rows, u_cols],
        Sw=Z[:, s_rows, w_cols],
        Wx=Z[:, w_rows, x_cols] @ T_in,
        Wu=Z[:, w_rows, u_cols],
        Ww=Z[:, w_rows, w_cols],
    )
