"""The qubit classes of scqubits this package models, by class name: each one's builders.

One entry per class, pointing into that qubit's file: the `Spec` builder (its Hamiltonian), the
noise channel builder, and the `*_operator` methods that stay parameter-free where the others
depend on the parameters. `_specs.py` and `_dispatch.py` look classes up here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from .._spec import Spec
from ..noise._channel import Channel
from . import cos2phi, flux_qubit, fluxonium, transmon, zero_pi


@dataclasses.dataclass(frozen=True)
class Qubit:
    """What this package knows of one scqubits qubit class.

    Attributes:
        spec: reads the object's `Spec` (defaults, Hamiltonian terms, operators).
        channels: reads the object's noise channels, by scqubits' method names.
        fixed_operators: `*_operator` methods that return parameter-free matrices, where the
            `Spec` says the others do not (`Spec.fixed_operators` false).
    """

    spec: Callable[[Any], Spec]
    channels: Callable[[Any], dict[str, Channel]]
    fixed_operators: tuple[str, ...] = ()


QUBITS: Mapping[str, Qubit] = {
    "Transmon": Qubit(transmon.spec, transmon.channels),
    "TunableTransmon": Qubit(transmon.tunable_spec, transmon.tunable_channels),
    "Fluxonium": Qubit(fluxonium.spec, fluxonium.channels),
    "FluxQubit": Qubit(flux_qubit.spec, flux_qubit.channels),
    "ZeroPi": Qubit(zero_pi.spec, zero_pi.channels),
    "Cos2PhiQubit": Qubit(cos2phi.spec, cos2phi.channels, cos2phi.FIXED_OPERATORS),
}

CHANNELS: Mapping[str, Callable[[Any], dict[str, Channel]]] = {
    name: qubit.channels for name, qubit in QUBITS.items()
}
"""Each class's noise channel builder (the noise methods look a model's `Spec.kind` up here)."""

FIXED_OPERATOR_NAMES: Mapping[str, tuple[str, ...]] = {
    name: qubit.fixed_operators for name, qubit in QUBITS.items() if qubit.fixed_operators
}
"""Each class's parameter-free `*_operator` methods, where it has parameter-dependent ones."""
