# ruff: noqa: E402 - the thread limits precede the imports
"""Coherence sweeps of a fluxonium: jaxbridge.scqubits against scqubits, side by side.

    python benchmarks/scqubits_coherence.py [--quick] [--rounds N]

Issue 42's configuration: Fluxonium(EJ=8.9, EC=2.5, EL=0.5, cutoff=80), 101 fluxes in
[0.3, 0.7], float64 (x64), OPENBLAS_NUM_THREADS=1 for both sides, the rows interleaved round
after round, the best round counting. Rows:

- T1 + T2 sweep: `t1_effective` and `t2_effective` at every flux, jaxbridge's one
  `jit(vmap(...))` against scqubits' loop over fluxes (each call its own eigensystem, as a
  user's loop does). Goal >= 30x.
- The same sweep against scqubits given one eigensystem a flux for both methods
  (`esys=qubit.eigensys(evals_count=2)`, the most a scqubits user can share).
- The gradient sweep: `vmap(grad(t2_effective))` in flux against central differences of
  scqubits' `t2_effective` (step 1e-6: two evaluations a flux). Goal >= 30x. At flux 0.5, the
  sweet spot, T2 has a kink: the derivative does not exist there (jaxbridge gives one side's
  slope, central differences their mean), so that point is left out of the comparison.

`--quick`: 11 fluxes, one round.
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import time
import warnings

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
import scqubits as scq
from _util import QUICK, fmt_time, table, verdict

import jaxbridge.scqubits as jbq

scq.settings.PROGRESSBAR_DISABLED = True
scq.settings.T1_DEFAULT_WARNING = False
warnings.filterwarnings("ignore", category=DeprecationWarning)

STEP = 1e-6


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="11 fluxes, one round")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds")
    args = parser.parse_args()
    rounds = args.rounds or (1 if QUICK else 5)
    qubit = scq.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.5, cutoff=80)
    m = jbq.model(qubit)
    flux = np.linspace(0.3, 0.7, 11 if QUICK else 101)
    x = jnp.asarray(flux)

    def both(f):
        p = {"flux": f}
        return m.t1_effective(params=p), m.t2_effective(params=p)

    ours_values = jax.jit(jax.vmap(both))
    ours_grads = jax.jit(jax.vmap(jax.grad(lambda f: m.t2_effective(params={"flux": f}))))

    def their_values():
        out = []
        for f in flux:
            qubit.flux = f
            out.append((qubit.t1_effective(), qubit.t2_effective()))
        return np.asarray(out)

    def their_values_shared():
        # the most a scqubits user can share: one eigensystem a flux for both methods
        out = []
        for f in flux:
            qubit.flux = f
            esys = qubit.eigensys(evals_count=2)
            out.append((qubit.t1_effective(esys=esys), qubit.t2_effective(esys=esys)))
        return np.asarray(out)

    def their_grads():
        out = []
        for f in flux:
            qubit.flux = f + STEP
            up = qubit.t2_effective()
            qubit.flux = f - STEP
            out.append((up - qubit.t2_effective()) / (2 * STEP))
        return np.asarray(out)

    start = time.perf_counter()
    got_v = np.stack(jax.block_until_ready(ours_values(x)), axis=1)
    compile_v = time.perf_counter() - start
    start = time.perf_counter()
    got_g = np.asarray(jax.block_until_ready(ours_grads(x)))
    compile_g = time.perf_counter() - start
    want_v, want_g = their_values(), their_grads()
    err_v = max(np.abs(got_v / want_v - 1).max(), np.abs(got_v / their_values_shared() - 1).max())
    smooth = np.abs(flux - 0.5) > 1e-9  # the sweet spot's kink left out (see the docstring)
    err_g = np.abs(got_g / want_g - 1)[smooth].max()

    cases = {
        "values": (lambda: jax.block_until_ready(ours_values(x)), their_values),
        "shared": (lambda: jax.block_until_ready(ours_values(x)), their_values_shared),
        "grads": (lambda: jax.block_until_ready(ours_grads(x)), their_grads),
    }
    best = {(k, side): float("inf") for k in cases for side in (0, 1)}
    for _ in range(rounds):
        for key, fns in cases.items():
            for side, fn in enumerate(fns):
                start = time.perf_counter()
                fn()
                best[key, side] = min(best[key, side], time.perf_counter() - start)
    n = flux.size
    rows = []
    for key, label, compiled, err, what in (
        ("values", f"t1_effective + t2_effective at {n} fluxes", compile_v, err_v,
         "scqubits' loop"),
        ("shared", "the same, scqubits given one esys a flux", compile_v, err_v,
         "scqubits' loop, esys shared"),
        ("grads", f"vmap(grad(t2_effective)) in flux at {n} fluxes", compile_g, err_g,
         "central differences of scqubits"),
    ):  # fmt: skip
        ratio = best[key, 1] / best[key, 0]
        rows.append((label, f"{fmt_time(best[key, 1])} ({what})", fmt_time(best[key, 0]),
                     f"{ratio:.1f}x", verdict(ratio, 30, lower_is_better=False),
                     f"{compiled:.2f} s", f"{err:.1e} rel"))  # fmt: skip
    load = os.getloadavg()[0]
    title = (
        "Fluxonium(EJ=8.9, EC=2.5, EL=0.5, cutoff=80) coherence, float64, "
        f"OPENBLAS_NUM_THREADS=1, best of {rounds} interleaved rounds, load {load:.1f}"
    )
    header = ("case", "scqubits", "jaxbridge", "speed-up", "goal", "compile", "max |diff|")
    print(table(title, rows, header))


if __name__ == "__main__":
    main()
