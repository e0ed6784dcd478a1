"""The host side of `jaxbridge.mujoco.mjx`: mjx.Data leaves in, leaves out, on the engine's
field calls (`_fields.FieldSteps`).

`Calls.run(kind, inputs, live, B)` takes the `(B, *shape)` input leaves of `B` simulations (the
`mjSTATE_INTEGRATION` state, `_data.INPUTS`), runs `mj_step` (`kind="step"`) or
`mj_forward` on all of them in one field call of the engine (`FieldSteps`: one `mujoco.batch`
call on MuJoCo's threads, in C), and returns the live output leaves (`live`: their indices in
the Layout) in MJX's shapes and float64. Each set of live leaves has its own `FieldSteps`, whose
outputs are the `MjData` fields those leaves need, and no others: the state and the derived
fields as they are, the dense forms of `M`, `qLD`, the actuator moments and the tendon Jacobian
converted in NumPy from their sparse fields, and, only where the contact list or the constraint
rows are live, each simulation's contacts and rows read from its own `MjData` (a persistent
`FieldSteps`, `each_row`), placed in MJX's fixed slots as `mjx.put_data` places them.

This module is the conversion between MJX's layout and `MjData`'s; MuJoCo runs in `_fields`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from jaxbridge._base import AbstractBatching, InPlace, NativeCall
from jaxbridge._batching import VECTORIZED

from .. import _native
from .._fields import FieldSteps
from .._model import mj
from . import _data as L

if TYPE_CHECKING:
    from jaxbridge._base import AbstractCall

__all__ = ["Batching", "Calls"]

mujoco: Any = mj
_CONTACT_FIELDS = (
    "dist",
    "pos",
    "frame",
    "includemargin",
    "friction",
    "solref",
    "solreffriction",
    "solimp",
    "geom1",
    "geom2",
    "geom",
)
_EFC_FIELDS = (
    "efc_pos",
    "efc_margin",
    "efc_frictionloss",
    "efc_D",
    "efc_aref",
    "efc_force",
)
#: The counts of each row's contacts and constraint rows (bound, so read for all rows at once).
_COUNTS = ("ncon", "nefc", "ne", "nf", "nl")


def _sparse_index(rownnz: np.ndarray, rowadr: np.ndarray, colind: np.ndarray):
    """`(rows, cols, k)`: entry `k` of a CSR array sits at `(rows[k], cols[k])`."""
    rows = np.repeat(np.arange(len(rownnz)), rownnz)
    k = np.concatenate([np.arange(a, a + n) for a, n in zip(rowadr, rownnz)] or [np.zeros(0)])
    k = k.astype(np.intp)
    return rows, np.asarray(colind)[k].astype(np.intp), k


@dataclass(frozen=True)
class _Plan:
    """One kind of call at one set of live leaves: the field call and what it reads."""

    steps: FieldSteps
    per_row: bool  # contacts or constraint rows are live: read from each row's MjData


class Calls:
    """A model's batched `mj_step` and `mj_forward` on mjx.Data leaves (see the module)."""

    def __init__(self, model: Any, layout: L.Layout, template: Any):
        from mujoco.mjx._src import support

        self.model = model
        self.layout = layout
        self.sparse = bool(support.is_sparse(model))
        self.nv = int(model.nv)
        impl = template._impl
        self.dim = np.asarray(impl.contact.dim)
        self.efc_address = np.asarray(impl.contact.efc_address)
        self.ne, self.nf, self.nl = int(impl.ne), int(impl.nf), int(impl.nl)
        self.nefc = int(impl.nefc)
        self.pyramidal = int(model.opt.cone) == int(mujoco.mjtCone.mjCONE_PYRAMIDAL)
        self.m_index = _sparse_index(model.M_rownnz, model.M_rowadr, model.M_colind)
        if int(model.ntendon):
            self.ten_index = _sparse_index(
                model.ten_J_rownnz, model.ten_J_rowadr, model.ten_J_colind
            )
        # MJX's contact slots and constraint rows (`mjx.put_data`'s placement): the slots of
        # each condim, the offsets of the equality, friction and limit rows, and, for each of
        # the slots' rows, its slot, its row within the slot and its index
        self.slots = {int(v): np.flatnonzero(self.dim == v) for v in np.unique(self.dim)}
        self.starts = (0, self.ne, self.ne + self.nf)
        slot, offset = [], []
        for to, v in enumerate(self.dim):
            nrow = (int(v) - 1) * 2 if int(v) > 1 and self.pyramidal else int(v)
            slot += [to] * nrow
            offset += list(range(nrow))
        self.row_slot = np.asarray(slot, np.intp)
        self.row_offset = np.asarray(offset, np.intp)
        self.row_target = self.efc_address[self.row_slot] + self.row_offset
        keep = (self.row_target >= 0) & (self.row_target < self.nefc)
        self.row_slot, self.row_offset = self.row_slot[keep], self.row_offset[keep]
        self.row_target = self.row_target[keep]
        self._arena: tuple[Any, int, np.ndarray] | None = None
        self.contact_dtype = np.dtype([])
        # the inputs a call takes: the non-empty ones (an empty one has no columns in the
        # rows; `_step` makes empty leaves in JAX)
        self.inputs = tuple(
            name for name, _ in L.INPUTS if math.prod(layout.leaves[layout.index[name]].shape)
        )
        self._plans: dict[tuple[str, frozenset[int], tuple[str, ...], int], _Plan] = {}
        self._lock = threading.Lock()

    def _fields(self, live: frozenset[int]) -> tuple[str, ...]:
        """The `MjData` fields the live leaves are made from."""
        leaves = self.layout.leaves
        names: set[str] = set()
        for i in live:
            leaf = leaves[i]
            if leaf.kind in (L.STATE, L.BOUND):
                names.add(leaf.name)
            elif leaf.kind == L.DENSE:
                if leaf.name in ("M", "qLD", "qLDiagInv"):
                    names.add("M")
                    if self.sparse:
                        names |= {"qLD", "qLDiagInv"}
                elif leaf.name == "actuator_moment":
                    names |= {"actuator_moment", "moment_rownnz", "moment_rowadr"}
                    names.add("moment_colind")
                else:  # ten_J, solver_niter
                    names.add(leaf.name)
            elif leaf.kind == L.ROWS:
                names |= set(_COUNTS)  # which rows are read, and how many rows each has
        return tuple(sorted(names))

    def _plan(
        self, kind: str, live: frozenset[int], model_fields: tuple[str, ...], nstep: int = 1
    ) -> _Plan:
        key = (kind, live, model_fields, nstep)
        plan = self._plans.get(key)
        if plan is None:
            per_row = any(self.layout.leaves[i].kind == L.ROWS for i in live)
            steps = FieldSteps(
                self.model,
                self.inputs,
                self._fields(live),
                nstep,
                persistent=per_row,
                post_constraint=False,  # cacc, cfrc_*: as mj_step leaves them
                model_fields=model_fields,
            )
            plan = _Plan(steps, per_row)
            with self._lock:
                if len(self._plans) > 64:
                    self._plans.clear()
                plan = self._plans.setdefault(key, plan)
        return plan

    def run(
        self,
        kind: str,
        inputs: dict[str, np.ndarray],
        live: Sequence[int],
        B: int,
        exact: bool = True,
        model_fields: tuple[str, ...] = (),
        model_values: Sequence[np.ndarray] | None = None,
        nstep: int = 1,
    ) -> list[np.ndarray]:
        """The live leaves after `kind` ("step": `nstep` calls of `mj_step`, or "forward")
        from `(B, *shape)` inputs.

        `exact`: one batch of exactly `B` rows (a step's); False pads a Jacobian's points to
        the few batch sizes `FieldSteps` keeps. `model_fields`: MjModel fields (as
        `mujoco.batch` names them) each row gives its own values of, `(B, *shape)` each in
        `model_values` (domain randomisation)."""
        plan = self._plan(kind, frozenset(live), tuple(model_fields), nstep)
        steps, layout = plan.steps, self.layout
        ins = [inputs[n] for n in self.inputs]
        reader = _Rows(self, B) if plan.per_row else None
        each = None if reader is None else reader.read
        select = None if reader is None else reader.select(steps.outputs)
        call = steps.forward if kind == "forward" else steps.step
        got = call(*ins, exact=exact, each_row=each, model_values=model_values, select=select)
        values = dict(zip(steps.outputs, got))
        per_row = {} if reader is None else reader.finish(values)
        dense: dict[str, np.ndarray] = {}
        outs = []
        for i in live:
            leaf = layout.leaves[i]
            if leaf.kind in (L.STATE, L.BOUND):
                value = values[leaf.name]
            elif leaf.kind == L.DENSE:
                if not dense:
                    dense = self._dense(values, B)
                value = dense[leaf.name]
            elif leaf.kind == L.ROWS:
                value = per_row[leaf.path]
            else:
                raise AssertionError(f"{leaf.path} is not made by a call")
            outs.append(value.reshape(B, *leaf.shape))
        return outs

    # -- conversions as mjx.put_data makes them ---------------------------------------------

    def check_slots(self, cdim: np.ndarray) -> None:
        """Raises where the contacts of condims `cdim` (-1: none) do not fit MJX's slots."""
        cdim = np.asarray(cdim)
        for v in np.unique(cdim[cdim >= 0]):
            have = len(self.slots.get(int(v), ()))
            got = int((cdim == v).sum())
            if got > have:
                raise ValueError(
                    f"`jaxbridge.mujoco.mjx`: {got} contacts of condim {v}, but the "
                    f"mjx.Data has {have} slots for them (as `mjx.put_data`, it "
                    "cannot place the rest)."
                )

    def arena(self, d: Any) -> np.ndarray:
        """The bytes of the contact list of `MjData` `d` (in contact: `ncon > 0`), room for
        one per slot: MuJoCo keeps its contacts at the start of the arena (`d->contact =
        d->arena`), so the view is made once per `MjData` and its address checked on each
        use."""
        base = int(np.asarray(d.contact.dist).ctypes.data)
        hit = self._arena
        if hit is not None and hit[0] is d and hit[1] == base:
            return hit[2]
        import ctypes

        dtype = _contact_dtype(d.contact, base)
        size = len(self.dim) * dtype.itemsize
        view = np.ctypeslib.as_array((ctypes.c_uint8 * max(size, 1)).from_address(base))
        self.contact_dtype = dtype
        self._arena = (d, base, view)
        return view

    def _dense(self, b: dict[str, np.ndarray], B: int) -> dict[str, np.ndarray]:
        """The dense leaves from the fields `b` of the call (`(B, ...)` each)."""
        nv, out = self.nv, {}
        if "M" in b:
            rows, cols, k = self.m_index
            if self.sparse:
                out["M"] = b["M"]
                out["qLD"] = b["qLD"]
                out["qLDiagInv"] = b["qLDiagInv"]
            else:
                M = np.zeros((B, nv, nv))
                M[:, rows, cols] = b["M"][:, k]
                M[:, cols, rows] = b["M"][:, k]
                out["M"] = M
                out["qLD"] = _cho_factor(M)
                out["qLDiagInv"] = np.zeros((B, 0))
        if "actuator_moment" in b:
            nu = int(self.model.nu)
            moment = np.zeros((B, nu, nv))
            if nu:
                vals, nnz = b["actuator_moment"], b["moment_rownnz"].reshape(B, nu)
                adr, col = b["moment_rowadr"].reshape(B, nu), b["moment_colind"]
                moment = _csr_dense(vals.reshape(B, -1), nnz, adr, col.reshape(B, -1), nv)[:, :nu]
            out["actuator_moment"] = moment
        if "ten_J" in b:
            ten = np.zeros((B, int(self.model.ntendon), nv))
            if int(self.model.ntendon):
                rows, cols, k = self.ten_index
                ten[:, rows, cols] = b["ten_J"][:, k]
            out["ten_J"] = ten
        if "solver_niter" in b:
            out["solver_niter"] = b["solver_niter"][:, 0]
        return out


def _contact_dtype(c: Any, base: int) -> np.dtype:
    """The structured dtype of MuJoCo's `mjContact` (the fields `mjx.put_data` reads, and
    `dim` and `efc_address`) at the offsets the bindings' views of contact list `c` give,
    `base` the address of its first contact."""
    names, formats, offsets = [], [], []
    for n in (*_CONTACT_FIELDS, "dim", "efc_address"):
        view = np.asarray(getattr(c, n))
        names.append(n)
        formats.append((view.dtype, view.shape[1:]) if view.ndim > 1 else view.dtype)
        offsets.append(view.ctypes.data - base)
    stride = int(np.asarray(c.dist).strides[0])
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": stride})


class _Rows:
    """One call's contacts and constraint rows: `read(i, d)` copies row `i`'s raw contacts
    and rows out of its `MjData` (a few NumPy copies, for the rows `select` picks: those with
    any contact or row), and `finish` places all rows' at once in MJX's fixed slots, as
    `mjx.put_data` places them: each leaf one gather, an empty slot or row taken from a blank
    one kept after the rows' own (slot `S`, row `cap`)."""

    def __init__(self, calls: Calls, B: int):
        self.calls, self.B = calls, B
        S, cap, nv = len(calls.dim), calls.nefc, calls.nv
        self.S, self.cap = S, cap
        self.stride = 0
        self.view: np.ndarray | None = None
        self.raw = np.zeros((B, 0), np.uint8)  # made at the first contact (its stride)
        self.vectors = np.zeros((len(_EFC_FIELDS), B, cap + 1))
        self.c_sparse = bool(mujoco.mj_isSparse(calls.model))
        self.J = np.zeros((B, (cap + 1) * nv))
        if self.c_sparse:
            self.rownnz = np.zeros((B, cap), np.intp)
            self.rowadr = np.zeros((B, cap), np.intp)
            self.colind = np.zeros((B, cap * nv), np.intp)

    def select(self, outputs: Sequence[str]) -> Callable[[Sequence[np.ndarray]], np.ndarray]:
        """The rows with a contact or a constraint row."""
        k = {n: outputs.index(n) for n in _COUNTS}

        def select(outs: Sequence[np.ndarray]) -> np.ndarray:
            ncon, nefc = (np.asarray(outs[k[n]]).reshape(-1) for n in ("ncon", "nefc"))
            return np.flatnonzero((ncon > 0) | (nefc > 0))

        return select

    def read(self, i: int, d: Any) -> None:
        """Row `i`'s contacts (raw `mjContact` bytes) and constraint rows, from `d`."""
        nc, ne = int(d.ncon), int(d.nefc)
        if nc > self.S or ne > self.cap:
            self.calls.check_slots(d.contact.dim)  # raises, naming the condim
            raise ValueError(  # rows beyond MJX's though the contacts fit: not expected
                f"`jaxbridge.mujoco.mjx`: {ne} constraint rows, but the mjx.Data has "
                f"{self.cap} (as `mjx.put_data`, it cannot place the rest)."
            )
        if nc:
            if self.view is None:  # once a call: the address is checked, the view kept
                self.view = self.calls.arena(d)
                self.stride = self.calls.contact_dtype.itemsize
                self.raw = np.zeros((self.B, (self.S + 1) * self.stride), np.uint8)
                blank = self.raw.view(self.calls.contact_dtype)[:, self.S]
                blank["dist"] = 1e10  # an empty slot, as `mjx.put_data` fills it
            n = nc * self.stride
            self.raw[i, :n] = self.view[:n]
        if ne:
            for k, name in enumerate(_EFC_FIELDS):
                self.vectors[k, i, :ne] = getattr(d, name)
            J = d.efc_J.reshape(-1)
            self.J[i, : J.size] = J
            if self.c_sparse:
                self.rownnz[i, :ne] = d.efc_J_rownnz
                self.rowadr[i, :ne] = d.efc_J_rowadr
                self.colind[i, : J.size] = d.efc_J_colind

    def finish(self, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The `(B, *shape)` contact and constraint-row leaves, by path."""
        calls, B, S, cap, nv = self.calls, self.B, self.S, self.cap, self.calls.nv
        counts = {n: np.asarray(values[n]).reshape(-1).astype(np.intp) for n in _COUNTS}
        out: dict[str, np.ndarray] = {}
        # the contact of each slot: C's contacts of each condim, in order, in that condim's
        # slots (`mjx.put_data`'s contact_map); `S`, the blank one, for an empty slot
        cmap = np.full((B, S), S, np.intp)
        rows_b = np.arange(B)[:, None]
        if self.raw.shape[1]:
            con = self.raw.view(calls.contact_dtype).reshape(B, S + 1)
            present = np.arange(S + 1)[None, :] < counts["ncon"][:, None]
            cdim = np.where(present, con["dim"], -1)
            for v in np.unique(cdim[present]):
                slots = calls.slots.get(int(v), np.zeros(0, np.intp))
                mine = cdim == v
                rank = np.cumsum(mine, axis=1) - 1
                if (rank[:, -1] + 1 > len(slots)).any():
                    calls.check_slots(cdim[np.argmax(rank[:, -1])])  # raises
                b, k = np.nonzero(mine)
                cmap[b, slots[rank[b, k]]] = k
            placed = con[rows_b, cmap]
            for n in _CONTACT_FIELDS:
                value = placed[n]
                out[f"_impl.contact.{n}"] = value.reshape(B, S, 3, 3) if n == "frame" else value
        else:  # no row in contact: every slot empty
            for n in _CONTACT_FIELDS:
                leaf = calls.layout.leaves[calls.layout.index[f"_impl.contact.{n}"]]
                out[f"_impl.contact.{n}"] = np.full((B, *leaf.shape), 1e10 if n == "dist" else 0.0)
        # the constraint row each of MJX's rows comes from (`cap`, the blank one: none):
        # equality, friction and limit rows at MJX's offsets, then each slot's rows at its
        # address (a slot whose contact has no rows, `efc_address` -1, leaves them)
        j = np.arange(cap)[None, :]
        rmap = np.full((B, cap), cap, np.intp)
        starts = (np.zeros(B, np.intp), counts["ne"], counts["ne"] + counts["nf"])
        for a, s0, n in zip(calls.starts, starts, (counts["ne"], counts["nf"], counts["nl"])):
            rmap = np.where((j >= a) & (j < a + n[:, None]), j - a + s0[:, None], rmap)
        if self.raw.shape[1] and calls.row_slot.size:
            slot, to = calls.row_slot, calls.row_target
            frm = con["efc_address"][rows_b, cmap[:, slot]]
            ok = (cmap[:, slot] < S) & (frm >= 0)
            rmap[:, to] = np.where(ok, frm + calls.row_offset, rmap[:, to])
        placed_rows = self.vectors[:, rows_b, rmap]
        for k, n in enumerate(_EFC_FIELDS):
            out[f"_impl.{n}"] = placed_rows[k]
        if self.c_sparse:
            rownnz = np.where(j < counts["nefc"][:, None], self.rownnz, 0)
            J = _csr_dense(self.J, rownnz, self.rowadr, self.colind, nv)
        else:
            J = self.J.reshape(B, cap + 1, nv)
        out["_impl.efc_J"] = J[rows_b, rmap]
        return out


def _csr_dense(
    vals: np.ndarray, rownnz: np.ndarray, rowadr: np.ndarray, colind: np.ndarray, ncol: int
) -> np.ndarray:
    """`(B, nrow + 1, ncol)` dense matrices from `B` CSR ones (`(B, nnz)` values and
    columns, `(B, nrow)` row counts and addresses), as `mju_sparse2dense` makes each, and a
    last row of zeros: one scatter of the batch's entries, in flat indices."""
    B, nrow = rownnz.shape
    out = np.zeros((B, nrow + 1, ncol))
    counts = rownnz.reshape(-1).astype(np.intp)
    total = int(counts.sum())
    if not total or not ncol:
        return out
    # entry t of row (b, r) is vals[b, rowadr[b, r] + t] (and colind's): its flat indices in
    # `vals` and `colind`, and the flat index in `out` of row (b, r)
    b = np.repeat(np.arange(B * nrow) // nrow, counts)
    ends = np.cumsum(counts)
    at = np.repeat(rowadr.reshape(-1), counts) + np.arange(total) - np.repeat(ends - counts, counts)
    pair = np.repeat(np.arange(B * nrow), counts)
    row = pair + pair // nrow  # rows of `out` (nrow + 1 a matrix)
    col = colind.reshape(-1)[b * colind.shape[1] + at]
    out.reshape(-1)[row * ncol + col] = vals.reshape(-1)[b * vals.shape[1] + at]
    return out


def _cho_factor(M: np.ndarray) -> np.ndarray:
    """`scipy.linalg.cho_factor(M)`'s matrix for each of `(B, n, n)`: the upper Cholesky factor
    above the diagonal and on it, `M`'s own entries below (zeros where `M` is not positive
    definite, as `mjx.put_data` leaves them)."""
    import scipy.linalg

    if M.shape[1] and np.isfinite(M).all():  # scipy refuses a non-finite M: zeros, below
        try:  # the whole batch in one call; one by one where some M is not definite
            upper = np.swapaxes(np.linalg.cholesky(M), 1, 2)
            return np.where(np.triu(np.ones(M.shape[1:], bool)), upper, M)
        except np.linalg.LinAlgError:
            pass
    out = np.zeros_like(M)
    for j in range(M.shape[0]):
        try:
            out[j] = scipy.linalg.cho_factor(M[j])[0]
        except (scipy.linalg.LinAlgError, ValueError):
            out[j] = 0.0
    return out


class Batching(AbstractBatching):
    """A batch of one mjx host call (`fn`, the primal of one kind) as one call of the host
    function, and, for float64 calls whose used leaves are all state or derived fields (no
    dense form, no contact slot: what an environment's step reads), XLA's buffers straight
    into and out of the engine's rows (`buffer_call`, as `DataCalls`' hot path): one copy of
    the inputs into MuJoCo's rows, MuJoCo's step, one copy of each used field into XLA.

    `resolved` (a traced model, whose values are the call's last input): the fields whose
    values differ from the model's are found on each call and set per row (domain
    randomisation), on the same path."""

    name = "vectorized"
    handles_unused_outputs = True

    def __init__(
        self,
        calls: Calls,
        kind: str,
        live: Sequence[int],
        nstep: int = 1,
        resolved: Any = None,
    ):
        self.calls, self.kind, self.live, self.nstep = calls, kind, list(live), nstep
        self.resolved = resolved
        self.fn: Callable[..., Any] | None = None

    def run(
        self,
        call: AbstractCall,
        batch: tuple[int, ...],
        ins: Sequence[np.ndarray],
        outs: Sequence[Any],
    ) -> None:
        VECTORIZED.run(call, batch, ins, outs)

    def buffer_call(
        self, call: AbstractCall, in_shapes: Sequence[tuple], out_shapes: Sequence[tuple]
    ) -> Callable[..., None] | InPlace | NativeCall | None:
        if call.fn is not self.fn:
            return None
        dtypes = {np.dtype(a.dtype) for a in call.in_avals}
        # float32 (x64 off, Playground's default): MuJoCo's float64 rows, each input widened
        # exactly and each float result rounded once, in C (or the Python twin); contact
        # reads, dense forms and per-row model values take the generic path there
        f32 = dtypes == {np.dtype(np.float32)}
        if dtypes != {np.dtype(np.float64)} and not (f32 and self.resolved is None):
            return None
        leaves = self.calls.layout.leaves
        flags = call.used_outputs
        used = frozenset(i for i, u in zip(self.live, flags) if u)
        if not used:
            return None
        core = [len(a.shape) for a in call.in_avals]
        extra = {len(s) - c for s, c in zip(in_shapes, core)}
        if extra == {1} and len({s[0] for s in in_shapes}) == 1:
            B = int(in_shapes[0][0])
        elif extra == {0}:
            B = 1
        else:
            return None  # inputs batched unevenly: the generic path broadcasts them
        order = [i for i in self.live if i in used]  # the buffers' leaves
        # A state leaf goes back into its input's buffer (both buffer functions read every
        # input into MuJoCo's rows before they write an output): a `scan` of steps then
        # copies no state into its carry. Forward returns no state, so it aliases nothing.
        names = [leaves[i].name for i in order]

        def in_place(fn: Callable[..., None]) -> InPlace:
            return InPlace.by_name(fn, self.calls.inputs, in_shapes, names, out_shapes)

        if any(leaves[i].kind not in (L.STATE, L.BOUND) for i in used):
            return None if f32 else in_place(self._converted(call, B, order))
        kind, nstep, forward = self.kind, self.nstep, self.kind == "forward"
        base = self.calls._plan(kind, used, (), nstep).steps
        avals = [a for a, u in zip(call.spec.avals, flags) if u]
        slots = [base.outputs.index(leaves[i].name) for i in order]
        wide = np.dtype(np.float64)
        if any(
            np.dtype(a.dtype) != base.out_dtypes[k]
            and not (f32 and np.dtype(a.dtype) == np.float32 and base.out_dtypes[k] == wide)
            for a, k in zip(avals, slots)
        ):
            return None  # an integer field whose dtype is not MuJoCo's
        in_flat = [(B, *s) for s in base.in_shapes]
        out_flat = [(B, *s) for s in base.out_shapes]
        nout, fail, resolved = len(base.outputs), call.fail, self.resolved
        plan = self.calls._plan
        nin = len(in_flat)
        # XLA's buffers already have the rows' shapes (one batch dimension): no reshape
        flat = all(tuple(s) == f for s, f in zip(in_shapes, in_flat)) and all(
            tuple(s) == out_flat[k] for s, k in zip(out_shapes, slots)
        )

        def own(ctx: Any, outs: Any, *ins: Any) -> None:
            del ctx
            try:
                targets: list[Any] = [None] * nout
                if flat:
                    arrays = [a.__array__() for a in ins[:nin]]
                    for k, o in zip(slots, outs):
                        targets[k] = o.__array__()
                else:
                    arrays = [a.__array__().reshape(s) for a, s in zip(ins, in_flat)]
                    for k, o in zip(slots, outs):
                        targets[k] = o.__array__().reshape(out_flat[k])
                # the batch made on the first call (a dict lookup after it), not when lowered:
                # where the compiled call serves, this Python twin never runs
                if resolved is None:
                    base.rows(B, forward).run(arrays, targets)
                    return
                fields, values = resolved.varying(ins[-1].__array__().reshape(B, -1))
                if not fields:
                    base.rows(B, forward).run(arrays, targets)
                    return
                mine = plan(kind, used, fields, nstep).steps.rows(B, forward)
                mine.run_with(arrays, targets, None, 0, None, values)
            except Exception as e:
                raise fail(e) from e

        def narrow(ctx: Any, outs: Any, *ins: Any) -> None:
            """`own` of a float32 call: the rows' float64 inputs and results, widened and
            rounded as the compiled call does (every input read before an output is written)."""
            del ctx
            try:
                arrays = [
                    np.asarray(a.__array__(), np.float64).reshape(s) for a, s in zip(ins, in_flat)
                ]
                targets: list[Any] = [None] * nout
                for k in slots:
                    targets[k] = np.empty(out_flat[k], base.out_dtypes[k])
                base.rows(B, forward).run(arrays, targets)
                for k, o in zip(slots, outs):
                    view = o.__array__()
                    np.copyto(view, targets[k].reshape(view.shape), casting="same_kind")
            except Exception as e:
                raise fail(e) from e

        python = in_place(narrow if f32 else own)
        # No per-row model values (`resolved`: found on each call, in Python): the compiled
        # call, which does what `own` does in C, where it can be built (`_native`).
        native = None if resolved is not None else base.native(B, forward, call.name)
        if native is None:
            return python
        return NativeCall(_native.TARGET, native.attributes(slots), python)

    def _converted(self, call: AbstractCall, B: int, order: list[int]) -> Callable[..., None]:
        """The buffer function of a call that reads dense forms or contact slots: `Calls.run`
        on views of XLA's input buffers, each leaf copied once into its output buffer (the
        generic path would copy the inputs, and check and copy each leaf again)."""
        calls, kind, nstep, resolved = self.calls, self.kind, self.nstep, self.resolved
        leaves = calls.layout.leaves
        names = calls.inputs
        shapes = [(B, *leaves[calls.layout.index[n]].shape) for n in names]
        out_shapes = [(B, *leaves[i].shape) for i in order]
        fail = call.fail

        def own(ctx: Any, outs: Any, *ins: Any) -> None:
            del ctx
            try:
                inputs = {n: a.__array__().reshape(s) for n, a, s in zip(names, ins, shapes)}
                fields: tuple[str, ...] = ()
                values = None
                if resolved is not None:
                    fields, values = resolved.varying(ins[-1].__array__().reshape(B, -1))
                got = calls.run(kind, inputs, order, B, True, fields, values, nstep)
                for o, g, s in zip(outs, got, out_shapes):
                    np.copyto(o.__array__().reshape(s), g.reshape(s), casting="unsafe")
            except Exception as e:
                raise fail(e) from e

        return own
