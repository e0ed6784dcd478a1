"""The plots scqubits users make, drawn with Matplotlib from jaxbridge.scqubits' plain arrays.

Writes docs/figures/scqubits_{spectrum,matrixelements,coherence,wavefunction}.png for
docs/scqubits.md ("What users plot"). Run from the repository root:

    python docs/figures/scqubits_plots.py
"""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import scqubits  # noqa: E402

import jaxbridge.scqubits as jbq  # noqa: E402

jax.config.update("jax_enable_x64", True)
HERE = pathlib.Path(__file__).resolve().parent
STYLE = {"figsize": (5.0, 3.4), "dpi": 90}


def main() -> None:
    qubit = scqubits.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.5, cutoff=60)
    m = jbq.model(qubit)
    flux = jnp.linspace(0.0, 1.0, 201)

    # Spectrum vs flux (scqubits: plot_evals_vs_paramvals): one batched call.
    levels = m.eigenvals({"flux": flux}, evals_count=5)
    fig, ax = plt.subplots(**STYLE)
    ax.plot(flux, levels - levels[:, :1])
    ax.set(xlabel=r"$\Phi_{ext}/\Phi_0$", ylabel="energy above ground (GHz)", title="Fluxonium")
    fig.tight_layout()
    fig.savefig(HERE / "scqubits_spectrum.png")

    # Matrix elements vs flux (plot_matelem_vs_paramvals).
    n = jnp.abs(m.matrixelements("n_operator", {"flux": flux}, evals_count=3))
    phi = jnp.abs(m.matrixelements("phi_operator", {"flux": flux}, evals_count=3))
    fig, ax = plt.subplots(**STYLE)
    for (i, j), style in (((0, 1), "-"), ((1, 2), "--")):
        ax.plot(flux, n[:, i, j], "C0" + style, label=rf"$|\langle {i}|n|{j}\rangle|$")
        ax.plot(flux, phi[:, i, j], "C1" + style, label=rf"$|\langle {i}|\varphi|{j}\rangle|$")
    ax.set(xlabel=r"$\Phi_{ext}/\Phi_0$", ylabel="matrix element")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "scqubits_matrixelements.png")

    # Coherence vs flux (plot_coherence_vs_paramvals, plot_t1/t2_effective_vs_paramvals).
    sweep = {"flux": jnp.linspace(0.05, 0.95, 91)}
    t1, t2 = m.t1_effective(params=sweep), m.t2_effective(params=sweep)
    fig, ax = plt.subplots(**STYLE)
    ax.semilogy(sweep["flux"], t1, label=r"$T_1$ effective")
    ax.semilogy(sweep["flux"], t2, label=r"$T_2$ effective")
    ax.set(xlabel=r"$\Phi_{ext}/\Phi_0$", ylabel="time (ns)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "scqubits_coherence.png")

    # Wavefunctions on the potential (plot_wavefunction), at the half-flux sweet spot.
    grid = jnp.linspace(-3 * jnp.pi, 3 * jnp.pi, 301)
    fig, ax = plt.subplots(**STYLE)
    ax.plot(grid, m.potential(grid), "k", lw=1)
    for which in range(3):
        wf = m.wavefunction(which=which, phi_grid=grid)
        psi = jnp.real(wf.amplitudes)  # real here; its sign as scqubits' standardize_sign
        psi = psi * jnp.sign(jnp.sum(psi[: psi.size // 2]))
        ax.plot(wf.basis_labels, wf.energy + 4.0 * psi, label=f"level {which}")
    ax.set(xlabel=r"$\varphi$", ylabel="energy (GHz)", ylim=(-12, 12))
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(HERE / "scqubits_wavefunction.png")


if __name__ == "__main__":
    main()
