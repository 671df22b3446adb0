"""KELab: a Python framework for 2D simulations that people both play and learn in.

Use it as ``import kelab as ke``. Every public name is listed in ``__all__`` and
imported lazily on first use, so ``import kelab`` stays fast and does not pull in
pymunk, pygame, moderngl or Gymnasium until a part that needs them is touched. The
built-in ``kelab/...`` ids are registered with ``gymnasium.register`` as soon as
Gymnasium is imported, before or after KELab (docs/tasks.md).

Example:
    >>> import kelab as ke
    >>> ke.SimulationTimingConfig(sim_dt=1 / 120, decimation=2).control_hz
    60.0
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it (the one place that maps the API to the layout)
_EXPORTS: dict[str, str] = {
    # errors: what the user must fix (the `kelab` command prints it as one line)
    "UserError": "kelab.errors",
    # timing
    "SimulationTimingConfig": "kelab.timing.config",
    "SimulationRunConfig": "kelab.timing.config",
    "RunMode": "kelab.timing.config",
    "TimeMode": "kelab.timing.config",
    "FixedStepClock": "kelab.timing.clock",
    "SimulationPacer": "kelab.timing.pacer",
    "precise_sleep": "kelab.timing.pacer",
    "Phase": "kelab.timing.timeline",
    "Timeline": "kelab.timing.timeline",
    "TimeRunner": "kelab.timing.timeline",
    "Binding": "kelab.timing.timeline",
    "StepResult": "kelab.timing.timeline",
    "ExecutionOrder": "kelab.timing.timeline",
    # sim: scene description
    "Scene": "kelab.sim.scene",
    "SceneBuilder": "kelab.sim.scene.builder",
    "Pose": "kelab.sim.scene",
    "Circle": "kelab.sim.scene",
    "Box": "kelab.sim.scene",
    "Polygon": "kelab.sim.scene",
    "Segment": "kelab.sim.scene",
    "Material": "kelab.sim.scene",
    "CollisionFilter": "kelab.sim.scene",
    "Prop": "kelab.sim.scene",
    "Terrain": "kelab.sim.scene",
    "Robot": "kelab.sim.scene",
    "RobotDescription": "kelab.sim.scene",
    "BodySpec": "kelab.sim.scene",
    "RevoluteJoint": "kelab.sim.scene",
    "PrismaticJoint": "kelab.sim.scene",
    "FixedJoint": "kelab.sim.scene",
    "SpringJoint": "kelab.sim.scene",
    "EffortActuator": "kelab.sim.scene",
    "PDActuator": "kelab.sim.scene",
    "RenderHint": "kelab.sim.scene",
    "Site": "kelab.sim.scene",
    "SensorSpec": "kelab.sim.scene",
    "BodyInstance": "kelab.sim.scene",
    "JointInstance": "kelab.sim.scene",
    "SiteInstance": "kelab.sim.scene",
    "RobotInstance": "kelab.sim.scene",
    "CameraSpec": "kelab.sim.scene",
    "Asset": "kelab.sim.scene.assets",
    # sim: runtime
    "SensorConfig": "kelab.sim.sensors",
    "SensorPipeline": "kelab.sim.sensors",
    "World": "kelab.sim.world",
    "Snapshot": "kelab.sim.snapshot",
    "Camera": "kelab.render.camera",
    "Canvas": "kelab.render.canvas",
    "Renderer": "kelab.render.renderer",
    "create_renderer": "kelab.render.renderer",
    "InputEvent": "kelab.render.events",
    "rng_state": "kelab.sim.snapshot",
    "rng_from_state": "kelab.sim.snapshot",
    "set_rng_state": "kelab.sim.snapshot",
    "Task": "kelab.rl.task",
    "TaskError": "kelab.rl.task",
    "TerminationSet": "kelab.rl.terminations",
    "Randomize": "kelab.rl.randomization",
    "EnvConfig": "kelab.rl.config",
    "LearningEnv": "kelab.rl.env",
    "DirectRLEnv": "kelab.rl.direct",
    "RayLearningEnv": "kelab.rl.ray_env",  # needs the [ray] extra when created
    "WorkerDiedError": "kelab.rl.ray_env",
    "success": "kelab.rl.success",
    "evaluate": "kelab.rl.evaluation",
    "EvaluationReport": "kelab.rl.evaluation",
    "RLTrainer": "kelab.train.trainer",
    "RLPlayer": "kelab.train.player",
    "DwellTimer": "kelab.rl.success",
    "App": "kelab.app.app",
    "AppConfig": "kelab.app.config",
    "AppStats": "kelab.app.hud",
    "Input": "kelab.app.input",
    "DataRecorder": "kelab.app.recorders",
    "VideoRecorder": "kelab.app.recorders",
    "Recorder": "kelab.app.recorders",
    "LidarRecorder": "kelab.app.lidar_recorder",
    "Recording": "kelab.app.recording_files",
    "load_recording": "kelab.app.recording_files",
    "PickedBody": "kelab.app.interaction",
    "pick_body": "kelab.app.interaction",
    "register_task": "kelab.tasks",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562)."""
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'kelab' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # cache: the next access skips this function
    return value


def __dir__() -> list[str]:
    return __all__


def _register_tasks() -> None:
    importlib.import_module("kelab.tasks")  # gymnasium.register of every kelab/... id


# the built-in tasks are registered with Gymnasium once it is imported (now, if it is
# already), so that `import kelab.timing` loads neither Gymnasium nor the tasks
from kelab._after_import import after_import  # noqa: E402

after_import("gymnasium", _register_tasks)
