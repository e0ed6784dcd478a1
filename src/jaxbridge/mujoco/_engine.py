"""The host side: batched steps, rollouts and `mj_forward` on MuJoCo's own C thread pool.

Everything here takes and returns float64 NumPy arrays with the batch as the leading dimension,
and knows nothing of JAX; `_simulator.py` wraps it with `jaxbridge.host`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence

import numpy as np

from ._model import mujoco
from ._state import FULLPHYSICS, Layout

__all__ = ["Engine", "DEFAULT_OUTPUTS"]

import mujoco.rollout as _rollout  # noqa: E402  (after the guarded import in `_model`)

DEFAULT_OUTPUTS = ("xpos", "xquat", "site_xpos", "sensordata", "contact_dist")

# MjData arrays whose size changes with the number of active constraints: no fixed shape.
_DYNAMIC_PREFIXES = ("efc_", "iefc_", "map_efc2iefc", "map_iefc2efc", "island_", "efm_")


def default_nthread() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class _Worker:
    """A thread pool with one `MjData` per thread; used by one host call at a time."""

    def __init__(self, model: mujoco.MjModel, nthread: int):
        self.datas = [mujoco.MjData(model) for _ in range(max(1, nthread))]
        self.pool = _rollout.Rollout(nthread=nthread) if nthread > 1 else None
        self.serial = _rollout.Rollout(nthread=0)  # runs on the calling thread, GIL released


class Engine:
    """Batched MuJoCo on one model: `rollout`, `forward`, and single-element replays.

    A `Rollout` thread pool and its `MjData`s serve one call at a time; concurrent calls from
    several Python threads each take a worker of their own from a free list (made on demand),
    so they never share an `MjData` and need no lock while MuJoCo runs.
    """

    def __init__(self, model: mujoco.MjModel, nthread: int | None = None):
        if nthread is not None and (not isinstance(nthread, int) or nthread < 0):
            raise ValueError(
                f"`Simulator(nthread=...)` must be a non-negative int or None; got {nthread!r}."
            )
        self.model = model
        self.nthread = default_nthread() if nthread is None else nthread
        self.layout = Layout.from_model(model)
        self.nsensordata = int(model.nsensordata)  # MjModel attribute reads cost microseconds
        self._free: list[_Worker] = []
        self._lock = threading.Lock()
        probe = mujoco.MjData(model)
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

    @contextlib.contextmanager
    def worker(self) -> Iterator[_Worker]:
        with self._lock:
            w = self._free.pop() if self._free else None
        if w is None:
            w = _Worker(self.model, self.nthread)
        try:
            yield w
        finally:
            with self._lock:
                self._free.append(w)

    # -- stepping ------------------------------------------------------------------------

    def rollout(
        self, state: np.ndarray, ctrl: np.ndarray, nstep: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rolls out `T` controls, each held for `nstep` physics steps.

        Args:
            state: `(B, nstate)` initial states.
            ctrl: `(B, T, nu)` controls.
            nstep: physics steps per control.

        Returns:
            `(states, sensordata, diverged)`: `(B, T, nstate)` states after each control,
            `(B, T, nsensordata)` sensor values of the last physics step of each, and `(B,)`
            flags, true where MuJoCo warned (bad qpos/qvel/qacc, full contact buffer) and so
            reset or stopped that element's simulation, or where the input was not finite.
        """
        m, nstate = self.model, self.layout.nstate
        state = np.ascontiguousarray(state, dtype=np.float64)
        ctrl = np.asarray(ctrl, dtype=np.float64)
        B, T = ctrl.shape[:2]
        # mujoco.rollout takes one control per physics step: hold each for `nstep` steps.
        full = np.ascontiguousarray(np.repeat(ctrl, nstep, axis=1) if nstep > 1 else ctrl)
        N = T * nstep
        out_state = np.empty((B, N, nstate))
        out_sensor = np.empty((B, N, self.nsensordata))
        if B == 0 or N == 0:
            return (
                out_state[:, nstep - 1 :: max(nstep, 1)],
                out_sensor[:, nstep - 1 :: max(nstep, 1)],
                np.zeros(B, bool),
            )
        with self.worker() as w:
            parallel = w.pool is not None and B > 1
            runner = w.pool if parallel else w.serial
            assert runner is not None
            # skip_checks: the shapes were checked at trace time, and mujoco.rollout's own
            # checks and tiling cost more than the step for small models.
            runner.rollout(
                [m] * B,
                w.datas if parallel else w.datas[:1],
                state,
                full,
                nstep=N,
                skip_checks=True,
                state=out_state,
                sensordata=out_sensor,
            )
        diverged = self._diverged(state, full, out_state[:, -1, 0], N)
        return out_state[:, nstep - 1 :: nstep], out_sensor[:, nstep - 1 :: nstep], diverged

    def _diverged(self, state: np.ndarray, full: np.ndarray, t_out: np.ndarray, N: int):
        # mujoco.rollout stops an element at its first warning (filling the rest with the state
        # it stopped at), and the divergence warnings also reset it to time 0, so its final time
        # is not the time N steps on. MuJoCo advances time by repeated addition of the timestep,
        # which this loop reproduces bit for bit. (Few NumPy calls: this runs on every step.)
        dt = self.model.opt.timestep
        expected = state[:, 0].copy()
        for _ in range(N):
            expected += dt
        diverged = t_out != expected  # NaN compares unequal too
        diverged |= ~(np.isfinite(state).all(axis=1) & np.isfinite(full).all(axis=(1, 2)))
        # A reset at the only step from time 0 ends at time dt too: replay those to be sure.
        ambiguous = (expected == dt) & ~diverged
        if ambiguous.any():
            for i in np.flatnonzero(ambiguous):
                diverged[i] = self._replay_warns(state[i], full[i])
        return diverged

    def _replay_warns(self, state: np.ndarray, full: np.ndarray) -> bool:
        with self.worker() as w:
            d = w.datas[0]
            self.reset(d, state)
            for ctrl in full:
                d.ctrl[:] = ctrl
                mujoco.mj_step(self.model, d)
                if any(w.number for w in d.warning):
                    return True
            return False

    def reset(self, d: mujoco.MjData, state: np.ndarray, ctrl: np.ndarray | None = None) -> None:
        """Puts `d` in exactly the condition `mujoco.rollout` starts an element from."""
        mujoco.mj_resetData(self.model, d)
        mujoco.mj_setState(self.model, d, state, FULLPHYSICS)
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
                    "fixed-size `mujoco.MjData` arrays (e.g. 'xpos', 'qacc', 'sensordata'), "
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
                mujoco.mj_forward(m, d)
                for name in plain:
                    out[name][i] = getattr(d, name)
                if "ncon" in out:
                    ncon = d.ncon
                    out["ncon"][i] = ncon
                    k = min(ncon, max_contacts)
                    for name in contact:
                        out[name][i, :k] = getattr(d.contact, name[8:])[:k]
        return out
