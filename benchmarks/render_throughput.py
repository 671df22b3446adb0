"""Offscreen render throughput: KELab's two backends vs Gymnasium's CartPole rgb_array.

Each frame is what an RL ``render()`` costs: draw the scene and read the pixels back as an
``(H, W, 3)`` uint8 array. KELab draws the real ``kelab/robot/cartpole:v1`` scene (cart
with wheels, pole, ground) from a World, 600x400; Gymnasium's CartPole-v1 with
``render_mode="rgb_array"`` draws its own 600x400 cartpole with pygame.

Then the in-app Settings panel's cost: App frames with the panel shut and open (gl and
pygame backends), and pygame-gui drawing a comparable panel when it is installed.

Then full RL frames: ``LearningEnv(render_mode="rgb_array").render()`` of CartPole and
Pi-Locomotion (640x480: shaded backdrop, outlined bodies, ground ticks and metre labels,
the per-episode status line, read back) next to a bare ``draw_world`` of the same World
through the same camera (clear, draw, read back), both backends.

Usage: python benchmarks/render_throughput.py [--frames 600] [--repeats 3] [--panel-only]
       [--rl-only]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import kelab as ke  # noqa: E402


def cartpole_world() -> ke.World:
    b = ke.SceneBuilder()
    b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    b.add(ke.Terrain.plane(), at="/")
    return ke.World(b.build(), num_envs=1)


def kelab_fps(
    backend: str, antialias: bool | str, frames: int, repeats: int
) -> tuple[float, np.ndarray]:
    world = cartpole_world()
    world.step(1 / 120)
    with ke.create_renderer(backend, size=(600, 400), headless=True, antialias=antialias) as r:
        r.camera.center = (0.0, 1.0)
        r.camera.zoom = 100.0
        best = 0.0
        img = None
        for rep in range(repeats + 1):  # the first round warms up
            t0 = time.perf_counter()
            for _ in range(frames):
                r.begin_frame()
                r.canvas.clear((255, 255, 255))
                r.canvas.draw_world(world)
                r.end_frame()
                img = r.read_rgb_pixels()
            dt = time.perf_counter() - t0
            if rep:
                best = max(best, frames / dt)
        assert img is not None and img.shape == (400, 600, 3)
        return best, img


def gym_fps(frames: int, repeats: int) -> tuple[float, np.ndarray]:
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    env.reset(seed=0)
    best = 0.0
    img = None
    for rep in range(repeats + 1):
        t0 = time.perf_counter()
        for _ in range(frames):
            img = env.render()
        dt = time.perf_counter() - t0
        if rep:
            best = max(best, frames / dt)
    env.close()
    assert img is not None
    return best, img


_TASKS = {
    "kelab/CartPole-v0": "kelab.tasks.cartpole:CartPoleTask",
    "kelab/Pi-Locomotion-v0": "kelab.tasks.pi_locomotion:PiLocomotionTask",
}


def rl_frame_ms(task_id: str, backend: str, frames: int, repeats: int) -> tuple[float, float]:
    """(decorated, bare) ms per 640x480 RL frame read back, best of ``repeats``.

    Decorated: ``env.render()`` of a 1-copy ``LearningEnv`` with ``render_mode="rgb_array"``
    after an env step (the step is not timed; the status line changes every frame). Bare:
    ``clear`` + ``draw_world`` + ``read_rgb_pixels`` of the same World, camera and size.
    The two alternate in rounds (the machine's load drifts).
    """
    from kelab.tasks.registry import build_task  # noqa: PLC0415

    env = ke.LearningEnv(build_task(_TASKS[task_id]), num_envs=1, render_mode="rgb_array", seed=0)
    env._presenter.backend = backend  # what `kelab preview --backend` sets
    env.reset(seed=0)
    act = np.zeros((1, env.single_action_space.shape[0]), np.float32)
    env.step(act)
    env.render()
    cam = env._presenter.renderer.camera
    size = env._presenter.renderer.size
    bare = ke.create_renderer(backend, size=size, headless=True)
    best_dec = best_bare = float("inf")
    for rep in range(repeats + 1):  # the first round warms up
        spent = 0.0
        for _ in range(frames):
            env.step(act)
            t0 = time.perf_counter()
            env.render()
            spent += time.perf_counter() - t0
        bare.camera.center, bare.camera.zoom = cam.center, cam.zoom
        t0 = time.perf_counter()
        for _ in range(frames):
            bare.begin_frame()
            bare.canvas.clear((255, 255, 255))
            bare.canvas.draw_world(env.world)
            bare.end_frame()
            bare.read_rgb_pixels()
        bare_s = time.perf_counter() - t0
        if rep:
            best_dec = min(best_dec, spent / frames)
            best_bare = min(best_bare, bare_s / frames)
    bare.close()
    env.close()
    return best_dec * 1e3, best_bare * 1e3


def rl_table(frames: int, repeats: int, gym_ms: float | None) -> None:
    """Full RL rgb_array frames against bare draw_world, both backends."""
    print(
        f"\nRL rgb_array frames 640x480, best of {repeats} x {frames}; load average "
        f"{os.getloadavg()[0]:.1f}\n"
    )
    print(
        "| task | backend | bare draw_world ms | full RL frame ms | scenery cost | vs Gymnasium |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for task_id in ("kelab/CartPole-v0", "kelab/Pi-Locomotion-v0"):
        for backend in ("pygame", "gl"):
            dec, bare = rl_frame_ms(task_id, backend, frames, repeats)
            vs = f"{gym_ms / dec:.2f}x" if gym_ms else "-"
            print(
                f"| {task_id} | `{backend}` | {bare:.3f} | {dec:.3f} | {dec - bare:+.3f} | {vs} |"
            )


def _panel_app(backend: str, page: str | None) -> ke.App:
    app = ke.App(
        headless=True,
        size=(960, 540),
        backend=backend,
        world=cartpole_world(),
        time_mode=ke.TimeMode.SIM_HIGH_PERF,
        render_hz=None,
        panel=page is not None,
        settings=os.devnull + ".kelab.json",  # never written: the panel is untouched
    )
    if page is not None:
        app.panel.set_page(page)
    return app


def app_panel_ms(
    backend: str, pages: list[str | None], frames: int, repeats: int
) -> list[tuple[float, float]]:
    """(wall, CPU) ms per App frame (960x540, cartpole, one fixed step) with the panel shut
    (None) or on each page; the Apps run in interleaved rounds (the machine's load drifts).

    CPU is the process's time over all its threads (llvmpipe rasterises on worker
    threads): on a shared machine it moves less with other people's load than wall time.
    """
    apps = [_panel_app(backend, page) for page in pages]
    best = [float("inf")] * len(apps)
    best_cpu = [float("inf")] * len(apps)
    # many short interleaved rounds: on a shared machine the best of each is the least
    # disturbed one (a few long rounds all catch someone else's burst)
    rounds, per_round = 4 * repeats, max(1, frames // 4)
    for rep in range(rounds + 1):
        for i, app in enumerate(apps):
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(per_round):
                app.renderFrameOnce()
            if rep:
                best[i] = min(best[i], (time.perf_counter() - t0) / per_round)
                best_cpu[i] = min(best_cpu[i], (time.process_time() - c0) / per_round)
    for app in apps:
        app.close()
    return [(b * 1e3, c * 1e3) for b, c in zip(best, best_cpu, strict=True)]


def pygame_gui_ms(frames: int, repeats: int) -> float | None:
    """ms per frame of pygame-gui drawing a comparable panel (the Execution Order table)."""
    try:
        import pygame
        import pygame_gui
    except ImportError:
        return None
    pygame.font.init()
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame-gui needs a display mode
    pygame.display.init()
    pygame.display.set_mode((1, 1))
    surface = pygame.Surface((960, 540))
    manager = pygame_gui.UIManager((960, 540))
    window = pygame_gui.elements.UIWindow(pygame.Rect(8, 8, 470, 524), manager, "Settings (F2)")
    rows = [("Phase", "Prio", "System", "Runner", "Hz")] + [
        ("Control", "-200", "fixed_update", "Robot", "50"),
        ("Control", "-100", "drag_spring", "Robot", "50"),
        ("Physics", "0", "world.step", "Robot", "50"),
        ("Validation", "0", "late_update", "Robot", "50"),
    ]
    for i, name in enumerate(
        ["Time Runners", "Scripts", "Subsystems", "Recorder", "Execution Order", "Plots"]
    ):
        pygame_gui.elements.UIButton(
            pygame.Rect(4 + (i % 3) * 150, 4 + (i // 3) * 28, 146, 26), name, manager, window
        )
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            pygame_gui.elements.UILabel(
                pygame.Rect(4 + c * 90, 70 + r * 24, 88, 22), cell, manager, window
            )
    best = float("inf")
    for rep in range(repeats + 1):
        t0 = time.perf_counter()
        for _ in range(frames):
            surface.fill((24, 26, 32))
            manager.update(1 / 60)
            manager.draw_ui(surface)
        if rep:
            best = min(best, (time.perf_counter() - t0) / frames)
    return best * 1e3


def panel_table(frames: int, repeats: int) -> None:
    """The Settings panel's cost per App frame, open vs shut, both backends."""
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(
        f"\nSettings panel: App frames 960x540 (cartpole, SIM_HIGH_PERF), best of "
        f"{4 * repeats} interleaved rounds of {max(1, frames // 4)} frames; "
        f"load average {load}\n"
    )
    print("| backend | panel | ms/frame | panel cost ms/frame | CPU ms/frame | panel cost CPU ms |")
    print("|---|---|---:|---:|---:|---:|")
    pages: list[str | None] = [None, "Execution Order", "Plots"]
    for backend in ("gl", "pygame"):
        (shut, shut_cpu), *opened = app_panel_ms(backend, pages, frames, repeats)
        print(f"| `{backend}` | shut | {shut:.3f} | - | {shut_cpu:.3f} | - |")
        for page, (ms, cpu) in zip(pages[1:], opened, strict=True):
            print(
                f"| `{backend}` | open: {page} | {ms:.3f} | {ms - shut:+.3f} "
                f"| {cpu:.3f} | {cpu - shut_cpu:+.3f} |"
            )
    gui = pygame_gui_ms(frames, repeats)
    if gui is not None:
        print(
            f"| pygame-gui 0.6 alone (comparable Execution Order panel) | - | {gui:.3f} "
            "| - | - | - |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=600, help="frames per timed round")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (best is kept)")
    parser.add_argument("--png-dir", default="", help="also save one frame of each as PNG")
    parser.add_argument("--panel-only", action="store_true", help="only the Settings panel rows")
    parser.add_argument("--rl-only", action="store_true", help="only the RL frame rows")
    args = parser.parse_args()
    if args.rl_only:
        base, _ = gym_fps(max(1, args.frames // 3), args.repeats)
        rl_table(max(1, args.frames // 3), args.repeats, 1000.0 / base)
        return
    if args.panel_only:
        panel_table(max(1, args.frames // 2), args.repeats)
        return

    base, gym_img = gym_fps(args.frames, args.repeats)
    rows = [("Gymnasium CartPole-v1 rgb_array (pygame)", base, gym_img.shape)]
    configs: list[tuple[str, bool | str]] = [
        ("pygame", True),
        ("pygame", False),
        ("gl", True),
        ("gl", False),
        ("gl", "msaa"),
    ]
    for backend, antialias in configs:
        fps, img = kelab_fps(backend, antialias, args.frames, args.repeats)
        name = f"kelab `{backend}` headless, antialias={antialias!r}"
        rows.append((name, fps, img.shape))
        if args.png_dir:
            import pygame

            surf = pygame.image.frombuffer(img.tobytes(), img.shape[1::-1], "RGB")
            out = os.path.join(args.png_dir, f"cartpole_{backend}_aa-{antialias}.png")
            pygame.image.save(surf, out)

    print(
        f"{args.frames} frames x best of {args.repeats}, draw + read_rgb_pixels per frame; "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}\n"
    )
    print("| renderer | frame | frames/s | ms/frame | vs Gymnasium |")
    print("|---|---|---:|---:|---:|")
    for name, fps, shape in rows:
        print(
            f"| {name} | {shape[1]}x{shape[0]} | {fps:,.0f} | {1000.0 / fps:.3f} "
            f"| {fps / base:.2f}x |"
        )
    rl_table(max(1, args.frames // 3), args.repeats, 1000.0 / base)
    panel_table(max(1, args.frames // 2), args.repeats)


if __name__ == "__main__":
    main()
