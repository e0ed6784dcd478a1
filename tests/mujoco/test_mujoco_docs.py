"""The code in docs/mujoco.md runs, block after block, as a reader would run it."""

import pathlib
import re

import numpy as np

DOC = pathlib.Path(__file__).parents[2] / "docs" / "mujoco.md"


def test_user_guide_code_runs():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 3
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    assert np.isfinite(namespace["grad"]).all()


def test_first_user_question_humanoid():
    # A latent code (from a VAE, say) written into qpos, a loss on forward outputs, jit(grad).
    import jax
    import jax.numpy as jnp

    from jaxbridge.mujoco import Simulator

    sim = Simulator.from_gymnasium("Humanoid-v5")
    qpos0 = sim.split_state(sim.initial_state()).qpos

    def head_height(latent):
        state = sim.make_state(qpos=qpos0.at[7:9].add(latent))
        return sim.forward(state, outputs=("xpos",))["xpos"][1, 2]

    g = jax.jit(jax.grad(head_height))(jnp.zeros(2))
    assert g.shape == (2,) and np.isfinite(g).all()
