"""docs/rendering.md's example runs and writes a correct PNG."""

import re
from pathlib import Path

import numpy as np
import pygame

DOC = Path(__file__).resolve().parents[2] / "docs" / "rendering.md"


def test_rendering_doc_example_writes_the_png(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert blocks
    for i, block in enumerate(blocks):
        exec(compile(block, f"rendering.md[{i}]", "exec"), {"__name__": "docs_rendering"})
    img = pygame.surfarray.array3d(pygame.image.load("cartpoles.png")).transpose(1, 0, 2)
    assert img.shape == (400, 600, 3)
    pole = np.array([210, 150, 80])
    assert (np.abs(img.astype(int) - pole).max(-1) == 0).sum() > 200  # the poles are drawn
