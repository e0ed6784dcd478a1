"""The flat `mjSTATE_FULLPHYSICS` state vector: its layout, and building and splitting it in JAX.

The state is what `mj.mj_getState(..., mjSTATE_FULLPHYSICS)` writes and `mujoco.rollout`
reads: time, qpos, qvel, act, history, plugin state and plasticity, concatenated in that (bit)
order. Keeping MuJoCo's own layout means a state leaves and enters the engine without copying
fields one by one, and users can hand states to `mujoco.rollout` unchanged.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._model import MjModel, mj

if TYPE_CHECKING:  # jaxtyping is a test-time dependency only
    from jaxtyping import Array, ArrayLike, Float

    # Aliases: ruff reads jaxtyping's shape strings in annotations as (bad) forward references.
    States = Float[Array, "*batch nstate"]
    StatesLike = Float[ArrayLike, "*batch nstate"]

__all__ = ["FULLPHYSICS", "MAXVAL", "MAXVAL2", "Layout", "StateParts", "flat", "sum_of_squares"]

FULLPHYSICS = int(mj.mjtState.mjSTATE_FULLPHYSICS)
MAXVAL = float(mj.mjMAXVAL)  # beyond this MuJoCo calls a state or a control bad
MAXVAL2 = MAXVAL * MAXVAL  # a sum of squares at most this has no term beyond MAXVAL

#: The most numbers one `np.vdot` is given: OpenBLAS runs a dot product of more than 10,000
#: on its threads, which on a busy machine costs a thousand times what one thread takes
#: (each thread waits for a core; see docs/performance.md).
DOT_BLOCK = 8192


def sum_of_squares(a: np.ndarray) -> float:
    """The sum of the squares of `a`'s entries, on the calling thread: finite only if every
    entry is (NaN and Inf propagate; an overflow gives Inf too). One BLAS call for an array of
    at most `DOT_BLOCK` entries, the common case of the engine's checks."""
    v = a.reshape(-1)  # a view of a C-contiguous array
    n = v.size
    if n <= DOT_BLOCK:
        return float(np.vdot(v, v))
    # The built-in sum: its overflow gives Inf, where `math.fsum` would raise.
    return sum(
        (float(np.vdot(c, c)) for c in (v[i : i + DOT_BLOCK] for i in range(0, n, DOT_BLOCK))),
        0.0,
    )


def flat(a: np.ndarray, core: int = 1) -> np.ndarray:
    """`a` with all but its last `core` dimensions collapsed into one.

    `a.reshape(-1, *core_shape)` cannot infer that dimension when a core size is 0: a model
    without actuators has `nu == 0`, without degrees of freedom `nv == 0`.
    """
    return a.reshape(math.prod(a.shape[: a.ndim - core]), *a.shape[a.ndim - core :])


# The components of mjSTATE_FULLPHYSICS, in the bit order MuJoCo concatenates them.
_COMPONENTS = (
    ("time", mj.mjtState.mjSTATE_TIME),
    ("qpos", mj.mjtState.mjSTATE_QPOS),
    ("qvel", mj.mjtState.mjSTATE_QVEL),
    ("act", mj.mjtState.mjSTATE_ACT),
    ("history", mj.mjtState.mjSTATE_HISTORY),
    ("plugin", mj.mjtState.mjSTATE_PLUGIN),
    ("plastic", mj.mjtState.mjSTATE_PLASTIC),
)


class StateParts(NamedTuple):
    """The named parts of a state, each with the state's leading (batch) dimensions.

    `time` has shape `(*batch,)`; the others `(*batch, size)`, with size 0 where the model
    has none of that part.
    """

    time: Array
    qpos: Array
    qvel: Array
    act: Array
    history: Array
    plugin: Array
    plastic: Array


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """Offsets and sizes of each part of the `mjSTATE_FULLPHYSICS` vector of one model."""

    sizes: tuple[int, ...]
    offsets: tuple[int, ...]
    nstate: int
    initial: np.ndarray  # float64 (nstate,): the state of a fresh MjData (qpos0 or keyframe 0)

    @classmethod
    def from_model(cls, model: MjModel) -> Layout:
        sizes = tuple(int(mj.mj_stateSize(model, int(bit))) for _, bit in _COMPONENTS)
        offsets = tuple(int(o) for o in np.cumsum((0,) + sizes[:-1]))
        nstate = int(mj.mj_stateSize(model, FULLPHYSICS))
        if sum(sizes) != nstate:  # a MuJoCo version with parts we do not know about
            raise NotImplementedError(
                f"jaxbridge.mujoco: mjSTATE_FULLPHYSICS has {nstate} numbers but its known parts "
                f"add up to {sum(sizes)}; this MuJoCo version ({mj.__version__}) is not "
                "supported."
            )
        data = mj.MjData(model)
        if model.nkey > 0:  # keyframe 0 is the model author's chosen start
            mj.mj_resetDataKeyframe(model, data, 0)
        initial = np.empty(nstate)
        mj.mj_getState(model, data, initial, FULLPHYSICS)
        return cls(sizes=sizes, offsets=offsets, nstate=nstate, initial=initial)

    def size(self, name: str) -> int:
        return self.sizes[[n for n, _ in _COMPONENTS].index(name)]

    def slice(self, name: str) -> slice:
        i = [n for n, _ in _COMPONENTS].index(name)
        return slice(self.offsets[i], self.offsets[i] + self.sizes[i])

    def split(self, state: StatesLike) -> StateParts:
        state = jnp.asarray(state)
        self.check(state, "split_state(state=...)")
        parts = {name: state[..., self.slice(name)] for name, _ in _COMPONENTS}
        parts["time"] = parts["time"][..., 0]
        return StateParts(**parts)

    def make(self, dtype=None, **parts: ArrayLike | None) -> States:
        given = {k: jnp.asarray(v) for k, v in parts.items() if v is not None}
        batch_shapes = []
        for name, value in given.items():
            if name == "time":
                batch_shapes.append(value.shape)
                continue
            n = self.size(name)
            if value.ndim == 0 or value.shape[-1] != n:
                raise ValueError(
                    f"`Simulator.make_state({name}=...)` must have trailing dimension {n} "
                    f"(this model's {name} size); got shape {value.shape}."
                )
            batch_shapes.append(value.shape[:-1])
        try:
            batch = jnp.broadcast_shapes(*batch_shapes) if batch_shapes else ()
        except ValueError:
            shapes = {k: v.shape for k, v in given.items()}
            raise ValueError(
                "`Simulator.make_state`: the leading (batch) dimensions of the parts do not "
                f"broadcast together; got shapes {shapes}."
            ) from None
        if dtype is None:
            dtype = jnp.zeros(()).dtype  # float64 under x64, float32 otherwise
        pieces = []
        for name, _ in _COMPONENTS:
            n = self.size(name)
            if name in given:
                value = given[name].astype(dtype)
                value = value[..., None] if name == "time" else value
            else:
                value = jnp.asarray(self.initial[self.slice(name)], dtype)
            pieces.append(jnp.broadcast_to(value, (*batch, n)))
        return jnp.concatenate(pieces, axis=-1)

    def check(self, state: jax.Array | np.ndarray, where: str) -> None:
        if state.ndim == 0 or state.shape[-1] != self.nstate:
            raise ValueError(
                f"`Simulator.{where}` must have trailing dimension nstate={self.nstate} "
                f"(this model's mjSTATE_FULLPHYSICS size: 1 + nq + nv + na + ...); got shape "
                f"{tuple(state.shape)}. Build one with `sim.make_state(...)`."
            )
