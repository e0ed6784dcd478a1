"""`mj_forward`'s outputs: the `MjData` arrays of fixed shape, by name, and reading them out.

`Simulator.forward` returns named `MjData` arrays; only those whose shape is fixed by the
model can be JAX results, and the contacts (a buffer of varying length) are padded to
`max_contacts`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._model import MjModel, mj
from ._worker import Worker, reset_data

__all__ = ["DEFAULT_OUTPUTS", "Outputs"]

DEFAULT_OUTPUTS = ("xpos", "xquat", "site_xpos", "sensordata", "contact_dist")

# MjData arrays whose size changes with the number of active constraints: no fixed shape.
_DYNAMIC_PREFIXES = ("efc_", "iefc_", "map_efc2iefc", "map_iefc2efc", "island_", "efm_")


class Outputs:
    """The fixed-shape `MjData` arrays and `MjData.contact` fields of one model."""

    def __init__(self, model: MjModel):
        self.model = model
        probe = mj.MjData(model)
        self._data_shapes = {
            name: (value.shape, value.dtype)
            for name in dir(probe)
            if not name.startswith("_")
            and not name.startswith(_DYNAMIC_PREFIXES)
            and isinstance(value := getattr(probe, name), np.ndarray)
        }
        contact = probe.contact
        self._contact_fields = {
            name: (
                np.asarray(getattr(contact, name)).shape[1:],
                np.asarray(getattr(contact, name)).dtype,
            )
            for name in dir(contact)
            if not name.startswith("_") and isinstance(getattr(contact, name), np.ndarray)
        }

    def specs(
        self, names: Sequence[str], max_contacts: int
    ) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Shapes (per element) and dtypes of the named `forward` outputs, in order."""
        specs: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
        for name in names:
            if name in self._data_shapes:
                specs[name] = self._data_shapes[name]
            elif name.startswith("contact_") and name[8:] in self._contact_fields:
                shape, dtype = self._contact_fields[name[8:]]
                specs[name] = ((max_contacts, *shape), dtype)
            elif name != "ncon":
                raise ValueError(
                    f"`Simulator.forward(outputs=...)`: unknown output {name!r}. Use names of "
                    "fixed-size `MjData` arrays (e.g. 'xpos', 'qacc', 'sensordata'), "
                    "'contact_<field>' for fields of `MjData.contact` (e.g. 'contact_dist'), "
                    "or 'ncon'."
                )
        if "ncon" in names or any(n.startswith("contact_") for n in names):
            specs["ncon"] = ((), np.dtype(np.int32))
        return specs

    def forward(
        self,
        w: Worker,
        state: np.ndarray,
        ctrl: np.ndarray,
        names: Sequence[str],
        max_contacts: int,
    ) -> dict[str, np.ndarray]:
        """`Engine.forward` on worker `w`'s first `MjData`."""
        m = self.model
        specs = self.specs(names, max_contacts)
        state = np.ascontiguousarray(state, dtype=np.float64)
        B = state.shape[0]
        out = {name: np.zeros((B, *shape), dtype) for name, (shape, dtype) in specs.items()}
        plain = [n for n in specs if n in self._data_shapes]
        contact = [n for n in specs if n.startswith("contact_")]
        warned = []
        d = w.datas[0]
        # A serial loop: `mj_forward` is short, and Python threads would not run it faster
        # (the bindings' per-call overhead holds the GIL).
        for i in range(B):
            reset_data(m, d, state[i], ctrl[i])  # (clears the warning counters)
            mj.mj_forward(m, d)
            if w.first_warned():
                warned.append(i)
            for name in plain:
                out[name][i] = getattr(d, name)
            if "ncon" in out:
                ncon = d.ncon
                out["ncon"][i] = ncon
                k = min(ncon, max_contacts)
                for name in contact:
                    out[name][i, :k] = getattr(d.contact, name[8:])[:k]
        if warned:
            # MuJoCo carried on past a warning (a bad control replaced by zeros, a full contact
            # buffer): outputs that look right and are not. NaN cannot pass for a real value.
            for value in out.values():
                if np.issubdtype(value.dtype, np.floating):
                    value[warned] = np.nan
        return out
