"""KELab tasks layer (see docs/DESIGN.md)."""
