"""Builds the optional C helper of the packed layout (kelab/sim/physics/_native.c).

Everything else is in pyproject.toml. ``optional=True``: where no C compiler is, pip
installs KELab without it and the World resets copies with Chipmunk's own remove and add
calls (the same results, bit for bit; slower: benchmarks/README.md).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kelab.sim.physics._native",
            ["kelab/sim/physics/_native.c"],
            optional=True,
            # no fused multiply-adds: its arithmetic repeats Chipmunk's getters to the bit
            extra_compile_args=["-O2", "-ffp-contract=off"],
        )
    ]
)
