"""`step(model, data)` and `forward(model, data)` on MJX's own types, computed by C MuJoCo.

The JAX side of `jaxbridge.mujoco.mjx`. A call resolves the `mjx.Model` to its `MjModel`
(`_model.resolve`), checks that the `mjx.Data` is one of that model's (its pytree
structure, shapes and dtypes are those `mjx.make_data` gives it), and makes ONE host call
(`jaxbridge.host` with `_host.Batching`, a vectorised strategy: a `vmap` of it, nested or
not, is one `mujoco.batch` call for the whole batch, and float64 state calls copy XLA's buffers
straight into the engine's rows) whose inputs are the Data's `mjSTATE_INTEGRATION` leaves and whose
outputs are the leaves a step makes (`_host.Calls`, on the engine's `FieldSteps`), with
`used_outputs`: only the leaves the program reads are computed and copied. The leaves no call
changes (controls, applied forces, mocap poses, `eq_active`, userdata, MJX's `efc_type`) are
the input's own arrays, and so are the entries MuJoCo leaves as they were (`_data.Layout`).
A traced model (an argument of `jit`, batched under `vmap`) adds its values as a last input;
the fields that differ from the registered model's run per row (`Resolved.varying`).

Derivatives are a `custom_jvp` whose Jacobians (a second host call, one output per leaf, also
with `used_outputs`) are the package's straddle-safe differences (`_differences.jacobian`, as
`DataCalls`'): a difference that makes or breaks a contact gives the derivative of the state's
own side. `grad`, `jvp`, `jacfwd` and `jacrev` work, under `jit`, `vmap` and `scan`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

import jaxbridge

from .. import _differences
from . import _data as L
from ._host import Batching, Calls
from ._model import Resolved, resolve

__all__ = ["forward", "step"]

WRONG_DATA = (
    "`jaxbridge.mujoco.mjx.{api}(model, data)`: `data` is not an mjx.Data of this model "
    "(nq={nq}, nv={nv}, nbody={nbody}): {what}. Make it from the same MjModel with "
    "`mjx.make_data(model)` or `mjx.put_data(mj_model, mj_data)`, and batch it with `jax.vmap` "
    "rather than leading dimensions."
)


MODEL_TANGENT = (
    "`jaxbridge.mujoco.mjx.step`/`forward`: derivatives with respect to the mjx.Model's fields "
    "are not supported (only the mjx.Data's float inputs are differenced); apply "
    "`jax.lax.stop_gradient` to the model, or differentiate a function of the Data alone."
)
#: The key of a traced model's per-row fields among a call's host inputs.
_MODEL = "_model"


class _Model:
    """One MjModel's layout, host calls and the JAX functions over them."""

    def __init__(self, mj_model: Any):
        from mujoco import mjx

        template = mjx.make_data(mj_model, impl="jax")
        self.template = template
        self.layout = layout = L.Layout(mj_model, template)
        self.calls = Calls(mj_model, layout, template)
        self.inputs = [layout.index[name] for name, _ in L.INPUTS]
        self._fns: dict[tuple, tuple[list[int], Any]] = {}

    def fn(self, kind: str, resolved: Resolved, nstep: int = 1) -> tuple[list[int], Any]:
        """The leaves and JAX function of one kind of call (made once); for a traced model,
        one that takes its values as a last input."""
        key: tuple = (kind, nstep)
        if resolved.traced:
            key += (resolved.traced, resolved.expected.tobytes())
        with _lock:
            hit = self._fns.get(key)
        if hit is None:
            hit = self._host(kind, resolved if resolved.traced else None, nstep)
            with _lock:
                if len(self._fns) > 64:
                    self._fns.clear()
                self._fns[key] = hit
        return hit

    def computed(self, kind: str) -> list[int]:
        """The leaves the host call makes: all but the kept ones (and the state, in forward),
        and the bound ones MuJoCo leaves wholly as they were."""
        untouched = self.layout.kept_entries[kind]
        out = []
        for i, leaf in enumerate(self.layout.leaves):
            if leaf.kind == L.KEPT or (kind == "forward" and leaf.kind == L.STATE):
                continue
            mask = untouched.get(leaf.name)
            if leaf.kind == L.BOUND and mask is not None and mask.all():
                continue
            if not math.prod(leaf.shape):  # empty: made in JAX, never crosses to the host
                continue
            out.append(i)
        return out

    def _host(
        self, kind: str, resolved: Resolved | None = None, nstep: int = 1
    ) -> tuple[list[int], Any]:
        """The leaves a call makes, and the JAX function of the input leaves that makes them:
        one host call (with `used_outputs`, so that it computes only the leaves the program
        reads), differentiated by `_differences.jacobian` (a second host call, which
        differences only the leaves whose tangents the program reads). With `resolved` (a
        traced model), the model's traced values are a last input, `(K,)`: the fields
        that differ from the model's are set per row (`Resolved.varying`)."""
        layout, calls = self.layout, self.calls
        live = self.computed(kind)
        names = [name for name, _ in L.INPUTS]
        leaves = layout.leaves
        shapes = [leaves[layout.index[n]].shape for n in names]
        floats = [k for k, i in enumerate(live) if leaves[i].dtype.kind == "f"]
        sizes = [math.prod(leaves[live[k]].shape) for k in floats]
        diff = [j for j, n in enumerate(names) if n in L.DIFFERENTIATED]
        nin = sum(math.prod(shapes[j]) for j in diff)
        # The inputs the host call takes: `Calls.inputs`, the non-empty ones (`time`, a
        # scalar, always is).
        present = [j for j, n in enumerate(names) if n in calls.inputs]
        if resolved is not None:
            present.append(len(names))  # the traced model's values

        def expand(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
            """Every input, from the host call's non-empty ones: empty arrays for the rest."""
            lead = tuple(np.shape(arrays[0]))
            full: list[Any] = [None] * (len(names) + (resolved is not None))
            for j, a in zip(present, arrays):
                full[j] = a
            for j, sh in enumerate(shapes):
                if full[j] is None:
                    full[j] = np.zeros((*lead, *sh))
            return full

        def flat_inputs(arrays: Sequence[np.ndarray]) -> tuple[tuple[int, ...], int, dict]:
            arrays = expand(arrays)
            lead = tuple(arrays[0].shape)  # `time` is a scalar leaf: its shape is the batch
            B = math.prod(lead)
            inputs: dict[str, Any] = {
                n: np.asarray(a, dtype=np.float64).reshape(B, *s)
                for n, a, s in zip(names, arrays, shapes)
            }
            if resolved is not None:
                values = np.asarray(arrays[len(names)], dtype=np.float64).reshape(B, -1)
                inputs[_MODEL] = resolved.varying(values)
            return lead, B, inputs

        def run(inputs: dict, used: list[int], B: int, exact: bool = True) -> list[np.ndarray]:
            fields, values = inputs.get(_MODEL, ((), None))
            return calls.run(kind, inputs, used, B, exact, fields, values, nstep)

        def result(*args: Any) -> list[jax.ShapeDtypeStruct]:
            lead = args[0].shape
            return [
                jax.ShapeDtypeStruct((*lead, *leaves[i].shape), _dtype(leaves[i].dtype))
                for i in live
            ]

        def mjx_host(*arrays: np.ndarray, used_outputs: Any = None) -> list[Any]:
            lead, B, inputs = flat_inputs(arrays)
            flags = [True] * len(live) if used_outputs is None else list(used_outputs)
            used = [i for i, u in zip(live, flags) if u]
            got = dict(zip(used, run(inputs, used, B)))
            return [
                got[i].reshape((*lead, *leaves[i].shape)).astype(leaves[i].dtype, copy=False)
                if u
                else None
                for i, u in zip(live, flags)
            ]

        def jac_result(*args: Any) -> list[jax.ShapeDtypeStruct]:
            lead = args[0].shape
            return [jax.ShapeDtypeStruct((*lead, n, nin), args[0].dtype) for n in sizes]

        def mjx_jacobian(*arrays: np.ndarray, used_outputs: Any = None) -> list[Any]:
            lead, B, inputs = flat_inputs(arrays)
            flags = [True] * len(floats) if used_outputs is None else list(used_outputs)
            want = [live[k] for k, u in zip(floats, flags) if u]
            x = np.concatenate([inputs[names[j]].reshape(B, -1) for j in diff], axis=1)
            bounds = np.cumsum([0, *(math.prod(shapes[j]) for j in diff)])

            def evaluate(points: np.ndarray, rows: np.ndarray) -> np.ndarray:
                ins: dict[str, Any] = {n: inputs[n][rows] for n in names}  # copies
                for j, lo, hi in zip(diff, bounds[:-1], bounds[1:]):
                    ins[names[j]] = points[:, lo:hi].reshape(len(rows), *shapes[j])
                if _MODEL in inputs:
                    fields, values = inputs[_MODEL]
                    ins[_MODEL] = (fields, [v[rows] for v in values])
                outs = run(ins, want, len(rows), exact=False)
                pieces = [o.reshape(len(rows), -1) for o in outs]
                return np.concatenate(pieces, axis=1) if pieces else np.empty((len(rows), 0))

            J = _differences.jacobian(evaluate, x) if want else np.zeros((B, 0, nin))
            out: list[Any] = []
            start = 0
            for n, u in zip(sizes, flags):
                if u:
                    out.append(J[:, start : start + n].reshape((*lead, n, nin)))
                    start += n
                else:
                    out.append(None)
            return out

        mjx_host.__name__ = mjx_host.__qualname__ = f"mjx_{kind}"
        # which leaves its outputs are: read where a program's used outputs are found
        mjx_host._jaxbridge_mjx = (layout, tuple(live))  # type: ignore[attr-defined]
        mjx_jacobian.__name__ = mjx_jacobian.__qualname__ = f"mjx_{kind}_jacobian"
        # XLA's buffers into the rows
        batching = Batching(calls, kind, live, nstep, resolved)
        batching.fn = mjx_host
        host = jaxbridge.host(mjx_host, vmap=batching, result=result, used_outputs=True)
        jac = jaxbridge.host(mjx_jacobian, vmap="vectorized", result=jac_result, used_outputs=True)

        def given(arrays: Sequence[Any]) -> list[Any]:
            return [arrays[j] for j in present]

        @jax.custom_jvp
        def call(*arrays: jax.Array) -> tuple[jax.Array, ...]:
            return tuple(host(*given(arrays)))

        def call_jvp(primals: tuple, tangents: tuple) -> tuple[tuple, tuple]:
            if resolved is not None and not isinstance(tangents[-1], SymbolicZero):
                raise TypeError(MODEL_TANGENT)
            out = tuple(host(*given(primals)))
            Js = jax.lax.stop_gradient(jac(*given(primals)))
            dtype = primals[1].dtype
            dx = jnp.concatenate(
                [
                    jnp.zeros(math.prod(tangents[j].shape), dtype)
                    if isinstance(tangents[j], SymbolicZero)
                    else jnp.ravel(tangents[j]).astype(dtype)
                    for j in diff
                ]
            )
            douts: list[Any] = [np.zeros(o.shape, jax.dtypes.float0) for o in out]
            for k, J in zip(floats, Js):
                douts[k] = (J @ dx).reshape(out[k].shape).astype(out[k].dtype)
            return out, tuple(douts)

        call.defjvp(call_jvp, symbolic_zeros=True)
        return live, call


def _dtype(dtype: np.dtype) -> Any:
    return jax.dtypes.canonicalize_dtype(dtype)


_lock = threading.Lock()


def _model_for(resolved: Resolved) -> _Model:
    """The step's `_Model` of the resolved C model, kept in its registry entry (it goes when
    the model's last registered mjx.Model does: `_model.Resolved.cache`)."""
    key = ("step", bool(jax.config.read("jax_enable_x64")))
    made = resolved.cache.get(key)
    if made is None:
        made = resolved.cache.setdefault(key, _Model(resolved.mj_model))
    return made


def _check_data(api: str, m: _Model, data: Any) -> list[Any]:
    from mujoco import mjx

    mj = m.layout.mj_model
    fmt = dict(api=api, nq=mj.nq, nv=mj.nv, nbody=mj.nbody)
    if not isinstance(data, mjx.Data):
        raise TypeError(WRONG_DATA.format(what=f"got {type(data).__name__}", **fmt))
    impl = getattr(getattr(data, "impl", None), "value", None)
    if impl is not None and impl != "jax":
        raise ValueError(WRONG_DATA.format(what=f"an mjx.Data of impl {impl!r}", **fmt))
    # a compact Data's placeholders (`_data.Missing`) stand where their fields would
    flat, treedef = jax.tree_util.tree_flatten(data, is_leaf=L.is_missing)
    leaves = m.layout.leaves
    if len(flat) != len(leaves):
        raise ValueError(WRONG_DATA.format(what=f"{len(flat)} leaves, not {len(leaves)}", **fmt))
    for leaf, x in zip(leaves, flat):
        if L.is_missing(x):
            continue
        shape = tuple(np.shape(x))
        if shape != leaf.shape:
            what = f"`{leaf.path}` has shape {shape}, expected {leaf.shape}"
            raise ValueError(WRONG_DATA.format(what=what, **fmt))
    if treedef != m.layout.treedef:
        what = "its contact slots or constraint rows differ from the model's"
        raise ValueError(WRONG_DATA.format(what=what, **fmt))
    return flat


def _call(kind: str, model: Any, data: Any, nstep: int = 1) -> Any:
    if not isinstance(nstep, int | np.integer) or isinstance(nstep, bool) or nstep < 1:
        raise ValueError(
            f"`jaxbridge.mujoco.mjx.step(..., nstep=...)` must be an int >= 1; got {nstep!r}."
        )
    resolved = resolve(model, kind)
    m = _model_for(resolved)
    flat = _check_data(kind, m, data)
    live, fn = m.fn(kind, resolved, int(nstep))
    layout = m.layout
    for i in m.inputs:
        if L.is_missing(flat[i]):  # the state a call reads: never left out of a Data
            raise flat[i].error()
    inputs = [
        flat[i] if layout.leaves[i].dtype.kind == "f" else flat[i].astype(_float())
        for i in m.inputs
    ]
    if resolved.traced:  # the model's traced values: the host sets those that differ
        values = jax.tree_util.tree_leaves(model)
        inputs.append(
            jnp.concatenate([jnp.ravel(values[i]).astype(_float()) for i in resolved.traced])
        )
    outs = fn(*inputs)
    new = list(flat)
    forward = kind == "forward"
    for i, leaf in enumerate(layout.leaves):  # the empty leaves a call makes: made here
        made = leaf.kind != L.KEPT and not (forward and leaf.kind == L.STATE)
        if made and not math.prod(leaf.shape):
            dtype = _dtype(leaf.dtype) if L.is_missing(flat[i]) else flat[i].dtype
            new[i] = jnp.zeros(leaf.shape, dtype)
    untouched = layout.kept_entries[kind]
    for i, o in zip(live, outs):
        leaf = layout.leaves[i]
        mask = untouched.get(leaf.name) if leaf.kind == L.BOUND else None
        if mask is not None:
            if L.is_missing(flat[i]):  # entries MuJoCo leaves as they were, not carried
                continue
            o = jnp.where(jnp.asarray(mask.reshape(leaf.shape)), flat[i], o)
        # the input's dtype: `mjx.put_data` gives int32 contact geoms, `make_data` int64
        dtype = _dtype(leaf.dtype) if L.is_missing(flat[i]) else flat[i].dtype
        new[i] = o if o.dtype == dtype else o.astype(dtype)
    return jax.tree_util.tree_unflatten(layout.treedef, new)


def _x64() -> bool:
    return bool(jax.config.read("jax_enable_x64"))


def _float() -> Any:
    return jnp.float64 if _x64() else jnp.float32


def step(model: Any, data: Any, *, nstep: int = 1) -> Any:
    """`mujoco.mj_step` on an `mjx.Data`, by C MuJoCo: MJX's `mjx.step(model, data)`.

    Args:
        model: an `mjx.Model` of impl "jax" whose `MjModel` is registered (made by
            `jaxbridge.mujoco.mjx.put_model`, or `register`ed).
        data: an `mjx.Data` of that model (`mjx.make_data`, `mjx.put_data`, or a previous
            step's), unbatched: batch it with `jax.vmap`.
        nstep: `mj_step` calls in the one host call (jaxbridge's, not MJX's: an environment's
            substeps, whose controls are held, as `nstep` MJX steps of the same `ctrl`, at
            one call's cost).

    Returns:
        The `mjx.Data` after `nstep` physics steps (the derived fields describe the last
        one's evaluation, as after `mj_step`): every field as `mjx.put_data` would give it after
        `mj_step` on `mjx.get_data(data)` (float64 with x64 on, else rounded to float32).

    Under `jit`, `scan` and `vmap` (one `mujoco.batch` call for the whole batch, nested or
    not; model fields that vary under `vmap` run each element on its own values), and under
    `grad`, `jvp`, `jacfwd`, `jacrev` by the package's straddle-safe differences in the float
    inputs (qpos, qvel, act, warm start, ctrl, applied forces, mocap poses; time, history,
    plugin state and userdata are held constant). Only the leaves the program reads are
    computed (and differenced).

    Raises:
        TypeError, ValueError: a model that is not a registered impl "jax" mjx.Model, a
            `data` of another model, a varying model field that `mujoco.batch` cannot vary
            per simulation (named), or a derivative with respect to the model's fields.

    Example:
        >>> import jax, mujoco
        >>> from jaxbridge.mujoco import mjx
        >>> from mujoco import mjx as mjx_
        >>> m = mujoco.MjModel.from_xml_string(
        ...     "<mujoco><worldbody><body><joint/><geom size='.1'/></body></worldbody></mujoco>")
        >>> mx = mjx.put_model(m)
        >>> d = jax.jit(mjx.step)(mx, mjx_.make_data(mx))
        >>> abs(float(d.time) - m.opt.timestep) < 1e-7
        True
    """
    return _call("step", model, data, nstep)


def forward(model: Any, data: Any) -> Any:
    """`mujoco.mj_forward` on an `mjx.Data`, by C MuJoCo: MJX's `mjx.forward(model, data)`.

    Args and the contract under transformations as `step`; the state (time, qpos, qvel, act,
    warm start) is returned as given.
    """
    return _call("forward", model, data)
