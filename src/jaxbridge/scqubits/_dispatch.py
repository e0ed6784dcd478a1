"""`jaxbridge.scqubits.model`: the model of any supported scqubits object, chosen at the top.

`MODELS` maps each supported scqubits class to what builds its model; `model()` is one lookup
in it, by the object's most derived scqubits class. Every model module sits below this one: a
`HilbertSpace`'s subsystems get their `Spec`s from `_specs` and `Model` directly, so nothing in
the package imports upward.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from . import _errors
from ._circuit import circuit
from ._full_zero_pi import FullZeroPiModel
from ._model import Model
from ._single import SubsystemModel
from ._specs import SPECS, scqubits_class
from .composite._hierarchy import HierarchicalModel
from .composite._hilbertspace import HilbertSpaceModel


def _flat(build: Callable[[Any], Any]) -> Callable[[Any], Model]:
    """The `Model` of an object whose `Spec` `build` reads."""
    return lambda obj: Model(obj, build(obj))


def _circuit(obj: Any) -> Model | HierarchicalModel:
    """A `Circuit`'s model: a `HierarchicalModel` with `system_hierarchy`, else a `Model`."""
    if getattr(obj, "hierarchical_diagonalization", False):
        return HierarchicalModel(obj)
    return Model(obj, circuit(obj))


MODELS: Mapping[str, Callable[[Any], Any]] = {
    **{name: _flat(build) for name, build in SPECS.items()},
    "Circuit": _circuit,  # in `SPECS`' place, for the hierarchical ones
    "HilbertSpace": HilbertSpaceModel,
    "Oscillator": SubsystemModel,
    "KerrOscillator": SubsystemModel,
    "GenericQubit": SubsystemModel,
    "FullZeroPi": FullZeroPiModel,
}
"""What builds the model of each supported scqubits class, by class name."""

SUPPORTED = ", ".join(f"`{name}`" for name in MODELS)


def model(obj: Any) -> Any:
    """JAX functions of a scqubits qubit's parameters: one line instead of a bridge.

    Args:
        obj: a `scqubits.Transmon`, `TunableTransmon`, `Fluxonium`, `FluxQubit`, `ZeroPi`,
            `Cos2PhiQubit` or `Circuit` (any `ext_basis`; with `system_hierarchy` too), an
            `Oscillator`, `KerrOscillator`, `GenericQubit` or `FullZeroPi`, or a
            `HilbertSpace` of those (a hierarchical Circuit excepted).

    Returns:
        A `Model`: `hamiltonian`, `eigenvals`, `eigensys`, `matrixelements` and
        `d_hamiltonian` as JAX functions of `params`, starting from `model.params`. For a
        `HilbertSpace`, a `HilbertSpaceModel` (dressed spectrum, bare labels, bare spectra); for
        a hierarchical `Circuit`, a `HierarchicalModel` (`hamiltonian`, `eigenvals`,
        `eigensys`, `matrixelements`); for an oscillator or a GenericQubit alone, a
        `SubsystemModel`; for a `FullZeroPi`, a `FullZeroPiModel`.

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
    name = scqubits_class(obj, MODELS)
    if name is None:
        raise TypeError(_errors.UNSUPPORTED.format(got=type(obj).__name__, supported=SUPPORTED))
    return MODELS[name](obj)
