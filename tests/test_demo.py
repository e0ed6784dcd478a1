"""`python -m jaxbridge demo --quick` runs every stage, writes its figures and its report."""

import subprocess
import sys

from jaxbridge._demo import STAGES, title


def test_stages_have_titles():
    assert len(STAGES) >= 2
    assert all(title(stage) for stage in STAGES)


def test_demo_quick(tmp_path):
    out = tmp_path / "demo-output"
    result = subprocess.run(
        [sys.executable, "-m", "jaxbridge", "demo", "--quick", "--out", str(out)],
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
        "Total time",
    ):
        assert line in summary, f"{line!r} not in the summary:\n{summary}"
        assert line in result.stdout, f"{line!r} not printed:\n{result.stdout}"
    for figure in ("vae_losses.png", "vae_poses.png"):
        data = (out / figure).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000, figure
    assert "step/s" in result.stderr  # the training progress bars (tqdm writes to stderr)
