"""``kelab/robot/cartpole:v1``: a cart on a track with a free pole, like Gymnasium's CartPole.

Root frame: origin on the ground (y = 0) below the cart's centre at the middle of the
track. Cart 1.0 kg (0.4 m x 0.2 m body, two 0.05 m wheels whose bottoms touch y = 0,
frictionless), pole 0.1 kg and 1.0 m long (half-length 0.5), hinged at the top centre of
the cart and initially upright. ``slider_to_cart``: prismatic world -> cart along +X,
track limits ±3 m, effort actuator ±100 N. ``cart_to_pole``: passive revolute joint.
"""

from __future__ import annotations

from kelab.sim.scene.items import BodySpec, RobotDescription, Site
from kelab.sim.scene.joints import EffortActuator, PrismaticJoint, RevoluteJoint
from kelab.sim.scene.shapes import Box, Circle, Material, Pose, RenderHint

CART_WIDTH = 0.4
CART_HEIGHT = 0.2
WHEEL_RADIUS = 0.05
CART_MASS = 1.0
POLE_LENGTH = 1.0
POLE_WIDTH = 0.04
POLE_MASS = 0.1
FORCE_LIMIT = 100.0
TRACK_LIMIT = 3.0

# cart centre height: wheels (centred on the cart's bottom edge) touch the ground
CART_Y = CART_HEIGHT / 2.0 + WHEEL_RADIUS
PIVOT_Y = CART_Y + CART_HEIGHT / 2.0


def description() -> RobotDescription:
    """Return the cartpole description (see the module docstring)."""
    half_w, half_h = CART_WIDTH / 2.0, CART_HEIGHT / 2.0
    wheel_x = half_w - WHEEL_RADIUS - 0.02
    cart = BodySpec(
        name="cart",
        shapes=(
            Box(CART_WIDTH, CART_HEIGHT),
            Circle(WHEEL_RADIUS, offset=Pose(-wheel_x, -half_h)),
            Circle(WHEEL_RADIUS, offset=Pose(wheel_x, -half_h)),
        ),
        mass=CART_MASS,
        # frictionless wheels: the track, not the ground contact, carries the cart
        material=Material(static_friction=0.0, dynamic_friction=0.0, density=500.0),
        initial_pose=Pose(0.0, CART_Y),
        render=RenderHint(color=(60, 90, 160), layer=0),
    )
    pole = BodySpec(
        name="pole",
        shapes=(Box(POLE_WIDTH, POLE_LENGTH),),
        mass=POLE_MASS,
        material=Material(static_friction=0.6, dynamic_friction=0.5, density=500.0),
        initial_pose=Pose(0.0, PIVOT_Y + POLE_LENGTH / 2.0),
        render=RenderHint(color=(210, 150, 80), layer=1),
    )
    joints = (
        PrismaticJoint(
            name="slider_to_cart",
            parent="world",
            child="cart",
            anchor=(0.0, CART_Y),
            axis=(1.0, 0.0),
            limits=(-TRACK_LIMIT, TRACK_LIMIT),
            actuator=EffortActuator(limit=FORCE_LIMIT),
        ),
        RevoluteJoint(
            name="cart_to_pole",
            parent="cart",
            child="pole",
            anchor=(0.0, half_h),
            limits=None,
            actuator=None,
        ),
    )
    sites = (Site("pole_tip", "pole", Pose(0.0, POLE_LENGTH / 2.0)),)
    return RobotDescription(
        name="cartpole", bodies=(cart, pole), joints=joints, sites=sites, self_collide=False
    )
