"""Guards on crafted outputs: collapse flagged, shared loops not, scoring right on known cases."""

from __future__ import annotations

from typing import Any

import pytest

from specperf.guards import (
    THRESHOLDS,
    degeneracy,
    degenerate_outputs,
    extract_final_answer,
    greedy_equivalence,
    gsm8k_accuracy,
    gsm8k_correct,
    mal_collapse,
    normalize_number,
    pair_records,
    quote,
    run_guards,
)

NORMAL = (
    "Hawaii is a wonderful place to visit. On my trip I hiked Diamond Head at sunrise, "
    "learned to make poke at a market in Honolulu, and watched a hula performance."
)
LOOP = "I am a model. " * 40  # random-weight models do this on their own


def rec(pid: str, text: str, turn: int = 1, **kw: Any) -> dict[str, Any]:
    return {"prompt_id": pid, "turn": turn, "text": text, "token_ids": None, "error": None, **kw}


# ---- degeneracy of one output ------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "!" * 200,
        "的" * 100,
        "Sure, here is the answer: " + "a" * 80,
        NORMAL + " the the the the the the the the the the the the the the the the the the",
        LOOP,
        "   \n ",
    ],
)
def test_degenerate_texts_are_caught(text: str) -> None:
    assert degeneracy(text) is not None


@pytest.mark.parametrize(
    "text",
    [
        NORMAL,
        "def f(x):\n    return x + 1\n\nprint(f(2))\n",
        "1. Wake up.\n2. Eat.\n3. Work.\n4. Sleep.\n",
        "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n",
        "Janet sells 16 - 3 - 4 = 9 eggs.\nShe makes 9 * 2 = $18.\n#### 18",
        "中文回答：首先计算总价，然后减去折扣，最后得到答案是四十二元。",
    ],
)
def test_normal_texts_are_not_degenerate(text: str) -> None:
    assert degeneracy(text) is None


def test_token_id_loops_are_caught() -> None:
    assert degeneracy([5, 9, 11] * 30) is not None
    assert degeneracy(list(range(200))) is None


# ---- relative degenerate guard -----------------------------------------------------------


def test_collapse_into_repeated_characters_is_flagged_against_normal_native() -> None:
    native = [rec(f"p{i}", NORMAL + f" ({i})") for i in range(10)]
    method = [rec(f"p{i}", "!" * 300) for i in range(10)]
    res = degenerate_outputs(method, native)
    assert res.passed is False
    assert res.details["method_only"] == 10
    assert "'!!!!" in res.message and "p0" in res.message  # quotes the offending output
    assert len(res.message) < 600


def test_identical_loops_in_both_are_not_flagged() -> None:
    native = [rec(f"p{i}", LOOP) for i in range(10)]
    method = [rec(f"p{i}", LOOP) for i in range(10)]
    res = degenerate_outputs(method, native)
    assert res.passed is True and res.details["both"] == 10 and res.value == 0


def test_random_loops_on_both_sides_offset() -> None:
    """temperature > 0 on a random model: loops land on different prompts, same rate."""
    native = [rec(f"p{i}", LOOP if i % 2 else NORMAL) for i in range(10)]
    method = [rec(f"p{i}", NORMAL if i % 2 else LOOP) for i in range(10)]
    assert degenerate_outputs(method, native).passed is True


def test_one_method_only_degenerate_output_in_ten_fails_default_tolerance() -> None:
    native = [rec(f"p{i}", NORMAL) for i in range(10)]
    method = [*native[:9], rec("p9", "x" * 100)]
    assert degenerate_outputs(method, native).passed is False
    assert THRESHOLDS["max_degenerate_excess"] < 0.1


def test_no_native_is_not_evaluated() -> None:
    res = degenerate_outputs([rec("p", "!" * 100)], [])
    assert res.passed is None and "not evaluated" in res.message


# ---- greedy equivalence ------------------------------------------------------------------


def test_exact_match_rate_on_text() -> None:
    native = [rec(f"p{i}", f"answer {i}") for i in range(10)]
    method = [rec(f"p{i}", f"answer {i}" if i < 7 else f"answer {i}!") for i in range(10)]
    res = greedy_equivalence(method, native)
    assert res.value == pytest.approx(0.7) and res.passed is True
    assert res.details == {
        "pairs": 10,
        "matches": 7,
        "basis": ["text"],
        "first_mismatch": {"prompt_id": "p7", "turn": 1, "at": 8},
    }


def test_exact_match_below_threshold_quotes_both_outputs() -> None:
    native = [rec(f"p{i}", f"the answer is {i}") for i in range(5)]
    method = [rec(f"p{i}", "zzzz" if i else f"the answer is {i}") for i in range(5)]
    res = greedy_equivalence(method, native)
    assert res.value == pytest.approx(0.2) and res.passed is False
    assert "'zzzz'" in res.message and "'the answer is 1'" in res.message


def test_token_ids_take_precedence_over_text() -> None:
    native = [rec("a", "same", token_ids=[1, 2, 3]), rec("b", "x", token_ids=[4])]
    method = [rec("a", "same", token_ids=[1, 2, 4]), rec("b", "y", token_ids=[4])]
    res = greedy_equivalence(method, native)
    assert res.value == 0.5 and res.details["basis"] == ["token_ids"]


def test_pairs_follow_prompt_turn_and_occurrence_and_skip_errors() -> None:
    native = [rec("a", "1"), rec("a", "2"), rec("a", "t2", turn=2), rec("b", "n")]
    method = [rec("a", "t2", turn=2), rec("a", "1"), rec("a", "2"), rec("b", "", error="timeout")]
    pairs = pair_records(method, native)
    assert [(m["text"], n["text"]) for m, n in pairs] == [("t2", "t2"), ("1", "1"), ("2", "2")]
    assert greedy_equivalence(method, native).value == 1.0


def test_reasoning_text_counts_in_text_comparison() -> None:
    native = [rec("a", "ok", reasoning_text="think A")]
    method = [rec("a", "ok", reasoning_text="think B")]
    assert greedy_equivalence(method, native).value == 0.0


# ---- MAL collapse ------------------------------------------------------------------------


def summary(c: int, mal: float | None, **kw: Any) -> dict[str, Any]:
    base = {"engine": "vllm", "method": "dflash", "model": "m", "dataset": "mt-bench"}
    return {**base, "concurrency": c, "mean_acceptance_length": mal, **kw}


def test_seed1_dflash_collapse_at_c4_is_flagged_with_output_quoted() -> None:
    peers = [summary(1, 3.2), summary(16, 3.0), summary(32, 2.9)]
    res = mal_collapse(summary(4, 1.02), peers, [rec("p1", "好" * 200)])
    assert res.passed is False
    assert "c=4" in res.message and "'好好好" in res.message


def test_mal_normal_spread_is_not_flagged() -> None:
    peers = [summary(1, 3.2), summary(16, 3.0)]
    assert mal_collapse(summary(4, 2.7), peers).passed is True


def test_mal_collapse_ignores_other_configs_and_same_concurrency() -> None:
    peers = [summary(1, 3.2, method="eagle3"), summary(4, 3.0)]
    assert mal_collapse(summary(4, 1.0), peers).passed is None
    assert mal_collapse(summary(4, None), [summary(1, 3.0)]).passed is None


# ---- GSM8K -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("16 - 3 - 4 = 9 eggs, 9 * 2 = 18.\n#### 18", "18"),
        ("So the total is \\boxed{1,234}.", "1234"),
        ("Step 1: 3 + 4 = 7. The answer is $42.", "42"),
        ("The final answer is: **-3.50**", "-3.5"),
        ("第一步 5×4=20，答案是 20。", "20"),
        ("He has 3 apples, then 5, so 8 in the end.", "8"),
        ("no digits here", None),
        ("#### 7 then later the answer is 9", "7"),
    ],
)
def test_extract_final_answer(text: str, answer: str | None) -> None:
    assert extract_final_answer(text) == answer


def test_normalize_number() -> None:
    assert normalize_number("$1,000.00") == "1000"
    assert normalize_number("0.50") == "0.5"
    assert normalize_number("abc") is None


def test_gsm8k_correct_against_reference_forms() -> None:
    assert gsm8k_correct("... #### 18", "18")
    assert gsm8k_correct("The answer is 18.00", "Janet sells 9 eggs.\n#### 18")
    assert not gsm8k_correct("The answer is 17", "18")


def test_gsm8k_accuracy_thresholds_and_native_drop() -> None:
    refs = {"q1": "18", "q2": "5", "q3": "1000", "q4": "2"}
    native = [rec("q1", "#### 18"), rec("q2", "#### 5"), rec("q3", "#### 1,000"), rec("q4", "2")]
    method = [rec("q1", "#### 18"), rec("q2", "#### 6"), rec("q3", "#### 1000"), rec("q4", "3")]
    only = gsm8k_accuracy(method, refs)
    assert only.value == 0.5 and only.passed is None
    res = gsm8k_accuracy(method, refs, native=native)
    assert res.passed is False and res.details["native_accuracy"] == 1.0
    assert "q2 expected 5, extracted 6" in res.message
    assert gsm8k_accuracy(method, refs, min_accuracy=0.5).passed is True
    assert gsm8k_accuracy([], refs).passed is None


def test_run_guards_applies_equivalence_only_at_temperature_zero() -> None:
    native = [rec("q1", "#### 18")]
    hot = run_guards(native, native=native, temperature=0.7)
    assert "greedy_equivalence" not in hot and hot["degenerate_outputs"]["passed"] is True
    cold = run_guards(
        native,
        native=native,
        temperature=0.0,
        references={"q1": "18"},
        summary=summary(4, 2.0),
        peers=[summary(1, 2.1)],
    )
    assert cold["greedy_equivalence"]["value"] == 1.0
    assert cold["gsm8k_accuracy"]["value"] == 1.0
    assert cold["mal_collapse"]["passed"] is True


def test_quote_is_one_line_and_truncated() -> None:
    q = quote("line1\nline2" + "x" * 500)
    assert "\n" not in q and q.endswith("chars)") and len(q) < 200
