"""`python -m jaxbridge demo` runs the main job; `python -m jaxbridge bench` the benchmarks."""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import time


def _bench(quick: bool) -> int:
    """Runs every script in `benchmarks/` (of a source checkout) and prints its table."""
    root = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
    scripts = sorted(p for p in root.glob("*.py") if not p.name.startswith("_"))
    if not scripts:
        print(f"no benchmark scripts found in {root}; run from a source checkout.")
        return 1
    failed = 0
    for script in scripts:
        print(f"\n## {script.stem}{' (quick)' if quick else ''}\n", flush=True)
        start = time.perf_counter()
        args = [sys.executable, str(script)] + (["--quick"] if quick else [])
        code = subprocess.call(args, cwd=root)
        print(f"({script.name}: {time.perf_counter() - start:.0f} s, exit {code})", flush=True)
        failed += code != 0
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jaxbridge")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run both user stories end to end")
    demo.add_argument("--quick", action="store_true", help="a shorter run, for tests")
    demo.add_argument("--out", default="demo-output", help="folder for figures and summary")
    bench = sub.add_parser("bench", help="run every benchmark script and print its table")
    bench.add_argument("--quick", action="store_true", help="finish in a few minutes")
    args = parser.parse_args(argv)
    if args.command == "bench":
        return _bench(args.quick)
    from ._demo import run

    return run(quick=args.quick, out=args.out)


if __name__ == "__main__":
    sys.exit(main())
