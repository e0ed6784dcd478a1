# ruff: noqa: E402 - the thread limit and x64 precede the imports that read them
"""Gate design from scqubits' own objects: pulse and circuit optimised together by gradient.

`jaxbridge.scqubits.dynamics` turns a scqubits qubit or `HilbertSpace` into a gate: the
static Hamiltonian and a drive operator in the (dressed) eigenbasis, the model's own noise
channels as Lindblad jump operators, dynamiqs' solvers, and the average gate fidelity, each a
JAX function of the pulse's and the circuit's parameters. Optax (Adam) then tunes both at once:

1. a fluxonium X gate (EJ, EC, EL of the circuit at half flux; the Gaussian pulse's amplitude,
   frequency and phase);
2. a two-transmon CZ through a resonator (a scqubits `HilbertSpace`: two transmons, an
   oscillator, `g n (a + a^dag)` couplings): a selective 2 pi rotation of qubit 1's
   |1> -> |2> transition when qubit 2 is excited, so |11> alone takes a sign; optimised over
   the pulse, two virtual-Z phases and the circuit's EJ of qubit 1 and both couplings (which
   set the conditional shift the gate needs).

The optimisation uses the closed-system fidelity (sesolve, cheap); the final design is then
evolved with the model's own T1 and dephasing channels (mesolve), and the error budget split
into the coherent error (1 - F closed) and the decoherence-limited part (F closed - F open).
Figures (fidelity against time, the pulse, the error budget, the optimisation) go to the
folder given on the command line, `demo-output/` by default. A few minutes on a CPU.

    python examples/12_gate_design.py [OUT_DIR] [--quick]

`--quick` (what the test suite runs) takes a few Adam steps only.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pathlib
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import optax
import scqubits as scq

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits import dynamics

scq.settings.T1_DEFAULT_WARNING = False
QUICK = "--quick" in sys.argv
SOLVER = {"rtol": 1e-7, "atol": 1e-7}


def gaussian(t, p, duration):
    envelope = jnp.exp(-(((t - duration / 2) / (duration / 5)) ** 2))
    return p["amp"] * envelope * jnp.cos(2 * jnp.pi * p["freq"] * t + p["phase"])


def calibrate(loss, params):
    """The best of 12 amplitudes around the first guess: one `jit(vmap(...))` program."""
    factors = jnp.linspace(0.3, 2.5, 12)

    def at(f):
        return loss({**params, "pulse": {**params["pulse"], "amp": f * params["pulse"]["amp"]}})

    losses = jax.jit(jax.vmap(at))(factors)
    best = float(factors[jnp.argmin(losses)])
    print(
        f"  amplitude scan (vmap, 12 pulses): best x{best:.2f}, 1 - F = {float(losses.min()):.2e}"
    )
    return {**params, "pulse": {**params["pulse"], "amp": best * params["pulse"]["amp"]}}


def optimise(loss, params, steps, lr):
    """Adam on `loss(params)`: the best params seen and the history of losses."""
    opt = optax.adam(lr)
    state = opt.init(params)
    step = jax.jit(jax.value_and_grad(loss))
    history, best = [], (np.inf, params)
    for i in range(steps):
        value, grad = step(params)
        if float(value) < best[0]:
            best = (float(value), params)
        updates, state = opt.update(grad, state, params)
        params = optax.apply_updates(params, updates)
        history.append(float(value))
        if i % 5 == 0 or i == steps - 1:
            print(f"  step {i:3d}: 1 - F = {float(value):.2e}", flush=True)
    return best[1], history


# -- 1. fluxonium X gate


def fluxonium_x(out: pathlib.Path) -> dict:
    obj = scq.Fluxonium(EJ=4.0, EC=1.0, EL=1.0, flux=0.5, cutoff=30)
    m = jbq.model(obj)
    k, duration = 3, 60.0
    x = jnp.array([[0, 1], [1, 0]], dtype=complex)
    f01 = float(np.diff(obj.eigenvals(evals_count=2))[0])
    n01 = abs(obj.matrixelement_table("n_operator", evals_count=2)[0, 1])
    area = duration / 5 * np.sqrt(np.pi)
    params = {
        "circuit": {"EJ": 4.0, "EC": 1.0, "EL": 1.0},
        # The fluxonium's `n_operator` is imaginary in its eigenbasis (a sigma_y coupling):
        # a carrier phase of pi / 2 turns the rotation axis onto x.
        "pulse": {"amp": 1.0 / (2 * n01 * area), "freq": f01, "phase": np.pi / 2},
    }
    channels = ["t1_capacitive", "t1_inductive", "tphi_1_over_f_cc"]
    options = {"t1_capacitive": {"Q_cap": 1e5, "T": 0.015}, "t1_inductive": {"Q_ind": 5e6}}

    def parts(p):
        h = dynamics.static_hamiltonian(m, p["circuit"], levels=k)
        n = dynamics.drive_operator(m, "n_operator", p["circuit"], levels=k)
        pulse = dynamics.smooth(lambda t, a: gaussian(t, a, duration), p["pulse"])
        return h, [(n, pulse)]

    def infidelity(p):
        h, drives = parts(p)
        tsave = jnp.array([0.0, duration])
        return 1 - dynamics.gate_fidelity(h, drives, x, [0, 1], tsave, **SOLVER)[-1]

    print("fluxonium X gate: Adam over EJ, EC, EL and the pulse's amp, freq, phase")
    start = time.perf_counter()
    params = calibrate(infidelity, params)
    params, history = optimise(infidelity, params, 5 if QUICK else 40, 3e-4)
    print(f"  {time.perf_counter() - start:.1f} s")
    return report("fluxonium_x", out, m, params, parts, x, [0, 1], k, duration, history,
                  lambda p: dynamics.jump_operators(m, p["circuit"], levels=k,
                                                    channels=channels, options=options),
                  lambda t, p: gaussian(t, p["pulse"], duration))  # fmt: skip


# -- 2. two transmons through a resonator: CZ


def transmon_cz(out: pathlib.Path) -> dict:
    q1 = scq.Transmon(EJ=18.0, EC=0.28, ng=0.0, ncut=8, truncated_dim=3, id_str="q1")
    q2 = scq.Transmon(EJ=17.0, EC=0.25, ng=0.0, ncut=8, truncated_dim=3, id_str="q2")
    res = scq.Oscillator(E_osc=6.2, truncated_dim=3, id_str="res")
    hs = scq.HilbertSpace([q1, q2, res])
    for q in (q1, q2):
        hs.add_interaction(g=0.15, op1=q.n_operator, op2=res.creation_operator, add_hc=True)
    m = jbq.model(hs)
    hs.generate_lookup()
    labels = [(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0)]
    subspace = [int(hs.dressed_index(b)) for b in labels]
    i21 = int(hs.dressed_index((2, 1, 0)))
    k = max(subspace + [i21]) + 1
    duration = 100.0
    freq = float(hs.energy_by_bare_index((2, 1, 0)) - hs.energy_by_bare_index((1, 1, 0)))
    area = duration / 5 * np.sqrt(np.pi)
    cz = jnp.diag(jnp.array([1, 1, 1, -1], dtype=complex))
    params = {
        "circuit": {"q1": {"EJ": 18.0}, "g": [0.15, 0.15]},
        "pulse": {"amp": 1.0 / (1.7 * area), "freq": freq, "phase": 0.0},
        "z": jnp.zeros(2),  # virtual Z on each qubit, applied after the gate
    }

    def target(p):
        z1, z2 = jnp.exp(1j * p["z"][0]), jnp.exp(1j * p["z"][1])
        return jnp.diag(jnp.stack([1.0 + 0j, z2, z1, z1 * z2])) @ cz

    def parts(p):
        h = dynamics.static_hamiltonian(m, p["circuit"], levels=k)
        n1 = dynamics.drive_operator(m, (q1, "n_operator"), p["circuit"], levels=k)
        pulse = dynamics.smooth(lambda t, a: gaussian(t, a, duration), p["pulse"])
        return h, [(n1, pulse)]

    def infidelity(p):
        h, drives = parts(p)
        tsave = jnp.array([0.0, duration])
        return 1 - dynamics.gate_fidelity(h, drives, target(p), subspace, tsave, **SOLVER)[-1]

    print(f"two-transmon CZ through a resonator ({k} dressed levels kept): Adam over EJ(q1), "
          "both g, the pulse and two virtual-Z phases")  # fmt: skip
    start = time.perf_counter()
    if not QUICK:
        params = calibrate(infidelity, params)
    params, history = optimise(infidelity, params, 1 if QUICK else 30, 3e-3)
    print(f"  {time.perf_counter() - start:.1f} s")
    channels = [(q1, "t1_capacitive"), (q2, "t1_capacitive"), (q1, "tphi_1_over_f_cc"),
                (q2, "tphi_1_over_f_cc")]  # fmt: skip
    return report("transmon_cz", out, m, params, parts, target(params), subspace, k, duration,
                  history,
                  lambda p: dynamics.jump_operators(m, p["circuit"], levels=k, channels=channels),
                  lambda t, p: gaussian(t, p["pulse"], duration))  # fmt: skip


def report(name, out, m, params, parts, target, subspace, k, duration, history, jumps, pulse):
    """Fidelity against time closed and open, the pulse, the budget; figures saved.

    `--quick` skips the two-transmon gate's evolution with the noise (16 density matrices of
    13 levels, the script's longest solve): its budget is then the coherent error alone.
    """
    tsave = jnp.linspace(0.0, duration, 3 if QUICK else 21)
    h, drives = parts(params)
    closed = dynamics.gate_fidelity(h, drives, target, subspace, tsave, **SOLVER)
    if QUICK and name == "transmon_cz":
        print("  --quick: the evolution with the model's noise is skipped for this gate")
        opened = closed
    else:
        ops = jumps(params)
        opened = dynamics.gate_fidelity(h, drives, target, subspace, tsave, jump_ops=ops, **SOLVER)
    coherent = 1 - float(closed[-1])
    decoherence = float(closed[-1] - opened[-1])
    print(f"  final: F closed {float(closed[-1]):.5f}, F with the model's noise "
          f"{float(opened[-1]):.5f}; coherent error {coherent:.2e}, decoherence "
          f"{decoherence:.2e}")  # fmt: skip

    fig, axes = plt.subplots(1, 4, figsize=(17, 3.6))
    axes[0].plot(history)
    axes[0].set(yscale="log", xlabel="Adam step", ylabel="1 - F (closed)", title="optimisation")
    axes[1].plot(tsave, closed, label="closed (sesolve)")
    axes[1].plot(tsave, opened, "--", label="with the model's noise (mesolve)")
    axes[1].set(xlabel="t (ns)", ylabel="average gate fidelity", title="fidelity vs time")
    axes[1].legend(fontsize=8)
    t = jnp.linspace(0.0, duration, 2001)
    axes[2].plot(t, jax.vmap(lambda s: pulse(s, params))(t))
    axes[2].set(xlabel="t (ns)", ylabel="amplitude (GHz)", title="pulse")
    axes[3].bar(["coherent", "decoherence"], [max(coherent, 1e-12), max(decoherence, 1e-12)])
    axes[3].set(ylabel="infidelity", title="error budget")
    fig.suptitle(name)
    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=110)
    plt.close(fig)
    return {"closed": float(closed[-1]), "open": float(opened[-1])}


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out = pathlib.Path(args[0] if args else "demo-output")
    out.mkdir(parents=True, exist_ok=True)
    x = fluxonium_x(out)
    cz = transmon_cz(out)
    print(f"demo: fluxonium X F = {x['open']:.4f} with its noise, two-transmon CZ F = "
          f"{cz['open']:.4f}; figures in {out}/")  # fmt: skip


if __name__ == "__main__":
    main()
