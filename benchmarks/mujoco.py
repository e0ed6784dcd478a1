"""jaxbridge.mujoco against raw `mujoco.rollout` and MJX, side by side in one run.

    python benchmarks/mujoco.py [--quick] [--nthread N]

For the gymnasium humanoid as shipped (RK4, PGS) and an Euler/Newton variant, at batch 1, 16
and 256, prints physics steps per second of:

- `jax.jit` of a `lax.scan` over `jax.vmap(sim.step)` (one host call per scan step),
- `jax.jit(sim.rollout)` (one host call for the whole trajectory),
- raw `mujoco.rollout` with a persistent pool of the same thread count,
- MJX `jax.jit(jax.vmap(mjx.step))` in a `lax.scan`, on the Euler/Newton variant only: MJX
  cannot load the shipped humanoid (it lacks the PGS solver);

with compile times, and gradients per second of a 50-step rollout loss. `--quick` measures
fewer batch sizes and runs MJX at batch 16 only; MJX at batch 256 needs `--mjx-256` (it
deadlocked in jaxlib's batched Cholesky on a 2-CPU machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# Run as a script, this file's folder comes first on sys.path and this file (mujoco.py) would
# shadow the mujoco package.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(__file__)]

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from mujoco import rollout as mj_rollout  # noqa: E402

from jaxbridge.mujoco import Simulator  # noqa: E402

jax.config.update("jax_enable_x64", True)


def humanoid(variant: str) -> mujoco.MjModel:
    import gymnasium

    path = os.path.join(os.path.dirname(gymnasium.__file__), "envs/mujoco/assets/humanoid.xml")
    model = mujoco.MjModel.from_xml_path(path)
    if variant == "euler-newton":
        model.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
        model.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    return model


def timed(f, *args, min_time=0.3):
    """(seconds of the first call, best seconds per later call).

    The best of several calls, not the mean: on a shared machine the noise only ever adds.
    """
    t0 = time.perf_counter()
    jax.block_until_ready(f(*args))
    first = time.perf_counter() - t0
    best, start = float("inf"), time.perf_counter()
    while time.perf_counter() - start < min_time or best == float("inf"):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - t0)
    return first, best


def inputs(sim: Simulator, B: int, T: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    parts = sim.split_state(sim.initial_state())
    qvel = 0.1 * rng.standard_normal((B, sim.model.nv))
    S = np.asarray(sim.make_state(qvel=jnp.asarray(qvel), qpos=parts.qpos))
    U = rng.uniform(-0.4, 0.4, (B, T, sim.nu))
    return S, U


def bench_jaxbridge(sim: Simulator, B: int, T: int):
    S, U = inputs(sim, B, T)

    @jax.jit
    def scan(S, U):
        def body(s, u):
            s = jax.vmap(sim.step)(s, u)
            return s, None

        return jax.lax.scan(body, S, jnp.swapaxes(U, 0, 1))[0]

    c_scan, t_scan = timed(scan, S, U)
    rollout = jax.jit(lambda S, U: sim.rollout(S, U).state)
    c_roll, t_roll = timed(rollout, S, U)
    return B * T / t_scan, B * T / t_roll, c_scan, c_roll


def bench_raw(model: mujoco.MjModel, sim: Simulator, B: int, T: int, nthread: int):
    S, U = inputs(sim, B, T)
    datas = [mujoco.MjData(model) for _ in range(max(nthread, 1))]
    with mj_rollout.Rollout(nthread=nthread if B > 1 else 0) as pool:
        _, t = timed(lambda: pool.rollout(model, datas if B > 1 else datas[0], S, U))
    return B * T / t


def bench_mjx(model: mujoco.MjModel, B: int, T: int):
    with jax.enable_x64(False):  # MJX's own precision; its scan carry breaks under x64
        return _bench_mjx(model, B, T)


def _bench_mjx(model: mujoco.MjModel, B: int, T: int):
    from mujoco import mjx

    mx = mjx.put_model(model)
    d0 = mjx.make_data(mx)
    noise = 0.01 * jax.random.normal(jax.random.key(0), (B, *d0.qvel.shape))
    batch = jax.vmap(lambda n: d0.replace(qvel=d0.qvel + n))(noise)
    step = jax.vmap(lambda d: mjx.step(mx, d))

    @jax.jit
    def run(d):
        return jax.lax.scan(lambda d, _: (step(d), None), d, None, length=T)[0].qpos

    first, t = timed(run, batch, min_time=0.1)
    return B * T / t, first - t


def bench_grad(sim: Simulator, B: int, T: int = 50):
    S, U = inputs(sim, B, T)

    def loss(s, u):
        traj = sim.rollout(s, u)
        return jnp.sum(traj.state[..., -1, 1:4] ** 2) + 1e-3 * jnp.sum(u**2)

    g = jax.jit(jax.vmap(jax.grad(loss, argnums=1)))
    c, t = timed(g, S, U, min_time=0.5)
    return B / t, c


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes, MJX at batch 16 only")
    parser.add_argument("--nthread", type=int, default=None, help="threads (default: all CPUs)")
    parser.add_argument("--mjx-256", action="store_true", help="also MJX at batch 256")
    args = parser.parse_args()
    batches = (1, 16) if args.quick else (1, 16, 256)
    # MJX at batch 256 deadlocked here (jaxlib's batched float32 Cholesky, lapack_spotrf_ffi,
    # waiting on its own 2-thread pool, jax 0.10.2 on 2 CPUs): opt in with --mjx-256.
    mjx_batches = (16,) if args.quick else (1, 16, 256) if args.mjx_256 else (1, 16)
    steps = {1: 200, 16: 50, 256: 10} if args.quick else {1: 400, 16: 100, 256: 20}
    rows = []
    for variant in ("shipped (RK4, PGS)", "euler-newton"):
        model = humanoid("euler-newton" if variant == "euler-newton" else "shipped")
        sim = Simulator(model, nthread=args.nthread)
        nthread = sim.nthread
        for B in batches:
            T = steps[B]
            scan_sps, roll_sps, c_scan, c_roll = bench_jaxbridge(sim, B, T)
            raw_sps = bench_raw(model, sim, B, T, nthread)
            mjx_sps = mjx_compile = float("nan")
            if variant == "euler-newton" and B in mjx_batches:
                mjx_sps, mjx_compile = bench_mjx(model, B, min(T, 20))
            rows.append(
                (variant, B, scan_sps, roll_sps, raw_sps, mjx_sps, c_scan, c_roll, mjx_compile)
            )
            print(".", end="", flush=True)
        grads, c_grad = bench_grad(sim, 1)
        rows.append((variant, "grad", grads, c_grad))
    print(
        f"\nhumanoid, {sim.nthread} threads, jax {jax.__version__}, mujoco {mujoco.__version__}"
        f"; physics steps per second (frame_skip 1), float64\n"
    )
    head = (
        f"{'model':<20}{'batch':>6}{'scan(step)':>12}{'rollout':>11}{'raw':>11}{'MJX':>9}"
        f"{'rollout/raw':>13}{'scan/raw':>10}{'rollout/MJX':>13}"
        f"{'compile s: scan':>17}{'rollout':>9}{'MJX':>7}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        if r[1] == "grad":
            continue
        v, B, scan_sps, roll_sps, raw_sps, mjx_sps, c_scan, c_roll, c_mjx = r
        print(
            f"{v:<20}{B:>6}{scan_sps:>12.0f}{roll_sps:>11.0f}{raw_sps:>11.0f}{mjx_sps:>9.0f}"
            f"{roll_sps / raw_sps:>13.2f}{scan_sps / raw_sps:>10.2f}"
            f"{roll_sps / mjx_sps:>13.1f}{c_scan:>17.2f}{c_roll:>9.2f}{c_mjx:>7.1f}"
        )
    print("\ngradients of a 50-step rollout loss (w.r.t. all 50 controls), jit(grad):")
    for r in rows:
        if r[1] == "grad":
            print(f"  {r[0]:<20} {r[2]:8.2f} gradients/s   (compile {r[3]:.2f} s)")


if __name__ == "__main__":
    main()
