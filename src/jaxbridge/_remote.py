"""What crosses a process boundary: a `HostCall` sent to a worker, and an exception sent back.

`Processes` workers and Ray workers run chunks of a batched host call in other interpreters.
The host function, its static arguments and `init` are cloudpickled once per `HostCall`
(`_payload`) and loaded once per worker (`_load_call`); `_chunk_arrays` sends a chunk's inputs
and `_remote_run`, in the worker, runs the chunk. An exception raised there comes back packed
(`_pack_exception`): as its own type where it pickles, else as a `HostError` with its type and
message, and in either case with the worker's frames, which `_unpack_exception` replays so the
caller's traceback shows the host function's own source lines.
"""

from __future__ import annotations

import inspect
import linecache
import pickle
import sys
import threading
import traceback
import types
import uuid
import weakref
from typing import Any

import numpy as np

from . import _errors
from ._base import AbstractCall
from ._executors import CLOUDPICKLE_MISSING, NOT_PICKLABLE, _lock, run_chunk

_payloads: weakref.WeakKeyDictionary[Any, tuple[str, bytes]] = weakref.WeakKeyDictionary()
_dead_keys: set[str] = set()  # HostCalls collected here: workers may drop their copies
_state_groups: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_remote_calls: dict[str, AbstractCall] = {}  # in a worker: the host calls it has been sent
_remote_states: dict[str, threading.local] = {}  # ... and the init states they share


def _payload(call: AbstractCall, executor: str) -> tuple[str, bytes]:
    """A key and the cloudpickled host call, made once per call, sent once per worker.

    A call pickles as what a worker runs (`HostCall.__reduce__`): its function at its
    signature and used outputs, a batch looping on the worker, and no `init` state yet.
    """
    with _lock:
        found = _payloads.get(call)
    if found is not None:
        return found
    try:
        import cloudpickle
    except ImportError as e:  # pragma: no cover - checked when the executor is built
        raise ImportError(CLOUDPICKLE_MISSING) from e
    try:
        blob = cloudpickle.dumps(call)
    except Exception as e:
        raise TypeError(
            NOT_PICKLABLE.format(executor=executor, name=call.name, etype=type(e).__name__, emsg=e)
        ) from e
    # `init` state is per wrapped function (its signatures share `call.states`): so in a
    # worker too, where the group names the state that the signatures share.
    with _lock:
        group = _state_groups.setdefault(call.states, uuid.uuid4().hex)
    # The worker's sys.path first: functions of importable modules travel by reference.
    found = (uuid.uuid4().hex, pickle.dumps((sys.path, group, blob)))
    with _lock:
        _payloads[call] = found
    weakref.finalize(call, _dead_keys.add, found[0])
    return found


def _load_call(payload: bytes) -> AbstractCall:
    path, group, blob = pickle.loads(payload)
    sys.path[:] = path + [p for p in sys.path if p not in path]
    call = pickle.loads(blob)
    call.states = _remote_states.setdefault(group, threading.local())
    return call


def _remote_run(key, payload, n, arrays, shared, vectorized) -> tuple[str, Any]:
    """Runs one chunk in a worker: `("ok", outs)` or `("error", packed exception)`."""
    try:
        call = _remote_calls.get(key)
        if call is None:
            if payload is None:
                raise RuntimeError(f"jaxbridge worker was not sent host call {key}")
            call = _remote_calls[key] = _load_call(payload)
        ins = [
            np.broadcast_to(a, (n, *a.shape)) if s else a
            for a, s in zip(arrays, shared, strict=True)
        ]
        outs = [
            np.empty((n, *a.shape), a.dtype) if u else None
            for a, u in zip(call.spec.avals, call.used_outputs)
        ]
        run_chunk(call, ins, outs, 0, n, vectorized, call.local_state())
        return "ok", outs
    except Exception as e:
        return "error", _pack_exception(e)


def _chunk_arrays(flat_ins, shared, lo, hi) -> list[np.ndarray]:
    # An argument that is not batched travels once per chunk as its core, not as copies.
    return [
        _contiguous(x[0, ...] if s else x[lo:hi]) for x, s in zip(flat_ins, shared, strict=True)
    ]


def _contiguous(x: np.ndarray) -> np.ndarray:
    # Not np.ascontiguousarray: it turns a 0-d array into shape (1,).
    return x if x.flags.c_contiguous else x.copy()


def _pack_exception(e: BaseException) -> tuple[bytes | None, str, str, list]:
    frames = [
        (f.filename, f.lineno or 1, f.name)
        for f in traceback.extract_tb(e.__traceback__)
        if "/jaxbridge/_" not in f.filename.replace("\\", "/")
    ]
    try:
        import cloudpickle

        blob = cloudpickle.dumps(e)
        pickle.loads(blob)
    except Exception:
        blob = None
    etype = f"{type(e).__module__}.{type(e).__qualname__}"
    return blob, etype, str(e), frames


def _unpack_exception(
    packed: tuple[bytes | None, str, str, list], where: str, call: AbstractCall
) -> BaseException:
    """The worker's exception, of its own type where it unpickles, with the worker's frames."""
    blob, etype, message, frames = packed
    # cloudpickle renames the file of code it sends by value (a script's or notebook's
    # functions) to <dynamic-code>; most such code sits in the host function's own file.
    code = getattr(inspect.unwrap(call.fn), "__code__", None)
    if code is not None:
        frames = [(code.co_filename if f == "<dynamic-code>" else f, n, m) for f, n, m in frames]
    exc: BaseException | None = None
    if blob is not None:
        try:
            exc = pickle.loads(blob)
        except Exception:
            exc = None
    if exc is None:
        exc = _errors.HostError(f"{etype}: {message}")
    exc.add_note(f"Raised in {where}.")
    return _replay_traceback(exc, frames)


def _replay_traceback(exc: BaseException, frames: list) -> BaseException:
    """Gives `exc` a traceback made of the worker's frames (jinja2's trick).

    The trampoline shows the host traceback of an exception from its frames; for an exception
    from another process those are the worker's, so we raise it once from code compiled at each
    worker frame's file and line. Source lines then show as for a local exception.
    """
    tb = None
    for filename, lineno, name in reversed(frames):
        try:
            code = compile(_raise_at(filename, lineno), filename, "exec")
            code = code.replace(co_name=name, co_qualname=name)
        except Exception:  # pragma: no cover - an odd filename or line
            continue
        exc.__traceback__ = None
        try:
            exec(code, {"__exc__": exc})
        except BaseException as raised:
            here = raised.__traceback__ and raised.__traceback__.tb_next  # skip our frame
            if here is not None:
                tb = types.TracebackType(tb, here.tb_frame, here.tb_lasti, here.tb_lineno)
    exc.__context__ = None
    return exc.with_traceback(tb)


def _raise_at(filename: str, lineno: int) -> str:
    """Source raising `__exc__` at `lineno`, spanning the real line so no carets show."""
    line = linecache.getline(filename, lineno)
    width, indent = len(line.strip()), len(line) - len(line.lstrip())
    stmt = "raise __exc__"
    if width > len(stmt) + 2:
        stmt = "raise (__exc__" + " " * (width - len(stmt) - 2) + ")"
    if indent and lineno > 1:  # an indented line needs a block to sit in
        return "\n" * (lineno - 2) + "if 1:\n" + " " * indent + stmt
    return "\n" * (lineno - 1) + stmt
