from __future__ import annotations

import numpy as np
import pytest

import kelab as ke
from kelab.rl.terminations import TerminationValidator

N = 3
T = np.zeros(N, dtype=bool)


def check(terminated, truncated=T, validator=None):
    v = validator or TerminationValidator(N)
    return v((terminated, truncated))


def test_valid_dictionary_is_stacked_in_order():
    names, conds, trunc = check({"pole fell": np.array([1, 0, 0], bool), "cart left": T})
    assert names == ("pole fell", "cart left")
    assert conds.tolist() == [[True, False, False], [False] * 3]
    assert check({})[1].shape == (0, N)


@pytest.mark.parametrize(
    "terminated, match",
    [
        ({f"c{i}": T for i in range(33)}, "at most 32"),
        ({"": T}, "empty"),
        ({"x" * 65: T}, "65 characters"),
        ({" pole fell": T}, "surrounding spaces"),
        ({"pole fell ": T}, "surrounding spaces"),
        ({"Time Limit": T}, "reserved"),
        ({"CUT SHORT BY THE TASK": T}, "reserved"),
        ({3: T}, "must be a str"),
        ({"pole fell": np.zeros(N)}, "'pole fell' must be a numpy bool array.*float64"),
        ({"pole fell": np.zeros(N + 1, bool)}, r"'pole fell'.*shape \(4,\)"),
        ({"pole fell": [False] * N}, "'pole fell'.*list"),
        ([("pole fell", T)], "dict"),
    ],
)
def test_invalid_dictionaries_name_the_condition(terminated, match):
    with pytest.raises(ke.TaskError, match=match):
        check(terminated)


def test_32_names_and_64_characters_are_allowed():
    check({f"c{i}": T for i in range(32)})
    check({"x" * 64: T})


def test_truncated_must_be_one_bool_per_copy():
    with pytest.raises(ke.TaskError, match="truncated"):
        check({}, np.zeros(N))
    with pytest.raises(ke.TaskError, match="truncated"):
        check({}, np.zeros(N + 1, bool))
    with pytest.raises(ke.TaskError, match=r"\(terminated, truncated\)"):
        TerminationValidator(N)({})


def test_same_names_every_step():
    v = TerminationValidator(N)
    check({"a": T, "b": T}, validator=v)
    check({"a": T, "b": T}, validator=v)
    with pytest.raises(ke.TaskError, match=r"new condition\(s\) \['c'\]"):
        check({"a": T, "b": T, "c": T}, validator=v)
    with pytest.raises(ke.TaskError, match=r"missing condition\(s\) \['b'\]"):
        check({"a": T}, validator=v)
    with pytest.raises(ke.TaskError, match="same order"):
        check({"b": T, "a": T}, validator=v)


def test_termination_set_builds_the_dictionary():
    flags = {"value": np.array([True, False, False])}
    terms = ke.TerminationSet(conditions={"pole fell": lambda: flags["value"]})
    terms.add("cart left the track", lambda: np.zeros(N, bool))
    assert terms.names == ("pole fell", "cart left the track")
    terminated, truncated = terms.check()
    assert list(terminated) == ["pole fell", "cart left the track"]
    assert truncated.tolist() == [False] * N
    with pytest.raises(ke.TaskError, match="already has"):
        terms.add("pole fell", lambda: T)
    with pytest.raises(ke.TaskError, match="reserved"):
        terms.add("time limit", lambda: T)
    cut = ke.TerminationSet(truncate=lambda: np.array([False, True, False]))
    assert cut.check()[1].tolist() == [False, True, False]


def test_termination_set_uses_the_task_time_limit():
    class Stub:
        episode_length_buf = np.array([0, 4, 5])
        max_episode_length = 6

    terms = ke.TerminationSet(Stub(), {"fell": lambda: T})
    assert terms.check()[1].tolist() == [False, False, True]
