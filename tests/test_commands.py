"""Every command the README and the docs offer exists: make targets, CLI options, scripts.

What the commands do when run is tested where they are: `python -m jaxbridge demo --quick` in
test_demo.py, `python -m jaxbridge bench --quick` in test_bench.py (each script's imports in
test_bench_imports.py), the examples in test_examples.py. This file catches the words going
stale: a `make` target, an option, a benchmark or example named that no longer exists (the
benchmark scripts were renamed once).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jaxbridge.__main__ import benchmark_scripts, parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "examples" / "README.md", *sorted(ROOT.glob("docs/*.md"))]


def _commands(text: str) -> list[str]:
    """The `python -m jaxbridge ...` commands in a page: to the closing backtick inside one,
    else to the end of the line or a `#` comment, whitespace collapsed."""
    text = text.replace("```", "")  # fences: what is left pairs up in code spans
    found = []
    for match in re.finditer(r"python -m jaxbridge\b", text):
        rest = text[match.end() :]
        in_code_span = text.count("`", 0, match.start()) % 2 == 1
        end = rest.index("`") if in_code_span else len(rest.split("\n", 1)[0].split("#")[0])
        found.append(" ".join(rest[:end].split()))
    return found


def _variants(command: str) -> list[list[str]]:
    """The argument lists a command with `[optional | parts]` stands for: the bare command,
    then each alternative of each optional part (placeholders such as `[script ...]` left out).
    """
    groups = re.findall(r"\[([^\]]*)\]", command)
    base = re.sub(r"\[[^\]]*\]", " ", command).split()
    out = [base]
    for group in groups:
        for alternative in group.split("|"):
            words = alternative.split()
            if words and "..." not in alternative:
                out.append(base + words)
    return out


def _named(pattern: str) -> list[tuple[str, str]]:
    return [(_id(page), m) for page in PAGES for m in re.findall(pattern, page.read_text())]


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


COMMANDS = [(_id(page), c) for page in PAGES for c in _commands(page.read_text())]


def test_pages_name_commands():
    assert len(COMMANDS) >= 5, COMMANDS
    assert ("README.md", "bench [--quick] [script ...]") in COMMANDS, COMMANDS


@pytest.mark.parametrize(("page", "command"), COMMANDS)
def test_cli_command_parses(page, command):
    for args in _variants(command):
        try:
            parsed = parser().parse_args(args)
        except SystemExit as e:
            raise AssertionError(f"{page}: `python -m jaxbridge {' '.join(args)}` fails") from e
        if parsed.command == "bench":
            unknown = set(parsed.names) - set(benchmark_scripts())
            assert not unknown, f"{page}: no benchmark named {unknown} in benchmarks/"


def test_make_targets_exist():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, re.M))
    named = _named(r"\bmake ([a-z][\w-]*)`?")
    assert named
    missing = [(page, t) for page, t in named if t not in targets]
    assert not missing, f"`make` targets the pages name but the Makefile lacks: {missing}"


def test_named_scripts_exist():
    named = _named(r"\b((?:benchmarks|examples)/[\w]+\.py)\b")
    assert any(p.startswith("benchmarks/") for _, p in named), named
    missing = [(page, p) for page, p in named if "NN_" not in p and not (ROOT / p).is_file()]
    assert not missing, f"scripts the pages name that do not exist: {missing}"
