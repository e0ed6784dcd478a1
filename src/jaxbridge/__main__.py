"""`python -m jaxbridge demo` runs the main job; `python -m jaxbridge bench` the benchmarks."""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

#: A benchmark prints this at the start of a line for rows it skips (see benchmarks/_util.py).
SKIPPED = "skipped:"


def _benchmarks() -> pathlib.Path:
    # A source checkout: src/jaxbridge/__main__.py -> benchmarks/ beside src/.
    return pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


def benchmark_scripts() -> dict[str, pathlib.Path]:
    """The scripts `python -m jaxbridge bench` runs, by name (`benchmarks/<name>.py`)."""
    return {p.stem: p for p in sorted(_benchmarks().glob("*.py")) if not p.name.startswith("_")}


def _bench(quick: bool, names: list[str], timeout: float | None) -> int:
    """Runs the scripts in `benchmarks/` (all, or those named), streaming their tables.

    Each script runs in its own interpreter, which imports this same jaxbridge. A script that
    fails, is killed or runs past `timeout` seconds is reported and the others still run;
    the summary at the end lists every script's time, status and skipped rows. Returns 0 when
    every script exited cleanly (rows skipped for a missing peer included), else 1.
    """
    root = _benchmarks()
    scripts = benchmark_scripts()
    if not scripts:
        print(
            f"no benchmark scripts found in {root}: the benchmarks ship with the source, not "
            "the wheel. Run from a clone: `git clone ...; cd jaxbridge; make bench`."
        )
        return 1
    unknown = [n for n in names if n not in scripts]
    if unknown:
        print(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(scripts)}")
        return 2
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # The scripts import the jaxbridge that runs this, also from a checkout not installed.
    here = str(pathlib.Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    summary = []
    for name in names or list(scripts):
        print(f"\n## {name}{' (quick)' if quick else ''}\n", flush=True)
        start = time.perf_counter()
        status, skipped = _run_script(scripts[name], quick, timeout, env, root)
        seconds = time.perf_counter() - start
        print(f"({name}.py: {seconds:.0f} s, {status})", flush=True)
        summary.append((name, seconds, status, skipped))
    print("\n## summary\n")
    print("| benchmark | time | status | rows skipped |\n|---|---|---|---|")
    for name, seconds, status, skipped in summary:
        print(f"| {name} | {seconds:.0f} s | {status} | {skipped} |")
    return 0 if all(status == "ok" for _, _, status, _ in summary) else 1


def _run_script(
    script: pathlib.Path, quick: bool, timeout: float | None, env: dict[str, str], cwd: pathlib.Path
) -> tuple[str, int]:
    """Runs one script, echoing its output: `(status, lines of skipped rows)`."""
    args = [sys.executable, str(script)] + (["--quick"] if quick else [])
    proc = subprocess.Popen(
        args,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,  # its own process group: a timeout stops its children too
    )
    skipped = 0

    def echo() -> None:  # a thread, so that a silent script still times out
        nonlocal skipped
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            skipped += line.startswith(SKIPPED)

    reader = threading.Thread(target=echo, daemon=True)
    reader.start()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        _stop(proc)
        reader.join(5.0)
        return f"TIMED OUT after {timeout:g} s", skipped
    except KeyboardInterrupt:
        _stop(proc)
        raise
    reader.join()
    code = proc.wait()
    if code < 0:
        try:
            return f"KILLED by {signal.Signals(-code).name}", skipped
        except ValueError:
            return f"KILLED by signal {-code}", skipped
    return ("ok" if code == 0 else f"FAILED (exit {code})"), skipped


def _stop(proc: subprocess.Popen) -> None:
    """Stops a script and the processes it started (its process group)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def parser() -> argparse.ArgumentParser:
    """The command line: `python -m jaxbridge demo ...` and `python -m jaxbridge bench ...`."""
    top = argparse.ArgumentParser(prog="python -m jaxbridge")
    sub = top.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the user stories end to end")
    length = demo.add_mutually_exclusive_group()
    length.add_argument("--quick", action="store_true", help="a shorter run, for tests")
    length.add_argument(
        "--full",
        action="store_true",
        help="the longer runs: PPO with both trainers side by side, 1M steps each (minutes)",
    )
    demo.add_argument("--out", default="demo-output", help="folder for figures and summary")
    bench = sub.add_parser("bench", help="run the benchmark scripts and print their tables")
    bench.add_argument("--quick", action="store_true", help="small sizes, for a quick check")
    bench.add_argument(
        "--timeout", type=float, default=None, help="seconds each script may run (default: none)"
    )
    bench.add_argument("names", nargs="*", help="benchmarks to run (default: all), e.g. batching")
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "bench":
        return _bench(args.quick, args.names, args.timeout)
    from ._demo import run

    return run(quick=args.quick, full=args.full, out=args.out)


if __name__ == "__main__":
    sys.exit(main())
