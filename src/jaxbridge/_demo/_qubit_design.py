"""Stage: a fluxonium designed by gradient for the longest T2 (`examples/09_qubit_design.py`).

The stage runs the example script itself, so the demo and the example are one program: from a
poor design, Optax's L-BFGS tunes a fluxonium's E_J, E_C and E_L through
`jaxbridge.scqubits.model(fluxonium).t2_effective` (one `jax.jit`-compiled step, gradients
through the eigenvectors) for the longest T2 at half flux, with f01 kept in 0.2 to 0.6 GHz and
the anharmonicity above 4 GHz, and so does SciPy's L-BFGS-B on one compiled `value_and_grad`
of the same objective; SciPy's Nelder-Mead on scqubits' own `t2_effective` gets the same
objective, start and wall-time budget. The script ships with the source, not the wheel,
as the benchmarks do. The quick demo gives each optimiser a 1 s budget.
"""

from __future__ import annotations

import pathlib

from ._common import example, needs, run_script

#: The lines of the script's output that go into the demo's report.
_REPORTED = ("fluxonium,", "start:", "| ", "time to the same objective", "jaxbridge + ",
             "scqubits + ", "objective at the final design", "figure:")  # fmt: skip


def stage(report: list[str], *, quick: bool, out: pathlib.Path) -> None:
    """A fluxonium designed by gradient for the longest T2"""
    needs("scqubits", "optax", "matplotlib", "scipy")
    script = example("09_qubit_design.py", "qubit-design")
    args = ["--out", str(out.resolve())]
    if quick:
        args += ["--quick", "--budget", "1"]
    lines = run_script(script, args, out)
    report += [f"  {line}" for line in lines if line.startswith(_REPORTED)]
