"""`jaxbridge.scqubits.model`: the model of any supported scqubits object, chosen at the top.

Every model module sits below this one: a `HilbertSpace`'s subsystems get their models from
`_specs` and `Model` directly, so nothing in the package imports upward.
"""

from __future__ import annotations

from typing import Any

from . import _errors
from ._hierarchy import HierarchicalModel
from ._hilbertspace import HilbertSpaceModel
from ._model import Model
from ._specs import SUPPORTED, is_a, spec_of


def model(obj: Any) -> Any:
    """JAX functions of a scqubits qubit's parameters: one line instead of a bridge.

    Args:
        obj: a `scqubits.Transmon`, `TunableTransmon`, `Fluxonium`, `FluxQubit`, `ZeroPi`,
            `Cos2PhiQubit` or `Circuit` (any `ext_basis`; with `system_hierarchy` too), or a
            `HilbertSpace` of those and `Oscillator`, `KerrOscillator`, `GenericQubit`.

    Returns:
        A `Model`: `hamiltonian`, `eigenvals`, `eigensys`, `matrixelements` and
        `d_hamiltonian` as JAX functions of `params`, starting from `model.params`. For a
        `HilbertSpace`, a `HilbertSpaceModel` (dressed spectrum, bare labels, bare spectra); for
        a hierarchical `Circuit`, a `HierarchicalModel` (`hamiltonian`, `eigenvals`,
        `eigensys`).

    Raises:
        TypeError: `obj` is not one of the supported classes.

    Example:
        >>> import jax, scqubits, jaxbridge.scqubits as jbq
        >>> jax.config.update("jax_enable_x64", True)
        >>> qubit = scqubits.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.5, cutoff=40)
        >>> m = jbq.model(qubit)
        >>> sorted(m.params)
        ['EC', 'EJ', 'EL', 'flux']
        >>> bool(abs(m.eigenvals(evals_count=3) - qubit.eigenvals(3)).max() < 1e-9)
        True
        >>> jax.config.update("jax_enable_x64", False)
    """
    if is_a(obj, "HilbertSpace"):
        return HilbertSpaceModel(obj)
    if is_a(obj, "Circuit") and getattr(obj, "hierarchical_diagonalization", False):
        return HierarchicalModel(obj)
    spec = spec_of(obj)
    if spec is None:
        raise TypeError(_errors.UNSUPPORTED.format(got=type(obj).__name__, supported=SUPPORTED))
    return Model(obj, spec)
