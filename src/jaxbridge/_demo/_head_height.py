"""Stage 1: the first user question at its smallest.

A gymnasium humanoid, a host function that writes a JAX array into `data.qpos`, runs
`mujoco.mj_forward` and returns the head height, called under `jax.jit` and over a batch under
`jax.vmap`.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import numpy as np

from ._common import humanoid_model


def stage(report: list[str], *, quick: bool, out: pathlib.Path) -> None:
    """MuJoCo head height under jit and vmap"""
    import jax
    import jax.numpy as jnp

    import jaxbridge

    mujoco, model = humanoid_model()
    head = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "head")
    data = mujoco.MjData(model)

    def head_height_numpy(qpos: Any) -> Any:
        data.qpos[:] = qpos  # what the user wrote: fails on a tracer
        mujoco.mj_forward(model, data)
        return data.geom_xpos[head, 2]

    qpos0 = jnp.asarray(model.qpos0, jnp.float32)
    try:
        jax.jit(head_height_numpy)(qpos0)
        failed = "no error (unexpected)"
    except jax.errors.TracerArrayConversionError as e:
        failed = type(e).__name__
    print(f"      plain function under jax.jit: {failed}")

    @jaxbridge.host(init=lambda: mujoco.MjData(model))
    def head_height(qpos, *, state):
        state.qpos[:] = qpos  # a NumPy array now, on this worker's own MjData
        mujoco.mj_forward(model, state)
        return state.geom_xpos[head, 2]

    h0 = float(jax.jit(head_height)(qpos0))
    print(f"      jaxbridge.host under jax.jit: head height at qpos0 = {h0:.4f} m")
    batch = 64 if quick else 1024
    rng = np.random.default_rng(0)
    poses = np.tile(model.qpos0, (batch, 1))
    poses[:, 7:] += rng.normal(scale=0.3, size=(batch, model.nq - 7))
    poses[:, 2] += rng.normal(scale=0.1, size=batch)
    poses = jnp.asarray(poses, jnp.float32)
    batched = jax.jit(jax.vmap(head_height))
    batched(poses).block_until_ready()
    start = time.perf_counter()
    heights = np.asarray(batched(poses))
    elapsed = time.perf_counter() - start
    # the same numbers from raw MuJoCo, no JAX in between
    raw = np.array([head_height_numpy(p) for p in np.asarray(poses, np.float64)])
    err = float(np.max(np.abs(heights - raw)))
    print(
        f"      jax.vmap over {batch} poses: one host call, {batch / elapsed:,.0f} poses/s; "
        f"heights {heights.min():.3f}..{heights.max():.3f} m; max |jaxbridge - raw MuJoCo| "
        f"= {err:.2e}"
    )
    report += [
        f"  plain NumPy function under jax.jit: {failed}",
        f"  jaxbridge.host: head height at qpos0 {h0:.4f} m",
        f"  vmap over {batch} poses: {batch / elapsed:,.0f} poses/s, max error vs raw MuJoCo "
        f"{err:.2e}",
    ]
