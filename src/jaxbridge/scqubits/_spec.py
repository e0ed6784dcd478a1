"""What a model reads from one scqubits object (`Spec`), and the matrices its builders share.

A builder (one per qubit class in `qubits/`, `_circuit.circuit` for a `Circuit`) reads the
object once and returns a `Spec`: the parameters' defaults and the Hamiltonian as `Terms`. The
matrix helpers build the fixed operators of those terms: charge bases, truncated ladders and
Kronecker products as scqubits orders them (scqubits 4.3). A `Wave` says how the class's
eigenvectors become wavefunctions on grids, from the JAX helpers at the bottom (scqubits'
oscillator functions, charge-to-phase Fourier factors and `standardize_phases`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sparse

from ._terms import Terms, complex_of


@dataclasses.dataclass
class Spec:
    """What a model needs from one scqubits object.

    Attributes:
        defaults: every parameter's name and value on the object, in the model's order.
        terms: the Hamiltonian as `Terms` of the parameters.
        operators: the operators that depend on the parameters (an oscillator length), by
            their scqubits method name.
        fixed_operators: whether every other `*_operator()` method of the object returns a
            parameter-free matrix.
        kind: the scqubits class name, for error messages and the noise channels.
        operator_fn: for a `Circuit`, any operator (a name or a SymPy expression) as `Terms`.
        dropped: for a `Circuit`, symbolic parameters scqubits folded into numbers (not
            differentiable).
        channels_fn: for a `Circuit`, its noise channels (`_circuit_noise.channels`), read
            when a noise method is first called.
        wave: the class's wavefunction and potential (`Wave`); None where there are none.
        layout: for a flat `Circuit`, how its basis factors by variable (`CircuitLayout`),
            for `generate_wf_plot_data`.
        potential_energy: for a flat `Circuit`, reads its symbolic potential as a JAX
            function (`PotentialEnergy`, or None where it has a sawtooth) when first called.
    """

    defaults: dict[str, float]
    terms: Terms
    operators: dict[str, Terms] = dataclasses.field(default_factory=dict)
    fixed_operators: bool = True
    kind: str = ""
    operator_fn: Callable[[Any], Terms] | None = None
    dropped: list[str] = dataclasses.field(default_factory=list)
    channels_fn: Callable[[], dict[str, Any]] | None = None
    wave: Wave | None = None
    layout: CircuitLayout | None = None
    potential_energy: Callable[[], PotentialEnergy | None] | None = None


def dense(m: Any) -> np.ndarray:
    """`m` as a NumPy array, whether scqubits returned it sparse or dense."""
    return np.asarray(m.toarray() if sparse.issparse(m) else m)


def kron(*ms: Any) -> sparse.csr_array:
    """The Kronecker product of `ms`, left to right, as a sparse array."""
    out = sparse.csr_array(np.eye(1))
    for m in ms:
        out = sparse.csr_array(sparse.kron(out, sparse.csr_array(m)))
    return out


def charge_basis(ncut: int) -> tuple[np.ndarray, np.ndarray]:
    """`n` and `cos(phi)` on the charges `-ncut..ncut`."""
    size = 2 * ncut + 1
    n = np.diag(np.arange(-ncut, ncut + 1.0))
    cos = 0.5 * (np.eye(size, k=1) + np.eye(size, k=-1))
    return n, cos


def ladder(dim: int) -> tuple[np.ndarray, np.ndarray]:
    """`(a + a^dag)/sqrt(2)` and `i (a^dag - a)/sqrt(2)`, truncated to `dim` levels."""
    a = np.diag(np.sqrt(np.arange(1.0, dim)), k=1)
    return (a + a.T) / np.sqrt(2), 1j * (a.T - a) / np.sqrt(2)


# -- wavefunctions: scqubits 4.3.1's conventions in JAX


@dataclasses.dataclass(frozen=True)
class Wave:
    """How one qubit class's eigenvectors become wavefunctions, and its potential.

    Attributes:
        grids: each grid keyword scqubits' `wavefunction` takes (`"phi_grid"`, ...) and the
            points of the object's default grid for it.
        fixed_labels: grids the basis fixes (a ZeroPi's `phi` grid), put before `grids`'
            points in `basis_labels` where `label_order` says.
        label_order: `basis_labels`' order as indices into `fixed_labels + grids`.
        amplitudes: `amplitudes(p, vector, which, points)`: the amplitudes of the eigenvector
            `vector` (level `which`) on the grids `points`, in JAX.
        coordinates: the names of the potential's coordinates, in scqubits' order.
        potential: `potential(p, *coordinates)` in JAX, as scqubits' `potential`.
    """

    grids: tuple[tuple[str, np.ndarray], ...]
    amplitudes: Callable[..., jax.Array]
    coordinates: tuple[str, ...]
    potential: Callable[..., jax.Array]
    fixed_labels: tuple[np.ndarray, ...] = ()
    label_order: tuple[int, ...] | None = None


def grid_points(grid: Any) -> np.ndarray:
    """A scqubits `Grid1d`'s points (`make_linspace()`)."""
    return np.asarray(grid.make_linspace())


def hermite_functions(count: int, x: jax.Array, length: Any) -> jax.Array:
    """scqubits' `harm_osc_wavefunction(n, x, length)` for `n < count`, shape `(count, *x)`.

    `h_n(x / l) / sqrt(l)`, `h_n` the normalised Hermite functions, by their three-term
    recurrence: stable in `n` (scqubits uses `pbdv`); `exp(-u^2/2)` underflows past |u| ~ 37 in
    float64 (~ 13 in float32), far outside scqubits' default grids.
    """
    u = x / length
    h0 = math.pi**-0.25 * jnp.exp(-0.5 * u * u)
    rows = [h0, math.sqrt(2.0) * u * h0][:count]
    for n in range(1, count - 1):
        rows.append(math.sqrt(2.0 / (n + 1)) * u * rows[n] - math.sqrt(n / (n + 1)) * rows[n - 1])
    return jnp.stack(rows) / jnp.sqrt(length)


def expi(x: jax.Array) -> jax.Array:
    """`exp(i x)` of a real array, complex of its precision (no promotion in strict mode)."""
    return jax.lax.complex(jnp.cos(x), jnp.sin(x))


def as_complex(x: jax.Array) -> jax.Array:
    """`x` cast to the complex dtype of its precision."""
    return x.astype(complex_of(x.dtype))


def charge_waves(ncut: int, phi: jax.Array, sign: float = 1.0) -> jax.Array:
    """`exp(sign i n phi) / sqrt(2 pi)` for the charges `n = -ncut..ncut` and the points `phi`
    (1-D), shape `(2 ncut + 1, len(phi))`."""
    phi = jnp.asarray(phi)
    n = jnp.arange(-ncut, ncut + 1, dtype=phi.dtype)
    return expi(sign * jnp.outer(n, phi)) / math.sqrt(2 * math.pi)


def standardize_phases(amplitudes: jax.Array) -> jax.Array:
    """scqubits' `standardize_phases`: the global phase removed at the largest `|amplitude|` of
    the first half of the leading axis (its phase set to 0)."""
    half = amplitudes[: amplitudes.shape[0] // 2]
    z = amplitudes.reshape(-1)[jnp.argmax(jnp.abs(half).reshape(-1))]
    return amplitudes * (jnp.conj(z) / jnp.abs(z).astype(z.dtype))


@dataclasses.dataclass(frozen=True)
class CircuitLayout:
    """A flat `Circuit`'s basis, one tensor factor per dynamic variable, in scqubits' order.

    Attributes:
        var_indices: the dynamic variables' indices (scqubits' `dynamic_var_indices`).
        shape: each factor's dimension (`2 cutoff_n + 1`, or `cutoff_ext`).
        bases: each variable's basis: `"periodic"` (charges), `"discretized"` (a phi grid) or
            `"harmonic"` (oscillator states).
        ncuts: each periodic variable's `cutoff_n` (0 for the others).
    """

    var_indices: tuple[int, ...]
    shape: tuple[int, ...]
    bases: tuple[str, ...]
    ncuts: tuple[int, ...]


def circuit_layout(obj: Any) -> CircuitLayout | None:
    """A flat `scqubits.Circuit`'s `CircuitLayout`, read from its cutoffs and categories; None
    where a dynamic variable has no cutoff of its own."""
    names = [f"cutoff_n_{i}" for i in obj.var_categories["periodic"]]
    names += [f"cutoff_ext_{i}" for i in obj.var_categories["extended"]]
    if not all(hasattr(obj, name) for name in names):
        return None
    indices = tuple(int(i) for i in obj.dynamic_var_indices)
    periodic = set(obj.var_categories["periodic"])
    bases = tuple("periodic" if i in periodic else str(obj.ext_basis) for i in indices)
    ncuts = tuple(int(getattr(obj, f"cutoff_n_{i}")) if i in periodic else 0 for i in indices)
    shape = tuple(
        2 * n + 1 if b == "periodic" else int(getattr(obj, f"cutoff_ext_{i}"))
        for i, b, n in zip(indices, bases, ncuts, strict=True)
    )
    return CircuitLayout(indices, shape, bases, ncuts)


@dataclasses.dataclass(frozen=True)
class PotentialEnergy:
    """A `Circuit`'s potential, scqubits' `potential_energy`: `fn(*coordinates, *others)`.

    Attributes:
        coordinates: the variables' names (`"θ1"`, ...), extended ones first, as scqubits.
        defaults: the external fluxes' and symbolic parameters' names and the object's values.
        fn: the symbolic potential (fluxes times 2 pi) lambdified over `jax.numpy`.
    """

    coordinates: tuple[str, ...]
    defaults: dict[str, float]
    fn: Callable[..., Any]
