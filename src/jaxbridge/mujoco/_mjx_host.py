"""The host side of `jaxbridge.mujoco.mjx`: mjx.Data leaves in, leaves out, by `mujoco.batch`.

`Calls.run(kind, inputs, live)` takes the `(B, *shape)` input leaves of `B` simulations (the
`mjSTATE_INTEGRATION` state, `_mjx_data.INPUTS`), writes them into the rows of one
`mujoco.batch.Batch`, runs `mj_step` (`kind="step"`) or `mj_forward` on all of them in one C
call on MuJoCo's thread pool, and returns the live output leaves (`live`: their indices in the
Layout) in MJX's shapes and float64: the state from the rows, the derived fields from the
batch's bound arrays (copied in C, on its threads), the dense forms of `M`, `qLD`, the actuator
moments and the tendon Jacobian converted in NumPy, and, only where the contact list or the
constraint rows are live, each simulation's contacts and rows from its own `MjData` (a
persistent batch), placed in MJX's fixed slots as `mjx.put_data` places them.

A batch serves one call at a time (XLA may run two host calls at once): each is taken from a
free list for the call and put back after.

Interim: this file is the mjx front end's own use of `mujoco.batch` until the engine's
"named `MjData` fields in, named fields out" call lands in `jaxbridge/mujoco/`; it then becomes
the conversion layer on it (the lead has been told).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _mjx_data as L
from ._model import mj

__all__ = ["Calls"]

mujoco: Any = mj
_NONE = int(mujoco.mjtStage.mjSTAGE_NONE)
_ACC = int(mujoco.mjtStage.mjSTAGE_ACC)
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


class _Rows:
    """One batch of `B` simulations and the bound arrays a set of live leaves reads."""

    def __init__(self, calls: Calls, B: int, live: frozenset[int]):
        from mujoco import batch as mj_batch

        layout = calls.layout
        self.per_row = any(layout.leaves[i].kind == L.ROWS for i in live)
        batch = mj_batch.Batch(calls.model, B, calls.nthread, persistent=self.per_row)
        batch.set_models(calls.model)  # the caller's model: an edit of it is seen
        batch.reset(stage=_NONE)
        self.batch = batch
        self.state = batch.state
        names = {layout.leaves[i].name for i in live if layout.leaves[i].kind == L.BOUND}
        dense = {layout.leaves[i].name for i in live if layout.leaves[i].kind == L.DENSE}
        if dense & {"M", "qLD", "qLDiagInv"}:
            names.add("M")
            if calls.sparse:
                names |= {"qLD", "qLDiagInv"}
        if "actuator_moment" in dense:
            names |= {"actuator_moment", "moment_rownnz", "moment_rowadr", "moment_colind"}
        if "ten_J" in dense:
            names.add("ten_J")
        if "solver_niter" in dense:
            names.add("solver_niter")
        self.bound = {n: batch.bind(n) for n in sorted(names)}
        self.data: Any = mujoco.MjData(calls.model) if self.per_row else None


class Calls:
    """A model's batched `mj_step` and `mj_forward` on mjx.Data leaves (see the module)."""

    def __init__(self, model: Any, layout: L.Layout, template: Any):
        from mujoco.mjx._src import support

        self.model = model
        self.layout = layout
        self.nthread = max(1, len(os.sched_getaffinity(0)))
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
        self._free: dict[tuple[int, frozenset[int]], list[_Rows]] = {}
        self._lock = threading.Lock()

    def _take(self, B: int, live: frozenset[int]) -> _Rows:
        with self._lock:
            free = self._free.setdefault((B, live), [])
            if free:
                return free.pop()
            if len(self._free) > 32:
                self._free.clear()
                free = self._free.setdefault((B, live), [])
        return _Rows(self, B, live)

    def _give(self, B: int, live: frozenset[int], rows: _Rows) -> None:
        with self._lock:
            self._free.setdefault((B, live), []).append(rows)

    def run(
        self, kind: str, inputs: dict[str, np.ndarray], live: Sequence[int], B: int
    ) -> list[np.ndarray]:
        """The live leaves after `kind` ("step" or "forward") from `(B, *shape)` inputs."""
        key = frozenset(live)
        rows = self._take(B, key)
        try:
            return self._run(rows, kind, inputs, live, B)
        finally:
            self._give(B, key, rows)

    def _run(self, r: _Rows, kind, inputs, live, B) -> list[np.ndarray]:
        layout = self.layout
        r.state[:] = layout.rows(inputs, B)
        if kind == "step":
            r.batch.step(None, 1, _NONE)
        else:
            r.batch.forward(None, _ACC)
        dense: dict[str, np.ndarray] = {}
        per_row = self._per_row(r, B) if r.per_row else {}
        outs = []
        for i in live:
            leaf = layout.leaves[i]
            shape = (B, *leaf.shape)
            if leaf.kind == L.STATE:
                value = r.state[:, layout.columns[leaf.name]]
            elif leaf.kind == L.BOUND:
                value = r.bound[leaf.name]
            elif leaf.kind == L.DENSE:
                if not dense:
                    dense = self._dense(r, B)
                value = dense[leaf.name]
            elif leaf.kind == L.ROWS:
                value = per_row[leaf.path]
            else:
                raise AssertionError(f"{leaf.path} is not made by a call")
            outs.append(np.array(value).reshape(shape))
        return outs

    # -- conversions as mjx.put_data makes them ---------------------------------------------

    def _dense(self, r: _Rows, B: int) -> dict[str, np.ndarray]:
        nv, out = self.nv, {}
        b = r.bound
        if "M" in b:
            rows, cols, k = self.m_index
            if self.sparse:
                out["M"] = b["M"].copy()
                out["qLD"] = b["qLD"].copy()
                out["qLDiagInv"] = b["qLDiagInv"].copy()
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
            out["solver_niter"] = b["solver_niter"][:, 0].copy()
        return out

    def _per_row(self, r: _Rows, B: int) -> dict[str, np.ndarray]:
        ncon, nefc, nv = len(self.dim), self.nefc, self.nv
        out = {f"_impl.contact.{n}": [] for n in _CONTACT_FIELDS}
        out |= {f"_impl.{n}": [] for n in _EFC_FIELDS}
        for j in range(B):
            d = r.batch.get_data(j, r.data)
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
            for n in _CONTACT_FIELDS:
                src = np.asarray(getattr(c, n))
                if n == "frame":
                    src = src.reshape(-1, 3, 3)
                value = np.zeros((ncon, *src.shape[1:]), dtype=np.float64)
                if n == "dist":
                    value[:] = 1e10
                value[filled] = src[cmap[filled]]
                out[f"_impl.contact.{n}"].append(value)
            if mujoco.mj_isSparse(self.model):
                efc_j = np.zeros((int(d.nefc), nv))
                mujoco.mju_sparse2dense(
                    efc_j, d.efc_J, d.efc_J_rownnz, d.efc_J_rowadr, d.efc_J_colind
                )
            else:
                efc_j = np.asarray(d.efc_J).reshape(-1, nv) if nv else np.zeros((0, 0))
            starts_d = (0, int(d.ne), int(d.ne) + int(d.nf))
            starts_m = (0, self.ne, self.ne + self.nf)
            sizes = (int(d.ne), int(d.nf), int(d.nl))
            for n in _EFC_FIELDS:
                src = efc_j if n == "efc_J" else np.asarray(getattr(d, n))
                value = np.zeros((nefc, nv)) if n == "efc_J" else np.zeros(nefc)
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
                out[f"_impl.{n}"].append(value)
        return {k: np.stack(v) for k, v in out.items()}


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
