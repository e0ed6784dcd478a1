"""MJX's API on C MuJoCo: a drop-in for `from mujoco import mjx`.

```python
import mujoco
from jaxbridge.mujoco import mjx     # was: from mujoco import mjx

mx = mjx.put_model(mj_model)          # mjx.put_model(mj_model, impl="jax"), registered
d = jax.jit(mjx.step)(mx, mjx.make_data(mx))   # mujoco.mj_step, as an mjx.Data
```

`step` and `forward` run on C MuJoCo; `put_model` is MJX's, registered as the C model of what
it returns; `register` is jaxbridge's own. Every other public name of `mujoco.mjx`
(`make_data`, `put_data`, `get_data`, `Model`, `Data`, the enums, `kinematics`, `ray`, ...)
is MJX's own object, looked up on `mujoco.mjx` when first asked for, so it acts on the same
`mjx.Model` and `mjx.Data`. `ON_C_MUJOCO` names the functions that differ from MJX's. See
docs/mujoco.md ("MJX's API on C MuJoCo").
"""

from typing import Any

try:
    import mujoco.mjx as _mjx
except ImportError as e:  # the optional extra is missing: say how to get it
    raise ImportError(
        "`jaxbridge.mujoco.mjx` needs MJX: `pip install jaxbridge[playground]` (or mujoco-mjx)"
    ) from e

from ._model import put_model as put_model
from ._model import register as register
from ._step import forward as forward
from ._step import step as step

#: The names whose functions are jaxbridge's: C MuJoCo's step and forward, and the
#: registration. Every other public name is `mujoco.mjx`'s own.
ON_C_MUJOCO = ("forward", "put_model", "register", "step")


def _mjx_names() -> list[str]:
    """`mujoco.mjx`'s public names, less the modules it imports for itself (`np`, `jax`)."""
    import types

    return sorted(
        name
        for name in dir(_mjx)
        if not name.startswith("_") and not isinstance(getattr(_mjx, name), types.ModuleType)
    )


def __getattr__(name: str) -> Any:
    # PEP 562: a name this module does not define is MJX's own, so a program that only
    # changed its import still finds `make_data`, `put_data`, `Data`, `IntegratorType`, ...
    if not name.startswith("__"):
        try:
            return getattr(_mjx, name)
        except AttributeError:
            pass
    raise AttributeError(
        f"module `jaxbridge.mujoco.mjx` has no attribute {name!r} (neither has `mujoco.mjx`)"
    )


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_mjx_names()))


__all__ = sorted(set(_mjx_names()) | set(ON_C_MUJOCO))  # pyright: ignore[reportUnsupportedDunderAll]
