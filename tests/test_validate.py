from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from kelab._validate import (
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_number_or_none,
    check_positive,
    check_seed,
    is_bool,
    is_int,
    is_number,
    must,
    show,
)


def test_ints_accept_numpy_and_reject_bools_floats_and_out_of_range() -> None:
    assert check_int(3, "n") == 3 and type(check_int(np.int64(3), "n")) is int
    assert check_int(5, "n", low=1, high=5) == 5
    for bad, allowed in [
        (True, "an int >= 1"),
        (np.bool_(True), "an int >= 1"),
        (2.0, "an int >= 1"),
        ("2", "an int >= 1"),
        (0, "an int >= 1"),
    ]:
        with pytest.raises(ValueError) as info:
            check_int(bad, "num_envs", low=1)
        assert str(info.value) == f"num_envs must be {allowed}, got {bad!r}"
    with pytest.raises(ValueError, match=r"^k must be an int in \[0, 3\], got 4; use a joint id$"):
        check_int(4, "k", low=0, high=3, fix="use a joint id")
    with pytest.raises(ValueError, match=r"must be an int <= 3"):
        check_int(4, "k", high=3)
    assert check_int(-(10**30), "k") == -(10**30)


def test_numbers_are_finite_floats_within_open_or_closed_bounds() -> None:
    assert check_number(1, "x") == 1.0 and type(check_number(np.float32(0.5), "x")) is float
    assert check_number(Fraction(1, 4), "x") == 0.25
    assert check_number(0.0, "x", low=0.0) == 0.0
    with pytest.raises(ValueError, match=r"^x must be a finite number > 0, got 0.0$"):
        check_number(0.0, "x", low=0.0, low_open=True)
    with pytest.raises(ValueError, match=r"x must be a finite number in \[0, 1\), got 1"):
        check_number(1, "x", low=0, high=1, high_open=True)
    with pytest.raises(ValueError, match=r"x must be a finite number <= 2, got 3"):
        check_number(3, "x", high=2)
    for bad in (math.nan, math.inf, -math.inf, True, "1.0", None, 10**400, np.float64("nan")):
        with pytest.raises(ValueError, match="must be a finite number"):
            check_number(bad, "x")
    with pytest.raises(ValueError, match=r"<an int of 1329 bits>"):
        check_number(10**400, "x")


def test_positive_names_the_unit_and_the_fix() -> None:
    assert check_positive(0.25, "dt", unit="seconds") == 0.25
    assert check_positive(0, "spacing", allow_zero=True) == 0.0
    with pytest.raises(ValueError) as info:
        check_positive(-1, "DwellTimer.hold_s", unit="seconds", fix="give the hold time")
    assert str(info.value) == (
        "DwellTimer.hold_s must be a finite number of seconds > 0, got -1; give the hold time"
    )
    with pytest.raises(ValueError, match=r">= 0, got -0.5"):
        check_positive(-0.5, "spacing", allow_zero=True)


def test_seed_bool_and_choice() -> None:
    assert check_seed(np.uint32(7)) == 7
    with pytest.raises(ValueError, match=r"^seed must be an int >= 0, got -1$"):
        check_seed(-1)
    with pytest.raises(ValueError, match=r"^reset seed must be an int >= 0, got 1.5$"):
        check_seed(1.5, "reset seed")
    assert check_bool(False, "flag") is False and check_bool(np.bool_(True), "flag") is True
    for bad in (1, 0, "yes", None):
        with pytest.raises(ValueError, match=r"^flag must be True or False, got "):
            check_bool(bad, "flag")
    assert check_choice("packed", "layout", ("isolated", "packed")) == "packed"
    with pytest.raises(ValueError) as info:
        check_choice("pakced", "layout", ("isolated", "packed"), fix="see docs/rl.md")
    assert str(info.value) == (
        "layout must be one of ('isolated', 'packed'), got 'pakced'; see docs/rl.md"
    )
    with pytest.raises(ValueError, match="one of"):
        check_choice(1.0, "mode", (1, 2))  # same value, other type: refused
    with pytest.raises(ValueError, match="one of"):
        check_choice(["packed"], "layout", ("isolated", "packed"))  # unhashable: no crash


def test_helpers() -> None:
    assert is_int(np.int8(1)) and not is_int(True) and not is_int(1.0)
    assert is_bool(True) and is_bool(np.bool_(False)) and not is_bool(1) and not is_bool(None)
    assert is_number(np.float32(1)) and is_number(Fraction(1, 3)) and not is_number(False)
    assert must("a", "b", "c", "d") == "a must be b, got 'c'; d"
    assert show("x" * 200) == "<str object>" and show(3) == "3"

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert show(Broken()) == "<Broken object>"


def test_number_or_none_passes_none_and_says_so() -> None:
    assert check_number_or_none(None, "clamp") is None
    assert check_number_or_none(np.float32(0.5), "clamp", low=0.0) == 0.5
    with pytest.raises(ValueError) as info:
        check_number_or_none(True, "clamp", low=0.0, low_open=True, unit="seconds", fix="None: off")
    assert (
        str(info.value)
        == "clamp must be a finite number of seconds > 0 or None, got True; None: off"
    )
