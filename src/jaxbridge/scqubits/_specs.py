"""The `Spec` of one scqubits qubit or `Circuit`: which builder reads it, by its class."""

from __future__ import annotations

from typing import Any

from ._circuit import circuit
from ._qubits import BUILDERS, Spec


def is_a(obj: Any, name: str) -> bool:
    """Whether `obj` is an instance of scqubits' class `name` (or of a subclass)."""
    return any(
        c.__module__.startswith("scqubits") and c.__name__ == name for c in type(obj).__mro__
    )


def spec_of(obj: Any) -> Spec | None:
    """The `Spec` of a single qubit or a plain `Circuit`; None for any other object."""
    for cls in type(obj).__mro__:
        if cls.__module__.startswith("scqubits") and cls.__name__ in BUILDERS:
            return BUILDERS[cls.__name__](obj)
        if cls.__module__.startswith("scqubits") and cls.__name__ == "Circuit":
            return circuit(obj)
    return None


SUPPORTED = ", ".join(f"`{n}`" for n in [*BUILDERS, "Circuit", "HilbertSpace"])
