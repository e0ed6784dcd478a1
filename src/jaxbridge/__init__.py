"""jaxbridge: NumPy, SciPy, MuJoCo and SymPy code as first-class parts of JAX programs."""

from importlib import metadata as _metadata

from ._custom import custom_jvp as custom_jvp
from ._custom import custom_vjp as custom_vjp
from ._derivatives import FiniteDifferences as FiniteDifferences
from ._errors import HostError as HostError
from ._errors import HostResultError as HostResultError
from ._errors import KeptArgumentError as KeptArgumentError
from ._executors import Threads as Threads
from ._executors import WorkerDiedError as WorkerDiedError
from ._host import Host as Host
from ._host import host as host
from ._loops import loops_as_kernels as loops_as_kernels
from ._processes import Processes as Processes
from ._ray import Ray as Ray

try:
    __version__ = _metadata.version("jaxbridge")
except _metadata.PackageNotFoundError:  # pragma: no cover - not installed
    __version__ = "0+unknown"
