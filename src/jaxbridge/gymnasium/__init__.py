"""gymnasium's MuJoCo v5 environments as pure JAX functional environments on MuJoCo's C engine.

Needs the `mujoco` extra (MuJoCo and gymnasium): `pip install jaxbridge[mujoco]`. Importing
this package registers `jaxbridge/<id>` with gymnasium for every id of `ENV_IDS`.
"""

try:
    import gymnasium as _gymnasium  # noqa: F401
    import mujoco as _mujoco  # noqa: F401
except ImportError as _e:  # the optional extra is missing: say how to get it
    raise ImportError(
        "`jaxbridge.gymnasium` needs gymnasium and MuJoCo: `pip install jaxbridge[mujoco]`"
    ) from _e

from ._env import MujocoFuncEnv as MujocoFuncEnv
from ._make import ENV_IDS as ENV_IDS
from ._make import make as make
from ._register import MujocoJaxEnv as MujocoJaxEnv
from ._register import MujocoVectorEnv as MujocoVectorEnv
from ._register import register as _register
from ._task import EnvState as EnvState

_register()
