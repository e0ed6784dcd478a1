"""Gates from scqubits' own objects: differentiable open-system dynamics (diffrax).

From a `jaxbridge.scqubits` model and its params: the static Hamiltonian, drive operators and
the model's own noise channels as jump operators, all in its (dressed) eigenbasis; evolution by
diffrax (dynamiqs' solver library; Lindblad's equation as a superoperator); gate and
transition fidelities. Everything is a JAX function of the pulses' arrays and the model's
params (`jit`, `vmap`, `grad`). diffrax is imported when first needed:
`pip install jaxbridge[dynamics]`.
"""

from ._basis import drive_operator as drive_operator
from ._basis import static_hamiltonian as static_hamiltonian
from ._fidelity import gate_fidelity as gate_fidelity
from ._fidelity import transition_fidelity as transition_fidelity
from ._jumps import jump_operators as jump_operators
from ._pulses import PiecewiseConstant as PiecewiseConstant
from ._pulses import Smooth as Smooth
from ._pulses import pwc as pwc
from ._pulses import smooth as smooth
from ._solve import solve as solve
