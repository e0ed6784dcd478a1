"""The host side: batched steps, rollouts and `mj_forward` on MuJoCo's own C thread pool.

Everything here takes and returns float64 NumPy arrays with the batch as the leading dimension,
and knows nothing of JAX; `_simulator.py` wraps it with `jaxbridge.host`.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, cast

import numpy as np

from . import _batched
from ._batched import NO_STAGE, BatchSteps
from ._model import MjData, MjModel, mj
from ._state import DOT_BLOCK, FULLPHYSICS, MAXVAL, MAXVAL2, Layout, sum_of_squares

__all__ = ["Engine", "DEFAULT_OUTPUTS"]

import mujoco._rollout as _rollout_native  # noqa: E402  (after the guarded import in `_model`)

DEFAULT_OUTPUTS = ("xpos", "xquat", "site_xpos", "sensordata", "contact_dist")

# MjData arrays whose size changes with the number of active constraints: no fixed shape.
_DYNAMIC_PREFIXES = ("efc_", "iefc_", "map_efc2iefc", "map_iefc2efc", "island_", "efm_")

_add_reduce = np.add.reduce  # `ndarray.sum` without its Python wrapper (this runs every step)
_max_reduce, _min_reduce = np.maximum.reduce, np.minimum.reduce  # both propagate NaN

#: MuJoCo's bound on qpos, qvel, qacc and controls (`mju_isBad`): a control beyond it (after
#: clamping to `ctrlrange`) is replaced by zero, with a warning that does not reset.
_AUTORESET = int(mj.mjtDisableBit.mjDSBL_AUTORESET)
# Models with these enabled need one `MjData` per simulation (`mujoco.batch` refuses them
# without `persistent=True`): they keep the `mujoco.rollout` paths.
_ONE_DATA_EACH = sum(
    int(getattr(mj.mjtEnableBit, name, 0)) for name in ("mjENBL_SLEEP", "mjENBL_IPC")
)
_CLAMPCTRL = int(mj.mjtDisableBit.mjDSBL_CLAMPCTRL)

_CTRL = int(mj.mjtState.mjSTATE_CTRL)  # mujoco.rollout's control_spec: controls only
_SMALL_ROWS = 4096  # `mujoco.batch` rows of at most this many numbers are checked in one pass
_ONE_DIVERGED = np.ones(1, bool)  # the flags of a one-element call that diverged
_ONE_DIVERGED.flags.writeable = False
_KEPT_BUFFER_BYTES = 1 << 20  # step buffers up to this size are kept by a worker for reuse


class _NativeRollout(Protocol):
    """The C++ `mujoco._rollout.Rollout` (the bindings ship no type stubs)."""

    def rollout(
        self,
        model: list[MjModel],
        data: list[MjData],
        nstep: int,
        control_spec: int,
        state0: np.ndarray,
        warmstart0: np.ndarray | None,
        control: np.ndarray | None,
        state: np.ndarray | None,
        sensordata: np.ndarray | None,
        chunk_size: int | None = None,
    ) -> None: ...


#: `Engine.stepper`'s functions: `(state, ctrl, out)` to the `(B,)` flags, or None.
_StepInto = Callable[[np.ndarray, np.ndarray, np.ndarray], "np.ndarray | None"]


def _float64(x: np.ndarray) -> np.ndarray:
    """`x` as C-contiguous float64, without a call into NumPy when it already is."""
    if x.dtype == np.float64 and x.flags.c_contiguous:
        return x
    return np.ascontiguousarray(x, dtype=np.float64)


def _held(ctrl: np.ndarray, nstep: int) -> np.ndarray:
    """`(B, T, nu)` controls held for `nstep` physics steps each: `(B, T * nstep, nu)`."""
    if nstep == 1:
        return ctrl  # mujoco.rollout takes one control per physics step: nothing to repeat
    return np.repeat(ctrl, nstep, axis=1)


def any_warning(d: MjData) -> bool:
    """Whether any of `d`'s warning counters is set (`mujoco.rollout` clears them per element)."""
    return bool(d.warning.number.any())


def default_nthread() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class _Worker:
    """A thread pool with one `MjData` per thread; used by one host call at a time."""

    def __init__(self, model: MjModel, nthread: int):
        self.datas = [mj.MjData(model) for _ in range(max(1, nthread))]
        self.first = self.datas[:1]
        self.one = [model]  # `models(1)`, read on every one-element call
        # `mujoco._rollout.Rollout` is what `mujoco.rollout.Rollout` wraps; calling it directly
        # skips a Python layer on every host call (the wrapper's `skip_checks` path only
        # forwards its arguments).
        self.pool = native_rollout(nthread) if nthread > 1 else None
        self.serial = native_rollout(0)  # runs on the calling thread, GIL released
        self._models: dict[int, list[MjModel]] = {}
        self._model = model
        self._step_buffers: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._nthread = nthread
        self._batch: BatchSteps | None = None
        # A live view of the first `MjData`'s warning counters, read after every serial
        # one-element call (a list's `any` of it costs well under a microsecond).
        self._first_warnings = self.datas[0].warning.number

    def first_warned(self) -> bool:
        """Whether MuJoCo warned in the first `MjData`'s last rollout element."""
        return any(self._first_warnings.tolist())

    def batch(self) -> BatchSteps:
        """This worker's `mujoco.batch` runner (MuJoCo 4.0 and later; see `_batched`)."""
        if self._batch is None:
            self._batch = BatchSteps(self._model, self._nthread)
        return self._batch

    def step_buffers(self, B: int, nstep: int, nstate: int) -> tuple[np.ndarray, np.ndarray]:
        """`(B, nstep, nu)` held controls and `(B, nstep, nstate)` states for `Engine.step`.

        Made once per shape and reused: fresh arrays of this size cost page faults on every
        call (the pool's threads write them), which showed as tens of microseconds per step.
        """
        buffers = self._step_buffers.get((B, nstep))
        if buffers is None:
            nu = int(self._model.nu)
            buffers = (np.empty((B, nstep, nu)), np.empty((B, nstep, nstate)))
            if B * nstep * (nu + nstate) * 8 > _KEPT_BUFFER_BYTES:
                return buffers  # large calls: the allocation is small against the work
            if len(self._step_buffers) >= 8:  # a few shapes are in use at a time
                self._step_buffers.clear()
            self._step_buffers[B, nstep] = buffers
        return buffers

    def models(self, B: int) -> list[MjModel]:
        """`[model] * B`, made once per batch size (the C++ side wants one model per element)."""
        models = self._models.get(B)
        if models is None:
            models = self._models[B] = [self._model] * B
        return models


def native_rollout(nthread: int) -> _NativeRollout:
    return cast("_NativeRollout", _rollout_native.Rollout(nthread=nthread))


def _time_after(t0: np.ndarray, dt: float, N: int) -> np.ndarray:
    """`t0` after `N` additions of `dt`, rounded at each addition exactly as MuJoCo's
    `d->time += timestep` (or RK4's `time + h`) rounds it.

    `np.add.accumulate` is that same left-to-right recurrence, so the result is bit for bit
    MuJoCo's, in a fixed number of NumPy calls whatever `N` is.
    """
    if N <= 8:  # a few in-place additions cost less than building the accumulate's terms
        t = t0 + dt
        for _ in range(N - 1):
            t += dt
        return t
    terms = np.empty((t0.shape[0], N + 1))
    terms[:, 0] = t0
    terms[:, 1:] = dt
    return np.add.accumulate(terms, axis=1)[:, -1]


class Engine:
    """Batched MuJoCo on one model: `rollout`, `step`, `forward`, and single-element replays.

    A worker (a `Rollout` thread pool and its `MjData`s, and with MuJoCo 4.0 and later the
    `mujoco.batch` batches of `_batched.BatchSteps`, which step every batch of more than one
    element) serves one call at a time; concurrent calls from several Python threads each take
    a worker of their own from a free list (made on demand), so they never share an `MjData`
    or a batch and need no lock while MuJoCo runs.

    A call runs on MuJoCo's thread pool only when it holds enough physics to pay for the
    pool's dispatch and synchronisation (tens of microseconds, more on a loaded machine):
    the cost of one physics step is measured once, and a call of `B` elements of `N` steps
    goes to the pool when `B * N` steps are estimated at `POOL_MIN_WORK` seconds or more.
    Either path gives bit-identical results: every element starts from a fresh state.
    """

    #: Estimated seconds of physics per call below which the serial path is used.
    POOL_MIN_WORK = 200e-6
    #: Physics steps of the rollout that measures a step's cost.
    _MEASURED_STEPS = 8

    def __init__(self, model: MjModel, nthread: int | None = None):
        if nthread is not None and (not isinstance(nthread, int) or nthread < 0):
            raise ValueError(
                f"`Simulator(nthread=...)` must be a non-negative int or None; got {nthread!r}."
            )
        self.model = model
        self.nthread = default_nthread() if nthread is None else nthread
        self.layout = Layout.from_model(model)
        self.nsensordata = int(model.nsensordata)  # MjModel attribute reads cost microseconds
        # `model.opt` is a live view: reading `timestep` through it sees later changes too.
        self._opt = model.opt
        self._free: list[_Worker] = []
        probe = mj.MjData(model)
        self._data_shapes = {
            name: (value.shape, value.dtype)
            for name in dir(probe)
            if not name.startswith("_")
            and not name.startswith(_DYNAMIC_PREFIXES)
            and isinstance(value := getattr(probe, name), np.ndarray)
        }
        contact = probe.contact
        self._contact_fields = {
            name: (
                np.asarray(getattr(contact, name)).shape[1:],
                np.asarray(getattr(contact, name)).dtype,
            )
            for name in dir(contact)
            if not name.startswith("_") and isinstance(getattr(contact, name), np.ndarray)
        }
        self.step_seconds = self._measure_step() if self.nthread > 1 else 0.0
        # `stepper`'s functions and their batches, by (B, nstep, threads, rank)
        self._steppers: dict[tuple[int, int, int, int], tuple[_StepInto, _batched.Exact | None]]
        self._steppers = {}
        self._loop_steps: BatchSteps | None = None  # the steppers' batches' maker

    def _measure_step(self) -> float:
        """Seconds of one physics step from the initial state: the best of a few rollouts of
        `_MEASURED_STEPS` steps, over that number (a rollout of one step would count the
        call's own cost, a few microseconds, as physics: measured, 7.8 µs for a one-hinge
        model whose step this gives as 4.6 µs)."""
        n = self._MEASURED_STEPS
        with self.worker() as w:
            state, ctrl = self.layout.initial[None], np.zeros((1, n, int(self.model.nu)))
            out = np.empty((1, n, self.layout.nstate))
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                w.serial.rollout(w.models(1), w.first, n, _CTRL, state, None, ctrl, out, None)
                best = min(best, time.perf_counter() - t0)
        return best / n

    @contextlib.contextmanager
    def worker(self) -> Iterator[_Worker]:
        w = self._take()
        try:
            yield w
        finally:
            self._free.append(w)

    def _take(self) -> _Worker:
        # list.pop and list.append are atomic under the GIL: no lock needed for the free list.
        try:
            return self._free.pop()
        except IndexError:
            return _Worker(self.model, self.nthread)

    def uses_pool(self, B: int, N: int) -> bool:
        """Whether a call of `B` elements of `N` physics steps runs on the thread pool."""
        return self.nthread > 1 and B > 1 and B * N * self.step_seconds >= self.POOL_MIN_WORK

    def batched(self) -> bool:
        """Whether batches run on `mujoco.batch`: MuJoCo 4.0 and later, and a model that may
        share an `MjData` between simulations (not one with sleep or IPC enabled; read on
        every call, as the model may change)."""
        return _batched.available() and not self._opt.enableflags & _ONE_DATA_EACH

    # -- stepping ------------------------------------------------------------------------

    def rollout(
        self,
        state: np.ndarray,
        ctrl: np.ndarray,
        nstep: int,
        warmstart: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rolls out `T` controls, each held for `nstep` physics steps.

        Args:
            state: `(B, nstate)` initial states.
            ctrl: `(B, T, nu)` controls.
            nstep: physics steps per control.
            warmstart: `(B, nv)` constraint-solver warm starts (`qacc_warmstart`) to start
                from, or None for MuJoCo's fresh `MjData` (zeros).

        Returns:
            `(states, sensordata, diverged)`: `(B, T, nstate)` states after each control,
            `(B, T, nsensordata)` sensor values of the last physics step of each, and `(B,)`
            flags, true where MuJoCo warned (bad qpos/qvel/qacc, a rejected control, a full
            contact buffer or constraint arena) and so reset or stopped that element's
            simulation, or where the input was not finite. (On `mujoco.rollout`'s pool, with
            MuJoCo before 4.0, a warning that neither resets nor stops in the last physics
            step is seen only from time 0.)
        """
        state = _float64(state)
        B, T = ctrl.shape[:2]
        full = _held(_float64(ctrl), nstep)
        N = T * nstep
        out_state = np.empty((B, N, self.layout.nstate))
        out_sensor = np.empty((B, N, self.nsensordata))
        if B and N:
            if warmstart is not None:
                warmstart = _float64(warmstart)
            diverged = self._run(state, full, N, out_state, out_sensor, warmstart)
        else:
            diverged = np.zeros(B, bool)
        if nstep == 1:
            return out_state, out_sensor, diverged
        return out_state[:, nstep - 1 :: nstep], out_sensor[:, nstep - 1 :: nstep], diverged

    def step(
        self, state: np.ndarray, ctrl: np.ndarray, nstep: int, out: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The state after `nstep` physics steps with `ctrl` held.

        Args:
            state: `(B, nstate)` states.
            ctrl: `(B, nu)` controls.
            nstep: physics steps (>= 1).
            out: where to write the `(B, nstate)` next states, or None.

        Returns:
            `(next_state, diverged)`: `(B, nstate)` and `(B,)`, as `rollout`'s last state and
            flags (no sensor values are copied out).
        """
        state, ctrl = _float64(state), _float64(ctrl)
        B, n = state.shape
        if out is not None and not (out.dtype == np.float64 and out.flags.c_contiguous):
            # MuJoCo's bindings would write into a converted copy: go through our own array.
            next_state, diverged = self.step(state, ctrl, nstep)
            out[...] = next_state
            return out, diverged
        target = np.empty((B, n)) if out is None else out
        diverged = self.step_into(state, ctrl, nstep, target)
        return target, np.zeros(B, bool) if diverged is None else diverged

    def step_into(
        self, state: np.ndarray, ctrl: np.ndarray, nstep: int, out: np.ndarray
    ) -> np.ndarray | None:
        """`step` into `out`: the `(B,)` flags, or None where no element diverged (the common
        case, told in a few NumPy calls). `stepper`'s function, made for this call.

        `state` `(B, nstate)` and `ctrl` `(B, nu)` must be float64 (C-contiguous, as XLA's
        buffers are, or MuJoCo's bindings copy them), `out` `(B, nstate)` C-contiguous
        float64 (else MuJoCo would write into a copy).
        """
        B = state.shape[0]
        if B == 0:
            return None
        return self.stepper(B, nstep)(state, ctrl, out)

    def stepper(self, B: int, nstep: int, rank: int = 2) -> _StepInto:
        """`step_into` for `B >= 1` states and controls and `nstep` physics steps: a function
        `(state, ctrl, out)` giving the `(B,)` flags, or None where no element diverged.
        `rank=1` takes one element's `(nstate,)` state, `(nu,)` controls and `(nstate,)` out
        (`B == 1`), as a `lax.scan` of `sim.step` without `vmap` passes them. The arrays must be
        as `step_into`'s.

        The closed loop's own call: `sim.step`'s buffer callback gets one when it is lowered
        and calls it on every `lax.scan` step. The serial path or the pool is chosen here,
        once; a few are kept, by shape and path, so `step_into` takes them too.
        """
        threads = self.nthread if self.uses_pool(B, nstep) else 1
        key = (B, nstep, threads, rank)
        made = self._steppers.get(key)
        if made is None:
            if len(self._steppers) >= 8:  # a few shapes are in use at a time
                self._steppers.clear()
            made = self._steppers[key] = self._make_stepper(B, nstep, threads, rank)
        return made[0]

    def _make_stepper(
        self, B: int, nstep: int, threads: int, rank: int
    ) -> tuple[_StepInto, _batched.Exact | None]:
        """`stepper`'s function, and the batch it steps (None where it has none).

        On `mujoco.batch` (where MuJoCo has it and the model allows it: `Batch.step` refuses
        a model with sleep or IPC enabled since, and the general path takes over) it steps a
        batch of its own, in the fewest Python operations this takes: after MuJoCo's step has
        filled the caches, each costs a microsecond or more. Called from two threads at once,
        the second takes the general path (a worker's batch, made on demand), as it does for
        a model whose rows cannot be written in one copy (a plugin's state apart).
        """
        step_one, rollout_into, flags = self.step_one, self._rollout_into, self._flags
        free, take, batched = self._free, self._take, self.batched

        def general(state: np.ndarray, ctrl: np.ndarray, out: np.ndarray) -> np.ndarray | None:
            if rank == 1:
                state, ctrl, out = state.reshape(1, -1), ctrl.reshape(1, -1), out.reshape(1, -1)
            if batched():
                w = take()
                try:
                    warned, plain = w.batch().step_into(state, ctrl, nstep, out, threads)
                finally:
                    free.append(w)
                return None if warned is None and plain else flags(warned, state, ctrl)
            if B == 1:  # its checks cost less than the general path's for one element
                return _ONE_DIVERGED if step_one(state, ctrl, out, nstep) else None
            return rollout_into(state, ctrl, nstep, out)

        if not batched():  # `mujoco.batch` refuses a model with sleep or IPC enabled: one
            return general, None  # made so keeps the general path, which reads them each call
        if self._loop_steps is None:
            self._loop_steps = BatchSteps(self.model, self.nthread)
        steps = self._loop_steps
        e = steps.dedicated(B, threads)
        if e.head is None or e.zeros is None or e.full is None:
            return general, None
        rows, batch, warning, clear = e.rows, e.batch, e.warning, e.clear
        head, zeros, full = (
            (e.head[0], e.zeros[0], e.full[0]) if rank == 1 else (e.head, e.zeros, e.full)
        )
        axis = rank - 1
        # The check below sums the squares of the rows (one `np.vdot`) where they are small,
        # else of the inputs (two, a third of the numbers for a humanoid): measured in the loop,
        # 0.7 µs less at batch 1, 10 µs less at batch 64. `np.vdot` flattens; past
        # `DOT_BLOCK` numbers OpenBLAS would thread it, and `sum_of_squares` takes blocks.
        flat = rows.reshape(-1) if rows.size <= _SMALL_ROWS else None  # a view: rows stay put
        one_dot = B * max(self.layout.nstate, int(self.model.nu)) <= DOT_BLOCK
        inputs = steps._inputs if steps._has_inputs else None
        opt, lock = self._opt, threading.Lock()
        acquire, release = lock.acquire, lock.release
        vdot, concatenate, copyto = np.vdot, np.concatenate, np.copyto

        def run(state: np.ndarray, ctrl: np.ndarray, out: np.ndarray) -> np.ndarray | None:
            if not acquire(False):
                return general(state, ctrl, out)  # a call under way
            try:
                if inputs is not None:
                    inputs(rows)
                concatenate((state, zeros, ctrl), axis=axis, out=head)
                # Rules out a non-finite input and a control beyond MuJoCo's limit at once
                # (False for NaN, Inf and overflow too); where it fails, `flags` checks exactly.
                if flat is not None:
                    plain = vdot(flat, flat) <= MAXVAL2
                elif one_dot:
                    plain = vdot(state, state) + vdot(ctrl, ctrl) <= MAXVAL2
                else:
                    plain = sum_of_squares(state) + sum_of_squares(ctrl) <= MAXVAL2
                try:
                    nfail = e.step(None, nstep, NO_STAGE)  # read here: benchmarks time it
                    if nfail:
                        if opt.enableflags & _ONE_DATA_EACH:  # `mujoco.batch` refuses these:
                            warning.fill(0)  # enabled since this was made
                            return general(state, ctrl, out)
                        batch._check(None, nfail)  # raises MuJoCo's error, naming the rows
                    copyto(out, full)
                except BaseException:
                    warning.fill(0)  # no warning of this call may count as the next one's
                    raise
                if plain and warning.tobytes() == clear:
                    return None
                warned = _batched.read_warnings(e)  # and clears them
            finally:
                release()
            if rank == 1:
                state, ctrl = state.reshape(1, -1), ctrl.reshape(1, -1)
            return flags(warned, state, ctrl)

        return run, e

    def _rollout_into(
        self, state: np.ndarray, ctrl: np.ndarray, nstep: int, out: np.ndarray
    ) -> np.ndarray | None:
        """`step_into` as one `mujoco.rollout` call (MuJoCo before 4.0, or a model with sleep
        or IPC enabled). With `nstep == 1` MuJoCo writes into `out` itself; otherwise the held
        controls and the trajectory live in buffers of the worker's own."""
        B, n = state.shape
        w = self._take()
        try:
            if nstep == 1:  # mujoco.rollout takes one control per physics step: views
                full, trajectory = ctrl[:, None], out[:, None]
            else:
                full, trajectory = w.step_buffers(B, nstep, n)
                np.copyto(full, ctrl[:, None])  # held for every physics step
            diverged = self._run_on(w, state, full, ctrl, nstep, trajectory, None, None)
            if nstep > 1:
                np.copyto(out, trajectory[:, -1])
            return diverged
        finally:
            self._free.append(w)

    def _flags(
        self, warned: np.ndarray | None, state: np.ndarray, ctrl: np.ndarray
    ) -> np.ndarray | None:
        """The `(B,)` flags of a `mujoco.batch` call, or None where none is set: where MuJoCo
        warned in any of an element's steps (it reset, zeroed a bad control, or ran out of
        contact or constraint memory; `mujoco.batch` keeps each simulation's counters, so a
        warning in the last physics step, which `mujoco.rollout`'s path cannot see, counts
        too), where the state held a non-finite number, or where a control is one MuJoCo
        rejects (`_bad_ctrl`; `ctrl` `(B, ...)`)."""
        finite = math.isfinite(sum_of_squares(state))
        if warned is None and finite and sum_of_squares(ctrl) <= MAXVAL2:
            return None
        diverged = np.zeros(state.shape[0], bool) if warned is None else warned
        if not finite:
            diverged |= ~np.isfinite(state).all(axis=1)
        bad = self._bad_ctrl(ctrl)
        if bad is not None:
            diverged |= bad
        return diverged if diverged.any() else None

    def step_points(
        self, state: np.ndarray, ctrl: np.ndarray, warmstart: np.ndarray | None, nstep: int
    ) -> np.ndarray:
        """`nstep` physics steps from each of `P` points, as rows of one `mujoco.batch` call
        (check `batched()` first); the differences' engine.

        `state` `(P, nstate)`, `ctrl` `(P, nu)` (held), `warmstart` `(P, nv)` or None for
        zeros. Returns `(P, nstate + nsensordata + nv)`: the state, the sensors of the last
        physics step and the warm start the steps leave; NaN for a point MuJoCo warned on (it
        reset that simulation, or zeroed its controls, so no difference taken from it means
        anything).
        """
        m, n = self.model, self.layout.nstate
        ns, nv = self.nsensordata, int(m.nv)
        out = np.empty((state.shape[0], n + ns + nv))
        if warmstart is None:
            warmstart = np.zeros((state.shape[0], nv))
        with self.worker() as w:
            after, sensors, warm, warned = w.batch().step(state, ctrl, warmstart, nstep)
            out[:, :n] = after
            if sensors is not None:
                out[:, n : n + ns] = sensors
            out[:, n + ns :] = warm
        if warned.any():
            out[warned] = np.nan
        return out

    def step_one(
        self, state: np.ndarray, ctrl: np.ndarray, out: np.ndarray, nstep: int = 1
    ) -> bool:
        """`step` of one element by `nstep` physics steps into `out`; whether it diverged.

        The closed loop's most common call, with nothing but the checks: `state` `(1, nstate)`,
        `ctrl` `(1, nu)` and `out` `(1, nstate)` must all be C-contiguous float64 (XLA's
        buffers are). MuJoCo's bindings check only sizes, so the 2-D arrays pass as they are.
        With `nstep == 1` MuJoCo writes into `out` itself; otherwise the held controls and the
        trajectory live in buffers of the worker's own. The checks are `_diverged_one`'s.
        """
        w = self._take()
        try:
            if nstep == 1:
                w.serial.rollout(w.one, w.first, 1, _CTRL, state, None, ctrl, out, None)
            else:
                full, trajectory = w.step_buffers(1, nstep, self.layout.nstate)
                full[0] = ctrl  # held for every physics step
                w.serial.rollout(w.one, w.first, nstep, _CTRL, state, None, full, trajectory, None)
                out[0] = trajectory[0, -1]
            return self._diverged_one(w, state, ctrl, out.item(0), nstep)
        finally:
            self._free.append(w)

    def _run(
        self,
        state: np.ndarray,
        full: np.ndarray,
        N: int,
        out_state: np.ndarray,
        out_sensor: np.ndarray | None,
        warmstart: np.ndarray | None = None,
    ) -> np.ndarray:
        """One `mujoco.rollout` of `N` steps per element into the outputs; the flags. With
        `mujoco.batch`, a batch of more than one element is one `Batch.rollout` instead (on
        the pool where the work pays for it), whose warning counters are each element's."""
        w = self._take()
        try:
            B = state.shape[0]
            if B > 1 and self.batched():
                threads = self.nthread if self.uses_pool(B, N) else 1
                warned = w.batch().rollout(state, full, warmstart, out_state, out_sensor, threads)
                diverged = self._flags(warned, state, full)
            else:
                diverged = self._run_on(w, state, full, full, N, out_state, out_sensor, warmstart)
        finally:
            self._free.append(w)
        return np.zeros(state.shape[0], bool) if diverged is None else diverged

    def _run_on(
        self,
        w: _Worker,
        state: np.ndarray,
        full: np.ndarray,
        ctrl: np.ndarray,
        N: int,
        out_state: np.ndarray,
        out_sensor: np.ndarray | None,
        warmstart: np.ndarray | None,
    ) -> np.ndarray | None:
        """`_run` on worker `w`, None where no element diverged; `ctrl` holds the controls
        `full` repeats (the checks read it)."""
        B = state.shape[0]
        parallel = B > 1 and w.pool is not None and self.uses_pool(B, N)
        runner = w.pool if parallel and w.pool is not None else w.serial
        # No shape checks: the shapes were checked at trace time, and mujoco.rollout's own
        # checks and tiling cost more than the step for small models.
        runner.rollout(
            w.models(B),
            w.datas if parallel else w.first,
            N,
            _CTRL,
            state,
            warmstart,
            full,
            out_state,
            out_sensor,
        )
        if B == 1:  # the closed loop's most common call: no NumPy calls at all
            t_out = out_state.item((N - 1) * out_state.shape[2])  # the last step's time
            return np.array([self._diverged_one(w, state, ctrl, t_out, N)])
        return self._diverged(w, parallel, state, full, ctrl, out_state, N, warmstart)

    def _bad_ctrl(self, ctrl: np.ndarray) -> np.ndarray | None:
        """Which elements of `ctrl` `(B, ...)` hold a control MuJoCo replaces by zero, or None
        where none does (two reductions: the common case).

        MuJoCo zeroes all controls of a step when one of them, after clamping to its
        `ctrlrange`, is NaN or beyond `MAXVAL` (`mjWARN_BADCTRL`), and carries on without a
        reset: the state looks healthy and is wrong. Non-finite controls are flagged even where
        clamping would make them harmless, as any non-finite input is.
        """
        if ctrl.size == 0 or (
            _min_reduce(ctrl, None) >= -MAXVAL and _max_reduce(ctrl, None) <= MAXVAL
        ):
            return None
        bad = ~np.isfinite(ctrl)
        if self._opt.disableflags & _CLAMPCTRL:
            bad |= np.abs(ctrl) > MAXVAL
        else:
            bad |= (np.abs(ctrl) > MAXVAL) & ~self.model.actuator_ctrllimited.astype(bool)
        return np.asarray(bad.reshape(ctrl.shape[0], -1).any(axis=1))

    def rejected_controls(self, ctrl: np.ndarray) -> np.ndarray:
        """`(B,)` flags of the elements of `ctrl` `(B, ...)` that hold a control MuJoCo
        replaces by zero (see `_bad_ctrl`)."""
        bad = self._bad_ctrl(ctrl)
        return np.zeros(ctrl.shape[0], bool) if bad is None else bad

    def _diverged(
        self,
        w: _Worker,
        parallel: bool,
        state: np.ndarray,
        full: np.ndarray,
        ctrl: np.ndarray,
        out_state: np.ndarray,
        N: int,
        warmstart: np.ndarray | None,
    ) -> np.ndarray | None:
        """The `(B,)` flags of a call of `N` physics steps, or None where none diverged.

        mujoco.rollout stops an element at its first warning (filling the rest with the state
        it stopped at), and the divergence warnings also reset it to time 0, so its final time
        is not the time `N` steps on. The common case, nothing wrong, takes `N + 6` NumPy
        calls (this runs on every step): the times, a sum of squares of the states (finite only
        if every entry is) and of the controls (at most `MAXVAL**2` only if no control is
        beyond `MAXVAL`), and the earliest time reached (a time `dt` can hide a reset).
        """
        dt = self._opt.timestep
        t_out = out_state[:, -1, 0]
        wrong = t_out != _time_after(state[:, 0], dt, N)  # NaN compares unequal too
        finite = math.isfinite(sum_of_squares(state))
        if (
            finite
            and sum_of_squares(ctrl) <= MAXVAL2
            and _min_reduce(t_out) > dt
            and not wrong.any()
        ):
            return None
        diverged = wrong
        if not finite:
            diverged |= ~np.isfinite(state).all(axis=1)
        bad = self._bad_ctrl(ctrl)
        if bad is not None:
            diverged |= bad
        # A reset at the only step from time 0 ends at time dt too, as a healthy step does:
        # MuJoCo's warning counters, the state a reset leads to, or a replay decide those.
        ambiguous = t_out == dt
        if ambiguous.any():
            ambiguous &= ~diverged
            last = state.shape[0] - 1
            if not parallel and ambiguous[last]:  # the serial path's MjData ran this one last
                diverged[last] = w.first_warned()  # (read before any replay reuses it)
                ambiguous[last] = False
            todo = np.flatnonzero(ambiguous)
            if todo.size > 2 and N == 1 and not self._opt.disableflags & _AUTORESET:
                todo = self._resolve_resets(w, todo, state, ctrl, out_state[:, 0], warmstart)
            for i in todo:
                warm = None if warmstart is None else warmstart[i]
                diverged[i] = self._replay_warns(w, state[i], full[i], warm)
        return diverged

    def _resolve_resets(
        self,
        w: _Worker,
        todo: np.ndarray,
        state: np.ndarray,
        ctrl: np.ndarray,
        final: np.ndarray,
        warmstart: np.ndarray | None,
    ) -> np.ndarray:
        """Of the one-step elements `todo` that started at time 0 and ended at time dt, those
        whose warnings must still be replayed.

        A resetting warning (bad qpos, qvel or qacc) puts the element in `mj_resetData`'s
        state, with zero controls and warm start, and the step goes on from there: whatever the
        input, it ends where one healthy step from that reset state ends (found here with one
        physics step). An element that ended anywhere else did not reset. One that started
        from the reset state itself, with zero controls and warm start, ends there without a
        reset, and is healthy as that step was. Only elements that reached the reset state's
        successor from elsewhere are replayed: a reset, or a coincidence. Where the reset
        state's own step warns, every element is replayed.
        """
        m, d, nstate = self.model, w.first[0], self.layout.nstate
        if int(m.nq) + int(m.nv) == 0:  # nothing to reset: only replays can tell
            return todo
        mj.mj_resetData(m, d)
        origin = np.empty(nstate)
        mj.mj_getState(m, d, origin, FULLPHYSICS)
        out = np.empty((1, 1, nstate))
        zero = np.zeros((1, 1, int(m.nu)))
        w.serial.rollout(w.one, w.first, 1, _CTRL, origin[None], None, zero, out, None)
        if w.first_warned():
            return todo
        todo = todo[(final[todo] == out[0, 0]).all(axis=1)]  # the others did not reset
        if todo.size == 0:
            return todo
        from_origin = (state[todo] == origin).all(axis=1) & (
            ctrl[todo].reshape(todo.size, -1) == 0
        ).all(axis=1)
        if warmstart is not None:
            from_origin &= (warmstart[todo] == 0).all(axis=1)
        return todo[~from_origin]

    def _diverged_one(
        self, w: _Worker, state: np.ndarray, ctrl: np.ndarray, t_out: float, N: int
    ) -> bool:
        """`_diverged` of one element, in Python floats (the same IEEE double additions):
        `state` `(1, nstate)`, `ctrl` `(1, ..., nu)` (C-contiguous), the time MuJoCo reached
        after `N` steps. It ran serially, on `w.first[0]`: its counters are this element's."""
        dt = self._opt.timestep
        values = state.tolist()[0]  # Python floats: cheaper here than any NumPy call
        expected = values[0]
        for _ in range(N):
            expected += dt
        if t_out != expected:  # NaN compares unequal too
            return True
        # Python's sum of two short lists costs less than one NumPy reduction; a sum is
        # finite only if every term is, and an overflowing one is sorted out exactly.
        u = ctrl.ravel().tolist()
        if not math.isfinite(sum(values, sum(u))) and not (
            np.isfinite(state).all() and np.isfinite(ctrl).all()
        ):
            return True
        if u and not (min(u) >= -MAXVAL and max(u) <= MAXVAL):
            bad = self._bad_ctrl(ctrl)
            if bad is not None and bad[0]:
                return True
        # Its counters are this element's (`mujoco.rollout` clears them per element): any
        # warning counts, one in the last physics step that neither resets nor stops
        # included (a time tells nothing of those).
        return w.first_warned()

    def _replay_warns(
        self, w: _Worker, state: np.ndarray, full: np.ndarray, warmstart: np.ndarray | None
    ) -> bool:
        """Whether MuJoCo warns when it rolls out this one element (on the calling thread)."""
        out = np.empty((1, full.shape[0], self.layout.nstate))
        warm = None if warmstart is None else warmstart[None]
        w.serial.rollout(
            w.models(1), w.first, full.shape[0], _CTRL, state[None], warm, full[None], out, None
        )
        return w.first_warned()

    def reset(self, d: MjData, state: np.ndarray, ctrl: np.ndarray | None = None) -> None:
        """Puts `d` in exactly the condition `mujoco.rollout` starts an element from."""
        mj.mj_resetData(self.model, d)
        mj.mj_setState(self.model, d, state, FULLPHYSICS)
        if ctrl is not None:
            d.ctrl[:] = ctrl

    # -- forward -------------------------------------------------------------------------

    def output_specs(
        self, names: Sequence[str], max_contacts: int
    ) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Shapes (per element) and dtypes of the named `forward` outputs, in order."""
        specs: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
        for name in names:
            if name in self._data_shapes:
                specs[name] = self._data_shapes[name]
            elif name.startswith("contact_") and name[8:] in self._contact_fields:
                shape, dtype = self._contact_fields[name[8:]]
                specs[name] = ((max_contacts, *shape), dtype)
            elif name != "ncon":
                raise ValueError(
                    f"`Simulator.forward(outputs=...)`: unknown output {name!r}. Use names of "
                    "fixed-size `MjData` arrays (e.g. 'xpos', 'qacc', 'sensordata'), "
                    "'contact_<field>' for fields of `MjData.contact` (e.g. 'contact_dist'), "
                    "or 'ncon'."
                )
        if "ncon" in names or any(n.startswith("contact_") for n in names):
            specs["ncon"] = ((), np.dtype(np.int32))
        return specs

    def forward(
        self,
        state: np.ndarray,
        ctrl: np.ndarray,
        names: Sequence[str],
        max_contacts: int,
    ) -> dict[str, np.ndarray]:
        """`mj_forward` at each of `B` states; the named outputs, each `(B, *shape)`.

        Contact outputs (`contact_*`) hold the first `max_contacts` contacts, zero-padded;
        `ncon` is the number MuJoCo found (it may exceed `max_contacts`). Where MuJoCo warned
        (a control it replaced by zeros, a full contact buffer), that element's floating-point
        outputs are NaN.
        """
        m = self.model
        specs = self.output_specs(names, max_contacts)
        state = np.ascontiguousarray(state, dtype=np.float64)
        B = state.shape[0]
        out = {name: np.zeros((B, *shape), dtype) for name, (shape, dtype) in specs.items()}
        plain = [n for n in specs if n in self._data_shapes]
        contact = [n for n in specs if n.startswith("contact_")]
        warned = []
        with self.worker() as w:
            d = w.datas[0]
            # A serial loop: mj_forward is ~10 µs, and splitting it over Python threads
            # measured no faster (the bindings' per-call overhead holds the GIL).
            for i in range(B):
                self.reset(d, state[i], ctrl[i])  # (clears the warning counters)
                mj.mj_forward(m, d)
                if w.first_warned():
                    warned.append(i)
                for name in plain:
                    out[name][i] = getattr(d, name)
                if "ncon" in out:
                    ncon = d.ncon
                    out["ncon"][i] = ncon
                    k = min(ncon, max_contacts)
                    for name in contact:
                        out[name][i, :k] = getattr(d.contact, name[8:])[:k]
        if warned:
            # MuJoCo carried on past a warning (a bad control replaced by zeros, a full contact
            # buffer): outputs that look right and are not. NaN cannot pass for a real value.
            for value in out.values():
                if np.issubdtype(value.dtype, np.floating):
                    value[warned] = np.nan
        return out
