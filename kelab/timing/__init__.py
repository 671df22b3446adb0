"""KELab timing layer (see docs/DESIGN.md)."""
