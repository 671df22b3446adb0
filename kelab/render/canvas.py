"""Canvas: the drawing interface shared by every render backend, and ``draw_world``.

Public drawing calls take world units (metres, +Y up); the camera maps them to pixels.
Backends implement a handful of batched pixel-space hooks (``paint_polygons`` ...), so
``draw_world`` transforms all bodies of all environment copies with a few numpy
operations and hands whole arrays to the backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from kelab._validate import check_int, check_number, is_int, must
from kelab.render.camera import Camera
from kelab.render.geometry import thick_line_quads, wrap_angle
from kelab.render.plan import DrawPlan, Primitive, WorldLayout

if TYPE_CHECKING:
    from kelab.sim.world import World

__all__ = ["Canvas", "Color", "validate_color"]

Color = tuple[int, int, int]


def validate_color(color: object, name: str = "color") -> Color:
    """Check a colour and return it as a tuple of three ints.

    Args:
        color: ``(r, g, b)`` with integer channels in 0..255 (Python or numpy ints).
        name: The argument name used in the error message.

    Returns:
        ``(r, g, b)`` as plain ints.

    Raises:
        ValueError: If ``color`` is not three integers in 0..255.
    """
    if type(color) is tuple and len(color) == 3:  # fast path: plain int tuples
        r, g, b = color
        if (
            type(r) is int
            and type(g) is int
            and type(b) is int
            and 0 <= r <= 255
            and 0 <= g <= 255
            and 0 <= b <= 255
        ):
            return color
    try:
        channels = tuple(color)
    except TypeError:
        channels = ()
    ok = len(channels) == 3 and all(is_int(c) and 0 <= int(c) <= 255 for c in channels)
    if not ok:
        raise ValueError(
            must(
                name,
                "(r, g, b) with integer channels in 0..255",
                color,
                "convert floats in [0, 1] with round(c * 255)",
            )
        )
    return (int(channels[0]), int(channels[1]), int(channels[2]))


def _finite_xy(value: object, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """``value`` as float64 coordinates; a clear error for non-numbers or NaN/inf.

    A shape whose position is not a number cannot be drawn (and, unchecked, fails deep in
    a backend); the caller skips it or fixes what produced it.
    """
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(must(name, "numbers in metres", value)) from None
    if shape is not None and arr.shape != shape:
        raise ValueError(must(name, f"an array of shape {shape}", f"shape {arr.shape}"))
    if not np.isfinite(arr).all():
        raise ValueError(
            must(name, "finite", value, "skip drawing a shape whose position is not known")
        )
    return arr


class Canvas(ABC):
    """Draws shapes, text and whole Worlds, in world units through a :class:`Camera`.

    Coordinates are metres with +Y up unless a call says ``screen_space``; widths and
    radii are metres too (a width of 0 means "filled" for circles and polygons and
    "one pixel" for lines). Colours are ``(r, g, b)`` integer tuples in 0..255.
    Get a canvas from a renderer (``create_renderer(...).canvas``); draw between
    ``renderer.begin_frame()`` and ``renderer.end_frame()``.

    Example:
        >>> from kelab.render import create_renderer
        >>> r = create_renderer("pygame", size=(64, 48), headless=True)
        >>> r.begin_frame(); r.canvas.clear((0, 0, 0))
        >>> r.canvas.circle((0.0, 0.0), 0.1, (255, 0, 0)); r.end_frame()
        >>> r.read_rgb_pixels()[24, 32].tolist()
        [255, 0, 0]
        >>> r.close()
    """

    def __init__(self, camera: Camera) -> None:
        self._camera = camera
        self._layout: WorldLayout | None = None
        self._frame_texts: list[tuple[int, int, str, int]] = []
        self.outlines = False
        """Draw bodies with a darker 1.5 px outline (the App and RL frames turn it on)."""

    @property
    def camera(self) -> Camera:
        """The camera that maps world units to this canvas's pixels."""
        return self._camera

    @camera.setter
    def camera(self, camera: Camera) -> None:
        if not isinstance(camera, Camera):
            raise ValueError(must("Canvas.camera", "a kelab Camera", camera))
        self._camera = camera

    @property
    def frame_texts(self) -> tuple[tuple[int, int, str, int], ...]:
        """The texts drawn this frame, ``(x, y, string, size)`` in pixels, oldest first."""
        return tuple(self._frame_texts)

    def start_frame(self) -> None:
        """Forget the previous frame's texts (``Renderer.begin_frame`` calls it)."""
        self._frame_texts.clear()

    # -- public primitives (world units) ---------------------------------------------------
    def clear(self, color: Color) -> None:
        """Fill the whole frame with one colour.

        Args:
            color: ``(r, g, b)`` ints in 0..255.
        """
        self.paint_clear(validate_color(color))

    def circle(
        self, center: Sequence[float], radius: float, color: Color, width: float = 0.0
    ) -> None:
        """Draw a circle.

        Args:
            center: ``(x, y)`` in metres.
            radius: Radius in metres (>= 0).
            color: ``(r, g, b)`` ints in 0..255.
            width: 0 fills the disc; > 0 draws an outline this thick (metres, inwards).
        """
        rgb = validate_color(color)
        r = check_number(radius, "Canvas.circle: radius", low=0.0)
        w = check_number(width, "Canvas.circle: width", low=0.0)
        cam = self._camera
        c = cam.world_to_screen_batch(_finite_xy(center, "Canvas.circle: center", (2,))[None])
        r_px = np.array([r * cam.zoom])
        if w == 0.0 or w >= r:
            self.paint_circles(c, r_px, rgb)
        else:
            self.paint_rings(c, r_px, max(1.0, w * cam.zoom), rgb)

    def polygon(self, points: Sequence[Sequence[float]], color: Color, width: float = 0.0) -> None:
        """Draw a convex polygon.

        Args:
            points: At least three ``(x, y)`` vertices in metres, convex, in order.
            color: ``(r, g, b)`` ints in 0..255.
            width: 0 fills it; > 0 draws the outline this thick (metres) with round joins.
        """
        rgb = validate_color(color)
        w = check_number(width, "Canvas.polygon: width", low=0.0)
        pts = _finite_xy(points, "Canvas.polygon: points")
        if pts.ndim != 2 or pts.shape[1] != 2 or pts.shape[0] < 3:
            raise ValueError(
                f"points must be at least three (x, y) pairs, got an array of shape {pts.shape}"
            )
        px = self._camera.world_to_screen_batch(pts)
        if w == 0.0:
            self.paint_polygons(px[None], rgb)
        else:
            self._thick_lines(px, np.roll(px, -1, axis=0), w * self._camera.zoom, rgb, True)

    def line(
        self, a: Sequence[float], b: Sequence[float], color: Color, width: float = 0.0
    ) -> None:
        """Draw a straight line with butt ends.

        Args:
            a: Start ``(x, y)`` in metres.
            b: End ``(x, y)`` in metres.
            color: ``(r, g, b)`` ints in 0..255.
            width: Thickness in metres; 0 (or anything thinner than 1.5 px) draws a
                one-pixel antialiased line.
        """
        rgb = validate_color(color)
        w = check_number(width, "Canvas.line: width", low=0.0)
        ab = (_finite_xy(a, "Canvas.line: a", (2,)), _finite_xy(b, "Canvas.line: b", (2,)))
        pts = self._camera.world_to_screen_batch(np.array(ab))
        self._thick_lines(pts[:1], pts[1:], w * self._camera.zoom, rgb, False)

    def screen_rect(self, rect: Sequence[float], color: Color) -> None:
        """Fill an axis-aligned rectangle given in screen pixels (HUD panels, backdrops).

        Args:
            rect: ``(x0, y0, x1, y1)`` pixels from the top-left corner (+Y down).
            color: ``(r, g, b)`` ints in 0..255.
        """
        rgb = validate_color(color)
        try:
            x0, y0, x1, y1 = (float(v) for v in rect)
        except (TypeError, ValueError):
            raise ValueError(f"rect must be (x0, y0, x1, y1) in pixels, got {rect!r}") from None
        if not all(np.isfinite((x0, y0, x1, y1))):
            raise ValueError(f"rect must be finite, got {rect!r}")
        if x1 <= x0 or y1 <= y0:
            return
        quad = np.array([[[x0, y0], [x1, y0], [x1, y1], [x0, y1]]])
        self.paint_polygons(quad, rgb, np.array([min(x1 - x0, y1 - y0)]))

    def image(self, rect: Sequence[float], pixels: np.ndarray) -> None:
        """Draw an image into a screen rectangle, each pixel a block (nearest, no smoothing).

        For small pictures such as a camera sensor's (what a policy sees): each row's runs
        of one colour become one filled rectangle, drawn with one call per colour, so it
        works on every backend.

        Args:
            rect: ``(x0, y0, x1, y1)`` pixels from the top-left corner (+Y down).
            pixels: ``(height, width)`` grayscale or ``(height, width, 3)`` RGB, uint8.

        Raises:
            ValueError: For pixels that are not such an array, or a bad rect.

        Example:
            >>> from kelab.render import create_renderer
            >>> r = create_renderer("pygame", size=(40, 20), headless=True)
            >>> r.begin_frame(); r.canvas.clear((0, 0, 0))
            >>> r.canvas.image((0, 0, 40, 20), np.array([[255, 0], [0, 90]], np.uint8))
            >>> r.end_frame()
            >>> rgb = r.read_rgb_pixels()
            >>> rgb[5, 5].tolist(), rgb[5, 35].tolist(), rgb[15, 35].tolist()
            ([255, 255, 255], [0, 0, 0], [90, 90, 90])
            >>> r.close()
        """
        arr = pixels if isinstance(pixels, np.ndarray) else None
        ok = arr is not None and arr.dtype == np.uint8 and arr.size > 0
        if not ok or not (arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] == 3)):  # type: ignore[union-attr]
            got = f"{arr.dtype} {arr.shape}" if arr is not None else type(pixels).__name__
            raise ValueError(
                f"Canvas.image: pixels must be a non-empty uint8 (height, width) or (height, "
                f"width, 3) array, got {got}"
            )
        try:
            x0, y0, x1, y1 = (float(v) for v in rect)
        except (TypeError, ValueError):
            raise ValueError(f"rect must be (x0, y0, x1, y1) in pixels, got {rect!r}") from None
        if not all(np.isfinite((x0, y0, x1, y1))):
            raise ValueError(f"rect must be finite, got {rect!r}")
        if x1 <= x0 or y1 <= y0:
            return
        rgb = np.repeat(arr[:, :, None], 3, axis=2) if arr.ndim == 2 else arr  # type: ignore[union-attr]
        height, width = rgb.shape[:2]
        key = (
            (rgb[..., 0].astype(np.int64) << 16) | (rgb[..., 1].astype(np.int64) << 8) | rgb[..., 2]
        )
        starts = np.ones((height, width), dtype=bool)
        starts[:, 1:] = key[:, 1:] != key[:, :-1]  # a run starts where the colour changes
        rows, first = np.nonzero(starts)
        ends = np.append(first[1:], width)
        ends[np.append(rows[1:] != rows[:-1], True)] = width  # a row's last run ends at its edge
        sx, sy = (x1 - x0) / width, (y1 - y0) / height
        colors = key[rows, first]
        for color in np.unique(colors):
            pick = colors == color
            r, a, b = rows[pick], first[pick], ends[pick]
            quads = np.empty((r.size, 4, 2))
            quads[:, 0, 0] = quads[:, 3, 0] = x0 + a * sx
            quads[:, 1, 0] = quads[:, 2, 0] = x0 + b * sx
            quads[:, 0, 1] = quads[:, 1, 1] = y0 + r * sy
            quads[:, 2, 1] = quads[:, 3, 1] = y0 + (r + 1) * sy
            c = int(color)
            widths = np.minimum((b - a) * sx, sy)
            self.paint_polygons(quads, (c >> 16, (c >> 8) & 255, c & 255), widths)

    def vertical_gradient(self, rect: Sequence[float], top: Color, bottom: Color) -> None:
        """Fill a screen rectangle shading from ``top`` (its first row) to ``bottom``.

        One quad on "gl", one cached image blit on "pygame": a backdrop costs about what
        a ``clear`` does.

        Args:
            rect: ``(x0, y0, x1, y1)`` in pixels from the top-left corner (+Y down).
            top: Colour of the top edge.
            bottom: Colour of the bottom edge.
        """
        a, b = validate_color(top, "top"), validate_color(bottom, "bottom")
        try:
            x0, y0, x1, y1 = (float(v) for v in rect)
        except (TypeError, ValueError):
            raise ValueError(f"rect must be (x0, y0, x1, y1) in pixels, got {rect!r}") from None
        if not all(np.isfinite((x0, y0, x1, y1))):
            raise ValueError(f"rect must be finite, got {rect!r}")
        if x1 > x0 and y1 > y0:
            self.paint_vertical_gradient((x0, y0, x1, y1), a, b)

    def backdrop(self, top: Color, bottom: Color) -> None:
        """Fill the whole frame with a gradient: ``top`` shading to ``bottom`` half-way down.

        Below the middle it is ``bottom`` (what ``scenery.draw_backdrop`` draws). The
        picture is made once per frame size and colours and then copied (pygame: one
        blit; gl: one framebuffer copy), so it costs less than a ``clear``.

        Args:
            top: Colour of the top row.
            bottom: Colour of the lower half.
        """
        self.paint_backdrop(validate_color(top, "top"), validate_color(bottom, "bottom"))

    def paint_backdrop(self, top: Color, bottom: Color) -> None:
        """Backend hook (default: a clear and a gradient over the upper half)."""
        self.paint_clear(bottom)
        w, h = self._camera.size
        if w > 0 and h > 0:
            self.paint_vertical_gradient((0.0, 0.0, float(w), 0.5 * h), top, bottom)

    def paint_vertical_gradient(
        self, rect: tuple[float, float, float, float], top: Color, bottom: Color
    ) -> None:
        """Backend hook (default: 32 flat bands)."""
        x0, y0, x1, y1 = rect
        edges = np.linspace(y0, y1, 33)
        for k in range(32):
            t = (k + 0.5) / 32
            rgb = tuple(int(round(p + t * (q - p))) for p, q in zip(top, bottom, strict=True))
            quad = np.array(
                [[[x0, edges[k]], [x1, edges[k]], [x1, edges[k + 1]], [x0, edges[k + 1]]]]
            )
            self.paint_polygons(quad, rgb)  # type: ignore[arg-type]

    def text_size(self, string: str, size: int = 16) -> tuple[int, int]:
        """The ``(width, height)`` in pixels that :meth:`text` covers for ``string``.

        Args:
            string: One line of text.
            size: Font size in pixels.
        """
        from kelab.render.text import shared_text_cache

        if not string:
            return (0, 0)
        h, w = shared_text_cache().coverage(str(string), int(size)).shape
        return (w, h)

    def lines(
        self,
        starts: npt.ArrayLike,
        ends: npt.ArrayLike,
        color: Color,
        width: float = 0.0,
        screen_space: bool = False,
    ) -> None:
        """Draw many straight lines of one colour and width at once (butt ends).

        Args:
            starts: ``(N, 2)`` line starts in metres (pixels with ``screen_space``).
            ends: ``(N, 2)`` line ends in metres (pixels with ``screen_space``).
            color: ``(r, g, b)`` ints in 0..255.
            width: Thickness in metres (pixels with ``screen_space``); 0 (or thinner
                than 1.5 px) draws one-pixel lines.
            screen_space: Points and width are pixels from the top-left corner.
        """
        rgb = validate_color(color)
        w = check_number(width, "Canvas.lines: width", low=0.0)
        a = np.asarray(starts, dtype=np.float64)
        b = np.asarray(ends, dtype=np.float64)
        if a.ndim != 2 or a.shape[1:] != (2,) or b.shape != a.shape:
            raise ValueError(
                f"starts and ends must both have shape (N, 2), got {a.shape} and {b.shape}"
            )
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            raise ValueError("starts and ends must be finite")
        if a.shape[0] and screen_space:
            self._thick_lines(a, b, w, rgb, False)
        elif a.shape[0]:
            cam = self._camera
            pa, pb = cam.world_to_screen_batch(a), cam.world_to_screen_batch(b)
            self._thick_lines(pa, pb, w * cam.zoom, rgb, False)

    def text(
        self,
        pos: Sequence[float],
        string: str,
        color: Color,
        size: int = 16,
        screen_space: bool = False,
    ) -> None:
        """Draw a line of text; ``pos`` is its top-left corner.

        Args:
            pos: ``(x, y)`` in metres, or in pixels when ``screen_space`` is True.
            string: The text (one line).
            color: ``(r, g, b)`` ints in 0..255.
            size: Font size in pixels (> 0), independent of the zoom.
            screen_space: Interpret ``pos`` as pixels from the top-left corner.
        """
        rgb = validate_color(color)
        check_int(size, "Canvas.text size", low=1, fix="give the font size in pixels")
        if not string:
            return
        p = (float(pos[0]), float(pos[1]))
        if not screen_space:
            p = self._camera.world_to_screen(p)
        xy = (int(round(p[0])), int(round(p[1])))
        self._frame_texts.append((xy[0], xy[1], str(string), int(size)))
        self.paint_text(xy, str(string), rgb, int(size))

    def text_boxes(self) -> list[tuple[int, int, int, int]]:
        """Screen rectangles ``(x0, y0, x1, y1)`` of the text drawn so far this frame.

        Overlays (the App's HUD, the recording indicator) use them to find free room.
        """
        out = []
        for x, y, string, size in self._frame_texts:
            w, h = self.text_size(string, size)
            out.append((x, y, x + w, y + h))
        return out

    # -- worlds -----------------------------------------------------------------------------
    def draw_world(
        self,
        world: World,
        alpha: float = 1.0,
        previous_poses: np.ndarray | None = None,
        env_ids: Sequence[int] | np.ndarray | None = None,
    ) -> None:
        """Draw every visible body of a World, read-only, ordered by ``RenderHint.layer``.

        Per-environment bodies are drawn once per copy (copy ``i`` offset by
        ``world.env_origins[i]``); shared bodies (``per_environment=False``, e.g.
        terrain) are drawn once. Inside a layer, bodies keep the scene order.

        Args:
            world: A ``kelab.World`` (anything with ``scene``, ``body_names``,
                ``body_poses`` of shape ``(num_envs, n_bodies, 3)``, ``num_envs`` and
                ``env_origins`` or ``env_spacing``).
            alpha: Interpolation factor in [0, 1] between ``previous_poses`` (0) and the
                current poses (1); positions are lerped, angles take the shortest arc.
            previous_poses: Poses one physics step earlier, same shape as
                ``world.body_poses``; ignored when None or ``alpha == 1``.
            env_ids: The copies to draw (default: all).
        """
        a = check_number(alpha, "Canvas.draw_world: alpha", low=0.0, high=1.0)
        names = world.body_names
        layout = self._layout
        if layout is None or layout.scene is not world.scene or layout.body_names != names:
            layout = self._layout = WorldLayout(world.scene, tuple(names), validate_color)
        poses = np.asarray(world.body_poses, dtype=np.float64)
        num_envs = int(world.num_envs)
        if poses.shape != (num_envs, len(names), 3):
            raise ValueError(
                f"world.body_poses must have shape (num_envs, n_bodies, 3) = "
                f"({num_envs}, {len(names)}, 3), got {poses.shape}"
            )
        if previous_poses is not None and a < 1.0:
            prev = np.asarray(previous_poses, dtype=np.float64)
            if prev.shape != poses.shape:
                raise ValueError(
                    f"previous_poses must have the shape of world.body_poses {poses.shape}, "
                    f"got {prev.shape}"
                )
            mixed = prev + a * (poses - prev)
            mixed[..., 2] = prev[..., 2] + a * wrap_angle(poses[..., 2] - prev[..., 2])
            poses = mixed
        origins = _env_origins(world, num_envs)
        shared = poses[0] if num_envs else np.zeros((0, 3))
        if env_ids is not None:
            ids = np.asarray(env_ids, dtype=np.intp)
            if ids.ndim != 1 or (ids.size and (ids.min() < 0 or ids.max() >= num_envs)):
                raise ValueError(
                    f"env_ids must be a 1-D list of copy indices in [0, {num_envs}), "
                    f"got {env_ids!r}"
                )
            poses, origins = poses[ids], origins[ids]
        cam = self._camera
        plan = layout.plan(
            cam.zoom, poses.shape[0], self.build_plan, self.plan_style(), bool(self.outlines)
        )
        if plan.local.shape[0] == 0:
            return
        xs, ys = layout.screen_points(plan, poses, shared, origins, cam, self._PIXEL_SHIFT)
        self.draw_plan(plan, xs, ys)

    # -- compiled world drawing (backend hooks) ----------------------------------------------
    #: Added to screen coordinates of compiled plans (the backend's pixel convention).
    _PIXEL_SHIFT = 0.0

    def plan_style(self) -> Hashable:
        """Hashable settings that change what :meth:`build_plan` produces."""
        return None

    @abstractmethod
    def build_plan(self, primitives: list[Primitive]) -> DrawPlan:
        """Compile primitives (body-frame pixels, painter's order) into a plan, once."""

    @abstractmethod
    def draw_plan(self, plan: DrawPlan, xs: np.ndarray, ys: np.ndarray) -> None:
        """Draw a plan whose points this frame are at screen pixels ``(xs, ys)``."""

    # -- composite helpers -----------------------------------------------------------------
    def _thick_lines(
        self, a: np.ndarray, b: np.ndarray, width_px: float, color: Color, round_caps: bool
    ) -> None:
        """Lines in pixels; rectangles plus optional round caps, or hairlines if thin."""
        if width_px < 1.5:
            self.paint_hairlines(a, b, color)
            return
        self.paint_lines(a, b, width_px, color)
        if round_caps:
            r = np.full(a.shape[0] * 2, 0.5 * width_px)
            self.paint_circles(np.concatenate([a, b]), r, color)

    # -- backend hooks (pixels, batched) -----------------------------------------------------
    @abstractmethod
    def paint_clear(self, color: Color) -> None:
        """Fill the frame."""

    @abstractmethod
    def paint_polygons(
        self, polys: np.ndarray, color: Color, widths: np.ndarray | None = None
    ) -> None:
        """Fill ``(N, k, 2)`` convex polygons given in pixels.

        ``widths``: their ``(N,)`` minimum widths when the caller knows them (else the
        backend computes them if it needs them).
        """

    def paint_lines(self, a: np.ndarray, b: np.ndarray, width: float, color: Color) -> None:
        """Fill the rectangles of thick lines ``a[i] -> b[i]`` (pixels, butt ends)."""
        widths = np.minimum(width, np.hypot(*(b - a).T))  # a rectangle's narrower side
        self.paint_polygons(thick_line_quads(a, b, width), color, widths)

    @abstractmethod
    def paint_circles(self, centers: np.ndarray, radii: np.ndarray, color: Color) -> None:
        """Fill ``(N,)`` discs: centres ``(N, 2)`` and radii ``(N,)`` in pixels."""

    @abstractmethod
    def paint_rings(
        self, centers: np.ndarray, radii: np.ndarray, width: float, color: Color
    ) -> None:
        """Circle outlines from ``radii - width`` to ``radii`` (pixels)."""

    @abstractmethod
    def paint_hairlines(self, a: np.ndarray, b: np.ndarray, color: Color) -> None:
        """One-pixel antialiased lines from ``a[i]`` to ``b[i]`` (pixels)."""

    @abstractmethod
    def paint_text(self, pos: tuple[int, int], string: str, color: Color, size: int) -> None:
        """Text with its top-left corner at integer pixel ``pos``."""


def _env_origins(world: World, num_envs: int) -> np.ndarray:
    origins = getattr(world, "env_origins", None)
    if origins is not None:
        o = np.asarray(origins, dtype=np.float64)
        if o.shape == (num_envs, 2):
            return o
        raise ValueError(f"world.env_origins must have shape ({num_envs}, 2), got {o.shape}")
    spacing = float(getattr(world, "env_spacing", 0.0))
    o = np.zeros((num_envs, 2))
    o[:, 0] = np.arange(num_envs) * spacing
    return o
