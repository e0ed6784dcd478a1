"""Errors raised by jaxbridge, and the long messages behind them.

Every message names the API and the argument, says what was received and how to fix it. The
exact text of each is pinned by `tests/test_errors.py`.
"""

from __future__ import annotations

import threading
import traceback
from typing import Any


class HostError(RuntimeError):
    """A host function raised, or returned something that does not match its result spec.

    Under `jax.jit` the error crosses XLA as text: its message carries the original exception's
    type name, message and the host traceback. Where jaxbridge controls the boundary (an eager
    call, or an eager transformation such as `jax.vmap(f)(x)` outside `jit`), the original
    exception is chained as `__cause__`.
    """


class HostResultError(HostError, TypeError):
    """A host function (or a derivative rule) returned the wrong structure, shape or dtype."""


class KeptArgumentError(HostError):
    """A pure host function kept a view of its argument, an XLA buffer freed after the call."""


PROBE_FAILED = (
    "jaxbridge.host could not find the result shapes of {name!r}: calling it once on "
    "zero-filled arrays of the traced shapes {avals} raised {etype}: {emsg}. Pass "
    "`result=` (a pytree of jax.ShapeDtypeStruct, or a function of the argument "
    "ShapeDtypeStructs returning one) so no probe call is needed."
)

BAD_RESULT_SPEC = (
    "`jaxbridge.host(result=...)` must be a pytree of `jax.ShapeDtypeStruct` (or of anything "
    "with `.shape` and `.dtype`); got {got} at `{path}`. Build one with `jax.eval_shape` or "
    "pass `result=None` to probe."
)

VALUE_CHANGING_CAST = (
    "{rule} returned a value{where} that {dtype} cannot hold: expected {expected}, got "
    "{got} containing {value!r}. Only conversions that keep every value are made (float64 to "
    "float32 may round, int64 to int32 must fit); convert explicitly, or declare a wider "
    "dtype in `result=`."
)

KEPT_ARGUMENT = (
    "host function {name!r} kept a reference to its argument {arg} after returning. Under the "
    "default zero-copy lowering it is a view of an XLA buffer that is freed after the call, so "
    "what it kept would silently change value. Copy what you keep (`np.array(x)` or "
    '`x.copy()`), or pass `lowering="pure"`; `io=True` and `ordered=True` calls receive '
    "copies they may keep."
)

NO_TRANSPOSE = (
    "`jax.linear_transpose` of host function {name!r}: {kind} host calls do not support "
    "transpose, as JAX's callbacks do not; a host function is not known to be linear. Use "
    "`jax.vjp` with a derivative rule (`vjp=` or `jacobian=` in `jaxbridge.host`) instead: for "
    "a linear function the VJP is its transpose."
)

BAD_VMAP = (
    "`jaxbridge.host(vmap=...)` must be 'sequential', 'vectorized' or an executor "
    "(jaxbridge.Threads, jaxbridge.Processes, jaxbridge.Ray); got {got!r}."
)

BAD_LOWERING = (
    "`jaxbridge.host(lowering=...)` must be 'auto', 'buffer' or 'pure'; got {got!r}. The "
    "environment variable JAXBRIDGE_LOWERING takes the same values."
)


def format_host_exception(name: str, exc: BaseException) -> str:
    """The text that stands for `exc` once it has crossed XLA: type, message, host frames."""
    if isinstance(exc, (HostResultError, KeptArgumentError)):
        return str(exc)  # our own check: the message says it all, no host frames to show
    frames = traceback.extract_tb(exc.__traceback__)
    # Drop jaxbridge's own trampoline frames: the user wants the lines of their function.
    frames = [f for f in frames if "/jaxbridge/_" not in f.filename.replace("\\", "/")]
    lines = "".join(traceback.format_list(frames)) if frames else "  (no Python frames)\n"
    etype = type(exc).__qualname__
    module = type(exc).__module__
    if module not in ("builtins", "__main__"):
        etype = f"{module}.{etype}"
    return (
        f"host function {name!r} raised {etype}: {exc}\n"
        f"Host traceback (most recent call last):\n{lines}"
        f"{etype}: {exc}"
    )


class _LastError(threading.local):
    error: BaseException | None = None


# The trampoline records the original exception here before raising through XLA, so an
# eager caller in the same thread can re-raise it with its real type (see `reraise_original`).
_last = _LastError()


def record(exc: BaseException) -> None:
    _last.error = exc


def take_recorded() -> BaseException | None:
    exc, _last.error = _last.error, None
    return exc


def shape_str(shape: tuple[int, ...], dtype: Any) -> str:
    """`f32[3,4]`, the notation JAX uses in its own messages."""
    import numpy as np
    from jax._src import dtypes

    try:
        short = dtypes.short_dtype_name(np.dtype(dtype))
    except Exception:  # a dtype name JAX has no short form for
        short = str(dtype)
    return f"{short}[{','.join(map(str, shape))}]"
