"""The host side of field calls: batched `mj_step` and `mj_forward` with named `MjData` fields in
and out, on `mujoco.batch` (MuJoCo 4.0 and later). NumPy only, no JAX.

`FieldSteps(model, inputs, outputs, nstep)` is one signature of such a call. Its `step` takes
`(B, *shape)` float64 arrays of the named input fields (`qpos`, `qvel`, `act`, `ctrl`,
`qacc_warmstart`, `time`, `mocap_pos`, `qfrc_applied`, `xfrc_applied`, ... and `"physics"`, the
`mjSTATE_FULLPHYSICS` vector), runs `nstep` calls of `mj_step` on each of the `B` rows (on the
batch's threads, in C), and returns the named output fields: any of the inputs' fields as the
steps leave them, and any fixed-shape `MjData` field the steps compute (`xpos`, `cvel`,
`qfrc_actuator`, `sensordata`, `ncon`, ...), which `mj_step` leaves describing its last
substep's evaluation, as it does in an `MjData`, and `"warning"`: the MuJoCo warnings each row
raised in the call (`mj_step` resets a simulation it warns on, bad qacc say, and steps on).
`forward` does the same with one `mj_forward`.

`mj_rnePostConstraint` is no part of `mj_step` (MuJoCo runs it inside a step only for the
acceleration sensors): where an output is one of its fields (`cfrc_ext`, `cfrc_int`, `cacc`),
it runs on each row's own `MjData` after the steps (the batch then keeps one `MjData` a row,
"persistent"), and for `cfrc_ext` alone, in a model without equality constraints and without an
`xfrc_applied` input, only on the rows in contact: elsewhere it is zero.

Each call is a pure function of its inputs: the inputs not given are those of `mj_resetData`
(read from the model when a batch is made), and the state the steps advance (time, qpos, qvel,
act, history, the warm start, plugin and plastic state) is reset to them before each call where
it is not an input. A batch of exactly `B` rows is made on first use and kept (`FieldRows`), so
that a closed loop's steps cost one copy in, MuJoCo's steps and one copy out.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._model import MjModel, mj
from ._worker import ONE_DATA_EACH, default_nthread

if TYPE_CHECKING:
    from ._native import NativeRows

__all__ = [
    "CHUNK",
    "PHYSICS",
    "RNE_FIELDS",
    "STATE_FIELDS",
    "FieldRows",
    "FieldSteps",
    "WARNING",
    "varies_per_row",
]

mujoco: Any = mj
_S = mujoco.mjtState
_INTEGRATION = int(_S.mjSTATE_INTEGRATION)
_NONE = int(mujoco.mjtStage.mjSTAGE_NONE)
_ACC = int(mujoco.mjtStage.mjSTAGE_ACC)

#: The `mjSTATE_FULLPHYSICS` vector (time, qpos, qvel, act, history, plugin and plastic state)
#: as one field, in MuJoCo's own layout: what `Simulator`'s states are.
PHYSICS = "physics"

#: The `MjData` fields a row of `mujoco.batch` holds (its `mjSTATE_INTEGRATION` state), by the
#: state component that holds them: the fields a call can take as inputs.
STATE_FIELDS: dict[str, int] = {
    "time": int(_S.mjSTATE_TIME),
    "qpos": int(_S.mjSTATE_QPOS),
    "qvel": int(_S.mjSTATE_QVEL),
    "act": int(_S.mjSTATE_ACT),
    "history": int(_S.mjSTATE_HISTORY),
    "qacc_warmstart": int(_S.mjSTATE_WARMSTART),
    "ctrl": int(_S.mjSTATE_CTRL),
    "qfrc_applied": int(_S.mjSTATE_QFRC_APPLIED),
    "xfrc_applied": int(_S.mjSTATE_XFRC_APPLIED),
    "eq_active": int(_S.mjSTATE_EQ_ACTIVE),
    "mocap_pos": int(_S.mjSTATE_MOCAP_POS),
    "mocap_quat": int(_S.mjSTATE_MOCAP_QUAT),
    "userdata": int(_S.mjSTATE_USERDATA),
    "plugin_state": int(_S.mjSTATE_PLUGIN),
    "plastic": int(_S.mjSTATE_PLASTIC),
    PHYSICS: int(_S.mjSTATE_FULLPHYSICS),
}
#: What the steps advance: reset before each step call where no input gives it.
_ADVANCED = int(_S.mjSTATE_FULLPHYSICS) | int(_S.mjSTATE_WARMSTART)
#: An output of `mjNWARNING` int32 counts: the MuJoCo warnings of each kind (`mjtWarning`'s
#: order: inertia, contact full, constraints full, bad qpos, qvel, qacc, ctrl) a row raised in
#: the call. `mj_step` resets a simulation it warns on and steps on: this flags that it did.
WARNING = "warning"
#: The fields only `mj_rnePostConstraint` computes.
RNE_FIELDS = ("cacc", "cfrc_int", "cfrc_ext")
# MjData arrays whose size changes with the number of active constraints: no fixed shape.
_DYNAMIC_PREFIXES = ("efc_", "iefc_", "map_efc2iefc", "map_iefc2efc", "island_", "efm_")
# The inputs a JVP does not differentiate in: a clock and switches.
_CONSTANT_INPUTS = ("time", "eq_active")

#: `each_row(i, d)`: reads what a caller needs of row `i`'s `MjData` `d` after a call.
EachRow = Callable[[int, Any], None]
#: `select(outs)`: of a call's `(n, *shape)` outputs, the rows (`0..n-1`) whose `MjData`
#: `each_row` reads; the others are not copied out of the batch.
Select = Callable[[Sequence[np.ndarray]], np.ndarray]

#: The most rows one batch call steps in `FieldSteps.step` (a Jacobian's points); fewer are
#: padded to a power of two, so that the batch sizes a Jacobian meets are few, each made once.
CHUNK = 256


def _columns(model: MjModel, spec: int) -> np.ndarray:
    """The columns of `spec`'s components in an `mjSTATE_INTEGRATION` row, in bit order."""
    cols: list[int] = []
    bit = 1
    while bit <= spec:
        if bit & spec:
            offset = int(mujoco.mj_stateSize(model, _INTEGRATION & (bit - 1)))
            cols.extend(range(offset, offset + int(mujoco.mj_stateSize(model, bit))))
        bit <<= 1
    return np.asarray(cols, dtype=np.intp)


def _as_slice(cols: np.ndarray) -> slice | np.ndarray:
    """`cols` as a slice where they are contiguous (a view, not a copy, when indexing)."""
    if cols.size == 0:
        return slice(0, 0)
    if np.array_equal(cols, np.arange(cols[0], cols[-1] + 1)):
        return slice(int(cols[0]), int(cols[-1]) + 1)
    return cols


class FieldSteps:
    """Batched `mj_step` (or `mj_forward`) of one model: named fields in, named fields out.

    Args:
        model: the `mujoco.MjModel` (shared, never copied: later edits of it are seen).
        inputs: the input fields, in argument order: names of `STATE_FIELDS` (`"physics"` for
            the whole `mjSTATE_FULLPHYSICS` vector), none overlapping another.
        outputs: the output fields, in result order: input fields (as the steps leave them)
            and fixed-shape `MjData` fields (arrays, and the integer counts such as `ncon`).
        nstep: `mj_step` calls per call (ignored by `forward`).
        nthread: the batch's threads; None for the CPUs this process may use.
        persistent: keep one `MjData` a row (`mujoco.batch`'s `persistent=True`), so that
            `FieldRows.load` and `step(each_row=...)` can read a row's whole `MjData` after a
            call (its contacts, its constraint rows). Implied by an output of `RNE_FIELDS`
            (with `post_constraint`).
        post_constraint: outputs of `RNE_FIELDS` come from a pass of `mj_rnePostConstraint`
            after the steps (True, gymnasium's fields), or, False, as the steps leave them in
            the `MjData` (MuJoCo computes them inside a step only for acceleration sensors;
            otherwise they keep their values from before the call: what `mjx.put_data` of an
            `mj_step`ped `MjData` holds).
        model_fields: `MjModel` fields (`"body_mass"`, `"geom_friction"`, `"opt.timestep"`:
            `mujoco.batch.MODEL_FIELDS`) whose values each row gives (`step(model_values=...)`,
            `(B, *shape)` each in the `MjModel` field's shape): every row runs on the model
            with its own values written into those fields (per-simulation fields of the
            batch, no `mj_setConst`: the values as given). The other fields are the model's
            as it was when the batch was made (edits made later are not seen).

    Raises:
        ValueError: an unknown or duplicated field, overlapping inputs, or `nstep < 1`.
        NotImplementedError: MuJoCo without `mujoco.batch` (before 4.0), or a model with sleep
            or IPC enabled (which `mujoco.batch` steps only with one `MjData` a row).

    Example:
        >>> import numpy as np
        >>> from jaxbridge.mujoco._model import load_model
        >>> m = load_model('<mujoco><worldbody><body><joint name="z" type="slide"/>'
        ...                '<geom size=".1"/></body></worldbody>'
        ...                '<actuator><motor joint="z"/></actuator></mujoco>')
        >>> f = FieldSteps(m, ("qpos", "qvel", "ctrl"), ("qpos", "qvel", "qfrc_actuator"))
        >>> qpos, qvel, force = f.step(np.zeros((2, 1)), np.ones((2, 1)), np.array([[0.], [1.]]))
        >>> qpos.shape, force.ravel().tolist()
        ((2, 1), [0.0, 1.0])
    """

    def __init__(
        self,
        model: MjModel,
        inputs: Sequence[str],
        outputs: Sequence[str],
        nstep: int = 1,
        *,
        nthread: int | None = None,
        persistent: bool = False,
        post_constraint: bool = True,
        model_fields: Sequence[str] = (),
    ):
        try:
            from mujoco import batch  # noqa: F401
        except ImportError:
            raise NotImplementedError(
                "`jaxbridge.mujoco` field calls run on `mujoco.batch`, which this MuJoCo "
                f"({mujoco.__version__}) lacks: `pip install 'mujoco>=4.0'`."
            ) from None
        if model.opt.enableflags & ONE_DATA_EACH:
            raise NotImplementedError(
                "`jaxbridge.mujoco` field calls: this model enables sleep or IPC "
                "(`opt.enableflags`), which `mujoco.batch` steps only with one `MjData` a row; "
                "clear those flags, or use `Simulator.step` and `rollout`."
            )
        if not isinstance(nstep, int | np.integer) or nstep < 1:
            raise ValueError(f"`nstep` must be an int >= 1; got {nstep!r}.")
        self.model: Any = model
        self.inputs, self.outputs, self.nstep = tuple(inputs), tuple(outputs), int(nstep)
        self.nthread = default_nthread() if nthread is None else max(1, int(nthread))
        data = mujoco.MjData(model)
        self.nphysics = int(mujoco.mj_stateSize(model, int(_S.mjSTATE_FULLPHYSICS)))
        self.ncol = int(mujoco.mj_stateSize(model, _INTEGRATION))
        self.in_shapes = [self._state_shape(data, n, "input") for n in self.inputs]
        seen = 0
        for name in self.inputs:
            if STATE_FIELDS[name] & seen or self.inputs.count(name) > 1:
                raise ValueError(
                    f"`jaxbridge.mujoco` field call: input {name!r} overlaps another input "
                    f"(inputs {self.inputs}); give each field once ('physics' holds time, "
                    "qpos, qvel, act, history, plugin_state and plastic)."
                )
            seen |= STATE_FIELDS[name]
        self.given = seen
        self._in_cols = [_as_slice(_columns(model, STATE_FIELDS[n])) for n in self.inputs]
        # One `np.concatenate` into a view of the rows writes every input when the inputs
        # are, in order, the leading columns of a row (gymnasium's physics, warm start,
        # controls): one NumPy call where one assignment per input would take several.
        order = np.concatenate([_columns(model, STATE_FIELDS[n]) for n in self.inputs] or [[]])
        self.head = int(order.size) if np.array_equal(order, np.arange(order.size)) else -1
        # The advanced columns no input gives: reset before each step.
        self._reset_cols = _as_slice(_columns(model, _ADVANCED & ~seen))
        if len(set(self.outputs)) != len(self.outputs):
            raise ValueError(f"`jaxbridge.mujoco` field call: outputs repeat a name: {outputs}.")
        self.out_shapes: list[tuple[int, ...]] = []
        self.out_dtypes: list[np.dtype] = []
        for name in self.outputs:
            if name in STATE_FIELDS:
                shape, dtype = self._state_shape(data, name, "output"), np.dtype(np.float64)
            else:
                shape, dtype = self._derived_spec(data, name)
            self.out_shapes.append(shape)
            self.out_dtypes.append(dtype)
        self.rne = tuple(n for n in self.outputs if n in RNE_FIELDS) if post_constraint else ()
        # `cfrc_ext` is the contacts' forces, plus applied forces and equality constraints':
        # with neither, a row without contacts has none, and needs no pass.
        self.rne_in_contact = (
            self.rne == ("cfrc_ext",)
            and int(self.model.neq) == 0
            and not seen & STATE_FIELDS["xfrc_applied"]
        )
        self.persistent = bool(persistent or self.rne)
        self.model_fields = tuple(model_fields)
        self.model_shapes = [_model_field_shape(model, f) for f in self.model_fields]
        self._rows: dict[tuple[int, bool], FieldRows] = {}
        self._native: dict[tuple[int, bool], NativeRows] = {}
        self._lock = threading.Lock()

    def _state_shape(self, data: Any, name: str, what: str) -> tuple[int, ...]:
        if name not in STATE_FIELDS:
            raise ValueError(
                f"`jaxbridge.mujoco` field call: {what} {name!r} is not a field of MuJoCo's "
                f"state rows; inputs are {', '.join(STATE_FIELDS)}."
            )
        if name == PHYSICS:
            return (self.nphysics,)
        if name == "time":
            return ()
        size = int(mujoco.mj_stateSize(self.model, STATE_FIELDS[name]))
        value = getattr(data, name, None)
        if isinstance(value, np.ndarray) and value.size == size:
            return tuple(value.shape)
        return (size,)

    def _derived_spec(self, data: Any, name: str) -> tuple[tuple[int, ...], np.dtype]:
        if name == WARNING:
            return (int(mujoco.mjtWarning.mjNWARNING),), np.dtype(np.int32)
        value = getattr(data, name, None) if not name.startswith("_") else None
        if isinstance(value, np.ndarray) and not name.startswith(_DYNAMIC_PREFIXES):
            return tuple(value.shape), value.dtype
        if isinstance(value, int) and not isinstance(value, bool):
            return (), np.dtype(np.int32)
        raise ValueError(
            f"`jaxbridge.mujoco` field call: output {name!r} is not a fixed-shape `MjData` "
            "field. Use the state's fields (qpos, qvel, act, qacc_warmstart, time, ...), "
            "fixed-size `MjData` arrays (xpos, cvel, qfrc_actuator, sensordata, cfrc_ext, "
            "...) or counts such as ncon."
        )

    def rows(self, B: int, forward: bool = False) -> FieldRows:
        """The batch of exactly `B` rows for `step` (or `forward`), made on first use (a few
        sizes kept)."""
        key = (B, forward)
        r = self._rows.get(key)
        if r is None:
            with self._lock:
                r = self._rows.get(key)
                if r is None:
                    if len(self._rows) >= 16:  # powers of two up to CHUNK, a few exact sizes
                        self._rows.clear()
                    r = self._rows[key] = FieldRows(self, B, forward)
        return r

    def native(self, B: int, forward: bool = False, name: str = "mujoco") -> NativeRows | None:
        """The compiled field call's batch of exactly `B` rows for `step` (or `forward`),
        made on first use and kept as long as the process (`_native.NativeRows`: XLA's buffers
        in and out in C, no Python); None where a call of these fields cannot take it: the
        library cannot be built, or the call has per-row model fields, an
        `mj_rnePostConstraint` pass or persistent rows, or a physics callback is installed.
        `name`: the host function's, for the call's errors."""
        if self.model_fields or self.rne or self.persistent:
            return None
        from . import _native

        if not _native.available() or _native.callbacks_installed():
            return None
        key = (B, forward)
        r = self._native.get(key)
        if r is None:
            with self._lock:
                r = self._native.get(key)
                if r is None:
                    what = (id(self.model), self.inputs, self.outputs, self.nstep, self.nthread)
                    make = functools.partial(self._make_native, B, forward, name)
                    r = self._native[key] = _native.plan((*what, B, forward), make)
        return r

    def _make_native(self, B: int, forward: bool, name: str) -> NativeRows:
        from . import _native

        model = self.model
        outputs: list[_native.Output] = []
        for field, shape, dtype in zip(self.outputs, self.out_shapes, self.out_dtypes):
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            if field in STATE_FIELDS:
                outputs.append(("state", _columns(model, STATE_FIELDS[field]), nbytes))
            else:
                outputs.append(("warning" if field == WARNING else "field", field, nbytes))
        return _native.NativeRows(
            model,
            B,
            forward=forward,
            nstep=self.nstep,
            nthread=self.nthread,
            name=name,
            inputs=[_columns(model, STATE_FIELDS[n]) for n in self.inputs],
            reset=_columns(model, _ADVANCED & ~self.given),
            outputs=outputs,
        )

    def _new_outputs(self, B: int, fill: bool = False) -> list[np.ndarray]:
        make = np.zeros if fill else np.empty
        return [make((B, *s), d) for s, d in zip(self.out_shapes, self.out_dtypes)]

    def _chunked(
        self,
        ins: Sequence[np.ndarray],
        forward: bool,
        exact: bool = False,
        each_row: EachRow | None = None,
        model_values: Sequence[np.ndarray] | None = None,
        select: Select | None = None,
    ) -> list[np.ndarray]:
        B = ins[0].shape[0] if ins else 1
        outs = self._new_outputs(B)
        values = self._model_values(model_values, B)
        for lo, hi, size in _chunks(B, exact):
            part = [_pad(a[lo:hi], size) for a in ins]
            got = outs if size == B else self._new_outputs(size)
            rows = self.rows(size, forward)
            if each_row is None and values is None:
                rows.run(part, got)
            else:
                mine = None if values is None else [_pad(v[lo:hi], size) for v in values]
                rows.run_with(part, got, each_row, lo, hi - lo, mine, select)
            if got is not outs:
                for o, g in zip(outs, got):
                    o[lo:hi] = g[: hi - lo]
        return outs

    def step(
        self,
        *ins: np.ndarray,
        exact: bool = False,
        each_row: EachRow | None = None,
        model_values: Sequence[np.ndarray] | None = None,
        select: Select | None = None,
    ) -> list[np.ndarray]:
        """`nstep` calls of `mj_step` from each of `B` rows of inputs.

        Args:
            *ins: one `(B, *shape)` array per input field, in `inputs` order (float64 and
                C-contiguous, or converted).
            exact: step a batch of exactly `B` rows (up to `CHUNK`); by default fewer rows
                are padded to a power of two (a Jacobian's points, whose number varies).
            each_row: `each_row(i, d)`, called for each row `i` after the steps with an
                `MjData` `d` holding that row's whole `MjData` as they left it (its contacts
                and constraint rows: fields of no fixed shape), to read what it needs from
                `d` before the next call; a persistent `FieldSteps`' only.
            model_values: one `(B, *shape)` array per `model_fields`: each row's values.
            select: `select(outs)`, the rows of a batch call's outputs whose `MjData`
                `each_row` reads (say those in contact); by default all.

        Returns:
            One new `(B, *shape)` array per output field, in `outputs` order.
        """
        return self._chunked(self._checked(ins), False, exact, each_row, model_values, select)

    def forward(
        self,
        *ins: np.ndarray,
        exact: bool = False,
        each_row: EachRow | None = None,
        model_values: Sequence[np.ndarray] | None = None,
        select: Select | None = None,
    ) -> list[np.ndarray]:
        """`mj_forward` at each of `B` rows of inputs; the outputs (and `each_row`,
        `model_values`, `select`) as `step`'s."""
        return self._chunked(self._checked(ins), True, exact, each_row, model_values, select)

    def _model_values(self, values: Sequence[np.ndarray] | None, B: int) -> list[np.ndarray] | None:
        if not self.model_fields:
            if values:
                raise ValueError("`FieldSteps`: model_values given, but no model_fields.")
            return None
        if values is None or len(values) != len(self.model_fields):
            raise ValueError(
                f"`FieldSteps`: {len(self.model_fields)} model_values {self.model_fields} "
                "expected, one `(B, *shape)` array each."
            )
        out = []
        for shape, v in zip(self.model_shapes, values):
            v = np.asarray(v)
            if v.shape[1:] != shape or v.shape[0] != B:
                v = np.broadcast_to(v.reshape(-1, *shape), (B, *shape))
            out.append(v)
        return out

    def forward_where(self, where: np.ndarray, *ins: np.ndarray) -> list[np.ndarray]:
        """`forward` of the rows where `(B,)` `where` is set (an autoreset's new episodes);
        zeros elsewhere. No MuJoCo call where none is set."""
        arrays = self._checked(ins)
        B = arrays[0].shape[0] if arrays else where.shape[0]
        outs = self._new_outputs(B, fill=True)
        ids = np.flatnonzero(where).astype(np.int32)
        if ids.size:
            self.rows(B, forward=True).run(arrays, outs, ids)
        return outs

    def _checked(self, ins: Sequence[np.ndarray]) -> list[np.ndarray]:
        if len(ins) != len(self.inputs):
            raise ValueError(
                f"`FieldSteps`: {len(self.inputs)} inputs {self.inputs}; got {len(ins)} arrays."
            )
        out = []
        for a, name, shape in zip(ins, self.inputs, self.in_shapes):
            a = np.ascontiguousarray(a, dtype=np.float64)
            if a.shape[1:] != shape:
                raise ValueError(
                    f"`FieldSteps`: input {name!r} must have shape (B, {', '.join(map(str, shape))}"
                    f"); got {a.shape}."
                )
            out.append(a)
        return out


def varies_per_row(name: str) -> bool:
    """Whether `MjModel` field `name` (`"opt.timestep"` for an `MjOption` field) can take its
    own value in each row of one call (`FieldSteps(model_fields=...)`)."""
    from mujoco import batch

    return name in batch.MODEL_FIELDS


def _model_field_shape(model: MjModel, name: str) -> tuple[int, ...]:
    """The shape of `MjModel` field `name` (`"opt.timestep"` for an `MjOption` field), which
    must be one that `mujoco.batch` can give values per simulation."""
    if not varies_per_row(name):
        raise ValueError(
            f"`jaxbridge.mujoco` field call: the model field {name!r} cannot vary between "
            "the simulations of one `mujoco.batch` call (not in `mujoco.batch.MODEL_FIELDS`); "
            "make a model with the value written in instead."
        )
    value = getattr(model.opt, name[4:]) if name.startswith("opt.") else getattr(model, name)
    return tuple(np.shape(value))


def _chunks(B: int, exact: bool = False) -> list[tuple[int, int, int]]:
    """`(lo, hi, size)` of each chunk of `B` rows, and the batch size that steps it."""
    if B > CHUNK:
        return [(lo, min(lo + CHUNK, B), CHUNK) for lo in range(0, B, CHUNK)]
    return [(0, B, B if exact else 1 << max(B - 1, 0).bit_length())]


def _pad(a: np.ndarray, size: int) -> np.ndarray:
    """`a`'s rows, the first repeated up to `size` rows (the extra rows' results are dropped)."""
    if len(a) == size:
        return a
    return np.concatenate([a, np.repeat(a[:1], size - len(a), axis=0)])


class FieldRows:
    """`B` rows of a `FieldSteps` in one `mujoco.batch.Batch`, and its bindings.

    `run(ins, outs)` writes the `(B, *shape)` inputs into the rows, steps them (or runs
    `mj_forward`), and copies the outputs into `outs` (caller's arrays: XLA's buffers, in the
    host calls' fast path). Calls are serialised by a lock: XLA may run two host calls of one
    program at once (a step and its Jacobian's points), and a batch must never serve two.
    """

    def __init__(self, steps: FieldSteps, B: int, forward: bool):
        from mujoco import batch as mj_batch

        model = steps.model
        self.steps, self.B, self.forward = steps, B, forward
        batch = mj_batch.Batch(model, B, steps.nthread, persistent=steps.persistent)
        if steps.model_fields:
            # Per-row model values: the batch's copy of the model, with those fields its own
            # per simulation (caller models exclude them).
            self.expanded = [batch.expand(f) for f in steps.model_fields]
        else:
            # The caller's model, so that an edit of it (a mass, `opt.timestep`) is seen here.
            batch.set_models(model)
            self.expanded = []
        batch.reset(stage=_NONE)
        self.batch = batch
        self.native = batch._b  # `Batch.step`'s C call, without its Python argument handling
        self.rows: np.ndarray = batch.state
        self.defaults = self.rows[0].copy()  # `mj_resetData`'s row
        self.head = self.rows[:, : steps.head] if steps.head >= 0 else None
        self.in_views = [self.rows[:, c] for c in steps._in_cols]  # views where slices
        reset = steps._reset_cols
        self.reset_cols = None if isinstance(reset, slice) and reset.start == reset.stop else reset
        self.reset_values = None if self.reset_cols is None else self.defaults[reset]
        # The outputs' sources: a state field's columns (a view of the rows) or a bound field.
        self.sources: list[np.ndarray | None] = []
        for name, shape in zip(steps.outputs, steps.out_shapes):
            if name in STATE_FIELDS:
                cols = _as_slice(_columns(model, STATE_FIELDS[name]))
                view = self.rows[:, cols].reshape(B, *shape) if isinstance(cols, slice) else None
                self.sources.append(view)
            elif name in steps.rne:
                self.sources.append(None)
            elif name == WARNING:
                self.sources.append(batch.warning[:, :, 1])  # each kind's count
            else:
                self.sources.append(batch.bind(name))
        # The batch's warning counters carry over from call to call: zeroed before each call
        # that reports them, so that they count this call's warnings.
        self.warning = batch.warning if WARNING in steps.outputs else None
        self.state_cols = [
            _as_slice(_columns(model, STATE_FIELDS[n])) if n in STATE_FIELDS else None
            for n in steps.outputs
        ]
        self.rne_slots = [i for i, n in enumerate(steps.outputs) if n in steps.rne]
        self.data: Any = mujoco.MjData(model) if steps.persistent else None
        self.rne_views = [getattr(self.data, steps.outputs[i]) for i in self.rne_slots]
        self.ncon = batch.bind("ncon") if steps.rne_in_contact else None
        self.nstep = steps.nstep
        self.lock = threading.Lock()

    def run(
        self, ins: Sequence[np.ndarray], outs: Sequence[np.ndarray], ids: np.ndarray | None = None
    ) -> None:
        """Inputs `(B, *shape)` float64, C-contiguous; `outs` `(B, *shape)` of the outputs'
        dtypes, C-contiguous, or None for an output nobody reads (not copied, and
        `mj_rnePostConstraint` skipped where none of its fields is read). `ids` (forward
        only): the rows to compute; the others of `outs` are left as they are."""
        with self.lock:
            self._run(ins, outs, ids)

    def load(self, i: int, d: Any) -> None:
        """Copies row `i`'s `MjData`, as the last call left it, into `d` (an `MjData` of the
        model): a persistent batch's only (`FieldSteps(persistent=True)`). Call it under
        `lock`, right after `run`, where another call could come in between."""
        if not self.steps.persistent:
            raise ValueError(
                "`FieldRows.load`: this batch shares its `MjData`s between rows; make the "
                "`FieldSteps` with persistent=True to read a row's whole `MjData`."
            )
        self.native.get_data(i, d)

    def run_with(
        self,
        ins: Sequence[np.ndarray],
        outs: Sequence[np.ndarray],
        each_row: EachRow | None = None,
        first: int = 0,
        n: int | None = None,
        model_values: Sequence[np.ndarray] | None = None,
        select: Select | None = None,
    ) -> None:
        """`run` on the rows' own values of `model_fields` (`(B, *shape)` each, written
        where they changed since the last call), then `each_row(first + i, d)` for the first
        `n` rows (all by default; with `select`, those of them it picks from `outs`), `d`
        holding row `i`'s `MjData` as the call left it; under the lock, so that no other call
        comes in between."""
        if each_row is not None and not self.steps.persistent:
            raise ValueError(
                "`FieldSteps.step(each_row=...)`: this batch shares its `MjData`s between "
                "rows; make the `FieldSteps` with persistent=True to read a row's `MjData`."
            )
        with self.lock:
            for view, v in zip(self.expanded, model_values or ()):
                if not np.array_equal(view, v):
                    view[...] = v
            self._run(ins, outs, None)
            if each_row is None:
                return
            d, get = self.data, self.native.get_data
            count = self.B if n is None else n
            if select is None:
                picked: Any = range(count)
            else:
                picked = [int(i) for i in select(outs) if i < count]
            for i in picked:
                get(i, d)
                each_row(first + i, d)

    def _run(self, ins, outs, ids) -> None:
        B = self.B
        if self.head is not None:
            np.concatenate([a if a.ndim == 2 else a.reshape(B, -1) for a in ins], 1, self.head)
        else:
            for view, a, cols in zip(self.in_views, ins, self.steps._in_cols):
                if isinstance(cols, slice):
                    view[...] = a.reshape(B, -1)
                else:
                    self.rows[:, cols] = a.reshape(B, -1)
        if self.warning is not None:
            self.warning[...] = 0
        if self.forward:
            nfail = self.native.forward(ids, _ACC)
        else:
            if self.reset_cols is not None:
                self.rows[:, self.reset_cols] = self.reset_values
            nfail = self.native.step(None, self.nstep, _NONE)
        if nfail:
            self.batch._check(ids, nfail)  # raises MuJoCo's error, naming the simulations
        for i, (src, out) in enumerate(zip(self.sources, outs)):
            if out is None:
                continue
            if src is None:
                cols = self.state_cols[i]
                if cols is None:
                    continue  # mj_rnePostConstraint's, below
                value = self.rows[:, cols].reshape(out.shape)
            else:
                value = src
            if ids is None:
                np.copyto(out, value)
            else:
                out[ids] = value[ids]
        if self.rne_slots:
            self._rne(outs, ids)

    def _rne(self, outs: Sequence[np.ndarray], ids: np.ndarray | None) -> None:
        m, d, get = self.steps.model, self.data, self.native.get_data
        rne = mujoco.mj_rnePostConstraint
        pairs = [
            (outs[i], v) for i, v in zip(self.rne_slots, self.rne_views) if outs[i] is not None
        ]
        if not pairs:
            return
        targets, views = [t for t, _ in pairs], [v for _, v in pairs]
        rows = range(self.B) if ids is None else ids.tolist()
        if self.ncon is not None:  # without contacts `cfrc_ext` is zero: skip those rows
            for t in targets:
                if ids is None:
                    t[...] = 0.0
                else:
                    t[ids] = 0.0
            ncon = self.ncon
            rows = [i for i in rows if ncon[i]]
        for i in rows:
            get(i, d)  # the row's MjData as its last substep left it
            rne(m, d)
            for t, v in zip(targets, views):
                t[i] = v
