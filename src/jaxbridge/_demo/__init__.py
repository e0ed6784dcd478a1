"""The main job behind `python -m jaxbridge demo`: the user stories, end to end.

Each stage is a function `stage(report, *, quick, out)`: it prints its progress (a tqdm bar
where it trains), writes its figures into `out`, and appends its lines to `report`. The first
line of its docstring is its title. `STAGES` runs in order; a new stage is one more entry.
"""

from __future__ import annotations

import pathlib
import sys
import time
from collections.abc import Callable, Sequence

from . import _fluxonium, _head_height, _ppo, _qubit_design, _transmon, _vae

Stage = Callable[..., None]  # stage(report: list[str], *, quick: bool, out: pathlib.Path)

# The stages, in order: the first user question (MuJoCo), then the second (SymPy, scqubits),
# then an RL user's (PPO on jaxbridge.gymnasium), then qubit design by gradient (scqubits).
STAGES: tuple[Stage, ...] = (
    _head_height.stage,
    _vae.stage,
    _transmon.stage,
    _fluxonium.stage,
    _ppo.stage,
    _qubit_design.stage,
)


def title(stage: Stage) -> str:
    """A stage's title: the first line of its docstring."""
    return (stage.__doc__ or stage.__name__).strip().splitlines()[0]


def run(*, quick: bool = False, out: str = "demo-output", stages: Sequence[Stage] = STAGES) -> int:
    """Runs `stages` in order; prints the report and writes it to `out/summary.txt`.

    Args:
        quick: a shorter run of every stage (for tests), same figures and report lines.
        out: the folder for figures and `summary.txt` (created if missing).
        stages: the stage functions to run.

    Returns:
        The process exit code: 0.
    """
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    report: list[str] = [f"jaxbridge demo{' (quick)' if quick else ''}"]
    start = time.perf_counter()
    for i, stage in enumerate(stages, 1):
        name = title(stage)
        print(f"\n[{i}/{len(stages)}] {name}", flush=True)
        report.append(f"Stage {i}: {name}")
        began = time.perf_counter()
        stage(report, quick=quick, out=folder)
        report.append(f"  stage time: {time.perf_counter() - began:.1f} s")
        sys.stdout.flush()
    report.append(f"Total time: {time.perf_counter() - start:.1f} s")
    figures = sorted(p.name for p in folder.glob("*.png"))
    if figures:
        report.append(f"Figures in {folder}: {', '.join(figures)}")
    text = "\n".join(report) + "\n"
    (folder / "summary.txt").write_text(text)
    print("\n" + text, end="")
    print(f"Report written to {folder / 'summary.txt'}")
    return 0
