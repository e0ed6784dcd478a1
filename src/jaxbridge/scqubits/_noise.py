"""Coherence times: scqubits' noise channels as JAX functions of a model's parameters.

`NoiseMethods` is a base class of `Model`. Its methods have scqubits' names, arguments and
defaults (scqubits 4.3.1, `scqubits/core/noise.py` and the classes' overrides) plus `params`;
each rate is scqubits' formula written in JAX, of the eigenpairs (`_eigen.eigh_k`), the
operators' matrix elements (`_channels`) and the spectral densities below, so every JAX
transformation applies.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sparse

from ._channel import Channel
from ._densities import OMEGA_LOW, T_DEFAULT, T_EXP, density, units
from ._eigen import eigh_k
from ._terms import Fixed, Params, Spectral, Terms, complex_of
from .qubits import CHANNELS as BUILDERS

ParamsArg = Mapping[str, Any] | None

NOT_SUPPORTED = (
    "Noise channel '{name}' is not supported in this system (`{kind}`: scqubits' "
    "`supported_noise_channels()` is {supported})."
)
ONLY_T1 = "Only t1 channels can contribute to effective t1 noise."
BAD_CHANNELS = (
    "The `noise_channels` argument should be one of {{str, list of str, or list of tuples}}; "
    "got {got!r}."
)
BAD_LEVELS = "Level indices 'i' and 'j' must be different, and i,j>=0; got i={i!r}, j={j!r}."
UNEXPECTED = "`{method}()` got an unexpected keyword argument {name!r}; it takes {known}."


class _Elements:
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


def _time(rate: jax.Array) -> jax.Array:
    """`1 / rate`, `inf` where the rate is 0 (as scqubits), with a finite derivative elsewhere."""
    zero = rate == 0
    return jnp.where(zero, jnp.inf, 1.0 / jnp.where(zero, 1.0, rate))


def _is_static(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | str | Terms) or callable(value)


def _levels(o: Mapping[str, Any]) -> tuple[int, int]:
    i, j = o["i"], o["j"]
    if not isinstance(i, int | np.integer) or not isinstance(j, int | np.integer):
        raise TypeError(f"the level indices i and j must be integers; got i={i!r}, j={j!r}.")
    if i == j or i < 0 or j < 0:
        raise ValueError(BAD_LEVELS.format(i=i, j=j))
    return int(i), int(j)


class NoiseMethods:
    """scqubits' noise methods for a `Model` (its base class).

    Every method takes scqubits' arguments, with scqubits' defaults, and `params` as the
    model's other methods do; results have the params' batch shape. Options that are numbers
    (`T`, `Q_cap`, `A_noise`, ...) may be JAX values (differentiable); `i`, `j`, `total`,
    `get_rate` and functions are static. A function given for `Q_cap`, `Q_ind`, `Z` or `Y_qp`
    is called with JAX values and must be written with `jax.numpy`.
    """

    _obj: Any
    _spec: Any
    dim: int

    # -- the tables

    def _noise_table(self) -> dict[str, Channel]:
        table = self.__dict__.get("_noise_channels")
        if table is None:
            kind = self._spec.kind
            if kind not in BUILDERS:
                raise RuntimeError(f"noise methods are not available for a `{kind}` model yet.")
            table = BUILDERS[kind](self._obj)
            self.__dict__["_noise_channels"] = table
            self.__dict__["_noise_jit"] = {}
            self.__dict__["_noise_elements"] = {}
        return table

    def supported_noise_channels(self) -> list[str]:
        """scqubits' `supported_noise_channels()` of the object: the channels it can compute.

        Returns:
            The same list as `obj.supported_noise_channels()`.
        """
        return list(self._obj.supported_noise_channels())

    def effective_noise_channels(self) -> list[str]:
        """The channels `t1_effective` and `t2_effective` use by default (as scqubits).

        Returns:
            The same list as `obj.effective_noise_channels()`.
        """
        return list(self._obj.effective_noise_channels())

    def _channel(self, name: str) -> Channel:
        table = self._noise_table()
        if name not in table or name not in self.supported_noise_channels():
            raise RuntimeError(
                NOT_SUPPORTED.format(
                    name=name, kind=self._spec.kind, supported=self.supported_noise_channels()
                )
            )
        return table[name]

    def __getattr__(self, name: str) -> Any:
        # Channels only some classes have (FluxQubit's `tphi_1_over_f_cc1`, Cos2PhiQubit's
        # `t1_purcell`, a Circuit's `t1_capacitive0`): looked up only when no attribute is.
        if name.startswith("_") or "_spec" not in self.__dict__:
            raise AttributeError(name)
        if name in self._noise_table() and not hasattr(NoiseMethods, name):
            return self._bound_channel(name)
        raise AttributeError(f"`{type(self).__name__}` object has no attribute {name!r}")

    def _bound_channel(self, name: str) -> Callable[..., Any]:
        channel = self._noise_table()[name]
        names = [n for n, _ in channel.signature]

        def method(*args: Any, **kwargs: Any) -> Any:
            order = [*names, "esys", "get_rate"]
            if len(args) > len(order):
                raise TypeError(f"`{name}()` takes at most {len(order)} positional arguments")
            given = dict(zip(order, args))
            dup = set(given) & set(kwargs)
            if dup:
                raise TypeError(f"`{name}()` got multiple values for {sorted(dup)}")
            given.update(kwargs)
            esys = given.pop("esys", None)
            get_rate = given.pop("get_rate", False)
            params = given.pop("params", None)
            return self._noise_call(name, given, esys, get_rate, params)

        parameters = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d)
                      for n, d in channel.signature]  # fmt: skip
        for extra, default in (("esys", None), ("get_rate", False)):
            parameters.append(
                inspect.Parameter(extra, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
            )
        parameters.append(inspect.Parameter("params", inspect.Parameter.KEYWORD_ONLY, default=None))
        if channel.kwargs:
            parameters.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
        method.__signature__ = inspect.Signature(parameters)  # pyright: ignore[reportFunctionMemberAccess]
        method.__name__ = name
        method.__doc__ = f"scqubits' `{name}` of this model, with `params`."
        return method

    # -- options

    def _options(self, name: str, given: Mapping[str, Any]) -> dict[str, Any]:
        """scqubits' defaults for `name`, updated by `given` (unknown names refused)."""
        channel = self._channel(name)
        names = dict(channel.signature)
        out = dict(names)
        for key, value in given.items():
            if key in names:
                out[key] = value
            elif channel.kwargs:
                out[key] = value  # 1/f channels take **kwargs (omega_low, t_exp; others unused)
            elif value is not None:
                raise TypeError(UNEXPECTED.format(method=name, name=key, known=list(names)))
        for key in ("noise_op", "noise_op_method"):
            if out.get(key) is not None:
                out[key] = self._noise_operator(out[key])
        return out

    def _noise_operator(self, op: Any) -> Terms:
        if isinstance(op, Terms):
            return op
        if callable(op) and not isinstance(op, str):
            op = op()  # scqubits' `noise_op_method`: a method returning the matrix
        full = getattr(op, "full", None)
        if callable(full):  # a qutip Qobj
            op = full()
        return self._operator_terms(op)  # pyright: ignore[reportAttributeAccessIssue] - Model's

    # -- scqubits' methods (NoisySystem's; every class has them, unsupported ones raise)

    def t1_capacitive(
        self,
        i: int = 1,
        j: int = 0,
        Q_cap: float | Callable | None = None,
        T: float = T_DEFAULT,
        total: bool = True,
        esys: tuple[Any, Any] | None = None,
        get_rate: bool = False,
        noise_op: Any = None,
        branch_params: float | None = None,
        *,
        params: ParamsArg = None,
    ) -> Any:
        """T1 from dielectric loss in the capacitances (scqubits' `t1_capacitive`).

        `1 / T1 = |<i|n|j>|^2 (S(omega) + S(-omega))`, `omega = 2 pi (E_i - E_j)`,
        `S(omega) = 16 EC / Q_cap(omega) coth(|x|/2) / (1 + exp(-x)) 2 pi`, `x = hbar omega /
        k_B T`, and by default `Q_cap = 1e6 (2 pi 6 GHz / |omega|)^0.7`.

        Args:
            i, j: the transition i -> j (static integers).
            Q_cap: the quality factor: a number, or a JAX function of `(omega, T)`.
            T: the temperature in K.
            total: both directions (True) or i -> j only.
            esys: `(evals, evecs)` to use instead of diagonalising at `params`.
            get_rate: return the rate (1 / time) instead of the time.
            noise_op: an operator name or matrix replacing the charge operator.
            branch_params: a number replacing EC in `S`.
            params: as for `Model.hamiltonian`.

        Returns:
            The time (`inf` where the rate is 0) or rate, in scqubits' units, with the
            params' batch shape.

        Raises:
            RuntimeError: the class does not support the channel (as scqubits).
        """
        return self._noise_call(
            "t1_capacitive",
            {"i": i, "j": j, "Q_cap": Q_cap, "T": T, "total": total, "noise_op": noise_op,
             "branch_params": branch_params},
            esys, get_rate, params,
        )  # fmt: skip

    def t1_charge_impedance(
        self,
        i: int = 1,
        j: int = 0,
        Z: float | Callable = 50,
        T: float = T_DEFAULT,
        total: bool = True,
        esys: tuple[Any, Any] | None = None,
        get_rate: bool = False,
        noise_op: Any = None,
        *,
        params: ParamsArg = None,
    ) -> Any:
        """T1 from charge coupling to an impedance `Z` (scqubits' `t1_charge_impedance`).

        Args:
            i, j, T, total, esys, get_rate, noise_op, params: as for `t1_capacitive`.
            Z: the impedance in Ohm: a number or a JAX function of omega (its real part is
                used).

        Returns:
            The time or rate, with the params' batch shape.

        Raises:
            RuntimeError: the class does not support the channel.
        """
        return self._noise_call(
            "t1_charge_impedance",
            {"i": i, "j": j, "Z": Z, "T": T, "total": total, "noise_op": noise_op},
            esys, get_rate, params,
        )  # fmt: skip

    def t1_flux_bias_line(
        self,
        i: int = 1,
        j: int = 0,
        M: float = 400,
        Z: complex | float | Callable = 50,
        T: float = T_DEFAULT,
        total: bool = True,
        esys: tuple[Any, Any] | None = None,
        get_rate: bool = False,
        noise_op_method: Any = None,
        *,
        params: ParamsArg = None,
    ) -> Any:
        """T1 from a flux bias line (scqubits' `t1_flux_bias_line`), through scqubits'
        `d_hamiltonian_d_flux` operator.

        Args:
            M: the mutual inductance in Phi_0 / A.
            Z: the line's impedance (a number or a JAX function of omega).
            noise_op_method: a function returning a matrix, or an operator name, replacing
                `d_hamiltonian_d_flux`.
            i, j, T, total, esys, get_rate, params: as for `t1_capacitive`.

        Returns:
            The time or rate, with the params' batch shape.

        Raises:
            RuntimeError: the class does not support the channel.
        """
        return self._noise_call(
            "t1_flux_bias_line",
            {"i": i, "j": j, "M": M, "Z": Z, "T": T, "total": total,
             "noise_op_method": noise_op_method},
            esys, get_rate, params,
        )  # fmt: skip

    def t1_inductive(
        self,
        i: int = 1,
        j: int = 0,
        Q_ind: float | Callable | None = None,
        T: float = T_DEFAULT,
        total: bool = True,
        esys: tuple[Any, Any] | None = None,
        get_rate: bool = False,
        noise_op: Any = None,
        branch_params: float | None = None,
        *,
        params: ParamsArg = None,
    ) -> Any:
        """T1 from inductive loss (scqubits' `t1_inductive`), through the phase operator.

        The default `Q_ind = 500e6 K0(x500/2) sinh(x500/2) / (K0(|x|/2) sinh(|x|/2))` uses a
        JAX `K0` (`_bessel.py`, equal to SciPy's to ~1e-14).

        Args:
            Q_ind: the quality factor: a number or a JAX function of `(omega, T)`.
            branch_params: a number replacing EL in `S`.
            i, j, T, total, esys, get_rate, noise_op, params: as for `t1_capacitive`.

        Returns:
            The time or rate, with the params' batch shape.

        Raises:
            RuntimeError: the class does not support the channel.
        """
        return self._noise_call(
            "t1_inductive",
            {"i": i, "j": j, "Q_ind": Q_ind, "T": T, "total": total, "noise_op": noise_op,
             "branch_params": branch_params},
            esys, get_rate, params,
        )  # fmt: skip

    def t1_quasiparticle_tunneling(
        self,
        i: int = 1,
        j: int = 0,
        Y_qp: float | Callable | None = None,
        x_qp: float = 3e-6,
        T: float = T_DEFAULT,
        Delta: float = 3.4e-4,
        total: bool = True,
        esys: tuple[Any, Any] | None = None,
        get_rate: bool = False,
        noise_op: Any = None,
        *,
        params: ParamsArg = None,
    ) -> Any:
        """T1 from quasiparticle tunneling across the junction (scqubits'
        `t1_quasiparticle_tunneling`), through `sin(phi/2 + pi flux)`.

        Args:
            Y_qp: the admittance (a number or a JAX function of `(omega, T)`); by default
                scqubits' Eq. S23 of Smith et al. (2020), with the junction's EJ.
            x_qp: the quasiparticle density.
            Delta: the superconducting gap in eV.
            i, j, T, total, esys, get_rate, noise_op, params: as for `t1_capacitive`.

        Returns:
            The time or rate, with the params' batch shape.

        Raises:
            RuntimeError: the class does not support the channel.
        """
        return self._noise_call(
            "t1_quasiparticle_tunneling",
            {"i": i, "j": j, "Y_qp": Y_qp, "x_qp": x_qp, "T": T, "Delta": Delta,
             "total": total, "noise_op": noise_op},
            esys, get_rate, params,
        )  # fmt: skip

    def _tphi(self, name: str, A_noise: Any, i: int, j: int, esys: Any, get_rate: bool,
              params: Any, kwargs: dict[str, Any]) -> Any:  # fmt: skip
        return self._noise_call(name, {"A_noise": A_noise, "i": i, "j": j, **kwargs}, esys,
                                get_rate, params)  # fmt: skip

    def tphi_1_over_f_flux(
        self,
        A_noise: float = 1e-6,
        i: int = 0,
        j: int = 1,
        esys: tuple[Any, Any] | None = None,
        get_rate: bool = False,
        *,
        params: ParamsArg = None,
        **kwargs: Any,
    ) -> Any:
        """Tphi from 1/f flux noise (scqubits' `tphi_1_over_f_flux`).

        `1 / Tphi = 2 pi A_noise sqrt(2 |ln(omega_low t_exp)|) |<i|dH|i> - <j|dH|j>|`, `dH`
        scqubits' `d_hamiltonian_d_flux`. At a sweet spot the difference is 0 and the
        derivative of `|.|` is taken as 0 there (JAX's `abs`); a float difference of 1e-15
        instead picks one side's slope, while central differences average the two.

        Args:
            A_noise: the noise amplitude (in flux quanta).
            i, j: the two levels (static).
            esys, get_rate, params: as for `t1_capacitive`.
            **kwargs: `omega_low` and `t_exp` (scqubits' defaults 2 pi 1e-9 and 1e4); others
                are accepted and unused, as in scqubits.

        Returns:
            The time or rate, with the params' batch shape.

        Raises:
            RuntimeError: the class does not support the channel.
        """
        return self._tphi("tphi_1_over_f_flux", A_noise, i, j, esys, get_rate, params, kwargs)

    def tphi_1_over_f_cc(
        self,
        A_noise: float = 1e-7,
        i: int = 0,
        j: int = 1,
        esys: tuple[Any, Any] | None = None,
        get_rate: bool = False,
        *,
        params: ParamsArg = None,
        **kwargs: Any,
    ) -> Any:
        """Tphi from 1/f critical-current noise (scqubits' `tphi_1_over_f_cc`), through
        `d_hamiltonian_d_EJ` (FluxQubit: the sum of its three junctions' rates).

        Args:
            A_noise, i, j, esys, get_rate, params, kwargs: as for `tphi_1_over_f_flux`.

        Returns:
            The time or rate, with the params' batch shape.

        Raises:
            RuntimeError: the class does not support the channel.
        """
        return self._tphi("tphi_1_over_f_cc", A_noise, i, j, esys, get_rate, params, kwargs)

    def tphi_1_over_f_ng(
        self,
        A_noise: float = 1e-4,
        i: int = 0,
        j: int = 1,
        esys: tuple[Any, Any] | None = None,
        get_rate: bool = False,
        *,
        params: ParamsArg = None,
        **kwargs: Any,
    ) -> Any:
        """Tphi from 1/f charge noise (scqubits' `tphi_1_over_f_ng`), through
        `d_hamiltonian_d_ng`.

        Args:
            A_noise, i, j, esys, get_rate, params, kwargs: as for `tphi_1_over_f_flux`.

        Returns:
            The time or rate, with the params' batch shape.

        Raises:
            RuntimeError: the class does not support the channel.
        """
        return self._tphi("tphi_1_over_f_ng", A_noise, i, j, esys, get_rate, params, kwargs)

    # -- effective times

    def _effective_plan(self, noise_channels: Any, common: Any, kind: str) -> list[Any]:
        common = dict(common or {})
        if noise_channels is None:
            noise_channels = self.effective_noise_channels()
            if kind == "t1":
                noise_channels = [c for c in noise_channels if c.startswith("t1")]
        if isinstance(noise_channels, str):
            noise_channels = [noise_channels]
        plan = []
        for entry in noise_channels:
            if isinstance(entry, str):
                name, extra = entry, {}
            elif isinstance(entry, tuple):
                name, extra = entry[0], dict(entry[1])
            else:
                raise ValueError(BAD_CHANNELS.format(got=entry))
            if kind == "t1" and not name.startswith("t1"):
                raise ValueError(ONLY_T1)
            scale = 0.5 if kind == "tphi" and name.startswith("t1") else 1.0
            given = {**common, **extra}
            given.pop("get_rate", None)
            given.pop("esys", None)
            plan.append((name, scale, self._options(name, given)))
        return plan

    def t1_effective(
        self,
        noise_channels: str | list[Any] | None = None,
        common_noise_options: dict[str, Any] | None = None,
        esys: tuple[Any, Any] | None = None,
        get_rate: bool = False,
        *,
        params: ParamsArg = None,
        **kwargs: Any,
    ) -> Any:
        """The effective T1 (scqubits' `t1_effective`): `1 / T1 = sum_k 1 / T1_k`.

        By default over the `t1` channels of `effective_noise_channels()`; one diagonalisation
        serves every channel.

        Args:
            noise_channels: a channel name, a list of names, or of `(name, options)` tuples.
            common_noise_options: options given to every channel (`T`, `i`, `j`, ...).
            esys, get_rate, params: as for `t1_capacitive`.
            **kwargs: accepted and unused, as in scqubits.

        Returns:
            The time (`inf` where the rate is 0) or rate, with the params' batch shape.

        Raises:
            ValueError: a channel is not a `t1` channel.
        """
        plan = self._effective_plan(noise_channels, common_noise_options, "t1")
        return self._evaluate_plan(plan, esys, get_rate, params, "t1_effective")

    def t2_effective(
        self,
        noise_channels: str | list[Any] | None = None,
        common_noise_options: dict[str, Any] | None = None,
        esys: tuple[Any, Any] | None = None,
        get_rate: bool = False,
        *,
        params: ParamsArg = None,
    ) -> Any:
        """The effective T2 (scqubits' `t2_effective`): `1/T2 = sum 1/Tphi + sum 1/(2 T1)`.

        By default over `effective_noise_channels()`. The rate is differentiable wherever
        every channel's is; at a sweet spot see `tphi_1_over_f_flux`.

        Args:
            noise_channels, common_noise_options: as for `t1_effective`.
            esys, get_rate, params: as for `t1_capacitive`.

        Returns:
            The time or rate, with the params' batch shape.

        Example:
            >>> import jax, scqubits, jaxbridge.scqubits as jbq
            >>> jax.config.update("jax_enable_x64", True)
            >>> scqubits.settings.T1_DEFAULT_WARNING = False  # scqubits' notice on `total`
            >>> qubit = scqubits.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.4, cutoff=40)
            >>> m = jbq.model(qubit)
            >>> t2 = lambda flux: m.t2_effective(params={"flux": flux})
            >>> bool(abs(t2(0.4) / qubit.t2_effective() - 1) < 1e-8)
            True
            >>> float(jax.grad(t2)(0.4)) != 0.0
            True
            >>> jax.config.update("jax_enable_x64", False)
        """
        plan = self._effective_plan(noise_channels, common_noise_options, "tphi")
        return self._evaluate_plan(plan, esys, get_rate, params, "t2_effective")

    # -- evaluation

    def _noise_call(
        self, name: str, given: Mapping[str, Any], esys: Any, get_rate: bool, params: Any
    ) -> Any:
        options = self._options(name, given)
        return self._evaluate_plan([(name, 1.0, options)], esys, get_rate, params, name)

    def _evaluate_plan(
        self,
        plan: Sequence[tuple[str, float, dict[str, Any]]],
        esys: Any,
        get_rate: bool,
        params: Any,
        method: str,
    ) -> Any:
        k = 1 + max([1, *(max(self._levels_of(n, o)) for n, _, o in plan)])
        static = tuple(
            (n, scale, tuple(sorted((key, v) for key, v in o.items() if _is_static(v))))
            for n, scale, o in plan
        )
        dynamic = [{key: v for key, v in o.items() if not _is_static(v)} for _, _, o in plan]
        values = self._values(params, method)  # pyright: ignore[reportAttributeAccessIssue]
        key = (static, k, bool(get_rate), units(), esys is None)
        cache = self.__dict__["_noise_jit"]
        if key not in cache:
            program = self._program(static, k, bool(get_rate), units())
            cache[key] = (program, jax.jit(program))
        program, compiled = cache[key]
        return compiled(values, dynamic, esys)

    def _levels_of(self, name: str, o: Mapping[str, Any]) -> tuple[int, int]:
        channel = self._channel(name)
        if channel.kind == "rates":
            return max((self._levels_of(m, {**o, **mo}) for m, mo in channel.members))
        return _levels(o)

    def _program(self, static: Any, k: int, get_rate: bool, factor: float) -> Callable:
        def run(values: dict[str, jax.Array], dynamic: list[dict[str, Any]], esys: Any) -> Any:
            def one(p: dict[str, jax.Array], es: Any) -> jax.Array:
                w, v = self._noise_eigensys(p, k) if es is None else es
                rate = jnp.zeros((), w.dtype)
                memo: dict = {}
                for (name, scale, items), dyn in zip(static, dynamic):
                    o = {**dict(items), **dyn}
                    rate = rate + scale * self._rate(name, p, w, v, o, factor, memo)
                return rate if get_rate else _time(rate)

            return _map_with(one, values, esys)

        return run

    def _noise_eigensys(self, p: dict[str, jax.Array], k: int) -> tuple[jax.Array, jax.Array]:
        terms = self._spec.terms
        if self._method("auto", "noise") == "dense":  # pyright: ignore[reportAttributeAccessIssue] - Model's
            return eigh_k(terms.dense(p), k)
        return self._sparse.eigensys(terms.flat_coefficients(p), k)  # pyright: ignore[reportAttributeAccessIssue]

    def _elements(self, terms: Terms) -> _Elements:
        cache = self.__dict__["_noise_elements"]
        if terms not in cache:
            cache[terms] = _Elements(terms)
        return cache[terms]

    def _rate(
        self, name: str, p: Params, w: jax.Array, v: jax.Array, o: dict, factor: float, memo: dict
    ) -> jax.Array:
        channel = self._channel(name)
        if channel.kind == "rates":
            return sum(
                (self._rate(m, p, w, v, {**o, **mo}, factor, memo) for m, mo in channel.members),
                start=jnp.zeros((), w.dtype),
            )
        i, j = _levels(o)

        def elements(op: Terms) -> jax.Array:
            # Channels share operators (Fluxonium's d_hamiltonian_d_flux serves tphi and the
            # flux-bias line) and their Spectral factors: each is computed once a program.
            key = (id(op), i, j)
            if key not in memo:
                pair = jnp.stack([v[:, i], v[:, j]], axis=1)
                memo[key] = self._elements(op)(p, pair, memo, (i, j))
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


def _map_with(fn: Callable[[Any, Any], Any], values: dict[str, jax.Array], esys: Any) -> Any:
    """`fn` at every point of the params' (and `esys`') batch shape."""
    shapes = [v.shape for v in values.values()]
    if esys is not None:
        w, v = (jnp.asarray(x) for x in esys)
        shapes.append(w.shape[:-1])
        esys = (w, v)
    shape = jnp.broadcast_shapes(*shapes)
    if not shape:
        return fn(values, esys)
    flat = {k: jnp.broadcast_to(x, shape).reshape(-1) for k, x in values.items()}
    if esys is None:
        out = jax.vmap(lambda p: fn(p, None))(flat)
    else:
        w, v = esys
        w = jnp.broadcast_to(w, (*shape, w.shape[-1])).reshape(-1, w.shape[-1])
        v = jnp.broadcast_to(v, (*shape, *v.shape[-2:])).reshape(-1, *v.shape[-2:])
        out = jax.vmap(lambda p, a, b: fn(p, (a, b)))(flat, w, v)
    return out.reshape(shape)
