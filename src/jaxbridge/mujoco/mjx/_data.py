"""Which `MjData` field each leaf of an `mjx.Data` (impl "jax") is, and what a step does to it.

An mjx.Data is MJX's pytree of every `MjData` array it models, in MJX's shapes: the inputs of a
step (`mjSTATE_INTEGRATION`: time, qpos, qvel, act, history, the warm start, the controls,
applied forces, `eq_active`, mocap poses, userdata, plugin state), the fields derived from them,
and in `_impl` the rest (dense mass matrix and its factor, dense actuator moments and tendon
Jacobian, the contact list in MJX's fixed slots, the constraint rows). `Layout` sorts the leaves
into how a step makes each one:

- `STATE`: read from the simulation's row after the call (time, qpos, qvel, act, history,
  warm start, plugin state; `mj_forward` leaves them as they were);
- `KEPT`: inputs no call changes (controls, applied forces, mocap, `eq_active`, userdata),
  and MJX's constant `efc_type`, passed through;
- `BOUND`: an `MjData` array of the same name, read from the batch (`mujoco.batch` binds it);
- `DENSE`: `M`, `qLD`, `qLDiagInv`, `actuator_moment`, `ten_J`, `solver_niter`, converted as
  `mjx.put_data` converts them;
- `ROWS`: the contact list and the constraint rows, read from each simulation's `MjData`.

A field MuJoCo leaves as it was (no acceleration sensor: `cacc`, `cfrc_ext`, ...; `qfrc_inverse`
always) keeps its input value, as `mjx.get_data`, `mj_step` and `mjx.put_data` would leave it:
`Layout` finds these entries once per model by running the call on an `MjData` filled with NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from .._model import mj

__all__ = ["Layout", "INPUTS"]

mujoco: Any = mj
_S = mujoco.mjtState

#: The leaves that make the simulation's state, by `mjSTATE_*` bit, in row order.
INPUTS = (
    ("time", int(_S.mjSTATE_TIME)),
    ("qpos", int(_S.mjSTATE_QPOS)),
    ("qvel", int(_S.mjSTATE_QVEL)),
    ("act", int(_S.mjSTATE_ACT)),
    ("history", int(_S.mjSTATE_HISTORY)),
    ("qacc_warmstart", int(_S.mjSTATE_WARMSTART)),
    ("ctrl", int(_S.mjSTATE_CTRL)),
    ("qfrc_applied", int(_S.mjSTATE_QFRC_APPLIED)),
    ("xfrc_applied", int(_S.mjSTATE_XFRC_APPLIED)),
    ("eq_active", int(_S.mjSTATE_EQ_ACTIVE)),
    ("mocap_pos", int(_S.mjSTATE_MOCAP_POS)),
    ("mocap_quat", int(_S.mjSTATE_MOCAP_QUAT)),
    ("userdata", int(_S.mjSTATE_USERDATA)),
    ("plugin_state", int(_S.mjSTATE_PLUGIN)),
)
_INTEGRATION = int(_S.mjSTATE_INTEGRATION)
_STEPPED = ("time", "qpos", "qvel", "act", "history", "qacc_warmstart", "plugin_state")
_DENSE = ("M", "qLD", "qLDiagInv", "actuator_moment", "ten_J", "solver_niter")
#: The float inputs a derivative is taken in (time, history, plugin state and userdata are
#: held constant, as `jaxbridge.mujoco` holds them).
DIFFERENTIATED = (
    "qpos",
    "qvel",
    "act",
    "qacc_warmstart",
    "ctrl",
    "qfrc_applied",
    "xfrc_applied",
    "mocap_pos",
    "mocap_quat",
)

STATE, KEPT, BOUND, DENSE, ROWS = "state", "kept", "bound", "dense", "rows"


@dataclass(frozen=True)
class Leaf:
    """One leaf of an mjx.Data: its path, MJX shape and dtype, kind and `MjData` name."""

    path: str
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    kind: str


class Layout:
    """The leaves of a model's mjx.Data (see the module), and the row's columns of its inputs."""

    def __init__(self, mj_model: Any, template: Any):
        self.mj_model = mj_model
        if int(mujoco.mj_stateSize(mj_model, int(_S.mjSTATE_PLASTIC))):
            raise NotImplementedError(
                "`jaxbridge.mujoco.mjx`: this model has plastic state, which an mjx.Data "
                "cannot hold."
            )
        flat, self.treedef = jax.tree_util.tree_flatten_with_path(template)
        leaves = []
        for p, v in flat:
            path = ".".join(str(getattr(k, "name", k)) for k in p)
            name = path.split(".")[-1]
            if path.startswith("_impl.contact.") or (
                path.startswith("_impl.efc_") and name != "efc_type"
            ):
                kind = ROWS
            elif name == "efc_type" or (name in dict(INPUTS) and name not in _STEPPED):
                kind = KEPT
            elif name in _STEPPED:
                kind = STATE
            elif name in _DENSE:
                kind = DENSE
            else:
                kind = BOUND
            leaves.append(Leaf(path, name, tuple(v.shape), np.dtype(v.dtype), kind))
        self.leaves: tuple[Leaf, ...] = tuple(leaves)
        self.index = {leaf.path: i for i, leaf in enumerate(self.leaves)}
        self.ncol = int(mujoco.mj_stateSize(mj_model, _INTEGRATION))
        self.columns: dict[str, slice] = {}
        for name, bit in INPUTS:
            lo = int(mujoco.mj_stateSize(mj_model, _INTEGRATION & (bit - 1)))
            n = int(mujoco.mj_stateSize(mj_model, bit))
            self.columns[name] = slice(lo, lo + n)
        self.kept_entries = {"step": self._untouched("step"), "forward": self._untouched("forward")}

    def input_paths(self) -> tuple[str, ...]:
        """The paths of the leaves a call reads (its inputs), in `INPUTS` order."""
        return tuple(name for name, _ in INPUTS)

    def _untouched(self, kind: str) -> dict[str, np.ndarray]:
        """The entries of each bound field that a call leaves as they were: where a
        NaN written before it survives (at `qpos0` and at a perturbed pose, with motion)."""
        m = self.mj_model
        untouched: dict[str, np.ndarray] | None = None
        rng = np.random.default_rng(0)
        for shift in (0.0, 0.05):
            d = mujoco.MjData(m)
            d.qpos[:] = m.qpos0 + shift * rng.standard_normal(m.nq)
            d.qvel[:] = shift * rng.standard_normal(m.nv)
            names = [leaf.name for leaf in self.leaves if leaf.kind == BOUND]
            for n in names:
                a = getattr(d, n, None)
                if isinstance(a, np.ndarray) and a.dtype.kind == "f":
                    a[...] = np.nan
            (mujoco.mj_step if kind == "step" else mujoco.mj_forward)(m, d)
            now = {
                n: np.isnan(getattr(d, n))
                for n in names
                if isinstance(getattr(d, n, None), np.ndarray) and getattr(d, n).dtype.kind == "f"
            }
            if untouched is None:
                untouched = now
            else:
                untouched = {n: untouched[n] & now[n] for n in untouched}
        assert untouched is not None
        return {n: u for n, u in untouched.items() if u.any()}

    def rows(self, inputs: dict[str, np.ndarray], B: int) -> np.ndarray:
        """`(B, ncol)` float64 `mjSTATE_INTEGRATION` rows from the input leaves, `(B, *shape)`."""
        rows = np.empty((B, self.ncol))
        for name, _ in INPUTS:
            cols = self.columns[name]
            if cols.start != cols.stop:
                rows[:, cols] = inputs[name].reshape(B, -1)
        return rows


NOT_CARRIED = "`{path}` of this mjx.Data is not carried: {why} Remedy: {remedy}"
_NOT_CARRIED_WHY = "the program that made this Data left it out, so no step computed it."
_NOT_CARRIED_REMEDY = "make the Data with every field (`mjx.make_data`, or a full step's)."


class Missing:
    """A leaf a compact mjx.Data does not carry: a pytree node with no leaves, in place of the
    field, that raises an error naming the field, why it is missing and the remedy on any use
    (attribute access, indexing, conversion to an array, arithmetic, iteration, truth).

    Its pytree structure is its field's (the path and message, no leaves): compact Datas of
    one environment have one structure (a `lax.scan` carry, `jax.tree.map` over two States)."""

    __slots__ = ("_path", "_why", "_remedy")

    def __init__(self, path: str, why: str = _NOT_CARRIED_WHY, remedy: str = _NOT_CARRIED_REMEDY):
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_why", why)
        object.__setattr__(self, "_remedy", remedy)

    @property
    def path(self) -> str:
        """The field's path in the mjx.Data (`xpos`, `_impl.contact.dist`)."""
        return self._path

    def error(self) -> NotCarriedError:
        """The error any use of this placeholder raises."""
        return NotCarriedError(
            NOT_CARRIED.format(path=self._path, why=self._why, remedy=self._remedy)
        )

    def __repr__(self) -> str:
        return f"Missing({self._path!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Missing, (self._path, self._why, self._remedy))

    def __copy__(self) -> Missing:
        return self  # immutable

    def __deepcopy__(self, memo: Any) -> Missing:
        return self

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # protocols probed by name, and its own (unset) slots
            raise AttributeError(name)
        raise self.error()

    def __setattr__(self, name: str, value: Any) -> None:
        raise self.error()

    def _raise(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error()

    __array__ = __jax_array__ = __getitem__ = __setitem__ = __len__ = __iter__ = _raise
    __bool__ = __float__ = __int__ = __index__ = __complex__ = _raise
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _raise
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _raise
    __pow__ = __rpow__ = __matmul__ = __rmatmul__ = __neg__ = __pos__ = __abs__ = _raise
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __and__ = __or__ = __xor__ = (
        __invert__
    ) = _raise
    __array_ufunc__ = __array_function__ = _raise
    __hash__ = object.__hash__


class NotCarriedError(LookupError):
    """A field of a compact mjx.Data (`Missing`) was used: the message names it and the remedy.

    Not an `AttributeError`, so that `hasattr` and `getattr(x, name, default)` raise it too
    rather than pass over the missing field."""


jax.tree_util.register_pytree_node(
    Missing,
    lambda m: ((), (m._path, m._why, m._remedy)),
    lambda aux, _: Missing(*aux),
)


def is_missing(x: Any) -> bool:
    """Whether `x` is a `Missing` placeholder (a leaf for `tree_flatten(is_leaf=...)`)."""
    return isinstance(x, Missing)
