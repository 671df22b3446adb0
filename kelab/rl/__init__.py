"""KELab rl layer (see docs/DESIGN.md)."""
