"""`import jaxbridge` works without scqubits; `jaxbridge.scqubits` then names the fix."""

import subprocess
import sys
import textwrap


def test_missing_scqubits_names_the_extra():
    code = textwrap.dedent(
        """
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("scqubits", "qutip"):
                    raise ImportError(f"blocked {name}")

        sys.meta_path.insert(0, Block())
        import jaxbridge
        try:
            import jaxbridge.scqubits
        except ImportError as error:
            print(error)
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("scqubits", "qutip")))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout.split("\n")
    assert out[0] == "`jaxbridge.scqubits` needs scqubits: `pip install jaxbridge[scqubits]`"
    assert out[1] == "[]"
