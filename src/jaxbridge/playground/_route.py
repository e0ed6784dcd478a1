"""Which engine an environment's `mjx.step` and `mjx.forward` run on, decided at trace time.

Playground's environments reach their physics through `mujoco.mjx.step` (inside
`mujoco_playground._src.mjx_env.step`) and `mujoco.mjx.forward`, looked up on the `mujoco.mjx`
module at each call. `install()` puts a dispatcher in their place, once: it calls MJX's own
function unless the caller is inside `on_c_mujoco()`, where it calls `jaxbridge.mujoco.mjx`'s.
The choice is made while JAX traces (a context variable, so per thread and per task), so a
traced program holds one engine or the other, and Playground's own environments, and any
other use of `mjx.step` in the process, run MJX exactly as before.

Playground's environments step through `mjx_env.step(model, data, action, n_substeps)`: a
`lax.scan` of `n_substeps` calls of `mjx.step`, each with `ctrl` set to `action`. Inside
`on_c_mujoco()` its dispatcher makes that ONE host call, `jaxbridge.mujoco.mjx.step(model,
data.replace(ctrl=action), nstep=n_substeps)`: the same `mj_step`s with the same held
controls, at one call's cost instead of `n_substeps` (walker's 10, humanoid's 5, cheetah's
reset's 200).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["install", "on_c_mujoco"]

_c_mujoco: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "jaxbridge_playground_c_mujoco", default=False
)
_lock = threading.Lock()


@contextlib.contextmanager
def on_c_mujoco() -> Iterator[None]:
    """`mjx.step` and `mjx.forward` run on C MuJoCo (`jaxbridge.mujoco.mjx`) inside."""
    token = _c_mujoco.set(True)
    try:
        yield
    finally:
        _c_mujoco.reset(token)


def _dispatcher(name: str, mjx_fn: Any, ours: Any) -> Any:
    def dispatch(model: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        if _c_mujoco.get():
            if args or kwargs:
                raise TypeError(
                    f"`mjx.{name}` on C MuJoCo takes (model, data); got more arguments."
                )
            return ours(model, data)
        return mjx_fn(model, data, *args, **kwargs)

    dispatch.__name__ = dispatch.__qualname__ = name
    dispatch.__doc__ = mjx_fn.__doc__
    dispatch.__wrapped__ = mjx_fn  # type: ignore[attr-defined]
    dispatch._jaxbridge_dispatch = True  # type: ignore[attr-defined]
    return dispatch


def _substeps_dispatcher(mjx_env_step: Any, ours: Any) -> Any:
    def step(model: Any, data: Any, action: Any, n_substeps: int = 1) -> Any:
        if _c_mujoco.get():
            return ours(model, data.replace(ctrl=action), nstep=int(n_substeps))
        return mjx_env_step(model, data, action, n_substeps)

    step.__name__ = step.__qualname__ = "step"
    step.__doc__ = mjx_env_step.__doc__
    step.__wrapped__ = mjx_env_step  # type: ignore[attr-defined]
    step._jaxbridge_dispatch = True  # type: ignore[attr-defined]
    return step


def install() -> None:
    """Puts the dispatchers on `mujoco.mjx` (once; idempotent)."""
    from mujoco import mjx
    from mujoco_playground._src import mjx_env

    from jaxbridge.mujoco import mjx as cmjx

    with _lock:
        for name, ours in (("step", cmjx.step), ("forward", cmjx.forward)):
            current = getattr(mjx, name)
            if not getattr(current, "_jaxbridge_dispatch", False):
                setattr(mjx, name, _dispatcher(name, current, ours))
        if not getattr(mjx_env.step, "_jaxbridge_dispatch", False):
            mjx_env.step = _substeps_dispatcher(mjx_env.step, cmjx.step)
