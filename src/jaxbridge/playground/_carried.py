"""Which leaves of an environment's `mjx.Data` its States carry: a step costs what it reads.

A Playground `State` carries its `mjx.Data` from step to step (through a `lax.scan`, an RL
loop's rollout), and a carried leaf is never dead code: every leaf the Data holds would be
computed by C MuJoCo and copied, each step, though the environment reads a few. So the States
of `jaxbridge.playground.load`'s environments carry a compact Data:

- the state a step reads and advances: every leaf of `mjSTATE_INTEGRATION` (time, qpos, qvel,
  act, history, warm start, plugin state, controls, applied forces, `eq_active`, mocap poses,
  userdata), and MJX's constant `efc_type`;
- the fields MuJoCo leaves wholly or partly as they were (`qfrc_inverse`, `cacc`, ... without
  acceleration sensors): no call computes them, so carrying them costs nothing, and they hold
  the values `mj_step` would;
- every empty field (a model without tendons has an empty `ten_length`): made in JAX, free;
- the derived fields the environment's own code reads: found once per environment by tracing
  its `step` on a full Data and applying JAX's dead-code elimination (with the host call's rule
  for its outputs) to everything the step returns except the Data's derived fields. Those the
  step reads from its input Data (before its physics) are found the same way;

and in place of every other field a `Missing` placeholder (a pytree node with no leaves), which
raises `NotCarriedError` naming the field and the remedy on any use. `carry_all(env)` makes an
environment's States carry every field.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import jax
import jax.numpy as jnp
from jax._src import core as jax_core
from jax._src.interpreters import partial_eval as pe

from jaxbridge._primitive import host_call_p
from jaxbridge.mujoco.mjx import _data as L
from jaxbridge.mujoco.mjx import _step as _mjx_step
from jaxbridge.mujoco.mjx._model import resolve

from ._route import on_c_mujoco

__all__ = ["Carried", "carried", "carry_all"]

_ATTR = "_jaxbridge_carried"
_lock = threading.Lock()
WHY = (
    "the environment's own reset, step, observation, reward and termination code never reads "
    "it, so jaxbridge.playground's steps neither compute nor copy it (a step costs only what "
    "the environment reads)."
)
REMEDY = (
    "`env = jaxbridge.playground.carry_all(env)` makes the environment's States carry every "
    "field of the mjx.Data, each exactly as `mj_step` leaves it (each step then computes and "
    "copies all of them); reset a State with it to have them."
)


class Carried:
    """The leaves (in the Layout's order) the States of one environment carry."""

    def __init__(self, layout: L.Layout, keep: frozenset[int]):
        self.layout = layout
        self.keep = keep
        self.paths = tuple(leaf.path for i, leaf in enumerate(layout.leaves) if i in keep)

    def compact(self, data: Any) -> Any:
        """`data` (an mjx.Data of the environment's model, full or compact) with a `Missing`
        placeholder for each field not carried."""
        flat = jax.tree_util.tree_flatten(data, is_leaf=L.is_missing)[0]
        leaves = self.layout.leaves
        new = [
            x if i in self.keep else L.Missing(leaves[i].path, WHY, REMEDY)
            for i, x in enumerate(flat)
        ]
        return jax.tree_util.tree_unflatten(self.layout.treedef, new)


def carried(env: Any, cls: type) -> Carried:
    """The `Carried` of environment `env` (an instance of Playground's class `cls`, its
    `reset` and `step` run on C MuJoCo), found on first use and kept on `env`."""
    found = env.__dict__.get(_ATTR)
    if found is not None:
        return found
    with _lock:
        found = env.__dict__.get(_ATTR)
        if found is None:
            found = _discover(env, cls)
            env.__dict__[_ATTR] = found
    return found


def carry_all(env: Any) -> Any:
    """Makes the States of `env` (a `jaxbridge.playground.load` environment) carry every field
    of their `mjx.Data`, as `mj_step` leaves it.

    By default a State carries the state and only the derived fields the environment's own
    code reads; the others are placeholders that raise `NotCarriedError`. With every field
    carried, each step computes and copies all of them (see docs/playground.md, "Speed").

    Args:
        env: an environment of `jaxbridge.playground.load`.

    Returns:
        `env` itself: its `reset` and `step` from now on return full Datas (a program traced
        before keeps what it traced).

    Raises:
        TypeError: `env` is not an environment of `jaxbridge.playground.load`.
    """
    if not getattr(type(env), "_jaxbridge_playground", False):
        raise TypeError(
            "`jaxbridge.playground.carry_all(env)` takes an environment of "
            f"`jaxbridge.playground.load`; got {type(env).__name__}."
        )
    layout = _layout(env)
    with _lock:
        env.__dict__[_ATTR] = Carried(layout, frozenset(range(len(layout.leaves))))
    return env


def _layout(env: Any) -> L.Layout:
    """The Layout of the MjModel that runs `env`'s mjx.Model (the first one registered of its
    bytes: `mjx._model.resolve`)."""
    return _mjx_step._model_for(resolve(env.mjx_model)).layout


def _same(a: L.Layout, b: L.Layout) -> bool:
    """Whether two Layouts number the same leaves alike (models of one structure)."""
    if a is b:
        return True
    return a.treedef == b.treedef and [(x.path, x.shape) for x in a.leaves] == [
        (y.path, y.shape) for y in b.leaves
    ]


def _always(layout: L.Layout) -> set[int]:
    """The leaves every compact Data carries: the state and the kept inputs, the fields
    MuJoCo leaves (wholly or partly) as they were, and the empty ones (no call makes them on
    the host, and they cost nothing)."""
    untouched = layout.kept_entries["step"].keys() | layout.kept_entries["forward"].keys()
    return {
        i
        for i, leaf in enumerate(layout.leaves)
        if leaf.kind in (L.STATE, L.KEPT)
        or (leaf.kind == L.BOUND and leaf.name in untouched)
        or not math.prod(leaf.shape)
    }


def _discover(env: Any, cls: type) -> Carried:
    layout = _layout(env)
    keep = _always(layout)
    key = jax.random.PRNGKey(0)

    def reset(k: jax.Array) -> Any:
        with on_c_mujoco():
            return cls.reset(env, k)

    state = jax.eval_shape(reset, key)
    flat, treedef = jax.tree_util.tree_flatten(state.data, is_leaf=L.is_missing)
    if treedef != layout.treedef or any(L.is_missing(x) for x in flat):
        raise ValueError(
            f"`jaxbridge.playground`: {type(env).__name__}.reset returned an mjx.Data that "
            "is not its model's full impl='jax' Data."
        )
    action = jax.ShapeDtypeStruct((int(env.action_size),), jnp.asarray(0.0).dtype)

    def step(data_leaves: list[Any], rest: Any, a: jax.Array) -> Any:
        s = rest.replace(data=jax.tree_util.tree_unflatten(treedef, data_leaves))
        with on_c_mujoco():
            out = cls.step(env, s, a)
        out_flat = jax.tree_util.tree_flatten(out.data, is_leaf=L.is_missing)[0]
        return out.replace(data=None), [x for i, x in enumerate(out_flat) if i in keep]

    closed = jax.make_jaxpr(step)(flat, state.replace(data=None), action)
    jaxpr, used_inputs = pe.dce_jaxpr(closed.jaxpr, [True] * len(closed.jaxpr.outvars))
    read = {i for i in range(len(flat)) if used_inputs[i]}  # the input Data's leaves read
    for fn, used in _host_calls(jaxpr):
        mine = getattr(fn, "_jaxbridge_mjx", None)
        if mine is not None and _same(mine[0], layout):
            read |= {i for i, u in zip(mine[1], used) if u}
    return Carried(layout, frozenset(keep | read))


def _host_calls(jaxpr: jax_core.Jaxpr) -> list[tuple[Any, tuple[bool, ...]]]:
    """`(fn, used_outputs)` of every host call in `jaxpr` and the jaxprs inside it."""
    found: list[tuple[Any, tuple[bool, ...]]] = []
    for eqn in jaxpr.eqns:
        if eqn.primitive is host_call_p:
            call = eqn.params["call"]
            found.append((call.fn, tuple(call.used_outputs)))
        for value in eqn.params.values():
            for x in value if isinstance(value, tuple | list) else (value,):
                if isinstance(x, jax_core.ClosedJaxpr):
                    found += _host_calls(x.jaxpr)
                elif isinstance(x, jax_core.Jaxpr):
                    found += _host_calls(x)
    return found
