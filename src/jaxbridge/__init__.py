"""jaxbridge: NumPy, SciPy, MuJoCo and SymPy code as first-class parts of JAX programs."""

import importlib.metadata

from ._derivatives import FiniteDifferences as FiniteDifferences
from ._errors import HostError as HostError
from ._errors import HostResultError as HostResultError
from ._host import Host as Host
from ._host import host as host

try:
    __version__ = importlib.metadata.version("jaxbridge")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed
    __version__ = "0+unknown"
