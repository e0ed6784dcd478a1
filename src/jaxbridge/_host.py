"""`jaxbridge.host`: the wrapper that makes a NumPy function callable from JAX programs."""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypedDict, Unpack, overload

import jax
import jax.numpy as jnp
import numpy as np
from jax import core as jax_core
from jax._src import core as _core

from . import _batching, _call, _derivatives, _errors, _primitive, _spec
from ._base import AbstractHost

PyTree = Any
ResultArg = PyTree | Callable[..., PyTree] | None


class Host(AbstractHost):
    """A host function wrapped for JAX. Build one with `jaxbridge.host`."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        result: ResultArg = None,
        vmap: Any = "sequential",
        ordered: bool = False,
        io: bool = False,
        static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (),
        lowering: str = "auto",
        init: Callable[[], Any] | None = None,
        jacobian: Callable[..., Any] | None = None,
        jvp: Callable[..., Any] | None = None,
        vjp: Callable[..., Any] | None = None,
        derivative: Any = None,
        used_outputs: bool = False,
    ):
        if not callable(fn):
            raise TypeError(f"`jaxbridge.host` wraps a callable; got `{type(fn).__name__}`.")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
        self.batching = _batching.resolve(vmap)
        if lowering not in _primitive.LOWERINGS:
            raise ValueError(_errors.BAD_LOWERING.format(got=lowering))
        self.lowering = lowering
        self.used_outputs = _check_used_outputs(used_outputs)
        self.ordered = bool(ordered)
        self.io = bool(io) or self.ordered  # an ordered call is an io call in program order
        self.effect = "ordered" if self.ordered else "io" if self.io else "pure"
        self.init = init
        if init is not None and not callable(init):
            raise TypeError(
                f"`jaxbridge.host(init=...)` must be a callable returning per-worker state; "
                f"got `{type(init).__name__}`."
            )
        self.static_argnums, self.static_argnames = _static_args(
            fn, static_argnums, static_argnames
        )
        # A pytree of anything with `.shape` and `.dtype` (a tracer too: only its spec is kept,
        # so a wrapper built inside a trace holds no tracer); a callable; or None.
        self._declared: _spec.ResultSpec | None = None
        self._result_fn: Callable[..., PyTree] | None = None
        if _spec.is_result_function(result):
            self._result_fn = result
        elif result is not None:
            self._declared = _spec.spec_from_tree(result)  # validates now, at wrap time
        elif self.io:
            # `io_callback(f, None, x)`: no result. Never probe: that would run the side
            # effect at trace time.
            self._declared = _spec.spec_from_tree(None)
        self._discard = result is None and self.io
        self.rule = _derivatives.make_rule(
            self, jacobian=jacobian, jvp=jvp, vjp=vjp, derivative=derivative
        )
        self._entries: dict[Any, _Entry] = {}
        self._states = threading.local()  # per-thread `init()` state, for every signature

    def __repr__(self) -> str:
        return f"jaxbridge.host({self.name}, vmap={self.batching!r})"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        # Used as a method: bind like a function would.
        return self if obj is None else functools.partial(self, obj)

    # -- signatures ----------------------------------------------------------------------

    def entry(self, split: _spec.Split, avals: Sequence[jax.ShapeDtypeStruct]) -> _Entry:
        """The cached host call and result spec for one input signature."""
        key = (split.key(), tuple((a.shape, a.dtype) for a in avals))
        found = self._entries.get(key)
        if found is None:
            spec = self._result_spec(split, avals)
            call = _call.HostCall(
                self.name,
                self.fn,
                split,
                avals,
                spec,
                self.batching,
                self.init,
                self._states,
                discard=self._discard,
                pass_used=self.used_outputs,
            )
            found = self._entries[key] = _Entry(self, call)
        return found

    def _result_spec(self, split: _spec.Split, avals: Sequence[Any]) -> _spec.ResultSpec:
        if self._declared is not None:
            return self._declared
        if self._result_fn is not None:
            args, kwargs = split.rebuild(list(avals))
            return _spec.spec_from_tree(self._result_fn(*args, **kwargs))
        fn = self.fn
        if self.init is not None:
            fn = functools.partial(fn, state=self.local_state())
        if self.used_outputs:
            fn = functools.partial(fn, used_outputs=None)  # the probe wants every output
        return _spec.probe(self.name, fn, split, avals)

    def local_state(self) -> Any:
        """This thread's `init()` state (made on first use): eager calls, probes and the
        host loops of every signature share it."""
        try:
            return self._states.state
        except AttributeError:
            self._states.state = self.init()  # type: ignore[misc]
            return self._states.state

    # -- calls ---------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> PyTree:
        split, dynamic = _spec.split_arguments(
            args, kwargs, self.static_argnums, self.static_argnames
        )
        if _is_eager(dynamic):
            return self._call_eager(split, dynamic)
        avals = [_spec.leaf_aval(x) for x in dynamic]
        entry = self.entry(split, avals)
        _errors.take_recorded()  # forget failures of earlier, unrelated computations
        try:
            out = entry.jitted(*dynamic)
        except jax.errors.JaxRuntimeError:
            # An eager transformation (vmap or grad outside jit) ran the call right here:
            # raise the host's own exception, not XLA's text of it.
            original = _errors.take_recorded()
            if original is None:
                raise
            if isinstance(original, _errors.HostError):
                # jaxbridge's own check (a kept argument, a wrong result): its own type, so
                # `except jaxbridge.KeptArgumentError` catches it.
                raise original from None
            raise _errors.HostError(_errors.format_host_exception(self.name, original)) from (
                original
            )
        return jax.tree_util.tree_unflatten(entry.call.spec.treedef, out)

    def sibling(
        self,
        fn: Callable[..., Any],
        *,
        name: str,
        result: Any,
        vmap: Any = None,
        init: Callable[[], Any] | None = None,
    ) -> Host:
        """Another host function like this one, for a derivative rule (see `AbstractHost`)."""
        other = Host(
            fn,
            result=result,
            vmap=self.batching if vmap is None else vmap,
            lowering=self.lowering,
            init=init,
        )
        other.name = name
        return other

    def _call_eager(self, split: _spec.Split, dynamic: list[Any]) -> PyTree:
        """Outside any trace: call the function directly; its own exception propagates."""
        arrays = [_host_array(x) for x in dynamic]
        args, kwargs = split.rebuild(arrays)
        if self.init is not None:
            kwargs["state"] = self.local_state()
        if self.used_outputs:
            kwargs["used_outputs"] = None  # an eager call returns every output
        value = self.fn(*args, **kwargs)
        if self._discard:
            return None
        if self._declared is not None or self._result_fn is not None:
            avals = [_spec.leaf_aval(x) for x in arrays]
            spec = self.entry(split, avals).call.spec
        else:
            spec = _spec.spec_from_value(self.name, value)
        checked = _spec.check_result(f"host function {self.name!r}", spec, value)
        return jax.tree_util.tree_unflatten(spec.treedef, [jnp.asarray(x) for x in checked])


class _Entry:
    """One input signature: its host call and the traceable function that stages it."""

    def __init__(self, host: Host, call: _call.HostCall):
        self.call = call
        self.extra: dict[Any, Any] = {}  # per-signature objects of the derivative rule
        emit = functools.partial(_primitive.emit, call, effect=host.effect, lowering=host.lowering)
        self.emit = lambda *dynamic: emit(dynamic)
        self.traced = host.rule.wrap(self)
        # The call site jits its own call: inside a user's jit this inlines for free, and under
        # an eager transformation (grad or vmap outside jit) the rule's many small operations
        # compile once per signature instead of dispatching one by one.
        self.jitted = jax.jit(self.traced)
        call.jvp_rule = functools.partial(host.rule.jvp, self)


def _check_used_outputs(used_outputs: Any) -> bool:
    if not isinstance(used_outputs, bool):
        raise TypeError(
            "`jaxbridge.host(used_outputs=...)` must be True (the host function takes a keyword "
            "argument `used_outputs` and computes only the outputs it flags) or False; got "
            f"`{type(used_outputs).__name__}`."
        )
    return used_outputs


def _is_eager(dynamic: Sequence[Any]) -> bool:
    return _core.trace_ctx.is_top_level() and not any(
        isinstance(x, jax_core.Tracer) for x in dynamic
    )


def _host_array(x: Any) -> np.ndarray:
    """What the host function receives for a concrete leaf: a read-only NumPy array."""
    arr = np.asarray(x, dtype=_spec.canonical_dtype(x))
    if arr is x:  # the caller's own array: hand out a read-only view, as under jit
        arr = arr.view()
    arr.flags.writeable = False
    return arr


def _static_args(
    fn: Callable[..., Any],
    static_argnums: int | Sequence[int],
    static_argnames: str | Sequence[str],
) -> tuple[frozenset[int], frozenset[str]]:
    """Completes `static_argnums`/`static_argnames` from each other, as `jax.jit` does."""
    nums = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums)
    names = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return frozenset(nums), frozenset(names)
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for n in list(nums):
        if 0 <= n < len(positional):
            names.add(positional[n])
    for i, pname in enumerate(positional):
        if pname in names:
            nums.add(i)
    return frozenset(nums), frozenset(names)


class HostOptions(TypedDict, total=False):
    """The keyword arguments of `jaxbridge.host`, for its overloads."""

    result: ResultArg
    vmap: Any
    ordered: bool
    io: bool
    static_argnums: int | Sequence[int]
    static_argnames: str | Sequence[str]
    lowering: str
    init: Callable[[], Any] | None
    jacobian: Callable[..., Any] | None
    jvp: Callable[..., Any] | None
    vjp: Callable[..., Any] | None
    derivative: Any
    used_outputs: bool


@overload
def host(fn: Callable[..., Any], /, **kwargs: Unpack[HostOptions]) -> Host: ...
@overload
def host(
    fn: None = None, /, **kwargs: Unpack[HostOptions]
) -> Callable[[Callable[..., Any]], Host]: ...


def host(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    result: ResultArg = None,
    vmap: Any = "sequential",
    ordered: bool = False,
    io: bool = False,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    lowering: str = "auto",
    init: Callable[[], Any] | None = None,
    jacobian: Callable[..., Any] | None = None,
    jvp: Callable[..., Any] | None = None,
    vjp: Callable[..., Any] | None = None,
    derivative: Any = None,
    used_outputs: bool = False,
) -> Host | Callable[[Callable[..., Any]], Host]:
    """Makes a NumPy function callable from `jit`, `vmap`, `scan`, `grad` and the rest.

    The wrapped function receives NumPy arrays and returns NumPy arrays, Python numbers or
    pytrees of them. Arguments that are not arrays or numbers (a model object, a string, a
    SymPy expression) are static: handed over unchanged and part of the cache key.

    Args:
        fn: the host function. Omit it to use `host(...)` as a decorator factory.
        result: the result spec: `None` probes it by calling `fn` once per new input
            signature on zero-filled arrays (with `io=True` or `ordered=True`, `None` means
            "returns nothing" instead, as `io_callback(fn, None, x)`, so no probe runs the side
            effect); a pytree of anything with `.shape` and `.dtype` (`jax.ShapeDtypeStruct`,
            `jax.core.ShapedArray`, an array, or a traced argument itself); or a callable
            receiving the arguments as `ShapeDtypeStruct`s and returning such a pytree.
        vmap: what a batch does on the host, always as ONE host call: `"sequential"` loops
            over the elements (each call sees unbatched shapes); `"vectorized"` calls `fn` once
            with every array argument stacked to `(B, *shape)`, B the product of all vmapped
            sizes; or an executor (`jaxbridge.Threads`, `Processes`, `Ray`).
        ordered: side effects in program order, never removed as dead code
            (`io_callback(ordered=True)`); under vmap the host loops over the batch in order.
            JAX refuses it under `vmap` of `while_loop` and `cond`.
        io: side effects never removed as dead code, in any order
            (`io_callback(ordered=False)`, whose effect it carries): JAX refuses it under
            `vmap` of `cond` and of a `while_loop` with a batched predicate, where the batch
            would run it for elements whose branch is not taken or whose loop has finished.
        static_argnums: positions of arguments to treat as static even if they are numbers.
        static_argnames: names of arguments to treat as static even if they are numbers.
        lowering: `"auto"` (buffer_callback on CPU, pure_callback elsewhere), `"buffer"` or
            `"pure"`; the environment variable `JAXBRIDGE_LOWERING` overrides `"auto"`.
        init: makes per-worker state, passed to `fn` as the keyword `state=`; called once
            per thread, process or Ray actor that runs `fn`.
        jacobian: host function of the same arguments returning the Jacobian in the layout of
            `jax.jacfwd(f, argnums=...)` over the positional arguments.
        jvp: `jvp(*args, *tangents) -> tangents_out`, a host function.
        vjp: `vjp(*args, cotangents_out) -> cotangents_in` (a tuple, one per positional
            argument), a host function.
        derivative: a derivative rule object, such as `jaxbridge.FiniteDifferences()`.
        used_outputs: True: `fn` takes a keyword argument `used_outputs` and computes only the
            outputs the program uses. It receives `None` when every output is used (and in
            the probe that finds the result spec, and in eager calls); otherwise a pytree of
            Python bools with the structure of the result (`used_outputs["qpos"]`,
            `used_outputs.qacc`, `used_outputs[1]`), True for each leaf the program uses. For
            a leaf flagged False it may return anything (`None` is fine): that leaf is neither
            checked nor copied. Without it (the default) `fn` computes every output and only
            the used ones are copied out. Either way a `jit`ted program that uses only some
            outputs of a call makes XLA buffers for those alone (the primitive's dead-code
            rule), under `vmap`, `grad`, `scan`, `cond` and sharded `jit` too; a pure call
            whose outputs are all unused is removed, an `io=True` call runs anyway. An
            `ordered=True` call, and a call inside the body of a `while_loop` (JAX runs no
            dead-code elimination there), always computes every output.

    Returns:
        A callable with `fn`'s name and docstring.

    Raises:
        TypeError: a leaf of `result` has no `.shape` and `.dtype`.
        ValueError: an unknown `vmap` or `lowering`.

    Under `jax.jit` the function receives read-only arrays of the traced shapes and JAX's
    canonical dtypes (float32 unless x64 is on); under `jax.vmap` see `vmap` above. A pure
    call's arguments are zero-copy views of XLA's buffers on CPU: keeping one after returning
    raises a `HostError` (copy what you keep); `io=True` and `ordered=True` calls receive
    copies they may keep. Every JAX dtype
    crosses, sub-byte ones (int4, float4_e2m1fn) included. Returned arrays are converted to the
    result dtype only within a kind and only where no value changes (float64 to float32 may
    round; 300 into int8 raises `HostResultError`). Without a derivative rule, differentiating
    raises a `ValueError` naming the arguments to pass.

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np
        >>> import jaxbridge
        >>> @jaxbridge.host
        ... def norm(x):
        ...     return np.linalg.norm(x)
        >>> float(jax.jit(norm)(jnp.array([3.0, 4.0])))
        5.0
        >>> jax.vmap(norm)(jnp.ones((2, 4))).tolist()
        [2.0, 2.0]

        A host function that computes only what the program reads:

        >>> @jaxbridge.host(used_outputs=True)
        ... def stats(x, used_outputs=None):
        ...     want = lambda k: used_outputs is None or used_outputs[k]
        ...     return {"mean": np.mean(x) if want("mean") else None,
        ...             "var": np.var(x) if want("var") else None}
        >>> float(jax.jit(lambda x: stats(x)["mean"])(jnp.array([1.0, 3.0])))
        2.0
    """
    options: dict[str, Any] = dict(
        result=result,
        vmap=vmap,
        ordered=ordered,
        io=io,
        static_argnums=static_argnums,
        static_argnames=static_argnames,
        lowering=lowering,
        init=init,
        jacobian=jacobian,
        jvp=jvp,
        vjp=vjp,
        derivative=derivative,
        used_outputs=used_outputs,
    )
    if fn is None:
        # Validate now so that a bad `@host(...)` fails where it is written.
        _batching.resolve(vmap)
        if result is not None and not _spec.is_result_function(result):
            _spec.spec_from_tree(result)
        if lowering not in _primitive.LOWERINGS:
            raise ValueError(_errors.BAD_LOWERING.format(got=lowering))
        _check_used_outputs(used_outputs)
        return lambda f: Host(f, **options)
    return Host(fn, **options)
