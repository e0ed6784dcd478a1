"""Many simulations in one C call with `mujoco.batch.Batch` (MuJoCo 4.0 and later).

A `Batch` holds each simulation as a row of its `mjSTATE_INTEGRATION` state (the physics
state, the constraint solver's warm start, the controls and the other inputs) and steps the
rows on a thread pool, the calling thread included, bit for bit as a loop of `mj_step` over
one `MjData` per row would. Unlike `mujoco.rollout` it hands back every row's warm start
after the steps, and it keeps warning counters per row: the two things jaxbridge otherwise
reads one element at a time from an `MjData` after a `mujoco.rollout` call of its own.

`BatchSteps` is one worker's batches (a worker serves one host call at a time, so a batch,
which must not be used from two threads at once, never is): one grown to the largest set of
points it has stepped (the Jacobians' points, whose number changes from call to call), and
one of exactly each batch size `step_into` and `rollout` have seen lately (the same on every
call, where stepping a subset would cost a check of its ids). `dedicated` makes a batch for a
caller that keeps it: `Engine.stepper`'s, the closed loop's. Older MuJoCo has no
`mujoco.batch`; `available()` says so and callers keep their `mujoco.rollout` paths.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ._model import MjModel, mj
from ._state import FULLPHYSICS, MAXVAL2, sum_of_squares

__all__ = ["BatchSteps", "available", "read_warnings"]

mujoco: Any = mj
_WARMSTART = int(mujoco.mjtState.mjSTATE_WARMSTART)
_CTRL = int(mujoco.mjtState.mjSTATE_CTRL)
NO_STAGE = int(mujoco.mjtStage.mjSTAGE_NONE)


#: Whether jaxbridge steps on `mujoco.batch` where MuJoCo has it. Tests turn it off to check
#: the paths older MuJoCo takes against it.
ENABLED = True


@functools.cache
def _importable() -> bool:
    try:
        from mujoco import batch  # noqa: F401
    except ImportError:
        return False
    return True


def available() -> bool:
    """Whether this MuJoCo has `mujoco.batch` (4.0 and later), and it is `ENABLED`."""
    return ENABLED and _importable()


Columns = slice | np.ndarray  # a component's columns in a row


def _columns(model: MjModel, spec: int) -> Columns:
    """The columns of `spec`'s components in an `mjSTATE_INTEGRATION` row, in `mj_getState`'s
    order (the components' bit order): a slice when they are contiguous."""
    integration = int(mujoco.mjtState.mjSTATE_INTEGRATION)
    cols: list[int] = []
    bit = 1
    while bit <= spec:
        if bit & spec:
            if not bit & integration:  # not part of a row: nothing here could set it
                raise ValueError(f"state component {bit} is not in mjSTATE_INTEGRATION")
            offset = int(mujoco.mj_stateSize(model, integration & (bit - 1)))
            cols.extend(range(offset, offset + int(mujoco.mj_stateSize(model, bit))))
        bit <<= 1
    if not cols:
        return slice(0, 0)
    if cols == list(range(cols[0], cols[-1] + 1)):
        return slice(cols[0], cols[-1] + 1)
    return np.asarray(cols)


class Exact:
    """A batch of exactly the simulations of a call, and what its calls read of it."""

    __slots__ = ("batch", "rows", "full", "head", "zeros", "warning", "clear", "step")

    def __init__(self, batch: Any, full: Columns, warm: Columns, ctrl: Columns):
        self.batch = batch
        self.rows: np.ndarray = batch.state  # (nsim, nstate of mjSTATE_INTEGRATION)
        # A row starts with the state, the warm start and the controls, in this order (unless
        # the model has a plugin, whose state is part of mjSTATE_FULLPHYSICS but comes after
        # them): one `np.concatenate` into a view of the rows, made once, writes all three,
        # one NumPy call where indexing would take three (each Python-level call costs more
        # than the copy it makes at these sizes). None where the columns are not so, and the
        # rows are indexed instead.
        self.full: np.ndarray | None = None
        self.head: np.ndarray | None = None
        self.zeros: np.ndarray | None = None
        if isinstance(full, slice) and isinstance(warm, slice) and isinstance(ctrl, slice):
            if ctrl.start == ctrl.stop:  # no actuators: no columns, wherever `_columns` puts them
                ctrl = slice(warm.stop, warm.stop)
            self.full = self.rows[:, full]
            if full.start == 0 and full.stop == warm.start and warm.stop == ctrl.start:
                self.head = self.rows[:, : ctrl.stop]
                self.zeros = np.zeros((self.rows.shape[0], warm.stop - warm.start))
        # (nsim, mjNWARNING, 2) int32: each warning's last info and count. Zero between calls
        # (a call that leaves any warning clears them once it has read them, one that fails
        # before reading them clears them too), so that any byte other than zero after a call
        # is one of its warnings: no clearing pass before each call.
        self.warning: np.ndarray = batch.warning
        self.warning.fill(0)
        self.clear = bytes(self.warning.nbytes)
        # `Batch.step`'s C call, without its Python layer's argument handling (which a closed
        # loop would pay on every step); `Batch._check` still reports its failures. Older or
        # newer layouts of the class fall back to the public method, whose failures raise by
        # themselves.
        native = getattr(batch, "_b", None)
        self.step: Any = native.step if native is not None else _public_step(batch)


def read_warnings(e: Exact) -> np.ndarray | None:
    """The `(nsim,)` flags of the simulations `e`'s last call warned on, or None where it warned
    on none (one comparison of bytes); clears the counters it finds set."""
    if e.warning.tobytes() == e.clear:
        return None
    warned = np.asarray(e.warning[..., 1].any(axis=-1))
    e.warning.fill(0)
    return warned


def _public_step(batch: Any) -> Any:
    def step(ids: Any, nstep: int, stage: int) -> int:
        batch.step(ids, nstep, stage)
        return 0

    return step


class BatchSteps:
    """`nstep` physics steps from each of `P` (state, control, warm start) points, one call.

    Every point starts as `mujoco.rollout` starts an element: MuJoCo's reset state (inputs
    other than the controls at their defaults) with the point's `mjSTATE_FULLPHYSICS` state,
    controls and warm start. Those inputs are set by the batch's reset, and stepping never
    writes them; the ones `mujoco.rollout` sets from the model on every call (mocap poses
    from `body_pos` and `body_quat`, `eq_active0`) are written on every call too, in a model
    that has any, so that an edit of the model is seen.
    """

    def __init__(self, model: MjModel, nthread: int):
        self.model: Any = model  # read for fields the `MjModel` protocol does not list
        self.nthread = max(1, nthread)
        self.nsensordata = int(model.nsensordata)
        self.full = _columns(model, FULLPHYSICS)
        self.warm = _columns(model, _WARMSTART)
        self.ctrl = _columns(model, _CTRL)
        self._batch: Any = None
        self._nsim = 0
        self._ids = np.arange(0, dtype=np.int32)
        self._exact: dict[tuple[int, int], Exact] = {}
        mocapid = np.asarray(self.model.body_mocapid)
        bodies = np.flatnonzero(mocapid >= 0)
        self._mocap = bodies[np.argsort(mocapid[bodies])]  # the mocap bodies, by mocap id
        self._neq = int(self.model.neq)
        if self._mocap.size:
            self.mocap_pos = _columns(model, int(mujoco.mjtState.mjSTATE_MOCAP_POS))
            self.mocap_quat = _columns(model, int(mujoco.mjtState.mjSTATE_MOCAP_QUAT))
        if self._neq:
            self.eq_active = _columns(model, int(mujoco.mjtState.mjSTATE_EQ_ACTIVE))
        #: Whether the model has inputs `write_inputs` must write on every call.
        self.has_inputs = bool(self._mocap.size or self._neq)

    def write_inputs(self, rows: np.ndarray) -> None:
        """Writes the inputs `mujoco.rollout` takes from the model on every call into `rows`."""
        m = self.model
        if self._mocap.size:
            rows[:, self.mocap_pos] = np.asarray(m.body_pos)[self._mocap].ravel()
            rows[:, self.mocap_quat] = np.asarray(m.body_quat)[self._mocap].ravel()
        if self._neq:
            rows[:, self.eq_active] = np.asarray(m.eq_active0)

    def _make(self, nsim: int, threads: int) -> Any:
        from mujoco import batch as mj_batch

        batch = mj_batch.Batch(self.model, nsim, threads)
        # A `Batch` simulates a copy of its model unless given one of the caller's: this one,
        # so that an edit of the model after the first call (`model.opt.timestep`, a mass, a
        # flag) is seen here as `mujoco.rollout` and `mj_step` see it.
        batch.set_models(self.model)
        batch.reset(stage=int(mujoco.mjtStage.mjSTAGE_NONE))
        return batch

    def _grow(self, P: int) -> Any:
        if self._batch is None or self._nsim < P:
            nsim = max(P, 2 * self._nsim)
            batch = self._make(nsim, self.nthread)
            self._sensors = batch.bind("sensordata") if self.nsensordata else None
            self._batch, self._nsim = batch, nsim
            self._ids = np.arange(nsim, dtype=np.int32)
        return self._batch

    def step(
        self, state: np.ndarray, ctrl: np.ndarray, warmstart: np.ndarray, nstep: int
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
        """`nstep` physics steps from `(P, nstate)` states, `(P, nu)` controls held throughout
        and `(P, nv)` warm starts.

        Returns:
            `(state, sensordata, warmstart, warned)`: the `(P, nstate)` states after the
            steps, the `(P, nsensordata)` sensors of the last one (None without sensors), the
            `(P, nv)` warm starts they left, and `(P,)` flags, true where MuJoCo warned in
            any of the steps (a simulation that diverges is reset and stepped on, as
            `mj_step` does). The first three are views of the batch's own arrays, valid
            until its next call.
        """
        P = state.shape[0]
        batch = self._grow(P)
        rows = batch.state[:P]
        if self.has_inputs:
            self.write_inputs(rows)
        rows[:, self.full] = state
        rows[:, self.warm] = warmstart
        rows[:, self.ctrl] = ctrl
        counters = batch.warning[:P]
        counters[...] = 0
        batch.step(None if self._nsim == P else self._ids[:P], nstep)
        sensors = None if self._sensors is None else self._sensors[:P]
        warned = counters[..., 1].any(axis=-1)
        return rows[:, self.full], sensors, rows[:, self.warm], warned

    def _exact_batch(self, B: int, threads: int) -> Exact:
        """A batch of exactly `B` simulations on `threads` threads, made on first use and kept
        (a few at a time)."""
        entry = self._exact.get((B, threads))
        if entry is None:
            if len(self._exact) >= 4:  # a few batch sizes are in use at a time
                self._exact.clear()
            batch = self._make(B, threads)
            entry = self._exact[B, threads] = Exact(batch, self.full, self.warm, self.ctrl)
        return entry

    def dedicated(self, B: int, threads: int) -> Exact:
        """A batch of exactly `B` simulations on `threads` threads, made now and not kept here:
        for a caller that keeps it, and never uses it from two threads at once."""
        return Exact(self._make(B, threads), self.full, self.warm, self.ctrl)

    def step_into(
        self, state: np.ndarray, ctrl: np.ndarray, nstep: int, out: np.ndarray, threads: int
    ) -> tuple[np.ndarray | None, bool]:
        """`nstep` physics steps from `(B, nstate)` states with `(B, nu)` controls, each from
        a zero warm start (a fresh `MjData`'s, as `mujoco.rollout` starts an element), into
        `out` `(B, nstate)`, on `threads` threads.

        Four NumPy calls besides MuJoCo's, each a copy or one pass over a small array (every
        Python-level operation here costs more than the work it does, and more again on a
        cache that MuJoCo's step has just filled; see docs/performance.md). The closed loop's
        own path is `Engine.stepper`'s, on a batch of its own; this one serves the calls it
        hands on (two threads at once).

        Returns:
            `(warned, plain)`: the `(B,)` flags of the simulations MuJoCo warned on, or None
            where it warned on none (the common case, told by one comparison of bytes); and
            whether the rows' Euclidean norm was at most `MAXVAL` before the steps (one sum of
            squares, NaN or Inf in any entry failing it). True rules out a non-finite state and
            a control beyond MuJoCo's limit; where it is false the caller checks the inputs
            exactly (`Divergence.flags`).
        """
        e = self._exact_batch(state.shape[0], threads)
        rows = e.rows
        if self.has_inputs:
            self.write_inputs(rows)
        full, head, zeros = e.full, e.head, e.zeros
        if head is not None and zeros is not None:
            np.concatenate((state, zeros, ctrl), axis=1, out=head)
        else:
            rows[:, self.full] = state
            rows[:, self.warm] = 0.0
            rows[:, self.ctrl] = ctrl
        plain = sum_of_squares(rows) <= MAXVAL2  # False for NaN, Inf or overflow too
        try:
            nfail = e.step(None, nstep, NO_STAGE)
            if nfail:
                e.batch._check(None, nfail)  # raises MuJoCo's error, naming the simulations
            np.copyto(out, rows[:, self.full] if full is None else full)
        except BaseException:
            e.warning.fill(0)  # the next call must not read this one's warnings as its own
            raise
        return read_warnings(e), plain

    def rollout(
        self,
        state: np.ndarray,
        ctrl: np.ndarray,
        warmstart: np.ndarray | None,
        out_state: np.ndarray,
        out_sensor: np.ndarray | None,
        threads: int,
    ) -> np.ndarray | None:
        """`mujoco.rollout`'s rollout as one `Batch.rollout`: `N` physics steps from `(B,
        nstate)` states and `(B, nv)` warm starts (None: zeros), with `(B, N, nu)` controls,
        recording the `(B, N, nstate)` states and `(B, N, nsensordata)` sensors into the
        outputs. A simulation stops at its first warning, and its remaining records repeat its
        last, as in `mujoco.rollout`. Returns the flags of the simulations MuJoCo warned on,
        or None where it warned on none.
        """
        e = self._exact_batch(state.shape[0], threads)
        rows = e.rows
        if self.has_inputs:
            self.write_inputs(rows)
        rows[:, self.full] = state
        rows[:, self.warm] = 0.0 if warmstart is None else warmstart
        record: dict[Any, np.ndarray] = {FULLPHYSICS: out_state}
        if out_sensor is not None and self.nsensordata:
            record["sensordata"] = out_sensor
        try:
            e.batch.rollout(ctrl.shape[1], ctrl, _CTRL, tuple(record), None, record)
        except BaseException:
            e.warning.fill(0)
            raise
        return read_warnings(e)
