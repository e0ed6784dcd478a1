"""The environment's two host calls as JAX functions: `step` and `forward`, with derivatives.

`step(physics, warmstart, ctrl)` is one host call that returns the next physics state, the warm
start and every derived field the environment reads; a `vmap` of it is one `Engine` call for the
whole batch, which MuJoCo writes straight into XLA's output buffers (`_StepBatching`, the hot
path of `jit(scan(vmap(env.step)))`). `forward(physics)` is `mj_forward` for a reset.

Both are `jax.custom_jvp` functions whose tangents are Jacobians by differences of the same host
call (`_differences.jacobian`: one batched call for every perturbed point, none reaching over a
contact change), in qpos, qvel, the warm start and the controls: differences of exactly what
gymnasium computes. Time is a constant.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxbridge
from jaxbridge._batching import AbstractBatching, flatten_batch

from ._engine import Engine

if TYPE_CHECKING:
    from jaxbridge._call import HostCall

__all__ = ["Calls"]


class _StepBatching(AbstractBatching):
    """A batch of `step`s as one `Engine` call that writes XLA's output buffers."""

    name = "vectorized"

    def __init__(self, engine: Engine):
        self.engine = engine

    def run(
        self,
        call: HostCall,
        batch: tuple[int, ...],
        ins: Sequence[np.ndarray],
        outs: Sequence[np.ndarray],
    ) -> None:
        B = math.prod(batch)
        flat = [np.ascontiguousarray(flatten_batch(x, 1, batch), dtype=np.float64) for x in ins]
        values = self.engine.step(*flat)
        for o, v in zip(outs, values):
            o.reshape((B, *v.shape[1:]))[...] = v

    def buffer_call(
        self, call: HostCall, in_shapes: Sequence[tuple], out_shapes: Sequence[tuple]
    ) -> Callable[..., None] | None:
        """The fast path for float64 rows under at most one `vmap` (or none): MuJoCo's rows
        filled with one `np.concatenate` of XLA's input buffers, and copied out into its
        output buffers, no other NumPy call."""
        if any(np.dtype(a.dtype) != np.float64 for a in (*call.in_avals, *call.spec.avals)):
            return None
        ranks = {len(s) for s in in_shapes}
        if ranks == {2}:
            B = in_shapes[0][0]
            if not all(s[0] == B for s in in_shapes) or B < 1:
                return None
        elif ranks != {1}:
            return None
        else:
            B = 1
        rows, fail = self.engine.rows(B), call.fail
        one = ranks == {1}

        def own(ctx: Any, outs: Any, physics: Any, warm: Any, ctrl: Any) -> None:
            del ctx
            try:
                p, w, u = physics.__array__(), warm.__array__(), ctrl.__array__()
                arrays = [o.__array__() for o in outs]
                if one:
                    p, w, u = p[None], w[None], u[None]
                    arrays = [a[None] for a in arrays]
                rows.step_into(p, w, u, arrays)
            except Exception as e:
                raise fail(e) from e

        return own


class Calls:
    """An `Engine`'s `step` and `forward` as differentiable JAX functions."""

    def __init__(self, engine: Engine):
        self.engine = e = engine
        self.nx, self.nv, self.nu, self.nphysics = e.nx, e.nv, e.nu, e.nphysics
        self.sizes = [math.prod(e.shapes[n]) for n in e.fields]

        def spec(*shape: int) -> Callable[..., Any]:
            return lambda x: jax.ShapeDtypeStruct((*x.shape[:-1], *shape), x.dtype)

        def step_result(physics, warm, ctrl):
            del warm, ctrl
            lead, dt = physics.shape[:-1], physics.dtype
            shapes = [(e.nphysics,), (e.nv,), *(e.shapes[n] for n in e.fields)]
            return [jax.ShapeDtypeStruct((*lead, *s), dt) for s in shapes]

        def forward_result(physics):
            lead, dt = physics.shape[:-1], physics.dtype
            return [jax.ShapeDtypeStruct((*lead, *e.shapes[n]), dt) for n in e.fields]

        nout_step = e.nx + e.nv + sum(self.sizes)
        nin_step = e.nx + e.nv + e.nu
        nout_forward = sum(self.sizes)

        def jac_result(n_out: int, n_in: int) -> Callable[..., Any]:
            return lambda physics, *rest: jax.ShapeDtypeStruct(
                (*physics.shape[:-1], n_out, n_in), physics.dtype
            )

        self._step_host = jaxbridge.host(
            _host(e.step, 3), vmap=_StepBatching(e), result=step_result
        )
        self._forward_host = jaxbridge.host(
            _host(e.forward, 1), vmap="vectorized", result=forward_result
        )
        self._forward_where = jaxbridge.host(
            _forward_where(e),
            vmap="vectorized",
            result=lambda physics, where: forward_result(physics),
        )
        self._step_jacobian = jaxbridge.host(
            _host(e.step_jacobian, 3, single=True),
            vmap="vectorized",
            result=jac_result(nout_step, nin_step),
        )
        self._forward_jacobian = jaxbridge.host(
            _host(e.forward_jacobian, 1, single=True),
            vmap="vectorized",
            result=jac_result(nout_forward, e.nx),
        )
        self.step = jax.custom_jvp(self._step_primal)
        self.step.defjvp(self._step_jvp)
        self.forward = jax.custom_jvp(self._forward_primal)
        self.forward.defjvp(self._forward_jvp)

    # -- step --------------------------------------------------------------------------

    def _step_primal(self, physics, warm, ctrl):
        return tuple(self._step_host(physics, warm, ctrl))

    def _step_jvp(self, primals, tangents):
        physics, warm, ctrl = primals
        dphysics, dwarm, dctrl = tangents
        out = self._step_primal(physics, warm, ctrl)
        J = jax.lax.stop_gradient(self._step_jacobian(physics, warm, ctrl))
        dx = jnp.concatenate([dphysics[1 : 1 + self.nx], dwarm, dctrl.astype(dphysics.dtype)])
        dy = J @ dx
        nx, nv = self.nx, self.nv
        dphys = jnp.zeros_like(physics).at[1 : 1 + nx].set(dy[:nx])
        douts = [dphys, dy[nx : nx + nv], *self._unflatten(dy[nx + nv :], out[2:])]
        return out, tuple(douts)

    # -- forward -----------------------------------------------------------------------

    def _forward_primal(self, physics):
        return tuple(self._forward_host(physics))

    def forward_where(self, physics: jax.Array, where: jax.Array) -> tuple[jax.Array, ...]:
        """`forward` where `where` is set, zeros elsewhere; no derivative (an autoreset's new
        episodes, whose states do not depend on the old ones)."""
        physics = jax.lax.stop_gradient(physics)
        return tuple(self._forward_where(physics, where))

    def _forward_jvp(self, primals, tangents):
        (physics,), (dphysics,) = primals, tangents
        out = self._forward_primal(physics)
        if not out:
            return out, ()
        J = jax.lax.stop_gradient(self._forward_jacobian(physics))
        dy = J @ dphysics[1 : 1 + self.nx]
        return out, tuple(self._unflatten(dy, out))

    def _unflatten(self, flat: jax.Array, like: Sequence[jax.Array]) -> list[jax.Array]:
        pieces, offset = [], 0
        for a, n in zip(like, self.sizes):
            pieces.append(flat[offset : offset + n].reshape(a.shape))
            offset += n
        return pieces


def _forward_where(engine: Engine) -> Callable[..., Any]:
    def gymnasium_forward_where(physics: np.ndarray, where: np.ndarray) -> list[np.ndarray]:
        lead = physics.shape[:-1]
        rows = np.ascontiguousarray(physics.reshape(-1, physics.shape[-1]), np.float64)
        mask = np.broadcast_to(where, lead).reshape(-1)
        return [v.reshape((*lead, *v.shape[1:])) for v in engine.forward_where(rows, mask)]

    return gymnasium_forward_where


def _host(fn: Callable[..., Any], nargs: int, single: bool = False) -> Callable[..., Any]:
    """A host function of `nargs` arrays of shape `(*batch, ·)` over `fn` of `(B, ·)` float64
    rows: the batch flattened, the results shaped back."""

    def host(*arrays: np.ndarray) -> Any:
        assert len(arrays) == nargs
        lead = arrays[0].shape[:-1]
        rows = [np.ascontiguousarray(a.reshape(-1, a.shape[-1]), np.float64) for a in arrays]
        values = fn(*rows)
        if single:
            return values.reshape((*lead, *values.shape[1:]))
        return [v.reshape((*lead, *v.shape[1:])) for v in values]

    host.__name__ = host.__qualname__ = f"gymnasium_{fn.__name__}"
    return host
