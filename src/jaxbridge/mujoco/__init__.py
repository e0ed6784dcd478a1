"""MuJoCo inside JAX: the real C engine under `jit`, `vmap`, `scan` and `grad`.

Needs the `mujoco` extra: `pip install jaxbridge[mujoco]`.
"""

from ._fieldcalls import DataCalls as DataCalls
from ._model import load_model as load_model
from ._outputs import DEFAULT_OUTPUTS as DEFAULT_OUTPUTS
from ._simulator import Simulator as Simulator
from ._simulator import Trajectory as Trajectory
from ._state import StateParts as StateParts
