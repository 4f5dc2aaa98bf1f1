"""The grounding check (SPEC §16.1): pure, so tested with generated commit sets and texts."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from steps import grounding
from steps.report_texts import texts

EN = (texts("en").summary, texts("en").areas, texts("en").notable)
KO = (texts("ko").summary, texts("ko").areas, texts("ko").notable)

shas = st.lists(st.binary(min_size=1, max_size=8).map(lambda b: hashlib.sha1(b).hexdigest()),
                min_size=1, max_size=12, unique=True)


def report(headings: tuple[str, ...], bodies: list[str]) -> str:
    return "\n".join(f"## {h}\n\n{b}\n" for h, b in zip(headings, bodies, strict=True))


def facts(commits: list[str], headings: tuple[str, ...] = EN, language: str = "en",
          verbatim: tuple[str, ...] = ()) -> grounding.Facts:
    return grounding.Facts(commits=tuple(commits), headings=headings, language=language,
                           verbatim=verbatim)


def kinds(violations: tuple[grounding.Violation, ...]) -> list[str]:
    return [v.kind for v in violations]


@given(shas, st.data())
def test_prefixes_of_the_run_commits_may_be_cited(commits: list[str], data: st.DataObject) -> None:
    cited = [c[:data.draw(st.integers(7, 40))] for c in data.draw(
        st.lists(st.sampled_from(commits), min_size=1, max_size=5))]
    upper = data.draw(st.booleans())
    words = [c.upper() if upper else c for c in cited]
    text = report(EN, ["Work: " + ", ".join(f"`{w}`" for w in words), "- " + " ".join(words),
                       "- done"])
    assert grounding.check(text, facts(commits)) == ()


@given(shas, st.binary(min_size=1, max_size=8), st.integers(7, 40), st.booleans())
def test_a_commit_id_not_in_the_run_is_a_violation(commits: list[str], seed: bytes, length: int,
                                                   backticks: bool) -> None:
    other = hashlib.sha1(b"other" + seed).hexdigest()[:length]
    if any(c.startswith(other) for c in commits) or not any(ch in "abcdef" for ch in other):
        return
    word = f"`{other}`" if backticks else other
    found = grounding.check(report(EN, ["ok", f"- {word} did things", "- fine"]), facts(commits))
    assert kinds(found) == ["unknown_commit"]
    assert found[0].section == EN[1] and other in found[0].detail


@given(shas)
def test_a_cited_id_longer_than_a_commit_is_no_prefix(commits: list[str]) -> None:
    # A prefix must be shorter: one character more than a real SHA's start is a different id.
    real = commits[0][:12]
    wrong = real + ("a" if commits[0][12] != "a" else "b")
    found = grounding.check(report(EN, [f"`{wrong}`", "-", "-"]), facts(commits[:1]))
    assert kinds(found) == ["unknown_commit"]


@given(shas, st.integers(0, 10**12))
def test_numbers_and_long_hex_words_are_not_commit_ids(commits: list[str], number: int) -> None:
    sha256_word = hashlib.sha256(str(number).encode()).hexdigest()  # 64 hex characters
    text = report(EN, [f"{number} lines in 1234567 files; digest {sha256_word}.",
                       f"- `{sha256_word}` is a model digest", "- 20260929 was the day"])
    assert grounding.check(text, facts(commits)) == ()


def test_words_glued_to_letters_are_not_ids() -> None:
    text = report(EN, ["see xdeadbeef and deadbeefz and deadbeef_1", "-", "-"])
    assert grounding.check(text, facts(["0" * 40])) == ()
    assert kinds(grounding.check(report(EN, ["see deadbeef.", "-", "-"]), facts(["0" * 40]))) == [
        "unknown_commit"]
    paths = report(EN, ["`assets/cafebabe12.png` and deadbeef0/x.py", "-", "-"])
    assert grounding.check(paths, facts(["0" * 40])) == ()


def test_sections_missing_out_of_order_extra_and_a_preamble() -> None:
    sha = "a" * 40
    assert kinds(grounding.check(report(EN[:2], ["x", "y"]), facts([sha]))) == ["missing_section"]
    swapped = report((EN[1], EN[0], EN[2]), ["x", "y", "z"])
    assert kinds(grounding.check(swapped, facts([sha]))) == ["out_of_order"]
    extra = report(EN, ["x", "y", "z"]) + "\n## Statistics\n\n| 1 |\n"
    found = grounding.check(extra, facts([sha]))
    assert kinds(found) == ["extra_heading"] and found[0].section == EN[2]
    preamble = "Here is your report!\n\n" + report(EN, ["x", "y", "z"])
    assert kinds(grounding.check(preamble, facts([sha]))) == ["preamble"]


def test_english_under_korean_headings_fails_the_language_rule() -> None:
    subject = "Add the retry budget"
    english = report(KO, ["The team shipped the retry budget and fixed two bugs.",
                          f"### engine\n\n- `aaaaaaa` “{subject}”", "- `aaaaaaa` the largest change"])
    found = grounding.check(english, facts(["a" * 40], KO, "ko", (subject, "engine")))
    assert [(v.kind, v.section) for v in found] == [("language", KO[0]), ("language", KO[2])]
    korean = report(KO, ["팀은 재시도 예산을 추가하고 버그 두 개를 고쳤습니다.",
                         f"### engine\n\n- `aaaaaaa` “{subject}”: Alice가 추가했습니다",
                         "- `aaaaaaa` 가장 큰 변경입니다"])
    assert grounding.check(korean, facts(["a" * 40], KO, "ko", (subject, "engine", "Alice"))) == ()
    # English prose under English headings is not measured at all.
    assert grounding.check(english.replace(KO[0], EN[0]).replace(KO[1], EN[1])
                           .replace(KO[2], EN[2]), facts(["a" * 40])) == ()


@given(shas, st.text(alphabet=st.characters(codec="utf-8", exclude_characters="`#\n\r"),
                     max_size=80))
def test_ground_never_keeps_an_unknown_commit(commits: list[str], noise: str) -> None:
    bad = "f" * 7 if not any(c.startswith("fffffff") for c in commits) else "eeeeeee"
    text = report(EN, [noise + f" `{bad}`", "- " + noise, f"- `{commits[0][:8]}`"])
    builtin = report(EN, ["builtin summary", "builtin areas", f"- `{commits[0][:8]}` builtin"])
    asked: list[tuple[grounding.Violation, ...]] = []

    def repair(violations: tuple[grounding.Violation, ...]) -> str:
        asked.append(violations)
        return text

    out = grounding.ground(text, facts(commits), repair=repair, builtin=builtin)
    assert len(asked) == 1 and "unknown_commit" in kinds(asked[0])
    assert out.verdict == "fallback" and EN[0] in out.replaced
    assert bad not in out.text and "builtin summary" in out.text
    assert grounding.check(out.text, facts(commits)) == ()


def test_ground_ok_repaired_and_a_missing_section_filled_in() -> None:
    sha = "b" * 40
    good = report(EN, ["s", "a", "- `bbbbbbb`"])
    never = lambda v: (_ for _ in ()).throw(AssertionError("no repair"))  # noqa: E731
    assert grounding.ground(good, facts([sha]), repair=never, builtin="") == grounding.Grounded(good, "ok")
    broken = report(EN[:2], ["s", "a"])
    fixed = grounding.ground(broken, facts([sha]), repair=lambda v: good, builtin="")
    assert fixed.verdict == "repaired" and fixed.text == good
    assert [v.kind for v in fixed.violations] == ["missing_section"]
    builtin = report(EN, ["B1", "B2", "B3"])
    out = grounding.ground(broken, facts([sha]), repair=lambda v: broken, builtin=builtin)
    assert out.verdict == "fallback" and out.replaced == (EN[2],)
    assert out.text == report(EN, ["s", "a", "B3"])


def test_the_builtin_writers_text_holds_in_english_and_korean() -> None:
    from steps.generate_report import BuiltinWriter, facts_of
    from steps.report_model import ReportMaterial, summarize
    from tests.unit.test_generate_report import commit, report_input

    for language in ("en", "ko"):
        inp = report_input([commit(i) for i in range(14)], language=language, prompt_version="v3")
        text = BuiltinWriter().write("", system="", options={}, material=ReportMaterial(
            input=inp, stats=summarize(inp.commits))).text
        assert grounding.check(text, facts_of(inp)) == (), language


# -- issue 36: a link out of the project's forge is a violation (text rules 2) ---------------------------

FORGE = "https://git.example.com/team/platform"
PHISH = "[Click to re-authenticate](https://evil.example/phish) ![t](https://evil.example/track.png)"


def linked(forge: str | None = FORGE) -> grounding.Facts:
    return grounding.Facts(commits=(), headings=EN, language="en", links=True, forge=forge)


def test_a_foreign_link_in_the_models_text_is_a_violation_of_its_section() -> None:
    text = report(EN, [f"A quiet day. {PHISH}", "- nothing", f"- see [the fix]({FORGE}/commit/abc)"])
    found = grounding.check(text, linked())
    assert [(v.kind, v.section) for v in found] == [("foreign_link", "Summary"), ("foreign_link", "Summary")]
    assert found[0].line() == ('section "Summary": links to https://evil.example/phish, which is not the '
                               "project's own forge: write it as plain text, without a link")
    assert kinds(grounding.check(text, linked(None))) == ["foreign_link"] * 3  # no forge known: no link holds
    assert grounding.check(text, facts([])) == ()  # runs pinned before text rules 2: not checked


def test_a_foreign_link_gets_the_repair_then_the_builtin_section() -> None:
    text = report(EN, [f"A quiet day. {PHISH}", "- nothing", "- none"])
    asked: list[tuple[grounding.Violation, ...]] = []

    def repair(violations: tuple[grounding.Violation, ...]) -> str:
        asked.append(violations)
        return text

    builtin = report(EN, ["Built in.", "- b", "- c"])
    out = grounding.ground(text, linked(), repair=repair, builtin=builtin)
    assert len(asked) == 1 and kinds(asked[0]) == ["foreign_link", "foreign_link"]
    assert out.verdict == "fallback" and out.replaced == ("Summary",)
    assert "evil.example" not in out.text and "Built in." in out.text and "- nothing" in out.text
