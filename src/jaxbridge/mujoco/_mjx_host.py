"""The host side of `jaxbridge.mujoco.mjx`: mjx.Data leaves in, leaves out, on the engine's
field calls (`_fields.FieldSteps`).

`Calls.run(kind, inputs, live, B)` takes the `(B, *shape)` input leaves of `B` simulations (the
`mjSTATE_INTEGRATION` state, `_mjx_data.INPUTS`), runs `mj_step` (`kind="step"`) or
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

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from jaxbridge._base import AbstractBatching
from jaxbridge._batching import VECTORIZED

from . import _mjx_data as L
from ._fields import FieldSteps
from ._model import mj

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
    "efc_J",
    "efc_pos",
    "efc_margin",
    "efc_frictionloss",
    "efc_D",
    "efc_aref",
    "efc_force",
)


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
        self.inputs = tuple(name for name, _ in L.INPUTS)
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
        per_row: dict[str, np.ndarray] = {}
        each = None
        if plan.per_row:
            per_row = self._new_rows(B)
            each = lambda i, d: self._read_row(d, per_row, i)  # noqa: E731
        call = steps.forward if kind == "forward" else steps.step
        got = call(*ins, exact=exact, each_row=each, model_values=model_values)
        values = dict(zip(steps.outputs, got))
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
            vals, nnz = b["actuator_moment"], b["moment_rownnz"]
            adr, col = b["moment_rowadr"], b["moment_colind"]
            for j in range(B):
                rr, cc, kk = _sparse_index(nnz[j], adr[j], col[j])
                moment[j, rr, cc] = vals[j, kk]
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

    def _new_rows(self, B: int) -> dict[str, np.ndarray]:
        """Zeroed `(B, *shape)` arrays of the contact and constraint-row leaves."""
        leaves = self.layout.leaves
        out = {}
        for leaf in leaves:
            if leaf.kind == L.ROWS:
                out[leaf.path] = np.zeros((B, *leaf.shape))
        out["_impl.contact.dist"][:] = 1e10  # an empty slot, as `mjx.put_data` fills it
        return out

    def _read_row(self, d: Any, out: dict[str, np.ndarray], j: int) -> None:
        """Row `j` of the contact and constraint-row leaves from its `MjData` `d`."""
        ncon, nv = len(self.dim), self.nv
        c = d.contact
        cmap = -np.ones(ncon, dtype=np.intp)
        cdim = np.asarray(c.dim)
        for v in np.unique(cdim):
            slots = np.flatnonzero(self.dim == v)
            got = np.flatnonzero(cdim == v)
            if len(got) > len(slots):
                raise ValueError(
                    f"`jaxbridge.mujoco.mjx`: {len(got)} contacts of condim {v}, but the "
                    f"mjx.Data has {len(slots)} slots for them (as `mjx.put_data`, it "
                    "cannot place the rest)."
                )
            cmap[slots[: len(got)]] = got
        filled = cmap >= 0
        if filled.any():
            for n in _CONTACT_FIELDS:
                src = np.asarray(getattr(c, n))
                if n == "frame":
                    src = src.reshape(-1, 3, 3)
                out[f"_impl.contact.{n}"][j][filled] = src[cmap[filled]]
        if mujoco.mj_isSparse(self.model):
            efc_j = np.zeros((int(d.nefc), nv))
            mujoco.mju_sparse2dense(efc_j, d.efc_J, d.efc_J_rownnz, d.efc_J_rowadr, d.efc_J_colind)
        else:
            efc_j = np.asarray(d.efc_J).reshape(-1, nv) if nv else np.zeros((0, 0))
        starts_d = (0, int(d.ne), int(d.ne) + int(d.nf))
        starts_m = (0, self.ne, self.ne + self.nf)
        sizes = (int(d.ne), int(d.nf), int(d.nl))
        for n in _EFC_FIELDS:
            src = efc_j if n == "efc_J" else np.asarray(getattr(d, n))
            value = out[f"_impl.{n}"][j]
            for a, b0, s in zip(starts_m, starts_d, sizes):
                value[a : a + s] = src[b0 : b0 + s]
            for to, frm in enumerate(cmap):
                if frm < 0:
                    continue
                nrow = int(self.dim[to])
                if nrow > 1 and self.pyramidal:
                    nrow = (nrow - 1) * 2
                i_from, i_to = int(c.efc_address[frm]), int(self.efc_address[to])
                if i_from < 0:
                    continue
                value[i_to : i_to + nrow] = src[i_from : i_from + nrow]


def _cho_factor(M: np.ndarray) -> np.ndarray:
    """`scipy.linalg.cho_factor(M)`'s matrix for each of `(B, n, n)`: the upper Cholesky factor
    above the diagonal and on it, `M`'s own entries below (zeros where `M` is not positive
    definite, as `mjx.put_data` leaves them)."""
    import scipy.linalg

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
    ) -> Callable[..., None] | None:
        if call.fn is not self.fn or any(np.dtype(a.dtype) != np.float64 for a in call.in_avals):
            return None
        leaves = self.calls.layout.leaves
        flags = call.used_outputs
        used = frozenset(i for i, u in zip(self.live, flags) if u)
        if not used or any(leaves[i].kind not in (L.STATE, L.BOUND) for i in used):
            return None
        core = [len(a.shape) for a in call.in_avals]
        extra = {len(s) - c for s, c in zip(in_shapes, core)}
        if extra == {1} and len({s[0] for s in in_shapes}) == 1:
            B = int(in_shapes[0][0])
        elif extra == {0}:
            B = 1
        else:
            return None  # inputs batched unevenly: the generic path broadcasts them
        kind, nstep, forward = self.kind, self.nstep, self.kind == "forward"
        base = self.calls._plan(kind, used, (), nstep).steps
        order = [i for i in self.live if i in used]  # the buffers' leaves
        avals = [a for a, u in zip(call.spec.avals, flags) if u]
        slots = [base.outputs.index(leaves[i].name) for i in order]
        if any(np.dtype(a.dtype) != base.out_dtypes[k] for a, k in zip(avals, slots)):
            return None  # an integer field whose dtype is not MuJoCo's
        in_flat = [(B, *s) for s in base.in_shapes]
        out_flat = [(B, *s) for s in base.out_shapes]
        nout, fail, resolved = len(base.outputs), call.fail, self.resolved
        rows = base.rows(B, forward)
        plan = self.calls._plan

        def own(ctx: Any, outs: Any, *ins: Any) -> None:
            del ctx
            try:
                arrays = [a.__array__().reshape(s) for a, s in zip(ins, in_flat)]
                targets: list[Any] = [None] * nout
                for k, o in zip(slots, outs):
                    targets[k] = o.__array__().reshape(out_flat[k])
                if resolved is None:
                    rows.run(arrays, targets)
                    return
                fields, values = resolved.varying(ins[-1].__array__().reshape(B, -1))
                if not fields:
                    rows.run(arrays, targets)
                    return
                mine = plan(kind, used, fields, nstep).steps.rows(B, forward)
                mine.run_with(arrays, targets, None, 0, None, values)
            except Exception as e:
                raise fail(e) from e

        return own
