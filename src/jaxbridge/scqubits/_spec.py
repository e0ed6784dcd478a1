"""What a model reads from one scqubits object (`Spec`), and the matrices its builders share.

A builder (one per qubit class in `qubits/`, `_circuit.circuit` for a `Circuit`) reads the
object once and returns a `Spec`: the parameters' defaults and the Hamiltonian as `Terms`. The
matrix helpers build the fixed operators of those terms: charge bases, truncated ladders and
Kronecker products as scqubits orders them (scqubits 4.3).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sparse

from ._terms import Terms
from ._wave import Wave


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
        wave: the class's wavefunction and potential (`_wave.Wave`); None where there are
            none.
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
