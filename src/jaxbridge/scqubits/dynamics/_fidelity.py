"""Gate and transition fidelities, in the rotating frame of the static Hamiltonian.

A gate acts on a computational subspace of the kept levels (for a fluxonium `[0, 1]`, for two
transmons the dressed indices of `|00>, |01>, |10>, |11>`). The average gate fidelity of the
evolution E against a target unitary W on that subspace (leakage out of it counts as error) is

    F = (sum_jk <w_j| E(|j><k|) |w_k> + sum_j tr[P_W E(|j><j|)]) / (d (d + 1)),

`w_j = W|j>`, `P_W` the projector on the subspace, d its dimension; for a unitary evolution U
it is `(|tr M|^2 + tr M M^dag) / (d (d + 1))` with `M = W^dag P U P`. Without jump operators
this takes d kets, with them d^2 operators `|j><k|` through the master equation (linear, so
not Hermitian ones too). The states are judged in the frame of the levels,
`exp(i 2 pi diag(H0) t)` (the one `solve` integrates in), so a gate is judged without the free
precession of its levels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _errors
from ._solve import solve


def _subspace(subspace: Sequence[Any], k: int, method: str) -> list[int]:
    try:
        levels = [int(s) for s in subspace]
        ok = all(float(s) == int(s) for s in subspace)
    except (TypeError, ValueError):
        levels, ok = [], False
    if not ok or not levels or len(set(levels)) != len(levels):
        ok = False
    if not ok or any(not 0 <= s < k for s in levels):
        raise ValueError(_errors.SUBSPACE.format(method=method, levels=k, last=k - 1, got=subspace))
    return levels


def gate_fidelity(
    hamiltonian: Any,
    drives: Sequence[Any],
    target: Any,
    subspace: Sequence[int],
    tsave: Any,
    *,
    jump_ops: Any = None,
    frame: bool = True,
    **solver: Any,
) -> jax.Array:
    """The average gate fidelity of the driven evolution against `target` at each of `tsave`.

    Args:
        hamiltonian: `(k, k)` static Hamiltonian (GHz), `static_hamiltonian(...)`.
        drives: pairs `(operator, pulse)`, as for `solve`.
        target: `(d, d)` unitary on `subspace`.
        subspace: d distinct kept levels (static ints), the computational basis in order.
        tsave: `(t,)` times (ns), the first the start of the gate.
        jump_ops: jump operators (`jump_operators`), or None for a closed system.
        frame: judge in the rotating frame of the levels, `exp(i 2 pi diag(H0) t)` (True),
            or in the lab frame.
        **solver: `rtol`, `atol`, `max_steps`, `gradient`, as for `solve`.

    Returns:
        `(t,)` fidelities in [0, 1], real. Differentiable with respect to the pulses' arrays,
        the operators and hence a model's params, under `jit`, `vmap` and `grad` (float64
        with `jax_enable_x64` for 1e-6 accuracy).

    Raises:
        ValueError: a subspace of levels that were not kept, a target of the wrong shape.

    Example:
        >>> import jax, jax.numpy as jnp, scqubits, jaxbridge.scqubits as jbq
        >>> from jaxbridge.scqubits import dynamics
        >>> m = jbq.model(scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=8))
        >>> h = dynamics.static_hamiltonian(m, levels=3)
        >>> f = dynamics.gate_fidelity(h, [], jnp.eye(2), [0, 1], jnp.array([0.0, 5.0]))
        >>> f.shape
        (2,)
    """
    cdtype = jnp.result_type(complex)
    k = jnp.shape(hamiltonian)[-1]
    levels = _subspace(subspace, k, "gate_fidelity")
    d = len(levels)
    target = jnp.asarray(target)
    if target.shape != (d, d):
        raise ValueError(
            _errors.TARGET_SHAPE.format(d=d, subspace=list(subspace), got=target.shape)
        )
    embed = jnp.asarray(np.eye(k)[:, levels]).astype(cdtype)  # (k, d): |j> of the subspace
    w = embed @ target.astype(cdtype)  # (k, d): W|j>
    picture = "interaction" if frame else "lab"
    if jump_ops is None:
        kets = jnp.swapaxes(embed, 0, 1)[:, :, None]  # (d, k, 1)
        psi = solve(hamiltonian, drives, kets, tsave, frame=picture, **solver)[..., 0]
        m = jnp.einsum("aj,kta->tjk", w.conj(), psi)  # M[j, k] = <w_j|U|k>
        trace = jnp.einsum("tjj->t", m)
        return (jnp.abs(trace) ** 2 + jnp.sum(jnp.abs(m) ** 2, axis=(-2, -1))) / (d * (d + 1))
    rho0 = jnp.einsum("aj,bk->jkab", embed, embed.conj()).reshape(d * d, k, k)
    rho = solve(hamiltonian, drives, rho0, tsave, jump_ops=jump_ops, frame=picture, **solver)
    rho = rho.reshape(d, d, *rho.shape[1:])  # (j, k, t, a, b)
    coherent = jnp.einsum("aj,jktab,bk->t", w.conj(), rho, w)
    # sum_j tr[P_W E(|j><j|)] = sum_{j, l} <w_l|rho_jj|w_l>: every l, not only l = j.
    kept = jnp.einsum("al,jjtab,bl->t", w.conj(), rho, w)
    return jnp.real(coherent + kept) / (d * (d + 1))


def transition_fidelity(
    hamiltonian: Any,
    drives: Sequence[Any],
    initial: int,
    final: int,
    tsave: Any,
    *,
    jump_ops: Any = None,
    **solver: Any,
) -> jax.Array:
    """The population of level `final` after starting in level `initial`, at each of `tsave`.

    The state fidelity `<final|rho(t)|final>` (`|<final|psi(t)>|^2` without jump operators),
    independent of the frame.

    Args:
        hamiltonian: `(k, k)` static Hamiltonian (GHz).
        drives: as for `solve`.
        initial, final: kept levels (static ints).
        tsave: `(t,)` times (ns).
        jump_ops: jump operators, or None.
        **solver: as for `solve`.

    Returns:
        `(t,)`, real; differentiable as `gate_fidelity`.

    Raises:
        ValueError: a level that was not kept.

    Example:
        >>> import jax.numpy as jnp, scqubits, jaxbridge.scqubits as jbq
        >>> from jaxbridge.scqubits import dynamics
        >>> m = jbq.model(scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=8))
        >>> h = dynamics.static_hamiltonian(m, levels=2)
        >>> p = dynamics.transition_fidelity(h, [], 0, 0, jnp.array([0.0, 1.0]))
        >>> [round(float(x), 6) for x in p]
        [1.0, 1.0]
    """
    cdtype = jnp.result_type(complex)
    k = jnp.shape(hamiltonian)[-1]
    ok = all(isinstance(x, (int, np.integer)) and 0 <= x < k for x in (initial, final))
    if not ok:
        raise ValueError(
            _errors.TRANSITION.format(levels=k, last=k - 1, initial=initial, final=final)
        )
    ket = jnp.zeros((k, 1), dtype=cdtype).at[int(initial), 0].set(1.0)
    states = solve(
        hamiltonian, drives, ket, tsave, jump_ops=jump_ops, frame="interaction", **solver
    )
    if jump_ops is None:
        return jnp.abs(states[:, int(final), 0]) ** 2
    return jnp.real(states[:, int(final), int(final)])
