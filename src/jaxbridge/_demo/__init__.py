"""The main job behind `python -m jaxbridge demo`: the user stories, end to end.

Each stage is a module here with a function `stage(report, *, quick, out)`: it prints its
progress (a tqdm bar where it trains), writes its figures into `out`, and appends its lines to
`report`. The first line of its docstring is its title. A stage with a longer run for
`python -m jaxbridge demo --full` also takes `full: bool`. `STAGES` runs in order; a new stage
is one more name in `_MODULES`.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pathlib
import sys
import time
from collections.abc import Callable, Sequence

Stage = Callable[..., None]  # stage(report: list[str], *, quick: bool, out: pathlib.Path)

# The stages, in order: the first user question (MuJoCo), then the second (SymPy, scqubits),
# then an RL user's (PPO on jaxbridge.gymnasium), then qubit design by gradient (scqubits).
_MODULES = (
    "_head_height",
    "_vae",
    "_transmon",
    "_fluxonium",
    "_ppo",
    "_qubit_design",
    "_playground",
)
STAGES: tuple[Stage, ...] = tuple(
    importlib.import_module(f".{name}", __name__).stage for name in _MODULES
)


def title(stage: Stage) -> str:
    """A stage's title: the first line of its docstring."""
    return (stage.__doc__ or stage.__name__).strip().splitlines()[0]


def _cpu() -> float:
    """CPU seconds of this process and of the scripts it ran (ended ones), user and system."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run(
    *,
    quick: bool = False,
    full: bool = False,
    out: str = "demo-output",
    stages: Sequence[Stage] = STAGES,
) -> int:
    """Runs `stages` in order; prints the report and writes it to `out/summary.txt`.

    Args:
        quick: a shorter run of every stage (for tests), same figures and report lines.
        full: the longer run of the stages that have one (PPO: both trainers, 1M steps).
        out: the folder for figures and `summary.txt` (created if missing).
        stages: the stage functions to run.

    Returns:
        The process exit code: 0.
    """
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    mode = " (quick)" if quick else " (full)" if full else ""
    load = os.getloadavg()[0]
    report: list[str] = [f"jaxbridge demo{mode}: {os.cpu_count()} CPUs, load average {load:.1f}"]
    times: list[tuple[str, float, float]] = []
    start, start_cpu = time.perf_counter(), _cpu()
    for i, stage in enumerate(stages, 1):
        name = title(stage)
        print(f"\n[{i}/{len(stages)}] {name}", flush=True)
        report.append(f"Stage {i}: {name}")
        began, began_cpu = time.perf_counter(), _cpu()
        longer = {"full": full} if "full" in inspect.signature(stage).parameters else {}
        stage(report, quick=quick, out=folder, **longer)
        wall, cpu = time.perf_counter() - began, _cpu() - began_cpu
        report.append(f"  stage time: {wall:.1f} s (CPU {cpu:.1f} s)")
        times.append((name, wall, cpu))
        sys.stdout.flush()
    wall, cpu = time.perf_counter() - start, _cpu() - start_cpu
    report += ["Times (wall and CPU seconds, the stages' scripts included):", ""]
    report += ["| stage | wall (s) | CPU (s) |", "|---|---|---|"]
    report += [f"| {i}. {name} | {w:.1f} | {c:.1f} |" for i, (name, w, c) in enumerate(times, 1)]
    report += [f"| total | {wall:.1f} | {cpu:.1f} |", ""]
    report.append(
        f"Total time: {wall:.1f} s (CPU {cpu:.1f} s; load average {os.getloadavg()[0]:.1f})"
    )
    figures = sorted(p.name for p in folder.glob("*.png"))
    if figures:
        report.append(f"Figures in {folder}: {', '.join(figures)}")
    text = "\n".join(report) + "\n"
    (folder / "summary.txt").write_text(text)
    print("\n" + text, end="")
    print(f"Report written to {folder / 'summary.txt'}")
    return 0
