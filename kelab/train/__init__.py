"""Training and playback: ``ke.RLTrainer`` (rsl-rl-lib's PPO), ``ke.RLPlayer``, checkpoints.

Importing this package (or :mod:`kelab.train.config`) never imports torch; the trainer,
the player and the checkpoint loaders import it when they are used. Install the extra
with ``pip install 'kelab[train]'``. See docs/training.md.
"""

from kelab.train.config import ALGORITHMS, TrainConfig, training_config_of

__all__ = ["ALGORITHMS", "TrainConfig", "training_config_of"]
