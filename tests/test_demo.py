"""`python -m jaxbridge demo --quick` runs every stage, writes its figures and its report."""

import math
import re
import subprocess
import sys
from pathlib import Path

from jaxbridge._demo import STAGES, run, title

# A path in a report line: a folder, a name with one of the extensions the stages write.
_PATH = re.compile(r"[\w./-]*/[\w.-]+\.(?:png|gif|txt|json|csv|npz)\b")


def named_paths(summary: str, cwd: Path) -> list[Path]:
    """Every file the report names, as the user who ran the demo in `cwd` would open it."""
    paths = []
    for line in summary.splitlines():
        if line.startswith("Figures in "):  # "Figures in FOLDER: a.png, b.png"
            folder, names = line.removeprefix("Figures in ").split(": ", 1)
            paths += [cwd / folder / name for name in names.split(", ")]
        else:
            paths += [cwd / found for found in _PATH.findall(line)]
    return paths


def test_stages_have_titles():
    assert len(STAGES) >= 4
    assert all(title(stage) for stage in STAGES)


def test_full_reaches_the_stages_that_take_it(tmp_path, capsys):
    """A stage is a function; `full` goes to those whose signature has it, as _ppo's does."""
    seen = []

    def plain(report, *, quick, out):
        """A stage without a longer run"""
        seen.append(("plain", quick))
        report.append(f"  wrote {out / 'plain.txt'}")
        (out / "plain.txt").write_text("plain")

    def longer(report, *, quick, out, full=False):
        """A stage with one"""
        seen.append(("longer", full))

    assert run(full=True, out=str(tmp_path / "out"), stages=(plain, longer)) == 0
    assert seen == [("plain", False), ("longer", True)]
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert summary.startswith("jaxbridge demo (full): ")
    assert "| 1. A stage without a longer run |" in summary and "| 2. A stage with one |" in summary
    named = named_paths(summary, Path.cwd())
    assert tmp_path / "out" / "plain.txt" in named and all(p.is_file() for p in named), summary
    assert summary in capsys.readouterr().out


def test_demo_rejects_quick_with_full():
    result = subprocess.run(
        [sys.executable, "-m", "jaxbridge", "demo", "--quick", "--full"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "not allowed with argument --quick" in result.stderr


def test_demo_quick(tmp_path):
    out = tmp_path / "demo-output"
    # A relative --out, as `make demo` passes it: the stages that run a script elsewhere once
    # wrote to demo-output/demo-output/ while the report named demo-output/.
    result = subprocess.run(
        [sys.executable, "-m", "jaxbridge", "demo", "--quick", "--out", "demo-output"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, f"demo failed:\n{result.stdout}\n{result.stderr}"
    summary = (out / "summary.txt").read_text()
    for line in (
        "Stage 1: MuJoCo head height under jit and vmap",
        "plain NumPy function under jax.jit: TracerArrayConversionError",
        "Stage 2: A Flax NNX VAE of humanoid poses with MuJoCo in its loss",
        "decoded prior samples: before",
        "steps/s",
        "of the time in MuJoCo",
        "Stage 3: A SymPy Hamiltonian fitted by gradient",
        "E_J (GHz): true 8.0000, initial 4.0000, fitted",
        "E_C (GHz): true 0.5000, initial 1.0000, fitted",
        "final loss",
        "gradient through eigvalsh",
        "trained SymPy expression for f01(n_g)",
        "cos(2*pi*n_g)",
        "Stage 4: A scqubits fluxonium fitted by gradient",
        "m = jaxbridge.scqubits.model(scqubits.Fluxonium(..., cutoff=40))",
        "E_L (GHz): true 1.0000, initial 0.7000, fitted",
        "gradient through eigenvalues of 7 fluxonium Hamiltonians",
        "fitted model against scqubits' own eigenvals at flux 0.25",
        "X gate on the fitted fluxonium (jaxbridge.scqubits.dynamics",
        "PPO on Hopper-v5 with one jitted update over jaxbridge.gymnasium",
        "| jaxbridge |",
        "learning curves: demo-output/ppo_hopper.png",
        "A fluxonium designed by gradient for the longest T2",
        # examples/09_qubit_design.py's rows (test_examples.py leaves the script to this run)
        "| jaxbridge + Optax L-BFGS |",
        "| jaxbridge + SciPy L-BFGS-B |",
        "| scqubits + SciPy Nelder-Mead |",
        "objective at the final design: jaxbridge",
        "| total |",
        "Total time",
    ):
        assert line in summary, f"{line!r} not in the summary:\n{summary}"
        assert line in result.stdout, f"{line!r} not printed:\n{result.stdout}"
    # The fit recovers the true E_J and E_C from the wrong guess (2 MHz noise on the targets).
    for name, true in (("E_J", 8.0), ("E_C", 0.5)):
        found = re.search(rf"{name} \(GHz\): .* fitted ([0-9.]+)", summary)
        assert found, f"no fitted {name} in the summary:\n{summary}"
        assert abs(float(found.group(1)) - true) < 0.01 * true, (name, found.group(0))
    # The fluxonium stage recovers E_J, E_C, E_L (the E_J line of stage 4 comes second).
    for name, true in (("E_J", 4.0), ("E_C", 1.0), ("E_L", 1.0)):
        found = re.findall(rf"{name} \(GHz\): true {true:.4f}, .* fitted ([0-9.]+)", summary)
        assert found, f"no fitted fluxonium {name} in the summary:\n{summary}"
        assert abs(float(found[-1]) - true) < 0.01 * true, (name, found)
    diff = re.search(r"own eigenvals at flux 0.25: max \|diff\| ([0-9.e+-]+) GHz", summary)
    assert diff and float(diff.group(1)) < 1e-9, summary
    # The gate line: a pi pulse on the fitted fluxonium is an X gate, and its gradient is finite.
    gate = re.search(r"closed\): F = ([0-9.]+), dF/d\(E_J, E_C, E_L, amp\) = \(([^)]*)\)", summary)
    assert gate and float(gate.group(1)) > 0.99, summary
    assert all(math.isfinite(float(v)) for v in gate.group(2).split(",")), summary
    figures = ("vae_losses.png", "vae_poses.png", "transmon_spectrum.png", "transmon_fit.png")
    for figure in (*figures, "fluxonium_spectrum.png", "ppo_hopper.png"):
        data = (out / figure).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000, figure
    # The Playground stage's video of its trained policy, or the one line saying why not.
    video = out / "playground_policy.gif"
    if "no video: " in summary:
        assert "no video: MuJoCo cannot render here: MUJOCO_GL=" in summary, summary
    else:
        assert f"video of the trained policy saved to {video}" in summary, summary
        assert video.read_bytes().startswith(b"GIF89a"), summary
    assert "step/s" in result.stderr  # the training progress bars (tqdm writes to stderr)
    # Every file the report names exists where it says, and names every figure written.
    named = named_paths(summary, tmp_path)
    missing = [str(p) for p in named if not p.is_file()]
    assert not missing, f"the report names files that do not exist: {missing}\n{summary}"
    written = {p.resolve() for p in out.rglob("*.png")}
    assert written and written <= {p.resolve() for p in named}, (sorted(written), summary)
    assert out / "ppo_hopper.png" in named and (out / "qubit_design.png").resolve() in {
        p.resolve() for p in named
    }, summary
    # The times: a row per stage, in order, and the total.
    rows = re.findall(r"^\| (\d+)\. (.+) \| [0-9.]+ \| [0-9.]+ \|$", summary, re.M)
    assert rows == [(str(i), title(s)) for i, s in enumerate(STAGES, 1)], summary
