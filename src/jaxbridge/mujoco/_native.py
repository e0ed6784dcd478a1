"""The compiled field call: `_rows.cc`, an XLA FFI handler over MuJoCo's C batch API, built
with the system C++ compiler on first use and kept in a cache.

A field call's hot path (`FieldRows.run` under a host call's buffer function) costs about
13 µs of Python a call: the buffer function, copying XLA's buffers into MuJoCo's state rows
and the outputs back, and taking the GIL on XLA's thread. `NativeRows` does the same work in C
(`jb_rows_call`, the FFI target `TARGET`): XLA calls it with its buffers, and it copies them
into the rows of a batch of its own (`mjb_makeBatch`), runs `mjb_step` or `mjb_forward`, and
copies the outputs out, with no Python on the way. The numbers are the same as `FieldRows`'
(the same C calls on the same rows); the tests step both side by side.

Where it cannot be built (no C++ compiler, no headers, `JAXBRIDGE_NATIVE=0`), `available()`
is False, one `RuntimeWarning` says why (unless disabled on purpose), and field calls run on
the Python path, as correct and slower. The library is cached under `$JAXBRIDGE_CACHE` (else
`$XDG_CACHE_HOME/jaxbridge`, else `~/.cache/jaxbridge`), one build per source, MuJoCo and
jaxlib version.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ._model import mj

__all__ = [
    "TARGET",
    "NativeRows",
    "available",
    "callbacks_installed",
    "library",
    "plan",
    "why",
    "withheld",
]

mujoco: Any = mj
#: The FFI target of the compiled field call (CPU).
TARGET = "jaxbridge_mujoco_rows"
_SOURCE = Path(__file__).with_name("_rows.cc")
#: The physics callbacks the batch's threads would call (`mjcb_*`).
_CALLBACKS = (
    "passive",
    "control",
    "contactfilter",
    "sensor",
    "time",
    "act_dyn",
    "act_gain",
    "act_bias",
)

_lock = threading.Lock()
_plans_lock = threading.Lock()  # not `_lock`: making a plan may build the library
_state: dict[str, Any] = {}
#: Every plan made: a compiled program holds a plan's address as long as the process lives,
#: so none is ever freed. By what it computes (`plan`), so that a field call made again (its
#: `FieldSteps` dropped from a cache and rebuilt) reuses its plan.
_PLANS: dict[tuple, NativeRows] = {}


def _cache_dir() -> Path:
    root = os.environ.get("JAXBRIDGE_CACHE")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg if xdg else Path.home() / ".cache") / "jaxbridge"


def _build() -> ctypes.CDLL:
    """Compiles `_rows.cc` (or loads the cached build); raises with the reason."""
    import jax
    import jaxlib

    mj_dir = Path(mujoco.__file__).parent
    libs = sorted(mj_dir.glob("libmujoco.so*")) or sorted(mj_dir.glob("libmujoco*.dylib"))
    if not libs or not (mj_dir / "include" / "mujoco" / "mjbatch.h").exists():
        raise RuntimeError(f"MuJoCo {mujoco.__version__} ships no batch header or library")
    mj_lib = libs[0]
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        raise RuntimeError("no C++ compiler (c++, g++ or $CXX) on PATH")
    source = _SOURCE.read_bytes()
    key = hashlib.sha256(
        b"\0".join(
            [
                source,
                mujoco.__version__.encode(),
                str(mj_lib).encode(),
                jaxlib.__version__.encode(),
                cxx.encode(),
                sys.platform.encode(),
            ]
        )
    ).hexdigest()[:16]
    target = _cache_dir() / f"rows-{key}.so"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        writable = os.access(target.parent, os.W_OK)
    except OSError:
        writable = False
    if not writable and not target.exists():  # a read-only home: this user's temporary folder
        uid = os.getuid() if hasattr(os, "getuid") else "user"
        target = Path(tempfile.gettempdir()) / f"jaxbridge-{uid}" / target.name
        target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(fd)
        cmd = [
            cxx,
            "-O2",
            "-std=c++17",
            "-shared",
            "-fPIC",
            "-isystem",
            jax.ffi.include_dir(),
            "-isystem",
            str(mj_dir / "include"),
            str(_SOURCE),
            "-o",
            tmp,
            str(mj_lib),
            f"-Wl,-rpath,{mj_dir}",
        ]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if done.returncode:
                raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
            os.replace(tmp, target)  # atomic: processes building at once each get a whole one
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    lib = ctypes.CDLL(str(target))
    vp, ip, cp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.c_char_p
    i = ctypes.c_int
    lib.jb_rows_new.restype = vp
    lib.jb_rows_new.argtypes = [vp, i, i, i, i, i, cp, i]
    lib.jb_rows_calls.restype = ctypes.c_int64
    lib.jb_rows_calls.argtypes = [vp]
    lib.jb_rows_set_name.argtypes = [vp, cp]
    for name in ("jb_rows_add_input", "jb_rows_add_state_output"):
        getattr(lib, name).restype = i
        getattr(lib, name).argtypes = [vp, i, i, ip]
    lib.jb_rows_add_reset.restype = i
    lib.jb_rows_add_reset.argtypes = [vp, i, ip]
    lib.jb_rows_add_field_output.restype = i
    lib.jb_rows_add_field_output.argtypes = [vp, cp, ip, ip]
    lib.jb_rows_add_warning_output.restype = i
    lib.jb_rows_add_warning_output.argtypes = [vp]
    lib.jb_rows_set_token.argtypes = [ctypes.c_int64]
    token = 0
    while not token:
        token = int.from_bytes(os.urandom(8), "little", signed=True)
    lib.jb_rows_set_token(token)
    _state["token"] = token
    jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(lib.jb_rows_call), platform="cpu")
    return lib


def library() -> ctypes.CDLL | None:
    """The compiled library, built and registered on first use; None where it cannot be
    (`why()` says why)."""
    if "lib" in _state:
        return _state["lib"]
    with _lock:
        if "lib" not in _state:
            lib, reason = None, ""
            if os.environ.get("JAXBRIDGE_NATIVE", "1") == "0":
                reason = "JAXBRIDGE_NATIVE=0"
            else:
                try:
                    lib = _build()
                except Exception as e:  # noqa: BLE001 - any failure: the Python path, said
                    reason = f"{type(e).__name__}: {e}"
                    warnings.warn(
                        "jaxbridge.mujoco could not build its compiled field call, so MuJoCo "
                        f"host calls run on the Python path (the same numbers, slower): {reason}"
                        ". Set JAXBRIDGE_NATIVE=0 to choose that path without this warning.",
                        RuntimeWarning,
                        stacklevel=3,
                    )
            _state["why"] = reason
            _state["lib"] = lib
    return _state["lib"]


@contextlib.contextmanager
def withheld(reason: str = "withheld") -> Iterator[None]:
    """Within the block, field calls lowered afresh take the Python path, as where the
    library cannot be built (for side-by-side checks and benchmarks of the two paths);
    programs compiled before keep theirs. No warning is given."""
    library()  # built first, so that leaving the block restores it
    with _lock:
        saved = dict(_state)
        _state.update({"lib": None, "why": reason})
    try:
        yield
    finally:
        with _lock:
            _state.clear()
            _state.update(saved)


def available() -> bool:
    """Whether the compiled field call can serve host calls in this process."""
    return library() is not None


def why() -> str:
    """Why the compiled field call is not available ('' where it is, or before the first
    `library()`)."""
    return _state.get("why", "")


def callbacks_installed() -> list[str]:
    """The MuJoCo physics callbacks (`mjcb_*`) set now: the compiled path takes none."""
    return [f"mjcb_{n}" for n in _CALLBACKS if getattr(mujoco, f"get_mjcb_{n}")() is not None]


def _runs(cols: np.ndarray) -> np.ndarray:
    """`(row, src, width)` triples: state columns `cols[src:src + width]` are contiguous,
    starting at `row`."""
    runs: list[tuple[int, int, int]] = []
    for src, col in enumerate(cols.tolist()):
        if runs and runs[-1][0] + runs[-1][2] == col:
            row, start, width = runs[-1]
            runs[-1] = (row, start, width + 1)
        else:
            runs.append((col, src, 1))
    return np.asarray(runs, np.int32).reshape(-1, 3)


#: What one output of a plan is: `("state", columns)`, columns of the state rows (in the
#: output's order); `("field", name)`, a bound `MjData` field; `("warning", None)`, the warning
#: counts. Each with its bytes a row.
Output = tuple[str, Any, int]


def plan(key: tuple, make: Callable[[], NativeRows]) -> NativeRows:
    """The plan of `key` (what it computes, the model's identity first: plans keep their
    models alive), made by `make` on first use and kept for the process."""
    with _plans_lock:
        rows = _PLANS.get(key)
        if rows is None:
            rows = _PLANS[key] = make()
        return rows


class NativeRows:
    """`B` rows of a field call in a batch of the compiled library's, on `model` (the
    caller's, kept alive with the plan): `inputs` the state columns of each input, `reset`
    those reset to `mj_resetData`'s before each step, `outputs` what each output is
    (`Output`). `attributes(slots)` are the FFI call's attributes (the plan's address, and
    which output each result buffer is). Made by `FieldSteps.native`, which knows the
    columns."""

    def __init__(
        self,
        model: Any,
        B: int,
        *,
        forward: bool,
        nstep: int,
        nthread: int,
        name: str,
        inputs: list[np.ndarray],
        reset: np.ndarray,
        outputs: list[Output],
    ):
        lib = library()
        if lib is None:
            raise RuntimeError(f"the compiled field call is not available: {why()}")
        stage = int(mujoco.mjtStage.mjSTAGE_ACC if forward else mujoco.mjtStage.mjSTAGE_NONE)
        error = ctypes.create_string_buffer(1000)
        address = lib.jb_rows_new(
            model._address, B, nthread, int(forward), nstep, stage, error, len(error)
        )
        if not address:
            raise RuntimeError(f"mjb_makeBatch failed: {error.value.decode(errors='replace')}")
        self.model = model  # the plan runs on it: kept alive as long as the plan
        # this process's: a program compiled in another (a persistent compilation cache's)
        # is refused before the plan's address is read
        self.token = int(_state["token"])
        self.address, self.B, self.forward = int(address), B, forward
        lib.jb_rows_set_name(address, name.encode())

        def ints(runs: np.ndarray) -> Any:
            return runs.ctypes.data_as(ctypes.POINTER(ctypes.c_int))

        for k, cols in enumerate(inputs):
            runs = _runs(cols)
            if lib.jb_rows_add_input(address, cols.size, len(runs), ints(runs)):
                raise RuntimeError(f"the compiled field call refused input {k}")
        if not forward:
            runs = _runs(reset)
            if lib.jb_rows_add_reset(address, len(runs), ints(runs)):
                raise RuntimeError("the compiled field call refused the reset columns")
        for kind, what, nbytes in outputs:
            if kind == "state":
                runs = _runs(what)
                slot = lib.jb_rows_add_state_output(address, what.size, len(runs), ints(runs))
                width = what.size * 8
            elif kind == "warning":
                slot = lib.jb_rows_add_warning_output(address)
                width = nbytes
            else:
                size, elemsize = ctypes.c_int(0), ctypes.c_int(0)
                slot = lib.jb_rows_add_field_output(
                    address, what.encode(), ctypes.byref(size), ctypes.byref(elemsize)
                )
                width = size.value * elemsize.value
            if slot < 0 or width != nbytes:
                raise RuntimeError(
                    f"the compiled field call refused output {what!r} ({width} bytes a row "
                    f"where {nbytes} are expected)"
                )

    @property
    def calls(self) -> int:
        """The batch calls this plan has made (each one `mjb_step` or `mjb_forward`)."""
        lib = library()
        assert lib is not None
        return int(lib.jb_rows_calls(self.address))

    def attributes(self, slots: Any) -> dict[str, Any]:
        """The FFI call's attributes for result buffers of outputs `slots` (indices into the
        plan's outputs)."""
        return {
            "plan": np.int64(self.address),
            "token": np.int64(self.token),
            "slots": np.asarray(slots, np.int64),
        }
