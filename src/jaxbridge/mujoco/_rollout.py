"""`Simulator.rollout`'s host calls and its derivative rule.

The primal is one host call for the whole trajectory (and the whole batch). Its JVP chains
the per-step Jacobians with a `lax.scan` (which reverse mode transposes), taken in one more
host call at the states the primal visited, each from the warm start it had there; where the
solver's warm start is carried from step to step it is part of the chained state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import jaxbridge

from . import _derivatives, _warmstart
from ._state import flat

if TYPE_CHECKING:
    from jaxtyping import Array

    from ._core import SimCore

__all__ = ["RolloutCalls", "Trajectory"]


_WARMSTART_CHANGED = (
    "`Simulator.rollout`'s derivative was traced for a model with the solver's warm start "
    "disabled (`mjDSBL_WARMSTART`), and the flag has been cleared since: the traced derivative "
    "would leave out the warm start's sensitivity. Trace it again (a new `jax.jit`) after "
    "changing `model.opt.disableflags`."
)


def _nan_where(diverged: Array, *tangents: Array) -> tuple[Array, ...]:
    """The tangents, NaN for the elements that diverged (a mask by multiplication: linear in
    the tangents, so reverse mode transposes it). A diverged element's differences are taken
    around a reset or a stopped simulation and mean nothing."""
    return tuple(
        t
        * jnp.where(diverged, jnp.nan, 1.0)
        .astype(t.dtype)
        .reshape(diverged.shape + (1,) * (t.ndim - diverged.ndim))
        for t in tangents
    )


class Trajectory(NamedTuple):
    """What `Simulator.rollout` returns.

    Attributes:
        state: `(*batch, T, nstate)`: the state after each control.
        sensordata: `(*batch, T, nsensordata)`: the sensors of the last physics step of each.
        diverged: `(*batch,)` booleans: MuJoCo warned during this rollout (bad qpos, qvel or
            qacc, usually a diverging simulation, or a full contact buffer), reset or stopped
            it, and repeated the state it stopped at for the remaining steps; or the input held
            NaN or Inf, or a control MuJoCo replaces by zero (beyond 1e10 after clamping). The
            other elements of the batch are unaffected. A warning that does not reset (a full
            buffer) is flagged in any physics step, except, with MuJoCo before 4.0, in the
            last one of a batch on the thread pool (see "Divergence and bad input" in
            docs/mujoco.md).
    """

    state: Array
    sensordata: Array
    diverged: Array


class RolloutCalls:
    """The host calls behind one `Simulator`'s `rollout`, and `call`: the rollout as a
    `jax.custom_jvp` of `(state, ctrls, nstep)` for one element (`Simulator.rollout` maps it
    over the batch), returning `(states, sensordata, diverged)`.

    The simulator's model, engine and `derivatives` are read on every call, as `Simulator`'s
    own methods read them.
    """

    def __init__(self, core: SimCore):
        self._core = core
        self._rollout_host = jaxbridge.host(
            self._host_rollout,
            vmap="vectorized",
            static_argnames=("nstep",),
            result=self._rollout_result,
        )
        self._jacobians_host = jaxbridge.host(
            self._host_jacobians,
            vmap="vectorized",
            static_argnames=("nstep",),
            result=self._jacobians_result,
        )
        self._warm_jacobians_host = jaxbridge.host(
            self._host_warm_jacobians,
            vmap="vectorized",
            static_argnames=("nstep",),
            result=self._warm_jacobians_result,
        )
        self.call = jax.custom_jvp(self._primal, nondiff_argnums=(2,))
        self.call.defjvp(self._jvp)

    def _rollout_result(self, state, ctrls, nstep):
        core = self._core
        T = ctrls.shape[-2]
        lead = state.shape[:-1]
        return (
            jax.ShapeDtypeStruct((*lead, T, core.nstate), state.dtype),
            jax.ShapeDtypeStruct((*lead, T, core.nsensordata), state.dtype),
            jax.ShapeDtypeStruct(lead, jnp.bool_),
        )

    def _host_rollout(self, state: np.ndarray, ctrls: np.ndarray, nstep: int):
        core = self._core
        lead, T = state.shape[:-1], ctrls.shape[-2]
        states, sensors, diverged = core.engine.rollout(flat(state), flat(ctrls, 2), nstep)
        return (
            states.reshape((*lead, T, core.nstate)),
            sensors.reshape((*lead, T, core.nsensordata)),
            diverged.reshape(lead),
        )

    def _primal(self, state, ctrls, nstep):
        return self._rollout_host(state, ctrls, nstep=nstep)

    def _jvp(self, nstep, primals, tangents):
        core = self._core
        state, ctrls = primals
        dstate, dctrls = tangents
        states, sensors, diverged = self.call(state, ctrls, nstep)
        zero = np.zeros(diverged.shape, jax.dtypes.float0)
        if ctrls.shape[-2] > 1 and _derivatives.carries_warmstart(core.model):
            # The warm start each step leaves moves the next step's forces: it is carried as
            # tangent state (its input to the first step is a fresh MjData's, no input here).
            J = self._warm_jacobians_host(state, ctrls, states, nstep=nstep)

            def warm_chain(carry, per_step):
                (dx, dw), (J_t, du_t) = carry, per_step
                dy = J_t.Sx @ dx + J_t.Sw @ dw + J_t.Su @ du_t
                dx, dw = (
                    J_t.Jx @ dx + J_t.Jw @ dw + J_t.Ju @ du_t,
                    J_t.Wx @ dx + J_t.Ww @ dw + J_t.Wu @ du_t,
                )
                return (dx, dw), (dx, dy)

            dw = jnp.zeros(core.model.nv, dstate.dtype)
            _, (dstates, dsensors) = jax.lax.scan(warm_chain, (dstate, dw), (J, dctrls))
            return (states, sensors, diverged), (*_nan_where(diverged, dstates, dsensors), zero)
        # One host call for the Jacobians of all T steps (on the thread pool), at the states
        # the primal rollout already visited, each from the warm start it had there.
        Jx, Ju, Sx, Su = self._jacobians_host(state, ctrls, states, nstep=nstep)

        def chain(dx, per_step):
            Jx_t, Ju_t, Sx_t, Su_t, du_t = per_step
            dy = Sx_t @ dx + Su_t @ du_t
            dx = Jx_t @ dx + Ju_t @ du_t
            return dx, (dx, dy)

        _, (dstates, dsensors) = jax.lax.scan(chain, dstate, (Jx, Ju, Sx, Su, dctrls))
        return (states, sensors, diverged), (*_nan_where(diverged, dstates, dsensors), zero)

    def _visited(self, state, ctrls, states, nstep):
        """The `(B, n)` initial states, `(B, T, nu)` controls, `(B, T, n)` states before and
        after each step, and `(B, T, nv)` warm starts each step started from (replayed on
        the host) of a rollout from `state` with `ctrls` that visited `states`, as float64."""
        state0 = np.ascontiguousarray(flat(state), dtype=np.float64)
        ctrls = np.ascontiguousarray(flat(ctrls, 2), dtype=np.float64)
        visited = np.ascontiguousarray(flat(states, 2), dtype=np.float64)
        prev = np.concatenate([state0[:, None], visited[:, :-1]], axis=1)
        warmstart = _derivatives.primal_warmstarts(self._core.engine, state0, ctrls, nstep)
        return state0, ctrls, prev, visited, warmstart

    def _jacobians_result(self, state, ctrls, states, nstep):
        core = self._core
        lead, n, nu, ns = states.shape[:-1], core.nstate, core.nu, core.nsensordata
        shape = lambda *s: jax.ShapeDtypeStruct((*lead, *s), state.dtype)  # noqa: E731
        return shape(n, n), shape(n, nu), shape(ns, n), shape(ns, nu)

    def _host_jacobians(self, state, ctrls, states, nstep):
        """The `(*batch, T)` step Jacobians of a rollout from `state` `(*batch, n)` with
        `ctrls` `(*batch, T, nu)` that visited `states` `(*batch, T, n)`.

        Each step is differenced from the warm start the rollout had there (replayed on the
        host, one rollout's cost), held fixed: right with `mjDSBL_WARMSTART` and for a rollout
        of one control (its warm start is a fresh `MjData`'s); else `_host_warm_jacobians`
        runs instead.
        """
        core = self._core
        n, nu, ns = core.nstate, core.nu, core.nsensordata
        if ctrls.shape[-2] > 1 and _derivatives.carries_warmstart(core.model):
            raise RuntimeError(_WARMSTART_CHANGED)
        state0, ctrls, prev, visited, warmstart = self._visited(state, ctrls, states, nstep)
        Jx, Ju, Sx, Su = _derivatives.step_jacobians(
            core.engine,
            core.qmap,
            flat(prev),
            flat(ctrls),
            nstep,
            next_state=flat(visited),
            method=core.derivatives,
            warmstart=flat(warmstart),
        )
        lead = states.shape[:-1]
        return (
            Jx.reshape((*lead, n, n)),
            Ju.reshape((*lead, n, nu)),
            Sx.reshape((*lead, ns, n)),
            Su.reshape((*lead, ns, nu)),
        )

    def _warm_jacobians_result(self, state, ctrls, states, nstep):
        core = self._core
        lead, n, nu, nv, ns = (
            states.shape[:-1],
            core.nstate,
            core.nu,
            core.model.nv,
            core.nsensordata,
        )
        shape = lambda *s: jax.ShapeDtypeStruct((*lead, *s), state.dtype)  # noqa: E731
        return _warmstart.WarmJacobians(
            shape(n, n),
            shape(n, nu),
            shape(n, nv),
            shape(ns, n),
            shape(ns, nu),
            shape(ns, nv),
            shape(nv, n),
            shape(nv, nu),
            shape(nv, nv),
        )

    def _host_warm_jacobians(self, state, ctrls, states, nstep):
        """`_host_jacobians` with the warm start as state: the `(*batch, T)` blocks of
        `_warmstart.WarmJacobians`, at the states and warm starts the rollout visited."""
        core = self._core
        T = ctrls.shape[-2]
        state0, ctrls, prev, visited, warmstart = self._visited(state, ctrls, states, nstep)
        first = np.zeros((state0.shape[0], T), bool)
        first[:, 0] = True  # the first step's warm start is a fresh MjData's: no input
        J = _warmstart.warm_step_jacobians(
            core.engine,
            core.qmap,
            flat(prev),
            flat(ctrls),
            flat(warmstart),
            nstep,
            with_w=~first.ravel(),
            next_state=flat(visited),
        )
        lead = states.shape[:-1]
        return _warmstart.WarmJacobians(*(b.reshape((*lead, *b.shape[1:])) for b in J))
