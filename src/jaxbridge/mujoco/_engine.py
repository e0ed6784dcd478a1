"""The host side: batched steps, rollouts and `mj_forward` on MuJoCo's own C thread pool.

Everything here takes and returns float64 NumPy arrays with the batch as the leading dimension,
and knows nothing of JAX; `_simulator.py` wraps it with `jaxbridge.host`.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator, Sequence
from typing import Protocol, cast

import numpy as np

from ._model import MjData, MjModel, mj
from ._state import FULLPHYSICS, Layout

__all__ = ["Engine", "DEFAULT_OUTPUTS"]

import mujoco._rollout as _rollout_native  # noqa: E402  (after the guarded import in `_model`)

DEFAULT_OUTPUTS = ("xpos", "xquat", "site_xpos", "sensordata", "contact_dist")

# MjData arrays whose size changes with the number of active constraints: no fixed shape.
_DYNAMIC_PREFIXES = ("efc_", "iefc_", "map_efc2iefc", "map_iefc2efc", "island_", "efm_")

_add_reduce = np.add.reduce  # `ndarray.sum` without its Python wrapper (this runs every step)

_CTRL = int(mj.mjtState.mjSTATE_CTRL)  # mujoco.rollout's control_spec: controls only


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


def _warned(d: MjData) -> bool:
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
        self.pool = _native_rollout(nthread) if nthread > 1 else None
        self.serial = _native_rollout(0)  # runs on the calling thread, GIL released
        self._models: dict[int, list[MjModel]] = {}
        self._model = model
        self._step_buffers: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def step_buffers(self, nstep: int, nstate: int) -> tuple[np.ndarray, np.ndarray]:
        """`(1, nstep, nu)` controls and `(1, nstep, nstate)` states for `Engine.step_one`."""
        buffers = self._step_buffers.get(nstep)
        if buffers is None:
            nu = int(self._model.nu)
            buffers = self._step_buffers[nstep] = (
                np.empty((1, nstep, nu)),
                np.empty((1, nstep, nstate)),
            )
        return buffers

    def models(self, B: int) -> list[MjModel]:
        """`[model] * B`, made once per batch size (the C++ side wants one model per element)."""
        models = self._models.get(B)
        if models is None:
            models = self._models[B] = [self._model] * B
        return models


def _native_rollout(nthread: int) -> _NativeRollout:
    return cast("_NativeRollout", _rollout_native.Rollout(nthread=nthread))


def _time_after(t0: np.ndarray, dt: float, N: int) -> np.ndarray:
    """`t0` after `N` additions of `dt`, rounded at each addition exactly as MuJoCo's
    `d->time += timestep` (or RK4's `time + h`) rounds it.

    `np.add.accumulate` is that same left-to-right recurrence, so the result is bit for bit
    MuJoCo's, in a fixed number of NumPy calls whatever `N` is.
    """
    if N == 1:
        return t0 + dt
    terms = np.empty((t0.shape[0], N + 1))
    terms[:, 0] = t0
    terms[:, 1:] = dt
    return np.add.accumulate(terms, axis=1)[:, -1]


class Engine:
    """Batched MuJoCo on one model: `rollout`, `step`, `forward`, and single-element replays.

    A `Rollout` thread pool and its `MjData`s serve one call at a time; concurrent calls from
    several Python threads each take a worker of their own from a free list (made on demand),
    so they never share an `MjData` and need no lock while MuJoCo runs.

    A call runs on MuJoCo's thread pool only when it holds enough physics to pay for the
    pool's dispatch and synchronisation (tens of microseconds, more on a loaded machine):
    the cost of one physics step is measured once, and a call of `B` elements of `N` steps
    goes to the pool when `B * N` steps are estimated at `POOL_MIN_WORK` seconds or more.
    Either path gives bit-identical results: every element starts from a fresh state.
    """

    #: Estimated seconds of physics per call below which the serial path is used.
    POOL_MIN_WORK = 200e-6

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

    def _measure_step(self) -> float:
        """Seconds of one physics step from the initial state (the best of a few)."""
        with self.worker() as w:
            state, ctrl = self.layout.initial[None], np.zeros((1, 1, int(self.model.nu)))
            out = np.empty((1, 1, self.layout.nstate))
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                w.serial.rollout(w.models(1), w.first, 1, _CTRL, state, None, ctrl, out, None)
                best = min(best, time.perf_counter() - t0)
        return best

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
            flags, true where MuJoCo warned (bad qpos/qvel/qacc, full contact buffer) and so
            reset or stopped that element's simulation, or where the input was not finite (a
            warning that neither resets nor stops, in the last physics step, is seen only from
            time 0).
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
        """The state after `nstep` physics steps with `ctrl` held: the hot path of `sim.step`.

        Args:
            state: `(B, nstate)` states.
            ctrl: `(B, nu)` controls.
            nstep: physics steps (>= 1).
            out: where to write the `(B, nstate)` next states (C-contiguous float64), or None.
                With `nstep == 1` MuJoCo writes into it directly.

        Returns:
            `(next_state, diverged)`: `(B, nstate)` and `(B,)`, as `rollout`'s last state and
            flags (no sensor values are copied out).
        """
        state = _float64(state)
        B, n = state.shape
        full = _float64(ctrl)[:, None]
        if nstep > 1:  # mujoco.rollout takes one control per physics step
            full = np.repeat(full, nstep, axis=1)
        if out is not None and not (out.dtype == np.float64 and out.flags.c_contiguous):
            # MuJoCo's bindings would write into a converted copy: go through our own array.
            next_state, diverged = self.step(state, ctrl, nstep)
            out[...] = next_state
            return out, diverged
        if out is not None and nstep == 1:
            trajectory = out[:, None]  # a view: MuJoCo writes the next states into `out`
        else:
            trajectory = np.empty((B, nstep, n))
        if B == 0:
            return trajectory[:, -1], np.zeros(0, bool)
        diverged = self._run(state, full, nstep, trajectory, None)
        if out is None:
            return trajectory[:, -1], diverged
        if nstep > 1:
            out[...] = trajectory[:, -1]
        return out, diverged

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
                full, trajectory = w.step_buffers(nstep, self.layout.nstate)
                full[0] = ctrl  # held for every physics step
                w.serial.rollout(w.one, w.first, nstep, _CTRL, state, None, full, trajectory, None)
                out[0] = trajectory[0, -1]
            dt = self._opt.timestep
            t_out = out.item(0)
            values = state.tolist()[0]  # Python floats: cheaper here than any NumPy call
            expected = values[0]
            for _ in range(nstep):
                expected += dt
            if t_out != expected:  # NaN compares unequal too
                return True
            # Python's sum of two short lists costs less than one NumPy reduction; a sum is
            # finite only if every term is, and an overflowing one is sorted out exactly.
            if not math.isfinite(sum(values, sum(ctrl.tolist()[0]))) and not (
                np.isfinite(state).all() and np.isfinite(ctrl).all()
            ):
                return True
            # One element always runs serially, on `w.first[0]`: its counters are this element's.
            return t_out == dt and _warned(w.first[0])
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
        """One `mujoco.rollout` of `N` steps per element into the outputs; the flags."""
        B = state.shape[0]
        w = self._take()
        try:
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
                return np.array([self._diverged_one(w, state, full, t_out, N)])
            return self._diverged(w, parallel, state, full, out_state[:, -1, 0], N)
        finally:
            self._free.append(w)

    def _diverged(
        self,
        w: _Worker,
        parallel: bool,
        state: np.ndarray,
        full: np.ndarray,
        t_out: np.ndarray,
        N: int,
    ) -> np.ndarray:
        # mujoco.rollout stops an element at its first warning (filling the rest with the state
        # it stopped at), and the divergence warnings also reset it to time 0, so its final time
        # is not the time N steps on. (Few NumPy calls: this runs on every step.)
        dt = self._opt.timestep
        expected = _time_after(state[:, 0], dt, N)
        diverged = t_out != expected  # NaN compares unequal too
        # A sum is finite only if every term is; an overflowing sum is sorted out exactly.
        if not math.isfinite(_add_reduce(state, None) + _add_reduce(full, None)):
            diverged |= ~(np.isfinite(state).all(axis=1) & np.isfinite(full).all(axis=(1, 2)))
        # A reset at the only step from time 0 ends at time dt too, as a healthy step does:
        # MuJoCo's warning counters (cleared at the start of each element) decide those.
        ambiguous = t_out == dt
        if ambiguous.any():
            ambiguous &= ~diverged
            last = state.shape[0] - 1
            if not parallel and ambiguous[last]:  # the serial path's MjData ran this one last
                diverged[last] = _warned(w.first[0])  # (read before any replay reuses it)
                ambiguous[last] = False
            for i in np.flatnonzero(ambiguous):
                diverged[i] = self._replay_warns(w, state[i], full[i])
        return diverged

    def _diverged_one(
        self, w: _Worker, state: np.ndarray, full: np.ndarray, t_out: float, N: int
    ) -> bool:
        """`_diverged` of a batch of one, in Python floats (the same IEEE double additions)."""
        dt = self._opt.timestep
        expected = state.item(0)
        for _ in range(N):
            expected += dt
        if t_out != expected:  # NaN compares unequal too
            return True
        # Python's sum of a short list costs less than one NumPy reduction.
        finite_sum = math.isfinite(sum(state.ravel().tolist()) + sum(full.ravel().tolist()))
        if not finite_sum and not (np.isfinite(state).all() and np.isfinite(full).all()):
            return True
        # One element always runs serially, on `w.first[0]`: its counters are this element's.
        return t_out == dt and _warned(w.first[0])

    def _replay_warns(self, w: _Worker, state: np.ndarray, full: np.ndarray) -> bool:
        """Whether MuJoCo warns when it rolls out this one element (on the calling thread)."""
        out = np.empty((1, full.shape[0], self.layout.nstate))
        w.serial.rollout(
            w.models(1), w.first, full.shape[0], _CTRL, state[None], None, full[None], out, None
        )
        return _warned(w.first[0])

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
        `ncon` is the number MuJoCo found (it may exceed `max_contacts`).
        """
        m = self.model
        specs = self.output_specs(names, max_contacts)
        state = np.ascontiguousarray(state, dtype=np.float64)
        B = state.shape[0]
        out = {name: np.zeros((B, *shape), dtype) for name, (shape, dtype) in specs.items()}
        plain = [n for n in specs if n in self._data_shapes]
        contact = [n for n in specs if n.startswith("contact_")]
        with self.worker() as w:
            d = w.datas[0]
            # A serial loop: mj_forward is ~10 µs, and splitting it over Python threads
            # measured no faster (the bindings' per-call overhead holds the GIL).
            for i in range(B):
                self.reset(d, state[i], ctrl[i])
                mj.mj_forward(m, d)
                for name in plain:
                    out[name][i] = getattr(d, name)
                if "ncon" in out:
                    ncon = d.ncon
                    out["ncon"][i] = ncon
                    k = min(ncon, max_contacts)
                    for name in contact:
                        out[name][i, :k] = getattr(d.contact, name[8:])[:k]
        return out
