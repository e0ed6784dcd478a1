"""Choosing MuJoCo's OpenGL backend on a headless machine.

MuJoCo reads `MUJOCO_GL` once, when `mujoco` is first imported, and binds its `GLContext` to
that backend for the life of the process. A backend is therefore tried in a child process (a
fresh interpreter that imports MuJoCo with it and renders one frame); the first that works is
set in this process's environment, before MuJoCo is imported here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

#: The backends tried, in order, where `MUJOCO_GL` is not set: both render without a display.
HEADLESS = ("egl", "osmesa")

#: A child process that renders one 16 x 16 frame of an empty model with the backend it is given.
_PROBE = (
    "import mujoco\n"
    "m = mujoco.MjModel.from_xml_string('<mujoco/>')\n"
    "r = mujoco.Renderer(m, 16, 16)\n"
    "r.update_scene(mujoco.MjData(m))\n"
    "r.render()\n"
    "r.close()\n"
)


class GLUnavailableError(RuntimeError):
    """No OpenGL backend renders MuJoCo in this process (the message names `MUJOCO_GL`)."""


def unavailable(tried: str, cause: str) -> GLUnavailableError:
    """The error, one line: what was tried, why it failed, what to set."""
    return GLUnavailableError(
        f"MuJoCo cannot render here: MUJOCO_GL={tried} ({cause}); install EGL (libegl1) or "
        "OSMesa (libosmesa6) and set MUJOCO_GL=egl or MUJOCO_GL=osmesa before mujoco is imported"
    )


def _works(backend: str, timeout: float) -> str | None:
    """None where `backend` renders in a fresh interpreter, else the last line of its error."""
    env = {**os.environ, "MUJOCO_GL": backend}
    env.pop("PYOPENGL_PLATFORM", None)  # MuJoCo sets it to match MUJOCO_GL
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return f"no frame within {timeout:g} s"
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {done.returncode}"


def use_headless_gl(backends: Sequence[str] = HEADLESS, *, timeout: float = 60.0) -> str:
    """Set `MUJOCO_GL` to the first backend that renders here, before MuJoCo is imported.

    Where `MUJOCO_GL` is already set, that backend alone is checked (the user's choice is kept).
    Where MuJoCo is already imported, its backend is fixed: it is checked in this process.

    Args:
        backends: the backends to try, in order (default EGL, then OSMesa).
        timeout: seconds each try may take.

    Returns:
        The backend now in `os.environ["MUJOCO_GL"]` (or MuJoCo's, where it is imported).

    Raises:
        GLUnavailableError: none renders; the one-line message names `MUJOCO_GL`.

    Example:
        >>> from jaxbridge.render import GLUnavailableError, use_headless_gl
        >>> try:
        ...     backend = use_headless_gl()  # before `import mujoco`
        ... except GLUnavailableError as e:
        ...     backend = None  # no video; `print(e)` says why in one line
    """
    chosen = os.environ.get("MUJOCO_GL", "")
    if "mujoco" in sys.modules:
        check_here()
        return chosen or "glfw"
    if chosen:
        backends = (chosen,)
    causes = []
    for backend in backends:
        cause = _works(backend, timeout)
        if cause is None:
            os.environ["MUJOCO_GL"] = backend
            return backend
        causes.append(f"{backend}: {cause}")
    raise unavailable(" / ".join(backends) if len(backends) > 1 else backends[0], "; ".join(causes))


def check_here() -> None:
    """Raise `GLUnavailableError` unless MuJoCo, as imported in this process, can render."""
    import gc

    import mujoco

    backend = os.environ.get("MUJOCO_GL", "") or "unset"
    cause = None
    # A context that fails to open errs again when collected (GLFW's `__del__` raises
    # `AttributeError` on a context it never made): that second error is not the user's.
    hook = sys.unraisablehook
    sys.unraisablehook = lambda _: None
    try:
        try:
            context = mujoco.GLContext(16, 16)
            context.make_current()
            context.free()
        except Exception as e:  # noqa: BLE001 - every backend fails in its own way
            cause = f"{type(e).__name__}: {e}".splitlines()[0]
            e.__traceback__ = None  # its frames hold the half-made context
        if cause is not None:
            gc.collect()
    finally:
        sys.unraisablehook = hook
    if cause is not None:
        raise unavailable(backend, cause)
