"""scqubits inside JAX: a qubit object becomes JAX functions of its parameters.

`model(obj)` reads a scqubits `Transmon`, `TunableTransmon`, `Fluxonium`, `FluxQubit`,
`ZeroPi`, `Cos2PhiQubit` or `Circuit` once and returns a `Model` whose `hamiltonian`,
`eigenvals`, `eigensys`, `matrixelements`, `d_hamiltonian`, `operator`, `wavefunction` and
`potential` work under `jit`, `vmap`, `grad`, `jacfwd` and `hessian`.
"""

try:
    import scqubits as _scqubits  # noqa: F401
except ImportError as _error:  # pragma: no cover - exercised in a subprocess test
    from ._errors import NEEDS_SCQUBITS as _NEEDS_SCQUBITS

    raise ImportError(_NEEDS_SCQUBITS) from _error

from ._dispatch import model as model
from ._full_zero_pi import FullZeroPiModel as FullZeroPiModel
from ._model import DENSE_MAX_DIM as DENSE_MAX_DIM
from ._model import Model as Model
from ._single import SubsystemModel as SubsystemModel
from ._wave import Wavefunction as Wavefunction
from .composite._branch import LabelAmbiguityError as LabelAmbiguityError
from .composite._hierarchy import HierarchicalModel as HierarchicalModel
from .composite._hilbertspace import HilbertSpaceModel as HilbertSpaceModel
