"""The compiled field call (`jaxbridge.mujoco._native`, `_rows.cc`): XLA's buffers into
MuJoCo's batch and back in C. Each test runs it beside the Python path it replaces (the same
program with the library withheld) and raw MuJoCo, and checks which path ran from the HLO."""

import os
from typing import Any

import jax
import jax.numpy as jnp
import mujoco as _mujoco
import numpy as np
import pytest

mjx = pytest.importorskip("mujoco.mjx")

from mjx_models import scene, states  # noqa: E402

from jaxbridge.mujoco import _fields, _native  # noqa: E402
from jaxbridge.mujoco import mjx as cmjx  # noqa: E402

mujoco: Any = _mujoco  # MuJoCo ships no type stubs

pytestmark = pytest.mark.skipif(
    os.environ.get("JAXBRIDGE_NATIVE") == "0", reason="JAXBRIDGE_NATIVE=0: no compiled call"
)


@pytest.fixture
def python_path():
    """The Python path: the library withheld, as where it cannot be built."""
    jax.clear_caches()
    with _native.withheld("withheld by the test"):
        yield
    jax.clear_caches()


def _hlo(f, *args) -> str:
    return jax.jit(f).lower(*args).as_text()


def test_the_compiled_call_builds_here():
    # gcc and g++ are on every machine this project runs on (and in CI): no silent fallback
    assert _native.available(), _native.why()
    assert _native.why() == ""
    with _native.withheld("a test"):
        assert not _native.available() and _native.why() == "a test"
    assert _native.available() and _native.why() == ""


def _loop(mx, n=6):
    step = jax.vmap(cmjx.step, (None, 0))

    def loop(x):
        def body(x, _):
            x = step(mx, x)
            return x, (x.qpos, x.qvel, x.sensordata, x.xpos)

        final, seen = jax.lax.scan(body, x, length=n)
        # the final state's fields (not its contacts, which take the converting path)
        return (final.qpos, final.qvel, final.time, final.qacc_warmstart, final.cvel), seen

    return loop


def _compiled_and_python(loop, x0):
    """`loop(x0)` compiled (its lowering holds the target and the state's aliases), and the
    same on the Python path (the library withheld, no target), each leaf equal bit for bit."""
    text = _hlo(loop, x0)
    assert _native.TARGET in text
    assert "output_operand_alias" in text or "output_to_operand_aliasing" in text
    got = jax.jit(loop)(x0)
    jax.clear_caches()
    with _native.withheld():
        assert _native.TARGET not in _hlo(loop, x0)
        want = jax.jit(loop)(x0)
    jax.clear_caches()
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    return got


def test_a_scan_of_steps_runs_compiled_and_equals_the_python_path_and_raw_steps(x64, monkeypatch):
    m = scene()
    mx = cmjx.put_model(m)
    ds = states(m, 4, seed=3)
    x0 = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *[mjx.put_data(m, d) for d in ds])
    _, seen = _compiled_and_python(_loop(mx), x0)
    qpos, qvel = seen[0], seen[1]
    for i, d in enumerate(ds):
        for t in range(qpos.shape[0]):
            mujoco.mj_step(m, d)
            np.testing.assert_allclose(qpos[t, i], d.qpos, atol=1e-12, rtol=0)
            np.testing.assert_allclose(qvel[t, i], d.qvel, atol=1e-12, rtol=0)


def _ffi(steps: _fields.FieldSteps, B: int, forward: bool, *ins: np.ndarray) -> list[Any]:
    """The compiled call of `steps`' outputs, through `jax.ffi.ffi_call` alone."""
    rows = steps.native(B, forward, "test")
    assert rows is not None
    result = [jax.ShapeDtypeStruct((B, *s), d) for s, d in zip(steps.out_shapes, steps.out_dtypes)]
    call = jax.ffi.ffi_call(_native.TARGET, result)
    return jax.jit(lambda *a: call(*a, **rows.attributes(range(len(result)))))(*ins)


@pytest.mark.parametrize("forward", [False, True])
def test_every_kind_of_output_equals_the_field_steps_python_path(x64, forward):
    """State columns, float and int fields, the warning counts, and the reset of what no input
    gives (the warm start), on a batch one of whose rows MuJoCo warns on."""
    m = scene()
    B = 5
    rng = np.random.default_rng(0)
    ds = states(m, B, seed=4)
    qpos = np.stack([d.qpos for d in ds])
    qvel = np.stack([d.qvel for d in ds]) + rng.normal(size=(B, m.nv))
    ctrl = rng.uniform(-1, 1, (B, m.nu))
    qvel[2, 0] = 1e11  # MuJoCo warns on this row (bad qvel), resets it, and steps on
    outputs = ("qpos", "qvel", "time", "xpos", "ncon", "qfrc_actuator", "sensordata", "warning")
    steps = _fields.FieldSteps(m, ("qpos", "qvel", "ctrl"), outputs, nstep=2)
    run = steps.forward if forward else steps.step
    want = run(qpos, qvel, ctrl, exact=True)
    for _ in range(2):  # the counters and the reset columns are fresh on every call
        got = _ffi(steps, B, forward, qpos, qvel, ctrl)
        for name, g, w in zip(outputs, got, want):
            assert np.asarray(g).dtype == w.dtype, name
            np.testing.assert_array_equal(np.asarray(g), w, err_msg=name)
    assert want[-1][2].any() and not want[-1][0].any()  # the bad row warned, the others not


def test_a_callback_installed_after_compiling_fails_the_call_naming_it(x64):
    m = scene()
    mx = cmjx.put_model(m)
    x0 = jax.tree_util.tree_map(
        lambda *x: jnp.stack(x), *[mjx.put_data(m, d) for d in states(m, 2, seed=5)]
    )
    step = jax.jit(jax.vmap(lambda d: cmjx.step(mx, d).qpos))
    jax.block_until_ready(step(x0))
    assert _native.TARGET in jax.jit(jax.vmap(lambda d: cmjx.step(mx, d).qpos)).lower(x0).as_text()
    mujoco.set_mjcb_control(lambda model, data: None)
    try:
        with pytest.raises(Exception, match="mjcb_control.*jax.clear_caches"):
            jax.block_until_ready(step(x0))
        # compiled afresh while one is installed: the host-call path, never the compiled
        # one, and that path's batch refuses a Python callback, by name
        fresh = jax.jit(jax.vmap(lambda d: cmjx.step(mx, d).qvel))
        assert _native.TARGET not in fresh.lower(x0).as_text()
        with pytest.raises(Exception, match="mjcb_control is a Python function"):
            jax.block_until_ready(fresh(x0))
    finally:
        mujoco.set_mjcb_control(None)


def test_a_sharded_program_falls_back_to_the_python_path_on_each_device(x64):
    n = jax.device_count()
    m = scene()
    mx = cmjx.put_model(m)
    ds = states(m, 2 * n, seed=6)
    x0 = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *[mjx.put_data(m, d) for d in ds])
    mesh = jax.make_mesh((n,), ("d",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d"))
    x0 = jax.device_put(x0, sharding)
    f = jax.vmap(lambda d: cmjx.step(mx, d).qpos)
    text = _hlo(f, x0)
    assert f"num_partitions = {n}" in text and _native.TARGET not in text
    qpos = np.asarray(jax.jit(f)(x0))
    for i, d in enumerate(ds):
        mujoco.mj_step(m, d)
        np.testing.assert_allclose(qpos[i], d.qpos, atol=1e-12, rtol=0)


def test_the_python_path_serves_when_the_library_is_withheld(x64, python_path):
    m = scene()
    mx = cmjx.put_model(m)
    ds = states(m, 3, seed=7)
    x0 = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *[mjx.put_data(m, d) for d in ds])
    f = jax.vmap(lambda d: cmjx.step(mx, d).qpos)
    assert _native.TARGET not in _hlo(f, x0)
    qpos = jax.jit(f)(x0)
    for i, d in enumerate(ds):
        mujoco.mj_step(m, d)
        np.testing.assert_allclose(qpos[i], d.qpos, atol=1e-12, rtol=0)


def test_a_field_call_made_again_reuses_its_plan(x64):
    """Plans are never freed (a compiled program holds their addresses): one rebuilt from a
    cache reuses the plan of what it computes instead of making another batch."""
    m = scene()
    a = _fields.FieldSteps(m, ("qpos", "qvel"), ("qpos", "xpos"))
    b = _fields.FieldSteps(m, ("qpos", "qvel"), ("qpos", "xpos"))
    c = _fields.FieldSteps(m, ("qpos", "qvel"), ("qpos", "cvel"))
    assert a.native(3) is b.native(3)
    assert a.native(3) is not c.native(3) and a.native(3) is not a.native(4)
    assert a.native(3) is not a.native(3, forward=True)


def test_a_program_compiled_in_another_process_is_refused(x64):
    """Every call carries its process's token: a program from JAX's persistent compilation
    cache, compiled elsewhere, fails by name before its plan's address is read."""
    m = scene()
    steps = _fields.FieldSteps(m, ("qpos", "qvel"), ("qpos",))
    rows = steps.native(2)
    assert rows is not None
    attributes = dict(rows.attributes([0]))
    attributes["token"] = np.int64(rows.token ^ 1)  # another process's
    call = jax.ffi.ffi_call(_native.TARGET, [jax.ShapeDtypeStruct((2, m.nq), np.float64)])
    qpos, qvel = np.zeros((2, m.nq)), np.zeros((2, m.nv))
    with pytest.raises(Exception, match="compiled in another process"):
        jax.block_until_ready(jax.jit(lambda *a: call(*a, **attributes))(qpos, qvel))
    good = jax.jit(lambda *a: call(*a, **rows.attributes([0])))(qpos, qvel)
    np.testing.assert_array_equal(good[0], steps.step(qpos, qvel, exact=True)[0])


def _f32_batch(m, ds):
    return jax.tree_util.tree_map(
        lambda *x: (
            jnp.stack(x).astype(jnp.float32) if jnp.stack(x).dtype == jnp.float64 else jnp.stack(x)
        ),  # fmt: skip
        *[mjx.put_data(m, d) for d in ds],
    )


def test_a_float32_scan_of_steps_runs_compiled_and_equals_the_python_path():
    """x64 off (Playground's default): the same program takes the compiled call, MuJoCo's
    float64 rows widened from and rounded to float32 in C, as the Python twin does."""
    assert not jax.config.jax_enable_x64
    m = scene()
    ds = states(m, 4, seed=3)
    with jax.enable_x64(True):
        mx = cmjx.put_model(m)
    x0 = _f32_batch(m, ds)
    assert x0.qpos.dtype == jnp.float32
    got = _compiled_and_python(_loop(mx), x0)
    assert all(np.asarray(a).dtype != np.float64 for a in jax.tree_util.tree_leaves(got))


def test_a_float32_step_is_mj_step_rounded_once():
    """One step from float32 inputs: MuJoCo's step of the exactly widened state, each result
    rounded once to float32 (bit for bit)."""
    m = scene()
    ds = states(m, 3, seed=5)
    with jax.enable_x64(True):
        mx = cmjx.put_model(m)
    x0 = _f32_batch(m, ds)
    read = ("qpos", "qvel", "qacc_warmstart", "sensordata", "xpos", "time")

    def fields(d):  # the fields an environment reads (contacts take the generic path)
        return {name: getattr(d, name) for name in read}

    step = jax.jit(jax.vmap(lambda x: fields(cmjx.step(mx, x))))  # the model closed over
    assert _native.TARGET in step.lower(x0).as_text()
    out = step(x0)
    for i in range(len(ds)):
        d = mujoco.MjData(m)
        for name in ("qpos", "qvel", "act", "ctrl", "qacc_warmstart", "time"):
            value = np.asarray(getattr(x0, name)[i], np.float64)
            if name == "time":
                d.time = float(value)
            else:
                getattr(d, name)[:] = value
        mujoco.mj_step(m, d)
        for name in read[:-1]:
            got = np.asarray(out[name][i])
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, np.asarray(getattr(d, name), np.float32), name)
        assert out["time"][i] == np.float32(d.time)
