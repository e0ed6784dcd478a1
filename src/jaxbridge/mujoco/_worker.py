"""A worker: one host call's `MjData`s, `mujoco.rollout` runners and `mujoco.batch` batches.

`Engine` keeps a free list of these; a call takes one, so concurrent calls never share an
`MjData` and need no lock while MuJoCo runs.
"""

from __future__ import annotations

import os
from typing import Protocol, cast

import numpy as np

from ._batched import BatchSteps
from ._model import MjData, MjModel, mj
from ._state import FULLPHYSICS

__all__ = [
    "CTRL",
    "ONE_DATA_EACH",
    "NativeRollout",
    "Worker",
    "any_warning",
    "default_nthread",
    "native_rollout",
    "reset_data",
]

import mujoco._rollout as _rollout_native  # noqa: E402  (after the guarded import in `_model`)

# Models with these enabled need one `MjData` per simulation (`mujoco.batch` refuses them
# without `persistent=True`): they keep the `mujoco.rollout` paths.
ONE_DATA_EACH = sum(
    int(getattr(mj.mjtEnableBit, name, 0)) for name in ("mjENBL_SLEEP", "mjENBL_IPC")
)
CTRL = int(mj.mjtState.mjSTATE_CTRL)  # mujoco.rollout's control_spec: controls only
_KEPT_BUFFER_BYTES = 1 << 20  # step buffers up to this size are kept by a worker for reuse


class NativeRollout(Protocol):
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


def native_rollout(nthread: int) -> NativeRollout:
    return cast("NativeRollout", _rollout_native.Rollout(nthread=nthread))


def any_warning(d: MjData) -> bool:
    """Whether any of `d`'s warning counters is set (`mujoco.rollout` clears them per element)."""
    return bool(d.warning.number.any())


def reset_data(model: MjModel, d: MjData, state: np.ndarray, ctrl: np.ndarray | None) -> None:
    """Puts `d` in exactly the condition `mujoco.rollout` starts an element from."""
    mj.mj_resetData(model, d)
    mj.mj_setState(model, d, state, FULLPHYSICS)
    if ctrl is not None:
        d.ctrl[:] = ctrl


def default_nthread() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Worker:
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
        # one-element call (a list's `any` of it is cheaper than NumPy's on so few numbers).
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
        call (the pool's threads write them), which a closed loop would pay on every step.
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
