"""A MuJoCo controller optimised by gradient through `Simulator.rollout`, with Optax.

The hopper of gymnasium's `Hopper-v5` follows an open-loop control sequence made by a small
model: a linear map from Fourier features of time to the three motor torques, squashed by
`tanh`. The loss is the negative forward distance of the torso after `T` steps, plus a torque
penalty and a penalty for falling. Its gradient flows through the whole rollout: one host call
simulates it, and the rollout's derivative chains the per-step Jacobians MuJoCo's states give
(for the RK4 integrator of gymnasium's models, by batched central differences on MuJoCo's own
thread pool).

    python examples/05_mujoco_policy.py [--quick]
"""

import argparse

import jax
import jax.numpy as jnp
import optax

from jaxbridge.mujoco import Simulator

parser = argparse.ArgumentParser()
parser.add_argument("--quick", action="store_true", help="a shorter horizon, fewer steps")
args = parser.parse_args()
T, ITERATIONS = (20, 5) if args.quick else (40, 40)
FEATURES = 8

sim = Simulator.from_gymnasium("Hopper-v5")
start = sim.initial_state()
t = jnp.arange(T) * (sim.frame_skip * sim.model.opt.timestep)
freqs = jnp.arange(1, FEATURES // 2 + 1) * 2 * jnp.pi  # 1, 2, 3, 4 Hz
basis = jnp.concatenate([jnp.sin(t[:, None] * freqs), jnp.cos(t[:, None] * freqs)], axis=1)


def controls(params):
    return jnp.tanh(basis @ params["w"] + params["b"])  # (T, nu), inside the ctrl range


def loss(params):
    traj = sim.rollout(start, controls(params))  # ONE host call for all T steps
    qpos = sim.split_state(traj.state).qpos  # (T, nq): rootx, rootz, rooty, joints
    forward = qpos[-1, 0] - qpos[0, 0]
    fallen = jnp.mean(jnp.square(jnp.minimum(qpos[:, 1] - 1.0, 0.0)))  # torso below 1 m
    effort = jnp.mean(jnp.square(controls(params)))
    return -forward + 10.0 * fallen + 0.01 * effort, forward


params = {
    "w": 0.1 * jax.random.normal(jax.random.key(0), (FEATURES, sim.nu)),
    "b": jnp.zeros(sim.nu),
}
optimizer = optax.adam(0.02)
opt_state = optimizer.init(params)


@jax.jit
def train_step(params, opt_state):
    (value, forward), grads = jax.value_and_grad(loss, has_aux=True)(params)
    updates, opt_state = optimizer.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state, value, forward


first = None
for i in range(ITERATIONS):
    params, opt_state, value, forward = train_step(params, opt_state)
    first = float(forward) if first is None else first
    if i % max(ITERATIONS // 6, 1) == 0 or i == ITERATIONS - 1:
        print(f"step {i:3d}: loss {float(value):+.4f}, torso moved {float(forward):+.4f} m")
final = float(loss(params)[1])
print(
    f"{T}-step rollout ({T * sim.frame_skip} physics steps): forward distance "
    f"{first:+.4f} m -> {final:+.4f} m"
)
assert jnp.isfinite(final) and final > first
