"""Fixtures of the port of JAX's `tests/python_callback_test.py` (jax 0.10.2) onto `jaxbridge.host`.

JAX runs most of its cases under three callbacks; here they are the three modes of
`jaxbridge.host`:

| JAX                           | jaxbridge                              |
|-------------------------------|----------------------------------------|
| `jax.pure_callback`           | `jaxbridge.host(fn, result=...)`       |
| `io_callback(ordered=True)`   | `jaxbridge.host(fn, ordered=True, ...)`|
| `io_callback(ordered=False)`  | `jaxbridge.host(fn, io=True, ...)`     |
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import pytest

import jaxbridge

MODES: dict[str, dict[str, Any]] = {
    "pure": {},
    "io_ordered": {"ordered": True},
    "io_unordered": {"io": True},
}


@dataclasses.dataclass(frozen=True)
class Mode:
    """One of the three modes: its name and the options it adds to `jaxbridge.host`."""

    name: str
    options: dict[str, Any]

    def host(self, fn: Callable[..., Any], **kwargs: Any) -> jaxbridge.Host:
        return jaxbridge.host(fn, **self.options, **kwargs)

    @property
    def is_io(self) -> bool:
        """Whether JAX may not remove the call as dead code (both io modes)."""
        return self.name != "pure"


@pytest.fixture(params=list(MODES))
def mode(request) -> Mode:
    """Runs the test once per mode: pure, io_ordered, io_unordered."""
    return Mode(request.param, MODES[request.param])


@pytest.fixture(autouse=True)
def _barrier():
    """As JAX's tests do: every effect of a test has run before the next test starts."""
    yield
    jax.effects_barrier()
