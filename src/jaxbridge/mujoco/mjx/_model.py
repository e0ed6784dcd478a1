"""The host `MjModel` behind an `mjx.Model`: registered, matched by content, never guessed.

An `mjx.Model` (MJX's `impl="jax"`) holds most of an `MjModel`'s fields, but not the model
itself: C MuJoCo cannot be run from it. jaxbridge keeps a registry of the `MjModel`s it was told
about (`put_model`, `register`, and `jaxbridge.playground.load`), keyed by the mjx.Model's
static contents (its pytree structure: every size, every integer array such as `body_parentid`
and `geom_type`, hashed by MJX itself), and matches an mjx.Model's float fields (its pytree
leaves) against them:

- concrete leaves (a model closed over, as Playground's environments do) equal to a registered
  model's fields: that model;
- concrete leaves that differ (`mx.replace(body_mass=...)`): a copy of the registered model with
  every leaf written into it, made once per distinct content and kept;
- traced leaves (the model an argument of `jit`, or batched under `vmap`: Playground's domain
  randomisation): their values go to the host with the call, which compares them with the
  registered model's (`Resolved.varying`); the fields that differ in any simulation become
  per-simulation fields of the batch (`_fields.FieldSteps(model_fields=...)`), each row run
  on the model with its own values written in (as `mjx.put_model` of an `MjModel` with those
  values would give, without `mj_setConst`). A field `mujoco.batch` cannot vary per
  simulation (`stat.*`, MJX's own) raises, naming it.

An mjx.Model whose structure no registered model has is refused with the fix; so are Warp and
C (`impl="cpp"`) models.

What jaxbridge keeps for a registered model (its entry, the copies with other values, and
through `Resolved.cache` the step's plans, batches and layouts) lives as long as an mjx.Model
object registered for it does (`put_model`'s result, or the one given to `register`): when the
last of those is collected, the entry goes, and with it the MjModel, unless the user holds it.
A sweep over morphologies that makes and drops models therefore keeps nothing of them (a test
bounds it). An mjx.Model derived from a registered one (`mx.replace(...)`, `jax.device_put`,
a vmapped randomisation) is served while its registered original is alive.
"""

from __future__ import annotations

import copy
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
from jax import core as jax_core

from .._fields import varies_per_row
from .._model import mj

__all__ = ["Resolved", "put_model", "register", "resolve"]

mujoco: Any = mj

NOT_JAX_IMPL = (
    "`jaxbridge.mujoco.mjx`: got an mjx.Model of impl {impl!r}; jaxbridge runs MJX's JAX "
    "models (impl='jax') on C MuJoCo. Make it with `jaxbridge.mujoco.mjx.put_model(mj_model)` "
    "(or `mjx.put_model(mj_model, impl='jax')` and `jaxbridge.mujoco.mjx.register(mj_model)`)."
)
NOT_A_MODEL = (
    "`jaxbridge.mujoco.mjx.{api}(model, data)`: `model` must be an `mjx.Model`; got {got}."
)
UNREGISTERED = (
    "`jaxbridge.mujoco.mjx`: this mjx.Model (nq={nq}, nv={nv}, nu={nu}, nbody={nbody}) "
    "matches no registered MjModel, so there is no C model to run it on. Make it with "
    "`jaxbridge.mujoco.mjx.put_model(mj_model)` (the arguments of `mjx.put_model`), or register "
    "the MjModel it came from with `jaxbridge.mujoco.mjx.register(mj_model)`."
)
AMBIGUOUS = (
    "`jaxbridge.mujoco.mjx`: several registered MjModels give this same mjx.Model but differ "
    "in fields MJX does not hold, so it cannot tell which C model to run. Register one "
    "MjModel per mjx.Model (a fresh process, or models that differ in what MJX holds)."
)
FIELD_DIFFERS = (
    "`jaxbridge.mujoco.mjx`: the traced model's field `{field}` differs from the registered "
    "MjModel's{where}, and C MuJoCo's batch cannot give it per-simulation values (it is not "
    "in `mujoco.batch.MODEL_FIELDS`). Close over the model (or write the new values into an "
    "MjModel and `register` it), so that each value has its own C model."
)


def _path_name(path: tuple[Any, ...]) -> str:
    return ".".join(str(getattr(k, "name", getattr(k, "key", k))) for k in path)


def _mj_attr(mj_model: Any, name: str) -> tuple[Any, str] | None:
    """The object and attribute of `mj_model` a leaf path `name` (`body_mass`, `opt.timestep`,
    `opt._impl.o_margin`, `stat.extent`) stands for, or None for MJX's own (`_sizes`)."""
    parts = name.split(".")
    if parts[0] == "_sizes":
        return None
    if parts[0] in ("opt", "stat"):
        return getattr(mj_model, parts[0]), parts[-1]
    return mj_model, parts[0]


def _write(mj_model: Any, names: list[str], values: list[np.ndarray]) -> None:
    """Writes mjx.Model leaves into `mj_model`'s fields, in MuJoCo's shapes."""
    for name, value in zip(names, values):
        where = _mj_attr(mj_model, name)
        if where is None:
            continue
        obj, attr = where
        current = getattr(obj, attr)
        if isinstance(current, np.ndarray):
            current[...] = np.asarray(value, dtype=current.dtype).reshape(current.shape)
        else:
            setattr(obj, attr, type(current)(np.asarray(value).reshape(())))


def _saved(mj_model: Any) -> bytes:
    """The model as MuJoCo saves it: equal bytes, equal C models."""
    buf = np.empty(int(mujoco.mj_sizeModel(mj_model)), dtype=np.uint8)
    mujoco.mj_saveModel(mj_model, None, buf)
    return buf.tobytes()


@dataclass
class _Entry:
    """A registered MjModel and the leaves `mjx.put_model(impl='jax')` gives it; `others`:
    MjModels registered later that give the same mjx.Model but differ from it in C."""

    mj_model: Any
    leaves: list[np.ndarray]
    saved: bytes
    variants: dict[bytes, Any] = field(default_factory=dict)
    others: int = 0
    #: The registered mjx.Model objects still alive (the entry goes when none is).
    holders: int = 0
    #: What the step keeps for each C model of the entry (its own and each variant): by id,
    #: beside the model itself, so that a reused id never finds another model's.
    caches: dict[int, tuple[Any, dict[Any, Any]]] = field(default_factory=dict)

    def cache_of(self, mj_model: Any) -> dict[Any, Any]:
        hit = self.caches.get(id(mj_model))
        if hit is None or hit[0] is not mj_model:
            hit = self.caches[id(mj_model)] = (mj_model, {})
        return hit[1]

    def same(self, leaves: list[np.ndarray]) -> bool:
        """Whether `leaves` are this model's, in their own dtype (float32 with x64 off)."""
        return all(
            a.shape == b.shape and np.array_equal(a.astype(b.dtype), b)
            for a, b in zip(self.leaves, leaves)
        )


@dataclass(frozen=True, eq=False)  # hashed by identity: a static argument
class Resolved:
    """An mjx.Model resolved to its MjModel; `traced` are the leaf indices whose values go to
    the host (`expected`: the model's, flattened; see `varying`), `names` every leaf's path."""

    mj_model: Any
    traced: tuple[int, ...]
    names: tuple[str, ...]
    expected: np.ndarray
    sizes: tuple[int, ...]
    #: What the step keeps for `mj_model` (its plans and layout), dropped with the entry.
    cache: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    # The last call's values and answer: a randomised model's values stay the same from one
    # step to the next.
    _last: list[Any] = field(default_factory=list, compare=False, repr=False)

    def varying(self, flat: np.ndarray) -> tuple[tuple[str, ...], list[np.ndarray]]:
        """The model fields whose `(B, K)` traced leaf values differ from the model's in some
        row (`mujoco.batch`'s names: `body_mass`, `opt.timestep`), and each one's `(B,
        *shape)` float64 values in the MjModel field's shape: a row that holds the model's
        own value (in the leaf's dtype) gets the MjModel's, unrounded. Raises, naming the
        field, for one that cannot vary per simulation."""
        hit = self._last[0] if self._last else None  # one (values, answer) pair, read once
        if hit is not None and hit[0].shape == flat.shape and np.array_equal(hit[0], flat):
            return hit[1]
        answer = self._varying(flat)
        self._last[:] = [(flat.copy(), answer)]
        return answer

    def _varying(self, flat: np.ndarray) -> tuple[tuple[str, ...], list[np.ndarray]]:
        if flat.shape[-1] == 0 or np.array_equal(flat, np.broadcast_to(self.expected, flat.shape)):
            return (), []
        rows = flat.reshape(-1, flat.shape[-1])
        fields: list[str] = []
        values: list[np.ndarray] = []
        start = 0
        for i, n in zip(self.traced, self.sizes):
            got, want = rows[:, start : start + n], self.expected[start : start + n]
            start += n
            same = (got == want).all(axis=1)
            if same.all():
                continue
            name = self.names[i]
            where = _mj_attr(self.mj_model, name)
            field = _batch_field(name)
            current = None if where is None else getattr(*where)
            if field is None or current is None or np.size(current) != n:
                where_text = ""
                if rows.shape[0] > 1:
                    where_text = f" in batch element {int(np.flatnonzero(~same)[0])}"
                raise ValueError(FIELD_DIFFERS.format(field=name, where=where_text))
            shape = np.shape(current)
            own = np.asarray(current, dtype=np.float64).reshape(1, *shape)
            given = got.reshape(-1, *shape)
            fields.append(field)
            values.append(np.where(same.reshape(-1, *([1] * len(shape))), own, given))
        return tuple(fields), values


def _batch_field(name: str) -> str | None:
    """`mujoco.batch`'s name of the MjModel field a leaf path stands for, or None where it
    cannot vary per simulation."""
    parts = name.split(".")
    field = f"opt.{parts[-1]}" if parts[0] == "opt" else name
    return field if varies_per_row(field) else None


_lock = threading.Lock()
_registry: dict[Any, list[_Entry]] = {}
#: Entries whose last registered mjx.Model was collected, to be removed under `_lock`: a
#: finalizer may run inside `register` or `resolve` (any allocation can start a collection),
#: where this thread holds the lock already.
_released: list[tuple[Any, _Entry]] = []


def _release(treedef: Any, entry: _Entry) -> None:
    """A registered mjx.Model of `entry` was collected (a `weakref.finalize` callback)."""
    _released.append((treedef, entry))
    if _lock.acquire(blocking=False):  # else this thread holds it: the holder sweeps
        try:
            _sweep()
        finally:
            _lock.release()


def _sweep() -> None:
    """Count the released holders off their entries and drop the entries none holds (under
    `_lock`)."""
    while _released:
        treedef, entry = _released.pop()
        entry.holders -= 1
        if entry.holders > 0:
            continue
        entries = _registry.get(treedef, [])
        if entry in entries:
            entries.remove(entry)
        if not entries:
            _registry.pop(treedef, None)
        entry.variants.clear()
        entry.caches.clear()


def _hold(treedef: Any, entry: _Entry, mjx_model: Any) -> None:
    """Keep `entry` while `mjx_model` is alive (under `_lock`)."""
    entry.holders += 1
    weakref.finalize(mjx_model, _release, treedef, entry)


def registered() -> int:
    """How many MjModels are registered now (the tests' view of what is kept)."""
    with _lock:
        _sweep()
        return sum(len(entries) for entries in _registry.values())


def _key_and_leaves(mx: Any) -> tuple[Any, list[tuple[Any, Any]]]:
    flat, treedef = jax.tree_util.tree_flatten_with_path(mx)
    return treedef, flat


def register(mj_model: Any, mjx_model: Any = None) -> Any:
    """Registers `mj_model` as the C model of the mjx.Models made from it.

    Args:
        mj_model: a `mujoco.MjModel`. It is used as it is when stepped (an edit made later is
            seen, except by a randomised model's batches, which copy it when they are made),
            so it should stay as it was when the mjx.Model was made.
        mjx_model: the mjx.Model made from it (`mjx.put_model(mj_model, impl="jax")`), or None
            to make one.

    Returns:
        The mjx.Model.
    """
    from mujoco import mjx

    if mjx_model is None:
        mjx_model = mjx.put_model(mj_model, impl="jax")
    _check_impl(mjx_model)
    treedef, flat = _key_and_leaves(mjx_model)
    leaves = [np.asarray(leaf) for _, leaf in flat]
    saved = _saved(mj_model)
    with _lock:
        _sweep()
        entries = _registry.setdefault(treedef, [])
        for e in entries:
            if e.mj_model is mj_model or (e.saved == saved):
                _hold(treedef, e, mjx_model)  # this model, or one equal to it in every byte
                return mjx_model
            if e.same(leaves):
                e.others += 1  # the mjx.Model cannot tell these two apart: see `resolve`
                _hold(treedef, e, mjx_model)
                return mjx_model
        entry = _Entry(mj_model, leaves, saved)
        entries.append(entry)
        _hold(treedef, entry, mjx_model)
    return mjx_model


def put_model(mj_model: Any, device: Any = None, **kwargs: Any) -> Any:
    """`mjx.put_model(mj_model, impl="jax")`, registered so that `jaxbridge.mujoco.mjx.step`
    runs it on `mj_model` in C MuJoCo. Takes `mjx.put_model`'s other arguments.

    Example:
        >>> import mujoco
        >>> from jaxbridge.mujoco import mjx
        >>> m = mujoco.MjModel.from_xml_string(
        ...     "<mujoco><worldbody><body><joint/><geom size='.1'/></body></worldbody></mujoco>")
        >>> mx = mjx.put_model(m)
        >>> mx.impl.value
        'jax'
    """
    from mujoco import mjx

    impl = kwargs.pop("impl", "jax")
    if str(getattr(impl, "value", impl)).lower() != "jax":
        raise ValueError(NOT_JAX_IMPL.format(impl=str(getattr(impl, "value", impl))))
    return register(mj_model, mjx.put_model(mj_model, device=device, impl="jax", **kwargs))


def _check_impl(mx: Any) -> None:
    impl = getattr(mx, "impl", None)
    value = str(getattr(impl, "value", impl))
    if value != "jax":
        raise ValueError(NOT_JAX_IMPL.format(impl=value))


def resolve(mx: Any, api: str = "step") -> Resolved:
    """The MjModel that runs `mx`, and which leaves the host must check (see the module)."""
    from mujoco import mjx

    if not isinstance(mx, mjx.Model):
        raise TypeError(NOT_A_MODEL.format(api=api, got=type(mx).__name__))
    _check_impl(mx)
    treedef, flat = _key_and_leaves(mx)
    with _lock:
        _sweep()
        entries = list(_registry.get(treedef, ()))
    if not entries:
        raise ValueError(UNREGISTERED.format(nq=mx.nq, nv=mx.nv, nu=mx.nu, nbody=mx.nbody))
    names = tuple(_path_name(p) for p, _ in flat)
    values = [leaf for _, leaf in flat]
    traced = tuple(i for i, v in enumerate(values) if isinstance(v, jax_core.Tracer))
    if traced:
        # Which registered model: the first one (models of one structure registered twice
        # with different parameters are told apart on the host, where the values are known).
        entry = entries[0]
        if len(entries) > 1 or entry.others:
            raise ValueError(
                "`jaxbridge.mujoco.mjx`: this mjx.Model is traced (an argument of `jit` or "
                "`vmap`), and several registered MjModels share its structure, so its values "
                "(unknown until it runs) cannot tell which to run. Close over the model "
                "instead of passing it as an argument."
            )
        expected = np.concatenate(
            [np.ravel(entry.leaves[i]).astype(values[i].dtype).astype(np.float64) for i in traced]
        )
        sizes = tuple(int(np.size(entry.leaves[i])) for i in traced)
        with _lock:
            cache = entry.cache_of(entry.mj_model)
        return Resolved(entry.mj_model, traced, names, expected, sizes, cache)
    concrete = [np.asarray(v) for v in values]
    for e in entries:
        if e.same(concrete):
            if e.others:
                raise ValueError(AMBIGUOUS)
            with _lock:
                cache = e.cache_of(e.mj_model)
            return Resolved(e.mj_model, (), names, np.zeros(0), (), cache)
    # The same structure with other parameters: a copy of the model with them written in.
    entry = entries[0]
    key = b"".join(np.ascontiguousarray(v).tobytes() for v in concrete)
    with _lock:
        variant = entry.variants.get(key)
        if variant is None:
            variant = copy.copy(entry.mj_model)
            _write(variant, list(names), concrete)
            if len(entry.variants) >= 64:
                for old in entry.variants.values():
                    entry.caches.pop(id(old), None)
                entry.variants.clear()
            entry.variants[key] = variant
        cache = entry.cache_of(variant)
    return Resolved(variant, (), names, np.zeros(0), (), cache)
