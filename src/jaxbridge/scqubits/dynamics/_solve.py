"""Time evolution: Schrodinger's equation for kets, Lindblad's for density matrices.

The Hamiltonian is `2 pi (H0 + sum_d amplitude_d(t) O_d)` with energies in GHz, so times are
in ns; jump operators are `sqrt(rate)` with rates in 1/ns. Both equations are linear,
`y' = (G0 + sum_d a_d(t) G_d) y`, with a handful of small constant matrices: `-i 2 pi H` for
kets, and for density matrices the Liouvillian as a `(k^2, k^2)` superoperator (row-major
`vec`, `vec(A X B) = (A kron B^T) vec(X)`), the dissipator of every jump operator folded into
`G0` once. A batch of initial states is the columns of one `y`, so a step of the solver is one
matrix product: diffrax's adaptive Runge-Kutta methods (Dormand-Prince 8(7) by default) then
cost microseconds a step, where a master equation written operator by operator (dynamiqs'
`mesolve`) costs a small XLA operation a jump operator and a term, about 7x more here.
Schrodinger's equation is integrated in the levels' frame (exact), Lindblad's in the lab
frame: measured on the benchmarks' gates, a near-resonantly driven transmon takes 2x fewer
steps in the levels' frame, a fluxonium whose drive couples it to levels 4 to 7 GHz away
takes 15% more (the off-resonant terms rotate there as fast as the levels). Derivatives
with respect to all the matrices and the pulses' arrays (a model's params included) go
through the solver: reverse mode (`gradient="checkpointed"`, diffrax's
`RecursiveCheckpointAdjoint`, or `"direct"`) or forward mode (`"forward"`).
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from . import _errors
from ._dopri8 import linear_dopri8
from ._pulses import PiecewiseConstant, Smooth

#: The adaptive methods `solve` offers, by name: diffrax's classes.
METHODS = ("dopri8", "tsit5", "dopri5")
GRADIENTS = ("checkpointed", "adjoint", "direct", "forward", "sensitivity")


def _diffrax() -> Any:
    try:
        import diffrax
    except ImportError as error:  # pragma: no cover - exercised where diffrax is absent
        raise ImportError(_errors.NEEDS_DIFFRAX) from error
    return diffrax


def _check_operator(op: Any, k: int, what: str, method: str) -> jax.Array:
    op = jnp.asarray(op)
    if op.shape != (k, k):
        raise ValueError(_errors.OPERATOR_SHAPE.format(method=method, k=k, what=what, got=op.shape))
    return op


def _drives(drives: Sequence[Any], k: int, method: str, cdtype: Any) -> tuple[list, list]:
    """`[(2 pi O, pulse)]` and the pulses' discontinuities (the `pwc` grids)."""
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


def _amplitude(pulse: Any, t: Any, cdtype: Any) -> jax.Array:
    if isinstance(pulse, (PiecewiseConstant, Smooth)):
        return pulse(t).astype(cdtype)
    return jnp.asarray(pulse).astype(cdtype)


def commutator_superoperator(op: jax.Array) -> jax.Array:
    """`-i [op, .]` as a `(k^2, k^2)` matrix acting on row-major `vec(rho)`."""
    eye = jnp.eye(op.shape[-1], dtype=op.dtype)
    return -1j * (jnp.kron(op, eye) - jnp.kron(eye, op.T))


def dissipator_superoperator(jumps: Sequence[jax.Array], k: int, cdtype: Any) -> jax.Array:
    """`sum_L L rho L^dag - {L^dag L, rho} / 2` as a `(k^2, k^2)` matrix on `vec(rho)`."""
    eye = jnp.eye(k, dtype=cdtype)
    total = jnp.zeros((k * k, k * k), dtype=cdtype)
    if not jumps:
        return total
    ls = jnp.stack(jumps)
    lls = jnp.einsum("mba,mbc->ac", ls.conj(), ls)  # sum_L L^dag L
    sandwich = jnp.einsum("mac,mbd->abcd", ls, ls.conj()).reshape(k * k, k * k)
    return total + sandwich - 0.5 * (jnp.kron(lls, eye) + jnp.kron(eye, lls.T))


def integrate(
    static: jax.Array,
    terms: Sequence[tuple[jax.Array, Any]],
    y0: jax.Array,
    tsave: jax.Array,
    *,
    discontinuities: Sequence[jax.Array] = (),
    rtol: float,
    atol: float,
    max_steps: int,
    gradient: str,
    method: str,
    omega: jax.Array | None = None,
    caller: str = "solve",
) -> jax.Array:
    """`y(t)` at `tsave` for `y' = (static + sum_d a_d(t) M_d) y`, `(t, *y0.shape)`.

    `terms` are pairs `(M_d, pulse)`; `discontinuities` the times where a pulse jumps (the
    solver steps onto each). Complex `static`, `M_d` and `y0` of one dtype. With `omega`
    (real, one entry a row of `y`) the solver integrates `y_I = exp(i omega t) y` (exact, no
    rotating-wave approximation) and the lab-frame `y` is returned.
    """
    dfx = _diffrax()
    if gradient not in GRADIENTS:
        raise ValueError(_errors.GRADIENT.format(method=caller, allowed=GRADIENTS, got=gradient))
    if method not in METHODS:
        raise ValueError(_errors.METHOD.format(method=caller, allowed=METHODS, got=method))
    cdtype = y0.dtype
    constant = static
    varying = []
    for op, pulse in terms:
        if isinstance(pulse, (PiecewiseConstant, Smooth)):
            varying.append((op, pulse))
        else:
            constant = constant + _amplitude(pulse, 0.0, cdtype) * op

    if omega is not None:  # the frame exp(i w t): y_I' = e^{i w t} (G + i w) e^{-i w t} y_I
        constant = constant + 1j * jnp.diag(omega.astype(cdtype))

    # The written step for the reverse modes only (see `_solver`).
    solver = _solver(method, written=gradient != "forward")
    jump_ts = jnp.sort(jnp.concatenate(discontinuities)) if discontinuities else None
    tsave = jnp.asarray(tsave, dtype=jnp.result_type(float))
    args = (constant, varying, omega)
    if gradient == "adjoint":
        if jump_ts is not None:
            raise ValueError(_errors.ADJOINT_PWC.format(method=caller))
        config = (method, float(rtol), float(atol), int(max_steps))

        def interval(y: Any, ends: Any) -> tuple[Any, Any]:
            y = _adjoint_solve(config, args, y, ends[0], ends[1], jump_ts)
            return y, y

        _, later = jax.lax.scan(interval, y0, jnp.stack([tsave[:-1], tsave[1:]], axis=1))
        ys = jnp.concatenate([y0[None], later])
    elif gradient == "sensitivity":
        config = (method, float(rtol), float(atol), int(max_steps))
        ys = _sensitivity_solve(config, args, y0, tsave, jump_ts)
    else:
        adjoint = {
            "checkpointed": dfx.RecursiveCheckpointAdjoint,
            "direct": dfx.DirectAdjoint,
            "forward": dfx.ForwardMode,
        }[gradient]()
        controller = dfx.PIDController(rtol=rtol, atol=atol, jump_ts=jump_ts)
        with _complex_ok():
            solution = dfx.diffeqsolve(
                dfx.ODETerm(_field),
                solver,
                tsave[0],
                tsave[-1],
                None,
                y0,
                args=args,
                saveat=dfx.SaveAt(ts=tsave),
                stepsize_controller=controller,
                adjoint=adjoint,
                max_steps=max_steps,
            )
        ys = solution.ys
    if omega is not None:  # back to the lab frame: y = e^{-i w t} y_I
        back = jnp.exp(-1j * tsave.astype(cdtype)[:, None] * omega.astype(cdtype)[None, :])
        ys = back.reshape(back.shape + (1,) * (ys.ndim - 2)) * ys
    return ys


@contextlib.contextmanager
def _complex_ok() -> Iterator[None]:
    """diffrax's notice on complex states silenced: its explicit Runge-Kutta steps, the RMS
    error norm (of |y|) and these adjoints are complex-safe, as dynamiqs relies on; the tests
    compare states, fidelities and gradients with qutip."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Complex dtype support in Diffrax")
        yield


def _field(t: Any, y: Any, args: Any) -> Any:
    """`(G0 + sum_d a_d(t) M_d) y`, in the frame `exp(i omega t)` where `omega` is given."""
    generator, varying, omega = args
    cdtype = generator.dtype
    for op, pulse in varying:
        generator = generator + _amplitude(pulse, t, cdtype) * op
    if omega is None:
        return generator @ y
    phase = jnp.exp(1j * omega.astype(cdtype) * jnp.asarray(t).astype(cdtype))
    return phase[:, None] * (generator @ (phase.conj()[:, None] * y))


def _solver(method: str, *, written: bool = True) -> Any:
    """diffrax's solver of that name; Dormand-Prince 8(7) with its step written out for
    `_field`'s linear systems where `written` (`_dopri8`: the same method, its step fewer XLA
    operations). Measured on the benchmarks' gates (one process, interleaved, load 3 to 4 on
    two cores): reverse mode through diffrax's loop 1.4 to 1.6x (fluxonium) and 2.2x
    (transmon) faster with it, the discrete adjoint 1.3x and 1.8x; forward mode (`jacfwd`,
    the tangents batched through the step) 1.4x slower on the transmon, so that mode and the
    sensitivity solve keep diffrax's generic step."""
    dfx = _diffrax()
    if method == "dopri8" and written:
        return linear_dopri8(_generator)
    return {"dopri8": dfx.Dopri8, "tsit5": dfx.Tsit5, "dopri5": dfx.Dopri5}[method]()


def _step(method: str, t0: Any, t1: Any, y: Any, args: Any) -> Any:
    """One step of the Runge-Kutta method from `t0` to `t1` (either direction)."""
    dfx = _diffrax()
    solver, term = _solver(method), dfx.ODETerm(_field)
    with _complex_ok():
        state = solver.init(term, t0, t1, y, args)
        return solver.step(term, t0, t1, y, args, state, True)[0]


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _adjoint_solve(config: tuple, args: Any, y0: Any, t0: Any, t1: Any, jump_ts: Any) -> Any:
    """`y(t1)` by the adaptive solver; its VJP the discrete adjoint of the steps it took.

    Forward, the solver records only its accepted steps' end times. Backward, each step is
    retraced from its end: the state at its start by one step backward in time (the equation
    is linear and, for a unitary or weakly damped evolution, well conditioned backward), then
    the VJP of the forward step at that state carries the cotangent to the step's start and
    adds the step's share to the operators' and pulses' cotangents. That is about 3 steps'
    work a step, against diffrax's checkpointed reverse mode's 8 to 10 here.
    """
    return _adjoint_forward(config, args, y0, t0, t1, jump_ts)[0]


def _adjoint_forward(config: tuple, args: Any, y0: Any, t0: Any, t1: Any, jump_ts: Any) -> Any:
    dfx = _diffrax()
    method, rtol, atol, max_steps = config
    ends = dfx.SubSaveAt(steps=True, fn=lambda t, y, a: t)
    with _complex_ok():
        solution = dfx.diffeqsolve(
            dfx.ODETerm(_field),
            _solver(method),
            t0,
            t1,
            None,
            y0,
            args=args,
            saveat=dfx.SaveAt(subs=[dfx.SubSaveAt(t1=True), ends]),
            stepsize_controller=dfx.PIDController(rtol=rtol, atol=atol, jump_ts=jump_ts),
            adjoint=dfx.RecursiveCheckpointAdjoint(),
            max_steps=max_steps,
        )
    y1 = solution.ys[0][-1]
    steps = solution.stats["num_accepted_steps"]
    return y1, (args, y1, solution.ys[1], steps, t0, jump_ts)


def _adjoint_backward(config: tuple, residuals: Any, cotangent: Any) -> tuple:
    args, y1, ends, steps, t0, jump_ts = residuals
    method = config[0]
    zero = jax.tree.map(jnp.zeros_like, args)

    def back(carry: Any) -> Any:
        i, y, lam, grads = carry
        end = ends[i]
        start = jnp.where(i > 0, ends[jnp.maximum(i - 1, 0)], t0)
        y_start = _step(method, end, start, y, args)
        _, vjp = jax.vjp(lambda y, a: _step(method, start, end, y, a), y_start, args)
        lam, share = vjp(lam)
        return i - 1, y_start, lam, jax.tree.map(jnp.add, grads, share)

    carry = (steps - 1, y1, cotangent, zero)
    _, _, lam0, grads = jax.lax.while_loop(lambda c: c[0] >= 0, back, carry)
    no_jumps = None if jump_ts is None else jnp.zeros_like(jump_ts)
    return grads, lam0, jnp.zeros_like(t0), jnp.zeros_like(t0), no_jumps


_adjoint_solve.defvjp(lambda config, *a: _adjoint_forward(config, *a), _adjoint_backward)


def _phases(sign: int, tsave: Any, energies: Any, ndim: int, cdtype: Any) -> jax.Array:
    """`exp(sign i E t)`, `(1, ..., t, k)` to broadcast against states of rank `ndim`."""
    t = tsave.astype(cdtype)[:, None]
    phases = jnp.exp(sign * 1j * t * energies.astype(cdtype)[None, :])
    return phases.reshape((1,) * (ndim - 3) + phases.shape)


def solve(
    hamiltonian: Any,
    drives: Sequence[Any],
    state0: Any,
    tsave: Any,
    *,
    jump_ops: Any = None,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 100_000,
    gradient: str = "checkpointed",
    method: str = "dopri8",
    frame: str = "lab",
) -> jax.Array:
    """The states at `tsave`: Schrodinger's equation, or Lindblad's with `jump_ops`.

    Args:
        hamiltonian: `(k, k)` static Hamiltonian in GHz (`static_hamiltonian`).
        drives: pairs `(operator, pulse)`: a `(k, k)` operator (`drive_operator`) and a
            `pwc(...)`, a `smooth(...)` or a constant amplitude in GHz.
        state0: kets `(*batch, k, 1)` or, with `jump_ops`, kets or density matrices
            `(*batch, k, k)`; a batch of initial states is one solve (the columns of one
            matrix the solver evolves).
        tsave: `(t,)` times (ns) at which to return the state, starting at the initial time.
        jump_ops: `(m, k, k)` or a list of `(k, k)` jump operators (`jump_operators`); None:
            closed-system evolution.
        rtol, atol: the adaptive solver's tolerances (diffrax's `PIDController`).
        max_steps: the solver's step limit.
        gradient: `"checkpointed"` (reverse mode through diffrax's loop, memory bounded),
            `"adjoint"` (reverse mode, the discrete adjoint of the steps taken, each retraced
            from its end by one step backward in time: 1.5 to 2x faster here; for unitary or
            weakly damped evolutions, where integrating backward is well conditioned),
            `"direct"` (reverse mode through every step), `"forward"` (forward mode:
            `jax.jvp`, `jax.jacfwd`) or `"sensitivity"` (forward mode only, `jax.jacfwd` /
            `jax.jvp`: all tangent directions as extra columns of ONE augmented linear solve,
            step size controlled on the state; the fastest here for a mesolve gradient of
            ~8 params, 117 ms against the adjoint's 130 and forward's 186; `jax.grad` of it
            is not supported).
        method: `"dopri8"` (Dormand-Prince 8(7), the fewest steps at tight tolerances),
            `"tsit5"` or `"dopri5"`.
        frame: the states returned in the lab frame (`"lab"`) or in the rotating frame of
            the levels, `exp(i 2 pi diag(H0) t)` times the lab state (`"interaction"`).

    Returns:
        `(*batch, t, k, 1)` kets or `(*batch, t, k, k)` density matrices, complex. Works under
        `jit`, `vmap` and the chosen derivative mode; float64 with `jax_enable_x64`.

    Raises:
        ValueError: an operator whose shape is not the Hamiltonian's, a malformed drive, an
            unknown `frame`, `gradient` or `method`.
        ImportError: diffrax (dynamiqs' solver library) is not installed.
    """
    if frame not in ("lab", "interaction"):
        raise ValueError(_errors.FRAME.format(got=frame))
    cdtype = jnp.result_type(complex)
    h0 = jnp.asarray(hamiltonian)
    k = h0.shape[-1]
    h0 = 2 * jnp.pi * _check_operator(h0, k, "the static Hamiltonian", "solve").astype(cdtype)
    energies = jnp.real(jnp.diagonal(h0))
    terms, discontinuities = _drives(drives, k, "solve", cdtype)
    state0 = jnp.asarray(state0).astype(cdtype)
    tsave = jnp.asarray(tsave)
    options = {"rtol": rtol, "atol": atol, "max_steps": max_steps, "gradient": gradient}
    options.update(method=method, discontinuities=discontinuities)
    batch = state0.shape[:-2]
    if jump_ops is None:
        # The kets of the batch as the columns of one (k, n) matrix.
        kets = jnp.moveaxis(state0.reshape(-1, k, 1)[..., 0], 0, -1)
        # In the levels' frame (exact): for a near-resonant drive the state then moves slowly
        # and the solver takes several times fewer steps (a transmon's X gate: 2x for Dormand-
        # Prince 8, 4x for Tsit5).
        ops = [(-1j * op, p) for op, p in terms]
        ys = integrate(-1j * h0, ops, kets, tsave, omega=energies, **options)
        states = jnp.moveaxis(ys, -1, 0).reshape(*batch, tsave.shape[0], k, 1)
        if frame == "interaction":  # |psi_I> = exp(i D t) |psi>
            states = states * _phases(1, tsave, energies, states.ndim, cdtype)[..., :, None]
        return states
    jumps = [_check_operator(j, k, "a jump operator", "solve").astype(cdtype) for j in jump_ops]
    if state0.shape[-1] == 1:
        state0 = state0 @ jnp.swapaxes(state0.conj(), -1, -2)
        batch = state0.shape[:-2]
    static = commutator_superoperator(h0) + dissipator_superoperator(jumps, k, cdtype)
    ops = [(commutator_superoperator(op), p) for op, p in terms]
    columns = jnp.moveaxis(state0.reshape(-1, k * k), 0, -1)  # (k^2, n): row-major vec(rho)
    ys = integrate(static, ops, columns, tsave, **options)
    states = jnp.moveaxis(ys, -1, 0).reshape(*batch, tsave.shape[0], k, k)
    if frame == "interaction":  # rho_I = exp(i D t) rho exp(-i D t)
        there = _phases(1, tsave, energies, states.ndim, cdtype)
        states = there[..., :, None] * states * there[..., None, :].conj()
    return states


def _generator(t: Any, args: Any) -> jax.Array:
    """`G(t) = G0 + sum_d a_d(t) M_d`, in the frame `exp(i omega t)` where `omega` is given:
    `G_I[a, b] = exp(i (omega_a - omega_b) t) G[a, b]` (the same field as `_field`)."""
    generator, varying, omega = args
    cdtype = generator.dtype
    for op, pulse in varying:
        generator = generator + _amplitude(pulse, t, cdtype) * op
    if omega is None:
        return generator
    phase = jnp.exp(1j * omega.astype(cdtype) * jnp.asarray(t).astype(cdtype))
    return phase[:, None] * generator * phase.conj()[None, :]


def _real(g: Any) -> jax.Array:
    """A complex `(..., K, K)` matrix as the real `(..., 2K, 2K)` one on `[Re y; Im y]`."""
    top = jnp.concatenate([g.real, -g.imag], axis=-1)
    return jnp.concatenate([top, jnp.concatenate([g.imag, g.real], axis=-1)], axis=-2)


def _augmented_solve(config: tuple, args: Any, y0: Any, tsave: Any, jump_ts: Any, tangents: Any):
    """`y` and its derivatives `S_p` along `p` tangents of the inputs by ONE augmented solve.

    The equation is linear, `y' = G(t; args) y`, so `S_p' = G S_p + (dG/dargs . t_p) y`: the
    `S_p` are extra columns of the state matrix (one matrix product a stage for all of them)
    plus the tangent of the generator at `y`. Integrated in real arithmetic, `[Re; Im]` of the
    columns under the real `(2K, 2K)` form of `G` (XLA's complex products of these sizes are
    4 to 6x slower than the real ones); the step size is controlled on `y` alone, by the same
    RMS norm as the other modes. `tangents`: `(targs, ty0, ttsave)`, each leaf with a leading
    axis of `p` directions (`p = 0`: the value alone). Returns `(ys, dys)`:
    `(t, *y0.shape)` and `(p, t, *y0.shape)`.
    """
    dfx = _diffrax()
    method, rtol, atol, max_steps = config
    targs, ty0, ttsave = tangents
    p = ty0.shape[0]
    k, n = y0.shape
    t0 = tsave[0]
    rdtype = jnp.real(y0).dtype

    def lab_field(t: Any, z: Any, inputs: Any) -> Any:
        # Real arithmetic: the `(2K, 2K)` forms of the matrices (and of `i` times them, for
        # complex amplitudes) made once, outside the loop; XLA's complex products of these
        # sizes are 2 to 4x slower, and a real form assembled inside the loop slower still.
        pulses, args, targs, (rc, rops) = inputs
        zr = jnp.concatenate([z.real, z.imag], axis=0)  # (2K, m): [Re; Im]
        values = [_amplitude(pulse, t, z.dtype) for pulse in pulses]
        g = rc
        for a, (rop, riop) in zip(values, rops, strict=True):
            g = g + a.real * rop + a.imag * riop
        out = jax.lax.optimization_barrier(g) @ zr  # G [y, S_1, ..., S_p]
        if p > 0:  # dG_p y along each direction: the tangent of the generator's product

            def one(ta: Any) -> Any:
                return jax.jvp(lambda a: _generator(t, a) @ z[:, :n], (args,), (ta,))[1]

            extra = jnp.moveaxis(jax.vmap(one)(targs), 0, 1).reshape(k, p * n)
            extra = jnp.concatenate([extra.real, extra.imag], axis=0)
            out = out + jnp.concatenate([jnp.zeros((2 * k, n), rdtype), extra], axis=1)
        return jax.lax.complex(out[:k], out[k:])

    def frame_field(t: Any, z: Any, inputs: Any) -> Any:  # complex, the frame moves G
        args, targs = inputs
        out = _generator(t, args) @ z
        if p > 0:

            def one(ta: Any) -> Any:
                return jax.jvp(lambda a: _generator(t, a), (args,), (ta,))[1]

            d = jax.vmap(one)(targs)  # (p, K, K)
            extra = jnp.einsum("pab,bn->apn", d, z[:, :n]).reshape(k, p * n)
            out = out + jnp.concatenate([jnp.zeros((k, n), y0.dtype), extra], axis=1)
        return out

    constant, varying, omega = args
    pulses = [pulse for _, pulse in varying]
    if omega is None:
        field = lab_field
        reals = (
            _real(constant),
            [(_real(op), _real(1j * op)) for op, _ in varying],
        )
        inputs: Any = (pulses, args, targs, reals)
    else:
        field, inputs = frame_field, (args, targs)

    # diffrax's generic step here, not the written one: with the generator's tangents made
    # once a stage time and each stage's tangent terms one more product, the written step
    # measured 1.2 to 2x slower on the benchmarks' gates (interleaved, load 3 to 5).
    solver = _solver(method, written=False)

    # A shift of the start time moves the whole trajectory: S(t0) = dy0 - f(t0, y0) dt0.
    f0 = _field(t0, y0, args)
    s0 = ty0 - ttsave[:, 0].astype(y0.dtype)[:, None, None] * f0[None]
    z0 = jnp.concatenate([y0, jnp.moveaxis(s0, 0, 1).reshape(k, p * n)], axis=1)

    def norm(z: Any) -> Any:  # the RMS norm of y alone: the S_p follow its steps
        return jnp.sqrt(jnp.mean(jnp.abs(z[..., :n]) ** 2))

    controller = dfx.PIDController(rtol=rtol, atol=atol, jump_ts=jump_ts, norm=norm)
    with _complex_ok():
        solution = dfx.diffeqsolve(
            dfx.ODETerm(field),
            solver,
            t0,
            tsave[-1],
            None,
            z0,
            args=inputs,
            saveat=dfx.SaveAt(ts=tsave),
            stepsize_controller=controller,
            adjoint=dfx.ForwardMode(),
            max_steps=max_steps,
        )
    z = solution.ys  # (t, K, (p + 1) n)
    ys = z[..., :n]
    dys = jnp.moveaxis(z[..., n:].reshape(*z.shape[:-1], p, n), -2, 0)  # (p, t, K, n)
    if p == 0:
        return ys, dys
    # A shift of a later save time: + f(t_i, y_i) dt_i (the first's is in S(t0) already).
    fs = jax.vmap(lambda t, y: _field(t, y, args))(tsave, ys)
    later = ttsave.at[:, 0].set(0.0).astype(ys.dtype)
    return ys, dys + later[:, :, None, None] * fs[None]


@functools.lru_cache(maxsize=64)
def _batched_tangents(config: tuple) -> Any:
    """The tangent solve, `custom_vmap`ped: under `jacfwd` all directions are one solve."""

    @jax.custom_batching.custom_vmap
    def tangents(args: Any, y0: Any, tsave: Any, jump_ts: Any, targs: Any, ty0: Any, tts: Any):
        one = jax.tree.map(lambda x: x[None], (targs, ty0, tts))
        ys, dys = _augmented_solve(config, args, y0, tsave, jump_ts, one)
        return ys, dys[0]

    @tangents.def_vmap
    def _rule(axis_size: int, in_batched: Any, *inputs: Any) -> Any:
        primal_batched = any(jax.tree.leaves(in_batched[:4]))
        if primal_batched:  # a batch of designs: each with its own tangents, lane by lane
            full = [
                jax.tree.map(
                    lambda x, b: x if b else jnp.broadcast_to(x, (axis_size, *jnp.shape(x))),
                    leaf,
                    batched,
                )
                for leaf, batched in zip(inputs, in_batched, strict=True)
            ]
            out = jax.vmap(lambda *a: tangents(*a))(*full)
            return out, (True, True)
        args, y0, tsave, jump_ts, *tang = inputs
        tang = [
            jax.tree.map(
                lambda x, b: x if b else jnp.broadcast_to(x, (axis_size, *jnp.shape(x))),
                leaf,
                batched,
            )
            for leaf, batched in zip(tang, in_batched[4:], strict=True)
        ]
        ys, dys = _augmented_solve(config, args, y0, tsave, jump_ts, tuple(tang))
        return (ys, dys), (False, True)

    return tangents


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _sensitivity_solve(config: tuple, args: Any, y0: Any, tsave: Any, jump_ts: Any) -> Any:
    """`y(tsave)` by the adaptive solver; its JVP the forward sensitivities of one augmented
    solve, every tangent direction of `jacfwd` a block of columns of the same state."""
    none = (jax.tree.map(lambda x: jnp.zeros((0, *jnp.shape(x)), x.dtype), args),)
    none += (jnp.zeros((0, *y0.shape), y0.dtype), jnp.zeros((0, *tsave.shape), tsave.dtype))
    return _augmented_solve(config, args, y0, tsave, jump_ts, none)[0]


@_sensitivity_solve.defjvp
def _sensitivity_jvp(config: tuple, primals: Any, tangents: Any) -> Any:
    args, y0, tsave, jump_ts = primals
    targs, ty0, tts, _ = tangents
    tts = jnp.asarray(tts, dtype=tsave.dtype)
    ys, dys = _batched_tangents(config)(args, y0, tsave, jump_ts, targs, ty0, tts)
    return ys, dys
