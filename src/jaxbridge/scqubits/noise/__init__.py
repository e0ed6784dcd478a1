"""Coherence times: spectral densities, channels, the rate engine and each model's noise methods.

Internal: the public names are the models' methods (`model.t1_effective`, ...).
"""
