"""KELab render layer (see docs/DESIGN.md)."""
