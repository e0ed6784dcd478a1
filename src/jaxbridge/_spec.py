"""Arguments and results of a host function: which leaves are traced, and what comes back.

Arguments are flattened into leaves; array-like leaves are traced, everything else (a model
object, a string, a SymPy expression) is static: handed to the host function unchanged and made
part of the cache key. Result specs are declared, computed from the argument specs, or probed by
one call on zero-filled arrays.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax import core as jax_core
from jax._src import dtypes as _dtypes

from . import _errors

PyTree = Any


class _Static:
    """Marks an argument named in `static_argnums`/`static_argnames`: one opaque leaf."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


class _ById:
    """Cache key for an unhashable static object: equal only to itself."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ById) and other.obj is self.obj


def is_dynamic_leaf(x: Any) -> bool:
    """Whether a pytree leaf is traced (an array or Python number) rather than static."""
    return isinstance(x, (jax.Array, np.ndarray, np.generic, int, float, complex, jax_core.Tracer))


def static_key(x: Any) -> Any:
    try:
        hash(x)
    except TypeError:
        return _ById(x)
    return x


def canonical_dtype(x: Any) -> np.dtype:
    """The dtype JAX gives `x` when it becomes an array (x64 decides 64 or 32 bits)."""
    return np.dtype(_dtypes.canonicalize_dtype(_dtypes.dtype(x)))


def leaf_aval(x: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(np.shape(x), canonical_dtype(x))


@dataclasses.dataclass(frozen=True)
class Split:
    """One call's arguments split into traced leaves and a static remainder."""

    treedef: Any  # of (args, kwargs), with every leaf in place
    dynamic_index: tuple[int, ...]  # positions of the traced leaves among all leaves
    static_leaves: tuple[Any, ...]  # all leaves, with traced ones replaced by None

    def key(self) -> tuple[Any, ...]:
        statics = tuple(
            static_key(v.value if isinstance(v, _Static) else v)
            for i, v in enumerate(self.static_leaves)
            if i not in self.dynamic_index
        )
        return (self.treedef, self.dynamic_index, statics)

    def describe(self, i: int, fn: Callable[..., Any] | None = None) -> str:
        """The `i`-th traced leaf as the user wrote it: "`x`", "`xs[1]`", "`w` (keyword)"."""
        paths, _ = jax.tree_util.tree_flatten_with_path(
            jax.tree_util.tree_unflatten(self.treedef, [0] * self.treedef.num_leaves)
        )
        keys = paths[self.dynamic_index[i]][0]
        where, key, rest = keys[0], keys[1], jax.tree_util.keystr(keys[2:])
        if getattr(where, "idx", 0) == 1:  # a keyword argument
            return f"`{getattr(key, 'key', key)}{rest}` (keyword)"
        position = getattr(key, "idx", 0)
        params = []
        try:
            if fn is not None:
                params = [
                    p.name
                    for p in inspect.signature(fn).parameters.values()
                    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                ]
        except (TypeError, ValueError):  # a builtin without a signature
            pass
        if position < len(params):
            return f"`{params[position]}{rest}` (position {position})"
        return f"at position {position}{rest}"

    def rebuild(self, dynamic: Sequence[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        leaves = list(self.static_leaves)
        for i, v in zip(self.dynamic_index, dynamic, strict=True):
            leaves[i] = v
        leaves = [v.value if isinstance(v, _Static) else v for v in leaves]
        args, kwargs = jax.tree_util.tree_unflatten(self.treedef, leaves)
        return args, kwargs


def split_arguments(
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    static_argnums: frozenset[int],
    static_argnames: frozenset[str],
) -> tuple[Split, list[Any]]:
    """Flattens `(args, kwargs)`; returns the split and the traced leaves."""
    if static_argnums:
        args = tuple(_Static(a) if i in static_argnums else a for i, a in enumerate(args))
    if static_argnames:
        kwargs = {k: _Static(v) if k in static_argnames else v for k, v in kwargs.items()}
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    dynamic_index = tuple(i for i, x in enumerate(leaves) if is_dynamic_leaf(x))
    dynamic = [leaves[i] for i in dynamic_index]
    statics = tuple(None if i in dynamic_index else x for i, x in enumerate(leaves))
    return Split(treedef, dynamic_index, statics), dynamic


# --- result specs --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ResultSpec:
    """The flat result spec of one host function at one input signature."""

    treedef: Any
    avals: tuple[jax.ShapeDtypeStruct, ...]
    paths: tuple[str, ...]  # `jax.tree_util.keystr` of each leaf, for messages

    @property
    def tree(self) -> PyTree:
        return jax.tree_util.tree_unflatten(self.treedef, self.avals)


def _canonical_struct(s: Any) -> jax.ShapeDtypeStruct:
    dt = np.dtype(_dtypes.canonicalize_dtype(s.dtype))
    if isinstance(s, jax.ShapeDtypeStruct) and dt == s.dtype:
        return s
    return jax.ShapeDtypeStruct(tuple(s.shape), dt)


def is_spec_leaf(x: Any) -> bool:
    """Whether `x` can stand for a result leaf: anything with `.shape` and `.dtype`, as in
    `jax.pure_callback` (ShapeDtypeStruct, ShapedArray, NumPy and JAX arrays, tracers)."""
    return hasattr(x, "shape") and hasattr(x, "dtype")


def is_result_function(result: Any) -> bool:
    """Whether `host(result=...)` is a function of the argument specs, not a spec itself."""
    return callable(result) and not is_spec_leaf(result)


def spec_from_tree(tree: PyTree) -> ResultSpec:
    """Validates a declared result pytree (message per bad leaf); keeps only shapes and dtypes.

    A leaf is anything with `.shape` and `.dtype`; only those are kept, so a tracer given as
    `result=x` leaves nothing of its trace behind. `None` is an empty subtree, as everywhere in
    JAX: derivative rules' specs hold it in place of static leaves, and `check_result`
    flattens returned values the same way.
    """
    with_path, treedef = jax.tree_util.tree_flatten_with_path(tree)
    avals, paths = [], []
    for path, leaf in with_path:
        if not is_spec_leaf(leaf):
            raise TypeError(
                _errors.BAD_RESULT_SPEC.format(
                    got=f"`{type(leaf).__name__}`", path=jax.tree_util.keystr(path)
                )
            )
        avals.append(_canonical_struct(leaf))
        paths.append(jax.tree_util.keystr(path))
    return ResultSpec(treedef, tuple(avals), tuple(paths))


def spec_from_value(name: str, value: PyTree) -> ResultSpec:
    """The spec of a value the host function returned (probe or eager call)."""
    with_path, treedef = jax.tree_util.tree_flatten_with_path(value)
    avals, paths = [], []
    for path, leaf in with_path:
        if not is_dynamic_leaf(leaf):
            raise _errors.HostResultError(
                f"host function {name!r} returned `{type(leaf).__name__}` at "
                f"`{jax.tree_util.keystr(path)}`; host functions return NumPy arrays, Python "
                "numbers or pytrees of them."
            )
        avals.append(leaf_aval(leaf))
        paths.append(jax.tree_util.keystr(path))
    return ResultSpec(treedef, tuple(avals), tuple(paths))


def probe(
    name: str,
    fn: Callable[..., Any],
    split: Split,
    avals: Sequence[jax.ShapeDtypeStruct],
) -> ResultSpec:
    """Finds the result spec by calling `fn` once on zero-filled arrays."""
    zeros = [np.zeros(a.shape, a.dtype) for a in avals]
    for z in zeros:
        z.flags.writeable = False  # as in real calls: inputs belong to XLA
    args, kwargs = split.rebuild(zeros)
    try:
        # Out of the caller's trace: a host function that calls JAX must compute, not trace.
        # Zeros make log/divide warn; the values are unused.
        with jax.ensure_compile_time_eval(), np.errstate(all="ignore"):
            value = fn(*args, **kwargs)
    except Exception as e:
        shown = ", ".join(_errors.shape_str(a.shape, a.dtype) for a in avals)
        raise _errors.HostError(
            _errors.PROBE_FAILED.format(
                name=name, avals=f"({shown})", etype=type(e).__name__, emsg=e
            )
        ) from e
    return spec_from_value(name, value)


def check_result(
    rule: str,
    spec: ResultSpec,
    value: PyTree,
    outs: Sequence[np.ndarray] | None = None,
    lead: tuple[int, ...] = (),
    used: Sequence[bool] | None = None,
) -> list[Any]:
    """Checks a returned value against `spec`; copies it into `outs` (or new arrays).

    A dtype is converted only within its kind (float64 to float32, int64 to int32; signed and
    unsigned integers count as one kind), and only where no value changes: an integer must fit
    the declared dtype, and a finite float must stay finite (rounding is allowed). Anything
    else is an error naming `rule`, the pytree path, expected and got. `lead` is the batch
    shape a vectorised call adds in front of every leaf.

    `used` (one flag per leaf of `spec`): a leaf whose flag is False is neither checked nor
    copied (the program does not use it), and may be anything, `None` included; its entry of
    `outs` may be `None` and its entry of the returned list is `None`.
    """
    if used is not None and not all(used):
        try:  # `None` where an unused leaf would be is a leaf here, not an empty subtree
            leaves = spec.treedef.flatten_up_to(value)
        except (ValueError, TypeError):
            leaves = None
        if leaves is not None:
            return _check_leaves(rule, spec, leaves, outs, lead, used)
    leaves, treedef = jax.tree_util.tree_flatten(value)
    if (
        treedef != spec.treedef
        and not (leaves == [] and spec.avals == ())
        and not same_up_to_sequences(treedef, spec.treedef)
    ):
        raise _errors.HostResultError(
            f"{rule} returned the wrong pytree structure: expected {spec.treedef}, got {treedef}."
        )
    return _check_leaves(rule, spec, leaves, outs, lead, used)


def _check_leaves(
    rule: str,
    spec: ResultSpec,
    leaves: Sequence[Any],
    outs: Sequence[Any] | None,
    lead: tuple[int, ...],
    used: Sequence[bool] | None,
) -> list[Any]:
    result: list[Any] = []
    for i, (leaf, aval) in enumerate(zip(leaves, spec.avals, strict=True)):
        if used is not None and not used[i]:
            result.append(None)
            continue
        arr = np.asarray(leaf)
        shape = lead + aval.shape
        check = _cast_check(arr.dtype, aval.dtype) if arr.shape == shape else None
        if check is None:
            raise _errors.HostResultError(
                f"{rule} returned a wrong array at `{spec.paths[i]}`: expected "
                f"{_errors.shape_str(shape, aval.dtype)}, got "
                f"{_errors.shape_str(arr.shape, arr.dtype)}."
                + (
                    " Only conversions within a kind (float64 to float32, int64 to int32) are "
                    "made; convert explicitly or declare `result=`."
                    if arr.shape == shape
                    else ""
                )
            )
        if check == "same":
            if outs is None:
                result.append(arr)
            else:
                outs[i][...] = arr
                result.append(outs[i])
            continue
        dest = np.empty(shape, aval.dtype) if outs is None else outs[i]
        bad = _cast_into(check, arr, dest)
        if bad is not None:
            raise _errors.HostResultError(
                _errors.VALUE_CHANGING_CAST.format(
                    rule=rule,
                    where=f" at `{spec.paths[i]}`" if spec.paths[i] else "",
                    expected=_errors.shape_str(shape, aval.dtype),
                    got=_errors.shape_str(arr.shape, arr.dtype),
                    value=bad,
                    dtype=aval.dtype.name,
                )
            )
        result.append(dest)
    return result


def _is_sequence_node(node_type: Any) -> bool:
    # A tuple subclass is a tuple or a namedtuple (NumPy 2's `EighResult`, `SVDResult`, ...).
    return node_type is list or (isinstance(node_type, type) and issubclass(node_type, tuple))


def same_up_to_sequences(got: Any, expected: Any) -> bool:
    """Whether two pytree structures differ only in which sequence holds the same children.

    `jax.pure_callback` compares only the leaves, so a namedtuple or a list returned where a
    tuple of the same length is declared (and the other way round) is accepted; a different
    number of children, other dict keys or another kind of node is not. Decided once per pair.
    """
    try:
        return _same_up_to_sequences_cached(got, expected)
    except TypeError:  # a custom node with unhashable auxiliary data
        return _same_up_to_sequences(got, expected)


@functools.cache
def _same_up_to_sequences_cached(got: Any, expected: Any) -> bool:
    return _same_up_to_sequences(got, expected)


def _same_up_to_sequences(got: Any, expected: Any) -> bool:
    if got == expected:
        return True
    got_node, expected_node = got.node_data(), expected.node_data()
    if got_node is None or expected_node is None:
        return False  # a leaf against a node
    if got_node != expected_node and not (
        _is_sequence_node(got_node[0]) and _is_sequence_node(expected_node[0])
    ):
        return False
    got_children, expected_children = got.children(), expected.children()
    return len(got_children) == len(expected_children) and all(
        _same_up_to_sequences(g, e) for g, e in zip(got_children, expected_children)
    )


@functools.cache
def _cast_check(src: np.dtype, dst: np.dtype) -> str | None:
    """How a returned `src` array becomes a `dst` result, decided once per pair of dtypes.

    None: another kind (an error); "same"; "fits": every value of `src` fits `dst` (a
    widening); "int": integers that must survive exactly; "float": inexact values that may
    round but must not overflow to inf (float16 receiving 1e6).
    """
    if src == dst:
        return "same"
    kind = _kind(src)
    if kind != _kind(dst):
        return None
    wider = _dtypes.itemsize_bits(dst) - _dtypes.itemsize_bits(src)
    if kind == "i":
        signed_src = _dtypes.issubdtype(src, np.signedinteger)
        signed_dst = _dtypes.issubdtype(dst, np.signedinteger)
        fits = (wider > 0 or signed_src == signed_dst) and wider >= 0
        return "fits" if fits and (signed_dst or not signed_src) else "int"
    if kind in "fc":
        return "fits" if wider > 0 else "float"
    return "fits"


@functools.cache
def _float_max(dtype: np.dtype) -> float:
    real = np.finfo(dtype).dtype if np.dtype(dtype).kind == "c" else dtype
    return float(jax.numpy.finfo(real).max)  # knows bfloat16 and the float8 types


@functools.cache
def _int_range(dtype: np.dtype) -> tuple[int, int]:
    info = jax.numpy.iinfo(dtype)  # knows int4 and the other ml_dtypes integers
    return int(info.min), int(info.max)


def _cast_into(check: str, arr: np.ndarray, dest: np.ndarray) -> Any:
    """Copies `arr` into `dest`; returns the first value the conversion changed, or None.

    Costs one vectorised comparison, only when the dtype differs: returning the declared dtype
    pays nothing, and neither does a widening.
    """
    if check == "fits":
        dest[...] = arr
        return None
    if check == "int":
        dest[...] = arr
        lo, hi = _int_range(dest.dtype)
        # min/max, not a comparison of the copy: no temporary, and for the small arrays of a
        # per-step call Python's min/max over `tolist()` beats two NumPy reductions.
        if arr.size <= 64:
            values = arr.ravel().tolist()
            if not values or (lo <= min(values) and max(values) <= hi):
                return None
        elif lo <= arr.min() and arr.max() <= hi:
            return None
        wrong = (arr < lo) | (arr > hi)
    else:
        if arr.size <= 64:
            # Values within ±max of the target cannot overflow: check them in Python (cheaper
            # than np.errstate and a reduction for a per-step call). min/max skip a NaN that
            # is not first, and a NaN first fails the comparison: either way no finite value
            # beyond ±max passes.
            top = _float_max(dest.dtype)
            values = arr.ravel().tolist()
            if arr.dtype.kind == "c":
                values = [part for v in values for part in (v.real, v.imag)]
            if not values or (-top <= min(values) and max(values) <= top):
                dest[...] = arr
                return None
        with np.errstate(all="ignore"):  # float16 receiving 1e6 warns; we raise instead
            dest[...] = arr
        if np.isfinite(dest).all():
            return None
        wrong = np.isfinite(arr) & ~np.isfinite(dest)
        if not wrong.any():
            return None  # NaN or inf already, not made by the conversion
    return arr[np.unravel_index(int(np.argmax(wrong)), arr.shape)].item()


def _kind(dtype: np.dtype) -> str:
    """'b', 'i', 'f' or 'c', by JAX's types: ml_dtypes' bfloat16 or int4 are NumPy kind 'V'.

    Signed and unsigned integers are one kind: a Python int returned for a uint8 result is
    converted, and the value check catches -1.
    """
    if dtype.kind in "biufc":
        return "i" if dtype.kind == "u" else dtype.kind
    for kind, base in (("b", np.bool_), ("i", np.integer), ("f", np.floating)):
        if _dtypes.issubdtype(dtype, base):
            return kind
    return "c" if _dtypes.issubdtype(dtype, np.complexfloating) else dtype.kind
