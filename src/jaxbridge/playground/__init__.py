"""MuJoCo Playground's environments with their physics on C MuJoCo.

Needs the `playground` extra: `pip install jaxbridge[playground]`. `load(env_name)` takes
`mujoco_playground.registry.load`'s arguments and returns Playground's own environment, whose
`mjx.step` and `mjx.forward` run on `jaxbridge.mujoco.mjx` (see docs/playground.md).
"""

import warnings as _warnings

try:
    import mujoco.mjx as _mjx  # noqa: F401

    with _warnings.catch_warnings():
        # Playground imports Brax, which imports JAXopt: its deprecation notice on import is
        # theirs, not the user's (and an error where warnings are errors, as in the tests).
        _warnings.filterwarnings("ignore", "JAXopt is no longer maintained", DeprecationWarning)
        import mujoco_playground as _mujoco_playground  # noqa: F401
except ImportError as _e:  # the optional extra is missing: say how to get it
    raise ImportError(
        "`jaxbridge.playground` needs MuJoCo Playground: `pip install jaxbridge[playground]`"
    ) from _e

from jaxbridge.mujoco.mjx._data import NotCarriedError as NotCarriedError

from ._carried import carry_all as carry_all
from ._load import load as load
from ._route import on_c_mujoco as on_c_mujoco
from ._train import train as train
