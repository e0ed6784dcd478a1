"""Field calls as JAX functions: `DataCalls.step` and `forward`, named `MjData` fields in and out.

`DataCalls(model).step({"qpos": q, "qvel": v, "ctrl": u}, outputs=("qpos", "qvel", "xpos"))`
is one host call into `_fields.FieldSteps`: `nstep` calls of `mj_step` on C MuJoCo, and the
named fields they leave. Under `jax.vmap` (any nesting, any `in_axes`) a batch is ONE call,
whose rows MuJoCo steps on `mujoco.batch`'s threads; for float64 arrays under at most one
`vmap` MuJoCo's rows are filled from XLA's input buffers and copied straight into its output
buffers (`_FieldBatching`, the hot path of `jit(scan(vmap(env.step)))`).

Both are `jax.custom_jvp` functions whose tangents are Jacobians by `_differences.jacobian` of
the same host call (one batched call for every perturbed point, none reaching over a contact
change), in every float input entry but `time`, `eq_active` and the time, history, plugin and
plastic entries of `"physics"`: differences of exactly what MuJoCo computes, in the inputs'
own coordinates (a quaternion's four numbers, not three).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxbridge
from jaxbridge._base import AbstractBatching, InPlace, NativeCall
from jaxbridge._batching import VECTORIZED, flatten_batch

from . import _differences, _native
from ._fields import _CONSTANT_INPUTS, PHYSICS, FieldSteps, _columns
from ._model import MjModel, load_model, mj

if TYPE_CHECKING:
    from jaxbridge._base import AbstractCall as HostCall

__all__ = ["DataCalls", "FieldCalls"]


def _differentiated(steps: FieldSteps, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The flat entries of input `name` a JVP differentiates in (indices)."""
    size = math.prod(shape)
    if name in _CONSTANT_INPUTS:
        return np.arange(0)
    if name == PHYSICS:  # qpos, qvel and act; time, history, plugin and plastic are constants
        S = mj.mjtState
        moving = _columns(steps.model, int(S.mjSTATE_QPOS | S.mjSTATE_QVEL | S.mjSTATE_ACT))
        return moving[moving < size]
    return np.arange(size)


class _FieldBatching(AbstractBatching):
    """A batch of one `FieldCalls`' calls as one `FieldSteps` call, into XLA's buffers.

    An output the program does not use (the primitive's dead-code rule) comes as None in
    `run`'s `outs` and has no buffer in `buffer_call`'s: MuJoCo still computes it, but it is
    not copied out.
    """

    name = "vectorized"
    handles_unused_outputs = True

    def __init__(self, calls: FieldCalls):
        self.calls = calls

    def run(
        self,
        call: HostCall,
        batch: tuple[int, ...],
        ins: Sequence[np.ndarray],
        outs: Sequence[np.ndarray],
    ) -> None:
        if call.fn is not self.calls._host_fn:
            VECTORIZED.run(call, batch, ins, outs)
            return
        B = math.prod(batch)
        steps = self.calls.steps
        flat = [
            flatten_batch(x, len(s), batch).reshape(B, *s) for x, s in zip(ins, steps.in_shapes)
        ]
        values = self.calls._run(flat)
        for o, v in zip(outs, values):
            if o is not None:
                o.reshape(v.shape)[...] = v

    def buffer_call(
        self, call: HostCall, in_shapes: Sequence[tuple], out_shapes: Sequence[tuple]
    ) -> InPlace | NativeCall | None:
        """The fast path: float64 (or float32) inputs under at most one `vmap` of all of them
        (or none), a step (not a forward pass) with outputs of that dtype: MuJoCo's rows
        filled from XLA's input buffers in one `np.concatenate` where the inputs lead a row,
        its outputs copied into XLA's output buffers (a state field into its input's), no
        other NumPy call (in float32, one conversion of each array each way)."""
        calls = self.calls
        if call.fn is not calls._host_fn or calls.forward:
            return None
        # float64, or float32 (x64 off) whose rows MuJoCo computes in float64: each input
        # widened exactly and each result rounded once (in C, or as the Python twin does)
        dtypes = {np.dtype(a.dtype) for a in (*call.in_avals, *call.spec.avals)}
        f32 = dtypes == {np.dtype(np.float32)}
        if dtypes != {np.dtype(np.float64)} and not f32:
            return None
        steps = calls.steps
        extra = {len(s) - len(c) for s, c in zip(in_shapes, steps.in_shapes)}
        if extra == {1}:
            B = in_shapes[0][0] if in_shapes else 0
            if B < 1 or any(s[0] != B for s in in_shapes):
                return None
            one = False
        elif extra == {0}:
            B, one = 1, True
        else:
            return None
        fail = call.fail
        shapes_in = [(1, *s) for s in steps.in_shapes]
        used = tuple(call.used_outputs)
        shapes_out = [(1, *s) for s, u in zip(steps.out_shapes, used) if u]
        slots = [i for i, u in enumerate(used) if u]  # each buffer's output
        partial = not all(used)
        nout = len(used)

        def own(ctx: Any, outs: Any, *ins: Any) -> None:
            del ctx
            try:
                arrays = [a.__array__() for a in ins]
                targets: list[Any] = [o.__array__() for o in outs]
                if one:
                    arrays = [a.reshape(s) for a, s in zip(arrays, shapes_in)]
                    targets = [t.reshape(s) for t, s in zip(targets, shapes_out)]
                views = targets
                if f32:  # MuJoCo's float64 rows: widened inputs, results rounded once below
                    arrays = [np.asarray(a, np.float64) for a in arrays]
                    targets = wide = [np.empty(t.shape, np.float64) for t in views]
                if partial:  # one entry per output, None where the program reads none
                    full: list[Any] = [None] * nout
                    for i, t in zip(slots, targets):
                        full[i] = t
                    targets = full
                # the batch made on the first call (a dict lookup after it), not when lowered:
                # where the compiled call serves, this Python twin never runs
                steps.rows(B).run(arrays, targets)
                if f32:
                    for view, t in zip(views, wide):
                        np.copyto(view, t, casting="same_kind")
            except Exception as e:
                raise fail(e) from e

        # A state field that is an input and an output (the physics state, the warm start)
        # goes back into its input's buffer: `FieldRows.run` reads every input into MuJoCo's
        # rows before it writes an output, and a `scan` of steps then copies no state.
        outputs = [steps.outputs[i] for i in slots]
        python = InPlace.by_name(own, steps.inputs, in_shapes, outputs, out_shapes)
        native = steps.native(B, False, call.name)  # `own` in C, where it can be built
        if native is None:
            return python
        return NativeCall(_native.TARGET, native.attributes(slots), python)


class FieldCalls:
    """One signature of field calls as a differentiable JAX function of positional arrays.

    `calls(*arrays)` takes one array per input field (shape `(*shape,)` per element, one float
    dtype for all) and returns a tuple of the output fields (floats in the inputs' dtype,
    integers as int32). `calls.where(mask, *arrays)` (forward only) computes the rows where
    `mask` is set and zeros elsewhere, without a derivative.
    """

    def __init__(self, steps: FieldSteps, forward: bool = False):
        self.steps, self.forward = steps, forward
        self.floats = [i for i, d in enumerate(steps.out_dtypes) if np.issubdtype(d, np.floating)]
        self.sizes = [math.prod(steps.out_shapes[i]) for i in self.floats]
        self.diff = [_differentiated(steps, n, s) for n, s in zip(steps.inputs, steps.in_shapes)]
        kind = "forward" if forward else "step"
        run = steps.forward if forward else steps.step

        def host_fn(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
            lead, flat = self._flat(arrays)
            return self._shaped(lead, run(*flat, exact=True))

        host_fn.__name__ = host_fn.__qualname__ = f"mujoco_fields_{kind}"
        self._host_fn = host_fn
        self._run = lambda flat: run(*flat, exact=True)
        self._host = jaxbridge.host(host_fn, vmap=_FieldBatching(self), result=self._result)
        nout, nin = sum(self.sizes), sum(len(d) for d in self.diff)

        def jac_fn(*arrays: np.ndarray) -> np.ndarray:
            lead, flat = self._flat(arrays)
            J = self._jacobian(flat, run)
            return J.reshape((*lead, nout, nin))

        jac_fn.__name__ = jac_fn.__qualname__ = f"mujoco_fields_{kind}_jacobian"
        self._jac = jaxbridge.host(
            jac_fn,
            vmap="vectorized",
            result=lambda *a: jax.ShapeDtypeStruct((*self._lead(a), nout, nin), a[0].dtype),
        )
        if forward:

            def where_fn(mask: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
                lead, flat = self._flat(arrays)
                rows = np.broadcast_to(mask, lead).reshape(-1)
                return self._shaped(lead, steps.forward_where(rows, *flat))

            where_fn.__name__ = where_fn.__qualname__ = "mujoco_fields_forward_where"
            self._where = jaxbridge.host(
                where_fn, vmap="vectorized", result=lambda mask, *a: self._result(*a)
            )
        self.call = jax.custom_jvp(self._primal)
        self.call.defjvp(self._jvp)

    def __call__(self, *arrays: jax.Array) -> tuple[jax.Array, ...]:
        return self.call(*arrays)

    def where(self, mask: jax.Array, *arrays: jax.Array) -> tuple[jax.Array, ...]:
        """`forward` where `mask` is set, zeros elsewhere; no derivative."""
        arrays = tuple(jax.lax.stop_gradient(a) for a in arrays)
        return tuple(self._where(mask, *arrays))

    # -- shapes ----------------------------------------------------------------------------

    def _lead(self, arrays: Sequence[Any]) -> tuple[int, ...]:
        if not arrays:
            return ()
        return tuple(arrays[0].shape[: arrays[0].ndim - len(self.steps.in_shapes[0])])

    def _result(self, *arrays: Any) -> tuple[jax.ShapeDtypeStruct, ...]:
        lead = self._lead(arrays)
        dtype = arrays[0].dtype if arrays else jnp.zeros(()).dtype
        return tuple(
            jax.ShapeDtypeStruct((*lead, *s), dtype if np.issubdtype(d, np.floating) else jnp.int32)
            for s, d in zip(self.steps.out_shapes, self.steps.out_dtypes)
        )

    def _flat(self, arrays: Sequence[np.ndarray]) -> tuple[tuple[int, ...], list[np.ndarray]]:
        lead = self._lead(arrays)
        B = math.prod(lead)
        flat = [
            np.ascontiguousarray(np.asarray(a).reshape(B, *s), dtype=np.float64)
            for a, s in zip(arrays, self.steps.in_shapes)
        ]
        return lead, flat

    def _shaped(self, lead: tuple[int, ...], values: Sequence[np.ndarray]) -> tuple:
        return tuple(
            v.reshape((*lead, *v.shape[1:]))
            if np.issubdtype(v.dtype, np.floating)
            else v.astype(np.int32).reshape((*lead, *v.shape[1:]))
            for v in values
        )

    # -- derivatives -----------------------------------------------------------------------

    def _jacobian(self, flat: list[np.ndarray], run: Callable[..., list[np.ndarray]]):
        """`(B, nout, nin)` derivatives of the float outputs (flattened, in order) in the
        differentiated input entries (flattened, in order)."""
        B = flat[0].shape[0] if flat else 1
        rows2d = [a.reshape(B, -1) for a in flat]
        x = np.concatenate([a[:, d] for a, d in zip(rows2d, self.diff)], axis=1)
        bounds = np.cumsum([0, *(len(d) for d in self.diff)])

        def evaluate(points: np.ndarray, rows: np.ndarray) -> np.ndarray:
            ins = []
            for a, d, lo, hi, s in zip(
                rows2d, self.diff, bounds[:-1], bounds[1:], self.steps.in_shapes
            ):
                p = a[rows]  # a copy
                p[:, d] = points[:, lo:hi]
                ins.append(p.reshape(len(rows), *s))
            outs = run(*ins)
            pieces = [outs[i].reshape(len(rows), -1) for i in self.floats]
            return np.concatenate(pieces, axis=1) if pieces else np.empty((len(rows), 0))

        return _differences.jacobian(evaluate, x)

    def _primal(self, *arrays: jax.Array) -> tuple[jax.Array, ...]:
        return tuple(self._host(*arrays))

    def _jvp(self, primals: tuple, tangents: tuple) -> tuple[tuple, tuple]:
        out = self._primal(*primals)
        J = jax.lax.stop_gradient(self._jac(*primals))
        dtype = J.dtype
        dx = jnp.concatenate(
            [t.reshape(-1)[d].astype(dtype) for t, d in zip(tangents, self.diff)]
            or [jnp.zeros((0,), dtype)]
        )
        dy = J @ dx
        douts: list[Any] = []
        offset = 0
        sizes = dict(zip(self.floats, self.sizes))
        for i, o in enumerate(out):
            if i in sizes:
                douts.append(dy[offset : offset + sizes[i]].reshape(o.shape).astype(o.dtype))
                offset += sizes[i]
            else:
                douts.append(np.zeros(o.shape, jax.dtypes.float0))
        return out, tuple(douts)


class DataCalls:
    """C MuJoCo's `mj_step` and `mj_forward` on named `MjData` fields, as JAX functions.

    The engine under `jaxbridge.gymnasium` and `jaxbridge.mujoco.mjx`: give the fields a step
    starts from, name the fields to return, and one host call runs MuJoCo on them (the rows
    of a batch on `mujoco.batch`'s threads, in C).

    Args:
        model: a `MjModel`, MJCF text, or a path (shared, never copied: later edits of the
            model are seen by later calls).
        nthread: `mujoco.batch` threads; None for the CPUs this process may use.

    Contract under transformations: under `jit` each call is one host call; under `vmap`
    (any nesting, any `in_axes`) and for leading batch dimensions of the inputs it is still
    ONE host call, which receives `(B, *shape)` float64 rows. Derivatives (`jvp`, `grad`,
    `jacfwd`, `jacrev`, and their `vmap`s; first order) are differences that do not reach
    over contact changes (`_differences.jacobian`), in every input entry but time,
    `eq_active`, and the time, history, plugin and plastic entries of `"physics"`. MuJoCo
    computes in float64; results come back in the inputs' float dtype (float32 without x64),
    integer fields as int32.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jaxbridge.mujoco import DataCalls
        >>> calls = DataCalls('<mujoco><worldbody><body><joint name="z" type="slide" axis="0 0 1"/>'
        ...                   '<geom size=".1"/></body></worldbody>'
        ...                   '<actuator><motor joint="z"/></actuator></mujoco>')
        >>> out = calls.step({"qpos": jnp.zeros(1), "qvel": jnp.ones(1), "ctrl": jnp.zeros(1)},
        ...                  ("qpos", "qvel", "xpos"), nstep=5)
        >>> sorted(out), out["xpos"].shape
        (['qpos', 'qvel', 'xpos'], (2, 3))
        >>> batch = jax.vmap(lambda q: calls.forward({"qpos": q}, ("xpos",))["xpos"])
        >>> batch(jnp.zeros((4, 1))).shape  # one host call for the 4 rows
        (4, 2, 3)
    """

    def __init__(self, model: Any, *, nthread: int | None = None):
        self.model: MjModel = load_model(model)
        self.nthread = nthread
        self._calls: dict[tuple, FieldCalls] = {}

    def calls(
        self,
        inputs: Sequence[str],
        outputs: Sequence[str],
        nstep: int = 1,
        forward: bool = False,
        *,
        persistent: bool = False,
    ) -> FieldCalls:
        """The `FieldCalls` of one signature (made once, then kept): positional arrays in the
        order of `inputs`, a tuple out in the order of `outputs`. Its `steps` is the host
        side (`_fields.FieldSteps`, NumPy in and out; `persistent` as there)."""
        key = (tuple(inputs), tuple(outputs), 1 if forward else int(nstep), forward, persistent)
        made = self._calls.get(key)
        if made is None:
            steps = FieldSteps(
                self.model, key[0], key[1], key[2], nthread=self.nthread, persistent=persistent
            )
            made = self._calls[key] = FieldCalls(steps, forward)
        return made

    def step(
        self, inputs: Mapping[str, Any], outputs: Sequence[str], nstep: int = 1
    ) -> dict[str, jax.Array]:
        """`nstep` calls of `mj_step` from the given fields; the named fields after them.

        Args:
            inputs: field name to array, each `(*batch, *shape)` with the field's shape in
                `MjData` (`qpos` `(nq,)`, `xfrc_applied` `(nbody, 6)`, `time` `()`):
                `time`, `qpos`, `qvel`, `act`, `history`, `qacc_warmstart`, `ctrl`,
                `qfrc_applied`, `xfrc_applied`, `eq_active`, `mocap_pos`, `mocap_quat`,
                `userdata`, `plugin_state`, `plastic`, or `"physics"` (the whole
                `mjSTATE_FULLPHYSICS` vector, `Simulator`'s state). The fields not given are
                `mj_resetData`'s, on every call.
            outputs: field names: any input field as the steps leave it, and any fixed-shape
                `MjData` field as `mj_step` leaves it (describing its last substep's
                evaluation: `xpos`, `cvel`, `qfrc_actuator`, `sensordata`, `ncon`, ...);
                `cfrc_ext`, `cfrc_int` and `cacc` come from `mj_rnePostConstraint` after
                the steps, as gymnasium's environments compute them.
            nstep: `mj_step` calls (>= 1).

        Returns:
            A dict from output name to `(*batch, *shape)` array.

        Raises:
            ValueError: an unknown field, a shape that is not the field's, or clashing inputs.

        A simulation MuJoCo warns on (bad qacc) is reset and stepped on, as in `mj_step`; the
        output `"warning"` (`(mjNWARNING,)` int32, `mjtWarning`'s order) counts the warnings
        of each kind a row raised in the call, so that a program can tell.
        """
        return self._apply(inputs, outputs, nstep, forward=False)

    def forward(self, inputs: Mapping[str, Any], outputs: Sequence[str]) -> dict[str, jax.Array]:
        """`mj_forward` at the given fields; the named fields after it (as `step`'s, which
        see; `cfrc_ext`, `cfrc_int` and `cacc` from `mj_rnePostConstraint` after it)."""
        return self._apply(inputs, outputs, 1, forward=True)

    def forward_where(
        self, where: Any, inputs: Mapping[str, Any], outputs: Sequence[str]
    ) -> dict[str, jax.Array]:
        """`forward` of the batch rows where `where` (of the inputs' batch shape) is set, zeros
        elsewhere, with no derivative: an autoreset's new episodes, in one call of those rows
        (none at all where no row is set)."""
        if isinstance(outputs, str):
            outputs = (outputs,)
        calls, arrays, lead = self._arrays(inputs, outputs, 1, True, "forward_where")
        mask = jnp.broadcast_to(jnp.asarray(where, bool), lead)
        f = calls.where
        for _ in lead:
            f = jax.vmap(f)
        return dict(zip(tuple(outputs), f(mask, *arrays)))

    def _arrays(
        self,
        inputs: Mapping[str, Any],
        outputs: Sequence[str],
        nstep: int,
        forward: bool,
        what: str,
    ) -> tuple[FieldCalls, list[jax.Array], tuple[int, ...]]:
        if not isinstance(inputs, Mapping) or not inputs:
            raise TypeError(
                f"`DataCalls.{what}(inputs=...)` takes a dict from `MjData` field name to "
                f"array, e.g. {{'qpos': q, 'qvel': v}}; got {type(inputs).__name__}."
            )
        names = tuple(inputs)
        arrays = [jnp.asarray(v) for v in inputs.values()]
        dtype = jnp.result_type(*arrays, float)
        if not jnp.issubdtype(dtype, jnp.floating):
            dtype = jnp.zeros(()).dtype
        calls = self.calls(names, outputs, nstep, forward)  # validates the names
        probe = calls.steps
        leads = []
        for name, a, shape in zip(names, arrays, probe.in_shapes):
            if tuple(a.shape[a.ndim - len(shape) :]) != shape or a.ndim < len(shape):
                raise ValueError(
                    f"`DataCalls.{what}`: input {name!r} must have shape (*batch, "
                    f"{', '.join(map(str, shape))}) for this model; got {tuple(a.shape)}."
                )
            leads.append(a.shape[: a.ndim - len(shape)])
        lead = tuple(int(n) for n in np.broadcast_shapes(*leads))
        arrays = [
            jnp.broadcast_to(a.astype(dtype), (*lead, *s)) for a, s in zip(arrays, probe.in_shapes)
        ]
        return calls, arrays, lead

    def _apply(self, inputs, outputs, nstep, forward):
        if isinstance(outputs, str):
            outputs = (outputs,)
        what = "forward" if forward else "step"
        f, arrays, lead = self._arrays(inputs, outputs, nstep, forward, what)
        g = f.call
        for _ in lead:  # leading dimensions are batches too: one host call for all of them
            g = jax.vmap(g)
        return dict(zip(tuple(outputs), g(*arrays)))
