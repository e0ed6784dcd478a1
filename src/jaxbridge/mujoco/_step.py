"""`sim.step`'s host side: its host function, its Jacobian, and its batching (a batch of steps
as one engine call, into XLA's output buffer).

The closed loop (`sim.step` in a `lax.scan`) makes one host call per scan step, so its host
side is a hot path: this strategy runs the engine on XLA's own buffers, and for float64 states
and controls under at most one `vmap` hands `buffer_callback` a function of its own.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import jaxbridge

from .._base import AbstractBatching
from .._batching import VECTORIZED, flatten_batch
from . import _derivatives
from ._state import flat

if TYPE_CHECKING:
    from .._base import AbstractCall as HostCall
    from ._core import SimCore
    from ._engine import Engine

__all__ = ["StepBatching", "StepCalls"]


def _plain_float64(x: np.ndarray) -> bool:
    """Whether `x` is C-contiguous float64, as `Engine.step_one` takes its arrays."""
    return x.dtype == np.float64 and x.flags.c_contiguous


class StepBatching(AbstractBatching):
    """A batch of `step`s as one engine call, written straight into XLA's output buffer.

    The generic `"vectorized"` strategy calls the host function and then copies and checks its
    result; `step` is the hot path of a closed loop (one call per `lax.scan` step), so here
    MuJoCo writes the next states into the output buffer itself (with `nstep == 1` and float64).
    """

    name = "vectorized"

    def __init__(self, engine: Engine, nstep: int, step: Callable[..., Any]):
        self.engine = engine
        self.nstep = nstep
        self.nstate = engine.layout.nstate
        self.step = step  # the host function this strategy runs; others (its Jacobian) are
        # batched as `"vectorized"` batches them

    def run(
        self,
        call: HostCall,
        batch: tuple[int, ...],
        ins: Sequence[np.ndarray],
        outs: Sequence[np.ndarray],
    ) -> None:
        if call.fn is not self.step:
            VECTORIZED.run(call, batch, ins, outs)
            return
        state, ctrl = ins
        out = outs[0]
        B = batch[0] if len(batch) == 1 else math.prod(batch)
        buffers = len(batch) == 1 and state.shape[0] == B and ctrl.shape[0] == B
        if not buffers:  # broadcast or nested batch dimensions: flatten them
            state, ctrl = flatten_batch(state, 1, batch), flatten_batch(ctrl, 1, batch)
            out = out.view()
            out.shape = (B, self.nstate)  # raises rather than copy: XLA's buffers are dense
        direct = out.dtype == np.float64  # `state` and `out` share a dtype, and so does `ctrl`
        if buffers and B == 1 and direct and ctrl.dtype == np.float64:
            # XLA's own (C-contiguous float64) buffers, one element.
            if self.engine.step_one(state, ctrl, out, self.nstep):
                out[...] = np.nan  # see below
            return
        if direct and ctrl.dtype == np.float64:
            diverged = self.engine.step_into(state, ctrl, self.nstep, out)
        else:
            next_state, flags = self.engine.step(state, ctrl, self.nstep)
            out[...] = next_state
            diverged = flags if flags.any() else None
        # MuJoCo resets a diverging element to its initial state: a plausible-looking state
        # that is wrong. NaN cannot pass for a real state, and spares the other elements.
        if diverged is not None:
            out[diverged] = np.nan

    def buffer_call(
        self, call: HostCall, in_shapes: Sequence[tuple], out_shapes: Sequence[tuple]
    ) -> Callable[..., None] | None:
        """The closed loop's own `buffer_callback` function, for a `step` of float64 states
        and controls under at most one `vmap` of both (one call per `lax.scan` step).

        `HostCall`'s generic call makes its inputs read-only and checks that no reference to
        them outlives it, guards for a user's code that a closed loop pays on every call; the
        engine's own code here copies its inputs into MuJoCo and keeps nothing. What runs is
        `run`'s: MuJoCo writes into XLA's output buffer, a diverged element comes back NaN,
        and an error is raised as `HostCall` raises it.
        """
        if call.fn is not self.step or len(in_shapes) != 2 or len(out_shapes) != 1:
            return None
        if any(np.dtype(a.dtype) != np.float64 for a in (*call.in_avals, *call.spec.avals)):
            return None
        (s_shape, u_shape), (o_shape,) = in_shapes, out_shapes
        rank = len(s_shape)  # 1: a `lax.scan` of `sim.step` without `vmap`; 2: one `vmap`
        if (
            rank not in (1, 2)
            or len(u_shape) != rank
            or (rank == 2 and not u_shape[0] == s_shape[0] >= 1)
        ):
            return None  # broadcast controls, nested or empty batches: `run` takes them
        assert tuple(o_shape) == tuple(s_shape)
        B = s_shape[0] if rank == 2 else 1
        step, fail = self.engine.stepper(B, self.nstep, rank), call.fail

        def own(ctx: Any, outs: Any, state: Any, ctrl: Any) -> None:
            del ctx
            try:
                out = outs[0].__array__()
                diverged = step(state.__array__(), ctrl.__array__(), out)
                if diverged is not None:  # flags of a batch; any flag of one element is it
                    out[diverged if rank == 2 else ...] = np.nan
            except Exception as e:
                raise fail(e) from e

        return own


class StepCalls:
    """The host functions behind one `Simulator`'s `step`, one per `nstep`, with their
    Jacobians and `StepBatching`. The simulator's engine and `derivatives` are read on every
    call, as `Simulator`'s own methods read them.
    """

    def __init__(self, core: SimCore):
        self._core = core
        # One host function per `nstep`, with `nstep` bound rather than static: positional
        # array arguments take the host call's fast path (no argument rebuilding per call).
        self._hosts: dict[int, Callable[..., Any]] = {}

    def __repr__(self) -> str:  # host errors name the bound host function by its repr
        return f"StepCalls({self._core!r})"

    def host(self, nstep: int) -> Callable[..., Any]:
        """The host function of `nstep` physics steps, made once per `nstep`."""
        f = self._hosts.get(nstep)
        if f is None:
            step = functools.partial(self._host_step, nstep=nstep)
            f = self._hosts[nstep] = jaxbridge.host(
                step,
                vmap=StepBatching(self._core.engine, nstep, step),
                result=lambda state, ctrl: state,
                jacobian=functools.partial(self._host_step_jacobian, nstep=nstep),
            )
        return f

    def _host_step(self, state: np.ndarray, ctrl: np.ndarray, nstep: int) -> np.ndarray:
        core = self._core
        if state.ndim == 1 and _plain_float64(state) and _plain_float64(ctrl):
            # Unbatched (`lax.scan` of `sim.step` without vmap): the one-element fast path.
            out = np.empty((1, core.nstate))
            if core.engine.step_one(state[None], ctrl[None], out, nstep):
                out[...] = np.nan  # see below
            return out[0]
        if state.ndim == 2:  # under one vmap (the common case): no reshapes needed
            out, diverged = core.engine.step(state, ctrl, nstep)
        else:
            out, diverged = core.engine.step(flat(state), flat(ctrl), nstep)
            out = out.reshape(state.shape)
            diverged = diverged.reshape(state.shape[:-1])
        # MuJoCo resets a diverging element to its initial state: a plausible-looking state
        # that is wrong. NaN cannot pass for a real state, and spares the other elements.
        if diverged.any():
            out[diverged] = np.nan
        return out

    def _host_step_jacobian(self, state: np.ndarray, ctrl: np.ndarray, nstep: int):
        core = self._core
        n, nu = core.nstate, core.nu
        lead = state.shape[:-1]
        state, ctrl = flat(state), flat(ctrl)
        Jx, Ju, _, _ = _derivatives.step_jacobians(
            core.engine, core.qmap, state, ctrl, nstep, method=core.derivatives
        )
        # Where the step itself diverged (its value is NaN), so are its derivatives: the
        # differences around a reset or a rejected control are finite and mean nothing. One
        # more step per element, next to the 2 n + 1 of the differences.
        diverged = core.engine.step(state, ctrl, nstep)[1]
        Jx[diverged], Ju[diverged] = np.nan, np.nan
        return Jx.reshape((*lead, n, n)), Ju.reshape((*lead, n, nu))
