"""Lindblad jump operators from a model's own noise channels, in its eigenbasis.

A T1 channel gives, for each ordered pair of kept levels i != j, the rate of i -> j
(scqubits' `t1_*(i, j, total=False, get_rate=True)`, upward ones at the channel's temperature
included); the channels' rates for one pair add into one operator `sqrt(rate) |j><i|`. A
pure-dephasing channel `tphi_*` gives one diagonal operator `sum_k a_k |k><k|`, `a_0 = 0`,
`a_k = sqrt(2 / Tphi(0, k))`: the coherence between the ground state and level k decays at
exactly scqubits' `1 / Tphi(0, k)`; between two excited levels i, j at `(a_i - a_j)^2 / 2`
(the levels' dispersions taken to share a sign). Rates are in the model's inverse time units
(1/ns for GHz), so `sqrt(rate)` operators go to `solve` as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from . import _basis, _errors

ParamsArg = Mapping[str, Any] | None


def _sqrt(rate: jax.Array) -> jax.Array:
    # A rate that is 0 by symmetry (a transmon's <0|n|2> at ng = 0) must not make grad NaN.
    positive = rate > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, rate, 1.0)), 0.0)


# scqubits' generic channels: the operator (and spectral density) are the user's, in options.
GENERIC = {"t1": ("noise_op", "spectral_density"), "tphi_1_over_f": ("A_noise", "noise_op")}


def _check_channel(model: Any, name: Any, given: Mapping[str, Any]) -> str:
    if isinstance(name, str) and name in GENERIC:
        missing = [a for a in GENERIC[name] if a not in given]
        if missing:
            raise ValueError(_errors.GENERIC_OPTIONS.format(name=name, missing=missing))
        return name
    if name in ("t1_effective", "t2_effective"):
        raise ValueError(_errors.NOT_A_CHANNEL.format(name=name))
    supported = model.supported_noise_channels()
    if not isinstance(name, str) or name not in supported:
        raise ValueError(_errors.UNKNOWN_CHANNEL.format(name=name, supported=supported))
    return name


def _channel_list(model: Any, channels: Any, options: Mapping[str, Any]) -> list[tuple]:
    """`[(name, options)]` from names or `(name, options)` pairs, each checked."""
    names = model.effective_noise_channels() if channels is None else list(channels)
    out = []
    for item in names:
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Mapping):
            name, given = item[0], {**options.get(item[0], {}), **item[1]}
        else:
            name, given = item, dict(options.get(item, {})) if isinstance(item, str) else {}
        out.append((_check_channel(model, name, given), given))
    return out


def _rates(model: Any, channels: Sequence[tuple], params: ParamsArg, k: int):
    """The summed T1 rates `(k, k)` (row i, column j: i -> j) and a dephasing row per channel."""
    esys = model.eigensys(params, evals_count=k)
    t1 = [[jnp.zeros(()) for _ in range(k)] for _ in range(k)]
    dephasing = []
    for name, given in channels:
        method = getattr(model, name)
        if name.startswith("t1"):
            for i in range(k):
                for j in range(k):
                    if i != j:
                        rate = method(
                            i=i, j=j, total=False, get_rate=True, esys=esys, params=params, **given
                        )
                        t1[i][j] = t1[i][j] + rate
        else:
            row = [jnp.zeros(())]
            for j in range(1, k):
                rate = method(i=0, j=j, get_rate=True, esys=esys, params=params, **given)
                row.append(_sqrt(2.0 * rate))
            dephasing.append(jnp.stack(row))
    return t1, dephasing


def jump_operators(
    model: Any,
    params: ParamsArg = None,
    levels: int = 4,
    channels: Sequence[Any] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> jax.Array:
    """The Lindblad jump operators of the model's noise channels between its kept levels.

    Args:
        model: a `Model` (a qubit) or a `HilbertSpaceModel`. For a `HilbertSpaceModel` each
            channel is `(subsystem, name)` or `(subsystem, name, options)`, the subsystem the
            scqubits object in it: the subsystem's rates between its bare levels, as
            operators on it, in the dressed basis.
        params: the model's params; None keeps its values.
        levels: how many levels to keep (static).
        channels: the channel names (`"t1_capacitive"`, `"tphi_1_over_f_flux"`, ...) or
            `(name, options)` pairs; scqubits' generic `"t1"` and `"tphi_1_over_f"` take their
            operator (and spectral density, or `A_noise`) in the options, so one model can
            have several. None uses `model.effective_noise_channels()`, scqubits' default set.
        options: per channel name, keyword arguments for its method (`{"t1_capacitive":
            {"T": 0.02}}`); numbers may be JAX values (differentiable).

    Returns:
        `(m, levels, levels)`: first `sqrt(rate) |j><i|` for each ordered pair i != j of kept
        levels (row-major in i, then j), the T1 channels' rates summed, then one diagonal
        dephasing operator per `tphi` channel (see the module docstring); in units of
        sqrt(1/ns). Differentiable in `params` and in numeric options under `jit`, `vmap` and
        `grad` (dense path; float64 with x64).

    Raises:
        ValueError: a channel the model does not have, one that is not `t1_*`/`tphi_*`, or a
            generic channel without its operator.

    Example:
        >>> import scqubits, jaxbridge.scqubits as jbq
        >>> from jaxbridge.scqubits import dynamics
        >>> m = jbq.model(scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.3, ncut=10))
        >>> dynamics.jump_operators(m, levels=2, channels=["t1_capacitive"]).shape
        (2, 2, 2)
    """
    options = dict(options or {})
    if _basis.is_hilbertspace(model):
        return _hilbertspace_jumps(model, params, levels, channels, options)
    k = _basis.check_levels(model, levels, "jump_operators")
    t1, dephasing = _rates(model, _channel_list(model, channels, options), params, k)
    return _assemble(t1, dephasing, k)


def _assemble(t1: list[list[Any]], dephasing: list[Any], k: int) -> jax.Array:
    ops = []
    eye = jnp.eye(k)
    for i in range(k):
        for j in range(k):
            if i != j:
                ops.append(_sqrt(t1[i][j]) * jnp.outer(eye[j], eye[i]))  # |j><i|
    ops += [jnp.diag(a) for a in dephasing]
    return jnp.stack(ops).astype(jnp.result_type(float))


def _hilbertspace_jumps(
    model: Any,
    params: ParamsArg,
    levels: int,
    channels: Sequence[Any] | None,
    options: Mapping[str, Any],
) -> jax.Array:
    k = _basis.check_levels(model, levels, "jump_operators")
    if not channels or not all(isinstance(c, tuple) and len(c) in (2, 3) for c in channels):
        raise ValueError(_errors.HS_CHANNELS.format(got=channels))
    ops = []
    for subsystem, name, *given in channels:
        id_str, sub = _basis.subsystem_model(model, subsystem, "jump_operators")
        if sub is None:
            raise ValueError(_errors.HS_CHANNELS.format(got=(subsystem, name)))
        named = _channel_list(sub, [(name, given[0]) if given else name], options)
        s = list(model.params).index(id_str)
        t = int(model.subsystem_dims[s])
        sub_params = _basis.subsystem_params(model, id_str, params)
        t1, dephasing = _rates(sub, named, sub_params, t)
        bare = _assemble(t1, dephasing, t)
        # The subsystem's own eigenbasis has LAPACK's phases; a jump operator's overall phase
        # does not change the master equation, but |j><i| between two bare levels does need
        # them: carry them to the composite's with the overlap phases.
        _, v_bare = model.bare_eigensys(id_str, params, evals_count=t)
        _, v_own = sub.eigensys(sub_params, evals_count=t)
        phase = jnp.einsum("ni,ni->i", v_own.conj(), v_bare)
        for op in bare:
            op = phase.conj()[:, None] * op * phase[None, :]
            ops.append(_basis.dressed(model, _basis.embed(model, subsystem, op), params, k))
    return jnp.stack(ops)
