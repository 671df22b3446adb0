"""Builds the optional C helper of packed resets (kelab/sim/physics/_kept.c).

Everything else is in pyproject.toml. ``optional=True``: where no C compiler is, pip
installs KELab without it and the World resets copies with Chipmunk's own remove and add
calls (the same results, bit for bit; slower: benchmarks/README.md).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kelab.sim.physics._kept",
            ["kelab/sim/physics/_kept.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
