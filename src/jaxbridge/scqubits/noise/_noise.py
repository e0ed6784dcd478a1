"""Coherence times: scqubits' noise methods on a `Model`, with scqubits' names and defaults.

`NoiseMethods` is a base class of `Model`. Its channel methods (`t1_capacitive`, ...,
`tphi_1_over_f_ng`) are generated from scqubits' signatures in `_channel.py`, so each default is
written once, there; `t1_effective` and `t2_effective` sum channels. Each call makes a plan
(channel names, scales, options) that `_rates.Engine` turns into one compiled JAX program of
the parameters: one eigensystem, each operator's matrix elements once, scqubits' formulas for
the rates (scqubits 4.3.1, `scqubits/core/noise.py` and the classes' overrides).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from .. import _params
from .._eigen import NoiseSpectrum, eigh_k
from .._terms import Params, Terms
from ..qubits import CHANNELS as BUILDERS
from . import _channel
from ._channel import Channel
from ._densities import OMEGA_LOW, T_DEFAULT, T_EXP, units
from ._rates import Elements, Engine, is_static, levels, time_of

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
NO_CHANNEL = (
    "`{kind}` model has no noise channel {name!r}; scqubits' `supported_noise_channels()` "
    "of this object is {supported}."
)
LEVEL_BEYOND = (
    "`{method}`: level index {level} is beyond this model's truncation: it has {dim} levels "
    "(indices 0 to {last}). Use a smaller `i`/`j`, or larger cutoffs on the scqubits object."
)
UNEXPECTED = "`{method}()` got an unexpected keyword argument {name!r}; it takes {known}."

_COMMON_ARGS = """
        esys: `(evals, evecs)` to use instead of diagonalising at `params` (their leading
            dimensions a batch shape, broadcast with the params').
        get_rate: return the rate (1 / time) instead of the time.
        params: as for `Model.hamiltonian`.

    Returns:
        The time (`inf` where the rate is 0) or rate, in scqubits' units, with the params'
        batch shape.

    Raises:
        RuntimeError: the class does not support the channel (as scqubits).
"""
_T1_ARGS = """
        i, j: the transition i -> j (static integers).
        T: the temperature in K.
        total: both directions (True) or i -> j only."""
_TPHI_ARGS = """
        A_noise: the noise amplitude.
        i, j: the two levels (static).
        **kwargs: `omega_low` and `t_exp` (scqubits' defaults 2 pi 1e-9 and 1e4); others
            are accepted and unused, as in scqubits."""

#: The channel methods every class has (unsupported ones raise, as in scqubits): scqubits'
#: signature (from `_channel.py`), whether it takes `**kwargs`, and the docstring's head.
CHANNEL_METHODS: dict[str, tuple[_channel.Signature, bool, str]] = {
    "t1_capacitive": (
        _channel.sig_capacitive(),
        False,
        """T1 from dielectric loss in the capacitances (scqubits' `t1_capacitive`).

    `1 / T1 = |<i|n|j>|^2 (S(omega) + S(-omega))`, `omega = 2 pi (E_i - E_j)`,
    `S(omega) = 16 EC / Q_cap(omega) coth(|x|/2) / (1 + exp(-x)) 2 pi`, `x = hbar omega /
    k_B T`, and by default `Q_cap = 1e6 (2 pi 6 GHz / |omega|)^0.7`.

    Args:
        Q_cap: the quality factor: a number, or a JAX function of `(omega, T)`.
        noise_op: an operator name or matrix replacing the charge operator.
        branch_params: a number replacing EC in `S`."""
        + _T1_ARGS,
    ),
    "t1_charge_impedance": (
        _channel.sig_charge_impedance(),
        False,
        """T1 from charge coupling to an impedance `Z` (scqubits' `t1_charge_impedance`).

    Args:
        Z: the impedance in Ohm: a number or a JAX function of omega (its real part is used).
        noise_op: an operator name or matrix replacing the charge operator."""
        + _T1_ARGS,
    ),
    "t1_flux_bias_line": (
        _channel.sig_flux_bias_line(),
        False,
        """T1 from a flux bias line (scqubits' `t1_flux_bias_line`), through scqubits'
    `d_hamiltonian_d_flux` operator.

    Args:
        M: the mutual inductance in Phi_0 / A.
        Z: the line's impedance (a number or a JAX function of omega).
        noise_op_method: a function returning a matrix, or an operator name, replacing
            `d_hamiltonian_d_flux`."""
        + _T1_ARGS,
    ),
    "t1_inductive": (
        _channel.sig_inductive(),
        False,
        """T1 from inductive loss (scqubits' `t1_inductive`), through the phase operator.

    The default `Q_ind = 500e6 K0(x500/2) sinh(x500/2) / (K0(|x|/2) sinh(|x|/2))` takes `K0`
    from SciPy on the host (`_kv.py`, scqubits' own `kv(0, x)`), with JAX derivatives.

    Args:
        Q_ind: the quality factor: a number or a JAX function of `(omega, T)`.
        noise_op: an operator name or matrix replacing the phase operator.
        branch_params: a number replacing EL in `S`."""
        + _T1_ARGS,
    ),
    "t1_quasiparticle_tunneling": (
        _channel.sig_qp(),
        False,
        """T1 from quasiparticle tunneling across the junction (scqubits'
    `t1_quasiparticle_tunneling`), through `sin(phi/2 + pi flux)`.

    Args:
        Y_qp: the admittance (a number or a JAX function of `(omega, T)`); by default
            scqubits' Eq. S23 of Smith et al. (2020), with the junction's EJ.
        x_qp: the quasiparticle density.
        Delta: the superconducting gap in eV.
        noise_op: an operator name or matrix replacing `sin(phi/2 + pi flux)`."""
        + _T1_ARGS,
    ),
    "tphi_1_over_f_flux": (
        _channel.sig_tphi(_channel.A_FLUX),
        True,
        """Tphi from 1/f flux noise (scqubits' `tphi_1_over_f_flux`).

    `1 / Tphi = 2 pi A_noise sqrt(2 |ln(omega_low t_exp)|) |<i|dH|i> - <j|dH|j>|`, `dH`
    scqubits' `d_hamiltonian_d_flux`. At a sweet spot the difference is 0 and the
    derivative of `|.|` is taken as 0 there (JAX's `abs`); a float difference of 1e-15
    instead picks one side's slope, while central differences average the two.

    Args:"""
        + _TPHI_ARGS,
    ),
    "tphi_1_over_f_cc": (
        _channel.sig_tphi(_channel.A_CC),
        True,
        """Tphi from 1/f critical-current noise (scqubits' `tphi_1_over_f_cc`), through
    `d_hamiltonian_d_EJ` (FluxQubit: the sum of its three junctions' rates).

    Args:"""
        + _TPHI_ARGS,
    ),
    "tphi_1_over_f_ng": (
        _channel.sig_tphi(_channel.A_NG),
        True,
        """Tphi from 1/f charge noise (scqubits' `tphi_1_over_f_ng`), through
    `d_hamiltonian_d_ng`.

    Args:"""
        + _TPHI_ARGS,
    ),
}


def positional_order(signature: _channel.Signature) -> list[str]:
    """scqubits' positional order: `esys` and `get_rate` right after `total` (a T1 channel's
    last common argument), else after the channel's own arguments (`A_noise`, `i`, `j`)."""
    names = [n for n, _ in signature]
    at = names.index("total") + 1 if "total" in names else len(names)
    return [*names[:at], "esys", "get_rate", *names[at:]]


def channel_method(
    name: str, signature: _channel.Signature, kwargs: bool, doc: str
) -> Callable[..., Any]:
    """The noise method `name`, taking scqubits' arguments in `signature` (with its defaults,
    then `esys` and `get_rate`), `**kwargs` if `kwargs`, and the keyword-only `params`.

    The defaults are shown in its signature; the channel's own table (`Channel.signature`, the
    same tuples) fills in those not given.
    """
    order = positional_order(signature)

    def method(self: NoiseMethods, *args: Any, **options: Any) -> Any:
        if len(args) > len(order):
            raise TypeError(f"`{name}()` takes at most {len(order)} positional arguments")
        given = dict(zip(order, args))
        duplicated = set(given) & set(options)
        if duplicated:
            raise TypeError(f"`{name}()` got multiple values for {sorted(duplicated)}")
        given.update(options)
        esys = given.pop("esys", None)
        get_rate = given.pop("get_rate", False)
        params = given.pop("params", None)
        return self._noise_call(name, given, esys, get_rate, params)

    defaults = {**dict(signature), "esys": None, "get_rate": False}
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [inspect.Parameter("self", kind)]
    parameters += [inspect.Parameter(n, kind, default=defaults[n]) for n in order]
    parameters.append(inspect.Parameter("params", inspect.Parameter.KEYWORD_ONLY, default=None))
    if kwargs:
        parameters.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
    method.__signature__ = inspect.Signature(parameters)  # pyright: ignore[reportFunctionMemberAccess]
    method.__name__ = method.__qualname__ = name
    method.__doc__ = doc + _COMMON_ARGS
    return method


#: How many (trace, parameters) spectra a model keeps for `NoiseMethods._shared`.
_SHARED_ENTRIES = 4


def _trace_state() -> Any:
    """The current trace, comparable with `==` (JAX's public opaque handle)."""
    try:
        from jax.extend.core import get_opaque_trace_state
    except ImportError:  # older jax: the same function under jax.core
        from jax.core import get_opaque_trace_state
    return get_opaque_trace_state(convention="jaxbridge")


def _point_key(params: ParamsArg) -> tuple[tuple[Any, ...], list[Any]]:
    """A key of the given `params` that two calls share only with the same values: a traced
    value by identity (returned in the second list, to be held), any other by its bytes."""
    key: list[Any] = []
    held: list[Any] = []
    for name, value in sorted(dict(params or {}).items()):
        leaves, structure = jax.tree.flatten(value)
        parts: list[Any] = [str(structure)]
        for leaf in leaves:
            if isinstance(leaf, Tracer):
                parts.append(("traced", id(leaf)))
                held.append(leaf)
            else:
                a = np.asarray(leaf)
                parts.append((a.dtype.str, a.shape, a.tobytes()))
        key.append((name, tuple(parts)))
    return tuple(key), held


class NoiseMethods:
    """scqubits' noise methods for a `Model` (its base class).

    Every method takes scqubits' arguments, with scqubits' defaults, and `params` as the
    model's other methods do; results have the params' batch shape. Options that are numbers
    (`T`, `Q_cap`, `A_noise`, ...) may be JAX values (differentiable); `i`, `j`, `total`,
    `get_rate` and functions are static. A function given for `Q_cap`, `Q_ind`, `Z` or `Y_qp`
    is called with JAX values and must be written with `jax.numpy`. Under `jax.jit` a method
    is inlined into the caller's program; under `jax.vmap` its params (and `esys`) carry the
    batch; `jax.grad`, `jax.jacfwd` and `jax.jacrev` work on the dense path (float64 with x64).
    """

    _obj: Any
    _spec: Any
    dim: int

    # -- the tables

    def _noise_table(self) -> dict[str, Channel]:
        table = self.__dict__.get("_noise_channels")
        if table is None:
            kind = self._spec.kind
            if self._spec.channels_fn is not None:
                table = self._spec.channels_fn()  # a Circuit's (it raises if not generated)
            elif kind in BUILDERS:
                table = BUILDERS[kind](self._obj)
            else:
                raise RuntimeError(f"noise methods are not available for a `{kind}` model yet.")
            self.__dict__["_noise_channels"] = table
            self.__dict__["_noise_jit"] = {}
            engine = Engine(self._channel, self._noise_eigensys, self._noise_spectrum)
            self.__dict__["_noise_engine"] = engine
        return table

    def supported_noise_channels(self) -> list[str]:
        """scqubits' `supported_noise_channels()` of the object: the channels it can compute.

        Returns:
            The same list as `obj.supported_noise_channels()`.

        Raises:
            RuntimeError: a `Circuit` whose noise methods scqubits has not generated.
        """
        self._noise_table()  # one error for a Circuit without noise methods, whatever is called
        return list(self._obj.supported_noise_channels())

    def effective_noise_channels(self) -> list[str]:
        """The channels `t1_effective` and `t2_effective` use by default (as scqubits).

        Returns:
            The same list as `obj.effective_noise_channels()`.

        Raises:
            RuntimeError: as `supported_noise_channels`.
        """
        self._noise_table()
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
        table = self._noise_table()
        if name in table and not hasattr(NoiseMethods, name):
            channel = table[name]
            doc = f"scqubits' `{name}` of this model, with `params`.\n\n    Args:"
            method = channel_method(name, channel.signature, channel.kwargs, doc)
            return method.__get__(self)
        if name.startswith(("t1_", "tphi_")):
            supported = self.supported_noise_channels()
            kind = self._spec.kind
            raise AttributeError(NO_CHANNEL.format(kind=kind, name=name, supported=supported))
        raise AttributeError(f"`{type(self).__name__}` object has no attribute {name!r}")

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

    # -- scqubits' channel methods (NoisySystem's; every class has them, unsupported ones raise)

    t1_capacitive = channel_method("t1_capacitive", *CHANNEL_METHODS["t1_capacitive"])
    t1_charge_impedance = channel_method(
        "t1_charge_impedance", *CHANNEL_METHODS["t1_charge_impedance"]
    )
    t1_flux_bias_line = channel_method("t1_flux_bias_line", *CHANNEL_METHODS["t1_flux_bias_line"])
    t1_inductive = channel_method("t1_inductive", *CHANNEL_METHODS["t1_inductive"])
    t1_quasiparticle_tunneling = channel_method(
        "t1_quasiparticle_tunneling", *CHANNEL_METHODS["t1_quasiparticle_tunneling"]
    )
    tphi_1_over_f_flux = channel_method(
        "tphi_1_over_f_flux", *CHANNEL_METHODS["tphi_1_over_f_flux"]
    )
    tphi_1_over_f_cc = channel_method("tphi_1_over_f_cc", *CHANNEL_METHODS["tphi_1_over_f_cc"])
    tphi_1_over_f_ng = channel_method("tphi_1_over_f_ng", *CHANNEL_METHODS["tphi_1_over_f_ng"])

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

    # -- custom channels (scqubits' generic `t1`, `tphi_1_over_f`, `transition_energy_derivative`)

    def _custom_elements(self, op: Any, method: str) -> Callable[[Params, Any], list[Any]]:
        """`(p, v) -> [<v_a|op|v_b>]` for the custom channels: the one place a model with its
        own operators (a hierarchy's, a FullZeroPi's) differs in `_custom`."""
        del method
        return Elements((self._noise_operator(op),))

    def _custom(
        self, method: str, op: Any, i: int, j: int, esys: Any, params: Any, fn: Callable
    ) -> Any:
        """`fn(w, <a|op|b>)` at every point of the params' batch: one eigensystem a point (or
        the given `esys`), the elements of `op` between its levels."""
        i, j = levels({"i": i, "j": j})
        k = max(i, j) + 1
        if k > self.dim:
            raise ValueError(
                LEVEL_BEYOND.format(method=method, level=k - 1, dim=self.dim, last=self.dim - 1)
            )
        if isinstance(op, list):  # scqubits takes a list's first operator
            op = op[0]
        elements = self._custom_elements(op, method)
        values = self._values(params, method)  # pyright: ignore[reportAttributeAccessIssue] - Model's

        def one(p: Params, es: Any) -> Any:
            w, v = self._noise_eigensys(p, k) if es is None else es
            return fn(w, elements(p, v[:, :k])[0])

        if esys is None:
            return _params.map_batch(lambda p: one(p, None), values)
        es = tuple(jnp.asarray(x) for x in esys)
        return _params.map_batch(one, values, es, core_ndims=(0, (1, 2)))

    def t1(
        self,
        i: int,
        j: int,
        noise_op: Any,
        spectral_density: Callable[[Any, Any], Any],
        T: Any = T_DEFAULT,
        total: bool = True,
        esys: tuple[Any, Any] | None = None,
        get_rate: bool = False,
        *,
        params: ParamsArg = None,
    ) -> Any:
        """A channel of your own by Fermi's golden rule (scqubits' generic `t1`).

        `1 / T1 = |<i|O|j>|^2 (S(omega, T) + S(-omega, T))` (only `S(omega, T)` unless
        `total`), `omega = 2 pi (E_i - E_j)` in system units.

        Args:
            i, j: the transition i -> j (static integers).
            noise_op: the operator `O`: the name of one of the model's operators (recomputed
                at `params` where it depends on them), a fixed `(N, N)` matrix (NumPy, SciPy
                sparse or qutip), or for a `Circuit` a SymPy expression in its variables.
            spectral_density: `S(omega, T)`, written with `jax.numpy` (it is traced).
            T: the temperature (a number or a JAX value).
            total: both directions (True) or i -> j only.
            esys, get_rate, params: as for `t1_capacitive`.

        Returns:
            The time (`inf` where the rate is 0) or rate, with the params' batch shape;
            differentiable in the params and `T` (float64 with x64).

        Raises:
            ValueError: `i == j`, a negative level, or a level beyond the truncation.

        Example:
            >>> import jax, jax.numpy as jnp, scqubits, jaxbridge.scqubits as jbq
            >>> m = jbq.model(scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=10))
            >>> s = lambda omega, T: 1e-6 * jnp.abs(omega)
            >>> float(m.t1(1, 0, "n_operator", s, get_rate=True)) > 0
            True
        """

        def fn(w: Any, m: Any) -> Any:
            omega = 2 * np.pi * (w[i] - w[j])
            s = spectral_density(omega, T)
            if total:
                s = s + spectral_density(-omega, T)
            rate = (jnp.real(m[i, j]) ** 2 + jnp.imag(m[i, j]) ** 2) * s
            return rate if get_rate else time_of(rate)

        return self._custom("t1", noise_op, i, j, esys, params, fn)

    def tphi_1_over_f(
        self,
        A_noise: Any,
        i: int,
        j: int,
        noise_op: Any,
        esys: tuple[Any, Any] | None = None,
        get_rate: bool = False,
        *,
        params: ParamsArg = None,
        **kwargs: Any,
    ) -> Any:
        """1/f dephasing by an operator of your own (scqubits' generic `tphi_1_over_f`).

        `1 / Tphi = 2 pi A_noise sqrt(2 |ln(omega_low t_exp)|) |<i|O|i> - <j|O|j>|`.

        Args:
            A_noise: the noise amplitude (a number or a JAX value).
            i, j: the two levels (static).
            noise_op: as for `t1`; typically a Hamiltonian derivative.
            esys, get_rate, params: as for `t1_capacitive`.
            **kwargs: `omega_low` and `t_exp` (scqubits' defaults 2 pi 1e-9 and 1e4); others
                are accepted and unused, as in scqubits.

        Returns:
            The time or rate, with the params' batch shape (see `tphi_1_over_f_flux` on the
            derivative at a sweet spot).

        Raises:
            ValueError: as `t1`.
        """
        low, t_exp = kwargs.get("omega_low", OMEGA_LOW), kwargs.get("t_exp", T_EXP)

        def fn(w: Any, m: Any) -> Any:
            shift = jnp.abs(jnp.real(m[i, i]) - jnp.real(m[j, j]))
            rate = shift * A_noise * jnp.sqrt(2 * jnp.abs(jnp.log(low * t_exp))) * 2 * np.pi
            return rate if get_rate else time_of(rate)

        return self._custom("tphi_1_over_f", noise_op, i, j, esys, params, fn)

    def transition_energy_derivative(
        self,
        ni: int,
        nf: int,
        esys: tuple[Any, Any] | None = None,
        hamiltonian_derivative: Any = None,
        *,
        params: ParamsArg = None,
    ) -> Any:
        """`<ni|dH|ni> - <nf|dH|nf>`, the first derivative of the transition energy along `dH`
        (scqubits' `transition_energy_derivative`, which returns it as a 1-element array).

        Args:
            ni, nf: the two levels (static).
            esys: as for `t1_capacitive` (None: diagonalise at `params`).
            hamiltonian_derivative: the operator `dH`, as `noise_op` of `t1` (a list: its
                first entry, as scqubits), or a parameter's name (`"flux"`, `"EJ"`, ...):
                `d_hamiltonian` of it at `params`.
            params: as for `Model.hamiltonian`.

        Returns:
            `(*batch, 1)`, the real part (the operator is Hermitian).

        Raises:
            ValueError: as `t1`.
        """
        op = hamiltonian_derivative
        if isinstance(op, str) and op in getattr(self, "params", {}):
            op = self._parameter_derivative(op)

        def fn(w: Any, m: Any) -> Any:
            return jnp.real(m[ni, ni] - m[nf, nf])[None]

        return self._custom("transition_energy_derivative", op, ni, nf, esys, params, fn)

    def _parameter_derivative(self, name: str) -> Terms:
        """`d H / d name` as `Terms` of the parameters (a forward derivative of each term's
        coefficient)."""
        cache = self.__dict__.setdefault("_parameter_derivatives", {})
        if name not in cache:
            terms = self._spec.terms

            def coefficients(p: Params) -> list[Any]:
                tangent = {n: jnp.zeros_like(jnp.asarray(v)) for n, v in p.items()}
                tangent[name] = jnp.ones_like(jnp.asarray(p[name]))
                return list(jax.jvp(terms.coefficients, (p,), (tangent,))[1])

            cache[name] = Terms(terms.operators, coefficients)
        return cache[name]

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
        engine: Engine = self.__dict__["_noise_engine"]
        k = 1 + max([1, *(max(engine.levels_of(n, o)) for n, _, o in plan)])
        if k > self.dim:
            raise ValueError(
                LEVEL_BEYOND.format(method=method, level=k - 1, dim=self.dim, last=self.dim - 1)
            )
        static = tuple(
            (n, scale, tuple(sorted((key, v) for key, v in o.items() if is_static(v))))
            for n, scale, o in plan
        )
        dynamic = [{key: v for key, v in o.items() if not is_static(v)} for _, _, o in plan]
        values = self._values(params, method)  # pyright: ignore[reportAttributeAccessIssue] - Model's
        shared, found = None, None
        if esys is None:
            shared, found = self._shared(static, k, params, values)
        key = (static, k, bool(get_rate), units(), esys is None, shared is not None)
        cache = self.__dict__["_noise_jit"]
        if key not in cache:
            cache[key] = jax.jit(engine.program(static, k, bool(get_rate), units(), shared))
        return cache[key](values, dynamic, esys, found)

    def _shared(
        self, static: Any, k: int, params: ParamsArg, values: dict[str, jax.Array]
    ) -> tuple[tuple[Terms, ...] | None, Any]:
        """One spectrum for every channel method called on the same parameters in one trace.

        `m.t1_effective(params=p)` and `m.t2_effective(params=p)` in one program would each
        diagonalise `H` at every point; instead both read one `NoiseSpectrum` of the operators
        of every effective channel, computed by the first and found by the second: the same
        `params` (each traced value the same object, every other value equal), the same
        trace, the same `k`. Plans with another operator (`noise_op=`) compute their own.

        Returns:
            `(operators, found)`: the spectrum's operators and its `(w, diag, sq)` for
            `Engine.program(shared=)`, or `(None, None)` where nothing is shared.
        """
        engine: Engine = self.__dict__["_noise_engine"]
        union = self.__dict__.get("_noise_union")
        if union is None:
            try:
                names = self.effective_noise_channels()
                plan = tuple((n, 1.0, tuple(self._options(n, {}).items())) for n in names)
                union = engine.operators(plan)
            except (RuntimeError, TypeError, ValueError):  # a channel that needs options
                union = ()
            self.__dict__["_noise_union"] = union
        ids = {id(op) for op in union}
        if not union or not all(id(op) in ids for op in engine.operators(static)):
            return None, None
        point, held = _point_key(params)
        state = _trace_state()
        memo: list[Any] = self.__dict__.setdefault("_noise_shared", [])
        for entry in memo:
            if entry[0] == state and entry[1] == k and entry[2] == point:
                return union, entry[4]
        cache = self.__dict__["_noise_jit"]
        if ("shared", k) not in cache:
            run = engine.shared_spectrum(union, k)
            cache[("shared", k)] = None if run is None else jax.jit(run)
        run = cache[("shared", k)]
        found = None if run is None else run(values)
        if found is None:
            return None, None
        # the traced values are held, so that no other value can take their ids while the
        # entry lives; the last few entries only (a trace's values are dropped with it soon)
        memo.insert(0, (state, k, point, held, found))
        del memo[_SHARED_ENTRIES:]
        return union, found

    def _noise_spectrum(self, ops: tuple[Terms, ...], k: int) -> NoiseSpectrum | None:
        """The levels and matrix elements of `ops` in one host call, for a dense model."""
        if self._method("auto", "noise") != "dense":  # pyright: ignore[reportAttributeAccessIssue] - Model's
            return None
        return NoiseSpectrum(self._spec.terms, ops, k)

    def _noise_eigensys(self, p: Params, k: int) -> tuple[jax.Array, jax.Array]:
        terms = self._spec.terms
        if self._method("auto", "noise") == "dense":  # pyright: ignore[reportAttributeAccessIssue] - Model's
            return eigh_k(terms.dense(p), k)
        return self._sparse.eigensys(terms.flat_coefficients(p), k)  # pyright: ignore[reportAttributeAccessIssue]
