"""The closed loop's step: `Engine.stepper`'s functions, one `mujoco.batch` step per call.

`sim.step` in a `lax.scan` makes one host call per scan step, so the host side's own cost is
the loop's: a function made here, once per shape, does nothing on each call but copy the
inputs into a batch of its own, step it, copy the result out and check it, in the fewest
Python operations this takes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from . import _batched
from ._batched import NO_STAGE, BatchSteps
from ._state import DOT_BLOCK, MAXVAL2, sum_of_squares
from ._worker import ONE_DATA_EACH

if TYPE_CHECKING:
    from ._engine import Engine

__all__ = ["StepInto", "make_stepper"]

_SMALL_ROWS = 4096  # `mujoco.batch` rows of at most this many numbers are checked in one pass
_ONE_DIVERGED = np.ones(1, bool)  # the flags of a one-element call that diverged
_ONE_DIVERGED.flags.writeable = False

#: `Engine.stepper`'s functions: `(state, ctrl, out)` to the `(B,)` flags, or None.
StepInto = Callable[[np.ndarray, np.ndarray, np.ndarray], "np.ndarray | None"]


def make_stepper(
    engine: Engine, B: int, nstep: int, threads: int, rank: int
) -> tuple[StepInto, _batched.Exact | None]:
    """`Engine.stepper`'s function, and the batch it steps (None where it has none).

    On `mujoco.batch` (where MuJoCo has it and the model allows it: `Batch.step` refuses
    a model with sleep or IPC enabled since, and the general path takes over) it steps a
    batch of its own, in the fewest Python operations this takes: after MuJoCo's step has
    filled the caches, each costs a microsecond or more. Called from two threads at once,
    the second takes the general path (a worker's batch, made on demand), as it does for
    a model whose rows cannot be written in one copy (a plugin's state apart).
    """
    step_one, rollout_into, flags = engine.step_one, engine._rollout_into, engine.divergence.flags
    free, take, batched = engine._free, engine._take, engine.batched

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
    if engine._loop_steps is None:
        engine._loop_steps = BatchSteps(engine.model, engine.nthread)
    steps = engine._loop_steps
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
    one_dot = B * max(engine.layout.nstate, int(engine.model.nu)) <= DOT_BLOCK
    inputs = steps._inputs if steps._has_inputs else None
    opt, lock = engine._opt, threading.Lock()
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
                    if opt.enableflags & ONE_DATA_EACH:  # `mujoco.batch` refuses these:
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
