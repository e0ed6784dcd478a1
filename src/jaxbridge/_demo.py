"""The main job behind `python -m jaxbridge demo`: the user stories, end to end.

Stage 1 is the first user question at its smallest: a gymnasium humanoid, a host function that
writes a JAX array into `data.qpos`, runs `mujoco.mj_forward` and returns the head height,
called under `jax.jit` and over a batch under `jax.vmap`.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import numpy as np


def _humanoid() -> Any:
    try:
        import gymnasium
        import mujoco
    except ImportError as e:  # pragma: no cover - the demo installs `jaxbridge[all]`
        raise SystemExit(
            "the demo needs MuJoCo and gymnasium: `pip install jaxbridge[all]` (or `make demo`)."
        ) from e
    env = gymnasium.make("Humanoid-v5")
    model = env.unwrapped.model  # type: ignore[attr-defined]
    env.close()
    return mujoco, model


def stage_head_height(report: list[str], quick: bool) -> None:
    import jax
    import jax.numpy as jnp

    import jaxbridge

    mujoco, model = _humanoid()
    head = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "head")
    data = mujoco.MjData(model)

    def head_height_numpy(qpos):
        data.qpos[:] = qpos  # what the user wrote: fails on a tracer
        mujoco.mj_forward(model, data)
        return data.geom_xpos[head, 2]

    qpos0 = jnp.asarray(model.qpos0, jnp.float32)
    try:
        jax.jit(head_height_numpy)(qpos0)
        failed = "no error (unexpected)"
    except jax.errors.TracerArrayConversionError as e:
        failed = type(e).__name__
    print(f"[1/1] plain function under jax.jit: {failed}")

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
        "Stage 1: MuJoCo head height under jit and vmap",
        f"  plain NumPy function under jax.jit: {failed}",
        f"  jaxbridge.host: head height at qpos0 {h0:.4f} m",
        f"  vmap over {batch} poses: {batch / elapsed:,.0f} poses/s, max error vs raw MuJoCo "
        f"{err:.2e}",
    ]


def run(*, quick: bool = False, out: str = "demo-output") -> int:
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    report: list[str] = []
    start = time.perf_counter()
    stage_head_height(report, quick)
    report.append(f"Total time: {time.perf_counter() - start:.1f} s")
    (folder / "summary.txt").write_text("\n".join(report) + "\n")
    print(f"\nReport written to {folder / 'summary.txt'}")
    return 0
