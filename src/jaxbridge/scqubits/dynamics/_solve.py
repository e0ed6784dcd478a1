"""Time evolution by dynamiqs: `sesolve` without jump operators, `mesolve` with them.

The Hamiltonian is `2 pi (H0 + sum_d amplitude_d(t) O_d)` with energies in GHz, so times are
in ns; jump operators are `sqrt(rate)` with rates in 1/ns. dynamiqs (JAX, diffrax) integrates
with an adaptive Runge-Kutta method; derivatives with respect to everything the Hamiltonian,
the pulses and the jump operators are made of (a model's params included) go through the
solver by JAX's reverse mode (`gradient="checkpointed"`, dynamiqs' `BackwardCheckpointed`)
or forward mode (`"forward"`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from . import _errors
from ._pulses import PiecewiseConstant, Smooth


def _dynamiqs() -> Any:
    try:
        import dynamiqs
    except ImportError as error:  # pragma: no cover - exercised where dynamiqs is absent
        raise ImportError(_errors.NEEDS_DYNAMIQS) from error
    return dynamiqs


def _check_operator(op: Any, k: int, what: str, method: str) -> jax.Array:
    op = jnp.asarray(op)
    if op.shape != (k, k):
        raise ValueError(_errors.OPERATOR_SHAPE.format(method=method, k=k, what=what, got=op.shape))
    return op


def hamiltonian_of(hamiltonian: Any, drives: Sequence[Any], method: str, cdtype: Any) -> Any:
    """dynamiqs' time-dependent Hamiltonian `2 pi (H0 + sum amplitude(t) O)`."""
    dq = _dynamiqs()
    h0 = jnp.asarray(hamiltonian)
    k = h0.shape[-1]
    h0 = _check_operator(h0, k, "the static Hamiltonian", method)
    total = dq.constant(2 * jnp.pi * h0.astype(cdtype))
    for drive in drives:
        if not (isinstance(drive, (tuple, list)) and len(drive) == 2):
            raise ValueError(_errors.DRIVE.format(method=method, got=drive))
        op, pulse = drive
        op = 2 * jnp.pi * _check_operator(op, k, "a drive operator", method).astype(cdtype)
        if isinstance(pulse, PiecewiseConstant):
            # dynamiqs' own `pwc` mixes a bool mask into complex values, which strict dtype
            # promotion refuses: the same steps as a modulated operator, the solver told
            # where the jumps are.
            total = total + dq.modulated(_as(pulse, cdtype), op, discontinuity_ts=pulse.times)
        elif isinstance(pulse, Smooth):
            total = total + dq.modulated(_as(pulse, cdtype), op)
        elif isinstance(pulse, (int, float, complex)) or (
            hasattr(pulse, "shape") and jnp.shape(pulse) == ()
        ):
            total = total + dq.constant(jnp.asarray(pulse).astype(cdtype) * op)
        else:
            raise ValueError(_errors.DRIVE.format(method=method, got=pulse))
    return total


def _as(pulse: Smooth | PiecewiseConstant, cdtype: Any) -> Any:
    # dynamiqs multiplies the amplitude into a complex operator: cast it (strict promotion).
    return lambda t: pulse(t).astype(cdtype)


def _options(rtol: float, atol: float, max_steps: int, gradient: str) -> tuple[Any, Any]:
    dq = _dynamiqs()
    grads = {
        "checkpointed": dq.gradient.BackwardCheckpointed,
        "direct": dq.gradient.Direct,
        "forward": dq.gradient.Forward,
    }
    if gradient not in grads:
        raise ValueError(f"`solve(gradient=...)` must be one of {sorted(grads)}; got {gradient!r}.")
    method = dq.method.Tsit5(rtol=rtol, atol=atol, max_steps=max_steps)
    return method, grads[gradient]()


def solve(
    hamiltonian: Any,
    drives: Sequence[Any],
    state0: Any,
    tsave: Any,
    *,
    jump_ops: Any = None,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 1_000_000,
    gradient: str = "checkpointed",
) -> jax.Array:
    """The states at `tsave`: Schrodinger's equation, or Lindblad's with `jump_ops`.

    Args:
        hamiltonian: `(k, k)` static Hamiltonian in GHz (`static_hamiltonian`).
        drives: pairs `(operator, pulse)`: a `(k, k)` operator (`drive_operator`) and a
            `pwc(...)`, a `smooth(...)` or a constant amplitude in GHz.
        state0: kets `(*batch, k, 1)` or, with `jump_ops`, kets or density matrices
            `(*batch, k, k)`; a batch of initial states is one solve.
        tsave: `(t,)` times (ns) at which to return the state, starting at the initial time.
        jump_ops: `(m, k, k)` or a list of `(k, k)` jump operators (`jump_operators`); None:
            closed-system evolution.
        rtol, atol: the Tsit5 solver's tolerances.
        max_steps: the solver's step limit.
        gradient: `"checkpointed"` (reverse mode, memory bounded), `"direct"` (reverse mode
            through every step) or `"forward"` (forward mode: `jax.jvp`, `jax.jacfwd`).

    Returns:
        `(*batch, t, k, 1)` kets or `(*batch, t, k, k)` density matrices, complex. Works under
        `jit`, `vmap` and the chosen derivative mode; float64 with `jax_enable_x64`.

    Raises:
        ValueError: an operator whose shape is not the Hamiltonian's, a malformed drive.
        ImportError: dynamiqs is not installed.
    """
    dq = _dynamiqs()
    cdtype = jnp.result_type(complex)
    k = jnp.shape(hamiltonian)[-1]
    h = hamiltonian_of(hamiltonian, drives, "solve", cdtype)
    method, grad = _options(rtol, atol, max_steps, gradient)
    state0 = jnp.asarray(state0).astype(cdtype)
    tsave = jnp.asarray(tsave)
    if jump_ops is None:
        result = dq.sesolve(h, state0, tsave, method=method, gradient=grad, progress_meter=False)
        return result.states.to_jax()
    jumps = [_check_operator(j, k, "a jump operator", "solve").astype(cdtype) for j in jump_ops]
    if state0.shape[-1] == 1:
        state0 = state0 @ jnp.swapaxes(state0.conj(), -1, -2)
    result = dq.mesolve(
        h,
        jumps,
        state0,
        tsave,
        method=method,
        gradient=grad,
        progress_meter=False,
        assume_hermitian=False,  # the fidelity evolves |j><k|, which is not Hermitian
    )
    return result.states.to_jax()
