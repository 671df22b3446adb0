"""KELab sim/assets layer (see docs/DESIGN.md)."""
