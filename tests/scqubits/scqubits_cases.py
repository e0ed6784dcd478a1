"""Small scqubits objects of every supported class, and scqubits' own numbers at any point."""

import copy

import numpy as np
import pytest

scq = pytest.importorskip("scqubits")


def make(kind):
    """A small object of class `kind` and the box its parameters are sampled from."""
    if kind == "Transmon":
        return scq.Transmon(EJ=20.0, EC=0.3, ng=0.3, ncut=10), {
            "EJ": (5, 30), "EC": (0.2, 0.5), "ng": (-0.5, 0.5)}  # fmt: skip
    if kind == "TunableTransmon":
        return scq.TunableTransmon(EJmax=20.0, EC=0.3, d=0.1, flux=0.3, ng=0.2, ncut=10), {
            "EJmax": (10, 30), "EC": (0.2, 0.5), "d": (0.05, 0.5), "flux": (0.05, 0.45),
            "ng": (-0.5, 0.5)}  # fmt: skip
    if kind == "Fluxonium":
        return scq.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.33, cutoff=40), {
            "EJ": (4, 10), "EC": (1, 3), "EL": (0.3, 1.0), "flux": (0, 1)}  # fmt: skip
    if kind == "FluxQubit":
        obj = scq.FluxQubit(EJ1=1.0, EJ2=1.0, EJ3=0.8, ECJ1=0.016, ECJ2=0.016, ECJ3=0.021,
                            ECg1=0.83, ECg2=0.83, ng1=0.1, ng2=0.2, flux=0.4, ncut=5)  # fmt: skip
        return obj, {"EJ1": (0.8, 1.2), "EJ3": (0.6, 0.9), "ECJ3": (0.015, 0.03),
                     "ECg1": (0.5, 1.0), "ng1": (0, 0.5), "flux": (0.3, 0.5)}  # fmt: skip
    if kind == "ZeroPi":
        grid = scq.Grid1d(-6 * np.pi, 6 * np.pi, 30)
        obj = scq.ZeroPi(EJ=10.0, EL=0.04, ECJ=20.0, EC=0.04, ng=0.1, flux=0.23, grid=grid,
                         ncut=4, dEJ=0.05, dCJ=0.05)  # fmt: skip
        return obj, {"EJ": (8, 12), "EL": (0.03, 0.06), "EC": (0.03, 0.06), "ng": (0, 0.5),
                     "flux": (0, 0.5), "dEJ": (0, 0.1), "dCJ": (0, 0.1)}  # fmt: skip
    if kind == "Cos2PhiQubit":
        obj = scq.Cos2PhiQubit(EJ=15.0, ECJ=2.0, EL=1.0, EC=0.04, dCJ=0.05, dL=0.6, dEJ=0.05,
                               flux=0.45, ng=0.1, ncut=3, zeta_cut=6, phi_cut=4)  # fmt: skip
        return obj, {"EJ": (10, 20), "ECJ": (1.5, 2.5), "EL": (0.8, 1.2), "EC": (0.03, 0.05),
                     "dL": (0.3, 0.6), "flux": (0.3, 0.5), "ng": (0, 0.3)}  # fmt: skip
    raise AssertionError(kind)


KINDS = ["Transmon", "TunableTransmon", "Fluxonium", "FluxQubit", "ZeroPi", "Cos2PhiQubit"]


def at(obj, values):
    """A copy of `obj` with `values` set."""
    out = copy.deepcopy(obj)
    for name, value in values.items():
        setattr(out, name, float(value))
    return out


def dense(matrix):
    return matrix.toarray() if hasattr(matrix, "toarray") else np.asarray(matrix)


def central_difference(f, x, step):
    """4th-order central difference of the scalar function `f` at `x`."""
    return (-f(x + 2 * step) + 8 * f(x + step) - 8 * f(x - step) + f(x - 2 * step)) / (12 * step)


#: Two periodic variables and an extended one (scqubits YAML), for the Circuit plot tests.
THREE_VARIABLES = """branches:
- [JJ, 1, 2, EJ=10, 1.2]
- [C, 1, 2, 0.5]
- [JJ, 2, 3, 8, 1.0]
- [L, 3, 0, 1.3]
- [C, 3, 0, 0.7]
- [C, 2, 0, 0.4]
"""
