"""Jacobians of `forward`'s outputs: analytic for the kinematic ones, differences for the rest.

Positions and orientations of bodies, geoms and sites, the subtree centres of mass, and the
contact distances (for the contacts found, held fixed) move
with the joints through MuJoCo's `cdof` (the 6D motion axes of the degrees of freedom, in world
coordinates, from `mj_comPos`). `mj_jac` writes the Jacobian of a point `p` fixed to body `b` as
`cdof_lin[i] + cdof_ang[i] x (p - subtree_com[root(b)])` for each dof `i` on `b`'s chain of
ancestors, and its rotational part as `cdof_ang[i]`; `mj_jacBody`, `mj_jacBodyCom`,
`mj_jacGeom`, `mj_jacSite` take `p` as the body's frame, its centre of mass, the geom's or the
site's centre, and `mj_jacSubtreeCom` the mass-weighted mean of `mj_jacBodyCom` over a subtree.
Here the same formulas run as one NumPy expression over all points of all poses, from `cdof`
and `subtree_com` of one `mj_kinematics` + `mj_comPos` per pose. An orientation turns with
the angular velocity `w = jacr v`: a quaternion by `dq = (0, w) q / 2`, a rotation matrix by
`dR = [w]x R`. The tangent Jacobians map to qpos coordinates through `QposMap.qpos_to_tangent`
(4 coordinates per quaternion; the radial part drops out, as MuJoCo normalises).

Other outputs are differenced (`straddle_safe`, as for steps) at the cheapest stage that
computes them: `mj_kinematics` to `mj_transmission` for the rest of the kinematics (joint
anchors and axes, cameras, lights, tendon and actuator lengths), `mj_fwdPosition` (with
collision) for the other contact fields, and a full `mj_forward` for anything that depends on
velocities, activations or controls; those poses are split over the engine's `MjData`s, one
thread each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._derivatives import perturbations, split_batch
from ._differences import EPS, REFINE, straddle_safe
from ._engine import Engine
from ._model import mujoco as _mujoco
from ._state import flat
from ._tangent import QposMap, slices

# The bindings are compiled modules that pyright cannot read: use them untyped.
mujoco: Any = _mujoco
MjModel = MjData = Any  # for annotations

__all__ = ["forward_jacobian", "ANALYTIC", "KINEMATIC"]

# name -> (the point each row follows, the body array that says which body carries it)
_POINTS = {
    "xpos": ("xpos", None),
    "xipos": ("xipos", None),
    "geom_xpos": ("geom_xpos", "geom_bodyid"),
    "site_xpos": ("site_xpos", "site_bodyid"),
}
_FRAMES = {  # rotation outputs -> (the body array, the matrix form of the same frame)
    "xquat": (None, "xmat"),
    "xmat": (None, "xmat"),
    "ximat": (None, "ximat"),
    "geom_xmat": ("geom_bodyid", "geom_xmat"),
    "site_xmat": ("site_bodyid", "site_xmat"),
}
ANALYTIC = frozenset({*_POINTS, *_FRAMES, "subtree_com", "contact_dist"})
# Functions of qpos alone that `mj_kinematics` .. `mj_transmission` compute.
KINEMATIC = (ANALYTIC - {"contact_dist"}) | {
    "xanchor",
    "xaxis",
    "cam_xpos",
    "cam_xmat",
    "light_xpos",
    "light_xdir",
    "ten_length",
    "actuator_length",
}


def _kinematics(m: MjModel, d: MjData) -> None:
    mujoco.mj_kinematics(m, d)
    mujoco.mj_comPos(m, d)
    mujoco.mj_camlight(m, d)
    mujoco.mj_tendon(m, d)
    mujoco.mj_transmission(m, d)


def _chains(m: MjModel) -> np.ndarray:
    """`(nbody, nv)`: 1 where dof `i` moves body `b` (the walk `mj_jac` makes)."""
    chain = np.zeros((m.nbody, m.nv))
    for b in range(m.nbody):
        body = b
        while body and not m.body_dofnum[body]:  # fixed bodies move with their parent
            body = m.body_parentid[body]
        if not body:
            continue
        i = int(m.body_dofadr[body] + m.body_dofnum[body] - 1)
        while i >= 0:
            chain[b, i] = 1.0
            i = int(m.dof_parentid[i])
    return chain


def _skew(w: np.ndarray) -> np.ndarray:
    """`[w]x`, shape `(..., 3, 3)`."""
    z = np.zeros(w.shape[:-1])
    x, y, zz = np.moveaxis(w, -1, 0)
    return np.stack(
        [np.stack([z, -zz, y], -1), np.stack([zz, z, -x], -1), np.stack([-y, x, z], -1)], -2
    )


class _Analytic:
    """Tangent Jacobians `(B, *shape, nv)` of the kinematic outputs with a closed form."""

    def __init__(self, m: MjModel):
        self.m = m
        self.chain = _chains(m)
        self.root = np.asarray(m.body_rootid)
        mass = np.asarray(m.body_mass)
        # weight[b, c] = mass[c] / subtree mass of b, for c in the subtree of b
        inside = np.zeros((m.nbody, m.nbody))
        for c in range(m.nbody):
            b = c
            while True:
                inside[b, c] = 1.0
                if b == 0:
                    break
                b = int(m.body_parentid[b])
        total = inside @ mass
        self.weight = np.divide(
            inside * mass, total[:, None], out=np.zeros_like(inside), where=total[:, None] > 0
        )

    def keys(self, names: Sequence[str]) -> tuple[str, ...]:
        """The `MjData` arrays that `jacobians` needs for `names`."""
        keys = {"cdof", "subtree_com", "xipos"}
        for name in names:
            if name == "contact_dist":
                continue  # read from `MjData.contact` by `forward_jacobian`
            keys.add(_POINTS[name][0] if name in _POINTS else name)
            if name in _FRAMES:
                keys.add(_FRAMES[name][1])
        return tuple(sorted(keys))

    def jacobians(self, pose: dict[str, np.ndarray], names: Sequence[str]) -> dict[str, Any]:
        """From the `keys` arrays of B poses: name -> `(B, *shape, nv)` tangent Jacobian."""
        m = self.m
        cdof = pose["cdof"]  # (B, nv, 6): angular then linear part
        ang, lin = cdof[..., :3], cdof[..., 3:]
        com = pose["subtree_com"]  # (B, nbody, 3)

        # (B, 3, nv) components of the dofs' axes, for a cross product by broadcasting
        a0, a1, a2 = (np.ascontiguousarray(ang[..., k]) for k in range(3))
        l0, l1, l2 = (np.ascontiguousarray(lin[..., k]) for k in range(3))

        def point_jac(points: np.ndarray, bodies: np.ndarray) -> np.ndarray:  # (B, P, 3, nv)
            bodies = np.broadcast_to(bodies, points.shape[:2])  # (P,) or (B, P)
            rows = np.arange(points.shape[0])[:, None]
            o = points - com[rows, self.root[bodies]]  # (B, P, 3): offsets from the root's com
            o0, o1, o2 = (o[..., k, None] for k in range(3))  # (B, P, 1)
            a = [x[:, None] for x in (a0, a1, a2)]  # (B, 1, nv)
            jac = np.stack(
                [
                    l0[:, None] + a[1] * o2 - a[2] * o1,
                    l1[:, None] + a[2] * o0 - a[0] * o2,
                    l2[:, None] + a[0] * o1 - a[1] * o0,
                ],
                axis=-2,
            )
            return jac * self.chain[bodies][:, :, None, :]

        def body_of(array: str | None, n: int) -> np.ndarray:
            return np.arange(n) if array is None else np.asarray(getattr(m, array))

        out: dict[str, Any] = {}
        for name in names:
            if name in _POINTS:
                key, array = _POINTS[name]
                out[name] = point_jac(pose[key], body_of(array, pose[key].shape[1]))
            elif name == "contact_dist":
                # dist = (p2 - p1) . n between the geoms' nearest points, so (envelope theorem:
                # the points' own motion along the surfaces is second order) its derivative is
                # n . (J2 - J1) at the contact point (the midpoint: the offset to either nearest
                # point is along n, and n . (w x n) = 0).
                # With J = chain (lin + ang x o): n . J = chain (n . lin + (o x n) . ang).
                r, k = np.nonzero(pose["contact_valid"])  # only the contacts found
                p, n = pose["contact_pos"][r, k], pose["contact_normal"][r, k]  # (N, 3)

                def along_normal(bodies: np.ndarray, p=p, n=n, r=r) -> np.ndarray:  # (N, nv)
                    oxn = np.cross(p - com[r, self.root[bodies]], n)
                    moved = np.einsum("ni,nvi->nv", n, lin[r]) + np.einsum(
                        "ni,nvi->nv", oxn, ang[r]
                    )
                    return self.chain[bodies] * moved

                dist = np.zeros((*pose["contact_valid"].shape, m.nv))
                dist[r, k] = along_normal(pose["contact_body2"][r, k]) - along_normal(
                    pose["contact_body1"][r, k]
                )
                out[name] = dist
            elif name == "subtree_com":
                jac = point_jac(pose["xipos"], np.arange(m.nbody))  # mj_jacBodyCom of each
                out[name] = np.einsum("bc,nckv->nbkv", self.weight, jac)
            else:
                array, matrix = _FRAMES[name]
                mats = pose[matrix].reshape(*pose[matrix].shape[:2], 3, 3)  # (B, P, 3, 3)
                bodies = body_of(array, mats.shape[1])
                jacr = np.swapaxes(ang[:, None] * self.chain[bodies][None, :, :, None], -1, -2)
                if name == "xquat":  # dq = (0, w) q / 2 = R(q) (0, w) / 2, w = jacr v
                    w, x, y, z = np.moveaxis(pose["xquat"], -1, 0)
                    right = np.stack(  # p q = right(q) p, without the column of p's scalar
                        [
                            np.stack([-x, -y, -z], -1),
                            np.stack([w, z, -y], -1),
                            np.stack([-z, w, x], -1),
                            np.stack([y, -x, w], -1),
                        ],
                        -2,
                    )
                    out[name] = 0.5 * right @ jacr  # (B, P, 4, nv)
                else:  # dR = [w]x R for each dof's w
                    w = np.swapaxes(jacr, -1, -2)  # (B, P, nv, 3)
                    dR = _skew(w) @ mats[:, :, None]  # (B, P, nv, 3, 3)
                    out[name] = np.moveaxis(dR.reshape(*dR.shape[:3], 9), 2, -1)
        return out


_ANALYTIC_CACHE: dict[int, tuple[MjModel, _Analytic]] = {}


def _analytic(m: MjModel) -> _Analytic:
    hit = _ANALYTIC_CACHE.get(id(m))
    if hit is None or hit[0] is not m:
        hit = (m, _Analytic(m))
        _ANALYTIC_CACHE[id(m)] = hit
    return hit[1]


def _stage(names: Sequence[str]) -> tuple[Callable[[Any, Any], None], bool]:
    """The cheapest MuJoCo call that computes all `names`, and whether they are of qpos alone."""
    if all(n in KINEMATIC for n in names):
        return _kinematics, True
    if all(n in KINEMATIC or n.startswith("contact_") or n == "ncon" for n in names):
        return mujoco.mj_fwdPosition, True
    return mujoco.mj_forward, False


def _differences(
    engine: Engine,
    qmap: QposMap,
    state: np.ndarray,
    ctrl: np.ndarray,
    names: Sequence[str],
    specs: dict[str, tuple[tuple[int, ...], Any]],
    max_contacts: int,
) -> dict[str, np.ndarray]:
    """Tangent Jacobians `(B, size, ndir)` of the float outputs `names` by differences."""
    m, L = engine.model, engine.layout
    stage, positions_only = _stage(names)
    nt, nu = 2 * m.nv + m.na, m.nu
    n = m.nv if positions_only else nt + nu
    B = state.shape[0]
    sizes = [int(np.prod(specs[k][0])) for k in names]
    plain = [k for k in names if not k.startswith("contact_")]

    def evaluate(x: np.ndarray, u: np.ndarray) -> np.ndarray:  # (K, sum(sizes))
        out = np.zeros((len(x), sum(sizes)))

        def run(d: MjData, lo: int, hi: int) -> None:
            for i in range(lo, hi):
                engine.reset(d, x[i], u[i])
                stage(m, d)
                pieces, k = [], min(d.ncon, max_contacts)
                for name in names:
                    if name in plain:
                        pieces.append(np.ravel(getattr(d, name)))
                    else:
                        value = np.zeros((max_contacts, *specs[name][0][1:]))
                        value[:k] = getattr(d.contact, name[8:])[:k]
                        pieces.append(value.ravel())
                out[i] = np.concatenate(pieces) if pieces else out[i]

        with engine.worker() as w:
            split_batch(run, len(x), w.datas)
        return out

    dirs = np.tile(np.arange(n), B)
    x, u = perturbations(m, L, qmap, np.repeat(state, n, 0), np.repeat(ctrl, n, 0), dirs, EPS)
    points = evaluate(np.concatenate([state, flat(x)]), np.concatenate([ctrl, flat(u)]))
    nominal, moved = points[:B], points[B:].reshape(B, n, 2, -1)

    def sides(moved: np.ndarray, nominal: np.ndarray, h: float):
        return (moved[..., 0, :] - nominal) / h, (nominal - moved[..., 1, :]) / h

    def refine(index: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
        b, j = index
        h = EPS / REFINE
        xr, ur = perturbations(m, L, qmap, state[b], ctrl[b], j, h)
        again = evaluate(flat(xr), flat(ur)).reshape(len(b), 2, -1)
        return sides(again, nominal[b], h)

    plus, minus = sides(moved, nominal[:, None], EPS)
    Z = straddle_safe(np.swapaxes(plus, 1, 2), np.swapaxes(minus, 1, 2), refine)  # (B, size, n)
    if positions_only:
        Z = np.concatenate([Z, np.zeros((B, Z.shape[1], nt + nu - n))], axis=2)
    out, start = {}, 0
    for name, size in zip(names, sizes, strict=True):
        out[name] = Z[:, start : start + size]
        start += size
    return out


def forward_jacobian(
    engine: Engine,
    qmap: QposMap,
    state: np.ndarray,
    ctrl: np.ndarray,
    names: Sequence[str],
    max_contacts: int,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Jacobians of `Engine.forward(state, ctrl, names)` in the state array's coordinates.

    Args:
        engine: the batched engine.
        qmap: the model's `QposMap`.
        state: `(B, nstate)` states.
        ctrl: `(B, nu)` controls.
        names: the output names, as for `Engine.forward`.
        max_contacts: as for `Engine.forward`.

    Returns:
        name -> `(d out / d state, d out / d ctrl)`, shapes `(B, *shape, nstate)` and
        `(B, *shape, nu)`; zeros for integer outputs.
    """
    m, L = engine.model, engine.layout
    state = np.ascontiguousarray(state, dtype=np.float64)
    ctrl = np.ascontiguousarray(ctrl, dtype=np.float64)
    specs = engine.output_specs(names, max_contacts)
    B, nv, na, nu, nt = state.shape[0], m.nv, m.na, m.nu, 2 * m.nv + m.na
    qs, vs, acts = slices(L)
    floats = [k for k, (_, dt) in specs.items() if np.issubdtype(dt, np.floating)]
    analytic = [k for k in floats if k in ANALYTIC]
    differenced = [k for k in floats if k not in ANALYTIC]
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if B == 0 or not floats:
        return {
            k: (np.zeros((B, *shape, L.nstate)), np.zeros((B, *shape, nu)))
            for k, (shape, _) in specs.items()
        }
    M = qmap.qpos_to_tangent(state[:, qs])  # (B, nv, nq)
    if analytic:
        M_state = np.zeros((B, nv, L.nstate))  # d(tangent positions) / d(state array)
        M_state[..., qs] = M
        jac = _analytic(m)
        keys = jac.keys(analytic)
        contacts = "contact_dist" in analytic
        K = max_contacts
        geom_body = np.asarray(m.geom_bodyid)
        with engine.worker() as w:
            pose: dict[str, np.ndarray] = {
                k: np.empty((B, *getattr(w.datas[0], k).shape)) for k in keys
            }
            if contacts:
                for k in ("contact_pos", "contact_normal"):
                    pose[k] = np.zeros((B, K, 3))
                for k in ("contact_body1", "contact_body2"):
                    pose[k] = np.zeros((B, K), np.intp)
                pose["contact_valid"] = np.zeros((B, K))

            def run(d: MjData, lo: int, hi: int) -> None:
                views = [(pose[k], getattr(d, k)) for k in keys]  # views made once
                qpos = d.qpos
                for i in range(lo, hi):
                    qpos[:] = state[i, qs]  # these outputs depend on qpos alone
                    mujoco.mj_kinematics(m, d)
                    mujoco.mj_comPos(m, d)
                    for dst, src in views:
                        dst[i] = src
                    if contacts:  # the same collision pass as mj_forward's, in the same order
                        mujoco.mj_collision(m, d)
                        k = min(int(d.ncon), K)
                        c = d.contact
                        pose["contact_pos"][i, :k] = c.pos[:k]
                        pose["contact_normal"][i, :k] = c.frame[:k, :3]
                        pose["contact_body1"][i, :k] = geom_body[c.geom[:k, 0]]
                        pose["contact_body2"][i, :k] = geom_body[c.geom[:k, 1]]
                        pose["contact_valid"][i, :k] = 1.0

            # One thread: per pose MuJoCo's work is small against Python's, which holds the
            # GIL (copying views), so a second thread only adds contention.
            run(w.datas[0], 0, B)
        for name, J in jac.jacobians(pose, analytic).items():
            shape = specs[name][0]
            dstate = (J.reshape(B, -1, nv) @ M_state).reshape(B, *shape, L.nstate)
            out[name] = (dstate, np.zeros((B, *shape, nu)))
    if differenced:
        T_in = np.zeros((B, nt, L.nstate))
        T_in[:, :nv, qs] = M
        T_in[:, nv : 2 * nv, vs] = np.eye(nv)
        T_in[:, 2 * nv :, acts] = np.eye(na)
        for name, d in _differences(
            engine, qmap, state, ctrl, differenced, specs, max_contacts
        ).items():
            shape = specs[name][0]
            out[name] = (
                (d[:, :, :nt] @ T_in).reshape(B, *shape, L.nstate),
                d[:, :, nt:].reshape(B, *shape, nu),
            )
    for name, (shape, dt) in specs.items():
        if not np.issubdtype(dt, np.floating):
            out[name] = (np.zeros((B, *shape, L.nstate)), np.zeros((B, *shape, nu)))
    return {k: out[k] for k in specs}
