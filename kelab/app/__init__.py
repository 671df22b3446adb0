"""KELab app layer (see docs/DESIGN.md)."""
