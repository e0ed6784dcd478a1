"""The channel engine: noise rates from eigenpairs, matrix elements and spectral densities.

A plan is a list of `(channel name, scale, options)`; `program` turns one into a JAX function of
the parameter values (and an optional given eigensystem) returning the summed rate, or its time,
at every point of the parameters' batch shape. Every channel of a plan shares one eigensystem,
and each operator's matrix elements (and each `Spectral` factor's projection of the
eigenvectors) are computed once a program, whichever channels use them. The channels
themselves (`_channel.Channel`) and the spectral densities (`_densities`) are given; nothing
here knows a qubit. Without a given eigensystem, a model that has one (`Engine(spectrum=)`, a
dense single qubit) supplies the levels and the elements from one host call instead
(`_eigen.NoiseSpectrum`); the channels read only each operator's `Levels`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sparse
from jax.core import Tracer

from .. import _params
from .._terms import Params, Spectral, Terms, complex_of
from ._channel import Channel
from ._densities import OMEGA_LOW, OPTION, T_EXP, Term, column, spectral_sum, term

BAD_LEVELS = "Level indices 'i' and 'j' must be different, and i,j>=0; got i={i!r}, j={j!r}."

#: `(name, scale, static options)` for each channel of a plan: part of a program's cache key.
StaticPlan = tuple[tuple[str, float, tuple[tuple[str, Any], ...]], ...]
Eigensys = Callable[[Params, int], tuple[jax.Array, jax.Array]]
#: `spectrum(ops, k)`: levels and matrix elements of `ops` in one call, or None (see `Engine`).
Spectrum = Callable[
    [tuple[Terms, ...], int],
    Callable[[Params], tuple[jax.Array, jax.Array, jax.Array] | None] | None,
]


class Levels(NamedTuple):
    """What the channels read of an operator `O` between the levels: `Re <i|O|i>` (`(k,)`)
    and `|<i|O|j>|^2` (`(k, k)`), both independent of the eigenvectors' phases."""

    diag: jax.Array
    sq: jax.Array


class Elements:
    """`<a|O(p)|b>` of several operators between the columns of `v`, each factor once.

    The operators' fixed matrices are stacked into one product with `v`, and each `Spectral`
    factor projects `v` once for every operator built on it (Fluxonium's channels share one
    factor, `phi`'s eigenvectors): a program holds one such computation whatever its channels.
    `O(p)` itself is never formed for a `Spectral` term.
    """

    def __init__(self, ops: Sequence[Terms]) -> None:
        self.ops = tuple(ops)
        dense: list[tuple[int, int, np.ndarray]] = []
        self.coo: list[tuple[int, int, Any]] = []
        factors: dict[int, tuple[Spectral, list[tuple[int, int]]]] = {}
        for o, terms in enumerate(self.ops):
            for t, op in enumerate(terms.operators):
                if isinstance(op, Spectral):
                    factors.setdefault(id(op), (op, []))[1].append((o, t))
                    continue
                m = op.matrix
                if m.shape[0] ** 2 <= 250_000:  # pyright: ignore[reportOptionalSubscript]
                    dense.append((o, t, np.asarray(m.toarray())))
                else:
                    coo = sparse.coo_array(m)
                    self.coo.append((o, t, (coo.row, coo.col, coo.data)))
        self.dense_at = [(o, t) for o, t, _ in dense]
        self.dense = np.stack([m for _, _, m in dense]) if dense else None
        self.factors = list(factors.values())

    def __call__(self, p: Params, v: jax.Array) -> list[jax.Array]:
        """Each operator's `v^H O(p) v` (`(N, m)` -> `(m, m)`), in `ops`' order."""
        cs = [[jnp.asarray(c) for c in terms.coefficients(p)] for terms in self.ops]
        complex_ = (
            jnp.iscomplexobj(v)
            or any(terms.is_complex for terms in self.ops)
            or any(jnp.iscomplexobj(c) for row in cs for c in row)
        )
        dtype = complex_of(v.dtype) if complex_ else v.dtype
        v = v.astype(dtype)
        m = v.shape[-1]
        out = [jnp.zeros((m, m), dtype) for _ in self.ops]
        if self.dense is not None:
            av = jnp.einsum("nab,bk->nak", jnp.asarray(self.dense, dtype), v)
            each = jnp.einsum("ai,naj->nij", v.conj(), av)
            for n, (o, t) in enumerate(self.dense_at):
                out[o] = out[o] + cs[o][t].astype(dtype) * each[n]
        for o, t, (rows, cols, vals) in self.coo:
            ov = jnp.zeros_like(v).at[rows].add(jnp.asarray(vals, dtype)[:, None] * v[cols])
            out[o] = out[o] + cs[o][t].astype(dtype) * (v.conj().T @ ov)
        for op, uses in self.factors:
            dl, d, dr = op.left.shape[0], op.vectors.shape[0], op.right.shape[0]
            t_ = jnp.einsum("dm,adrk->amrk", jnp.asarray(op.vectors, dtype).conj(),
                            v.reshape(dl, d, dr, -1))  # fmt: skip
            u = t_
            if dl > 1:
                u = jnp.einsum("ab,bmrk->amrk", jnp.asarray(op.left, dtype), u)
            if dr > 1:
                u = jnp.einsum("rq,amqk->amrk", jnp.asarray(op.right, dtype), u)
            stacked = jnp.stack([cs[o][t].astype(dtype) for o, t in uses])
            each = jnp.einsum("amri,nm,amrj->nij", t_.conj(), stacked, u)
            for n, (o, _) in enumerate(uses):
                out[o] = out[o] + each[n]
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
        spectrum: `spectrum(ops, k)`, where the model has one, the `_eigen.NoiseSpectrum` of
            operators `ops` (levels and matrix elements in one host call with its
            derivatives), or None where it does not serve the model: used where no
            eigensystem is given, in place of `eigensys` and `Elements`.
    """

    def __init__(
        self,
        channel: Callable[[str], Channel],
        eigensys: Eigensys,
        spectrum: Spectrum | None = None,
    ) -> None:
        self.channel = channel
        self.eigensys = eigensys
        self.spectrum = spectrum
        self._elements: dict[tuple[int, ...], tuple[tuple[Terms, ...], Elements]] = {}

    def levels_of(self, name: str, o: Mapping[str, Any]) -> tuple[int, int]:
        """The levels channel `name` with options `o` involves (the highest of its members)."""
        channel = self.channel(name)
        if channel.kind == "rates":
            return max(self.levels_of(m, {**o, **mo}) for m, mo in channel.members)
        return levels(o)

    def program(
        self,
        static: StaticPlan,
        k: int,
        get_rate: bool,
        factor: float,
        shared: tuple[Terms, ...] | None = None,
    ) -> Callable:
        """The JAX function `(values, dynamic, esys, found) -> rate or time` of a plan.

        Args:
            static: the plan's names, scales and static options.
            k: how many levels to diagonalise for (the highest level used plus one).
            get_rate: return the summed rate instead of its time.
            factor: scqubits' frequency unit in Hz (`_densities.units()`).
            shared: the operators of a spectrum computed before the program and passed to
                it as `found` (`shared_spectrum`: one for several plans of a trace), each of
                the plan's operators among them; None for the program's own.

        Returns:
            A function of the parameter values (`_params.values`), the plan's dynamic options
            (one dict per channel), `esys` (None, or `(evals, evecs)` with the values' batch
            shape in front) and `found` (`shared_spectrum`'s, with `shared`; else None),
            with that batch shape.
        """

        ops = self.operators(static) if shared is None else shared
        evaluate = self.elements(ops)
        spectrum = None
        if shared is None and self.spectrum is not None:
            spectrum = self.spectrum(ops, k)

        def levels_at(p: Params, es: Any, given: Any = None) -> tuple[jax.Array, Levels]:
            """The levels and every operator's `Levels` between them, stacked in `ops`'
            order."""
            if given is not None:
                w, diag, sq = given
                return w, Levels(diag, sq)
            found = spectrum(p) if spectrum is not None and es is None else None
            if found is not None:
                w, diag, sq = found
                return w, Levels(diag, sq)
            w, v = self.eigensys(p, k) if es is None else es
            # Every operator's elements between every level, in one computation (k is small).
            m = jnp.stack(evaluate(p, v))
            # |m|^2 as re^2 + im^2: its derivative is 0, not NaN, where m is exactly 0.
            sq = jnp.real(m) ** 2 + jnp.imag(m) ** 2
            return w, Levels(jnp.real(jnp.diagonal(m, axis1=-2, axis2=-1)), sq)

        index = {id(op): n for n, op in enumerate(ops)}

        def one(
            p: Params, dynamic: Sequence[dict[str, Any]], es: Any, given: Any = None
        ) -> jax.Array:
            w, elements = levels_at(p, es, given)
            rates = Rates(index)
            for (name, scale, items), dyn in zip(static, dynamic):
                o = {**dict(items), **dyn}
                self.rate(name, p, o, rates, scale)
            rate = rates.total(w, elements, factor)
            return rate if get_rate else time_of(rate)

        def run(
            values: dict[str, jax.Array],
            dynamic: list[dict[str, Any]],
            esys: Any,
            found: Any = None,
        ) -> Any:
            if found is not None:
                fn = lambda p, g: one(p, dynamic, None, g)
                return _params.map_batch(fn, values, tuple(found), core_ndims=(0, (1, 2, 3)))
            if esys is None:
                return _params.map_batch(lambda p: one(p, dynamic, None), values)
            es = tuple(jnp.asarray(x) for x in esys)
            fn = lambda p, e: one(p, dynamic, e)
            return _params.map_batch(fn, values, es, core_ndims=(0, (1, 2)))

        return run

    def shared_spectrum(self, ops: tuple[Terms, ...], k: int) -> Callable | None:
        """`values -> (w, diag, sq)`, or None, with the values' batch shape in front: the
        spectrum of `ops` (`Engine(spectrum=)`'s) at every point, for `program(shared=ops)`;
        None where the model has no such spectrum (each program then computes its own).
        The function itself returns None where the spectrum does not serve the parameters
        (a complex coefficient: the programs' JAX path serves those)."""
        spectrum = self.spectrum(ops, k) if self.spectrum is not None else None
        if spectrum is None:
            return None

        def run(values: dict[str, jax.Array]) -> Any:
            return _params.map_batch(spectrum, values)  # None is an empty pytree, as under vmap

        return run

    def operators(self, static: StaticPlan) -> tuple[Terms, ...]:
        """Every operator the plan's channels take matrix elements of, each once."""
        found: dict[int, Terms] = {}

        def visit(name: str, o: Mapping[str, Any]) -> None:
            channel = self.channel(name)
            if channel.kind == "rates":
                for member, mo in channel.members:
                    visit(member, {**o, **mo})
            elif channel.kind == "tphi":
                assert channel.operator is not None
                found.setdefault(id(channel.operator), channel.operator)
            else:
                override = o.get("noise_op") or o.get("noise_op_method")
                for part in channel.parts:
                    op = override if override is not None else part.operator
                    found.setdefault(id(op), op)

        for name, _, items in static:
            visit(name, dict(items))
        return tuple(found.values())

    def elements(self, ops: tuple[Terms, ...]) -> Elements:
        """The (cached) matrix-element evaluator of the operators `ops`."""
        key = tuple(map(id, ops))
        if key not in self._elements:
            self._elements[key] = (ops, Elements(ops))  # `ops` kept: their ids stay theirs
        return self._elements[key][1]

    def rate(self, name: str, p: Params, o: dict, rates: Rates, scale: float = 1.0) -> None:
        """Adds `scale` times channel `name`'s rate at the parameters `p` under the options
        `o` to `rates`."""
        channel = self.channel(name)
        if channel.kind == "rates":
            for m, mo in channel.members:
                self.rate(m, p, {**o, **mo}, rates, scale)
            return
        i, j = levels(o)
        if channel.kind == "tphi":
            assert channel.operator is not None
            low, t_exp = o.get("omega_low", OMEGA_LOW), o.get("t_exp", T_EXP)
            rates.dephasing(scale, channel.operator, i, j, o["A_noise"], low, t_exp)
            return
        override = o.get("noise_op") or o.get("noise_op_method")
        for part in channel.parts:
            op = override if override is not None else part.operator
            key = OPTION[part.density]
            po = {**o, key: part.option} if part.option is not None and o.get(key) is None else o
            found = term(part.density, po, p, part.energy, part.fixed_t, part.q_one_arg)
            rates.relaxation(scale, op, i, j, found)


class Rates:
    """The terms of a rate at one point, summed at once: the relaxation terms
    `scale |<i|O|j>|^2 S(omega_ij)` (their frequencies and elements gathered in one operation
    each, their densities in one host call, `_densities.spectral_sum`) and the 1/f dephasing
    terms `scale |<i|O|i> - <j|O|j>| A sqrt(2 |ln(omega_low t_exp)|) 2 pi`.

    Args:
        index: each operator's position (by `id`) in the stacked `Levels`.
    """

    def __init__(self, index: Mapping[int, int]) -> None:
        self.index = index
        self.t1: list[tuple[float, int, int, int, Term]] = []
        self.tphi: list[tuple[float, int, int, int, Any]] = []

    def relaxation(self, scale: float, op: Terms, i: int, j: int, found: Term) -> None:
        """Adds `scale |<i|op|j>|^2 S(omega_ij)`, `S` the density `found`."""
        self.t1.append((scale, self.index[id(op)], i, j, found))

    def dephasing(
        self, scale: float, op: Terms, i: int, j: int, amplitude: Any, low: Any, t_exp: Any
    ) -> None:
        """Adds scqubits' 1/f dephasing rate by `op` between levels `i` and `j`."""
        traced = any(isinstance(v, Tracer) for v in (amplitude, low, t_exp))
        xp = jnp if traced else np
        a = amplitude * xp.sqrt(2 * xp.abs(xp.log(xp.asarray(low) * t_exp))) * 2 * np.pi
        self.tphi.append((scale, self.index[id(op)], i, j, a))

    def total(self, w: jax.Array, elements: Levels, factor: float) -> jax.Array:
        """The sum of every term, from the levels `w` and the operators' stacked `elements`."""
        rate = jnp.zeros((), w.dtype)
        if self.t1:
            scale, n, i, j, terms = (list(x) for x in zip(*self.t1))
            n_, i_, j_ = np.asarray(n), np.asarray(i), np.asarray(j)
            omega = 2 * np.pi * (w[i_] - w[j_])
            weight = np.asarray(scale, w.dtype) * elements.sq[n_, i_, j_]
            rate = rate + spectral_sum(terms, omega, weight, factor)
        if self.tphi:
            scale, n, i, j, a = (list(x) for x in zip(*self.tphi))
            n_, i_, j_ = np.asarray(n), np.asarray(i), np.asarray(j)
            shift = jnp.abs(elements.diag[n_, i_] - elements.diag[n_, j_])
            amplitude = column(a, w.dtype) * np.asarray(scale, w.dtype)
            rate = rate + jnp.dot(shift, amplitude)
        return rate
