"""The single qubits of scqubits: one file per class, its Hamiltonian and its noise channels.

`transmon.py` (`Transmon`, `TunableTransmon`), `fluxonium.py`, `flux_qubit.py`, `zero_pi.py` and
`cos2phi.py` each hold one class's `Spec` builder (its wavefunction and potential too) and
noise channel builder, over `_spec.py`, `_channel.py`, `_terms.py` and `_params.py` below
them; `_registry.py` names them by class.
"""

from ._registry import CHANNELS as CHANNELS
from ._registry import FIXED_OPERATOR_NAMES as FIXED_OPERATOR_NAMES
from ._registry import QUBITS as QUBITS
from ._registry import Qubit as Qubit
