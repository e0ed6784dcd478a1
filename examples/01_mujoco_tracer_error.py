"""User question 1: a Flax VAE's latent code written into MuJoCo's `data.qpos` under `jax.jit`.

The original snippet fails with `TracerArrayConversionError`: inside `jit` (and `grad`, `vmap`)
the decoded pose is a tracer, not numbers, and `data.qpos[:] = qpos` needs numbers. The
jaxbridge version writes the pose into a state with `Simulator.make_state` and asks
`Simulator.forward` for the hand's position: it runs under `jit`, over a batch under `vmap` (one
call into MuJoCo), and differentiates, so the decoder trains on a MuJoCo loss.

    python examples/01_mujoco_tracer_error.py [--quick]
"""

import argparse

import gymnasium
import jax
import jax.numpy as jnp
import mujoco
import optax
from flax import nnx

from jaxbridge.mujoco import Simulator

parser = argparse.ArgumentParser()
parser.add_argument("--quick", action="store_true", help="fewer training steps")
args = parser.parse_args()

LATENT = 4


class Decoder(nnx.Module):  # the decoder half of the user's VAE: latent code -> joint angles
    def __init__(self, njoint: int, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(LATENT, 32, rngs=rngs)
        self.out = nnx.Linear(32, njoint, rngs=rngs)

    def __call__(self, z):
        return 0.5 * nnx.tanh(self.out(nnx.tanh(self.hidden(z))))


# --- before: the snippet from the question ------------------------------------------------
env = gymnasium.make("Humanoid-v5")
model = env.unwrapped.model
data = mujoco.MjData(model)
hand = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "right_hand")
decoder = Decoder(model.nq - 7, nnx.Rngs(0))  # qpos[:7] is the free root joint
z = jax.random.normal(jax.random.key(0), (LATENT,))


def hand_height_mujoco(decoder, z):
    data.qpos[:7] = model.qpos0[:7]
    data.qpos[7:] = model.qpos0[7:] + decoder(z)  # <- TracerArrayConversionError under jit
    mujoco.mj_forward(model, data)
    return data.geom_xpos[hand, 2]


try:
    nnx.jit(hand_height_mujoco)(decoder, z)
except jax.errors.TracerArrayConversionError as e:
    print("before:", type(e).__name__, "-", str(e).splitlines()[0][:80], "...")

# --- after: the same loss with jaxbridge ---------------------------------------------------
sim = Simulator.from_gymnasium("Humanoid-v5")
qpos0 = sim.split_state(sim.initial_state()).qpos


def hand_height(decoder, z):
    qpos = qpos0.at[7:].add(decoder(z))  # a tracer: fine
    out = sim.forward(sim.make_state(qpos=qpos), outputs=("geom_xpos",))
    return out["geom_xpos"][hand, 2]


print("after:  hand height under jit:", float(nnx.jit(hand_height)(decoder, z)))
zs = jax.random.normal(jax.random.key(1), (16, LATENT))
batched = nnx.jit(lambda d, zs: jax.vmap(hand_height, in_axes=(None, 0))(d, zs))
print("        16 latent codes under vmap (one MuJoCo call):", batched(decoder, zs).shape)

# ...and it differentiates: train the decoder to raise the right hand to 1.8 m, through
# MuJoCo's kinematics.
optimizer = nnx.Optimizer(decoder, optax.adam(1e-2), wrt=nnx.Param)


@nnx.jit
def train_step(decoder, optimizer, zs):
    heights = lambda d: jax.vmap(hand_height, in_axes=(None, 0))(d, zs)
    loss_fn = lambda d: jnp.mean(jnp.square(heights(d) - 1.8))
    loss, grads = nnx.value_and_grad(loss_fn)(decoder)
    optimizer.update(decoder, grads)
    return loss


first = float(train_step(decoder, optimizer, zs))
for _ in range(5 if args.quick else 50):
    last = float(train_step(decoder, optimizer, zs))
print(f"        jit(grad) training: mean (hand height - 1.8 m)² {first:.4f} -> {last:.4f}")
assert last < first
