"""The words of the forge's view in each report language: pull requests, reviews, closed issues, and the one line
a report carries when the forge could not be read.

Kept beside ``steps.report_texts`` (same languages, same ``primary`` tag rule) so that catalogue stays one page;
names, titles, labels and numbers are data, passed in already inert.
"""

from __future__ import annotations

from collections.abc import Sequence

from steps.forge_model import ForgeKind, MissingReason
from steps.report_texts import primary


class ForgeTexts:
    """English, and the shape every language follows."""

    language = "en"
    reviews = "Reviews"
    issues_closed = "Issues closed"

    def noun(self, kind: ForgeKind | None, n: int = 1) -> str:
        """What the forge calls a pull request (GitLab: a merge request)."""
        word = "merge request" if kind == "gitlab" else "pull request"
        return word if n == 1 else f"{word}s"

    def by(self, author: str) -> str:
        return f"by {author}"

    def reviewed_by(self, names: Sequence[str]) -> str:
        return f"reviewed by {', '.join(names)}" if names else "no review"

    def approved_by(self, names: Sequence[str]) -> str:
        return f"approved by {', '.join(names)}"

    def labels(self, names: Sequence[str]) -> str:
        return f"labels: {', '.join(names)}"

    def closes(self, refs: Sequence[str]) -> str:
        return f"closes {', '.join(refs)}"

    def reviewer_line(self, kind: ForgeKind | None, name: str, refs: Sequence[str], approved: int) -> str:
        """One person's reviews of the merged pull requests."""
        return (f"{name}: reviewed {len(refs)} {self.noun(kind, len(refs))} ({', '.join(refs)})"
                + (f", approved {approved}" if approved else ""))

    def no_reviews(self, kind: ForgeKind | None) -> str:
        return f"No reviews on the merged {self.noun(kind, 2)}."

    def issue_line(self, ref: str, title: str, author: str, closed: str) -> str:
        return f"{ref} {title} ({author}), closed {closed}"

    _reasons: dict[MissingReason, str] = {
        "no_token": "the variable {} is not set",
        "no_repository": "origin names no forge repository: set forge.kind, forge.api and forge.repository",
        "refused": "the forge refused the token ({})",
        "not_found": "the forge shows the token no repository {}",
        "unavailable": "the forge did not answer ({})",
        "rate_limited": "the forge's rate limit is spent until {}",
        "too_large": "an answer passed {}",
        "unreadable": "an answer could not be read ({})",
    }

    def reason(self, reason: MissingReason, detail: str) -> str:
        return self._reasons[reason].format(detail)

    def missing_note(self, reason: str) -> str:
        """The one line of a report whose forge could not be read."""
        return f"> **Note:** the forge was not read ({reason}); pull requests and issues are named from git only.\n"

    truncated_note = ("> **Note:** the forge's listings were longer than a report reads; the oldest pull requests "
                      "or issues may be missing.\n")


class KoreanForgeTexts(ForgeTexts):
    language = "ko"
    reviews = "리뷰"
    issues_closed = "닫힌 이슈"

    def noun(self, kind: ForgeKind | None, n: int = 1) -> str:
        return "머지 리퀘스트" if kind == "gitlab" else "풀 리퀘스트"

    def by(self, author: str) -> str:
        return f"{author} 작성"

    def reviewed_by(self, names: Sequence[str]) -> str:
        return f"리뷰: {', '.join(names)}" if names else "리뷰 없음"

    def approved_by(self, names: Sequence[str]) -> str:
        return f"승인: {', '.join(names)}"

    def labels(self, names: Sequence[str]) -> str:
        return f"라벨: {', '.join(names)}"

    def closes(self, refs: Sequence[str]) -> str:
        return f"닫은 이슈: {', '.join(refs)}"

    def reviewer_line(self, kind: ForgeKind | None, name: str, refs: Sequence[str], approved: int) -> str:
        return (f"{name}: {self.noun(kind)} {len(refs)}개 리뷰({', '.join(refs)})"
                + (f", 승인 {approved}개" if approved else ""))

    def no_reviews(self, kind: ForgeKind | None) -> str:
        return f"병합된 {self.noun(kind)}에 리뷰가 없습니다."

    def issue_line(self, ref: str, title: str, author: str, closed: str) -> str:
        return f"{ref} {title} ({author}), {closed}에 닫힘"

    _reasons: dict[MissingReason, str] = {
        "no_token": "환경 변수 {}이(가) 설정되지 않음",
        "no_repository": "origin에 포지 저장소가 없음: forge.kind, forge.api, forge.repository를 설정하세요",
        "refused": "포지가 토큰을 거부함({})",
        "not_found": "토큰으로 볼 수 있는 저장소 {}이(가) 없음",
        "unavailable": "포지가 응답하지 않음({})",
        "rate_limited": "{}까지 포지 요청 한도 소진",
        "too_large": "응답이 {}을(를) 넘음",
        "unreadable": "응답을 읽을 수 없음({})",
    }

    def missing_note(self, reason: str) -> str:
        return f"> **참고:** 포지(forge) 정보를 읽지 못했습니다({reason}). 풀 리퀘스트와 이슈는 git 기록으로만 표시합니다.\n"

    truncated_note = "> **참고:** 포지 목록이 보고서가 읽는 분량보다 길어 오래된 풀 리퀘스트나 이슈가 빠졌을 수 있습니다.\n"


_CATALOGUE: dict[str, ForgeTexts] = {t.language: t for t in (ForgeTexts(), KoreanForgeTexts())}


def forge_texts(language: str) -> ForgeTexts:
    """The forge's words in ``language`` (a BCP 47 tag; its primary subtag must have a report catalogue)."""
    return _CATALOGUE[primary(language)]
