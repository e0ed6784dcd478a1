"""Time evolution by dynamiqs: `sesolve` without jump operators, `mesolve` with them.

The Hamiltonian is `2 pi (H0 + sum_d amplitude_d(t) O_d)` with energies in GHz, so times are
in ns (Schrodinger's equation is integrated in the frame of the levels, exactly; Lindblad's in
the lab frame); jump operators are `sqrt(rate)` with rates in 1/ns. dynamiqs (JAX, diffrax)
integrates with an adaptive Runge-Kutta method; derivatives with respect to everything the
Hamiltonian, the pulses and the jump operators are made of (a model's params included) go
through the solver by reverse mode (`gradient="checkpointed"`, dynamiqs' `BackwardCheckpointed`)
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


def _drives(drives: Sequence[Any], k: int, method: str, cdtype: Any) -> tuple[list, list]:
    """`[(2 pi O, amplitude(t))]` and the pulses' discontinuities."""
    out, jumps = [], []
    for drive in drives:
        if not (isinstance(drive, (tuple, list)) and len(drive) == 2):
            raise ValueError(_errors.DRIVE.format(method=method, got=drive))
        op, pulse = drive
        op = 2 * jnp.pi * _check_operator(op, k, "a drive operator", method).astype(cdtype)
        if isinstance(pulse, PiecewiseConstant):
            jumps.append(pulse.times)
        elif not isinstance(pulse, Smooth) and not (
            isinstance(pulse, (int, float, complex)) or jnp.shape(pulse) == ()
        ):
            raise ValueError(_errors.DRIVE.format(method=method, got=pulse))
        out.append((op, pulse))
    return out, jumps


def lab_frame(hamiltonian: Any, drives: Sequence[Any], method: str, cdtype: Any) -> Any:
    """dynamiqs' `2 pi (H0 + sum a(t) O)`: a constant plus one modulated term a drive."""
    dq = _dynamiqs()
    h0 = jnp.asarray(hamiltonian)
    k = h0.shape[-1]
    h0 = 2 * jnp.pi * _check_operator(h0, k, "the static Hamiltonian", method).astype(cdtype)
    total = dq.constant(h0)
    for op, pulse in _drives(drives, k, method, cdtype)[0]:
        if isinstance(pulse, PiecewiseConstant):
            # dynamiqs' own `pwc` mixes a bool mask into complex values, which strict dtype
            # promotion refuses: the same steps as a modulated operator, the solver told
            # where the jumps are.
            f = lambda t, pulse=pulse: _amplitude(pulse, t, cdtype)  # noqa: E731
            total = total + dq.modulated(f, op, discontinuity_ts=pulse.times)
        elif isinstance(pulse, Smooth):
            total = total + dq.modulated(lambda t, pulse=pulse: _amplitude(pulse, t, cdtype), op)
        else:
            total = total + dq.constant(_amplitude(pulse, 0.0, cdtype) * op)
    return total, jnp.real(jnp.diagonal(h0))


def _amplitude(pulse: Any, t: Any, cdtype: Any) -> jax.Array:
    if isinstance(pulse, (PiecewiseConstant, Smooth)):
        return pulse(t).astype(cdtype)
    return jnp.asarray(pulse).astype(cdtype)


def interaction_picture(
    hamiltonian: Any, drives: Sequence[Any], method: str, cdtype: Any
) -> tuple[Any, jax.Array]:
    """dynamiqs' `H_I(t)` in the frame of `D = diag(H0)`, and `2 pi diag(H0)`.

    With `X_I(t) = exp(i D t) X exp(-i D t) = X * exp(i (D_a - D_b) t)` (elementwise; D
    diagonal), the interaction picture is exact for any `H0`: `H_I = (H0 - D + sum a(t) O)_I`.
    The state then moves only at the drive's detunings and the counter-rotating
    terms' small wiggles instead of rotating at the levels' frequencies, so the adaptive
    solver takes several times fewer steps at the same tolerance.
    """
    dq = _dynamiqs()
    h0 = jnp.asarray(hamiltonian)
    k = h0.shape[-1]
    h0 = 2 * jnp.pi * _check_operator(h0, k, "the static Hamiltonian", method).astype(cdtype)
    energies = jnp.real(jnp.diagonal(h0))
    rest = h0 - jnp.diag(jnp.diagonal(h0))
    terms, discontinuities = _drives(drives, k, method, cdtype)
    ts = jnp.sort(jnp.concatenate(discontinuities)) if discontinuities else None
    w = (energies[:, None] - energies[None, :]).astype(cdtype)

    def rotate(x: Any, t: Any) -> Any:
        return x * jnp.exp(1j * w * jnp.asarray(t).astype(cdtype))

    def h(t: Any) -> Any:
        total = rest
        for op, pulse in terms:
            total = total + _amplitude(pulse, t, cdtype) * op
        return dq.asqarray(rotate(total, t))

    return dq.timecallable(h, discontinuity_ts=ts), energies


def _phases(sign: int, tsave: Any, energies: Any, ndim: int, cdtype: Any) -> jax.Array:
    """`exp(sign i E t)`, `(1, ..., t, k)` to broadcast against states of rank `ndim`."""
    t = tsave.astype(cdtype)[:, None]
    phases = jnp.exp(sign * 1j * t * energies.astype(cdtype)[None, :])
    return phases.reshape((1,) * (ndim - 3) + phases.shape)


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
    frame: str = "lab",
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
        frame: the states returned in the lab frame (`"lab"`) or in the rotating frame of
            the levels, `exp(i 2 pi diag(H0) t)` times the lab state (`"interaction"`). The
            solver integrates in the latter either way (exactly, not a rotating-wave
            approximation): it takes several times fewer steps.

    Returns:
        `(*batch, t, k, 1)` kets or `(*batch, t, k, k)` density matrices, complex. Works under
        `jit`, `vmap` and the chosen derivative mode; float64 with `jax_enable_x64`.

    Raises:
        ValueError: an operator whose shape is not the Hamiltonian's, a malformed drive, an
            unknown `frame`.
        ImportError: dynamiqs is not installed.
    """
    dq = _dynamiqs()
    if frame not in ("lab", "interaction"):
        raise ValueError(_errors.FRAME.format(got=frame))
    cdtype = jnp.result_type(complex)
    method, grad = _options(rtol, atol, max_steps, gradient)
    state0 = jnp.asarray(state0).astype(cdtype)
    tsave = jnp.asarray(tsave)
    if jump_ops is None:
        h, energies = interaction_picture(hamiltonian, drives, "solve", cdtype)
        result = dq.sesolve(h, state0, tsave, method=method, gradient=grad, progress_meter=False)
        states = result.states.to_jax()
        if frame == "lab":  # |psi> = exp(-i D t) |psi_I>
            back = _phases(-1, tsave, energies, states.ndim, cdtype)
            states = states * back[..., :, None]
        return states
    # The master equation stays in the lab frame: there the jump operators are constant
    # (in the levels' frame they turn with time, which costs dynamiqs more than the steps
    # the frame saves).
    h, energies = lab_frame(hamiltonian, drives, "solve", cdtype)
    k = jnp.shape(hamiltonian)[-1]
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
    states = result.states.to_jax()
    if frame == "interaction":  # rho_I = exp(i D t) rho exp(-i D t)
        there = _phases(1, tsave, energies, states.ndim, cdtype)
        states = there[..., :, None] * states * there[..., None, :].conj()
    return states
