"""RobotView: Isaac-Lab style access to one robot of a World, and its forward kinematics.

Uses only the World's public API (joint state, held controls, body states, resets,
:attr:`~kelab.sim.world.World.joint_layouts` and the mass properties), named by the
:class:`WorldAccess` protocol below; the World satisfies it and builds views with
:meth:`~kelab.sim.world.World.robot`, so this module never imports the World (no circle).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from kelab.sim._args import joint_columns
from kelab.sim._values import float_array
from kelab.sim.kinematics import cross
from kelab.sim.sites import site_names_arg

if TYPE_CHECKING:
    from kelab.sim.physics._compile import JointLayout
    from kelab.sim.scene import RobotInstance


class WorldAccess(Protocol):
    """What a :class:`RobotView` reads and writes of its World (the World's public API)."""

    @property
    def body_names(self) -> tuple[str, ...]:
        """Every body's path, in World order."""
        ...

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Every joint's path, in World order."""
        ...

    @property
    def body_poses(self) -> np.ndarray:
        """``(num_envs, n_bodies, 3)`` x, y, angle in copy frames."""
        ...

    @property
    def body_velocities(self) -> np.ndarray:
        """``(num_envs, n_bodies, 3)`` vx, vy, omega."""
        ...

    @property
    def joint_positions(self) -> np.ndarray:
        """``(num_envs, n_joints)`` joint positions."""
        ...

    @property
    def joint_velocities(self) -> np.ndarray:
        """``(num_envs, n_joints)`` joint velocities."""
        ...

    @property
    def joint_efforts(self) -> np.ndarray:
        """``(num_envs, n_joints)`` held efforts."""
        ...

    @property
    def joint_position_targets(self) -> np.ndarray:
        """``(num_envs, n_joints)`` held PD targets."""
        ...

    @property
    def body_centers_of_gravity(self) -> np.ndarray:
        """``(n_bodies, 2)`` centers of gravity in body frames."""
        ...

    @property
    def initial_body_poses(self) -> np.ndarray:
        """``(n_bodies, 3)`` the scene's initial poses."""
        ...

    @property
    def joint_layouts(self) -> tuple[JointLayout, ...]:
        """Each joint's compiled geometry."""
        ...

    def body_state(self, body_index: int) -> np.ndarray:
        """``(num_envs, 6)`` pose and velocity of one body."""
        ...

    @property
    def site_names(self) -> tuple[str, ...]:
        """Every site's name (a robot's: ``"<robot path>/<site name>"``)."""
        ...

    def site_poses(self, names: str | Sequence[str]) -> np.ndarray:
        """``(num_envs, k, 3)`` poses of sites in copy frames."""
        ...

    def env_indices(self, env_ids: npt.ArrayLike | None, repeats: bool = False) -> np.ndarray:
        """Copy indices as every writer reads ``env_ids`` (None: every copy)."""
        ...

    def set_joint_efforts(
        self,
        efforts: npt.ArrayLike,
        env_ids: npt.ArrayLike | None = None,
        joint_ids: npt.ArrayLike | None = None,
    ) -> None:
        """Hold joint efforts until changed."""
        ...

    def set_joint_position_targets(
        self,
        targets: npt.ArrayLike,
        env_ids: npt.ArrayLike | None = None,
        joint_ids: npt.ArrayLike | None = None,
    ) -> None:
        """Hold PD position targets until changed."""
        ...

    def set_body_states(
        self,
        env_ids: npt.ArrayLike | None,
        poses: npt.ArrayLike,
        velocities: npt.ArrayLike | None = None,
    ) -> None:
        """Reset copies to the given body poses and velocities."""
        ...


class RobotView:
    """Runtime view of one robot in a World (Isaac-Lab style articulation access).

    Indices returned by :meth:`find_joints` are local to this robot.

    Args:
        world: The World (anything with the :class:`WorldAccess` members).
        robot: The scene's RobotInstance.
    """

    def __init__(self, world: WorldAccess, robot: RobotInstance) -> None:
        self._world = world
        self._robot = robot
        self.path: str = robot.path
        jn = world.joint_names
        bn = world.body_names
        self._jidx = np.array([jn.index(p) for p in robot.joint_paths], dtype=np.int64)
        self._bidx = np.array([bn.index(p) for p in robot.body_paths], dtype=np.int64)
        # every World joint in order (the usual one-robot scene): the World's joint arrays
        # (new copies) need no gather (#42.1: ~2 us of each joint_pos / joint_vel read)
        self._every_joint = self._jidx.tolist() == list(range(len(jn)))
        # local joint ids (int64 bytes) -> their World columns (_columns)
        self._columns_of: dict[bytes, np.ndarray] = {}
        self.joint_names: tuple[str, ...] = tuple(p.rsplit("/", 1)[1] for p in robot.joint_paths)
        self.body_names: tuple[str, ...] = tuple(p.rsplit("/", 1)[1] for p in robot.body_paths)

    @property
    def num_joints(self) -> int:
        """Joints of this robot."""
        return int(self._jidx.size)

    def find_joints(self, name_or_names: str | Sequence[str]) -> np.ndarray:
        """Return local joint indices of names (exact names or full-match regexes).

        Raises:
            ValueError: If a name matches no joint (the message lists the joints).
        """
        try:
            names = [name_or_names] if isinstance(name_or_names, str) else list(name_or_names)
        except TypeError:  # not iterable: a joint index, None...
            names = [name_or_names]
        if not all(isinstance(n, str) for n in names):
            raise ValueError(
                f"find_joints takes a joint name or a list of names (exact or regex), got "
                f"{name_or_names!r}; joints: {self.joint_names}"
            )
        out: list[int] = []
        for name in names:
            hits = [i for i, j in enumerate(self.joint_names) if j == name or re.fullmatch(name, j)]
            if not hits:
                raise ValueError(f"no joint matches {name!r}; joints: {self.joint_names}")
            out.extend(h for h in hits if h not in out)
        return np.array(out, dtype=np.int64)

    @property
    def joint_pos(self) -> np.ndarray:
        """Joint positions ``(num_envs, n)``."""
        pos = self._world.joint_positions
        return pos if self._every_joint else pos[:, self._jidx]

    @property
    def joint_vel(self) -> np.ndarray:
        """Joint velocities ``(num_envs, n)``."""
        vel = self._world.joint_velocities
        return vel if self._every_joint else vel[:, self._jidx]

    def set_joint_effort_target(
        self,
        efforts: npt.ArrayLike,
        joint_ids: npt.ArrayLike | None = None,
        env_ids: npt.ArrayLike | None = None,
    ) -> None:
        """Hold efforts for some joints of some copies (clipped to the actuator limits)."""
        self._world.set_joint_efforts(efforts, env_ids, joint_ids=self._columns(joint_ids))

    def set_joint_position_target(
        self,
        targets: npt.ArrayLike,
        joint_ids: npt.ArrayLike | None = None,
        env_ids: npt.ArrayLike | None = None,
    ) -> None:
        """Hold PD position targets for some joints of some copies."""
        cols = self._columns(joint_ids)
        self._world.set_joint_position_targets(targets, env_ids, joint_ids=cols)

    def _columns(self, joint_ids: npt.ArrayLike | None) -> np.ndarray:
        """The World's joint columns of local ``joint_ids`` (None: all of this robot's)."""
        if joint_ids is None:
            return self._jidx
        if type(joint_ids) is np.ndarray and joint_ids.dtype == np.int64 and joint_ids.ndim == 1:
            # a task's own joint ids, the same every step: checked and mapped once
            key = joint_ids.tobytes()
            cols = self._columns_of.get(key)
            if cols is None:
                if len(self._columns_of) >= 64:
                    self._columns_of.clear()
                cols = self._columns_of[key] = self._jidx[self._local(joint_ids)]
                cols.flags.writeable = False  # handed to the World, which copies what it keeps
            return cols
        return self._jidx[self._local(joint_ids)]

    def _local(self, joint_ids: npt.ArrayLike) -> np.ndarray:
        """Local joint indices: unique ints in ``[0, num_joints)`` (one int or a 1-D list).

        Raises:
            ValueError: For floats, strings, bools, repeats or indices out of range.
        """
        cols = joint_columns(
            joint_ids,
            self.num_joints,
            what="local joint indices",
            where=f" for robot {self.path!r}",
            hint="find them with find_joints(names)",
        )
        assert cols is not None  # the caller handles None
        return cols

    @property
    def root_pose(self) -> np.ndarray:
        """Pose (x, y, angle) of the robot's first body, ``(num_envs, 3)``."""
        w = self._world
        return w.body_state(int(self._bidx[0]))[:, 0:3]

    @property
    def root_velocity(self) -> np.ndarray:
        """Velocity of the robot's first body, ``(num_envs, 3)``: vx, vy (centre of mass), omega."""
        w = self._world
        return w.body_state(int(self._bidx[0]))[:, 3:6]

    @property
    def site_names(self) -> tuple[str, ...]:
        """This robot's site names (as in its description), in scene order."""
        prefix = self.path + "/"
        return tuple(n[len(prefix) :] for n in self._world.site_names if n.startswith(prefix))

    def site_poses(self, names: str | Sequence[str]) -> np.ndarray:
        """Poses of this robot's sites in each copy's frame, ``(num_envs, len(names), 3)``.

        x, y, angle: the body's pose composed with the site's offset (``World.site_poses``).

        Args:
            names: Site names as in the robot's description (``"tip"``), one or a list.

        Raises:
            ValueError: For a name that is no site of this robot (the message lists them).
        """
        wanted = site_names_arg(names, f"robot {self.path!r}: site_poses")
        own = self.site_names
        for name in wanted:
            if name not in own:
                raise ValueError(
                    f"robot {self.path!r}: names must be its site names, got {name!r}; sites: {own}"
                )
        return self._world.site_poses([f"{self.path}/{n}" for n in wanted])

    def site_positions(self, names: str | Sequence[str]) -> np.ndarray:
        """Positions of this robot's sites in each copy's frame, ``(num_envs, len(names), 2)``.

        Args:
            names: Site names as in the robot's description (``"tip"``), one or a list.

        Raises:
            ValueError: For a name that is no site of this robot (the message lists them).
        """
        return self.site_poses(names)[..., :2]

    def get_body_pose_in_base_frame(self, body_name: str) -> tuple[np.ndarray, np.ndarray]:
        """Return a body's position ``(num_envs, 2)`` and angle ``(num_envs,)`` in the root frame.

        Raises:
            ValueError: If the robot has no such body.
        """
        if body_name not in self.body_names:
            raise ValueError(f"no body {body_name!r}; bodies: {self.body_names}")
        poses = self._world.body_poses
        root = poses[:, self._bidx[0]]
        b = poses[:, self._bidx[self.body_names.index(body_name)]]
        ca, sa = np.cos(root[:, 2]), np.sin(root[:, 2])
        dx, dy = b[:, 0] - root[:, 0], b[:, 1] - root[:, 1]
        pos = np.stack([ca * dx + sa * dy, -sa * dx + ca * dy], axis=1)
        return pos, b[:, 2] - root[:, 2]

    def set_joint_state(
        self,
        positions: npt.ArrayLike,
        velocities: npt.ArrayLike | None = None,
        joint_ids: npt.ArrayLike | None = None,
        env_ids: npt.ArrayLike | None = None,
    ) -> None:
        """Place this robot's bodies at given joint positions/velocities (a reset).

        Forward kinematics from each body that no joint of this robot moves (its root:
        keeps its present pose and velocity) along the joint tree: a revolute joint turns
        the child (and so its subtree) about the joint anchor to ``angle0 + q``, a prismatic
        joint slides it ``q`` along the axis, a fixed joint keeps it at its initial relative
        pose, a spring carries it rigidly at its present relative pose. Body velocities
        follow (rigid-body velocity of the parent plus the joint rate; a spring child moves
        with its parent). Joints not listed in ``joint_ids`` keep their present values.
        The result is written with :meth:`World.set_body_states`, so the copies are
        rebuilt (contact history gone, sensors primed, external forces cleared); this
        robot's efforts and targets are zeroed, other joints keep theirs. Afterwards
        :attr:`World.joint_positions` reads back ``positions`` (to rounding; 2.3e-10 m in
        x for the packed layout).

        Args:
            positions: ``(len(env_ids), len(joint_ids))`` rad or m (broadcastable).
            velocities: Same shape, rad/s or m/s; None means zero.
            joint_ids: Local joint indices (:meth:`find_joints`); None means all of them.
            env_ids: Copies (indices or a bool mask); None means all.

        Raises:
            ValueError: On bad shapes, non-finite values, bad joint ids, a spring joint
                among ``joint_ids`` (its length is not a coordinate), or a closed loop.

        Example:
            >>> import kelab as ke
            >>> b = ke.SceneBuilder()
            >>> _ = b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")),
            ...           at="/World/Robot")
            >>> world = ke.World(b.build(), num_envs=2)
            >>> cartpole = world.robot("/World/Robot")
            >>> cartpole.set_joint_state([[0.5, 0.2], [-0.5, -0.2]])
            >>> [round(float(v), 9) for v in cartpole.joint_pos[1]]
            [-0.5, -0.2]
        """
        w = self._world
        ids = w.env_indices(env_ids)
        n = self.num_joints
        try:
            cols = np.arange(n) if joint_ids is None else self._local(joint_ids)
        except ValueError as exc:
            raise ValueError(f"set_joint_state: {exc}") from None
        joints = w.joint_layouts
        for c in cols.tolist():
            if joints[self._jidx[c]].kind == "spring":
                raise ValueError(
                    f"set_joint_state: joint {self.joint_names[c]!r} is a spring; its length "
                    "is not a coordinate that can be set (leave it out of joint_ids)"
                )
        shape = (ids.size, cols.size)
        vals = []
        for name, value in (("positions", positions), ("velocities", velocities)):
            if value is None:
                vals.append(np.zeros(shape))
                continue
            arr = float_array(value, f"set_joint_state: {name}")
            try:
                arr = np.broadcast_to(arr, shape)
            except ValueError:
                raise ValueError(
                    f"set_joint_state: {name} must have shape {shape} (copies, joints), got "
                    f"{arr.shape}"
                ) from None
            if not np.isfinite(arr).all():
                raise ValueError(f"set_joint_state: {name} must be finite numbers")
            vals.append(arr)
        q = w.joint_positions[ids][:, self._jidx]
        qd = w.joint_velocities[ids][:, self._jidx]
        q[:, cols] = vals[0]
        qd[:, cols] = vals[1]
        poses = w.body_poses[ids]
        vels = w.body_velocities[ids]
        self._forward(poses, vels, q, qd)
        self._place(ids, poses, vels)

    def _place(self, ids: np.ndarray, poses: np.ndarray, vels: np.ndarray) -> None:
        """Write the copies' body states; this robot's held efforts and PD targets there end."""
        w = self._world
        efforts = w.joint_efforts[ids]  # read before the copies are rebuilt
        targets = w.joint_position_targets[ids]
        w.set_body_states(ids, poses, vels)
        efforts[:, self._jidx] = 0.0
        targets[:, self._jidx] = 0.0
        w.set_joint_efforts(efforts, ids)
        w.set_joint_position_targets(targets, ids)

    def _forward(
        self, poses: np.ndarray, vels: np.ndarray, q: np.ndarray, qd: np.ndarray
    ) -> np.ndarray:
        """Forward kinematics in place on ``poses``/``vels`` (copy rows); returns moved bodies.

        ``q``/``qd`` hold this robot's joint values (columns in its joint order).
        """
        joints = self._world.joint_layouts
        order = self._tree_order()
        m = poses.shape[0]
        pos = poses[:, :, 0:2].copy()  # body origins
        ang = poses[:, :, 2].copy()
        om = vels[:, :, 2].copy()
        cog = self._world.body_centers_of_gravity
        ca, sa = np.cos(ang), np.sin(ang)
        rx = ca * cog[:, 0] - sa * cog[:, 1]
        ry = sa * cog[:, 0] + ca * cog[:, 1]
        vo = np.stack([vels[:, :, 0] + om * ry, vels[:, :, 1] - om * rx], axis=2)
        pos0, ang0 = pos.copy(), ang.copy()
        zeros2, zeros1 = np.zeros((m, 2)), np.zeros(m)
        moved = []
        for local in order:
            jl = joints[self._jidx[local]]
            p, c = jl.parent, jl.child
            pp, pa, pw, pv = (
                (zeros2, zeros1, zeros1, zeros2)
                if p < 0
                else (pos[:, p], ang[:, p], om[:, p], vo[:, p])
            )
            cp, sp = np.cos(pa), np.sin(pa)
            if jl.kind == "spring":  # carried rigidly at its present relative pose
                pp0 = zeros2 if p < 0 else pos0[:, p]
                pa0 = zeros1 if p < 0 else ang0[:, p]
                dx, dy = pos0[:, c, 0] - pp0[:, 0], pos0[:, c, 1] - pp0[:, 1]
                c0, s0 = np.cos(pa0), np.sin(pa0)
                lx, ly = c0 * dx + s0 * dy, -s0 * dx + c0 * dy
                ac = pa + (ang0[:, c] - pa0)
                wc = pw
                pc = np.stack([pp[:, 0] + cp * lx - sp * ly, pp[:, 1] + sp * lx + cp * ly], axis=1)
                vc = pv + cross(pw, pc - pp)
            else:
                ax_, ay_ = jl.anchor_parent
                joint = np.stack(
                    [pp[:, 0] + cp * ax_ - sp * ay_, pp[:, 1] + sp * ax_ + cp * ay_], 1
                )
                ac = pa + jl.rel_angle0
                wc = pw
                point = joint
                if jl.kind == "revolute":
                    ac = ac + q[:, local]
                    wc = pw + qd[:, local]
                if jl.kind == "prismatic":
                    d = np.stack(
                        [cp * jl.axis[0] - sp * jl.axis[1], sp * jl.axis[0] + cp * jl.axis[1]], 1
                    )
                    point = joint + q[:, local, None] * d
                    vpoint = pv + cross(pw, point - pp) + qd[:, local, None] * d
                else:
                    vpoint = pv + cross(pw, point - pp)
                cc, sc = np.cos(ac), np.sin(ac)
                bx, by = jl.anchor_child
                pc = np.stack(
                    [point[:, 0] - (cc * bx - sc * by), point[:, 1] - (sc * bx + cc * by)], 1
                )
                vc = vpoint + cross(wc, pc - point)
            pos[:, c], ang[:, c], om[:, c], vo[:, c] = pc, ac, wc, vc
            moved.append(c)
        rows = np.array(moved, dtype=np.int64)
        if rows.size:
            a = ang[:, rows]
            ca, sa = np.cos(a), np.sin(a)
            rx = ca * cog[rows, 0] - sa * cog[rows, 1]
            ry = sa * cog[rows, 0] + ca * cog[rows, 1]
            w = om[:, rows]
            poses[:, rows, 0:2] = pos[:, rows]
            poses[:, rows, 2] = a
            vels[:, rows, 0] = vo[:, rows, 0] - w * ry
            vels[:, rows, 1] = vo[:, rows, 1] + w * rx
            vels[:, rows, 2] = w
        return rows

    def _tree_order(self) -> list[int]:
        """This robot's joints (local indices) ordered parents first.

        Raises:
            ValueError: If a body is the child of two joints or the joints form a loop.
        """
        every = self._world.joint_layouts
        joints = [every[j] for j in self._jidx.tolist()]
        children = [jl.child for jl in joints]
        if len(set(children)) != len(children):
            raise ValueError(
                f"set_joint_state: robot {self.path!r} has a body moved by two joints "
                "(closed loop); forward kinematics needs a tree"
            )
        placed: list[int] = []
        pending = list(range(len(joints)))
        while pending:
            ready = [k for k in pending if joints[k].parent not in {children[j] for j in pending}]
            if not ready:
                raise ValueError(f"set_joint_state: robot {self.path!r} has a joint loop")
            placed.extend(ready)
            pending = [k for k in pending if k not in ready]
        return placed

    def reset(self, env_ids: npt.ArrayLike | None = None) -> None:
        """Put this robot back to its initial pose with zero velocity in some copies.

        Other bodies keep their current poses and velocities (the copies are rebuilt,
        see :meth:`World.set_body_states`).
        """
        w = self._world
        ids = w.env_indices(env_ids, repeats=True)
        poses = w.body_poses[ids]
        vels = w.body_velocities[ids]
        poses[:, self._bidx] = w.initial_body_poses[self._bidx]
        vels[:, self._bidx] = 0.0
        self._place(ids, poses, vels)
