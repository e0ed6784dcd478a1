"""A closed loop: a Flax NNX policy trained by backpropagation through `lax.scan` of `sim.step`.

The two-link arm of gymnasium's `Reacher-v5` must bring its fingertip to a target. At each of
`T` environment steps a small MLP (Flax NNX) reads the state (joint angles, velocities and the
fingertip-to-target vector) and sets the two motor torques; `sim.step` advances MuJoCo by one
environment step (`frame_skip` physics steps). The loss is the mean squared distance to the
target over the episode plus a torque penalty, averaged over a batch of random targets and
starting poses. Its gradient flows back through every `sim.step` of the `lax.scan` (each step's
Jacobian comes from MuJoCo, by batched central differences for the RK4 integrator) and through
the policy, and Optax updates the policy.

Under `jax.vmap` the whole batch is ONE host call into MuJoCo per scan step.

    python examples/07_closed_loop.py [--quick]
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxbridge.mujoco import Simulator

parser = argparse.ArgumentParser()
parser.add_argument("--quick", action="store_true", help="a shorter horizon, fewer steps")
args = parser.parse_args()
BATCH, T, ITERATIONS = (16, 25, 30) if args.quick else (64, 50, 150)

sim = Simulator.from_gymnasium("Reacher-v5")  # RK4, 2 physics steps of 10 ms per env step


def fingertip(qpos):
    """The fingertip's (x, y): links of 0.1 m and 0.11 m (reacher.xml), in JAX."""
    a, b = qpos[..., 0], qpos[..., 0] + qpos[..., 1]
    return jnp.stack(
        [0.1 * jnp.cos(a) + 0.11 * jnp.cos(b), 0.1 * jnp.sin(a) + 0.11 * jnp.sin(b)], -1
    )


def observe(state):
    parts = sim.split_state(state)
    q, v, target = parts.qpos[..., :2], parts.qvel[..., :2], parts.qpos[..., 2:]
    return jnp.concatenate(
        [jnp.cos(q), jnp.sin(q), 0.1 * v, 10.0 * (target - fingertip(parts.qpos))], -1
    )


class Policy(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(8, 64, rngs=rngs)
        self.out = nnx.Linear(64, sim.nu, rngs=rngs)

    def __call__(self, obs):
        # 30% of the motors' range (gear 200 on light links): a smoother, easier loop to learn
        return 0.3 * jnp.tanh(self.out(jnp.tanh(self.hidden(obs))))


def episode(policy, start):
    """Per-step distances and controls of one closed-loop episode from `start`."""

    def body(state, _):
        ctrl = policy(observe(state))
        state = sim.step(state, ctrl)  # MuJoCo: one host call for the whole batch
        parts = sim.split_state(state)
        dist = jnp.linalg.norm(fingertip(parts.qpos) - parts.qpos[..., 2:], axis=-1)
        return state, (dist, ctrl)

    _, (dist, ctrl) = jax.lax.scan(body, start, length=T)
    return dist, ctrl


def loss(policy, starts):
    dist, ctrl = jax.vmap(lambda s: episode(policy, s))(starts)
    return jnp.mean(dist**2) + 1e-3 * jnp.mean(ctrl**2), jnp.mean(dist[:, -1])


def random_starts(key, n):
    k1, k2, k3 = jax.random.split(key, 3)
    angles = jax.random.uniform(k1, (n, 2), minval=-jnp.pi, maxval=jnp.pi)
    angles = angles.at[:, 1].multiply(0.5)
    radius = jax.random.uniform(k2, (n,), minval=0.05, maxval=0.2)  # inside the arm's reach
    phi = jax.random.uniform(k3, (n,), minval=-jnp.pi, maxval=jnp.pi)
    target = radius[:, None] * jnp.stack([jnp.cos(phi), jnp.sin(phi)], -1)
    return sim.make_state(qpos=jnp.concatenate([angles, target], -1))


# The JAX kinematics above is MuJoCo's: check once against `mj_forward`.
check = random_starts(jax.random.key(1), 4)
xpos = sim.forward(check, outputs=("xpos",))["xpos"]
tip = sim.model.body("fingertip").id
np.testing.assert_allclose(fingertip(sim.split_state(check).qpos), xpos[:, tip, :2], atol=1e-5)

policy = Policy(nnx.Rngs(0))
optimizer = nnx.Optimizer(policy, optax.adam(1e-2), wrt=nnx.Param)
eval_starts = random_starts(jax.random.key(2), BATCH)


@nnx.jit
def train_step(policy, optimizer, starts):
    (value, final), grads = nnx.value_and_grad(loss, has_aux=True)(policy, starts)
    optimizer.update(policy, grads)
    return value, final


evaluate = nnx.jit(loss)
before = float(evaluate(policy, eval_starts)[1])
key = jax.random.key(3)
for i in range(ITERATIONS):
    key, sub = jax.random.split(key)
    value, final = train_step(policy, optimizer, random_starts(sub, BATCH))
    if i % max(ITERATIONS // 6, 1) == 0 or i == ITERATIONS - 1:
        print(f"step {i:3d}: loss {float(value):.5f}, final distance {float(final):.4f} m")
after = float(evaluate(policy, eval_starts)[1])
print(
    f"{BATCH} held-out targets, {T} env steps ({T * sim.frame_skip} physics steps): mean final "
    f"distance to target {before:.4f} m -> {after:.4f} m"
)
assert np.isfinite(after) and after < 0.85 * before
