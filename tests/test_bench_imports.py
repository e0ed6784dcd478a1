"""Every benchmark script imports what it names, as `python benchmarks/x.py` imports it.

Run as a script, a file's folder comes first on `sys.path`, so a script named after a package
shadows that package for every script and for jaxbridge's own lazy imports: once
`benchmarks/gymnasium.py` was imported in place of gymnasium by `jaxbridge.mujoco`, and
`mujoco_derivatives.py` failed with "module 'gymnasium' has no attribute 'make'". So: no
script's name is importable without the folder (`test_no_script_shadows_a_module`), and each
script, imported in a fresh interpreter with the folder first on `sys.path`, finds every module
and name it imports, none of them from the folder but `_util`, and no jaxbridge module it loads
names a script of the folder, even in an import run only when called
(`test_script_imports_resolve`).
Importing a script runs its top level only: `main()` is guarded by `__name__`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))

# Run with `-P` (no cwd or script folder on sys.path): the rest of the path a script run has.
_SHADOWS = r"""
import importlib.util, json, sys
found = {}
for name in sys.argv[1:]:
    if name in sys.stdlib_module_names or name in sys.builtin_module_names:
        found[name] = "the standard library"
    elif (spec := importlib.util.find_spec(name)) is not None:
        found[name] = spec.origin or str(list(spec.submodule_search_locations or []))
print(json.dumps(found))
"""

# argv: the folder, the scripts' names. Puts the folder first on sys.path, as `python x.py`
# does, and imports the scripts one after another in this one interpreter (each fresh one
# costs seconds of importing jax, MuJoCo, Playground again): a name a script imports is found
# the way its own run finds it, since the path is the same; the modules a script loads are
# checked after its import, apart from the scripts imported before it.
_IMPORTS = r"""
import ast, importlib, json, pathlib, sys
folder, scripts = pathlib.Path(sys.argv[1]).resolve(), sys.argv[2:]
sys.path.insert(0, str(folder))
report = {}
done = {"_util"}

def guarded(node, parents):
    # Inside a `try` that catches ImportError: the script skips what needs it.
    caught = ("ImportError", "ModuleNotFoundError", "Exception")
    for p in parents.get(node, ()):
        if isinstance(p, ast.Try):
            for h in p.handlers:
                names = [h.type] if not isinstance(h.type, ast.Tuple) else h.type.elts
                if h.type is None or any(getattr(n, "id", None) in caught for n in names):
                    return True
    return False

for name in scripts:
    script = folder / f"{name}.py"
    sys.argv = [str(script), "--quick"]
    tree = ast.parse(script.read_text())
    parents = {}
    def walk(node, chain):
        for child in ast.iter_child_nodes(node):
            parents[child] = chain
            walk(child, chain + (node,))
    walk(tree, ())
    named = []  # (module, names from it, guarded)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named += [(a.name, [], guarded(node, parents)) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            named.append((node.module, [a.name for a in node.names], guarded(node, parents)))

    problems = []
    try:
        importlib.import_module(name)
    except BaseException as e:  # SystemExit included: a script's top level must not exit
        problems.append(f"importing {name}.py raised {type(e).__name__}: {e}")
    for module, names, is_guarded in named:
        try:
            found = importlib.import_module(module)
        except ImportError as e:
            if not is_guarded:
                problems.append(f"import {module}: {e}")
            continue
        for attr in names:
            if attr != "*" and not hasattr(found, attr):
                try:
                    importlib.import_module(f"{module}.{attr}")
                except ImportError:
                    problems.append(f"from {module} import {attr}: {module} has no {attr!r}")
    for key, module in sorted(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path and pathlib.Path(path).resolve().parent == folder and key not in done | {name}:
            problems.append(f"`import {key}` loaded the benchmark script {path}")
    # jaxbridge imports some packages only when called (gymnasium in Simulator.from_gymnasium):
    # those of the jaxbridge modules loaded must not be scripts here either.
    local = {p.stem for p in folder.glob("*.py")}
    package = pathlib.Path(importlib.import_module("jaxbridge").__file__).resolve().parent
    for key, module in sorted(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not path or package not in pathlib.Path(path).resolve().parents:
            continue
        for node in ast.walk(ast.parse(pathlib.Path(path).read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for imported in names:
                if imported.split(".")[0] in local:
                    problems.append(f"{key} imports {imported}, which {folder.name}/"
                                    f"{imported.split('.')[0]}.py replaces in a script's run")
    report[name] = list(dict.fromkeys(problems))
    done.add(name)
print(json.dumps(report))
"""


def shadowed(folder: Path) -> dict[str, str]:
    """The scripts in `folder` named after a module importable without it: name -> where."""
    names = sorted(p.stem for p in folder.glob("*.py"))
    run = subprocess.run(
        [sys.executable, "-P", "-c", _SHADOWS, *names],
        cwd=folder.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def imports_problems(folder: Path, names: list[str]) -> dict[str, list[str]]:
    """What fails when the scripts' imports run as their runs' do: name -> problems."""
    run = subprocess.run(
        [sys.executable, "-P", "-c", _IMPORTS, str(folder), *names],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert run.returncode == 0, f"{names}:\n{run.stdout}\n{run.stderr}"
    return json.loads(run.stdout.splitlines()[-1])


def import_problems(folder: Path, name: str) -> list[str]:
    """What fails when `folder/name.py`'s imports run in a fresh interpreter, as a script's do."""
    return imports_problems(folder, [name])[name]


def test_no_script_shadows_a_module():
    found = shadowed(BENCHMARKS)
    assert not found, (
        "benchmark scripts named after an importable module, which they shadow when run as "
        "`python benchmarks/x.py` (the folder is sys.path[0]); rename them: "
        + ", ".join(f"{name}.py shadows {where}" for name, where in found.items())
    )


def test_script_imports_resolve():
    found = imports_problems(BENCHMARKS, SCRIPTS)
    assert set(found) == set(SCRIPTS)
    broken = {name: problems for name, problems in found.items() if problems}
    assert not broken, "\n".join(
        f"benchmarks/{name}.py:\n  " + "\n  ".join(problems) for name, problems in broken.items()
    )


def test_the_checks_find_the_scripts_that_broke_bench(tmp_path):
    """The names the scripts had before dd056cf: gymnasium.py and mujoco.py are found."""
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    for name in ("_util", "mujoco_derivatives", "derivatives"):
        shutil.copy(BENCHMARKS / f"{name}.py", folder)
    shutil.copy(BENCHMARKS / "gymnasium_envs.py", folder / "gymnasium.py")
    found = shadowed(folder)
    assert set(found) == {"gymnasium"} and "site-packages" in found["gymnasium"], found
    # What failed: jaxbridge.mujoco imports gymnasium when a script calls from_gymnasium.
    problems = import_problems(folder, "mujoco_derivatives")
    assert any("imports gymnasium, which benchmarks/gymnasium.py" in p for p in problems), problems
    assert not import_problems(folder, "derivatives")
    # `import mujoco` in mujoco_derivatives.py gets the benchmark instead of the package.
    shutil.copy(BENCHMARKS / "mujoco_simulator.py", folder / "mujoco.py")
    assert set(shadowed(folder)) == {"gymnasium", "mujoco"}
    problems = import_problems(folder, "mujoco_derivatives")
    assert any("loaded the benchmark script" in p and "mujoco.py" in p for p in problems) or any(
        "partially initialized module 'mujoco'" in p for p in problems
    ), problems
