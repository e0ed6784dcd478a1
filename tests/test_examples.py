"""Every script in `examples/` runs to the end in its `--quick` mode, as a user would run it."""

import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).parents[1] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("[0-9][0-9]_*.py"))

# What each script prints when it has shown its point (the scripts also assert their numbers).
EXPECTED = {
    "01_mujoco_tracer_error.py": ["before: TracerArrayConversionError", "jit(grad) training"],
    "02_sympy_custom_vjp.py": [
        "before: TypeError",
        "is not a valid JAX type",
        "fix 1, jaxbridge.host",
        "fix 2, jaxbridge.sympy.compile",
        "fix 3, the expression in the residuals",
        "same values and gradients from all three fixes and SymPy itself",
    ],
    "03_scipy_with_derivatives.py": ["kv:", "solve_ivp:", "jacfwd agrees: True"],
    "04_batching.py": ["Threads(2)", "Processes(2)", "bit for bit"],
    "05_mujoco_policy.py": ["forward distance"],
    "06_migrate_from_pure_callback.py": ["values and JVPs equal", "before: jax.grad fails"],
    "07_closed_loop.py": ["mean final distance to target"],
    "08_ppo.py": ["jaxbridge: mean episode return", "gymnasium: mean episode return"],
    "09_qubit_design.py": [
        "| jaxbridge + Optax L-BFGS |",
        "| jaxbridge + SciPy L-BFGS-B |",
        "| scqubits + SciPy Nelder-Mead |",
        "jaxbridge's objective equals scqubits' at the final design: True",
    ],
}


def test_examples_are_listed():
    assert SCRIPTS, f"no examples found in {EXAMPLES}"
    readme = (EXAMPLES / "README.md").read_text()
    docs = (EXAMPLES.parent / "docs" / "examples.md").read_text()
    for script in SCRIPTS:
        assert script.name in readme, f"{script.name} missing from examples/README.md"
        assert script.name in docs, f"{script.name} missing from docs/examples.md"


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_example_runs(script, tmp_path):
    env = dict(os.environ)
    if f"OPENBLAS_NUM_THREADS=1 python examples/{script.name}" in script.read_text():
        env["OPENBLAS_NUM_THREADS"] = "1"  # as the script's usage line says to run it
    result = subprocess.run(
        [sys.executable, str(script), "--quick"],
        cwd=tmp_path,  # MuJoCo may write MUJOCO_LOG.TXT into the working directory
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert result.returncode == 0, f"{script.name} failed:\n{result.stdout}\n{result.stderr}"
    for line in EXPECTED.get(script.name, []):
        assert line in result.stdout, f"{script.name}: {line!r} not in\n{result.stdout}"


def test_ppo_stops_at_its_budget(tmp_path):
    """`--budget`, as the demo runs 08_ppo.py: a budget spent by the compile stops after one."""
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "08_ppo.py"), "--only", "jaxbridge", "--steps", "8192"]
        + ["--budget", "0", "--out", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert "stopped after 1 of 4 updates: the 0 s budget" in result.stdout, result.stdout
    assert "| jaxbridge |" in result.stdout and (tmp_path / "ppo_hopper.png").is_file()
