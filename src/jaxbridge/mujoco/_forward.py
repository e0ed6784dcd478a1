"""`Simulator.forward`'s host call: named `MjData` arrays after `mj_forward`, and their
Jacobians (analytic for kinematics, differences otherwise; see `_jacobians`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

import jaxbridge

from . import _jacobians
from ._state import flat

if TYPE_CHECKING:
    from ._core import SimCore

__all__ = ["ForwardCalls"]


class ForwardCalls:
    """The host call behind one `Simulator`'s `forward`: `host(state, ctrl, names=...)`, a
    dict of the named outputs, with its Jacobian rule. The simulator's engine and
    `max_contacts` are read on every call, as `Simulator`'s own methods read them.
    """

    def __init__(self, core: SimCore):
        self._core = core
        self.host = jaxbridge.host(
            self._host_forward,
            vmap="vectorized",
            static_argnames=("names",),
            result=self._forward_result,
            jacobian=self._host_forward_jacobian,
        )

    def _forward_result(self, state, ctrl, names):
        core = self._core
        lead = state.shape[:-1]
        return {
            name: jax.ShapeDtypeStruct(
                (*lead, *shape), state.dtype if np.issubdtype(dtype, np.floating) else jnp.int32
            )
            for name, (shape, dtype) in core.engine.output_specs(names, core.max_contacts).items()
        }

    def _host_forward(self, state: np.ndarray, ctrl: np.ndarray, names: tuple[str, ...]):
        core = self._core
        lead = state.shape[:-1]
        out = core.engine.forward(flat(state), flat(ctrl), names, core.max_contacts)
        return {
            k: (v if np.issubdtype(v.dtype, np.floating) else v.astype(np.int32)).reshape(
                (*lead, *v.shape[1:])
            )
            for k, v in out.items()
        }

    def _host_forward_jacobian(self, state: np.ndarray, ctrl: np.ndarray, names):
        core = self._core
        lead = state.shape[:-1]
        state, ctrl = flat(state), flat(ctrl)
        jac = _jacobians.forward_jacobian(
            core.engine, core.qmap, state, ctrl, names, core.max_contacts
        )
        # A control MuJoCo replaces by zero makes the outputs NaN (see `Engine.forward`): the
        # derivatives of the zero-control model must not pass for theirs.
        rejected = core.engine.divergence.rejected_controls(ctrl)
        if rejected.any():
            for blocks in jac.values():
                for b in blocks:
                    b[rejected] = np.nan
        return {
            k: tuple(b.reshape((*lead, *b.shape[1:])) for b in blocks) for k, blocks in jac.items()
        }
