"""The compact `mjx.Data` of `jaxbridge.playground`'s States (`_carried.py`).

- A State carries every state field, and every derived field it carries equals that of a
  State that carries all (`carry_all`), exactly, step after step, under `jit(scan(vmap))`.
- A field it does not carry raises `NotCarriedError` naming the field and the remedy on any
  use: arithmetic, conversion, indexing, attribute access, MJX's own `mjx.get_data`.
- A step's host call computes only fields the State carries (the dead-code rule sees the rest
  unused).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mujoco import mjx
from reference import actions

from jaxbridge import playground
from jaxbridge.mujoco.mjx import _data as L
from jaxbridge.playground import _carried

NAME = "WalkerWalk"


def _rollout(env, B, U):
    keys = jax.random.split(jax.random.PRNGKey(1), B)

    @jax.jit
    def run(U):
        states = jax.vmap(env.reset)(keys)

        def body(s, u):
            s = jax.vmap(env.step)(s, u)
            return s, s.reward

        return jax.lax.scan(body, states, U)

    return run(U)


def test_carried_fields_equal_a_full_states(x64):
    B, T = 3, 6
    U = jnp.asarray(np.stack([actions(NAME, 6, T, seed=s) for s in range(B)], 1))
    compact, full = playground.load(NAME), playground.carry_all(playground.load(NAME))
    (cs, cr), (fs, fr) = _rollout(compact, B, U), _rollout(full, B, U)
    np.testing.assert_array_equal(cr, fr)
    c_flat = jax.tree_util.tree_flatten_with_path(cs.data, is_leaf=L.is_missing)[0]
    f_flat = dict(jax.tree_util.tree_flatten_with_path(fs.data)[0])
    present = 0
    for path, x in c_flat:
        if L.is_missing(x):
            continue
        present += 1
        np.testing.assert_array_equal(x, f_flat[path], err_msg=jax.tree_util.keystr(path))
    assert 14 < present < len(f_flat)  # the state and some derived fields, not all
    for field in ("qpos", "qvel", "time", "qacc_warmstart", "ctrl", "sensordata", "xpos"):
        assert not L.is_missing(getattr(cs.data, field)), field


def test_a_field_not_carried_raises_naming_it(x64):
    env = playground.load(NAME)
    state = jax.jit(env.step)(jax.jit(env.reset)(jax.random.PRNGKey(0)), jnp.zeros(6))
    missing = state.data.cvel
    assert L.is_missing(missing)
    uses = (
        lambda: missing + 1,
        lambda: np.asarray(missing),
        lambda: jnp.asarray(missing),
        lambda: missing[0],
        lambda: missing.shape,
        lambda: jnp.sum(missing),
        lambda: missing == 0,
        lambda: mjx.get_data(env.mj_model, state.data),
    )
    for use in uses:
        with pytest.raises(playground.NotCarriedError, match="carry_all") as e:
            use()
        assert "is not carried" in str(e.value)
    with pytest.raises(L.NotCarriedError, match=r"`cvel`"):
        np.asarray(missing)


def test_a_step_computes_only_the_fields_it_carries(x64):
    from jax._src.interpreters import partial_eval as pe

    env = playground.load(NAME)
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    found = _carried.carried(env, type(env).__mro__[1])
    closed = jax.make_jaxpr(env.step)(state, jnp.zeros(6))
    jaxpr, _ = pe.dce_jaxpr(closed.jaxpr, [True] * len(closed.jaxpr.outvars))
    computed = set()
    for fn, used in _carried._host_calls(jaxpr):
        layout, live = fn._jaxbridge_mjx
        assert _carried._same(layout, found.layout)
        computed |= {i for i, u in zip(live, used) if u}
    derived = {i for i in found.keep if found.layout.leaves[i].kind not in (L.STATE, L.KEPT)}
    assert computed, "no mjx host call in the step"
    assert computed <= found.keep  # nothing computed that the State drops
    # every derived field the step computes is one the State carries, and some are left out
    assert {i for i in computed if found.layout.leaves[i].kind != L.STATE} <= derived
    assert len(found.keep) < len(found.layout.leaves)


def test_carry_all_takes_only_its_environments():
    from mujoco_playground import registry

    with pytest.raises(TypeError, match="carry_all"):
        playground.carry_all(registry.load("CartpoleBalance"))
