"""KELab sim layer (see docs/DESIGN.md)."""
