"""The closed loop's step: `Engine.stepper`'s functions, one `mujoco.batch` step per call.

`sim.step` in a `lax.scan` makes one host call per scan step, so the host side's own cost is
the loop's: a function made here, once per shape, does nothing on each call but copy the
inputs into a batch of its own, step it, copy the result out and check it, in the fewest
Python operations this takes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _batched
from ._batched import NO_STAGE, BatchSteps
from ._state import DOT_BLOCK, MAXVAL2, sum_of_squares
from ._worker import ONE_DATA_EACH

__all__ = ["Flags", "StepInto", "make_stepper"]

_SMALL_ROWS = 4096  # `mujoco.batch` rows of at most this many numbers are checked in one pass

#: `Engine.stepper`'s functions: `(state, ctrl, out)` to the `(B,)` flags, or None.
StepInto = Callable[[np.ndarray, np.ndarray, np.ndarray], "np.ndarray | None"]
#: `Divergence.flags`: `(warned, state, ctrl)` to the `(B,)` flags, or None.
Flags = Callable[[Any, np.ndarray, np.ndarray], "np.ndarray | None"]


def make_stepper(
    general: StepInto,
    steps: BatchSteps,
    flags: Flags,
    opt: Any,
    nstate: int,
    nu: int,
    B: int,
    nstep: int,
    threads: int,
    rank: int,
) -> tuple[StepInto, _batched.Exact | None]:
    """`Engine.stepper`'s function on `mujoco.batch`, and the batch it steps (None where it
    has none, and `general` is the function).

    Args:
        general: the engine's general path for the same call (a worker's batch, or
            `mujoco.rollout`), taken when this function is called from two threads at
            once, and where `opt` enables sleep or IPC since it was made.
        steps: the `BatchSteps` whose `dedicated` batch this function steps.
        flags: `Divergence.flags`, which tells the elements that diverged.
        opt: the model's `opt` (a live view: its flags are read on a failure).
        nstate, nu: the state's and the controls' sizes.
        B, nstep, threads, rank: the call's batch, physics steps, threads, and the rank of
            its arrays (1: one element without a batch dimension).

    It steps a batch of its own in the fewest Python operations this takes: after MuJoCo's
    step has filled the caches, each one costs more than it would cold (see
    docs/performance.md). A model whose rows cannot be written in one copy (a plugin's state
    apart) takes `general`.
    """
    e = steps.dedicated(B, threads)
    if e.head is None or e.zeros is None or e.full is None:
        return general, None
    rows, batch, warning, clear = e.rows, e.batch, e.warning, e.clear
    head, zeros, full = (
        (e.head[0], e.zeros[0], e.full[0]) if rank == 1 else (e.head, e.zeros, e.full)
    )
    axis = rank - 1
    # The check below sums the squares of the rows (one `np.vdot`) where they are small,
    # else of the inputs (two, a third of the numbers for a humanoid), whichever the loop
    # measured cheaper at its batch size (docs/performance.md). `np.vdot` flattens; past
    # `DOT_BLOCK` numbers OpenBLAS would thread it, and `sum_of_squares` takes blocks.
    flat = rows.reshape(-1) if rows.size <= _SMALL_ROWS else None  # a view: rows stay put
    one_dot = B * max(nstate, nu) <= DOT_BLOCK
    inputs = steps.write_inputs if steps.has_inputs else None
    lock = threading.Lock()
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
