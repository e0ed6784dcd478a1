"""The channel engine: noise rates from eigenpairs, matrix elements and spectral densities.

A plan is a list of `(channel name, scale, options)`; `program` turns one into a JAX function of
the parameter values (and an optional given eigensystem) returning the summed rate, or its time,
at every point of the parameters' batch shape. Every channel of a plan shares one eigensystem,
and each operator's matrix elements (and each `Spectral` factor's projection of the
eigenvectors) are computed once a program, whichever channels use them. The channels
themselves (`_channel.Channel`) and the spectral densities (`_densities`) are given; nothing
here knows a qubit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sparse

from . import _params
from ._channel import Channel
from ._densities import OMEGA_LOW, T_EXP, density
from ._terms import Fixed, Params, Spectral, Terms, complex_of

BAD_LEVELS = "Level indices 'i' and 'j' must be different, and i,j>=0; got i={i!r}, j={j!r}."

#: `(name, scale, static options)` for each channel of a plan: part of a program's cache key.
StaticPlan = tuple[tuple[str, float, tuple[tuple[str, Any], ...]], ...]
Eigensys = Callable[[Params, int], tuple[jax.Array, jax.Array]]


class Elements:
    """`<a|O(p)|b>` for the eigenvectors a, b, without forming `O(p)` for `Spectral` terms."""

    def __init__(self, terms: Terms) -> None:
        self.terms = terms
        self.parts: list[Any] = []
        for op in terms.operators:
            if isinstance(op, Fixed):
                m = op.matrix
                if m.shape[0] ** 2 <= 250_000:  # pyright: ignore[reportOptionalSubscript]
                    self.parts.append(("dense", np.asarray(m.toarray())))
                else:
                    coo = sparse.coo_array(m)
                    self.parts.append(("coo", (coo.row, coo.col, coo.data)))
            else:
                assert isinstance(op, Spectral)
                self.parts.append(("spectral", op))

    def __call__(self, p: Params, v: jax.Array, memo: dict, levels: Any) -> jax.Array:
        """`v^H O(p) v` for the columns of `v` (`(N, m)` -> `(m, m)`).

        `memo` keeps each `Spectral` factor's projection of `v` (keyed by the factor and
        `levels`, what `v` holds) for the other operators of the same program.
        """
        cs = [jnp.asarray(c) for c in self.terms.coefficients(p)]
        complex_ = self.terms.is_complex or jnp.iscomplexobj(v) or any(map(jnp.iscomplexobj, cs))
        dtype = complex_of(v.dtype) if complex_ else v.dtype
        v = v.astype(dtype)
        out = jnp.zeros((v.shape[-1], v.shape[-1]), dtype)
        for (kind, data), c in zip(self.parts, cs):
            c = c.astype(dtype)
            if kind == "dense":
                out = out + c * (v.conj().T @ (jnp.asarray(data, dtype) @ v))
            elif kind == "coo":
                rows, cols, vals = data
                ov = jnp.zeros_like(v).at[rows].add(jnp.asarray(vals, dtype)[:, None] * v[cols])
                out = out + c * (v.conj().T @ ov)
            else:
                op = data
                dl, d, dr = op.left.shape[0], op.vectors.shape[0], op.right.shape[0]
                key = (id(op.vectors), id(op.left), id(op.right), levels, dtype)
                if key not in memo:
                    t = jnp.einsum("dm,adrk->amrk", jnp.asarray(op.vectors, dtype).conj(),
                                   v.reshape(dl, d, dr, -1))  # fmt: skip
                    u = t
                    if dl > 1:
                        u = jnp.einsum("ab,bmrk->amrk", jnp.asarray(op.left, dtype), u)
                    if dr > 1:
                        u = jnp.einsum("rq,amqk->amrk", jnp.asarray(op.right, dtype), u)
                    memo[key] = (t, u)
                t, u = memo[key]
                out = out + jnp.einsum("amri,m,amrj->ij", t.conj(), c, u)
        return out


def time_of(rate: jax.Array) -> jax.Array:
    """`1 / rate`, `inf` where the rate is 0 (as scqubits), with a finite derivative elsewhere."""
    zero = rate == 0
    return jnp.where(zero, jnp.inf, 1.0 / jnp.where(zero, 1.0, rate))


def is_static(value: Any) -> bool:
    """Whether an option is part of a program's cache key (not a JAX value)."""
    return value is None or isinstance(value, bool | int | str | Terms) or callable(value)


def levels(o: Mapping[str, Any]) -> tuple[int, int]:
    """The transition `(i, j)` of a channel's options, checked as scqubits checks it.

    Raises:
        TypeError: `i` or `j` is not an integer.
        ValueError: they are equal or negative.
    """
    i, j = o["i"], o["j"]
    if not isinstance(i, int | np.integer) or not isinstance(j, int | np.integer):
        raise TypeError(f"the level indices i and j must be integers; got i={i!r}, j={j!r}.")
    if i == j or i < 0 or j < 0:
        raise ValueError(BAD_LEVELS.format(i=i, j=j))
    return int(i), int(j)


class Engine:
    """The rates of one model's channels.

    Args:
        channel: the model's `Channel` of a name (it raises for an unsupported one).
        eigensys: `eigensys(p, k)`, the k lowest eigenpairs at one parameter point.
    """

    def __init__(self, channel: Callable[[str], Channel], eigensys: Eigensys) -> None:
        self.channel = channel
        self.eigensys = eigensys
        self._elements: dict[Terms, Elements] = {}

    def levels_of(self, name: str, o: Mapping[str, Any]) -> tuple[int, int]:
        """The levels channel `name` with options `o` involves (the highest of its members)."""
        channel = self.channel(name)
        if channel.kind == "rates":
            return max(self.levels_of(m, {**o, **mo}) for m, mo in channel.members)
        return levels(o)

    def program(self, static: StaticPlan, k: int, get_rate: bool, factor: float) -> Callable:
        """The JAX function `(values, dynamic, esys) -> rate or time` of a plan.

        Args:
            static: the plan's names, scales and static options.
            k: how many levels to diagonalise for (the highest level used plus one).
            get_rate: return the summed rate instead of its time.
            factor: scqubits' frequency unit in Hz (`_densities.units()`).

        Returns:
            A function of the parameter values (`_params.values`), the plan's dynamic options
            (one dict per channel) and `esys` (None, or `(evals, evecs)` with the values'
            batch shape in front), with that batch shape.
        """

        def one(p: Params, dynamic: Sequence[dict[str, Any]], es: Any) -> jax.Array:
            w, v = self.eigensys(p, k) if es is None else es
            rate = jnp.zeros((), w.dtype)
            memo: dict = {}
            for (name, scale, items), dyn in zip(static, dynamic):
                o = {**dict(items), **dyn}
                rate = rate + scale * self.rate(name, p, w, v, o, factor, memo)
            return rate if get_rate else time_of(rate)

        def run(values: dict[str, jax.Array], dynamic: list[dict[str, Any]], esys: Any) -> Any:
            if esys is None:
                return _params.map_batch(lambda p: one(p, dynamic, None), values)
            es = tuple(jnp.asarray(x) for x in esys)
            fn = lambda p, e: one(p, dynamic, e)
            return _params.map_batch(fn, values, es, core_ndims=(0, (1, 2)))

        return run

    def elements(self, terms: Terms) -> Elements:
        """The (cached) matrix-element evaluator of `terms`."""
        if terms not in self._elements:
            self._elements[terms] = Elements(terms)
        return self._elements[terms]

    def rate(
        self, name: str, p: Params, w: jax.Array, v: jax.Array, o: dict, factor: float, memo: dict
    ) -> jax.Array:
        """Channel `name`'s rate at one point from the eigenpairs `(w, v)` and options `o`."""
        channel = self.channel(name)
        if channel.kind == "rates":
            return sum(
                (self.rate(m, p, w, v, {**o, **mo}, factor, memo) for m, mo in channel.members),
                start=jnp.zeros((), w.dtype),
            )
        i, j = levels(o)

        def elements(op: Terms) -> jax.Array:
            # Channels share operators (Fluxonium's d_hamiltonian_d_flux serves tphi and the
            # flux-bias line) and their Spectral factors: each is computed once a program.
            key = (id(op), i, j)
            if key not in memo:
                pair = jnp.stack([v[:, i], v[:, j]], axis=1)
                memo[key] = self.elements(op)(p, pair, memo, (i, j))
            return memo[key]

        if channel.kind == "tphi":
            assert channel.operator is not None
            m = elements(channel.operator)
            shift = jnp.real(m[0, 0] - m[1, 1])
            low, t_exp = o.get("omega_low", OMEGA_LOW), o.get("t_exp", T_EXP)
            scale = jnp.sqrt(2 * jnp.abs(jnp.log(jnp.asarray(low) * t_exp)))
            return jnp.abs(shift) * o["A_noise"] * scale * 2 * np.pi
        omega = 2 * np.pi * (w[i] - w[j])
        rate = jnp.zeros((), w.dtype)
        override = o.get("noise_op") or o.get("noise_op_method")
        for part in channel.parts:
            op = override if override is not None else part.operator
            m = elements(op)
            s = density(
                part.density, omega, o, p, factor, part.energy, part.fixed_t, part.q_one_arg
            )
            rate = rate + jnp.abs(m[0, 1]) ** 2 * s
        return rate
