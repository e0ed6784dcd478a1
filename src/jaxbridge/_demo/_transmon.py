"""Stage 3: a SymPy Hamiltonian fitted by gradient (the second user question, at full size).

A transmon in the charge basis, H = 4 E_C (n - n_g)^2 - E_J cos(phi), is written in SymPy and
split by `jaxbridge.sympy.operator_sum` into compiled coefficients and fixed charge-basis
matrices. Its E_J and E_C are fitted with Optax, from a wrong guess, to "measured" transition
frequencies (made from known true values at a few n_g, with a little noise); the gradient goes
through `jnp.linalg.eigvalsh`, and the whole step is one `jax.jit`-compiled function. Then the
constants of a small `jaxbridge.sympy.Expression` for the 0-1 transition against n_g are
trained on the fitted spectrum and printed back as SymPy with `to_sympy()`.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any, NamedTuple

import numpy as np

from ._common import needs

NCUT = 15  # charge states -NCUT..NCUT
LEVELS = 3  # transitions 0-1, 0-2, 0-3
TRUE = (8.0, 0.5)  # E_J, E_C in GHz: E_J/E_C = 16, enough charge dispersion to see
GUESS = (4.0, 1.0)
NOISE = 0.002  # GHz: 2 MHz of measurement noise on the targets


class _Config(NamedTuple):
    points: int  # n_g values with targets
    steps: int  # Hamiltonian fit steps
    expression_steps: int  # Expression fit steps
    dense: int  # n_g values drawn in the figures


_FULL = _Config(points=9, steps=400, expression_steps=400, dense=201)
_QUICK = _Config(points=5, steps=150, expression_steps=150, dense=61)


def _hamiltonian() -> tuple[Any, Any, tuple]:
    """The transmon in SymPy, its `operator_sum`, and its parameter symbols (E_J, E_C, n_g)."""
    import sympy

    import jaxbridge.sympy as jbs

    EJ, EC, ng = sympy.symbols("E_J E_C n_g", real=True)
    n = sympy.Symbol("n", commutative=False)
    phi = sympy.Symbol("phi", commutative=False)
    H = 4 * EC * (n - ng) ** 2 - EJ * sympy.cos(phi)
    size = 2 * NCUT + 1
    charge = np.diag(np.arange(-NCUT, NCUT + 1.0))
    cos_phi = 0.5 * (np.eye(size, k=1) + np.eye(size, k=-1))  # e^{±i phi} shift the charge
    h = jbs.operator_sum(H, {n: charge, sympy.cos(phi): cos_phi}, [EJ, EC, ng])
    return H, h, (EJ, EC, ng)


def stage(report: list[str], *, quick: bool, out: pathlib.Path) -> None:
    """A SymPy Hamiltonian fitted by gradient"""
    needs("sympy", "optax", "matplotlib", "tqdm")
    import jax

    # Eigenvalues span hundreds of GHz while the fit resolves kHz: float64, for this stage only.
    with jax.enable_x64(True):
        _run(report, _QUICK if quick else _FULL, out)


def _run(report: list[str], cfg: _Config, out: pathlib.Path) -> None:
    import jax
    import jax.numpy as jnp
    import optax
    import sympy
    from tqdm import tqdm

    import jaxbridge.sympy as jbs

    H, h, (EJ, EC, ng) = _hamiltonian()

    @jax.jit  # also outside the train step: eager op-by-op dispatch compiles every op
    def transitions(p: Any, ngs: Any) -> Any:
        """E_m - E_0 for m = 1..LEVELS at each n_g: one batched `eigvalsh`."""
        energies = jnp.linalg.eigvalsh(h(p[0], p[1], ngs))
        return energies[..., 1 : LEVELS + 1] - energies[..., :1]

    rng = np.random.default_rng(0)
    ngs = np.linspace(-0.5, 0.5, cfg.points)
    dense = np.linspace(-1.0, 1.0, cfg.dense)
    true, guess = np.asarray(TRUE), np.asarray(GUESS)
    targets = np.asarray(transitions(true, ngs)) + NOISE * rng.normal(size=(cfg.points, LEVELS))
    print(
        f"      H = {H} with ncut {NCUT} ({2 * NCUT + 1} charge states); targets: "
        f"{LEVELS} transitions at {cfg.points} n_g values, true E_J={TRUE[0]}, E_C={TRUE[1]}"
    )

    def loss_fn(log_p: Any) -> Any:
        # In log space: E_J and E_C stay positive, and both move at the same relative pace.
        return jnp.mean(jnp.square(transitions(jnp.exp(log_p), ngs) - targets))

    opt = optax.adam(0.05)

    @jax.jit  # SymPy-compiled coefficients, eigvalsh, its gradient and Adam: one program
    def step(log_p: Any, state: Any) -> tuple[Any, Any, Any]:
        loss, grad = jax.value_and_grad(loss_fn)(log_p)
        updates, state = opt.update(grad, state, log_p)
        return optax.apply_updates(log_p, updates), state, loss

    log_p = jnp.asarray(np.log(guess))
    state = opt.init(log_p)
    history: list[float] = []
    compile_s = 0.0
    bar = tqdm(range(cfg.steps), desc="      fit E_J, E_C", unit="step", leave=True)
    start = time.perf_counter()
    for i in bar:
        log_p, state, loss = step(log_p, state)
        history.append(float(loss))  # waits for the step
        if i == 0:  # the first step compiles: keep it out of the speed
            compile_s = time.perf_counter() - start
            start = time.perf_counter()
        if i % 10 == 0 or i == cfg.steps - 1:
            fitted = np.exp(np.asarray(log_p))
            postfix = {"loss": f"{history[-1]:.2e}", "E_J": f"{fitted[0]:.3f}"}
            bar.set_postfix(postfix | {"E_C": f"{fitted[1]:.4f}"}, refresh=False)
    steps_per_s = max(cfg.steps - 1, 1) / (time.perf_counter() - start)
    bar.close()
    fitted = np.exp(np.asarray(log_p))
    rms_mhz = 1e3 * np.sqrt(history[-1])

    # A closed form for the 0-1 transition against n_g, its constants trained on the fit.
    f01 = np.asarray(transitions(fitted, dense))[:, 0]
    x = sympy.Symbol("n_g", real=True)
    expr = jbs.Expression(5.0 + 0.1 * sympy.cos(2 * sympy.pi * x), [x])  # a wrong start
    initial_expr = expr.to_sympy()
    expr_opt = optax.adam(0.02)

    @jax.jit  # the Expression is an ordinary argument: its constants are its only leaf
    def expr_step(e: Any, state: Any) -> tuple[Any, Any, Any]:
        loss, grad = jax.value_and_grad(lambda e: jnp.mean(jnp.square(e(dense) - f01)))(e)
        updates, state = expr_opt.update(grad, state, e)
        return optax.apply_updates(e, updates), state, loss

    expr_state = expr_opt.init(expr)  # type: ignore[arg-type]  # optax's Params: any pytree
    bar = tqdm(range(cfg.expression_steps), desc="      fit f01(n_g)", unit="step", leave=True)
    for i in bar:
        expr, expr_state, expr_loss = expr_step(expr, expr_state)
        if i % 10 == 0 or i == cfg.expression_steps - 1:
            bar.set_postfix(loss=f"{float(expr_loss):.2e}", refresh=False)
    bar.close()
    curve = np.asarray(jax.jit(lambda e: e(dense))(expr))
    expr_rms_mhz = 1e3 * float(np.sqrt(np.mean(np.square(curve - f01))))
    trained = expr.to_sympy()
    shown = trained.xreplace({c: sympy.Float(c, 5) for c in trained.atoms(sympy.Float)})

    _plot_spectrum(
        out / "transmon_spectrum.png",
        dense,
        [
            ("initial guess", transitions(guess, dense)),
            ("after the fit", transitions(fitted, dense)),
        ],
        [GUESS, (float(fitted[0]), float(fitted[1]))],
        ngs,
        targets,
    )
    _plot_fit(out / "transmon_fit.png", history, dense, f01, curve, initial_expr, x)
    lines = [
        f"  transmon H = {H}, ncut {NCUT}, by jaxbridge.sympy.operator_sum; targets: "
        f"{LEVELS} transitions at {cfg.points} n_g values, {NOISE * 1e3:.0f} MHz noise",
        f"  E_J (GHz): true {TRUE[0]:.4f}, initial {GUESS[0]:.4f}, fitted {float(fitted[0]):.4f}",
        f"  E_C (GHz): true {TRUE[1]:.4f}, initial {GUESS[1]:.4f}, fitted {float(fitted[1]):.4f}",
        f"  final loss {history[-1]:.3e} GHz² (rms {rms_mhz:.2f} MHz, the noise is "
        f"{NOISE * 1e3:.0f} MHz), from {history[0]:.3e}",
        f"  train step (jit, Adam, gradient through eigvalsh of {cfg.points} "
        f"{2 * NCUT + 1}x{2 * NCUT + 1} matrices): {steps_per_s:.0f} steps/s, first step "
        f"(compiling) {compile_s:.1f} s",
        f"  trained SymPy expression for f01(n_g) (from {initial_expr}): {shown} "
        f"(rms {expr_rms_mhz:.2f} MHz)",
    ]
    for line in lines:
        print("    " + line)
    report += lines


def _plot_spectrum(
    path: pathlib.Path,
    dense: Any,
    curves: list[tuple[str, Any]],
    params: list[tuple[float, ...]],
    ngs: Any,
    targets: Any,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(11, 4.2), sharey=True)
    for ax, (label, curve), (ej, ec) in zip(axes, curves, params, strict=True):
        curve = np.asarray(curve)
        for m in range(LEVELS):
            ax.plot(dense, curve[:, m], color=f"C{m}", label=f"$E_{m + 1} - E_0$")
            ax.plot(ngs, np.asarray(targets)[:, m], "o", color=f"C{m}", mfc="none", ms=6)
        ax.set_title(f"{label}: $E_J$ = {ej:.3f}, $E_C$ = {ec:.4f} GHz", fontsize=10)
        ax.set_xlabel("$n_g$")
    axes[0].set_ylabel("transition frequency (GHz)")
    axes[-1].plot([], [], "o", color="0.3", mfc="none", label="targets")
    axes[-1].legend(fontsize=8, ncols=4, loc="upper center")  # empty above the fitted lines
    fig.suptitle(
        f"Transmon (ncut {NCUT}) from SymPy via operator_sum: spectrum before and after "
        f"fitting $E_J$, $E_C$ (true {TRUE[0]}, {TRUE[1]} GHz)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_fit(
    path: pathlib.Path,
    history: list[float],
    dense: Any,
    f01: Any,
    trained: Any,
    initial: Any,
    x: Any,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import sympy

    start = sympy.lambdify(x, initial, "numpy")(np.asarray(dense))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.semilogy(history)
    left.set_xlabel("train step")
    left.set_ylabel("loss (GHz²)")
    left.set_title("Fit of $E_J$, $E_C$ (gradients through eigvalsh)", fontsize=10)
    right.plot(dense, 1e3 * (np.asarray(f01) - 5.0), "k-", lw=3, alpha=0.3, label="fitted H")
    right.plot(dense, 1e3 * (np.broadcast_to(start, dense.shape) - 5.0), "C1--", label="start")
    right.plot(dense, 1e3 * (np.asarray(trained) - 5.0), "C0-", label="trained Expression")
    right.set_xlabel("$n_g$")
    right.set_ylabel("$f_{01}$ - 5 GHz (MHz)")
    right.set_title("jaxbridge.sympy.Expression: constants trained with Optax", fontsize=10)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
