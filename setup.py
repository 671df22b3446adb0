"""Builds KELab's optional C helper (kelab/sim/physics/_native*.c).

Everything else is in pyproject.toml. ``optional=True``: where no C compiler is, pip
installs KELab without it and the World resets copies with Chipmunk's own remove and add
calls (the same results, bit for bit; slower: benchmarks/README.md).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kelab.sim.physics._native",
            [
                "kelab/sim/physics/_native.c",
                "kelab/sim/physics/_native_friction.c",
                "kelab/sim/physics/_native_params.c",
                "kelab/sim/physics/_native_reset.c",
                "kelab/sim/physics/_native_random.c",
                "kelab/sim/physics/_native_step.c",
            ],
            depends=["kelab/sim/physics/_native.h"],
            optional=True,
            # no fused multiply-adds: its arithmetic repeats Chipmunk's getters to the bit
            extra_compile_args=["-O2", "-ffp-contract=off"],
        )
    ]
)
