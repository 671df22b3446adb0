import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import kelab as ke
from kelab.sim.snapshot import MAGIC, Snapshot, rng_from_state, rng_state, set_rng_state

DOCS = Path(__file__).resolve().parents[2] / "docs"


def nan_with_payload(payload):
    return np.array([0x7FF8000000000000 | payload], dtype=np.uint64).view(np.float64)[0]


def sample_snapshot():
    pose = np.array([[0.0, -0.0, nan_with_payload(0xBEEF)], [np.inf, -np.inf, 1e-310]])
    return Snapshot(
        "scene-abc",
        step_count=42,
        sim_time=0.35,
        arrays={
            "bodies/pose": pose,
            "sensor/torso.imu/ring": np.arange(24, dtype=">f4").reshape(2, 3, 4),
            "flags": np.array([True, False]),
            "scalar": np.array(7, dtype=np.int16),
            "empty": np.zeros((0, 3), dtype=np.uint8),
            "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
            "complex": np.array([1 + 2j, -0.0 - 0.0j]),
            "record": np.array([(1, 2.5)], dtype=[("a", "<i4"), ("b", "<f8")]),
        },
        meta={"rng": [rng_state(np.random.default_rng(s)) for s in range(3)], "note": "é"},
    )


def assert_bit_identical(a, b):
    assert list(a.arrays) == list(b.arrays)
    for name in a.arrays:
        x, y = a.arrays[name], b.arrays[name]
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert x.tobytes() == y.tobytes(), name


# ---------------------------------------------------------------- public API
def test_public_names():
    assert ke.Snapshot is Snapshot
    assert ke.rng_state is rng_state
    assert ke.rng_from_state is rng_from_state
    assert ke.set_rng_state is set_rng_state


# ---------------------------------------------------------------- RNG state
@pytest.mark.parametrize(
    "bit_generator",
    [np.random.PCG64, np.random.PCG64DXSM, np.random.MT19937, np.random.Philox, np.random.SFC64],
)
def test_rng_state_round_trips_exactly_through_json(bit_generator):
    gen = np.random.Generator(bit_generator(2**100 + 12345))
    gen.standard_normal(5)
    gen.integers(0, 10, dtype=np.uint32)  # leaves a buffered half-word in some generators
    state = json.loads(json.dumps(rng_state(gen)))  # through JSON text and back
    expected = gen.random(50)
    np.testing.assert_array_equal(rng_from_state(state).random(50), expected)
    other = np.random.Generator(bit_generator(1))
    set_rng_state(other, state)
    np.testing.assert_array_equal(other.random(50), expected)


def test_pcg64_big_ints_survive_exactly():
    gen = np.random.default_rng(2**127 + 3)
    state = rng_state(gen)
    inner = state["state"]["state"]
    assert isinstance(inner, int) and inner > 2**64
    back = json.loads(json.dumps(state))
    assert back["state"]["state"] == inner
    assert rng_state(rng_from_state(back)) == state


def test_rng_state_is_detached_from_the_generator():
    gen = np.random.Generator(np.random.MT19937(3))
    state = rng_state(gen)
    frozen = json.dumps(state)
    gen.random(1000)
    assert json.dumps(state) == frozen


def test_rng_state_errors():
    with pytest.raises(ValueError, match="numpy.random.Generator"):
        rng_state(np.random.RandomState(1))
    with pytest.raises(ValueError, match="bit generator 'Bogus'"):
        rng_from_state({"bit_generator": "Bogus"})
    with pytest.raises(ValueError, match="malformed"):
        rng_from_state({"bit_generator": "PCG64", "state": {}})
    pcg = rng_state(np.random.default_rng(1))
    with pytest.raises(ValueError, match="'PCG64'.*'MT19937'"):
        set_rng_state(np.random.Generator(np.random.MT19937(1)), pcg)


# ---------------------------------------------------------------- container
def test_arrays_are_read_only_copies():
    source = np.zeros((2, 2))
    snap = Snapshot("s", 0, 0.0, arrays={"a": source})
    source[:] = 5.0
    assert snap.arrays["a"].sum() == 0.0
    with pytest.raises(ValueError):
        snap.arrays["a"][0, 0] = 1.0
    with pytest.raises(TypeError):
        snap.arrays["b"] = np.zeros(1)  # type: ignore[index]
    with pytest.raises(AttributeError, match="immutable"):
        snap.fingerprint = "other"  # type: ignore[misc]


def test_meta_is_deep_copied_and_read_only():
    meta = {"rng": [{"x": 1}], "n": np.int64(3), "f": np.float32(0.5), "b": np.bool_(True)}
    snap = Snapshot("s", 0, 0.0, meta=meta)
    meta["rng"][0]["x"] = 2
    assert snap.meta["rng"][0]["x"] == 1
    assert snap.meta["n"] == 3 and type(snap.meta["n"]) is int
    assert snap.meta["b"] is True
    with pytest.raises(TypeError):
        snap.meta["rng"][0]["x"] = 5  # type: ignore[index]
    assert isinstance(snap.meta["rng"], tuple)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"fingerprint": ""}, "fingerprint"),
        ({"step_count": -1}, "step_count"),
        ({"step_count": True}, "step_count"),
        ({"sim_time": float("nan")}, "sim_time"),
        ({"arrays": {"": np.zeros(1)}}, "names"),
        ({"arrays": {"o": np.array([object()])}}, "pickle"),
        ({"meta": {"x": float("inf")}}, r"meta\['x'\]"),
        ({"meta": {"x": {1: 2}}}, "keys must be str"),
        ({"meta": {"x": np.zeros(2)}}, "not JSON-able"),
        ({"meta": [1]}, "mapping"),
    ],
)
def test_construction_validation(kwargs, message):
    args = {"fingerprint": "s", "step_count": 0, "sim_time": 0.0, **kwargs}
    with pytest.raises(ValueError, match=message):
        Snapshot(**args)


def test_check_fingerprint_names_both():
    snap = Snapshot("scene-a", 0, 0.0)
    snap.check_fingerprint("scene-a")
    with pytest.raises(
        ValueError, match="snapshot of scene 'scene-a' cannot be restored into scene 'scene-b'"
    ):
        snap.check_fingerprint("scene-b")


def test_equality_is_bitwise():
    a = Snapshot("s", 1, 0.0, arrays={"x": np.array([0.0])})
    assert a == Snapshot("s", 1, 0.0, arrays={"x": np.array([0.0])})
    assert a != Snapshot("s", 1, 0.0, arrays={"x": np.array([-0.0])})
    assert a != Snapshot("s", 1, 0.0, arrays={"x": np.array([0.0], dtype=np.float32)})
    assert a != Snapshot("s", 1, -0.0, arrays={"x": np.array([0.0])})
    assert a != Snapshot("s", 2, 0.0, arrays={"x": np.array([0.0])})
    assert a != Snapshot("s", 1, 0.0, arrays={"x": np.array([0.0])}, meta={"k": 1})
    assert hash(a) == hash(Snapshot("s", 1, 0.0, arrays={"x": np.array([0.0])}))
    assert "step_count=1" in repr(a)


# ---------------------------------------------------------------- bytes
def test_round_trip_is_bit_identical():
    snap = sample_snapshot()
    data = snap.to_bytes()
    assert data.startswith(MAGIC) and MAGIC == b"KESNAP1"
    back = Snapshot.from_bytes(data)
    assert back == snap
    assert_bit_identical(back, snap)
    assert back.arrays["sensor/torso.imu/ring"].dtype.str == ">f4"
    assert np.signbit(back.arrays["bodies/pose"][0, 1])
    assert back.arrays["record"]["b"][0] == 2.5
    assert not back.arrays["bodies/pose"].flags.writeable
    assert (back.fingerprint, back.step_count, back.sim_time) == ("scene-abc", 42, 0.35)
    state = back.meta["rng"][2]
    np.testing.assert_array_equal(
        rng_from_state(state).random(4), np.random.default_rng(2).random(4)
    )
    assert back.meta["note"] == "é"
    assert Snapshot.from_bytes(bytearray(data)) == snap
    assert Snapshot.from_bytes(memoryview(data)) == snap


def test_bytes_are_deterministic_and_independent_of_insertion_order():
    a = Snapshot("s", 3, 0.1, arrays={"b": np.ones(2), "a": np.zeros(2)}, meta={"y": 1, "x": 2})
    b = Snapshot("s", 3, 0.1, arrays={"a": np.zeros(2), "b": np.ones(2)}, meta={"x": 2, "y": 1})
    assert a.to_bytes() == b.to_bytes() == a.to_bytes()
    assert sample_snapshot().to_bytes() == sample_snapshot().to_bytes()


@settings(max_examples=40, deadline=None)
@given(
    arr=hnp.arrays(
        dtype=st.one_of(
            hnp.floating_dtypes(endianness="="),
            hnp.integer_dtypes(),
            hnp.unsigned_integer_dtypes(),
            hnp.boolean_dtypes(),
            hnp.complex_number_dtypes(),
        ),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    ),
    step=st.integers(0, 2**40),
    sim_time=st.floats(allow_nan=False, allow_infinity=False),
    meta=st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.text(max_size=5)
        | st.floats(allow_nan=False, allow_infinity=False),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=8,
    ),
)
def test_round_trip_property(arr, step, sim_time, meta):
    snap = Snapshot("fp", step, sim_time, arrays={"x/y": arr}, meta={"m": meta})
    data = snap.to_bytes()
    back = Snapshot.from_bytes(data)
    assert back == snap
    assert_bit_identical(back, snap)
    assert struct.pack("<d", back.sim_time) == struct.pack("<d", float(sim_time))
    assert back.to_bytes() == data


def test_truncated_bytes_raise_value_error_at_every_length():
    data = sample_snapshot().to_bytes()
    for cut in [0, 3, 7, 10, 15, 40, len(data) // 2, len(data) - 33, len(data) - 1]:
        with pytest.raises(ValueError, match="truncated|not a KELab snapshot|corrupt"):
            Snapshot.from_bytes(data[:cut])
    # the checksum is checked first (before the header is parsed)
    with pytest.raises(ValueError, match=r"corrupt or truncated: the SHA-256 checksum of its"):
        Snapshot.from_bytes(data[:-1])
    import hashlib

    body = data[:-33]  # cut one array byte and give it a valid checksum: the sizes tell
    with pytest.raises(ValueError, match=r"truncated: expected \d+ bytes, got \d+"):
        Snapshot.from_bytes(body + hashlib.sha256(body).digest())


def _resealed(body):
    import hashlib

    return body + hashlib.sha256(body).digest()


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: b"XESNAP1" + d[7:], "not a KELab snapshot"),
        (lambda d: d + b"\0", "checksum"),
        (lambda d: _resealed(d[:-32] + b"\0"), "trailing"),
        (lambda d: d[:-40] + bytes([d[-40] ^ 1]) + d[-39:], "checksum"),
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "checksum"),
        (lambda d: d[:15] + b"\xff" + d[16:], "checksum"),  # before the header is read
        (lambda d: d[:7] + struct.pack("<Q", 2**60) + d[15:], "header says"),
        (lambda d: _resealed(d[:15] + b"\xff" + d[16:-32]), "not valid JSON"),
    ],
)
def test_corrupt_bytes_raise_value_error_saying_what(mutate, message):
    data = sample_snapshot().to_bytes()
    with pytest.raises(ValueError, match=message):
        Snapshot.from_bytes(mutate(data))


def forge(header_obj, blobs=b""):
    """Build bytes with a valid checksum around an arbitrary header (hostile input)."""
    import hashlib

    header = json.dumps(header_obj).encode()
    body = MAGIC + struct.pack("<Q", len(header)) + header + blobs
    return body + hashlib.sha256(body).digest()


def test_forged_headers_are_rejected():
    with pytest.raises(ValueError, match="expected keys"):
        Snapshot.from_bytes(forge({"a": 1}))
    base = {"fingerprint": "s", "step_count": 0, "sim_time": 0.0, "meta": {}}
    with pytest.raises(ValueError, match="name, byte length"):
        Snapshot.from_bytes(forge({**base, "arrays": [["x", -1]]}))
    with pytest.raises(ValueError, match="cannot be decoded"):
        Snapshot.from_bytes(forge({**base, "arrays": [["x", 4]]}, b"abcd"))
    import io

    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.zeros(2))
    blob = buf.getvalue() + b"junk"
    with pytest.raises(ValueError, match="record is"):
        Snapshot.from_bytes(forge({**base, "arrays": [["x", len(blob)]]}, blob))
    with pytest.raises(ValueError, match="content is invalid.*step_count"):
        Snapshot.from_bytes(forge({**base, "step_count": -3, "arrays": []}))
    with pytest.raises(ValueError, match="expects bytes"):
        Snapshot.from_bytes("KESNAP1")  # type: ignore[arg-type]


def test_object_arrays_are_never_unpickled():
    import io

    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    blob = buf.getvalue()
    base = {"fingerprint": "s", "step_count": 0, "sim_time": 0.0, "meta": {}}
    with pytest.raises(ValueError, match="cannot be decoded"):
        Snapshot.from_bytes(forge({**base, "arrays": [["x", len(blob)]]}, blob))


# ---------------------------------------------------------------- docs
def test_docs_example_runs():
    text = (DOCS / "snapshots.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/snapshots.md", "exec"), {})
