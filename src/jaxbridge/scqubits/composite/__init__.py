"""Composite models: a `HilbertSpace`, and a `Circuit` with a `system_hierarchy`.

Internal: the public names are re-exported by `jaxbridge.scqubits`.
"""
