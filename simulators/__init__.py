"""Simulation engines behind the labs; one subpackage per backend.

- :mod:`labtwin.simulators.kinetics` — batched chemical kinetics in torch (CPU or CUDA).

Engines compute physics only: they never compute rewards. Heavy libraries are
imported lazily inside each backend.
"""
