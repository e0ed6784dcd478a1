"""Stage 4: a scqubits fluxonium fitted by gradient (the second user's own question).

The user wanted a JAX backend for scqubits, to fit qubit parameters by gradient: wrapping
`obj.eigenvals()` in a `jax.custom_vjp` failed ("not a valid JAX type"), and hand-written bridges
took 8 to 80 lines per qubit. Here it is one line, `jaxbridge.scqubits.model(obj)`. A fluxonium's
E_J, E_C and E_L are fitted with Optax, from a wrong guess, to a "measured" two-tone spectrum
(the 0-1 and 0-2 transitions at a few flux biases, made from known true values with 2 MHz of
noise); each step differentiates eigenvalues of the fluxonium in its E_C, E_L-dependent
oscillator basis, in one `jax.jit`-compiled program.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any, NamedTuple

import numpy as np

from ._common import needs

CUTOFF = 40  # oscillator levels
LEVELS = 2  # transitions 0-1, 0-2
TRUE = (4.0, 1.0, 1.0)  # E_J, E_C, E_L in GHz
GUESS = (3.0, 1.3, 0.7)
NOISE = 0.002  # GHz: 2 MHz of measurement noise on the targets


class _Config(NamedTuple):
    points: int  # flux values with targets
    steps: int  # fit steps
    dense: int  # flux values drawn in the figure


_FULL = _Config(points=11, steps=500, dense=201)
_QUICK = _Config(points=7, steps=160, dense=61)


def stage(report: list[str], *, quick: bool, out: pathlib.Path) -> None:
    """A scqubits fluxonium fitted by gradient"""
    needs("scqubits", "optax", "matplotlib", "tqdm")
    import jax

    # Eigenvalues span tens of GHz while the fit resolves MHz: float64, for this stage only.
    with jax.enable_x64(True):
        _run(report, _QUICK if quick else _FULL, out)


def _run(report: list[str], cfg: _Config, out: pathlib.Path) -> None:
    import warnings

    import jax
    import jax.numpy as jnp
    import optax
    import scqubits
    from tqdm import tqdm

    import jaxbridge.scqubits as jbq

    with warnings.catch_warnings():  # scqubits' import-time notices
        warnings.simplefilter("ignore")
        qubit = scqubits.Fluxonium(EJ=GUESS[0], EC=GUESS[1], EL=GUESS[2], flux=0.0, cutoff=CUTOFF)
    m = jbq.model(qubit)  # the one line

    @jax.jit
    def transitions(p: Any, flux: Any) -> Any:
        """E_m - E_0 for m = 1..LEVELS at each flux: one batched eigenvalue call."""
        e = m.eigenvals({"EJ": p[0], "EC": p[1], "EL": p[2], "flux": flux}, evals_count=3)
        return e[..., 1 : LEVELS + 1] - e[..., :1]

    rng = np.random.default_rng(0)
    flux = np.linspace(0.0, 0.5, cfg.points)
    dense = np.linspace(-0.1, 1.1, cfg.dense)
    true, guess = np.asarray(TRUE), np.asarray(GUESS)
    targets = np.asarray(transitions(true, flux)) + NOISE * rng.normal(size=(cfg.points, LEVELS))

    def loss_fn(log_p: Any) -> Any:
        return jnp.mean(jnp.square(transitions(jnp.exp(log_p), flux) - targets))

    opt = optax.adam(0.03)

    @jax.jit
    def step(log_p: Any, state: Any) -> tuple[Any, Any, Any]:
        loss, grad = jax.value_and_grad(loss_fn)(log_p)
        updates, state = opt.update(grad, state, log_p)
        return optax.apply_updates(log_p, updates), state, loss

    log_p = jnp.asarray(np.log(guess))
    state = opt.init(log_p)
    history: list[float] = []
    compile_s = 0.0
    bar = tqdm(range(cfg.steps), desc="      fit E_J, E_C, E_L", unit="step", leave=True)
    start = time.perf_counter()
    for i in bar:
        log_p, state, loss = step(log_p, state)
        history.append(float(loss))
        if i == 0:  # the first step compiles: keep it out of the speed
            compile_s = time.perf_counter() - start
            start = time.perf_counter()
        if i % 10 == 0 or i == cfg.steps - 1:
            bar.set_postfix(loss=f"{history[-1]:.2e}", refresh=False)
    steps_per_s = max(cfg.steps - 1, 1) / (time.perf_counter() - start)
    bar.close()
    fitted = np.exp(np.asarray(log_p))
    rms_mhz = 1e3 * np.sqrt(history[-1])
    # The fitted model against scqubits itself, at the fitted values.
    check = scqubits.Fluxonium(*map(float, fitted), flux=0.25, cutoff=CUTOFF)
    diff = np.abs(np.asarray(m.eigenvals(dict(zip(("EJ", "EC", "EL"), fitted)) | {"flux": 0.25},
                                         evals_count=3)) - check.eigenvals(3)).max()  # fmt: skip
    _plot(
        out / "fluxonium_spectrum.png",
        dense,
        [
            ("initial guess", transitions(guess, dense)),
            ("after the fit", transitions(fitted, dense)),
        ],
        [GUESS, tuple(float(x) for x in fitted)],
        flux,
        targets,
        history,
    )
    names = ("E_J", "E_C", "E_L")
    lines = [
        f"  m = jaxbridge.scqubits.model(scqubits.Fluxonium(..., cutoff={CUTOFF})): params "
        f"{sorted(m.params)}; targets: {LEVELS} transitions at {cfg.points} flux values, "
        f"{NOISE * 1e3:.0f} MHz noise",
        *(
            f"  {n} (GHz): true {t:.4f}, initial {g:.4f}, fitted {float(f):.4f}"
            for n, t, g, f in zip(names, TRUE, GUESS, fitted)
        ),
        f"  final loss {history[-1]:.3e} GHz² (rms {rms_mhz:.2f} MHz, the noise is "
        f"{NOISE * 1e3:.0f} MHz), from {history[0]:.3e}",
        f"  train step (jit, Adam, gradient through eigenvalues of {cfg.points} fluxonium "
        f"Hamiltonians in the E_C, E_L-dependent oscillator basis): {steps_per_s:.0f} steps/s, "
        f"first step (compiling) {compile_s:.1f} s",
        f"  fitted model against scqubits' own eigenvals at flux 0.25: max |diff| {diff:.1e} GHz",
    ]
    lines.append(_gate_line(m, fitted))
    for line in lines:
        print("    " + line)
    report += lines


def _gate_line(m: Any, fitted: Any) -> str:
    """An X gate on the fitted fluxonium: its fidelity and gradient (`dynamics`), one line.

    3 levels kept at half flux, a 60 ns Gaussian pulse on `n_operator` (phase pi / 2: its
    matrix element is imaginary), the closed system; `jit(value_and_grad)` through the
    solver (its discrete adjoint, `gradient="adjoint"`) with respect to E_J, E_C, E_L and the
    pulse's amplitude.
    """
    import importlib.util

    if importlib.util.find_spec("diffrax") is None:
        return "  X gate (jaxbridge.scqubits.dynamics): skipped, `pip install jaxbridge[dynamics]`"
    import jax
    import jax.numpy as jnp

    from jaxbridge.scqubits import dynamics

    duration, sigma = 60.0, 12.0
    circuit = {"EJ": float(fitted[0]), "EC": float(fitted[1]), "EL": float(fitted[2])}
    e = m.eigenvals({**circuit, "flux": 0.5}, evals_count=2)
    f01 = float(e[1] - e[0])
    n = dynamics.drive_operator(m, "n_operator", {**circuit, "flux": 0.5}, levels=2)
    amp = 1.0 / (2 * float(jnp.abs(n[0, 1])) * sigma * float(jnp.sqrt(jnp.pi)))  # a pi pulse
    x = jnp.array([[0, 1], [1, 0]], dtype=complex)

    def fidelity(p: Any) -> Any:
        c = {"EJ": p["EJ"], "EC": p["EC"], "EL": p["EL"], "flux": 0.5}
        h = dynamics.static_hamiltonian(m, c, levels=3)
        op = dynamics.drive_operator(m, "n_operator", c, levels=3)
        envelope = lambda t, a: a * jnp.exp(-(((t - duration / 2) / sigma) ** 2))  # noqa: E731
        pulse = dynamics.smooth(
            lambda t, a: envelope(t, a) * jnp.cos(2 * jnp.pi * f01 * t + jnp.pi / 2), p["amp"]
        )
        tsave = jnp.array([0.0, duration])
        solver = {"rtol": 1e-7, "atol": 1e-7, "gradient": "adjoint"}
        return dynamics.gate_fidelity(h, [(op, pulse)], x, [0, 1], tsave, **solver)[-1]

    params = {name: jnp.asarray(v) for name, v in {**circuit, "amp": amp}.items()}
    start = time.perf_counter()
    value, grad = jax.jit(jax.value_and_grad(fidelity))(params)
    took = time.perf_counter() - start
    partials = ", ".join(f"{float(grad[k]):+.3f}" for k in ("EJ", "EC", "EL", "amp"))
    return (
        f"  X gate on the fitted fluxonium (jaxbridge.scqubits.dynamics, 3 levels, 60 ns "
        f"Gaussian pi pulse, closed): F = {float(value):.5f}, dF/d(E_J, E_C, E_L, amp) = "
        f"({partials}) by one jit(value_and_grad) (discrete adjoint), {took:.1f} s with compiling"
    )


def _plot(
    path: pathlib.Path,
    dense: Any,
    curves: list[tuple[str, Any]],
    params: list[tuple[float, ...]],
    flux: Any,
    targets: Any,
    history: list[float],
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for ax, (label, curve), (ej, ec, el) in zip(axes[:2], curves, params, strict=True):
        curve = np.asarray(curve)
        for k in range(LEVELS):
            ax.plot(dense, curve[:, k], color=f"C{k}", label=f"$E_{k + 1} - E_0$")
            ax.plot(flux, np.asarray(targets)[:, k], "o", color=f"C{k}", mfc="none", ms=6)
        ax.set_title(f"{label}: $E_J$={ej:.3f}, $E_C$={ec:.3f}, $E_L$={el:.3f}", fontsize=10)
        ax.set_xlabel(r"flux ($\Phi_0$)")
    axes[0].set_ylabel("transition frequency (GHz)")
    axes[1].plot([], [], "o", color="0.3", mfc="none", label="targets")
    axes[1].legend(fontsize=8)
    axes[2].semilogy(history)
    axes[2].set_xlabel("Adam step")
    axes[2].set_ylabel("loss (GHz²)")
    axes[2].set_title("fit loss", fontsize=10)
    fig.suptitle(
        f"Fluxonium (cutoff {CUTOFF}) via jaxbridge.scqubits.model: two-tone spectrum before "
        f"and after fitting $E_J$, $E_C$, $E_L$ (true {TRUE[0]}, {TRUE[1]}, {TRUE[2]} GHz)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
