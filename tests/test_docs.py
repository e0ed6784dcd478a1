"""Every Python block in the README and the docs runs; every public name is documented."""

import inspect
import pathlib
import re

import pytest

import jaxbridge

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_code_blocks_run(page, monkeypatch, tmp_path):
    blocks = BLOCK.findall(page.read_text())
    if not blocks:
        pytest.skip("no Python blocks")
    monkeypatch.chdir(tmp_path)  # pages may write files
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"{page.name}[block {i}]", "exec"), namespace)
        except Exception as e:  # name the block in the failure
            raise AssertionError(f"{page.name}, block {i} failed: {e!r}\n{code}") from e


def _public_names(module, prefix):
    return {
        f"{prefix}.{n}"
        for n in dir(module)
        if not n.startswith("_") and n != "annotations" and not inspect.ismodule(getattr(module, n))
    }


def test_every_public_name_is_in_the_api_reference():
    api = (ROOT / "docs" / "api.md").read_text()
    documented = set(re.findall(r"^::: (\S+)", api, re.M))
    names = _public_names(jaxbridge, "jaxbridge")
    for sub in ("mujoco", "sympy"):
        if (ROOT / "src" / "jaxbridge" / sub).exists():
            module = __import__(f"jaxbridge.{sub}", fromlist=["_"])
            names |= _public_names(module, f"jaxbridge.{sub}")
    missing = sorted(n for n in names if n not in documented and not n.endswith("__version__"))
    assert not missing, f"add to docs/api.md: {missing}"
