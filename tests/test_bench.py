"""`python -m jaxbridge bench --quick` works on a fresh install, and says what it skips.

Each benchmark runs in its own interpreter, as the runner runs it. A fresh clone's `make test`
installs `.[all,test]`, not the `bench` extra, so the peers the benchmarks compare against
(mujoco-mjx, sympy2jax, equinox, envpool) are missing there: the `hidden` runs reproduce that
here by making their imports fail for real (`sys.modules[name] = None` in a `sitecustomize`,
which the import system answers with ModuleNotFoundError), whatever this environment has
installed.

The quick runs of all scripts take minutes (two to three on 2 cores, more under load), a third
of the default suite's budget, so by default this file runs: the runner over the fastest
script, and the script whose peers are the optional ones (sympy_converters.py) with those
peers hidden. Every other script, with and without its peers, runs under JAXBRIDGE_SLOW=1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))
# What the `bench` extra adds over `.[all,test]`: exactly what a fresh clone lacks.
BENCH_PEERS = ("sympy2jax", "equinox", "mujoco.mjx", "envpool")
TIMEOUT = 480  # seconds for one quick script on a loaded 2-core machine
DEFAULT = {"derivatives"}  # fast enough for every run of the suite (a few seconds)


def hide(tmp_path: Path, modules) -> dict[str, str]:
    """An environment in which importing each of `modules` raises ModuleNotFoundError."""
    site = tmp_path / "hide"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        f"for _name in {tuple(modules)!r}:\n"
        "    sys.modules[_name] = None  # the import system's own 'not installed'\n"
    )
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path)


def bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m jaxbridge bench --quick ARGS`, bounded in time, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "jaxbridge", "bench", "--quick", "--timeout", str(TIMEOUT), *args],
        cwd=ROOT,
        env=env or dict(os.environ),
        capture_output=True,
        text=True,
        timeout=TIMEOUT + 60,
    )


def check(result: subprocess.CompletedProcess) -> str:
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-6000:]
    assert "Traceback" not in out, out[-6000:]
    return out


def test_hiding_a_peer_makes_its_import_fail(tmp_path):
    """The mechanism the `hidden` runs rely on: a real ImportError, nothing of jaxbridge's."""
    code = (
        "import importlib, sys\n"
        "try:\n"
        "    importlib.import_module(sys.argv[1])\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__)\n"
    )
    for name in BENCH_PEERS:
        run = subprocess.run(
            [sys.executable, "-c", code, name],
            env=hide(tmp_path, BENCH_PEERS),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.stdout.strip() in ("ModuleNotFoundError", "ImportError"), run.stderr


def test_runner_reports_each_script_and_fails_on_a_failure(tmp_path):
    out = check(bench(*sorted(DEFAULT)))
    assert "| derivatives |" in out and "| ok |" in out
    unknown = bench("no_such_benchmark")
    assert unknown.returncode == 2 and "available: " in unknown.stdout


def script(name: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """One benchmark script, run as the runner runs it (from benchmarks/), bounded in time."""
    return subprocess.run(
        [sys.executable, f"{name}.py", "--quick", *args],
        cwd=ROOT / "benchmarks",
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def test_sympy_without_its_peers_skips_their_rows(tmp_path):
    """A fresh clone: no sympy2jax or equinox. Their rows say so; the others still run.

    The 200-operation rows only (`--max-ops 200`): the guard is the same at every size.
    """
    out = check(script("sympy_converters", "--max-ops", "200", env=hide(tmp_path, BENCH_PEERS)))
    assert "skipped: the sympy2jax rows (they need sympy2jax, which does not import" in out
    assert "pip install 'jaxbridge[bench]'" in out
    assert "sympy2jax  " not in out  # no row of it
    assert "lambdify jax cse" in out  # the comparisons that need no peer still ran


@pytest.mark.slow
def test_sympy_with_its_peers(tmp_path):
    pytest.importorskip("sympy2jax")
    out = check(script("sympy_converters", "--max-ops", "200", env=dict(os.environ)))
    assert "skipped:" not in out and "sympy2jax" in out


@pytest.mark.slow
@pytest.mark.parametrize("script", [s for s in SCRIPTS if s not in DEFAULT])
def test_quick_run(script):
    """Every script's quick run with what this environment has installed."""
    check(bench(script))


@pytest.mark.slow
def test_quick_run_of_everything_without_the_bench_extra(tmp_path):
    """`python -m jaxbridge bench --quick` as on a fresh clone (no `bench` extra)."""
    out = check(bench(env=hide(tmp_path, BENCH_PEERS)))
    assert out.count("| ok |") == len(SCRIPTS)
