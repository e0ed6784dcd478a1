"""One host call's host side: the trampoline XLA calls, and what it hands the host function.

`HostCall` is built once per input signature at trace time (`_host.Host.entry`) and carried as
a parameter of the primitive `host_call_p` (`_primitive.py`, its rules and lowering). XLA calls
one of its trampolines: `buffer_trampoline` (`jax.experimental.buffer_callback` on CPU: the host
function reads XLA's input buffers as zero-copy NumPy views, its result is written straight into
XLA's output buffers) or `pure_trampoline` (`jax.pure_callback`, `io_callback`). A batched call
(leading batch dimensions, the expand_dims convention) goes to the batching strategy as ONE call.

Unused outputs: the primitive's dead-code rule replaces a call whose program uses only some
outputs by `call.restrict(used)`, a `HostCall` whose XLA buffers are the used outputs only. Its
`check` copies nothing for the others, and a host function wrapped with
`jaxbridge.host(used_outputs=True)` receives the flags as `used_outputs=`.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from . import _errors, _spec
from ._base import AbstractBatching, AbstractCall, InPlace, NativeCall
from ._batching import SEQUENTIAL, Sequential, Vectorized


class HostCall(AbstractCall):
    """Everything the host needs to run one wrapped function at one input signature.

    Built once per signature at trace time; `__call__`-free and allocation-light because every
    call (and, under `Sequential`, every batch element) goes through it.
    """

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        split: _spec.Split,
        in_avals: Sequence[jax.ShapeDtypeStruct],
        spec: _spec.ResultSpec,
        batching: AbstractBatching,
        init: Callable[[], Any] | None = None,
        states: threading.local | None = None,
        discard: bool = False,
        pass_used: bool = False,
        used: Sequence[bool] | None = None,
    ):
        self.name = name
        self.fn = fn
        self.split = split
        self.in_avals = tuple(in_avals)
        self.core_ndims = tuple(len(a.shape) for a in in_avals)
        self.spec = spec
        self.batching = batching
        self.init = init
        self.rule = f"host function {name!r}"
        # `io=True`/`ordered=True` with `result=None`: no result, whatever `fn` returns is
        # dropped (as `io_callback(fn, None, x)`).
        self.discard = discard
        # Per-thread `init()` state, shared by all signatures of one wrapped function.
        self.states = states if states is not None else threading.local()
        # `(primals, tangents) -> (primals_out, tangents_out)`: the function's derivative rule,
        # set by `jaxbridge.Host` for the JVP rule of `host_call_p` (on the full call).
        self.jvp_rule: Callable[..., Any] | None = None
        # `jaxbridge.host(used_outputs=True)`: `invoke` passes the flags as `used_outputs=`.
        self.pass_used = pass_used
        self.used_outputs = tuple(used) if used is not None else (True,) * len(spec.avals)
        if len(self.used_outputs) != len(spec.avals):
            raise ValueError(
                f"{len(self.used_outputs)} used-output flags for the {len(spec.avals)} outputs "
                f"of host function {name!r}"
            )
        self.out_avals = tuple(a for a, u in zip(spec.avals, self.used_outputs) if u)
        self.partial = not all(self.used_outputs)
        # What the host function receives: None when every output is used, else the flags in
        # the result's pytree structure.
        self._used_tree = (
            jax.tree_util.tree_unflatten(spec.treedef, list(self.used_outputs))
            if self.partial
            else None
        )
        # The call whose outputs this one restricts (itself if none), and its restrictions.
        self.full: HostCall = self
        self._restricted: dict[tuple[bool, ...], HostCall] = {}
        # Fast paths for the common shapes of a call (every call is a hot path): positional
        # array arguments only, and a single array result.
        n = len(in_avals)
        self._positional_only = (
            not pass_used
            and not any(v is not None for v in split.static_leaves)
            and split.treedef == jax.tree_util.tree_structure((tuple(range(n)), {}))
        )
        self._single = spec.treedef == jax.tree_util.tree_structure(0)

    def __reduce__(self) -> tuple[Any, ...]:
        # What a worker process runs (`_remote`): this function at this signature and these
        # used outputs, a batch looped over in the worker, fresh `init` state.
        parts = (self.name, self.fn, self.split, self.in_avals, self.spec, self.init)
        return (_rebuild, (*parts, self.discard, self.pass_used, self.used_outputs))

    def restrict(self, used: Sequence[bool]) -> HostCall:
        """This call with only the outputs flagged in `used` (one flag per leaf of `spec`)
        staged: XLA hands it buffers for those alone. Made once per set of flags."""
        full = self.full
        key = tuple(bool(u) for u in used)
        if key == full.used_outputs:
            return full
        found = full._restricted.get(key)
        if found is None:
            found = HostCall(
                full.name,
                full.fn,
                full.split,
                full.in_avals,
                full.spec,
                full.batching,
                full.init,
                full.states,
                discard=full.discard,
                pass_used=full.pass_used,
                used=key,
            )
            found.full = full
            full._restricted[key] = found
        return found

    # -- host side ------------------------------------------------------------------------

    def local_state(self) -> Any:
        """The calling thread's `init()` state (created on first use), or None."""
        if self.init is None:
            return None
        try:
            return self.states.state
        except AttributeError:
            self.states.state = self.init()
            return self.states.state

    def invoke(self, arrays: Sequence[Any], state: Any = None) -> Any:
        if self._positional_only and self.init is None:
            return self.fn(*arrays)
        args, kwargs = self.split.rebuild(arrays)
        if self.init is not None:
            kwargs["state"] = state
        if self.pass_used:
            kwargs["used_outputs"] = self._used_tree
        return self.fn(*args, **kwargs)

    def check(self, value: Any, outs: Sequence[Any], lead: tuple[int, ...] = ()) -> None:
        if self.discard:
            return
        if self._single and not self.partial and type(value) is np.ndarray:
            aval = self.spec.avals[0]
            if value.dtype == aval.dtype and value.shape == lead + aval.shape:
                outs[0][...] = value
                return
        used = self.used_outputs if self.partial else None
        _spec.check_result(self.rule, self.spec, value, outs, lead, used)

    def expand(self, outs: Sequence[Any], batch: tuple[int, ...]) -> list[Any]:
        """XLA's buffers (the used outputs) as one entry per leaf of `spec`: the buffer, or for
        an unused output `None` (a strategy that `handles_unused_outputs`) or a scratch array
        of shape `batch + core` that nothing reads."""
        if not self.partial:
            return list(outs)
        given = iter(outs)
        none = self.batching.handles_unused_outputs or not batch
        return [
            next(given) if u else None if none else np.empty(batch + a.shape, a.dtype)
            for u, a in zip(self.used_outputs, self.spec.avals)
        ]

    def batch_shape(self, ins: Sequence[np.ndarray], outs: Sequence[np.ndarray]) -> tuple:
        return self.batch_of([x.shape for x in ins], [o.shape for o in outs[:1]])

    def batch_of(self, in_shapes: Sequence[tuple], out_shapes: Sequence[tuple]) -> tuple:
        """The batch: the leading dimensions of inputs of these shapes (or of the first output)."""
        if in_shapes and all(len(s) == nd for s, nd in zip(in_shapes, self.core_ndims)):
            return ()
        if in_shapes:
            leads = [tuple(s[: len(s) - nd]) for s, nd in zip(in_shapes, self.core_ndims)]
            if leads.count(leads[0]) == len(leads):  # the common case, without NumPy's call
                return leads[0]
            return np.broadcast_shapes(*leads)
        if out_shapes:
            shape = tuple(out_shapes[0])
            return shape[: len(shape) - len(self.out_avals[0].shape)]
        return ()

    def run(
        self, ins: Sequence[np.ndarray], outs: Sequence[np.ndarray], batch: tuple | None = None
    ) -> None:
        """One call from XLA: unbatched, or a batch handed to the batching strategy.

        `outs` are XLA's buffers, one per used output. `batch` is the leading dimensions when
        the caller knows them (from the lowering's shapes); None to read them from `ins`.
        """
        if batch is None:
            batch = self.batch_shape(ins, outs)
        if self.partial:
            outs = self.expand(outs, batch)
        if batch:
            self.batching.run(self, batch, ins, outs)
        else:
            self.check(self.invoke(ins, self.local_state()), outs)

    def fail(self, e: BaseException) -> BaseException:
        """The error a host call raises for `e`, raised in the host function (recorded, and
        named after the function); a strategy's own `buffer_call` raises it too."""
        _errors.record(e)
        return _errors.HostError(_errors.format_host_exception(self.name, e))

    def buffer_trampoline(
        self, in_shapes: Sequence[tuple], out_shapes: Sequence[tuple], *, io: bool = False
    ) -> Callable[..., None] | InPlace | NativeCall:
        """The `buffer_callback` function of one lowering, whose buffer shapes are these: the
        batching strategy's own where it has one for them (`AbstractBatching.buffer_call`, an
        `InPlace` where it updates inputs in place, a `NativeCall` where compiled code serves
        it), else the generic one.

        The batch follows from the shapes, so it is found here once, not on every call.
        """
        batch = self.batch_of(in_shapes, out_shapes)
        if io:
            return functools.partial(self._io_buffer_call, batch)
        # A strategy written before the dead-code rule assumes every output's buffer.
        if not self.partial or self.batching.handles_unused_outputs:
            own = self.batching.buffer_call(self, in_shapes, out_shapes)
            if own is not None:
                return own
        return functools.partial(self._buffer_call, batch, len(out_shapes) == 1)

    def _buffer_call(self, batch: tuple, single: bool, ctx: Any, outs: Any, *ins: Any) -> None:
        """A pure call: the host function reads XLA's buffers through zero-copy views.

        XLA frees or reuses those buffers once the call returns, so a view the function keeps
        would silently change value. Every view of an input (`x[1:]`, a reshape, a vmap
        element) holds a reference to the array made here, so a reference count that grew
        during the call means the function kept one: that raises, naming the argument.
        """
        del ctx  # the CPU stream: nothing to synchronise with
        # A CPU `Buffer`'s own `__array__` makes the same zero-copy view as `np.asarray`
        # (whose array-protocol probing costs several times more) and ndarray's returns itself.
        arrays = [b.__array__() for b in ins]
        for a in arrays:
            # XLA owns these buffers: a host function that writes to its input must fail
            # loudly, not corrupt the caller's array.
            a.setflags(write=False)
        a = None  # only `arrays` holds them now: what `_kept` compares against
        # The per-call cost is one or two reference counts; `_kept` runs only when they differ.
        refcount = sys.getrefcount
        before = refcount(arrays[0]) if len(arrays) == 1 else sum(map(refcount, arrays))
        try:
            self.run(
                arrays, [outs[0].__array__()] if single else [b.__array__() for b in outs], batch
            )
        except Exception as e:
            raise self.fail(e) from e
        after = refcount(arrays[0]) if len(arrays) == 1 else sum(map(refcount, arrays))
        if after != before:
            kept = self._kept(arrays)
            if kept is not None:
                raise self.fail(_errors.KeptArgumentError(self._kept_message(kept)))

    def _kept(self, arrays: list[np.ndarray]) -> int | None:
        """The first of `arrays` referenced by more than the list that holds it, or None."""
        # jaxlib keeps a reference to the last NumPy array handed to JAX (`jnp.asarray(x)` or
        # a jitted call on `x` inside the host function) until the next transfer: make one.
        jax.device_put(np.zeros((), np.int8))
        control = [object() for _ in arrays]  # held by a list only, counted the same way
        # A pool's worker thread may drop its references to the chunks just after it reports
        # them done: give it a moment before calling a reference kept.
        for _ in range(50):
            counts = [sys.getrefcount(a) for a in arrays]
            baseline = [sys.getrefcount(c) for c in control]
            kept = [i for i in range(len(arrays)) if counts[i] > baseline[i]]
            if not kept:
                return None
            if isinstance(self.batching, (Sequential, Vectorized)):
                break  # every reference of these in-thread strategies is gone by now
            time.sleep(0.001)
        return kept[0]

    def _kept_message(self, i: int) -> str:
        return _errors.KEPT_ARGUMENT.format(name=self.name, arg=self.split.describe(i, self.fn))

    def _io_buffer_call(self, batch: tuple, ctx: Any, outs: Any, *ins: Any) -> None:
        """An io call: the host function gets copies it owns, so it may keep its arguments
        (`log.append(x)`, as JAX's own io tests do)."""
        del ctx
        arrays = [b.__array__().copy() for b in ins]
        for a in arrays:
            a.setflags(write=False)  # as in a pure call: writing to an argument is a bug
        try:
            self.run(arrays, [b.__array__() for b in outs], batch)
        except Exception as e:
            raise self.fail(e) from e

    def pure_trampoline(self, *ins: np.ndarray) -> list[np.ndarray]:
        arrays = [np.asarray(a) for a in ins]
        for a in arrays:
            a.flags.writeable = False
        try:
            batch = self.batch_shape(arrays, ())
            outs = [np.empty(batch + a.shape, a.dtype) for a in self.out_avals]
            self.run(arrays, outs)
        except Exception as e:
            raise self.fail(e) from e
        return outs


def _rebuild(name, fn, split, in_avals, spec, init, discard, pass_used, used) -> HostCall:
    """A pickled `HostCall`, in a worker: its batches loop (`Sequential`)."""
    return HostCall(
        name,
        fn,
        split,
        in_avals,
        spec,
        SEQUENTIAL,
        init,
        discard=discard,
        pass_used=pass_used,
        used=used,
    )
