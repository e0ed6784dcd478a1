"""The host side: batched steps, rollouts and `mj_forward` on MuJoCo's own C thread pool.

Everything here takes and returns float64 NumPy arrays with the batch as the leading dimension,
and knows nothing of JAX; `Simulator` (`_simulator.py`, `_step.py`, `_rollout.py`,
`_forward.py`) wraps it with `jaxbridge.host`. The closed loop's step is `_stepper.py`'s, the
divergence checks `_divergence.py`'s, the workers `_worker.py`'s, and `forward`'s outputs
`_outputs.py`'s.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence

import numpy as np

from . import _batched
from ._batched import BatchSteps
from ._divergence import Divergence
from ._model import MjData, MjModel
from ._outputs import Outputs
from ._state import Layout
from ._stepper import StepInto, make_stepper
from ._worker import CTRL, ONE_DATA_EACH, Worker, default_nthread, reset_data

__all__ = ["Engine"]


def _float64(x: np.ndarray) -> np.ndarray:
    """`x` as C-contiguous float64, without a call into NumPy when it already is."""
    if x.dtype == np.float64 and x.flags.c_contiguous:
        return x
    return np.ascontiguousarray(x, dtype=np.float64)


_ONE_DIVERGED = np.ones(1, bool)  # the flags of a one-element call that diverged
_ONE_DIVERGED.flags.writeable = False


def _held(ctrl: np.ndarray, nstep: int) -> np.ndarray:
    """`(B, T, nu)` controls held for `nstep` physics steps each: `(B, T * nstep, nu)`."""
    if nstep == 1:
        return ctrl  # mujoco.rollout takes one control per physics step: nothing to repeat
    return np.repeat(ctrl, nstep, axis=1)


class Engine:
    """Batched MuJoCo on one model: `rollout`, `step`, `forward`, and single-element replays.

    A worker (a `Rollout` thread pool and its `MjData`s, and with MuJoCo 4.0 and later the
    `mujoco.batch` batches of `_batched.BatchSteps`, which step every batch of more than one
    element) serves one call at a time; concurrent calls from several Python threads each take
    a worker of their own from a free list (made on demand), so they never share an `MjData`
    or a batch and need no lock while MuJoCo runs.

    A call runs on MuJoCo's thread pool only when it holds enough physics to pay for the
    pool's dispatch and synchronisation (more on a loaded machine; see docs/performance.md):
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
        self.nsensordata = int(model.nsensordata)  # an MjModel attribute read is a bindings call
        # `model.opt` is a live view: reading `timestep` through it sees later changes too.
        self._opt = model.opt
        self._free: list[Worker] = []
        self._outputs = Outputs(model)
        self.divergence = Divergence(model, self.layout.nstate)
        self.step_seconds = self._measure_step() if self.nthread > 1 else 0.0
        # `stepper`'s functions and their batches, by (B, nstep, threads, rank)
        self._steppers: dict[tuple[int, int, int, int], tuple[StepInto, _batched.Exact | None]]
        self._steppers = {}
        self._loop_steps: BatchSteps | None = None  # the steppers' batches' maker

    def _measure_step(self) -> float:
        """Seconds of one physics step from the initial state: the best of a few rollouts of
        `_MEASURED_STEPS` steps, over that number (a rollout of one step would count the
        call's own cost as physics, which for a small model is most of it)."""
        n = self._MEASURED_STEPS
        with self.worker() as w:
            state, ctrl = self.layout.initial[None], np.zeros((1, n, int(self.model.nu)))
            out = np.empty((1, n, self.layout.nstate))
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                w.serial.rollout(w.models(1), w.first, n, CTRL, state, None, ctrl, out, None)
                best = min(best, time.perf_counter() - t0)
        return best / n

    @contextlib.contextmanager
    def worker(self) -> Iterator[Worker]:
        w = self._take()
        try:
            yield w
        finally:
            self._free.append(w)

    def _take(self) -> Worker:
        # list.pop and list.append are atomic under the GIL: no lock needed for the free list.
        try:
            return self._free.pop()
        except IndexError:
            return Worker(self.model, self.nthread)

    def uses_pool(self, B: int, N: int) -> bool:
        """Whether a call of `B` elements of `N` physics steps runs on the thread pool."""
        return self.nthread > 1 and B > 1 and B * N * self.step_seconds >= self.POOL_MIN_WORK

    def batched(self) -> bool:
        """Whether batches run on `mujoco.batch`: MuJoCo 4.0 and later, and a model that may
        share an `MjData` between simulations (not one with sleep or IPC enabled; read on
        every call, as the model may change)."""
        return _batched.available() and not self._opt.enableflags & ONE_DATA_EACH

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

    def stepper(self, B: int, nstep: int, rank: int = 2) -> StepInto:
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
    ) -> tuple[StepInto, _batched.Exact | None]:
        general = self._general_stepper(B, nstep, threads, rank)
        if not self.batched():  # `mujoco.batch` refuses a model with sleep or IPC enabled:
            return general, None  # one made so keeps the general path, which reads them
        if self._loop_steps is None:
            self._loop_steps = BatchSteps(self.model, self.nthread)
        nstate, nu = self.layout.nstate, int(self.model.nu)
        return make_stepper(
            general,
            self._loop_steps,
            self.divergence.flags,
            self._opt,
            nstate,
            nu,
            B,
            nstep,
            threads,
            rank,
        )

    def _general_stepper(self, B: int, nstep: int, threads: int, rank: int) -> StepInto:
        """`stepper`'s function off its own batch: a worker's `mujoco.batch` batch (made on
        demand), or `mujoco.rollout` where there is none."""
        step_one, rollout_into, flags = self.step_one, self._rollout_into, self.divergence.flags
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

        return general

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
        trajectory live in buffers of the worker's own. The checks are
        `Divergence.diverged_one`'s.
        """
        w = self._take()
        try:
            if nstep == 1:
                w.serial.rollout(w.one, w.first, 1, CTRL, state, None, ctrl, out, None)
            else:
                full, trajectory = w.step_buffers(1, nstep, self.layout.nstate)
                full[0] = ctrl  # held for every physics step
                w.serial.rollout(w.one, w.first, nstep, CTRL, state, None, full, trajectory, None)
                out[0] = trajectory[0, -1]
            return self.divergence.diverged_one(w, state, ctrl, out.item(0), nstep)
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
                diverged = self.divergence.flags(warned, state, full)
            else:
                diverged = self._run_on(w, state, full, full, N, out_state, out_sensor, warmstart)
        finally:
            self._free.append(w)
        return np.zeros(state.shape[0], bool) if diverged is None else diverged

    def _run_on(
        self,
        w: Worker,
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
            CTRL,
            state,
            warmstart,
            full,
            out_state,
            out_sensor,
        )
        if B == 1:  # the closed loop's most common call: no NumPy calls at all
            t_out = out_state.item((N - 1) * out_state.shape[2])  # the last step's time
            return np.array([self.divergence.diverged_one(w, state, ctrl, t_out, N)])
        return self.divergence.diverged(w, parallel, state, full, ctrl, out_state, N, warmstart)

    def reset(self, d: MjData, state: np.ndarray, ctrl: np.ndarray | None = None) -> None:
        """Puts `d` in exactly the condition `mujoco.rollout` starts an element from."""
        reset_data(self.model, d, state, ctrl)

    # -- forward -------------------------------------------------------------------------

    def output_specs(
        self, names: Sequence[str], max_contacts: int
    ) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Shapes (per element) and dtypes of the named `forward` outputs, in order."""
        return self._outputs.specs(names, max_contacts)

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
        with self.worker() as w:
            return self._outputs.forward(w, state, ctrl, names, max_contacts)
