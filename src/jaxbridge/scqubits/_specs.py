"""The `Spec` of a scqubits qubit or `Circuit`, looked up by its class.

`scqubits_class` walks an object's classes, most derived first, to the first one of scqubits'
that a table names (a `TunableTransmon` is found before its base `Transmon`). `spec_of` is that
lookup in `SPECS`; `HilbertSpace` subsystems and `model()` both read the `Spec` through it.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from typing import Any

from ._circuit import circuit
from ._spec import Spec
from .qubits import QUBITS

SPECS: Mapping[str, Callable[[Any], Spec]] = {
    **{name: qubit.spec for name, qubit in QUBITS.items()},
    "Circuit": circuit,
}
"""Each modelled class's `Spec` builder, by scqubits' class name."""


def scqubits_class(obj: Any, names: Container[str]) -> str | None:
    """The name of `obj`'s most derived scqubits class in `names`, or None.

    Args:
        obj: any object.
        names: class names (a table's keys).

    Returns:
        The first class name of `type(obj).__mro__` from a `scqubits` module that is in
        `names`; None where there is none.
    """
    for cls in type(obj).__mro__:
        if cls.__module__.startswith("scqubits") and cls.__name__ in names:
            return cls.__name__
    return None


def spec_of(obj: Any) -> Spec | None:
    """The `Spec` of a single qubit or a `Circuit` (flat); None for any other object."""
    name = scqubits_class(obj, SPECS)
    return None if name is None else SPECS[name](obj)
