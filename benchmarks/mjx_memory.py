# ruff: noqa: E402 - the thread limit precedes the imports
"""Memory of a sweep over models: jaxbridge.mujoco.mjx against MJX's own step.

    python benchmarks/mjx_memory.py [--quick] [--models N]

A morphology sweep makes a model, steps it, and drops it, model after model. Each side runs
in a fresh interpreter of its own (so that one side's heap does not hold the other's): make
`mujoco.MjModel` number i (a free box and a hinged capsule whose sizes change with i, so each
model is new), `mjx.put_model`, `mjx.put_data`, `jit(vmap(step))` over a batch of 8 copies of
its first state, and drop everything; `jax.clear_caches()` and `gc.collect()` after each
model. It prints the growth of the resident set per model after 5 warm-up models (x64 off,
as Playground runs, OPENBLAS_NUM_THREADS=1 on both sides). MJX's side uses `impl="jax"` on
XLA's CPU backend.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import subprocess
import sys
import textwrap

from _util import QUICK, require, table

require("mujoco.mjx", script="mjx_memory.py")

_SIDE = textwrap.dedent(
    """
    import gc, os, sys
    import jax, mujoco, numpy as np
    if sys.argv[1] == "jaxbridge":
        from jaxbridge.mujoco import mjx
        put = mjx.put_model
    else:
        from mujoco import mjx
        put = lambda m: mjx.put_model(m, impl="jax")
    XML = '''<mujoco><worldbody><geom type="plane" size="5 5 .1"/>
    <body pos="0 0 {h}"><freejoint/><geom type="box" size="{s} {s} {s}"/></body>
    <body pos=".5 0 {h}"><joint type="hinge"/><geom type="capsule" size="{s} {s}"/></body>
    </worldbody></mujoco>'''

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    def one(i):
        m = mujoco.MjModel.from_xml_string(XML.format(h=0.5 + 1e-3 * i, s=0.05 + 5e-4 * i))
        mx = put(m)
        d = mjx.put_data(m, mujoco.MjData(m))
        batch = jax.tree.map(lambda x: np.stack([np.asarray(x)] * 8), d)
        out = jax.jit(jax.vmap(lambda d: mjx.step(mx, d)))(batch)
        jax.block_until_ready(out.qpos)
        jax.clear_caches()
        gc.collect()

    n = int(sys.argv[2])
    for i in range(5):
        one(10_000 + i)
    start = rss()
    for i in range(n):
        one(i)
    print(f"{rss():.1f} {(rss() - start) / n:.3f}")
    """
)


def side(name: str, n: int) -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", _SIDE, name, str(n)], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise RuntimeError(f"{name}'s side failed:\n{done.stderr}")
    total, per = done.stdout.split()[-2:]
    return total, per


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few models")
    parser.add_argument("--models", type=int, default=None, help="models after the warm-up")
    args = parser.parse_args()
    n = args.models or (8 if QUICK else 80)
    rows = []
    for name, label in (("jaxbridge", "jaxbridge.mujoco.mjx (C MuJoCo)"), ("mjx", "MJX's own")):
        total, per = side(name, n)
        rows.append((label, per, total))
    title = (
        f"A sweep over {n} models, each made, stepped under jit(vmap) at B=8 and dropped "
        "(x64 off, OPENBLAS_NUM_THREADS=1)"
    )
    print(table(title, rows, ("step", "MiB a model", "resident MiB at the end")))


if __name__ == "__main__":
    main()
