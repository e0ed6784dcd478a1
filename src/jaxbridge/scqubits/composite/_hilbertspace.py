"""`jaxbridge.scqubits.model(hilbertspace)`: a scqubits `HilbertSpace` as JAX functions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from ... import _host
from .. import _params
from .._eigen import dressed_structure, eigh_k, eigvalsh_k
from . import _hs_errors as _errors
from ._branch import LabelAmbiguityError, branch_labels, energy_order, lexical_order
from ._composite import Composite, ExprTerm, Factor, ProductTerm, Term
from ._dressed import bare_phases, common, components, matrix_term
from ._expr import has_complex_literal
from ._lookup import dressed_indices, energy_at
from ._subsystems import OscillatorPart, Part, as_matrix, fix_phases, part
from ._transitions import Planner, State, columns, warn_hybridized

if TYPE_CHECKING:  # jaxtyping is a test-time dependency only
    from jaxtyping import Array, Float, Inexact, Int

    Matrices = Inexact[Array, "*batch n n"]
    Levels = Float[Array, "*batch k"]
    Vectors = Inexact[Array, "*batch n k"]
    Energies = Float[Array, "*batch"]
    Indices = Int[Array, "*batch"]
    Columns = Float[Array, "*batch n"]
    BareLabels = Int[Array, "*batch c m"]
    Weights = Inexact[Array, "*batch c"]

ParamsArg = Mapping[str, Any] | None


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float | complex | np.number) and not isinstance(x, bool)


def _number(x: Any) -> float | complex:
    """A real default stays real; a complex one with a nonzero imaginary part is complex."""
    z = complex(x)
    return z if z.imag != 0 else z.real


def _read_terms(hs: Any, parts: list[Part]) -> tuple[list[Term], list[Any]]:
    """Each interaction term as a `Term`, and its default entry of `params["g"]`."""
    import qutip
    from scqubits.core.hilbert_space import InteractionTerm, InteractionTermStr

    terms: list[Term] = []
    defaults: list[Any] = []
    phases: list[np.ndarray] | None = None
    for t, term in enumerate(hs.interaction_list):
        where = f"interaction term {t}"
        if isinstance(term, qutip.Qobj):
            if phases is None:
                phases = bare_phases(hs, parts, t)
            terms.append(matrix_term(term, t, phases, [p.dim for p in parts]))
            defaults.append(None)
            continue
        if isinstance(term, InteractionTerm):
            g = _number(term.g_strength)
            factors = [
                Factor(s, parts[s].operator(op, f"{where}, operator {j + 1}"))
                for j, (s, op) in enumerate(term.operator_list)
            ]

            def coefficient(P: Any, t: int = t) -> Any:
                return P["g"][t]

            terms.append(
                ProductTerm(coefficient, factors, bool(term.add_hc), isinstance(g, complex))
            )
            defaults.append(g)
        elif isinstance(term, InteractionTermStr):
            if term.id_wrapped_operator_list:
                names = [name for name, _ in term.id_wrapped_operator_list]
                raise ValueError(_errors.HS_WRAPPED.format(index=t, names=names))
            ops = {
                name: Factor(s, parts[s].operator(op, f"{where}, operator `{name}`"))
                for s, name, op in term.operator_list
            }
            const: dict[str, Any] = dict(term.const)
            numeric = {k: _number(v) for k, v in const.items() if _is_number(v)}
            others = {k: v for k, v in const.items() if not _is_number(v)}

            def constants(P: Any, t: int = t, others: dict = others) -> dict[str, Any]:
                return {**others, **P["g"][t]}

            is_complex = has_complex_literal(term.expr) or any(
                isinstance(v, complex) for v in numeric.values()
            )
            terms.append(ExprTerm(term.expr, ops, constants, bool(term.add_hc), is_complex))
            defaults.append(numeric)
        else:
            raise TypeError(_errors.HS_TERM_TYPE.format(index=t, got=type(term).__name__))
    return terms, defaults


class HilbertSpaceModel:
    """JAX functions of a scqubits `HilbertSpace`'s subsystem parameters and couplings.

    Made by `jaxbridge.scqubits.model(hilbertspace)`, which reads the `HilbertSpace` once
    (subsystems, truncations, interaction terms). Every method takes `params`, a dict like
    `params` with some of its entries: `params[id_str]` a dict of some of that subsystem's
    parameters, `params["g"]` a list with one entry per interaction term (None keeps one) or a
    dict from term index to entry. Missing entries keep the object's values; values may be
    arrays, which broadcast together and lead every result. Every method works under
    `jax.jit`, `jax.vmap`, `jax.grad`, `jax.jacfwd` and `jax.hessian` (float64 needs
    `jax_enable_x64`). Derivatives pass through each subsystem's bare eigenvectors with the
    requested-levels rule (`eigh_k`), so degeneracies above a subsystem's `truncated_dim` do
    not make them NaN.

    Bare eigenvectors are fixed up to a phase by LAPACK, and scqubits keeps whatever phase
    its solver returns; this model makes the largest component of each (in the first half of
    the vector, as scqubits' `standardize_phases`) real and positive. The Hamiltonian matrix
    thus equals scqubits' `hs.hamiltonian()` after flipping those phases; the dressed levels,
    labels and energies do not depend on them.

    Attributes:
        params: `{id_str: {name: value}, ..., "g": [...]}` at the object's values; a `g=`
            term's entry is its `g_strength`, an `expr=` term's the dict of its numeric `const`
            values.
        dim: the composite dimension, the product of the `truncated_dim`s.
        subsystem_dims: the `truncated_dim`s.
    """

    def __init__(self, hs: Any) -> None:
        import scqubits

        parts = [part(s) for s in hs]
        if any(p.id_str == "g" for p in parts):
            raise ValueError(_errors.HS_ID_STR)
        self._ids = [p.id_str for p in parts]
        terms, g_defaults = _read_terms(hs, parts)
        self._composite = Composite(parts, terms, lambda P, s: P[self._ids[s]])
        self.params: dict[str, Any] = {p.id_str: dict(p.defaults) for p in parts}
        self.params["g"] = g_defaults
        self.dim: int = self._composite.dim
        self.subsystem_dims: list[int] = list(self._composite.dims)
        self._threshold = float(scqubits.settings.OVERLAP_THRESHOLD)
        self._ignore_low_overlap = bool(getattr(hs, "_ignore_low_overlap", False))
        # scqubits' ParameterSweep: an Oscillator (KerrOscillator included) or a purely
        # harmonic Circuit is an oscillator; every other subsystem a qubit.
        self._oscillator = [
            isinstance(sub, scqubits.Oscillator) or bool(getattr(sub, "is_purely_harmonic", False))
            for sub in hs
        ]
        self._hs = hs
        self._operators: list[tuple[int, Any, bool]] = []  # op_in_dressed_eigenbasis' operators
        self._tokens: dict[Any, int] = {}
        self._planner = Planner(self._ids, list(hs), self.subsystem_dims)
        self._compiled = jax.jit(self._evaluate, static_argnames=("what", "k", "extra"))
        jax.eval_shape(lambda P: self._composite.hamiltonian(P), self._values(None, "model"))

    def __repr__(self) -> str:
        return f"jaxbridge.scqubits.HilbertSpaceModel({self._ids}, dim={self.dim})"

    # -- parameters and batching

    def _values(self, params: ParamsArg, method: str) -> dict[str, Any]:
        given = dict(params or {})
        unknown = _params.unknown_names(given, self.params)
        if unknown:
            raise ValueError(
                _errors.HS_UNKNOWN_KEY.format(method=method, names=unknown, known=self._ids)
            )
        real = _params.real_dtype()
        out: dict[str, Any] = {}
        for id_str in self._ids:
            known = sorted(self.params[id_str])

            def bad(names: list[str], id_str: str = id_str, known: list = known) -> str:
                return _errors.HS_UNKNOWN_PARAM.format(
                    method=method, names=names, id_str=id_str, known=known
                )

            def cast(k: str, value: Any, default: Any, id_str: str = id_str) -> jax.Array:
                return _leaf(value, default, real, method, f"`params[{id_str!r}][{k!r}]`")

            out[id_str] = _params.values(given.get(id_str), self.params[id_str], bad, cast)
        out["g"] = self._g_values(given.get("g"), real, method)
        return out

    def _g_values(self, given: Any, real: Any, method: str) -> list[Any]:
        defaults = self.params["g"]
        n = len(defaults)
        if given is None:
            given = [None] * n
        elif isinstance(given, Mapping):
            if not set(given) <= set(range(n)):
                raise ValueError(_errors.HS_G_LENGTH.format(method=method, n=n, got=given))
            given = [given.get(i) for i in range(n)]
        elif not isinstance(given, list | tuple) or len(given) != n:
            raise ValueError(_errors.HS_G_LENGTH.format(method=method, n=n, got=given))
        out: list[Any] = []
        for t, (value, default) in enumerate(zip(given, defaults)):
            where = f'`params["g"][{t}]`'
            if default is None:  # a fixed `qobj=` term
                if value is not None:
                    raise ValueError(_errors.HS_G_QOBJ.format(method=method, index=t, got=value))
                out.append(None)
                continue
            if isinstance(default, dict):
                value = {} if value is None else value
                if not isinstance(value, Mapping) or not set(value) <= set(default):
                    raise ValueError(
                        _errors.HS_G_CONST.format(
                            method=method, index=t, known=sorted(default), got=value
                        )
                    )
                out.append(
                    {
                        k: _leaf(value.get(k, d), d, real, method, f"{where}[{k!r}]")
                        for k, d in default.items()
                    }
                )
            else:
                out.append(_leaf(default if value is None else value, default, real, method, where))
        return out

    def _run(self, what: str, params: ParamsArg, k: int = 0, extra: Any = None) -> Any:
        values = self._values(params, what)
        try:
            return self._compiled(values, what=what, k=k, extra=extra)
        except jax.errors.JaxRuntimeError as error:
            # Eagerly, the branch walk's own error rather than XLA's wrapping of its text.
            text = str(error)
            mark = "LabelAmbiguityError: "
            if mark not in text:
                raise
            message = text[text.index(mark) + len(mark) :].split("\nHost traceback")[0]
            raise LabelAmbiguityError(message) from error

    def _evaluate(self, values: dict[str, Any], *, what: str, k: int, extra: Any) -> Any:
        comp = self._composite

        def one(P: dict[str, Any]) -> Any:
            if what in ("bare_eigenvals", "bare_eigensys"):
                w, v = comp.parts[extra].esys(P[self._ids[extra]], k)
                if what == "bare_eigenvals":
                    return w
                return w, jnp.eye(
                    comp.parts[extra].native_dim, k, dtype=w.dtype
                ) if v is None else v
            if what == "dressed_op":
                return self._dressed_op(P, k, extra)
            h = comp.hamiltonian(P)
            if what == "hamiltonian":
                return h
            structure = dressed_structure(h.shape[-1])
            if what == "eigenvals":
                return eigvalsh_k(h, k, structure)
            w, v = eigh_k(h, k, structure)
            if what == "eigensys":
                return w, v
            if what != "dispersive" and extra[0] != "DE":
                labels = self._branch_labels(P, v, extra)
            else:
                labels = dressed_indices(v, self._threshold, self._ignore_low_overlap)
            if what == "components":
                return labels, fix_phases(v)
            if what == "dispersive":  # the labels, the levels, every subsystem's bare levels
                bare = [part.esys(P[i], part.dim)[0] for part, i in zip(comp.parts, self._ids)]
                return labels, w, bare
            return labels, w

        return _params.map_batch(one, values)

    def _dressed_op(self, P: dict[str, Any], k: int, token: int) -> jax.Array:
        """`<E_i|O|E_j>` for the k lowest dressed states (phases fixed) at one point."""
        comp = self._composite
        s, fn, in_bare = self._operators[token]
        bare = comp.bare(P)
        h = comp.hamiltonian(P, bare)
        o = fn(P[self._ids[s]])
        v = bare[s][1]
        if not in_bare and v is not None:
            dtype = common(o, v)
            o = v.conj().T.astype(dtype) @ o.astype(dtype) @ v.astype(dtype)
        _, e = eigh_k(h, k, dressed_structure(h.shape[-1]))
        e = fix_phases(e)
        big = comp.wrap(o, s)
        dtype = common(big, e)
        return e.conj().T.astype(dtype) @ big.astype(dtype) @ e.astype(dtype)

    def _branch_labels(self, P: dict[str, Any], v: jax.Array, extra: Any) -> jax.Array:
        """scqubits' "LX" or "BE" labels at one point, by the host walk of `_branch`."""
        ordering, priority, count = extra
        comp = self._composite
        dims = tuple(self.subsystem_dims)
        phased = tuple(not isinstance(p, OscillatorPart) for p in comp.parts)
        bare = [jax.lax.stop_gradient(w) for w, _ in comp.bare(P)]

        def walk(evecs: np.ndarray, *levels: np.ndarray) -> np.ndarray:
            if ordering == "LX":
                order = lexical_order(dims, priority)
            else:
                order = energy_order(levels, count)
            return branch_labels(
                evecs, dims, order, priority, tuple(self._oscillator), phased, ordering
            )

        result = jax.ShapeDtypeStruct((self.dim,), jnp.int32)
        return _host.host(walk, result=result)(jax.lax.stop_gradient(v), *bare)

    def _ordering(
        self, method: str, ordering: Any, subsys_priority: Any, BEs_count: Any, k: int | None
    ) -> tuple[tuple[str, tuple[int, ...], int], int]:
        """The static lookup key `(ordering, priority, count)` and the levels to diagonalise."""
        n = len(self._ids)
        if ordering not in ("DE", "LX", "BE"):
            raise ValueError(_errors.HS_ORDERING.format(method=method, got=ordering))
        if subsys_priority is None:
            priority = tuple(range(n))
        else:
            ok = isinstance(subsys_priority, list | tuple) and sorted(
                int(i) if isinstance(i, int | np.integer) else -1 for i in subsys_priority
            ) == list(range(n))
            if not ok:
                raise ValueError(
                    _errors.HS_PRIORITY.format(method=method, last=n - 1, got=subsys_priority)
                )
            priority = tuple(int(i) for i in subsys_priority)
        if ordering == "DE":  # scqubits warns and ignores the two for "DE"
            return ("DE", (), 0), self.dim if k is None else k
        if ordering == "LX":
            if k is not None and k != self.dim:
                raise ValueError(_errors.HS_LX_EVALS.format(method=method, dim=self.dim, got=k))
            return ("LX", priority, self.dim), self.dim
        if BEs_count is not None and (
            not isinstance(BEs_count, int | np.integer) or not 1 <= BEs_count <= self.dim
        ):
            raise ValueError(
                _errors.HS_BES_COUNT.format(method=method, most=self.dim, got=BEs_count)
            )
        if k is None:  # `HilbertSpace.generate_lookup` diagonalises for `BEs_count` states
            k = self.dim if BEs_count is None else int(BEs_count)
        count = k if BEs_count is None else min(int(BEs_count), k)
        return ("BE", priority, count), k

    # -- argument checks

    def _count(self, evals_count: Any, method: str, most: int) -> int:
        return _params.evals_count(evals_count, most, _errors.HS_EVALS_COUNT, method=method)

    def _subsystem(self, id_str: str, method: str) -> int:
        if id_str not in self._ids:
            raise ValueError(_errors.HS_ID.format(method=method, got=id_str, known=self._ids))
        return self._ids.index(id_str)

    def _bare_position(self, bare: Any, method: str) -> int:
        dims = self.subsystem_dims
        ok = isinstance(bare, tuple | list) and len(bare) == len(dims)
        ok = ok and all(isinstance(b, int | np.integer) and 0 <= b < d for b, d in zip(bare, dims))
        if not ok:
            raise ValueError(
                _errors.HS_BARE.format(method=method, got=bare, n=len(dims), dims=dims)
            )
        return int(np.ravel_multi_index(tuple(int(b) for b in bare), dims))

    # -- the public methods

    def hamiltonian(self, params: ParamsArg = None) -> Matrices:
        """The composite Hamiltonian in the bare product basis.

        Args:
            params: as in the class docstring; None keeps the object's values.

        Returns:
            `(*batch, D, D)`, D = `dim`: scqubits' `hs.hamiltonian()` at the same values, up to
            the phases of the bare eigenvectors (see the class docstring); complex where a
            subsystem, an operator or a coupling is.

        Example:
            >>> import scqubits, jaxbridge.scqubits as jbq
            >>> tmon = scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=10, truncated_dim=3)
            >>> osc = scqubits.Oscillator(E_osc=6.0, truncated_dim=4)
            >>> hs = scqubits.HilbertSpace([tmon, osc])
            >>> hs.add_interaction(g=0.1, op1=tmon.n_operator, op2=osc.creation_operator,
            ...                    add_hc=True)
            >>> jbq.model(hs).hamiltonian().shape
            (12, 12)
        """
        return self._run("hamiltonian", params)

    def eigenvals(self, params: ParamsArg = None, evals_count: int = 6) -> Levels:
        """The `evals_count` lowest dressed levels, ascending (scqubits' `hs.eigenvals()`).

        Args:
            params: as in the class docstring.
            evals_count: how many levels (static), at most `dim`.

        Returns:
            `(*batch, evals_count)`. Without derivatives LAPACK's subset solver runs on the
            host; derivatives are Hellmann-Feynman on the dressed states, carried through the
            bare eigenvectors.
        """
        k = self._count(evals_count, "eigenvals", self.dim)
        return self._run("eigenvals", params, k)

    def eigensys(self, params: ParamsArg = None, evals_count: int = 6) -> tuple[Levels, Vectors]:
        """The `evals_count` lowest dressed levels and states (scqubits' `hs.eigensys()`).

        Args:
            params: as in the class docstring.
            evals_count: how many levels (static), at most `dim`.

        Returns:
            `(evals, evecs)`: `(*batch, k)` and `(*batch, D, k)`, `evecs[..., :, j]` dressed
            state j in the bare product basis (scqubits' order: the last subsystem's index
            runs fastest), each fixed up to a phase.
        """
        k = self._count(evals_count, "eigensys", self.dim)
        return self._run("eigensys", params, k)

    def bare_eigenvals(
        self, id_str: str, params: ParamsArg = None, evals_count: int | None = None
    ) -> Levels:
        """One subsystem's bare levels (scqubits' `subsystem.eigenvals()` at `params`).

        Args:
            id_str: the subsystem's `id_str`.
            params: as in the class docstring.
            evals_count: how many levels (static); None: its `truncated_dim`.

        Returns:
            `(*batch, evals_count)`.
        """
        s = self._subsystem(id_str, "bare_eigenvals")
        p = self._composite.parts[s]
        most = p.dim if p.native_dim == p.dim else p.native_dim
        k = self._count(p.dim if evals_count is None else evals_count, "bare_eigenvals", most)
        return self._run("bare_eigenvals", params, k, s)

    def bare_eigensys(
        self, id_str: str, params: ParamsArg = None, evals_count: int | None = None
    ) -> tuple[Levels, Vectors]:
        """One subsystem's bare levels and eigenvectors in its own basis, phases fixed.

        Args:
            id_str: the subsystem's `id_str`.
            params: as in the class docstring.
            evals_count: how many levels (static); None: its `truncated_dim`.

        Returns:
            `(evals, evecs)`: `(*batch, k)` and `(*batch, N, k)`; the identity's columns for an
            oscillator, whose basis is its eigenbasis.
        """
        s = self._subsystem(id_str, "bare_eigensys")
        p = self._composite.parts[s]
        k = self._count(
            p.dim if evals_count is None else evals_count, "bare_eigensys", p.native_dim
        )
        return self._run("bare_eigensys", params, k, s)

    def dressed_index(
        self,
        bare: tuple[int, ...],
        params: ParamsArg = None,
        evals_count: int | None = None,
        *,
        ordering: str = "DE",
        subsys_priority: list[int] | None = None,
        BEs_count: int | None = None,
    ) -> Indices:
        """The dressed index scqubits' `generate_lookup` gives the bare product state `bare`.

        Args:
            bare: one bare level per subsystem (static), e.g. `(1, 0)`.
            params: as in the class docstring.
            evals_count: None labels all `dim` dressed states, as `HilbertSpace.generate_lookup`;
                an integer labels the lowest `evals_count`, as a `ParameterSweep` with that
                `evals_count`.
            ordering: `generate_lookup`'s `ordering` (static): "DE" (by dressed energy and
                overlap, the default), "LX" (branch analysis in lexical order, every state:
                `evals_count` None) or "BE" (branch analysis in order of bare energy).
            subsys_priority: `generate_lookup`'s permutation of the subsystems ("LX", "BE").
            BEs_count: how many bare states "BE" labels (None: every state diagonalised for).

        Returns:
            `(*batch,)` int32, -1 where no dressed state has `bare` as its label (scqubits'
            None). A discrete choice: it has no derivative.

        Raises:
            LabelAmbiguityError: for "LX" and "BE", where scqubits' label at a point depends on
                the phases of its bare eigenvectors or on rounding (the message says which
                states compete); the model never guesses. Inside the caller's own `jit` the
                same text arrives in JAX's runtime error, as any host error does.
        """
        key = (ordering, subsys_priority, BEs_count)
        return self._lookup("dressed_index", bare, params, evals_count, False, key)[0]

    def energy_by_bare_index(
        self,
        bare: tuple[int, ...],
        params: ParamsArg = None,
        evals_count: int | None = None,
        subtract_ground: bool = False,
        *,
        ordering: str = "DE",
        subsys_priority: list[int] | None = None,
        BEs_count: int | None = None,
    ) -> Energies:
        """The dressed energy labelled by `bare` (scqubits' `energy_by_bare_index`).

        Args:
            bare: one bare level per subsystem (static).
            params: as in the class docstring.
            evals_count: as for `dressed_index`.
            subtract_ground: subtract the dressed ground-state energy.
            ordering, subsys_priority, BEs_count: the labelling, as for `dressed_index`.

        Returns:
            `(*batch,)`, NaN where no dressed state has the label. Differentiable: the label is
            held fixed, so the dispersive shift `E11 - E10 - E01 + E00` and its gradient follow.

        Example:
            >>> import jax, scqubits, jaxbridge.scqubits as jbq
            >>> jax.config.update("jax_enable_x64", True)
            >>> tmon = scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=10, truncated_dim=3,
            ...                          id_str="tmon")
            >>> osc = scqubits.Oscillator(E_osc=6.0, truncated_dim=4, id_str="osc")
            >>> hs = scqubits.HilbertSpace([tmon, osc])
            >>> hs.add_interaction(g=0.1, op1=tmon.n_operator, op2=osc.creation_operator,
            ...                    add_hc=True)
            >>> m = jbq.model(hs)
            >>> def chi(p):
            ...     e = lambda b: m.energy_by_bare_index(b, p)
            ...     return e((1, 1)) - e((1, 0)) - e((0, 1)) + e((0, 0))
            >>> hs.generate_lookup()
            >>> want = (hs.energy_by_bare_index((1, 1)) - hs.energy_by_bare_index((1, 0))
            ...         - hs.energy_by_bare_index((0, 1)) + hs.energy_by_bare_index((0, 0)))
            >>> bool(abs(chi(None) - want) < 1e-9)
            True
            >>> sorted(jax.grad(chi)({"tmon": {"EJ": 20.0}, "g": [0.1]}))
            ['g', 'tmon']
            >>> jax.config.update("jax_enable_x64", False)
        """
        key = (ordering, subsys_priority, BEs_count)
        return self._lookup(
            "energy_by_bare_index", bare, params, evals_count, bool(subtract_ground), key
        )[1]

    def energy_by_dressed_index(
        self,
        dressed: int,
        params: ParamsArg = None,
        evals_count: int | None = None,
        subtract_ground: bool = False,
    ) -> Energies:
        """The energy of dressed state `dressed` (scqubits' `energy_by_dressed_index`).

        Args:
            dressed: the dressed index (static), counted from the ground state.
            params: as in the class docstring.
            evals_count: how many levels to diagonalise for (None: `dressed + 1`).
            subtract_ground: subtract the dressed ground-state energy.

        Returns:
            `(*batch,)`, differentiable.
        """
        k = self._count(
            dressed + 1 if evals_count is None else evals_count, "energy_by_dressed_index", self.dim
        )
        if not isinstance(dressed, int | np.integer) or not 0 <= dressed < k:
            raise ValueError(
                _errors.HS_DRESSED.format(method="energy_by_dressed_index", got=dressed, k=k)
            )
        w = self._run("eigenvals", params, k)
        return w[..., dressed] - w[..., 0] if subtract_ground else w[..., dressed]

    def bare_index(
        self,
        dressed: int,
        params: ParamsArg = None,
        evals_count: int | None = None,
        *,
        ordering: str = "DE",
        subsys_priority: list[int] | None = None,
        BEs_count: int | None = None,
    ) -> jax.Array:
        """The bare product state that labels dressed state `dressed` (scqubits'
        `bare_index`, the inverse of `dressed_index`).

        Args:
            dressed: the dressed index (static).
            params: as in the class docstring.
            evals_count: as for `dressed_index`.
            ordering, subsys_priority, BEs_count: the labelling, as for `dressed_index`.

        Returns:
            `(*batch, n_subsystems)` int32: one bare level per subsystem, all -1 where no
            bare state labels `dressed` (scqubits' None). Discrete: no derivative.
        """
        k = None if evals_count is None else self._count(evals_count, "bare_index", self.dim)
        key, k = self._ordering("bare_index", ordering, subsys_priority, BEs_count, k)
        if not isinstance(dressed, int | np.integer) or not 0 <= dressed < k:
            raise ValueError(_errors.HS_DRESSED.format(method="bare_index", got=dressed, k=k))
        labels, _ = self._run("lookup", params, k, key)
        return self._bare_of(labels, dressed)

    def _bare_of(self, labels: jax.Array, dressed: Any) -> jax.Array:
        hit = labels == dressed
        found = jnp.any(hit, axis=-1)
        position = jnp.argmax(hit, axis=-1)
        levels = jnp.stack(jnp.unravel_index(position, tuple(self.subsystem_dims)), axis=-1)
        return jnp.where(found[..., None], levels, -1).astype(jnp.int32)

    def lamb(self, params: ParamsArg = None, evals_count: int | None = None) -> list[jax.Array]:
        """The Lamb shifts `ParameterSweep` stores as `sweep["lamb"]`, one entry a subsystem.

        `lamb[s][..., l] = E(l e_s) - E_0 - (e_s[l] - e_s[0])`: the dressed energy labelled
        by `l` excitations of subsystem `s` (none elsewhere), less the dressed ground energy
        and the bare excitation energy.

        Args:
            params: as in the class docstring.
            evals_count: as for `dressed_index` (a ParameterSweep's `evals_count`).

        Returns:
            `[(*batch, truncated_dim_s)]`, NaN where a label has no dressed state.
        """
        return self.dispersive(params, evals_count)["lamb"]  # pyright: ignore[reportReturnType]

    def kerr(
        self, params: ParamsArg = None, evals_count: int | None = None
    ) -> dict[tuple[int, int], jax.Array]:
        """The Kerr coefficients `ParameterSweep` stores as `sweep["kerr"]`, by subsystem pair.

        With `K[l1, l2] = E(l1 e_s1 + l2 e_s2) + E_0 - E(l1 e_s1) - E(l2 e_s2)`: for two
        oscillators `K[1, 1]` (halved where `s1 == s2`, the self-Kerr), for two qubits the
        whole `(d_s1, d_s2)` table. Pairs of a qubit and an oscillator are `chi`'s.

        Returns:
            `{(s1, s2): array}` over the pairs scqubits fills, with the params' batch shape in
            front; NaN where a label has no dressed state. Differentiable.
        """
        return self.dispersive(params, evals_count)["kerr"]  # pyright: ignore[reportReturnType]

    def chi(
        self, params: ParamsArg = None, evals_count: int | None = None
    ) -> dict[tuple[int, int], jax.Array]:
        """The ac Stark shifts `ParameterSweep` stores as `sweep["chi"]`, by subsystem pair.

        For a qubit `s1` and an oscillator `s2`: `K[1, :]` (one photon's shift of each qubit
        level, `(*batch, d_s2)`); for an oscillator `s1` and a qubit `s2`: `K[:, 1]`. `K` as
        in `kerr`.

        Returns:
            `{(s1, s2): array}` over the qubit-oscillator pairs, NaN where a label has no
            dressed state. Differentiable.
        """
        return self.dispersive(params, evals_count)["chi"]  # pyright: ignore[reportReturnType]

    def dispersive(
        self, params: ParamsArg = None, evals_count: int | None = None
    ) -> dict[str, Any]:
        """`lamb`, `kerr` and `chi` at once, from one diagonalisation a parameter point.

        Returns:
            `{"lamb": [...], "kerr": {...}, "chi": {...}}` as the three methods return them.
        """
        k = self.dim if evals_count is None else self._count(evals_count, "dispersive", self.dim)
        labels, w, bare = self._run("dispersive", params, k)
        dims = self.subsystem_dims
        n = len(dims)

        def energy(levels: tuple[int, ...]) -> jax.Array:
            if any(b >= d for b, d in zip(levels, dims)):  # beyond a truncation: no state
                return jnp.full(w.shape[:-1], jnp.nan, w.dtype)
            position = int(np.ravel_multi_index(levels, dims))
            return energy_at(w, labels[..., position])

        def unit(s: int, level: int) -> tuple[int, ...]:
            return tuple(level if i == s else 0 for i in range(n))

        e0 = w[..., 0]
        one = [jnp.stack([energy(unit(s, b)) for b in range(dims[s])], axis=-1) for s in range(n)]
        lamb = [one[s] - e0[..., None] - bare[s] + bare[s][..., :1] for s in range(n)]
        kerr: dict[tuple[int, int], jax.Array] = {}
        chi: dict[tuple[int, int], jax.Array] = {}
        for s1 in range(n):
            for s2 in range(n):
                rows = []
                for l1 in range(dims[s1]):
                    row = []
                    for l2 in range(dims[s2]):
                        levels = [0] * n
                        levels[s1] += l1
                        levels[s2] += l2
                        row.append(energy(tuple(levels)))
                    rows.append(jnp.stack(row, axis=-1))
                two = jnp.stack(rows, axis=-2)
                table = two + e0[..., None, None] - one[s1][..., :, None] - one[s2][..., None, :]
                osc1, osc2 = self._oscillator[s1], self._oscillator[s2]
                if osc1 and osc2:
                    kerr[(s1, s2)] = table[..., 1, 1] / (2.0 if s1 == s2 else 1.0)
                elif not osc1 and not osc2:
                    kerr[(s1, s2)] = table
                elif not osc1:
                    chi[(s1, s2)] = table[..., 1, :]
                else:
                    chi[(s1, s2)] = table[..., :, 1]
        return {"lamb": lamb, "kerr": kerr, "chi": chi}

    def transitions(
        self,
        params: ParamsArg = None,
        subsystems: Any = None,
        initial: Any = None,
        final: Any = None,
        sidebands: bool = False,
        photon_number: int = 1,
        make_positive: bool = False,
        evals_count: int | None = None,
        *,
        omit_nan: bool = True,
        ordering: str = "DE",
        subsys_priority: list[int] | None = None,
        BEs_count: int | None = None,
    ) -> tuple[list[tuple[State, State]], Columns]:
        """The transitions and their energies, as `ParameterSweep.transitions` lists them.

        Args:
            params: as in the class docstring; a batch is the sweep.
            subsystems: the active subsystems (their `id_str`s or scqubits objects, one or a
                list; None: all), as scqubits'.
            initial: a bare label (all subsystems, or the active ones: the others are 0), a
                dressed index, a list of them, or None (the bare ground state).
            final: a bare label, a dressed index, -1 (every dressed state), a list, or None:
                every level of each active subsystem alone (with `sidebands`, every
                combination of the active ones); from a dressed `initial`, every bare state.
            sidebands: as scqubits'.
            photon_number: the energies are divided by it.
            make_positive: absolute values.
            evals_count: the dressed states labelled (a ParameterSweep's `evals_count`; None:
                all, as a HilbertSpace).
            omit_nan: drop the transitions that are NaN at every point (a label without a
                dressed state), as scqubits does; needs concrete values. Under `jit`, `vmap`
                or `grad` pass False: the list is then static and NaN columns stay.
            ordering, subsys_priority, BEs_count: the labelling, as for `dressed_index`.

        Returns:
            `(labels, energies)`: `labels[i]` the `(initial, final)` pair of transition i
            (tuples for bare labels, ints for dressed indices, as scqubits'), `energies`
            `(*batch, n)` with transition i in column i (scqubits' list of arrays stacked on
            the last axis). Differentiable, the labels held fixed.

        Raises:
            ValueError: a state beyond a truncation or of the wrong length, an unknown
                subsystem, or `omit_nan=True` under a transformation.

        Example:
            >>> import jax.numpy as jnp, scqubits, jaxbridge.scqubits as jbq
            >>> tmon = scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=6, truncated_dim=3,
            ...                          id_str="tmon")
            >>> osc = scqubits.Oscillator(E_osc=6.0, truncated_dim=3, id_str="osc")
            >>> hs = scqubits.HilbertSpace([tmon, osc])
            >>> hs.add_interaction(g=0.1, op1=tmon.n_operator, op2=osc.creation_operator,
            ...                    add_hc=True)
            >>> labels, e = jbq.model(hs).transitions({"tmon": {"EJ": jnp.array([18.0, 22.0])}})
            >>> labels[0], e.shape
            (((0, 0), (1, 0)), (2, 4))
        """
        k = None if evals_count is None else self._count(evals_count, "transitions", self.dim)
        key, k = self._ordering("transitions", ordering, subsys_priority, BEs_count, k)
        pairs = self._planner.plan(subsystems, initial, final, bool(sidebands), k)
        dims = self.subsystem_dims
        spec = tuple(
            tuple(
                (True, x) if isinstance(x, int) else (False, int(np.ravel_multi_index(x, dims)))
                for x in pair
            )
            for pair in pairs
        )
        labels, w = self._run("lookup", params, k, key)
        initials = self._planner.bare_initials(subsystems, initial, final, k)
        warn_hybridized(initials, labels, w, dims)
        # A second, small program: the gathers of this list (the labels' program is shared).
        energies = columns(labels, w, spec, photon_number, bool(make_positive))
        if not omit_nan or not pairs:
            return pairs, energies
        try:
            values = np.asarray(energies)
        except jax.errors.TracerArrayConversionError:
            raise ValueError(_errors.HS_OMIT_NAN) from None
        nan = np.all(np.isnan(values.reshape(-1, len(pairs))), axis=0)
        keep = [i for i in range(len(pairs)) if not bool(nan[i])]
        return [pairs[i] for i in keep], energies[..., np.asarray(keep, dtype=int)]

    def op_in_dressed_eigenbasis(
        self,
        op: Any,
        params: ParamsArg = None,
        truncated_dim: int | None = None,
        op_in_bare_eigenbasis: bool = False,
    ) -> Matrices:
        """A subsystem's operator in the dressed eigenbasis (scqubits'
        `HilbertSpace.op_in_dressed_eigenbasis`), `<E_i|O|E_j>` for i, j < `truncated_dim`.

        Args:
            op: a bound operator method of a subsystem (`tmon.n_operator`), `(id_str, name)`
                (`("tmon", "n_operator")`), or scqubits' `(matrix, subsystem)` (the subsystem
                by object or `id_str`): the matrix in the subsystem's own basis, or in its bare
                eigenbasis with `op_in_bare_eigenbasis=True`. Resolved once (static).
            params: as in the class docstring.
            truncated_dim: how many dressed states (static); None: `dim`, as scqubits'.
            op_in_bare_eigenbasis: as scqubits', for the `(matrix, subsystem)` form. scqubits'
                bare eigenbasis has its eigensolver's phases at the object's values; the model
                takes the matrix to its own phases there once (as a `qobj=` term).

        Returns:
            `(*batch, t, t)`. Each dressed state is fixed up to a phase: the model makes its
            largest component (first half, as for the bare states) real and positive, where
            scqubits keeps its solver's phases, so element `(i, j)` equals scqubits' times
            `conj(p_i) p_j` for unit numbers `p`; the moduli and the diagonal equal scqubits'.
            Differentiable (degenerate dressed levels within `t` make element derivatives
            undefined, as for any eigenvector).

        Raises:
            ValueError: an operator or subsystem the model does not know, a bad
                `truncated_dim`.

        Example:
            >>> import scqubits, jaxbridge.scqubits as jbq
            >>> tmon = scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=6, truncated_dim=3,
            ...                          id_str="tmon")
            >>> osc = scqubits.Oscillator(E_osc=6.0, truncated_dim=3, id_str="osc")
            >>> hs = scqubits.HilbertSpace([tmon, osc])
            >>> hs.add_interaction(g=0.1, op1=tmon.n_operator, op2=osc.creation_operator,
            ...                    add_hc=True)
            >>> jbq.model(hs).op_in_dressed_eigenbasis(("tmon", "n_operator"), None, 4).shape
            (4, 4)
        """
        method = "op_in_dressed_eigenbasis"
        if truncated_dim is not None and (
            not isinstance(truncated_dim, int | np.integer) or not 1 <= truncated_dim <= self.dim
        ):
            raise ValueError(
                _errors.HS_TRUNCATE.format(method=method, most=self.dim, got=truncated_dim)
            )
        t = self.dim if truncated_dim is None else int(truncated_dim)
        token = self._operator(op, bool(op_in_bare_eigenbasis), method)
        return self._run("dressed_op", params, t, token)

    def dressed_state_components(
        self,
        state_label: Any,
        params: ParamsArg = None,
        components_count: int | None = None,
        return_probability: bool = True,
        evals_count: int | None = None,
        *,
        ordering: str = "DE",
        subsys_priority: list[int] | None = None,
        BEs_count: int | None = None,
    ) -> tuple[BareLabels, Weights]:
        """A dressed state's bare components, largest first (scqubits'
        `dressed_state_components`, its dict as two arrays).

        Args:
            state_label: a bare label (the dressed state it labels) or a dressed index
                (static).
            params: as in the class docstring.
            components_count: how many components (static); None: all `dim`.
            return_probability: `|amplitude|^2`; False: the amplitudes.
            evals_count: the dressed states diagonalised and labelled, as for `dressed_index`.
            ordering, subsys_priority, BEs_count: the labelling, as for `dressed_index`.

        Returns:
            `(labels, values)`: `(*batch, c, n_subsystems)` int32, the bare labels (scqubits'
            dict keys, in its order), and `(*batch, c)` their probabilities (or amplitudes).
            Components of equal weight come in increasing bare order (scqubits' order of such
            ties follows NumPy's unstable sort). Amplitudes carry the model's phases (see
            `op_in_dressed_eigenbasis`); probabilities equal scqubits'. Where a bare label
            has no dressed state, labels -1 and values NaN (scqubits raises `IndexError`).
            Probabilities are differentiable.
        """
        method = "dressed_state_components"
        k = None if evals_count is None else self._count(evals_count, method, self.dim)
        key, k = self._ordering(method, ordering, subsys_priority, BEs_count, k)
        c = self.dim if components_count is None else components_count
        if not isinstance(c, int | np.integer) or not 1 <= c <= self.dim:
            raise ValueError(_errors.HS_TRUNCATE.format(method=method, most=self.dim, got=c))
        if isinstance(state_label, int | np.integer):
            if not 0 <= state_label < k:
                raise ValueError(_errors.HS_DRESSED.format(method=method, got=state_label, k=k))
            position = None
        else:
            position = self._bare_position(state_label, method)
        labels, v = self._run("components", params, k, key)
        # The label (bare position or dressed index) is an argument of a small second program.
        where = jnp.asarray(-1 if position is None else position, jnp.int32)
        dressed = jnp.asarray(0 if position is None else -1, jnp.int32) + (
            int(state_label) if position is None else 0
        )
        return components(
            labels, v, where, dressed, tuple(self.subsystem_dims), int(c), bool(return_probability)
        )

    def _operator(self, op: Any, in_bare: bool, method: str) -> int:
        """Resolves `op` once; the token names it in the compiled program."""
        parts = self._composite.parts
        where = f"`{method}`"

        def subsystem_of(x: Any) -> int | None:
            for i, (p, id_str) in enumerate(zip(parts, self._ids)):
                if x is p.obj or (isinstance(x, str) and x == id_str):
                    return i
            return None

        entry: tuple[int, Any, bool] | None = None
        cache_key: Any = None
        if callable(op) and not hasattr(op, "shape") and not hasattr(op, "full"):
            s = subsystem_of(getattr(op, "__self__", None))
            if s is not None:
                entry = (s, parts[s].operator(op, where)[0], False)
                cache_key = (s, "bound", getattr(op, "__func__", op))
        elif isinstance(op, tuple) and len(op) == 2:
            first, second = op
            if isinstance(first, str) and isinstance(second, str):
                s = subsystem_of(first)
                if s is not None:
                    entry = (s, parts[s].named(second, where)[0], False)
                    cache_key = (s, second)
            else:
                s = subsystem_of(second)
                if s is not None:
                    m = as_matrix(first)
                    # In the bare eigenbasis the conversion depends on the object's values now.
                    now = [getattr(p.obj, k, None) for p in parts for k in sorted(p.defaults)]
                    cache_key = (s, in_bare, m.shape, m.dtype.str, m.tobytes(), repr(now))
                    if cache_key in self._tokens:
                        return self._tokens[cache_key]
                    if in_bare:
                        entry = (s, self._bare_matrix(m, s, where), True)
                    else:
                        entry = (s, parts[s].operator(m, where)[0], False)
        if entry is None:
            raise ValueError(_errors.HS_OP.format(method=method, got=op))
        return self._token(cache_key, entry)

    def _token(self, key: Any, entry: tuple[int, Any, bool]) -> int:
        # One token (one compiled program) per operator, however it was named.
        if key not in self._tokens:
            self._operators.append(entry)
            self._tokens[key] = len(self._operators) - 1
        return self._tokens[key]

    def _bare_matrix(self, matrix: Any, s: int, where: str) -> Any:
        """A matrix in scqubits' bare eigenbasis of subsystem s, taken to the model's phases."""
        part = self._composite.parts[s]
        m = as_matrix(matrix)
        if m.shape != (part.dim, part.dim):
            raise ValueError(
                _errors.HS_OPERATOR_SHAPE.format(
                    where=where, id_str=part.id_str, dim=part.dim, got=m.shape
                )
            )
        d = bare_phases(self._hs, self._composite.parts, None)[s]
        m = d[:, None] * m * d.conj()[None, :]
        if np.iscomplexobj(m) and not np.any(np.imag(m)):
            m = np.real(m)
        return lambda p, m=m: jnp.asarray(m)

    def _lookup(
        self,
        method: str,
        bare: Any,
        params: ParamsArg,
        evals_count: Any,
        subtract: bool,
        ordering: tuple[Any, Any, Any] = ("DE", None, None),
    ) -> tuple[jax.Array, jax.Array]:
        position = self._bare_position(bare, method)
        k = None if evals_count is None else self._count(evals_count, method, self.dim)
        key, k = self._ordering(method, *ordering, k)
        # One program labels every bare state (compiled once per evals_count); picking one
        # label and its energy is a gather outside it.
        labels, w = self._run("lookup", params, k, key)
        index = labels[..., position]
        energy = energy_at(w, index)
        return index, energy - w[..., 0] if subtract else energy


def _leaf(value: Any, default: Any, real: Any, method: str, where: str) -> jax.Array:
    # Always cast: a Python float (weak type) and an array then share one compiled program.
    x = jnp.asarray(value)
    if isinstance(default, complex):
        return x.astype(jnp.complex128 if real == jnp.float64 else jnp.complex64)
    if jnp.iscomplexobj(x):
        raise ValueError(_errors.HS_COMPLEX.format(method=method, where=where))
    return x.astype(real)
