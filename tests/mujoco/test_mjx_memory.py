"""What jaxbridge keeps for a model goes when the model does: a sweep over morphologies that
makes a model, steps it through `jaxbridge.mujoco.mjx` under `jit(vmap(...))` and drops it
keeps nothing of it (the registry entry, the copies with other values, the step's plans and
batches), while a model still held keeps running."""

from __future__ import annotations

import gc
import os
import weakref

import jax
import mujoco
import numpy as np
import pytest

from jaxbridge.mujoco import mjx
from jaxbridge.mujoco.mjx import _model

# A free box and a hinged capsule whose sizes change from model to model: new bytes each time.
XML = """<mujoco><worldbody><geom type="plane" size="5 5 .1"/>
<body pos="0 0 {h}"><freejoint/><geom type="box" size="{s} {s} {s}"/></body>
<body pos=".5 0 {h}"><joint type="hinge"/><geom type="capsule" size="{s} {s}"/></body>
</worldbody></mujoco>"""


def _make(i: int) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(XML.format(h=0.5 + 1e-3 * i, s=0.05 + 5e-4 * i))


def _sweep_one(i: int, steps: int = 3) -> tuple[weakref.ref, np.ndarray]:
    """Make model `i`, step a batch of 4 copies of its first state under jit(vmap), drop it."""
    m = _make(i)
    mx = mjx.put_model(m)
    d = mjx.put_data(m, mujoco.MjData(m))
    batch = jax.tree.map(lambda x: np.stack([np.asarray(x)] * 4), d)  # NumPy: no dispatch
    run = jax.jit(jax.vmap(lambda d: mjx.step(mx, d, nstep=steps)))
    qpos = np.asarray(run(batch).qpos)
    return weakref.ref(m), qpos


def _collect() -> None:
    jax.clear_caches()
    gc.collect()


def test_a_dropped_model_leaves_nothing_behind():
    _collect()
    before = _model.registered()
    gone, qpos = _sweep_one(0)
    # the result is MuJoCo's own (rounded once to the program's dtype: float32 with x64 off)
    m = _make(0)
    d = mujoco.MjData(m)
    for _ in range(3):
        mujoco.mj_step(m, d)
    np.testing.assert_array_equal(qpos, np.stack([d.qpos.astype(qpos.dtype)] * 4))
    _collect()
    assert gone() is None, "the MjModel outlived every reference the user had"
    assert _model.registered() == before


def test_a_held_mjx_model_keeps_its_c_model_and_its_derived_models_running():
    m = _make(1)
    mx = mjx.put_model(m)
    d0 = mjx.put_data(m, mujoco.MjData(m))
    gone = weakref.ref(m)
    del m  # the user keeps only the mjx.Model: jaxbridge keeps the C model it runs on
    _collect()
    assert gone() is not None
    heavier = mx.replace(body_mass=mx.body_mass * 2)  # derived: served while `mx` is alive
    out = jax.jit(mjx.step)(heavier, d0)
    assert np.isfinite(np.asarray(out.qpos)).all()
    # a second registration of the same MjModel holds it too, beside the first
    again = mjx.put_model(gone())
    del mx, heavier, out
    _collect()
    assert gone() is not None
    np.testing.assert_array_equal(jax.jit(mjx.step)(again, d0).qpos, mjx.step(again, d0).qpos)
    del again
    _collect()
    assert gone() is None


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads /proc/self/statm")
def test_a_sweep_over_models_stays_bounded():
    for i in range(5):  # warm: the first compilations, MuJoCo's and JAX's own caches
        _sweep_one(1000 + i, steps=1)
    _collect()
    before, start = _model.registered(), _rss_mib()
    n, models = 80, []
    for i in range(n):
        models.append(_sweep_one(i, steps=1)[0])
        if i % 40 == 39:  # JAX's caches hold the programs (and the models they close over)
            _collect()
    grown = (_rss_mib() - start) / n
    assert _model.registered() == before
    assert not [i for i, gone in enumerate(models) if gone() is not None]
    # ~4 MiB a model before what was kept went with the model; ~0.15 MiB now (allocator
    # slack); MJX's own step grows ~4 MiB a model in the same loop.
    assert grown < 1.0, f"the process grew {grown:.2f} MiB a model over {n} models"
