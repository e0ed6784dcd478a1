"""`Ray`: runs a batch's chunks as Ray tasks, or on Ray actors when there is `init` state.

Ray is imported, and connected to or started, on the first batch (`_ray_module`). The host
call's payload (see `_remote`) goes to the object store once per `HostCall` and each batched
input once per call, where tasks slice it. A task or actor that Ray gives up on becomes
`WorkerDiedError`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import socket
import weakref
from typing import Any

from ._executors import WorkerDiedError, _at_shutdown, _Executor, _lock
from ._remote import _contiguous, _payload, _remote_run, _unpack_exception

RAY_MISSING = "`jaxbridge.Ray` needs Ray: `pip install jaxbridge[ray]`"
RAY_FAILED = (
    "jaxbridge.Ray: the Ray {what} running elements {lo}:{hi} of host function {name!r} "
    "failed after Ray's retries ({retries}): {etype}: {emsg}"
)

_ray_started = False
# Actors per wrapped function (its signatures share `init` state, keyed by `call.states`).
_actors: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()
# The host call's payload in the object store, put once per `HostCall`.
_payload_refs: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


RAY_OTHER_CLUSTER = (
    "`jaxbridge.Ray(address={address!r})`: this process is already connected to the Ray "
    "cluster at {connected!r}, and Ray connects a process to one cluster only. Pass that "
    "address (or none) to use it, or call `ray.shutdown()` first to connect elsewhere."
)


def _ray_module(address: str | None) -> Any:
    """Ray, imported and connected (see `Ray`'s `address` for what None connects to)."""
    global _ray_started
    try:
        import ray
    except ImportError as e:
        raise ImportError(RAY_MISSING) from e
    with _lock:
        if not ray.is_initialized():
            ray.init(address=address or _default_address(ray))
            _ray_started = True
        elif address is not None:
            _check_connected(ray, address)
    return ray


def _default_address(ray: Any) -> str:
    """`RAY_ADDRESS`, else the cluster `ray start` registered if it answers, else "local"."""
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    try:  # Ray's own record of the last `ray start` on this machine (ray_current_cluster)
        registered = ray._private.utils.read_ray_address()
    except Exception:  # private API: without it, Ray's own default applies
        return "auto" if _registered_file_exists() else "local"
    if registered and _answers(registered):
        return registered
    # None registered, or a stale file of a cluster that is gone: a fresh local instance,
    # where plain `ray.init()` would fail trying to reach the dead one.
    return "local"


def _registered_file_exists() -> bool:
    base = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
    return os.path.exists(os.path.join(base, "ray", "ray_current_cluster"))


def _answers(address: str, timeout: float = 2.0) -> bool:
    """Whether something listens at `host:port` (the registered cluster's GCS)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def _check_connected(ray: Any, address: str) -> None:
    """Raises when `address` names a cluster other than the one this process is connected to."""
    if address in ("auto", "local") or "://" in address:
        return
    try:
        connected = ray.get_runtime_context().gcs_address
    except Exception:  # pragma: no cover - a Ray without the attribute: trust the caller
        return
    if not connected or _same_address(address, connected):
        return
    raise ValueError(RAY_OTHER_CLUSTER.format(address=address, connected=connected))


def _same_address(a: str, b: str) -> bool:
    def resolved(address: str) -> tuple[str, str]:
        host, _, port = address.rpartition(":")
        try:
            return socket.gethostbyname(host), port
        except OSError:
            return host, port

    return a == b or resolved(a) == resolved(b)


@functools.cache
def _ray_remotes(ray: Any) -> tuple[Any, Any]:
    def run(key, payload, lo, hi, shared, vectorized, *arrays):
        # The payload ref is nested, so Ray does not fetch it: only a worker that lacks it.
        # (Imported here: `run` travels by value, and a module-level name would be a copy.)
        from jaxbridge import _remote

        payload = ray.get(payload[0]) if key not in _remote._remote_calls else None
        # Ray hands each top-level array ref over as a read-only view of the object store.
        arrays = [a if s else a[lo:hi] for a, s in zip(arrays, shared, strict=True)]
        return _remote_run(key, payload, hi - lo, arrays, shared, vectorized)

    class Actor:
        """Holds per-actor `init` state: the `HostCall` it loads lives as long as the actor."""

        def run(self, *args):
            return run(*args)

    return ray.remote(run), ray.remote(Actor)


class Ray(_Executor):
    """Runs a batch as Ray tasks, or on Ray actors when the host function has `init` state.

    Args:
        address: the cluster to connect to on the first batch, as for `ray.init`: `host:port`
            of a cluster's head (`ray start --head` prints it), `"auto"`, `"local"` or a
            `ray://` client address. `None` joins the cluster named by `RAY_ADDRESS`; else the
            one `ray start` registered on this machine (Ray's `ray_current_cluster` file) if
            its head answers; else starts a private local instance with this machine's CPUs
            (so a stale registration of a stopped cluster does not fail the call, as plain
            `ray.init()` would). If this process is already connected (`ray.init` was called),
            that connection is used; an `address` naming another cluster then raises
            `ValueError`.
        num_workers: tasks (or actors) to split a batch over (default: the cluster's CPUs).
        chunk_size: elements per task (default: the batch split evenly over `num_workers`).
        vectorized: hand each chunk to the host function as stacked `(chunk, *core)` arrays.
        max_retries: Ray's `max_retries` for a task whose worker dies (default: Ray's own, 3).
            Application exceptions are never retried.

    The host function and its static arguments go to the object store once per input
    signature and are unpickled once per Ray worker; each batched input is put once and
    sliced by the tasks. With `init=`, `num_workers` actors are made per signature, each
    holding its own state. Exceptions reach the caller as from `Processes`; a task whose worker
    keeps dying fails with `jaxbridge.WorkerDiedError` after Ray's retries.

    Example:
        >>> import jaxbridge
        >>> jaxbridge.Ray(num_workers=4, vectorized=True)  # Ray starts on the first batch
        jaxbridge.Ray(num_workers=4, vectorized=True)
    """

    name = "ray"
    chunks_per_worker = 1  # each task costs about a millisecond: as few as keep all busy

    def __init__(
        self,
        address: str | None = None,
        num_workers: int | None = None,
        chunk_size: int | None = None,
        vectorized: bool = False,
        max_retries: int | None = None,
    ):
        if importlib.util.find_spec("ray") is None:
            raise ImportError(RAY_MISSING)
        super().__init__(num_workers, chunk_size, vectorized)
        self.address = address
        if max_retries is not None and (not isinstance(max_retries, int) or max_retries < 0):
            raise ValueError(
                f"`jaxbridge.Ray(max_retries=...)` must be a non-negative int or None; got "
                f"{max_retries!r}."
            )
        self.max_retries = max_retries

    def _repr_args(self):
        return {
            "address": self.address,
            "num_workers": self.n,
            "chunk_size": self.chunk_size,
            "vectorized": self.vectorized,
            "max_retries": self.max_retries,
        }

    def workers(self) -> int:
        if self.n is not None:
            return self.n
        return max(1, int(_ray_module(self.address).cluster_resources().get("CPU", 1)))

    def run(self, call, batch, ins, outs):
        _ray_module(self.address)
        super().run(call, batch, ins, outs)

    def _run_chunks(self, call, flat_ins, shared, flat_outs, chunks):
        ray = _ray_module(self.address)
        task, actor_cls = _ray_remotes(ray)
        key, payload = _payload(call, repr(self))
        with _lock:
            ref = _payload_refs.get(call)
            if ref is None:
                ref = _payload_refs[call] = ray.put(payload)
        # Each batched input goes to the object store once; tasks slice it without copying.
        puts = [
            ray.put(_contiguous(x[0, ...] if s else x))
            for x, s in zip(flat_ins, shared, strict=True)
        ]
        actors = self._actors(call, actor_cls) if call.init is not None else None
        refs = []
        for i, (lo, hi) in enumerate(chunks):
            args = (key, [ref], lo, hi, shared, self.vectorized, *puts)
            if actors is not None:
                refs.append(actors[i % len(actors)].run.remote(*args))
            else:
                options = {} if self.max_retries is None else {"max_retries": self.max_retries}
                refs.append(task.options(**options).remote(*args))
        errors = []
        for (lo, hi), r in zip(chunks, refs, strict=True):
            try:
                status, value = ray.get(r)
            except ray.exceptions.RayError as e:
                if actors is not None:
                    self._drop_actors(call, ray)
                what = "actor" if actors is not None else "task"
                retries = (
                    "the actor is not restarted"
                    if actors is not None
                    else (
                        f"max_retries={self.max_retries}"
                        if self.max_retries is not None
                        else "Ray's default max_retries"
                    )
                )
                errors.append(
                    WorkerDiedError(
                        RAY_FAILED.format(
                            what=what,
                            lo=lo,
                            hi=hi,
                            name=call.name,
                            retries=retries,
                            etype=type(e).__name__,
                            emsg=str(e).strip().splitlines()[0] if str(e) else "",
                        )
                    )
                )
                break
            if status == "error":
                where = f"a Ray worker (elements {lo}:{hi})"
                errors.append(_unpack_exception(value, where, call))
                break
            for o, v in zip(flat_outs, value, strict=True):
                if o is not None:  # None: an output the program does not use
                    o[lo:hi] = v
        if errors:
            # Chunks still running finish and are dropped: they write nothing of ours, and
            # cancelling tasks that may be retrying trips Ray up.
            raise errors[0]

    def _actors(self, call, actor_cls) -> list[Any]:
        with _lock:
            found = _actors.get(call.states)
            if found is None:
                found = _actors[call.states] = [actor_cls.remote() for _ in range(self.workers())]
        return found

    @staticmethod
    def _drop_actors(call, ray) -> None:
        with _lock:
            dead = _actors.pop(call.states, [])
        for a in dead:  # the next call makes fresh actors, with fresh state
            with contextlib.suppress(Exception):
                ray.kill(a)


@_at_shutdown
def _shutdown() -> None:
    if _ray_started:  # a Ray that the user started is the user's to stop
        import ray

        if ray.is_initialized():
            ray.shutdown()
