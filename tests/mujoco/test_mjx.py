"""`jaxbridge.mujoco.mjx.step`/`forward` against raw MuJoCo through MJX's own converters.

The reference of a step from an `mjx.Data` is `mjx.put_data(m, d)` after `mujoco.mj_step(m, d)`
on `d = mjx.get_data(m, data)`: every leaf of the Data, contacts and constraint rows included.
"""

from typing import Any

import jax
import jax.numpy as jnp
import mujoco as _mujoco
import numpy as np
import pytest

mjx = pytest.importorskip("mujoco.mjx")

from mjx_models import chain, crowd, crowd_states, pendulum, scene, states  # noqa: E402

from jaxbridge.mujoco import _fields  # noqa: E402
from jaxbridge.mujoco import mjx as cmjx  # noqa: E402
from jaxbridge.mujoco.mjx import _host as _mjx_host  # noqa: E402

mujoco: Any = _mujoco  # MuJoCo ships no type stubs


def _leaves(d):
    return jax.tree_util.tree_flatten_with_path(d)[0]


def assert_data_equal(got, want, atol=1e-9):
    for (path, a), b in zip(_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
        np.testing.assert_allclose(
            np.asarray(a, float),
            np.asarray(b, float),
            atol=atol,
            rtol=0,
            err_msg=jax.tree_util.keystr(path),
        )


def raw(m, data, fn=mujoco.mj_step):
    d = mjx.get_data(m, data)
    fn(m, d)
    return mjx.put_data(m, d)


@pytest.fixture
def model(x64):
    m = scene()
    return m, cmjx.put_model(m)


@pytest.mark.parametrize("fn", ["step", "forward"])
def test_equals_raw_mujoco_in_every_field(model, fn):
    m, mx = model
    raw_fn = mujoco.mj_step if fn == "step" else mujoco.mj_forward
    ours = jax.jit(getattr(cmjx, fn))
    for d in states(m, 3):
        assert d.ncon > 0
        data = mjx.put_data(m, d)
        assert_data_equal(ours(mx, data), raw(m, data, raw_fn))


def test_playground_models_with_contacts(x64):
    common = pytest.importorskip("mujoco_playground._src.dm_control_suite.common")
    from mujoco_playground._src import mjx_env

    for name in ("hopper", "cheetah", "humanoid"):
        xml = (mjx_env.ROOT_PATH / "dm_control_suite" / "xmls" / f"{name}.xml").read_text()
        m = mujoco.MjModel.from_xml_string(xml, common.get_assets())
        mx = cmjx.put_model(m)
        d = states(m, 1, settle=60)[0]
        data = mjx.put_data(m, d)
        assert_data_equal(jax.jit(cmjx.step)(mx, data), raw(m, data))


def test_vmap_is_one_batch_call_equal_to_single_steps(model, monkeypatch):
    m, mx = model
    data = [mjx.put_data(m, d) for d in states(m, 4, seed=1)]
    batch = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *data)
    calls = []
    run = _mjx_host.Calls.run

    def counted(self, kind, inputs, live, B, *args):
        calls.append(B)
        return run(self, kind, inputs, live, B, *args)

    monkeypatch.setattr(_mjx_host.Calls, "run", counted)
    out = jax.jit(jax.vmap(cmjx.step, (None, 0)))(mx, batch)
    assert calls == [4]
    for i, d in enumerate(data):
        assert_data_equal(jax.tree_util.tree_map(lambda x, i=i: x[i], out), raw(m, d))


def test_nested_vmap(model):
    m, mx = model
    data = [mjx.put_data(m, d) for d in states(m, 4, seed=2)]
    batch = jax.tree_util.tree_map(lambda *x: jnp.stack(x).reshape(2, 2, *x[0].shape), *data)
    out = jax.jit(jax.vmap(jax.vmap(cmjx.step, (None, 0)), (None, 0)))(mx, batch)
    np.testing.assert_allclose(out.qpos[1, 0], raw(m, data[2]).qpos, atol=1e-12)


def test_scan_equals_raw_steps(model):
    m, mx = model
    d = states(m, 1, seed=3)[0]
    data = mjx.put_data(m, d)
    out, qs = jax.jit(
        lambda x: jax.lax.scan(lambda x, _: (cmjx.step(mx, x), x.qpos), x, length=30)
    )(data)
    for _ in range(30):
        mujoco.mj_step(m, d)
    assert_data_equal(out, mjx.put_data(m, d))


def test_model_as_jit_argument(model):
    m, mx = model
    data = mjx.put_data(m, states(m, 1)[0])
    assert_data_equal(jax.jit(cmjx.step)(mx, data), raw(m, data))


def test_grad_matches_central_differences_of_raw_steps(model):
    m, mx = model
    d0 = states(m, 1, seed=4)[0]
    data = mjx.put_data(m, d0)

    def loss(u):
        def body(x, _):
            x = cmjx.step(mx, x.replace(ctrl=u))
            return x, jnp.sum(x.qpos[7:] ** 2) + jnp.sum(x.sensordata[:3])

        return jnp.sum(jax.lax.scan(body, data, length=4)[1])

    def raw_loss(u):
        d = mjx.get_data(m, data)
        total = 0.0
        for _ in range(4):
            d.ctrl[:] = u
            mujoco.mj_step(m, d)
            total += np.sum(d.qpos[7:] ** 2) + np.sum(d.sensordata[:3])
        return total

    u = np.array([0.3, -0.2, 0.1])
    g = jax.jit(jax.grad(loss))(jnp.asarray(u))
    h = 1e-6
    ref = [(raw_loss(u + h * e) - raw_loss(u - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(g, ref, rtol=1e-4, atol=1e-6)
    # forward mode agrees with reverse (both differences: to their rounding)
    jf = jax.jit(jax.jacfwd(loss))(jnp.asarray(u))
    np.testing.assert_allclose(jf, g, rtol=1e-5, atol=1e-9)


def test_float32_is_float64_rounded():
    m = scene()
    d = states(m, 1)[0]
    with jax.enable_x64(True):
        mx64 = cmjx.put_model(m)
        want = raw(m, mjx.put_data(m, d))
    mx = cmjx.put_model(m)
    out = jax.jit(cmjx.step)(mx, mjx.put_data(m, d))
    assert out.qpos.dtype == jnp.float32
    np.testing.assert_allclose(out.qpos, np.asarray(want.qpos, np.float32), rtol=1e-5, atol=1e-6)
    del mx64


def test_no_retrace(model):
    m, mx = model
    f = jax.jit(lambda x: cmjx.step(mx, x))
    data = mjx.put_data(m, states(m, 1)[0])
    f(data)
    f(data.replace(qpos=data.qpos + 0.01))
    assert f._cache_size() == 1  # type: ignore[attr-defined]


def test_a_changed_model_runs_on_its_own_copy(model):
    m, mx = model
    data = mjx.put_data(m, states(m, 1)[0])
    heavier = mx.replace(body_mass=mx.body_mass * 2.0)
    m2 = scene()
    m2.body_mass[:] = m.body_mass * 2.0
    assert_data_equal(jax.jit(lambda x: cmjx.step(heavier, x))(data), raw(m2, data))
    assert float(m.body_mass[1]) == float(scene().body_mass[1])  # the original is untouched


# -- errors ------------------------------------------------------------------------------


def test_unregistered_model(x64):
    m = chain(7)
    mx = mjx.put_model(m, impl="jax")
    with pytest.raises(ValueError, match="matches no registered MjModel.*put_model"):
        cmjx.step(mx, mjx.make_data(mx))
    cmjx.register(m, mx)
    cmjx.step(mx, mjx.make_data(mx))


def test_data_of_another_model(model):
    m, mx = model
    other = cmjx.put_model(pendulum())
    with pytest.raises(ValueError, match="not an mjx.Data of this model.*`qpos` has shape"):
        cmjx.step(mx, mjx.make_data(other))


def test_batched_data_without_vmap(model):
    m, mx = model
    data = mjx.make_data(mx)
    batch = jax.tree_util.tree_map(lambda x: jnp.stack([x, x]), data)
    with pytest.raises(ValueError, match="has shape.*batch it with `jax.vmap`"):
        cmjx.step(mx, batch)


def test_not_a_model(model):
    m, mx = model
    with pytest.raises(TypeError, match=r"`model` must be an `mjx.Model`; got MjModel"):
        cmjx.step(m, mjx.make_data(mx))


def test_warp_model_refused(x64):
    pytest.importorskip("warp")
    m = pendulum()
    with pytest.raises(ValueError, match="impl 'warp'.*impl='jax'"):
        cmjx.put_model(m, impl="warp")
    mx = mjx.put_model(m, impl="warp")
    with pytest.raises(ValueError, match="impl 'warp'.*impl='jax'"):
        cmjx.step(mx, mjx.make_data(m, impl="warp"))


def test_a_step_computes_and_differences_only_the_leaves_the_program_reads(model, monkeypatch):
    m, mx = model
    data = mjx.put_data(m, states(m, 1, seed=7)[0])
    seen = []
    run, native = _fields.FieldRows.run, _fields.FieldSteps.native

    def recorded(self, *args):
        seen.append((self.B, self.steps.outputs))
        return run(self, *args)

    def planned(self, B, *args):  # the compiled call's: its fields are fixed when lowered
        rows = native(self, B, *args)
        if rows is not None:
            seen.append((B, self.outputs))
        return rows

    monkeypatch.setattr(_fields.FieldRows, "run", recorded)
    monkeypatch.setattr(_fields.FieldSteps, "native", planned)
    qpos = jax.jit(lambda d: cmjx.step(mx, d).qpos)(data)
    assert seen == [(1, ("qpos",))]
    seen.clear()
    g = jax.jit(jax.grad(lambda u: jnp.sum(cmjx.step(mx, data.replace(ctrl=u)).qvel)))
    grad = g(jnp.zeros(3))
    np.testing.assert_allclose(qpos, raw(m, data).qpos, atol=1e-12)
    assert np.all(np.isfinite(grad))
    # the Jacobian's points (the center, then both sides of each differenced input entry),
    # of qvel alone: nothing else is computed, not even the primal step
    assert {outputs for _, outputs in seen} == {("qvel",)}
    assert [B for B, _ in seen][1] >= 2 * (m.nq + 2 * m.nv + m.nu)


@pytest.mark.parametrize("batched", [False, True])
def test_a_loop_of_state_and_sensors_runs_xla_buffers_into_the_engine(model, batched, monkeypatch):
    """`jit(scan(vmap(step)))` that reads state and derived fields only (an environment's
    step): XLA's buffers go straight into the engine's rows (no `Calls.run`), and equal raw
    steps."""
    m, mx = model
    ds = states(m, 3, seed=8)
    data = [mjx.put_data(m, d) for d in ds]
    x0 = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *data) if batched else data[0]
    step = jax.vmap(cmjx.step, (None, 0)) if batched else cmjx.step

    def loop(x):
        def body(x, _):
            x = step(mx, x)
            return x, (x.qpos, x.sensordata)

        return jax.lax.scan(body, x, length=5)[1]

    generic = []
    run = _mjx_host.Calls.run

    def counted(self, *args):
        generic.append(args[0])
        return run(self, *args)

    monkeypatch.setattr(_mjx_host.Calls, "run", counted)
    qpos, sensors = jax.jit(loop)(x0)
    assert generic == []
    for i, d in enumerate(ds if batched else ds[:1]):
        for t in range(5):
            mujoco.mj_step(m, d)
            got_q = qpos[t, i] if batched else qpos[t]
            got_s = sensors[t, i] if batched else sensors[t]
            np.testing.assert_allclose(got_q, d.qpos, atol=1e-12, rtol=0)
            np.testing.assert_allclose(got_s, d.sensordata, atol=1e-9, rtol=0)


@pytest.mark.parametrize("contacts", [False, True])
def test_a_step_returns_its_state_in_place_and_leaves_the_old_one_readable(
    model, contacts, monkeypatch
):
    """A step writes its new state into its input's buffers (`InPlace`): a loop that still
    reads the old state after the step sees it unchanged (XLA copies it first). With the
    contacts read, the call takes the converting path (`Batching._converted`)."""
    m, mx = model
    ds = states(m, 3, seed=11)
    x0 = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *[mjx.put_data(m, d) for d in ds])
    step = jax.vmap(cmjx.step, (None, 0))

    def body(x, _):
        y = step(mx, x)
        if contacts:
            y = y.tree_replace({"qvel": y.qvel + 0.0 * y._impl.contact.dist.sum()})
        return y, (x.qpos, x.qvel, y.qpos)

    converted = []
    made = _mjx_host.Batching._converted

    def counted(self, *args):
        converted.append(True)
        return made(self, *args)

    monkeypatch.setattr(_mjx_host.Batching, "_converted", counted)

    def loop(x):
        final, seen = jax.lax.scan(body, x, length=4)
        return final.qvel, seen  # the other leaves dead: the fast path, without contacts

    final_qvel, (old_q, old_v, new_q) = jax.jit(loop)(x0)
    assert bool(converted) == contacts
    np.testing.assert_array_equal(old_q[0], x0.qpos)
    np.testing.assert_array_equal(old_v[0], x0.qvel)
    np.testing.assert_array_equal(old_q[1:], new_q[:-1])
    for i, d in enumerate(ds):
        for t in range(4):
            mujoco.mj_step(m, d)
            np.testing.assert_allclose(new_q[t, i], d.qpos, atol=1e-12, rtol=0)
        np.testing.assert_allclose(final_qvel[i], d.qvel, atol=1e-9, rtol=0)


def test_nstep_is_that_many_raw_steps_in_one_call(model):
    m, mx = model
    d = states(m, 1, seed=9)[0]
    data = mjx.put_data(m, d)
    out = jax.jit(lambda x: cmjx.step(mx, x, nstep=5))(data)
    for _ in range(5):
        mujoco.mj_step(m, d)
    assert_data_equal(out, mjx.put_data(m, d))
    # batched, reading the state alone (XLA's buffers into the engine), and its derivative
    batch = jax.tree_util.tree_map(lambda x: jnp.stack([x, x]), data)
    qpos = jax.jit(jax.vmap(lambda x: cmjx.step(mx, x, nstep=5).qpos))(batch)
    np.testing.assert_allclose(qpos[1], d.qpos, atol=1e-12, rtol=0)
    five = jax.jit(jax.jacfwd(lambda u: cmjx.step(mx, data.replace(ctrl=u), nstep=5).qpos))
    one = jax.jit(
        jax.jacfwd(
            lambda u: (
                jax.lax.fori_loop(0, 5, lambda _, x: cmjx.step(mx, x.replace(ctrl=u)), data).qpos
            )
        )
    )
    u = jnp.asarray(data.ctrl)
    np.testing.assert_allclose(five(u), one(u), rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match=r"nstep=\.\.\.\)` must be an int >= 1; got 0"):
        cmjx.step(mx, data, nstep=0)


@pytest.mark.parametrize(
    ("cone", "jacobian"), [("pyramidal", "dense"), ("elliptic", "dense"), ("pyramidal", "sparse")]
)
def test_a_batch_whose_rows_have_different_contacts_and_rows(x64, cone, jacobian):
    """Each row's contacts in MJX's slots and its constraint rows at MJX's offsets, from one
    batch call: rows with contacts of every condim, fewer, and none, and with and without an
    active limit."""
    m = crowd(cone, jacobian)
    mx = cmjx.put_model(m)
    ds = crowd_states(m, [False, True, True, True, True, False])
    ncons = [d.ncon for d in ds]
    assert len(set(ncons)) >= 3 and 0 in ncons and len({d.nl for d in ds}) == 2
    dims = {3, 4, 6} if cone == "elliptic" else {1, 3, 4, 6}
    assert {int(c) for d in ds for c in d.contact.dim} == dims
    data = [mjx.put_data(m, d) for d in ds]
    batch = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *data)
    out = jax.jit(jax.vmap(cmjx.step, (None, 0)))(mx, batch)
    for i, d in enumerate(data):
        assert_data_equal(jax.tree_util.tree_map(lambda x, i=i: x[i], out), raw(m, d))


def test_a_batch_without_contacts(x64):
    m = crowd()
    mx = cmjx.put_model(m)
    ds = crowd_states(m, [True] * 4)
    ds = [d for d in ds if d.ncon == 0] or ds[:1]
    for d in ds:
        d.qpos[2::7][:4] += 1.0  # every free body well off the ground
        mujoco.mj_forward(m, d)
    assert all(d.ncon == 0 for d in ds)
    data = [mjx.put_data(m, d) for d in ds]
    batch = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *data)
    out = jax.jit(jax.vmap(cmjx.step, (None, 0)))(mx, batch)
    for i, d in enumerate(data):
        got = jax.tree_util.tree_map(lambda x, i=i: x[i], out)
        assert_data_equal(got, raw(m, d))
        assert np.all(np.asarray(got._impl.contact.dist) == 1e10)
