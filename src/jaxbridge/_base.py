"""The protocols at the bottom of the package: what a layer may use of the one it serves.

- `AbstractCall`: what a batching strategy (and an executor) may use of one host call at one
  input signature. `_call.HostCall` is the one implementation; a strategy never reads more.
- `AbstractBatching`: what one batched host call does on the host (`_batching`, the
  executors, and integrations' own strategies such as `jaxbridge.mujoco`'s).
- `AbstractHost` and `AbstractSignature`: what a derivative rule (`_derivatives`) may use of
  the wrapped function it derives from, and of one of its input signatures. `_host.Host` is
  the implementation; the rule receives it as an argument and never imports it.

Everything else in the core builds on these, one way: this module imports only `_spec`'s
types (`_spec` imports only `_errors`), as `optax/_src/base.py` imports only jax.
"""

from __future__ import annotations

import abc
import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import jax
import numpy as np

from . import _spec


class AbstractCall(Protocol):
    """One host call at one input signature: what a batching strategy may use of it.

    Batching follows the expand_dims convention: a batched call's arrays carry the batch in
    their leading dimensions, so an input of `in_avals[i]` arrives as `batch + core`, where
    `core` has `core_ndims[i]` dimensions (and `batch` holds 1 where an input is unbatched).

    Unused outputs: a `jit`ted program that uses only some outputs of a call runs a call whose
    `used_outputs` is False for the others (the primitive's dead-code rule rewrites it so).
    `check` neither checks nor copies those; the host function is told only if it was wrapped
    with `jaxbridge.host(used_outputs=True)` (`invoke` passes the flags then).
    """

    #: The host function's name, for messages.
    name: str
    #: The wrapped host function.
    fn: Callable[..., Any]
    #: How the arguments split into static and traced leaves (`split.rebuild(arrays)`).
    split: _spec.Split
    #: The traced leaves' unbatched shapes and dtypes.
    in_avals: tuple[jax.ShapeDtypeStruct, ...]
    #: `len(a.shape)` for each of `in_avals`.
    core_ndims: tuple[int, ...]
    #: The result: its pytree structure and every leaf's unbatched shape and dtype.
    spec: _spec.ResultSpec
    #: One flag per leaf of `spec`: whether the program uses that output.
    used_outputs: tuple[bool, ...]
    #: `spec.avals` of the used outputs: the buffers XLA hands the call.
    out_avals: tuple[jax.ShapeDtypeStruct, ...]
    #: `jaxbridge.host(init=...)`, or None.
    init: Callable[[], Any] | None
    #: The per-thread `init()` state that every signature of one wrapped function shares.
    states: threading.local

    def invoke(self, arrays: Sequence[Any], state: Any = None) -> Any:
        """Calls the host function on the traced leaves `arrays` (static arguments added)."""
        ...

    def check(self, value: Any, outs: Sequence[Any], lead: tuple[int, ...] = ()) -> None:
        """Checks the host function's return value and copies it into `outs` (one array per
        leaf of `spec`, each of shape `lead + aval.shape`; an unused one is skipped)."""
        ...

    def local_state(self) -> Any:
        """The calling thread's `init()` state (made on first use), or None."""
        ...

    def fail(self, e: BaseException) -> BaseException:
        """The error to raise for `e` raised by the host function (recorded, and named)."""
        ...


@dataclasses.dataclass(frozen=True)
class InPlace:
    """A strategy's buffer function (`AbstractBatching.buffer_call`) that writes some outputs
    into the buffers of inputs it has read: XLA then needs no copy of those outputs into a
    loop's carry (in a `scan` of a step, the state goes back into the buffer it came from).

    `aliases` maps an input's index to the index of the output written into its buffer (as
    `buffer_callback(input_output_aliases=...)`), each pair of one shape and dtype. XLA copies
    an input first where the program still reads it after the call, so the caller's arrays
    are never changed. The function must read every aliased input before it writes any output.
    """

    fn: Callable[..., None]
    aliases: Mapping[int, int]

    @classmethod
    def by_name(
        cls,
        fn: Callable[..., None],
        inputs: Sequence[str],
        in_shapes: Sequence[tuple],
        outputs: Sequence[str],
        out_shapes: Sequence[tuple],
    ) -> InPlace:
        """`fn` writing each output into the buffer of the input of its name and shape."""
        aliases = {}
        for k, (name, shape) in enumerate(zip(outputs, out_shapes)):
            if name in inputs:
                j = list(inputs).index(name)
                if tuple(in_shapes[j]) == tuple(shape):
                    aliases[j] = k
        return cls(fn, aliases)


@dataclasses.dataclass(frozen=True)
class NativeCall:
    """A strategy's buffer call (`AbstractBatching.buffer_call`) that is compiled code: an XLA
    FFI target (`jax.ffi.register_ffi_target`, on CPU) that XLA calls with the call's buffers,
    inputs then used outputs, and `attributes`, with no Python and no GIL on the way.

    `fallback` is the Python buffer function (or `InPlace`) of the same call: it runs where the
    target cannot (a sharded program's devices, whose calls carry a status output), and its
    aliases, if an `InPlace`, are the target's too: the target must read every aliased input
    before it writes any output. An error the target returns fails the program with its text.
    """

    target: str
    attributes: Mapping[str, Any]
    fallback: Callable[..., None] | InPlace

    @property
    def aliases(self) -> Mapping[int, int]:
        return self.fallback.aliases if isinstance(self.fallback, InPlace) else {}


class AbstractBatching(abc.ABC):
    """How one batched host call runs. Subclasses: Sequential, Vectorized, the executors."""

    #: Shown in messages and `repr`.
    name: str = "batching"

    #: True: `run` receives `None` in `outs` for an output the program does not use (see
    #: `AbstractCall.used_outputs`) and writes nothing there, and `buffer_call` is asked for
    #: calls with unused outputs too (its `out_shapes` and buffers are the used outputs').
    #: False (the default, safe for a strategy written before the dead-code rule): `outs`
    #: holds a scratch array there, which nothing reads, and `buffer_call` is not asked.
    handles_unused_outputs: bool = False

    @abc.abstractmethod
    def run(
        self,
        call: AbstractCall,
        batch: tuple[int, ...],
        ins: Sequence[np.ndarray],
        outs: Sequence[Any],
    ) -> None:
        """Fills `outs` (one per leaf of `call.spec`, each of shape `batch + core`) from inputs
        with leading `batch` dims."""

    def buffer_call(
        self, call: AbstractCall, in_shapes: Sequence[tuple], out_shapes: Sequence[tuple]
    ) -> Callable[..., None] | InPlace | NativeCall | None:
        """A `buffer_callback` function of this strategy's own for one pure lowering of `call`
        whose buffers have these shapes (an `InPlace` where it writes outputs into the buffers
        of inputs it has read, a `NativeCall` where compiled code serves the call), or None
        (the default) for `HostCall`'s.

        For a hot path whose host code the strategy owns: `HostCall`'s function guards a
        user's code (inputs made read-only, a reference kept past the call detected), which
        costs microseconds per call; one returned here skips those guards, so it must neither
        write its inputs nor keep them, and must raise `call.fail(e)` for an exception `e`.
        """
        del call, in_shapes, out_shapes
        return None

    def __repr__(self) -> str:
        return self.name


class AbstractSignature(Protocol):
    """One input signature of a wrapped function: what a derivative rule may use of it."""

    @property
    def call(self) -> AbstractCall:
        """The host call at this signature."""
        ...

    @property
    def extra(self) -> dict[Any, Any]:
        """Per-signature objects a rule keeps (its own host functions, built once)."""
        ...

    def emit(self, *dynamic: Any) -> list[Any]:
        """Stages the bare host call on the traced leaves; returns the flat results."""
        ...

    def traced(self, *dynamic: Any) -> list[Any]:
        """The call with its derivative rule (what differentiating again goes through)."""
        ...


class AbstractHost(abc.ABC):
    """A wrapped host function: what a derivative rule may use of the one it derives from."""

    #: The host function's name, for messages.
    name: str
    #: What a batch of it does on the host.
    batching: AbstractBatching
    #: `"auto"`, `"buffer"` or `"pure"`.
    lowering: str
    #: `jaxbridge.host(init=...)`, or None.
    init: Callable[[], Any] | None

    @abc.abstractmethod
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls the host function from JAX."""

    @abc.abstractmethod
    def sibling(
        self,
        fn: Callable[..., Any],
        *,
        name: str,
        result: Any,
        vmap: Any = None,
        init: Callable[[], Any] | None = None,
    ) -> AbstractHost:
        """Another host function like this one (its lowering; its batching unless `vmap` is
        given), named `name`, with result spec `result` (None to probe) and no derivative
        rule: how a rule wraps the user's `jacobian=`, `jvp=` and `vjp=`."""
