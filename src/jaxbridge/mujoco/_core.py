"""`SimCore`: what a `Simulator`'s host calls read, handed to them explicitly.

`Simulator` (`_simulator.py`) builds one and passes it to its helpers (`_step.StepCalls`,
`_rollout.RolloutCalls`, `_forward.ForwardCalls`), which read it on every call; none of them
imports `Simulator` or reads its private attributes, so the imports run one way: the helpers
below, `Simulator` above.
"""

from __future__ import annotations

import dataclasses

from ._engine import Engine
from ._model import MjModel
from ._state import Layout
from ._tangent import QposMap

__all__ = ["SimCore"]


@dataclasses.dataclass(eq=False)
class SimCore:
    """One simulator's model, engine and options, as its host calls read them.

    Attributes:
        model: the `MjModel` (live: edits are seen by later calls).
        engine: the host side (`Engine`); replaceable (a wrapper that times it, say).
        qmap: the map between qpos and tangent coordinates.
        layout: the `mjSTATE_FULLPHYSICS` layout.
        nu: controls.
        nsensordata: sensor values.
        frame_skip: physics steps per `step`.
        derivatives: `"auto"`, `"mjd"` or `"fd"`, read on every derivative call.
        max_contacts: the contacts `forward`'s `contact_*` outputs hold.
    """

    model: MjModel
    engine: Engine
    qmap: QposMap
    layout: Layout
    nu: int
    nsensordata: int
    frame_skip: int
    derivatives: str
    max_contacts: int

    @property
    def nstate(self) -> int:
        return self.layout.nstate

    def __repr__(self) -> str:
        m = self.model
        return (
            f"Simulator(nq={m.nq}, nv={m.nv}, nu={m.nu}, nstate={self.nstate}, "
            f"frame_skip={self.frame_skip}, nthread={self.engine.nthread})"
        )
