# ruff: noqa: E402 - the thread limit and x64 precede the imports that read them
"""Gate design from scqubits' own objects: pulse and circuit optimised together by gradient.

`jaxbridge.scqubits.dynamics` turns a scqubits qubit or `HilbertSpace` into a gate: the
static Hamiltonian and a drive operator in the (dressed) eigenbasis, the model's own noise
channels as Lindblad jump operators, a diffrax solver, and the average gate fidelity, each a
JAX function of the pulse's and the circuit's parameters. Optax (Adam) then tunes both at once:

1. a fluxonium X gate (EJ, EC, EL of the circuit at half flux; the Gaussian pulse's amplitude,
   frequency and phase);
2. a two-transmon CZ through a resonator (a scqubits `HilbertSpace`: two transmons, an
   oscillator, `g n (a + a^dag)` couplings): a selective 2 pi rotation of qubit 1's
   |1> -> |2> transition when qubit 2 is excited, so |11> alone takes a sign; 150 ns, the
   pulse's I and Q envelopes a sine times a short sine series (its shape optimised, so the
   |10> -> |20> transition 19 MHz away comes back too), two virtual-Z phases and the
   circuit's EJ of qubit 1 and both couplings (which set the conditional shift the gate
   needs). Adam works on dimensionless params (each physical one a start plus a scale times
   the optimised number) with an exponentially decaying step: 80 steps reach a coherent
   error near 5e-3 (F ~ 0.995), where a Gaussian pulse of 100 ns on the raw params stalled at
   F ~ 0.91.

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

import jaxbridge

# Before any JAX computation: XLA then compiles each solver loop into one kernel, where its
# operations would otherwise run one thunk each on XLA's thread pool (2 to 3x faster
# gradients here; docs/dynamics.md).
jaxbridge.loops_as_kernels()

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
SOLVER = {"rtol": 1e-7, "atol": 1e-7, "gradient": "adjoint"}  # the discrete adjoint: smooth pulses
CZ_STEPS = 80


def gaussian(t, p, duration):
    envelope = jnp.exp(-(((t - duration / 2) / (duration / 5)) ** 2))
    return p["amp"] * envelope * jnp.cos(2 * jnp.pi * p["freq"] * t + p["phase"])


def calibrate(loss, params, amp=None, factors=None):
    """The best of a few amplitudes around the first guess: one `jit(vmap(...))` program.

    `amp(params, factor)` scales the amplitude (by default `params["pulse"]["amp"]`).
    """
    if factors is None:
        factors = jnp.linspace(0.3, 2.5, 12)
    if amp is None:

        def amp(p, f):
            return {**p, "pulse": {**p["pulse"], "amp": f * p["pulse"]["amp"]}}

    losses = jax.jit(jax.vmap(lambda f: loss(amp(params, f))))(factors)
    best = float(factors[jnp.argmin(losses)])
    print(
        f"  amplitude scan (vmap, {len(factors)} pulses): best x{best:.2f}, "
        f"1 - F = {float(losses.min()):.2e}"
    )
    return amp(params, best)


def optimise(loss, params, steps, lr):
    """Adam on `loss(params)` (`lr` a number or an Optax schedule): the best params seen and
    the history of losses."""
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

CZ_DURATION = 150.0  # ns
CZ_MODES = 4  # sine-series components of each quadrature of the envelope
# The optimiser works on dimensionless params: each physical one is its start plus a scale
# times the optimised number, the scale the size of a useful step (amplitudes in units of
# 10 MHz, the frequency in MHz, phases in 0.1 rad, EJ in 10 MHz, couplings in MHz). Adam's
# step is then about the same size in every direction.
CZ_SCALE = {"amp": 0.01, "freq": 1e-3, "modes": 0.1, "z": 0.1, "EJ": 0.01, "g": 1e-3}


def cz_envelope(t, p, duration):
    """`amp (I(t) cos(2 pi f t) + Q(t) sin(2 pi f t))`, I and Q zero at both ends.

    `I = sin(pi t / T) (1 + sum_k ci_k sin(k pi t / T))`, `Q = sin(pi t / T) sum_k cq_k
    sin(k pi t / T)`: the first guess is a sine pulse; the series lets the optimiser shape
    it so that the off-resonant transitions (|10> -> |20> 19 MHz away, the qubits' own
    0 -> 1) come back to where they started while |11> -> |21> makes its 2 pi rotation.
    """
    s = jnp.sin(jnp.pi * t / duration)
    basis = jnp.sin(jnp.arange(1, CZ_MODES + 1) * jnp.pi * t / duration)
    i_env = s * (1.0 + jnp.sum(p["ci"] * basis))
    q_env = s * jnp.sum(p["cq"] * basis)
    carrier = 2 * jnp.pi * p["freq"] * t
    return p["amp"] * (i_env * jnp.cos(carrier) + q_env * jnp.sin(carrier))


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
    duration = CZ_DURATION
    freq = float(hs.energy_by_bare_index((2, 1, 0)) - hs.energy_by_bare_index((1, 1, 0)))
    shift = freq - float(hs.energy_by_bare_index((2, 0, 0)) - hs.energy_by_bare_index((1, 0, 0)))
    cz = jnp.diag(jnp.array([1, 1, 1, -1], dtype=complex))
    sc = CZ_SCALE
    u0 = {  # the optimised numbers; `physical(u)` the params they stand for
        "amp": jnp.array(1.0),
        "freq": jnp.array(0.0),
        "ci": jnp.zeros(CZ_MODES),
        "cq": jnp.zeros(CZ_MODES),
        "z": jnp.zeros(2),  # virtual Z on each qubit, applied after the gate
        "EJ": jnp.array(0.0),
        "g": jnp.zeros(2),
    }

    def physical(u):
        pulse = {"amp": sc["amp"] * u["amp"], "freq": freq + sc["freq"] * u["freq"]}
        pulse |= {"ci": sc["modes"] * u["ci"], "cq": sc["modes"] * u["cq"]}
        g = [0.15 + sc["g"] * u["g"][0], 0.15 + sc["g"] * u["g"][1]]
        circuit = {"q1": {"EJ": 18.0 + sc["EJ"] * u["EJ"]}, "g": g}
        return {"pulse": pulse, "z": sc["z"] * u["z"], "circuit": circuit}

    def target(u):
        z = physical(u)["z"]
        z1, z2 = jnp.exp(1j * z[0]), jnp.exp(1j * z[1])
        return jnp.diag(jnp.stack([1.0 + 0j, z2, z1, z1 * z2])) @ cz

    def parts(u):
        p = physical(u)
        h = dynamics.static_hamiltonian(m, p["circuit"], levels=k)
        n1 = dynamics.drive_operator(m, (q1, "n_operator"), p["circuit"], levels=k)
        pulse = dynamics.smooth(lambda t, a: cz_envelope(t, a, duration), p["pulse"])
        return h, [(n1, pulse)]

    def infidelity(u):
        h, drives = parts(u)
        tsave = jnp.array([0.0, duration])
        return 1 - dynamics.gate_fidelity(h, drives, target(u), subspace, tsave, **SOLVER)[-1]

    print(f"two-transmon CZ through a resonator ({k} dressed levels kept, {duration:.0f} ns, "
          f"|11> -> |21> at {freq:.4f} GHz, {1e3 * abs(shift):.1f} MHz from |10> -> |20>): "
          "Adam over EJ(q1), both g, the pulse's amplitude, frequency and I/Q shape, two "
          "virtual-Z phases")  # fmt: skip
    start = time.perf_counter()
    u = u0
    if not QUICK:
        u = calibrate(infidelity, u, amp=lambda u, f: {**u, "amp": f * u["amp"]},
                      factors=jnp.linspace(0.3, 3.0, 16))  # fmt: skip
    schedule = optax.exponential_decay(0.3, transition_steps=CZ_STEPS, decay_rate=0.05)
    u, history = optimise(infidelity, u, 1 if QUICK else CZ_STEPS, schedule)
    print(f"  {time.perf_counter() - start:.1f} s")
    final = physical(u)
    print(f"  design: EJ(q1) {float(final['circuit']['q1']['EJ']):.4f} GHz, g "
          f"{float(final['circuit']['g'][0]):.4f} / {float(final['circuit']['g'][1]):.4f} GHz, "
          f"drive {float(final['pulse']['freq']):.4f} GHz")  # fmt: skip
    channels = [(q1, "t1_capacitive"), (q2, "t1_capacitive"), (q1, "tphi_1_over_f_cc"),
                (q2, "tphi_1_over_f_cc")]  # fmt: skip
    return report("transmon_cz", out, m, u, parts, target(u), subspace, k, duration, history,
                  lambda u: dynamics.jump_operators(m, physical(u)["circuit"], levels=k,
                                                    channels=channels),
                  lambda t, u: cz_envelope(t, physical(u)["pulse"], duration))  # fmt: skip


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
