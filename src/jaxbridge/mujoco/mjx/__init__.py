"""MJX's API on C MuJoCo: `step` and `forward` take and return MJX's own `mjx.Model`/`mjx.Data`.

```python
import mujoco
from mujoco import mjx
from jaxbridge.mujoco import mjx as cmjx

mx = cmjx.put_model(mj_model)          # mjx.put_model(mj_model, impl="jax"), registered
d = jax.jit(cmjx.step)(mx, mjx.make_data(mx))   # mujoco.mj_step, as an mjx.Data
```

See docs/mujoco.md ("MJX's API on C MuJoCo").
"""

try:
    import mujoco.mjx as _mjx  # noqa: F401
except ImportError as e:  # the optional extra is missing: say how to get it
    raise ImportError(
        "`jaxbridge.mujoco.mjx` needs MJX: `pip install jaxbridge[playground]` (or mujoco-mjx)"
    ) from e

from ._model import put_model as put_model
from ._model import register as register
from ._step import forward as forward
from ._step import step as step
