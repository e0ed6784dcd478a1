"""Stage: a fluxonium designed by gradient for the longest T2 (`examples/09_qubit_design.py`).

The stage runs the example script itself, so the demo and the example are one program: from a
poor design, Optax's L-BFGS tunes a fluxonium's E_J, E_C and E_L through
`jaxbridge.scqubits.model(fluxonium).t2_effective` (one `jax.jit`-compiled step, gradients
through the eigenvectors) for the longest T2 at half flux, with f01 kept in 0.2 to 0.6 GHz and
the anharmonicity above 4 GHz; SciPy's Nelder-Mead on scqubits' own `t2_effective` gets the
same objective, start and wall-time budget. The script ships with the source, not the wheel,
as the benchmarks do. The quick demo gives each optimiser a 1 s budget.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from ._common import needs

#: The lines of the script's output that go into the demo's report.
_REPORTED = ("fluxonium,", "start:", "| ", "time to the same objective", "jaxbridge + ",
             "scqubits + ", "objective at the final design", "figure:")  # fmt: skip


def _script() -> pathlib.Path:
    # A source checkout: src/jaxbridge/_demo/_qubit_design.py -> examples/ beside src/.
    return pathlib.Path(__file__).resolve().parents[3] / "examples" / "09_qubit_design.py"


def stage(report: list[str], *, quick: bool, out: pathlib.Path) -> None:
    """A fluxonium designed by gradient for the longest T2"""
    needs("scqubits", "optax", "matplotlib", "scipy")
    script = _script()
    if not script.is_file():
        raise SystemExit(
            f"the qubit-design stage runs {script.name} from the repository's examples/, which "
            f"is not at {script.parent}: the examples ship with the source, not the wheel. Run "
            "the demo from a clone (`make demo`)."
        )
    command = [sys.executable, str(script), "--out", str(out.resolve())]
    if quick:
        command += ["--quick", "--budget", "1"]
    env = dict(os.environ, PYTHONUNBUFFERED="1", OPENBLAS_NUM_THREADS="1")
    # The script imports the jaxbridge that runs this, also from a checkout not installed.
    here = str(pathlib.Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    lines: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=out
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            print(f"      {line}", end="", flush=True)
            lines.append(line.rstrip("\n"))
    if process.returncode != 0:
        tail = "\n".join(lines[-20:])
        raise RuntimeError(
            f"{script.name} exited with status {process.returncode}; its last lines:\n{tail}"
        )
    report += [f"  {line}" for line in lines if line.startswith(_REPORTED)]
