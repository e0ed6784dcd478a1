"""Every script in `examples/` runs to the end in its `--quick` mode, as a user would run it.

A script the quick demo runs with `--quick` too is left to `test_demo.py`'s
`test_demo_quick` in the default run (it costs a worker 15 to 25 s), and runs here too under
JAXBRIDGE_SLOW=1.
"""

import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).parents[1] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("[0-9][0-9]_*.py"))

#: Run as `SCRIPT --quick` by the quick demo's stages too (`jaxbridge._demo._playground`).
IN_THE_DEMO = {"10_playground.py": "_playground", "09_qubit_design.py": "_qubit_design"}

#: Scripts another test of this file runs as a whole (a budget that stops after one update of
#: each side), so the parametrized run would only repeat it.
RUN_BY = {"08_ppo.py": "test_ppo_stops_at_its_budget"}

#: Scripts whose `--quick` run alone costs a worker a minute or more (most of it compiling a
#: differentiated master-equation solve): run under JAXBRIDGE_SLOW=1. What they call is tested
#: in the default run (`tests/scqubits/test_scqubits_dynamics.py`).
SLOW = {"12_gate_design.py"}

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


def test_the_scripts_left_to_the_demo_run_in_its_quick_stages():
    import importlib

    for name, module in IN_THE_DEMO.items():
        stage = importlib.import_module(f"jaxbridge._demo.{module}")
        source = pathlib.Path(stage.__file__).read_text()
        assert f'example("{name}"' in source and '["--quick"' in source, name


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_example_runs(script, tmp_path):
    if script.name in IN_THE_DEMO and not os.environ.get("JAXBRIDGE_SLOW"):
        pytest.skip("test_demo.py::test_demo_quick runs it so (JAXBRIDGE_SLOW=1 runs it here)")
    if script.name in RUN_BY:
        pytest.skip(f"{RUN_BY[script.name]} runs it, every side of it")
    if script.name in SLOW and not os.environ.get("JAXBRIDGE_SLOW"):
        pytest.skip("a minute of compiling: JAXBRIDGE_SLOW=1 runs it (its functions are tested)")
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
    """`--budget`, as the demo runs 08_ppo.py: a budget spent by the compile stops after one.

    Both trainers (jaxbridge's and gymnasium's SyncVectorEnv), one update each: the whole
    script but the updates the demo's quick stage runs (test_demo.py)."""
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "08_ppo.py"), "--steps", "8192"]
        + ["--budget", "0", "--out", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert "stopped after 1 of 4 updates: the 0 s budget" in result.stdout, result.stdout
    assert "| jaxbridge |" in result.stdout and (tmp_path / "ppo_hopper.png").is_file()
    assert "| gymnasium |" in result.stdout, result.stdout
    for line in EXPECTED["08_ppo.py"]:
        assert line in result.stdout, f"08_ppo.py: {line!r} not in\n{result.stdout}"
