"""Step Jacobians for a whole batch, in the coordinates of the state array the user holds.

MuJoCo differentiates in tangent space: a position perturbation has `nv` numbers, not `nq` (a
quaternion has 4 coordinates and 3 rotational velocities). `mjd_transitionFD` returns
`A = d x_next / d x` and `B = d x_next / d u` for `x = (dq, qvel, act)` of size `2 nv + na`, and
`C`, `D` for the sensors. Here they are mapped to and from the `mjSTATE_FULLPHYSICS` vector: on
the way in by `M = d(tangent)/d(qpos)` at the input (a quaternion `q` moved by `dq` turns by
`2 vec(conj(q) dq) / |q|`), on the way out by `P = d(qpos)/d(tangent)` at the output
(`dq = q (0, dtheta) / 2`). `M P = I` for unit quaternions, so chained state Jacobians equal
chained tangent Jacobians.

`mjd_transitionFD` refuses the RK4 integrator (which the gymnasium models use); there the same
central differences are taken over perturbed copies of the batch, all in one `mujoco.rollout`.
Time, history, plugin state and plasticity are treated as constants (time passes through).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ._engine import Engine
from ._model import mujoco

__all__ = ["QposMap", "step_jacobians"]

EPS = 1e-6  # mjd_transitionFD's customary step, in tangent coordinates and controls

_FREE, _BALL = int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL)


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def _quat_left(q: np.ndarray) -> np.ndarray:
    """The matrix `L(q)` with `q * p = L(q) p`, shape `(..., 4, 4)`."""
    w, x, y, z = np.moveaxis(q, -1, 0)
    rows = [[w, -x, -y, -z], [x, w, -z, y], [y, z, w, -x], [z, -y, x, w]]
    return np.stack([np.stack(r, axis=-1) for r in rows], axis=-2)


def _conj(q: np.ndarray) -> np.ndarray:
    return q * np.array([1.0, -1.0, -1.0, -1.0])


@dataclasses.dataclass(frozen=True, eq=False)
class QposMap:
    """Where each joint's coordinates live in `qpos` and `qvel`, split into 1:1 and quaternions.

    Example:
        >>> m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><body><freejoint/>'
        ...     '<geom size=".1"/></body></worldbody></mujoco>')
        >>> qmap = QposMap.from_model(m)
        >>> qmap.tangent_to_qpos(m.qpos0).shape
        (7, 6)
    """

    nq: int
    nv: int
    scalar_q: np.ndarray  # qpos indices moving 1:1 with...
    scalar_v: np.ndarray  # ...these qvel indices
    quat_q: np.ndarray  # (K,) start of each quaternion in qpos
    quat_v: np.ndarray  # (K,) start of its 3 velocities in qvel

    @classmethod
    def from_model(cls, m: mujoco.MjModel) -> QposMap:
        sq, sv, qq, qv = [], [], [], []
        for j in range(m.njnt):
            qa, va, kind = int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j]), int(m.jnt_type[j])
            if kind == _FREE:
                sq += range(qa, qa + 3)
                sv += range(va, va + 3)
                qq.append(qa + 3)
                qv.append(va + 3)
            elif kind == _BALL:
                qq.append(qa)
                qv.append(va)
            else:
                sq.append(qa)
                sv.append(va)
        ints = lambda x: np.asarray(x, dtype=np.intp)  # noqa: E731
        return cls(int(m.nq), int(m.nv), ints(sq), ints(sv), ints(qq), ints(qv))

    def _quats(self, qpos: np.ndarray) -> np.ndarray:
        return qpos[..., self.quat_q[:, None] + np.arange(4)]  # (..., K, 4)

    def integrate(self, qpos: np.ndarray, v: np.ndarray) -> np.ndarray:
        """`mj_integratePos(qpos, v, 1)` over leading dimensions (up to rounding)."""
        out = np.array(qpos, dtype=np.float64, copy=True)
        out[..., self.scalar_q] += v[..., self.scalar_v]
        if len(self.quat_q):
            w = v[..., self.quat_v[:, None] + np.arange(3)]  # (..., K, 3)
            angle = np.linalg.norm(w, axis=-1, keepdims=True)
            axis = np.divide(w, angle, out=np.zeros_like(w), where=angle > 0)
            rot = np.concatenate([np.cos(angle / 2), np.sin(angle / 2) * axis], axis=-1)
            q = _quat_mul(self._quats(qpos), rot)
            q /= np.linalg.norm(q, axis=-1, keepdims=True)
            out[..., self.quat_q[:, None] + np.arange(4)] = q
        return out

    def difference(self, qpos1: np.ndarray, qpos2: np.ndarray) -> np.ndarray:
        """`mj_differentiatePos(qpos1, qpos2, 1)`: the velocity taking `qpos1` to `qpos2`."""
        v = np.zeros((*np.broadcast_shapes(qpos1.shape, qpos2.shape)[:-1], self.nv))
        v[..., self.scalar_v] = qpos2[..., self.scalar_q] - qpos1[..., self.scalar_q]
        if len(self.quat_q):
            q1, q2 = self._quats(qpos1), self._quats(qpos2)
            q1 = q1 / np.linalg.norm(q1, axis=-1, keepdims=True)
            q2 = q2 / np.linalg.norm(q2, axis=-1, keepdims=True)
            dq = _quat_mul(_conj(q1), q2)
            s = np.linalg.norm(dq[..., 1:], axis=-1, keepdims=True)
            angle = 2 * np.arctan2(s, dq[..., :1])
            angle = np.where(angle > np.pi, angle - 2 * np.pi, angle)
            w = np.divide(dq[..., 1:] * angle, s, out=np.zeros_like(dq[..., 1:]), where=s > 0)
            v[..., self.quat_v[:, None] + np.arange(3)] = w
        return v

    def qpos_to_tangent(self, qpos: np.ndarray) -> np.ndarray:
        """`M = d(tangent)/d(qpos)` at `qpos`, shape `(..., nv, nq)`."""
        M = np.zeros((*qpos.shape[:-1], self.nv, self.nq))
        M[..., self.scalar_v, self.scalar_q] = 1.0
        if len(self.quat_q):
            q = self._quats(qpos)
            norm = np.linalg.norm(q, axis=-1, keepdims=True)
            # d/d(dq) of vec(conj(n) * (q + dq)) with n = q/|q|; the radial part drops out.
            block = (2 / norm[..., None]) * _quat_left(_conj(q / norm))[..., 1:, :]
            for k, (qa, va) in enumerate(zip(self.quat_q, self.quat_v, strict=True)):
                M[..., va : va + 3, qa : qa + 4] = block[..., k, :, :]
        return M

    def tangent_to_qpos(self, qpos: np.ndarray) -> np.ndarray:
        """`P = d(qpos)/d(tangent)` at `qpos`, shape `(..., nq, nv)`."""
        P = np.zeros((*qpos.shape[:-1], self.nq, self.nv))
        P[..., self.scalar_q, self.scalar_v] = 1.0
        if len(self.quat_q):
            block = 0.5 * _quat_left(self._quats(qpos))[..., :, 1:]  # q * (0, dtheta) / 2
            for k, (qa, va) in enumerate(zip(self.quat_q, self.quat_v, strict=True)):
                P[..., qa : qa + 4, va : va + 3] = block[..., k, :, :]
        return P


def _tangent_mjd(engine: Engine, state: np.ndarray, ctrl: np.ndarray, nstep: int):
    """Tangent A, B, C, D of `nstep` physics steps by `mjd_transitionFD`, chained."""
    m = engine.model
    nt, nu, ns, B = 2 * m.nv + m.na, m.nu, m.nsensordata, state.shape[0]
    A_out, B_out = np.empty((B, nt, nt)), np.empty((B, nt, nu))
    C_out, D_out = np.empty((B, ns, nt)), np.empty((B, ns, nu))
    A, Bm, C, D = np.empty((nt, nt)), np.empty((nt, nu)), np.empty((ns, nt)), np.empty((ns, nu))
    with engine.worker() as w:
        d = w.datas[0]
        for i in range(B):
            engine.reset(d, state[i], ctrl[i])
            Phi, Gam = np.eye(nt), np.zeros((nt, nu))
            for k in range(nstep):
                mujoco.mjd_transitionFD(m, d, EPS, True, A, Bm, C, D)
                if k == nstep - 1:  # sensors are read in the last physics step
                    C_out[i], D_out[i] = C @ Phi, C @ Gam + D
                Phi, Gam = A @ Phi, A @ Gam + Bm
                mujoco.mj_step(m, d)  # with the warm start the rollout itself would carry
            A_out[i], B_out[i] = Phi, Gam
    return A_out, B_out, C_out, D_out


def perturbations(
    model: Any, layout: Any, qmap: QposMap, state: np.ndarray, ctrl: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Central-difference points: perturbation j of element i is + and - EPS along tangent
    direction j (positions by `mj_integratePos`, then velocities, activations), or along
    control j - (2 nv + na). The first `n` directions; `(B, n, 2, nstate)` and `(B, n, 2, nu)`.
    """
    nv, nu, nt = model.nv, model.nu, 2 * model.nv + model.na
    qs, vs, acts = layout.slice("qpos"), layout.slice("qvel"), layout.slice("act")
    x = np.repeat(state[:, None, None, :], n, axis=1).repeat(2, axis=2)
    u = np.repeat(ctrl[:, None, None, :], n, axis=1).repeat(2, axis=2)
    sign = np.array([EPS, -EPS])
    step = np.zeros((nt + nu, 2, nt + nu))
    step[np.arange(nt + nu), :, np.arange(nt + nu)] = sign
    step = step[:n]
    k = min(n, nv)  # only position directions touch qpos (integrate renormalises quaternions)
    x[:, :k, :, qs] = qmap.integrate(x[:, :k, :, qs], step[:k, :, :nv])
    x[:, :, :, vs] += step[..., nv : 2 * nv]
    x[:, :, :, acts] += step[..., 2 * nv : nt]
    u += step[..., nt:]
    return x, u


def _tangent_fd(engine: Engine, qmap: QposMap, state: np.ndarray, ctrl: np.ndarray, nstep: int):
    """The same central differences as `mjd_transitionFD`, over one batched rollout."""
    m, L = engine.model, engine.layout
    nu, nt = m.nu, 2 * m.nv + m.na
    B, n = state.shape[0], nt + nu
    qs, vs, acts = L.slice("qpos"), L.slice("qvel"), L.slice("act")
    x, u = perturbations(m, L, qmap, state, ctrl, n)
    states, sensors, _ = engine.rollout(x.reshape(-1, L.nstate), u.reshape(-1, 1, nu), nstep)
    states = states.reshape(B, n, 2, L.nstate)
    sensors = sensors.reshape(B, n, 2, m.nsensordata)
    plus, minus = states[:, :, 0], states[:, :, 1]
    dx = np.concatenate(
        [
            qmap.difference(minus[..., qs], plus[..., qs]),
            plus[..., vs] - minus[..., vs],
            plus[..., acts] - minus[..., acts],
        ],
        axis=-1,
    ) / (2 * EPS)  # (B, n, nt): row j is the derivative along direction j
    ds = (sensors[:, :, 0] - sensors[:, :, 1]) / (2 * EPS)
    dx, ds = np.swapaxes(dx, 1, 2), np.swapaxes(ds, 1, 2)
    return dx[:, :, :nt], dx[:, :, nt:], ds[:, :, :nt], ds[:, :, nt:]


def uses_mjd(model: mujoco.MjModel) -> bool:
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

    Returns:
        `(Jx, Ju, Sx, Su)`: `d next_state / d state` `(B, nstate, nstate)`, `d next_state /
        d ctrl` `(B, nstate, nu)`, and `d sensordata / d state`, `d sensordata / d ctrl`
        `(B, nsensordata, nstate)`, `(B, nsensordata, nu)`, in the coordinates of the state
        vector.
    """
    m, L = engine.model, engine.layout
    state = np.ascontiguousarray(state, dtype=np.float64)
    ctrl = np.ascontiguousarray(ctrl, dtype=np.float64)
    if method == "auto":
        method = "mjd" if uses_mjd(m) else "fd"
    if method == "mjd":
        A, Bm, C, D = _tangent_mjd(engine, state, ctrl, nstep)
    else:
        A, Bm, C, D = _tangent_fd(engine, qmap, state, ctrl, nstep)
    if next_state is None:
        next_state = engine.rollout(state, ctrl[:, None], nstep)[0][:, 0]
    B, nv, na, nt = state.shape[0], m.nv, m.na, 2 * m.nv + m.na
    qs, vs, acts = L.slice("qpos"), L.slice("qvel"), L.slice("act")
    T_in = np.zeros((B, nt, L.nstate))
    T_in[:, :nv, qs] = qmap.qpos_to_tangent(state[:, qs])
    T_in[:, nv : 2 * nv, vs] = np.eye(nv)
    T_in[:, 2 * nv :, acts] = np.eye(na)
    T_out = np.zeros((B, L.nstate, nt))
    T_out[:, qs, :nv] = qmap.tangent_to_qpos(next_state[:, qs])
    T_out[:, vs, nv : 2 * nv] = np.eye(nv)
    T_out[:, acts, 2 * nv :] = np.eye(na)
    Jx = T_out @ A @ T_in
    Jx[:, 0, 0] = 1.0  # time passes through; nothing here depends on it
    return Jx, T_out @ Bm, C @ T_in, D
