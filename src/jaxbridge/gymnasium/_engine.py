"""The host side of an environment: MuJoCo steps and forward passes of many rows, no JAX.

One `Rows` is a `mujoco.batch.Batch` of exactly `B` simulations. Its `step_into` does what
gymnasium's `MujocoEnv.do_simulation` does to each row, `mj_step(m, d, nstep=frame_skip)`
and then `mj_rnePostConstraint` where the environment reads `cfrc_ext`, and writes the next
physics state, the warm start and the derived fields the environment reads into the caller's
arrays (XLA's buffers). `Batch.step` leaves the derived fields as `mj_step` does, describing
the last substep's evaluation; the batch copies the bound ones out in C, on its threads.

`mj_rnePostConstraint` is no part of `mj_step` (MuJoCo runs it inside a step only for the
acceleration sensors, and not in the RK4 integrator's later stages, whose contacts are the
ones gymnasium reads): an environment that reads `cfrc_ext` steps a persistent batch and runs
it on the own `MjData` of each row in contact after the step.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxbridge.mujoco._model import mj

from . import _differences

__all__ = ["Engine", "Rows"]

mujoco: Any = mj
_S = mujoco.mjtState
_INTEGRATION = int(_S.mjSTATE_INTEGRATION)
_FULLPHYSICS = int(_S.mjSTATE_FULLPHYSICS)
_NONE = int(mujoco.mjtStage.mjSTAGE_NONE)
_ACC = int(mujoco.mjtStage.mjSTAGE_ACC)
RNE = "cfrc_ext"  # the field only `mj_rnePostConstraint` computes


def _offset(model: Any, bit: int) -> int:
    """Where component `bit` starts in an `mjSTATE_INTEGRATION` row."""
    return int(mujoco.mj_stateSize(model, _INTEGRATION & (bit - 1)))


class Engine:
    """A model's steps of `frame_skip` physics steps and forward passes, batched on the host.

    Args:
        model: the `mujoco.MjModel` (shared with the caller, never copied).
        frame_skip: physics steps per environment step.
        fields: the derived `MjData` fields the environment reads, in output order.
    """

    def __init__(self, model: Any, frame_skip: int, fields: Sequence[str]):
        self.model = model
        self.frame_skip = int(frame_skip)
        self.fields = tuple(fields)
        self.nphysics = int(mujoco.mj_stateSize(model, _FULLPHYSICS))
        self.nv, self.nu = int(model.nv), int(model.nu)
        self.nx = int(model.nq) + self.nv  # the differentiated coordinates of a state
        warm, ctrl = _offset(model, int(_S.mjSTATE_WARMSTART)), _offset(model, int(_S.mjSTATE_CTRL))
        # gymnasium's models have no plugin or plastic state: the physics state, the warm
        # start and the controls are then the first columns of a row, in this order.
        if not (warm == self.nphysics and ctrl == warm + self.nv):
            raise NotImplementedError(
                "`jaxbridge.gymnasium`: this model's mjSTATE_FULLPHYSICS state is not the head "
                "of its mjSTATE_INTEGRATION row (a plugin or plastic state); such models are "
                "not supported."
            )
        self.warm = slice(warm, warm + self.nv)
        self.ncol = ctrl + self.nu
        data = mujoco.MjData(model)
        self.shapes = {name: tuple(getattr(data, name).shape) for name in self.fields}
        self.rne = RNE in self.fields
        self.nthread = max(1, len(os.sched_getaffinity(0)))
        self._rows: dict[int, Rows] = {}
        self._lock = threading.Lock()

    def rows(self, B: int) -> Rows:
        """The batch of exactly `B` simulations, made on first use (a few sizes kept)."""
        r = self._rows.get(B)
        if r is None:
            with self._lock:
                r = self._rows.get(B)
                if r is None:
                    if len(self._rows) >= 16:  # powers of two up to CHUNK, a few exact sizes
                        self._rows.clear()
                    r = self._rows[B] = Rows(self, B)
        return r

    def step(self, physics: np.ndarray, warm: np.ndarray, ctrl: np.ndarray) -> list[np.ndarray]:
        """One environment step of `(B, ·)` float64 rows; returns new arrays."""
        B = physics.shape[0]
        outs = [np.empty((B, self.nphysics)), np.empty((B, self.nv))]
        outs += [np.empty((B, *self.shapes[n])) for n in self.fields]
        for lo, hi, size in _chunks(B):
            p, w, u = (_pad(a[lo:hi], size) for a in (physics, warm, ctrl))
            got = outs if size == B else [np.empty((size, *o.shape[1:])) for o in outs]
            self.rows(size).step_into(p, w, u, got)
            if got is not outs:
                for o, g in zip(outs, got):
                    o[lo:hi] = g[: hi - lo]
        return outs

    def forward(self, physics: np.ndarray) -> list[np.ndarray]:
        """The derived fields after gymnasium's `set_state` (`mj_forward`, zero controls and
        warm start, `cfrc_ext` zero as `mj_resetData` leaves it), of `(B, nphysics)` rows."""
        B = physics.shape[0]
        outs = [np.empty((B, *self.shapes[n])) for n in self.fields]
        for lo, hi, size in _chunks(B):
            got = outs if size == B else [np.empty((size, *o.shape[1:])) for o in outs]
            self.rows(size).forward_into(_pad(physics[lo:hi], size), got)
            if got is not outs:
                for o, g in zip(outs, got):
                    o[lo:hi] = g[: hi - lo]
        return outs

    def forward_where(self, physics: np.ndarray, where: np.ndarray) -> list[np.ndarray]:
        """`forward` of the rows of `(B, nphysics)` `physics` where `(B,)` `where` is set (an
        autoreset's new episodes); zeros elsewhere. No MuJoCo call where none is set."""
        B = physics.shape[0]
        outs = [np.zeros((B, *self.shapes[n])) for n in self.fields]
        ids = np.flatnonzero(where).astype(np.int32)
        if ids.size:
            self.rows(B).forward_into(physics, outs, ids)
        return outs

    def step_jacobian(self, physics: np.ndarray, warm: np.ndarray, ctrl: np.ndarray) -> np.ndarray:
        """`(B, nout, nin)` derivatives of `step`'s outputs (qpos and qvel, warm start, fields,
        flattened) in its inputs (qpos and qvel, warm start, controls), by differences that do
        not reach over contact changes (`_differences.jacobian`)."""
        nx, nv = self.nx, self.nv
        x = np.concatenate((physics[:, 1 : 1 + nx], warm, ctrl), axis=1)

        def evaluate(points: np.ndarray, rows: np.ndarray) -> np.ndarray:
            P = physics[rows]
            P[:, 1 : 1 + nx] = points[:, :nx]
            outs = self.step(P, points[:, nx : nx + nv], np.ascontiguousarray(points[:, nx + nv :]))
            return np.concatenate(
                [outs[0][:, 1 : 1 + nx], outs[1], *(_flat(o) for o in outs[2:])], 1
            )

        return _differences.jacobian(evaluate, x)

    def forward_jacobian(self, physics: np.ndarray) -> np.ndarray:
        """`(B, nout, nx)` derivatives of `forward`'s fields (flattened) in qpos and qvel."""
        nx = self.nx

        def evaluate(points: np.ndarray, rows: np.ndarray) -> np.ndarray:
            P = physics[rows]
            P[:, 1 : 1 + nx] = points
            outs = self.forward(P)
            return np.concatenate([_flat(o) for o in outs], 1) if outs else np.empty((len(P), 0))

        return _differences.jacobian(evaluate, physics[:, 1 : 1 + nx])


#: The most rows one batch call steps for a Jacobian's points (a persistent batch holds an
#: `MjData` per row); fewer rows are padded to a power of two, so that the batch sizes a
#: Jacobian meets are few, and each is made once.
CHUNK = 256


def _chunks(B: int) -> list[tuple[int, int, int]]:
    """`(lo, hi, size)` of each chunk of `B` rows, and the batch size that steps it."""
    if B > CHUNK:
        return [(lo, min(lo + CHUNK, B), CHUNK) for lo in range(0, B, CHUNK)]
    return [(0, B, 1 << max(B - 1, 0).bit_length())]


def _pad(a: np.ndarray, size: int) -> np.ndarray:
    """`a`'s rows, repeated from its first to `size` rows (the extra rows' results are
    dropped)."""
    if len(a) == size:
        return a
    return np.concatenate([a, np.repeat(a[:1], size - len(a), axis=0)])


def _flat(a: np.ndarray) -> np.ndarray:
    return a.reshape(a.shape[0], -1)


class Rows:
    """`B` simulations of an `Engine`'s model in one `mujoco.batch.Batch`, and its bindings."""

    def __init__(self, engine: Engine, B: int):
        from mujoco import batch as mj_batch

        self.engine = engine
        self.B = B
        # Persistent only where `mj_rnePostConstraint` must run on each row's MjData after
        # the step: otherwise one MjData per thread serves all rows (less memory, same numbers).
        batch = mj_batch.Batch(engine.model, B, engine.nthread, persistent=engine.rne)
        # The caller's model, so that an edit of it (a mass, `opt.timestep`) is seen here.
        batch.set_models(engine.model)
        batch.reset(stage=_NONE)
        self.batch = batch
        self.rows: np.ndarray = batch.state
        self.head = self.rows[:, : engine.ncol]
        self.physics = self.rows[:, : engine.nphysics]
        self.warm = self.rows[:, engine.warm]
        self.ctrl = self.rows[:, engine.warm.stop : engine.ncol]
        # The bound outputs (all but `cfrc_ext`), in field order, with their output slots.
        self.bound = [(i, batch.bind(n)) for i, n in enumerate(engine.fields) if n != RNE]
        self.rne_slot = engine.fields.index(RNE) if engine.rne else -1
        self.data: Any = mujoco.MjData(engine.model) if engine.rne else None
        self.cfrc = None if self.data is None else self.data.cfrc_ext  # a view, written in place
        # `cfrc_ext` is the contacts' forces, and also applied forces (`xfrc_applied`, zero
        # here: nothing writes it) and equality constraints': with none of the latter in the
        # model, a row without contacts has none.
        self.ncon: np.ndarray | None = None
        if engine.rne and int(engine.model.neq) == 0:
            self.ncon = batch.bind("ncon")
        self.native = batch._b
        self.nstep = engine.frame_skip
        # XLA may run two host calls of one program at once (a step and its Jacobian's
        # points): a batch must never serve two at a time.
        self.lock = threading.Lock()

    def _run(self, nfail: int) -> None:
        if nfail:
            self.batch._check(None, nfail)  # raises MuJoCo's error, naming the simulations

    def step_into(
        self, physics: np.ndarray, warm: np.ndarray, ctrl: np.ndarray, outs: Sequence[np.ndarray]
    ) -> None:
        """Steps `(B, nphysics)` states, `(B, nv)` warm starts and `(B, nu)` controls; writes
        `outs`: the next states, warm starts and each field, `(B, *shape)` float64."""
        with self.lock:
            self._step_into(physics, warm, ctrl, outs)

    def _step_into(self, physics, warm, ctrl, outs) -> None:
        np.concatenate((physics, warm, ctrl), axis=1, out=self.head)
        self._run(self.native.step(None, self.nstep, _NONE))
        np.copyto(outs[0], self.physics)
        np.copyto(outs[1], self.warm)
        for i, b in self.bound:
            np.copyto(outs[2 + i], b)
        if self.rne_slot >= 0:
            self._rne(outs[2 + self.rne_slot])

    def forward_into(
        self, physics: np.ndarray, outs: Sequence[np.ndarray], ids: np.ndarray | None = None
    ) -> None:
        """`mj_forward` at `(B, nphysics)` states with zero warm start and controls (of the
        rows `ids` only, where given; the other rows of `outs` are left as they are)."""
        with self.lock:
            self._forward_into(physics, outs, ids)

    def _forward_into(self, physics, outs, ids) -> None:
        self.head[:, self.engine.nphysics :] = 0.0
        np.copyto(self.physics, physics)
        self._run(self.native.forward(ids, _ACC))
        for i, b in self.bound:
            if ids is None:
                np.copyto(outs[i], b)
            else:
                outs[i][ids] = b[ids]
        if self.rne_slot >= 0:
            outs[self.rne_slot][...] = 0.0  # `mj_resetData` zeroes it; `mj_forward` leaves it

    def _rne(self, out: np.ndarray) -> None:
        m, d, get, cfrc = self.engine.model, self.data, self.native.get_data, self.cfrc
        rne = mujoco.mj_rnePostConstraint
        if self.ncon is None:
            rows = range(self.B)
        else:  # without contacts `cfrc_ext` is zero: only the rows in contact need the pass
            out[...] = 0.0
            rows = np.flatnonzero(self.ncon).tolist()
        for i in rows:
            get(i, d)  # the row's MjData as its last substep left it
            rne(m, d)
            out[i] = cfrc
