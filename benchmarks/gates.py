# ruff: noqa: E402, B023 - the thread limits precede imports; closures run in loops
"""A gate's gradient: jaxbridge.scqubits.dynamics against central differences of the qutip path.

The qutip path is what a scqubits user does today: build the qubit with scqubits at the
parameters, take its levels, its drive operator and its noise channels' rates between the
kept levels (`esys` passed, so each eigensystem is computed once), and evolve with qutip 5
(`sesolve` for the closed system, `mesolve` with the collapse operators `sqrt(rate) |j><i|`).
The gradient of the average gate fidelity with respect to every pulse and circuit parameter
then takes two such evaluations a parameter (central differences). jaxbridge gives it as one
`jit(value_and_grad(...))` of the same model (diffrax, reverse mode through the solver).

Rows (both sides float64, OPENBLAS_NUM_THREADS=1 set before NumPy loads, one process, calls
interleaved, medians; the gradients are compared too):

- Fluxonium X gate with its T1 channels (`t1_capacitive`, `t1_inductive`): cutoff 40, 4
  levels kept, computational subspace [0, 1]; a Gaussian pulse of 4 parameters (amplitude,
  frequency, width, phase) and the circuit's EJ, EC, EL, flux: 8 parameters. qutip evolves
  the d^2 = 4 matrix units |j><k| of the subspace (the fewest that give the average fidelity).
- each with jaxbridge's reverse mode through diffrax's loop (`gradient="checkpointed"`,
  `value_and_grad`), its discrete adjoint (`gradient="adjoint"`, `value_and_grad`) and its
  forward mode (`gradient="forward"`, `jacfwd`, one tangent a parameter) and its forward
  sensitivities (`gradient="sensitivity"`, `jacfwd`: all tangents as columns of one
  augmented solve);
- Transmon X gate, closed system: ncut 15, 3 levels kept, the same 4 pulse parameters and
  EJ, EC: 6 parameters; qutip evolves the 2 computational kets (`sesolve`).

Solvers: jaxbridge integrates `y' = (G0 + a(t) G1) y` by diffrax's Dormand-Prince 8(7)
(`method="dopri8"`, the default), rtol = atol = 1e-8: for the master equation the Liouvillian
as a 16x16 superoperator acting on the 4 matrix units as the columns of one matrix (lab
frame); for the closed system the 2 kets as columns, in the levels' frame. qutip 5: `vern7`,
rtol = atol = 1e-8 -- of qutip's methods at these tolerances the fastest here and the most
accurate (`adams`, its default, was 1.4x slower on the fluxonium and 2.6e-6 off in the
fidelity; `vern9`, `dop853`, `lsoda` and `bdf` were slower), so the reference is the best a
user could pick. Central differences: step 1e-4 in every parameter. Goal: >= 30x after
compilation (compile time reported apart). `python benchmarks/gates.py --quick` runs each
side once.

XLA configuration: by default XLA's own (every operation of a solver step a thunk on XLA's
thread pool). `--loops-as-kernels` calls `jaxbridge.loops_as_kernels()` first, so that XLA
compiles each solver loop into one kernel (docs/dynamics.md); qutip's side is unaffected.
A plain run measures XLA's default, then runs itself again with `--loops-as-kernels` in a
fresh process (`--one` runs the default alone); each header names its configuration.
"""

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")

import statistics
import subprocess
import sys
import time
import warnings

import jax

import jaxbridge

LOOPS = "--loops-as-kernels" in sys.argv
if LOOPS:  # before any JAX computation: XLA reads its options when its backend starts
    jaxbridge.loops_as_kernels()

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
from _util import QUICK, fmt_time, require, table, verdict

scq = require("scqubits", script="benchmarks/gates.py")
qt = require("qutip", script="benchmarks/gates.py")
require("diffrax", script="benchmarks/gates.py")

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits import dynamics

scq.settings.PROGRESSBAR_DISABLED = True
scq.settings.T1_DEFAULT_WARNING = False
warnings.filterwarnings("ignore")
REPEAT = 1 if QUICK else 5
TWO_PI = 2 * np.pi
METHOD = "dopri8"
TOL = {"rtol": 1e-8, "atol": 1e-8, "method": METHOD}
QUTIP = {"rtol": 1e-8, "atol": 1e-8, "nsteps": 10**7, "method": "vern7"}
STEP = 1e-4
X = np.array([[0, 1], [1, 0]], dtype=complex)


def envelope(t, p, duration, xp):
    """A Gaussian times a carrier, the same formula on both sides (`xp` = jnp or np)."""
    shape = xp.exp(-(((t - duration / 2) / p["sigma"]) ** 2))
    return p["amp"] * shape * xp.cos(TWO_PI * p["freq"] * t + p["phase"])


def jax_fidelity(m, circuit_names, k, channels, options, duration, gradient):
    def fidelity(p):
        circuit = {n: p[n] for n in circuit_names}
        pulse = {n: p[n] for n in ("amp", "freq", "sigma", "phase")}
        h = dynamics.static_hamiltonian(m, circuit, levels=k)
        n = dynamics.drive_operator(m, "n_operator", circuit, levels=k)
        drive = dynamics.smooth(lambda t, a: envelope(t, a, duration, jnp), pulse)
        jumps = None
        if channels:
            jumps = dynamics.jump_operators(
                m, circuit, levels=k, channels=channels, options=options
            )
        tsave = jnp.array([0.0, duration])
        return dynamics.gate_fidelity(
            h, [(n, drive)], X, [0, 1], tsave, jump_ops=jumps, gradient=gradient, **TOL
        )[-1]

    if gradient in ("forward", "sensitivity"):  # jacfwd; the value comes along (aux)

        def twice(p):
            value = fidelity(p)
            return value, value

        jac = jax.jacfwd(twice, has_aux=True)
        return jax.jit(lambda p: jac(p)[::-1])
    return jax.jit(jax.value_and_grad(fidelity))


def qutip_fidelity(make, p, circuit_names, k, channels, options, duration):
    """The fidelity as a scqubits + qutip user computes it, at the params `p`."""
    obj = make(**{n: p[n] for n in circuit_names})
    esys = obj.eigensys(evals_count=k)
    e = esys[0] - esys[0][0]
    n = obj.matrixelement_table("n_operator", evecs=esys[1], evals_count=k)
    pulse = {n_: p[n_] for n_ in ("amp", "freq", "sigma", "phase")}
    H = [
        qt.Qobj(TWO_PI * np.diag(e)),
        [qt.Qobj(TWO_PI * n), lambda t: envelope(t, pulse, duration, np)],
    ]
    c_ops = []
    for i in range(k):
        for j in range(k):
            if channels and i != j:
                rate = sum(
                    getattr(obj, c)(i=i, j=j, total=False, esys=esys, get_rate=True, **options[c])
                    for c in channels
                )
                c_ops.append(np.sqrt(rate) * qt.basis(k, j) * qt.basis(k, i).dag())
    frame = np.exp(1j * TWO_PI * e * duration)
    w = np.zeros((k, 2), dtype=complex)
    w[[0, 1], :] = X  # W|j> on the kept levels
    tlist = np.array([0.0, duration])
    if not channels:
        psi = np.stack(
            [qt.sesolve(H, qt.basis(k, j), tlist, options=QUTIP).states[-1].full()[:, 0]
             for j in range(2)], axis=1)  # fmt: skip
        m = w.conj().T @ (frame[:, None] * psi)
        return float((abs(np.trace(m)) ** 2 + np.sum(abs(m) ** 2)) / 6)
    total = 0.0
    rhos = {}
    for j in range(2):
        for b in range(2):
            rho0 = qt.Qobj(np.outer(np.eye(k)[j], np.eye(k)[b]))
            rho = qt.mesolve(H, rho0, tlist, c_ops, options=QUTIP).states[-1].full()
            rhos[j, b] = frame[:, None] * rho * frame[None, :].conj()
    for j in range(2):
        for b in range(2):
            total += np.real(w[:, j].conj() @ rhos[j, b] @ w[:, b])
        total += sum(np.real(w[:, q].conj() @ rhos[j, j] @ w[:, q]) for q in range(2))
    return float(total / 6)


def qutip_gradient(make, p, names, circuit_names, k, channels, options, duration):
    grad = {}
    for name in names:
        up, down = dict(p), dict(p)
        up[name] += STEP
        down[name] -= STEP
        args = (circuit_names, k, channels, options, duration)
        grad[name] = (qutip_fidelity(make, up, *args) - qutip_fidelity(make, down, *args)) / (
            2 * STEP
        )
    return grad


def row(label, make, circuit, k, channels, options, duration, amp, phase, gradient):
    obj = make(**circuit)
    m = jbq.model(obj)
    e = obj.eigenvals(evals_count=2)
    p = {**circuit, "amp": amp, "freq": float(e[1] - e[0]), "sigma": duration / 5, "phase": phase}
    names = list(p)
    ours = jax_fidelity(m, list(circuit), k, channels, options, duration, gradient)
    x = {n: jnp.asarray(v) for n, v in p.items()}
    start = time.perf_counter()
    jax.block_until_ready(ours(x))
    compile_s = time.perf_counter() - start
    ours_t, theirs_t = [], []
    for _ in range(REPEAT):  # interleaved
        start = time.perf_counter()
        value, grad = jax.block_until_ready(ours(x))
        ours_t.append(time.perf_counter() - start)
        start = time.perf_counter()
        want = qutip_gradient(make, p, names, list(circuit), k, channels, options, duration)
        theirs_t.append(time.perf_counter() - start)
    want_value = qutip_fidelity(make, p, list(circuit), k, channels, options, duration)
    diff = max(abs(float(grad[n]) - want[n]) for n in names)
    scale = max(abs(want[n]) for n in names)
    a, b = statistics.median(ours_t), statistics.median(theirs_t)
    return (
        label,
        gradient,
        str(len(names)),
        f"{float(value):.6f} / {want_value:.6f}",
        f"{diff:.1e} (of {scale:.2g})",
        fmt_time(a),
        fmt_time(b),
        f"{b / a:.1f}x",
        verdict(b / a, 30.0, lower_is_better=False),
        fmt_time(compile_s),
    )


def main():
    print(
        f"jax {jax.__version__}, x64, OPENBLAS_NUM_THREADS=1, repeat {REPEAT} (medians); "
        f"jaxbridge: diffrax {METHOD} rtol=atol={TOL['rtol']:g}; qutip {qt.__version__} "
        f"{QUTIP['method']} rtol=atol={QUTIP['rtol']:g}; central-difference step {STEP:g}; "
        f"load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs); XLA: "
        + ("jaxbridge.loops_as_kernels()" if LOOPS else "default options")
    )
    flux_options = {
        "t1_capacitive": {"Q_cap": 2e4, "T": 0.015},
        "t1_inductive": {"Q_ind": 5e5, "T": 0.015},
    }
    gates = [
        (
            "Fluxonium X, T1 channels (cutoff 40, 4 levels, 60 ns, mesolve)",
            lambda **c: scq.Fluxonium(**c, cutoff=40),
            {"EJ": 4.0, "EC": 1.0, "EL": 1.0, "flux": 0.5},
            4,
            list(flux_options),
            flux_options,
            60.0,
            0.12,
            np.pi / 2,  # its n_operator is imaginary: the carrier's phase sets the axis to x
        ),
        (
            "Transmon X, closed (ncut 15, 3 levels, 20 ns, sesolve)",
            lambda **c: scq.Transmon(**c, ng=0.0, ncut=15),
            {"EJ": 15.0, "EC": 0.3},
            3,
            [],
            {},
            20.0,
            0.09,
            0.0,
        ),
    ]
    modes = ("checkpointed", "adjoint", "forward", "sensitivity")
    rows = [row(*g, gradient) for g in gates for gradient in modes]
    header = (
        "gate",
        "jaxbridge mode",
        "params",
        "fidelity (ours / qutip)",
        "max |grad diff|",
        "jaxbridge grad",
        "qutip central diff",
        "ratio",
        "goal",
        "compile",
    )
    print(table("Gradient of the average gate fidelity", rows, header))
    if not (LOOPS or QUICK or "--one" in sys.argv):
        # The other XLA configuration needs a fresh process: XLA reads its options once.
        print("\nThe same with jaxbridge.loops_as_kernels() (a fresh process):", flush=True)
        subprocess.run([sys.executable, __file__, "--loops-as-kernels"], check=True)


if __name__ == "__main__":
    main()
