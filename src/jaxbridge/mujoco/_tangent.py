"""The state array's coordinates and MuJoCo's tangent space.

MuJoCo differentiates in tangent space: a position perturbation has `nv` numbers, not `nq` (a
quaternion has 4 coordinates and 3 rotational velocities). Jacobians are mapped to and from the
`mjSTATE_FULLPHYSICS` vector: on the way in by `M = d(tangent)/d(qpos)` at the input (a
quaternion `q` moved by `dq` turns by `2 vec(conj(q) dq) / |q|`), on the way out by
`P = d(qpos)/d(tangent)` at the output (`dq = q (0, dtheta) / 2`). `M P = I` for unit
quaternions, so chained state Jacobians equal chained tangent Jacobians.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from ._model import mujoco as _mujoco

if TYPE_CHECKING:
    from ._engine import Engine

# The bindings are compiled modules that pyright cannot read: use them untyped.
mujoco: Any = _mujoco
MjModel = Any  # for annotations

__all__ = ["QposMap", "coordinate_maps", "slices"]

_FREE, _BALL = int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL)


@functools.cache
def slices(layout: Any) -> tuple[slice, slice, slice]:
    """The qpos, qvel and act slices of a state `Layout` (cached: `Layout.slice` searches)."""
    return layout.slice("qpos"), layout.slice("qvel"), layout.slice("act")


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
    def from_model(cls, m: MjModel) -> QposMap:
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


def coordinate_maps(
    engine: Engine, qmap: QposMap, state: np.ndarray, next_state: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`T_in = d(tangent)/d(state)` at `state` `(B, nt, nstate)` and `T_out =
    d(state)/d(tangent)` at `next_state` `(B, nstate, nt)`; time has no tangent row."""
    m, L = engine.model, engine.layout
    B, nv, na, nt = state.shape[0], m.nv, m.na, 2 * m.nv + m.na
    qs, vs, acts = slices(L)
    T_in = np.zeros((B, nt, L.nstate))
    T_in[:, :nv, qs] = qmap.qpos_to_tangent(state[:, qs])
    T_in[:, nv : 2 * nv, vs] = np.eye(nv)
    T_in[:, 2 * nv :, acts] = np.eye(na)
    T_out = np.zeros((B, L.nstate, nt))
    T_out[:, qs, :nv] = qmap.tangent_to_qpos(next_state[:, qs])
    T_out[:, vs, nv : 2 * nv] = np.eye(nv)
    T_out[:, acts, 2 * nv :] = np.eye(na)
    return T_in, T_out
