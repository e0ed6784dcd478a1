"""Domain randomisation: `jaxbridge.mujoco.mjx.step` on an mjx.Model whose fields vary under `vmap`.

Each batch element runs on the registered MjModel with its own values of the varying fields
written in (per-simulation fields of one `mujoco.batch` call), checked against raw
`mujoco.mj_step` on a copy of the MjModel with those values set, through MJX's converters.
"""

import copy
from typing import Any

import jax
import jax.numpy as jnp
import mujoco as _mujoco
import numpy as np
import pytest

mjx = pytest.importorskip("mujoco.mjx")

from mjx_models import scene, states  # noqa: E402
from test_mjx import assert_data_equal, raw  # noqa: E402

from jaxbridge.mujoco import mjx as cmjx  # noqa: E402
from jaxbridge.mujoco.mjx import _host as _mjx_host  # noqa: E402

mujoco: Any = _mujoco  # MuJoCo ships no type stubs

B = 3
FIELDS = ("geom_friction", "body_mass", "dof_damping", "actuator_gainprm")


def _randomised(mx, seed=0):
    """`B` values of a few fields Playground's randomisers vary, and the batched mjx.Model."""
    rng = np.random.default_rng(seed)
    own = {k: np.asarray(getattr(mx, k)) for k in FIELDS}
    values = {
        "geom_friction": own["geom_friction"] * rng.uniform(0.5, 1.5, (B, 1, 1)),
        "body_mass": own["body_mass"] * rng.uniform(0.8, 1.2, (B, mx.nbody)),
        "dof_damping": own["dof_damping"] + rng.uniform(0.0, 0.3, (B, mx.nv)),
        "actuator_gainprm": own["actuator_gainprm"] * rng.uniform(0.9, 1.1, (B, 1, 1)),
    }
    values = {k: jnp.asarray(v) for k, v in values.items()}
    # brax's `in_axes` for a randomised model: 0 where a field varies, None elsewhere
    axes = jax.tree_util.tree_map(lambda _: None, mx).tree_replace({k: 0 for k in values})
    batched = mx.tree_replace(values)
    return values, batched, axes


def _mj_model_with(m, values, i):
    """A copy of `m` with element `i` of every varying field written in."""
    mi = copy.copy(m)
    for name, v in values.items():
        getattr(mi, name)[...] = np.asarray(v[i]).reshape(getattr(mi, name).shape)
    return mi


@pytest.fixture
def model(x64):
    m = scene()
    return m, cmjx.put_model(m)


def test_varying_fields_run_each_element_on_its_own_values(model, monkeypatch):
    m, mx = model
    values, batched, axes = _randomised(mx)
    data = [mjx.put_data(m, d) for d in states(m, B, seed=5)]
    stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *data)
    calls = []
    run = _mjx_host.Calls.run

    def counted(self, kind, inputs, live, n, *args):
        calls.append((n, args[1] if len(args) > 1 else ()))
        return run(self, kind, inputs, live, n, *args)

    monkeypatch.setattr(_mjx_host.Calls, "run", counted)
    out = jax.jit(jax.vmap(cmjx.step, (axes, 0)))(batched, stacked)
    assert len(calls) == 1 and calls[0][0] == B  # one batch call
    assert sorted(calls[0][1]) == sorted(values)  # the varying fields, and no others
    for i in range(B):
        mi = _mj_model_with(m, values, i)
        want = raw(mi, data[i])
        assert_data_equal(jax.tree_util.tree_map(lambda x, i=i: x[i], out), want)
    own = jax.jit(jax.vmap(cmjx.step, (None, 0)))(mx, stacked)
    assert np.abs(np.asarray(out.qvel) - np.asarray(own.qvel)).max() > 1e-6  # values matter
    # the original model is untouched, and a later unbatched step runs on it
    assert np.array_equal(m.body_mass, scene().body_mass)
    assert_data_equal(jax.jit(cmjx.step)(mx, data[0]), raw(m, data[0]))


def test_randomised_rollout_under_scan_and_its_gradient(model):
    """A short randomised rollout (Playground's domain-randomised training step), and the
    gradient of its return in the controls against central differences of raw steps."""
    m, mx = model
    values, batched, axes = _randomised(mx, seed=1)
    d0 = states(m, 1, seed=6)[0]
    data = mjx.put_data(m, d0)

    def ret(model_i, u):
        def body(x, _):
            x = cmjx.step(model_i, x.replace(ctrl=u))
            return x, jnp.sum(x.qpos[7:] ** 2) + jnp.sum(x.qvel[:3])

        return jnp.sum(jax.lax.scan(body, data, length=3)[1])

    u = jnp.array([0.3, -0.2, 0.1])
    got = jax.jit(jax.vmap(ret, (axes, None)))(batched, u)
    grads = jax.jit(jax.vmap(jax.grad(ret, argnums=1), (axes, None)))(batched, u)

    def raw_ret(mi, u):
        d = mjx.get_data(m, data)
        total = 0.0
        for _ in range(3):
            d.ctrl[:] = u
            mujoco.mj_step(mi, d)
            total += np.sum(d.qpos[7:] ** 2) + np.sum(d.qvel[:3])
        return total

    h = 1e-6
    for i in range(B):
        mi = _mj_model_with(m, values, i)
        np.testing.assert_allclose(got[i], raw_ret(mi, np.asarray(u)), rtol=1e-12, atol=1e-12)
        ref = [
            (raw_ret(mi, np.asarray(u) + h * e) - raw_ret(mi, np.asarray(u) - h * e)) / (2 * h)
            for e in np.eye(3)
        ]
        np.testing.assert_allclose(grads[i], ref, rtol=1e-4, atol=1e-6)
    assert not np.allclose(got[0], got[1])  # the elements do differ


def test_a_field_the_batch_cannot_vary_is_named(model):
    m, mx = model
    data = mjx.make_data(mx)
    extent = jnp.asarray([1.0, 2.0]) * mx.stat.extent

    def f(e):
        return cmjx.step(mx.tree_replace({"stat.extent": e}), data).qpos

    with pytest.raises(Exception, match=r"field `stat.extent` differs.*batch element 1"):
        jax.block_until_ready(jax.jit(jax.vmap(f))(extent))
    # the same value in every element is the model's own
    same = jax.jit(jax.vmap(f))(jnp.stack([mx.stat.extent, mx.stat.extent]))
    np.testing.assert_allclose(same[0], same[1])


def test_derivatives_in_the_model_are_refused(model):
    m, mx = model
    data = mjx.put_data(m, states(m, 1)[0])

    def f(mass):
        return jnp.sum(cmjx.step(mx.replace(body_mass=mass), data).qpos)

    with pytest.raises(TypeError, match="derivatives with respect to the mjx.Model's fields"):
        jax.grad(f)(mx.body_mass)
    # a model that is traced but not differentiated is fine
    g = jax.jit(
        jax.grad(
            lambda q, mass: jnp.sum(
                cmjx.step(mx.replace(body_mass=mass), data.replace(qpos=q)).qpos
            )
        )
    )(data.qpos, mx.body_mass)
    assert np.all(np.isfinite(g))


def test_new_values_in_the_same_program_are_written_in(model):
    """One jitted program (the model its argument) called with two randomisations: each call
    runs on its own values (the engine's per-row fields rewritten where they changed), and the
    model's own values after them run on the model again."""
    m, mx = model
    data = [mjx.put_data(m, d) for d in states(m, B, seed=10)]
    stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *data)
    axes = _randomised(mx)[2]
    f = jax.jit(jax.vmap(lambda mm, x: cmjx.step(mm, x).qvel, (axes, 0)))
    for seed in (2, 3):
        values, batched, _ = _randomised(mx, seed=seed)
        got = f(batched, stacked)
        for i in range(B):
            want = raw(_mj_model_with(m, values, i), data[i]).qvel
            np.testing.assert_allclose(got[i], want, atol=1e-12, rtol=0)
    own = mx.tree_replace(
        {k: jnp.asarray(np.stack([np.asarray(getattr(mx, k))] * B)) for k in FIELDS}
    )
    got = f(own, stacked)
    for i in range(B):
        np.testing.assert_allclose(got[i], raw(m, data[i]).qvel, atol=1e-12, rtol=0)
    assert f._cache_size() == 1  # type: ignore[attr-defined]
