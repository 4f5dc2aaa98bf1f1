"""The words of a report in each supported language: headings, sentences, table headers.

``texts(language)`` returns the catalogue for a primary language subtag
(``en``, ``ko``); ``LANGUAGES`` lists them. Every fixed word of a report (the
header, the statistics tables, the notes, the builtin writer's narrative)
comes from here, so adding a language is one subclass. Commit subjects, author
names, paths and SHAs are data and stay as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.core import errors


class Texts:
    """English, and the shape every language follows."""

    language = "en"
    #: The language as the prompt names it.
    name = "English"

    summary = "Summary"
    areas = "Changes by area"
    notable = "Notable commits"
    statistics = "Statistics"
    authors_table = "Authors"
    bots_table = "Bots"
    areas_table = "Areas"
    kinds = "Changes by kind"
    in_progress = "In progress"

    def shared_commits(self, n: int, projects: Sequence[str]) -> str:
        """A team report over sub-projects of one repository: the commits two or more of them hold."""
        return (f"{self.count(n, 'commit')} changed more than one of {', '.join(projects)}: each is in every such "
                "project's section, and counted once above (shared).")
    in_progress_note = "On branches not merged yet; not counted above."

    def in_progress_line(self, commits: int, updated: str) -> str:
        return f"{self.count(commits, 'commit')} not merged yet, last updated {updated}"

    kinds_table = "Kinds"
    kinds_header = "| Kind | Commits |"
    kind_titles = {"breaking": "Breaking changes", "features": "Features", "fixes": "Fixes",
                   "performance": "Performance", "docs": "Docs", "tests": "Tests", "build": "Build and CI",
                   "other": "Other changes"}
    busiest_table = "Busiest files"
    top_level = "Top-level files"
    no_files = "Commits without file changes"
    excluded_only = "Generated, vendored or excluded files only"
    totals_header = "| Commits | Authors | Files changed | Insertions | Deletions |"
    authors_header = "| Author | Commits | Insertions | Deletions |"
    areas_header = "| Area | Commits | Files | Insertions | Deletions |"
    #: Layout 5: the table counts every commit that touched an area, the summary each person's commit once,
    #: under its main area; each says which, so 18 in the table and 8 in the summary do not look like a mistake.
    areas_touching_header = "| Area | Commits touching it | Files | Insertions | Deletions |"
    files_header = "| File | Commits | Insertions | Deletions |"
    prompt_word = "prompt"
    no_model = "no model (no activity)"

    _nouns = {"commit": "commit", "author": "author", "file": "file"}

    def count(self, n: int, noun: str) -> str:
        """``3 commits``, ``1 file``."""
        word = self._nouns[noun]
        return f"{n} {word}" if n == 1 else f"{n} {word}s"

    _titles = {"day": "Daily", "week": "Weekly", "month": "Monthly", "quarter": "Quarterly", "sprint": "Sprint"}

    def title(self, period: str, project: str, key: str) -> str:
        """``period``: ``day``, ``week``, ``month`` or ``quarter`` (``report_markdown.period_of``)."""
        return f"# {self._titles[period]} report: {project}, {key}"

    def period_line(self, span: str, start: str, end: str) -> str:
        return f"- **Period:** {span}; UTC {start} → {end}"

    def activity_line(self, commits: int, authors: int, files: int, ins: int, dels: int) -> str:
        return (f"- **Activity:** {self.count(commits, 'commit')} by {self.count(authors, 'author')}, "
                f"{self.count(files, 'file')} changed, +{ins} / −{dels} lines")

    def written_by_line(self, writer: str) -> str:
        return f"- **Written by:** {writer}"

    def fallback_by(self, wanted: str) -> str:
        """What the "Written by" line adds when the built-in writer stood in for the model (SPEC §15.5)."""
        return f"**fallback**: {wanted} did not answer; the model writes this report again when it does"

    def trimmed_note(self, listed: int, total: int, num_ctx: int) -> str:
        return (f"> **Note:** the narrative was written from {listed} of {total} commits (the "
                f"largest); the rest did not fit the model's context (num_ctx={num_ctx}). "
                "The statistics cover all commits.\n")

    def compacted_note(self, num_ctx: int) -> str:
        return (f"> **Note:** commit messages and file lists were shortened to fit the model's "
                f"context (num_ctx={num_ctx}). The statistics cover all commits.\n")

    def no_activity(self, project: str, period: str) -> str:
        return f"No commits were authored in {project} during this {period}."

    def unreadable_note(self, shas: Sequence[str]) -> str:
        """The line a report carries when commits git could not read were left out of it."""
        n = len(shas)
        return (f"> **Note:** {n} commit{'' if n == 1 else 's'} could not be read by git and "
                f"{'was' if n == 1 else 'were'} left out: {', '.join(f'`{s}`' for s in shas)} (see `git fsck`).\n")

    def summary_totals(self, project: str, period: str, commits: int, authors: int, files: int,
                       ins: int, dels: int, *, window: bool = False) -> str:
        """``window``: the report's span is its window (coverage), not exactly the day or week."""
        when = self.in_window() if window else f"during this {period}"
        return (f"{self.count(commits, 'commit')} by {self.count(authors, 'author')} "
                f"changed {self.count(files, 'file')} (+{ins} / −{dels} lines) in {project} {when}.")

    def summary_areas(self, areas: Sequence[tuple[str, int]], *, mainly: bool = False) -> str:
        """``areas``: (area already formatted, commits) of the busiest areas; ``mainly`` (layout 5): each
        commit counted once, under its main area, and the sentence says so."""
        if mainly:
            names = " and ".join(area for area, _ in areas)
            counts = " and ".join(str(n) for _, n in areas)
            return (f"Most of the work was in {names} ({counts} "
                    f"commit{'' if [n for _, n in areas] == [1] else 's'} mainly there).")
        where = " and ".join(f"{area} ({self.count(n, 'commit')})" for area, n in areas)
        return f"Most of the work was in {where}."

    def summary_author(self, name: str, commits: int) -> str:
        return f"The most active author was {name} with {self.count(commits, 'commit')}."

    def summary_bots(self, names: Sequence[str], commits: int) -> str:
        return f"Bots made {self.count(commits, 'commit')} ({', '.join(names)}), not counted as authors."

    def summary_largest(self, sha: str, subject: str, ins: int, dels: int) -> str:
        return f"The largest change was {sha} “{subject}” (+{ins} / −{dels})."

    def more_commits(self, n: int) -> str:
        return f"… and {n} more commit{'' if n == 1 else 's'}"

    def files_count(self, n: int) -> str:
        return self.count(n, "file")

    arrived_late = "Arrived late"

    def covers_line(self, attribution: str, span: str, late: int) -> str:
        """What the report holds, on top: its window in local time and how commits were placed."""
        if attribution == "landed":
            return f"- **Covers:** the commits that landed on the tracked branches during {span}"
        extra = f", and {self.count(late, 'commit')} authored earlier that arrived since the last report" if late else ""
        return f"- **Covers:** the commits authored during {span}{extra}"

    def also_covers_line(self, keys: Sequence[str]) -> str:
        return f"- **Also covers:** {', '.join(keys)} (no report of their own)"

    def covered_line(self, by: str | None) -> str:
        if by:
            return f"- **Covered by the report of {by}:** that report already holds this window's commits"
        return "- **Covered by another report:** that report already holds this window's commits"

    def rewritten_line(self, branches: Sequence[str]) -> str:
        return (f"- **History rewritten:** {', '.join(branches)} (force-pushed since the last report; "
                "the rewritten commits are counted here as new commits)")

    def no_activity_in_window(self, project: str, landed: bool) -> str:
        verb = "landed in" if landed else "were authored in"
        return f"No commits {verb} {project} in this report's window."

    def in_window(self) -> str:
        """How the narrative names the report's span when it is not exactly the day or week."""
        return "in this report's window"

    # A team report's section per project.
    projects = "Projects"
    not_collected = "Not collected"
    no_commits_in_period = "No commits in this period."

    def commits_by(self, commits: int, authors: str) -> str:
        """A team report's line under a project: how many commits, by whom (``authors`` already joined)."""
        return f"{commits} commits by {authors}."

    # A weekly's week (layout 3, ``steps.week_facts``).
    this_week = "This week"
    merged_this_week = "Merged this week"
    merged_heading = "Merged"
    no_merges = "No merges."
    commits_word = "Commits"
    authors_word = "Authors"
    area_word = "Area"
    weekdays = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

    def day_by_day_line(self, counts: Sequence[int], outside: int) -> str:
        """Commits per local day, Monday first; ``outside``: held here, authored before the week."""
        days = " · ".join(f"{day} {n}" for day, n in zip(self.weekdays, counts, strict=True))
        extra = f"; {self.count(outside, 'commit')} authored before the week" if outside else ""
        return f"- **Day by day** (commits by author date): {days}{extra}"

    week_by_week = "Week by week"

    def week_by_week_line(self, weeks: Sequence[tuple[str, int]], outside: int) -> str:
        """Commits per ISO week of a longer report; ``outside``: held here, authored outside its window."""
        shown = " · ".join(f"{week} {n}" for week, n in weeks)
        extra = f"; {self.count(outside, 'commit')} authored outside the window" if outside else ""
        return f"- **Week by week** (commits by author date): {shown}{extra}"

    def against_header(self, last_key: str) -> str:
        return f"| | This week | Last week ({last_key}) | Change |"

    def brought(self, n: int, refs: Sequence[str]) -> str:
        """What a merge brought: its commit count, the first few linked."""
        more = ", …" if n > len(refs) else ""
        return f"brought {self.count(n, 'commit')}" + (f" ({', '.join(refs)}{more})" if refs else "")

    def more_merges(self, n: int) -> str:
        return f"… and {n} more merge{'' if n == 1 else 's'}"

    def quiet_week_against(self, last_key: str, commits: int, authors: int) -> str:
        return f"Last week ({last_key}): {self.count(commits, 'commit')} by {self.count(authors, 'author')}."

    # A team report (layout 3): a section per repository, and per person.
    people = "People"

    def missing_sentence(self, missing: Sequence[str]) -> str:
        """The summary's first sentence when projects could not be collected (``missing``: "flask (CODE)")."""
        return f"**Not collected:** {', '.join(missing)}; this report leaves them out."

    def made_by(self, commits: int, people: str) -> str:
        """A repository's first line in a team report (layout 3): ``1 commit by Alice Kim.``"""
        return f"{self.count(commits, 'commit')} by {people}."

    def person_line(self, per_repository: Sequence[tuple[str, int]]) -> str:
        return "; ".join(f"{repository}: {self.count(n, 'commit')}" for repository, n in per_repository) + "."

    def grounding_note(self, replaced: Sequence[str]) -> str:
        """The one line a report carries when sections of the model's text were replaced."""
        return (f"> **Note:** the model's text for {', '.join(replaced)} failed the checks twice "
                "and was replaced by the built-in writer's.\n")

    # A delivery's short form (``steps.report_brief``): the words it adds to the report's own lines.
    brief_updated = "Updated"
    brief_page = "Notion page"
    brief_file = "File"
    brief_pull_requests = "Pull requests"

    def brief_more(self, n: int) -> str:
        """What stands for the items a short form had no room for."""
        return f"…and {n} more"


class KoreanTexts(Texts):
    """Korean (한국어), in the plain written style of an engineering team's report (합니다체)."""

    language = "ko"
    name = "Korean (한국어)"

    summary = "요약"
    areas = "영역별 변경 사항"
    notable = "주요 커밋"
    statistics = "통계"
    authors_table = "작성자별"
    bots_table = "봇"
    areas_table = "영역별"
    kinds = "종류별 변경 사항"
    in_progress = "진행 중"

    def shared_commits(self, n: int, projects: Sequence[str]) -> str:
        return (f"{self.count(n, 'commit')}가 {', '.join(projects)} 중 둘 이상을 변경했습니다: 해당 프로젝트 섹션마다 "
                "나오며, 위의 집계에는 한 번만 셉니다(공유).")
    in_progress_note = "아직 병합되지 않은 브랜치의 작업이며, 위의 집계에 포함되지 않습니다."

    def in_progress_line(self, commits: int, updated: str) -> str:
        return f"병합 전 {self.count(commits, 'commit')}, 마지막 갱신 {updated}"

    kinds_table = "종류별"
    kinds_header = "| 종류 | 커밋 |"
    kind_titles = {"breaking": "호환성이 깨지는 변경", "features": "기능", "fixes": "수정", "performance": "성능",
                   "docs": "문서", "tests": "테스트", "build": "빌드·CI", "other": "기타 변경"}
    busiest_table = "변경이 잦은 파일"
    top_level = "최상위 파일"
    no_files = "파일 변경이 없는 커밋"
    excluded_only = "생성·외부(vendored)·제외 파일만 변경한 커밋"
    totals_header = "| 커밋 | 작성자 | 변경 파일 | 추가 | 삭제 |"
    authors_header = "| 작성자 | 커밋 | 추가 | 삭제 |"
    areas_header = "| 영역 | 커밋 | 파일 | 추가 | 삭제 |"
    areas_touching_header = "| 영역 | 이 영역을 바꾼 커밋 | 파일 | 추가 | 삭제 |"
    files_header = "| 파일 | 커밋 | 추가 | 삭제 |"
    prompt_word = "프롬프트"
    no_model = "모델 없음 (활동 없음)"

    _counters = {"commit": ("커밋", "개"), "author": ("작성자", "명"), "file": ("파일", "개")}

    def count(self, n: int, noun: str) -> str:
        """``커밋 3개``, ``작성자 2명`` (no plural; a counter word)."""
        word, counter = self._counters[noun]
        return f"{word} {n}{counter}"

    _titles = {"day": "일일", "week": "주간", "month": "월간", "quarter": "분기", "sprint": "스프린트"}
    _this = {"day": "이날", "week": "이번 주", "month": "이번 달", "quarter": "이번 분기", "sprint": "이번 스프린트"}
    _during = {"day": "하루", "week": "한 주", "month": "한 달", "quarter": "한 분기", "sprint": "스프린트"}

    def title(self, period: str, project: str, key: str) -> str:
        return f"# {self._titles[period]} 업무 보고: {project}, {key}"

    def period_line(self, span: str, start: str, end: str) -> str:
        return f"- **기간:** {span}; UTC {start} → {end}"

    def activity_line(self, commits: int, authors: int, files: int, ins: int, dels: int) -> str:
        return (f"- **활동:** {self.count(authors, 'author')}, {self.count(commits, 'commit')}, "
                f"{self.count(files, 'file')} 변경, +{ins} / −{dels}줄")

    def written_by_line(self, writer: str) -> str:
        return f"- **작성:** {writer}"

    def fallback_by(self, wanted: str) -> str:
        return f"**대체 작성(fallback)**: {wanted}이(가) 응답하지 않았습니다. 모델이 응답하면 이 보고서를 다시 작성합니다"

    def trimmed_note(self, listed: int, total: int, num_ctx: int) -> str:
        return (f"> **참고:** 본문은 전체 커밋 {total}개 중 변경량이 큰 {listed}개만 보고 작성했습니다. "
                f"나머지는 모델 컨텍스트(num_ctx={num_ctx})에 들어가지 않았습니다. "
                "통계는 모든 커밋을 반영합니다.\n")

    def compacted_note(self, num_ctx: int) -> str:
        return (f"> **참고:** 모델 컨텍스트(num_ctx={num_ctx})에 맞추기 위해 커밋 메시지와 파일 목록을 "
                "줄였습니다. 통계는 모든 커밋을 반영합니다.\n")

    def no_activity(self, project: str, period: str) -> str:
        return f"{self._this[period]} {project}에 작성된 커밋이 없습니다."

    def unreadable_note(self, shas: Sequence[str]) -> str:
        return (f"> **참고:** git이 읽지 못한 커밋 {len(shas)}개를 제외했습니다: "
                f"{', '.join(f'`{s}`' for s in shas)} (`git fsck` 참고).\n")

    def summary_totals(self, project: str, period: str, commits: int, authors: int, files: int,
                       ins: int, dels: int, *, window: bool = False) -> str:
        when = self.in_window() if window else f"{self._during[period]} 동안"
        return (f"{when} {project}에서 {self.count(authors, 'author')}이 "
                f"{self.count(commits, 'commit')}로 {self.count(files, 'file')}를 변경했습니다"
                f"(+{ins} / −{dels}줄).")

    def summary_areas(self, areas: Sequence[tuple[str, int]], *, mainly: bool = False) -> str:
        if mainly:
            names = ", ".join(area for area, _ in areas)
            counts = ", ".join(f"{n}개" for _, n in areas)
            return f"작업은 주로 {names}에서 이루어졌습니다(주로 그 영역을 바꾼 커밋 {counts})."
        where = ", ".join(f"{area}({self.count(n, 'commit')})" for area, n in areas)
        return f"작업은 주로 {where}에서 이루어졌습니다."

    def summary_author(self, name: str, commits: int) -> str:
        return f"가장 활발한 작성자는 {name}({self.count(commits, 'commit')})입니다."

    def summary_bots(self, names: Sequence[str], commits: int) -> str:
        return f"봇이 만든 {self.count(commits, 'commit')}({', '.join(names)})는 작성자 수에 넣지 않았습니다."

    def summary_largest(self, sha: str, subject: str, ins: int, dels: int) -> str:
        return f"가장 큰 변경은 {sha} “{subject}”(+{ins} / −{dels})입니다."

    def more_commits(self, n: int) -> str:
        return f"… 외 커밋 {n}개"

    arrived_late = "늦게 도착한 커밋"

    def covers_line(self, attribution: str, span: str, late: int) -> str:
        if attribution == "landed":
            return f"- **범위:** {span} 동안 추적 브랜치에 반영된 커밋"
        extra = f", 그리고 지난 보고 이후 늦게 도착한 이전 작성 {self.count(late, 'commit')}" if late else ""
        return f"- **범위:** {span} 동안 작성된 커밋{extra}"

    def also_covers_line(self, keys: Sequence[str]) -> str:
        return f"- **함께 다루는 기간:** {', '.join(keys)} (별도 보고 없음)"

    def covered_line(self, by: str | None) -> str:
        if by:
            return f"- **{by} 보고에 포함됨:** 이 기간의 커밋은 그 보고가 이미 다루었습니다"
        return "- **다른 보고에 포함됨:** 이 기간의 커밋은 다른 보고가 이미 다루었습니다"

    def rewritten_line(self, branches: Sequence[str]) -> str:
        return (f"- **이력 재작성:** {', '.join(branches)} (지난 보고 이후 강제 푸시됨; "
                "다시 쓰인 커밋은 새 커밋으로 셉니다)")

    def no_activity_in_window(self, project: str, landed: bool) -> str:
        verb = "반영된" if landed else "작성된"
        return f"이 보고 기간 동안 {project}에 {verb} 커밋이 없습니다."

    def in_window(self) -> str:
        return "이 보고 기간 동안"

    projects = "프로젝트"
    not_collected = "수집되지 않음"
    no_commits_in_period = "이 기간에 커밋이 없습니다."

    def commits_by(self, commits: int, authors: str) -> str:
        return f"{self.count(commits, 'commit')}, 작성자: {authors}."

    this_week = "이번 주"
    merged_this_week = "이번 주 병합"
    merged_heading = "병합"
    no_merges = "병합이 없습니다."
    commits_word = "커밋"
    authors_word = "작성자"
    area_word = "영역"
    weekdays = ("월", "화", "수", "목", "금", "토", "일")

    def day_by_day_line(self, counts: Sequence[int], outside: int) -> str:
        days = " · ".join(f"{day} {n}" for day, n in zip(self.weekdays, counts, strict=True))
        extra = f"; 이번 주 이전에 작성된 {self.count(outside, 'commit')}" if outside else ""
        return f"- **요일별** (작성일 기준 커밋): {days}{extra}"

    week_by_week = "주별"

    def week_by_week_line(self, weeks: Sequence[tuple[str, int]], outside: int) -> str:
        shown = " · ".join(f"{week} {n}" for week, n in weeks)
        extra = f"; 기간 밖에서 작성된 {self.count(outside, 'commit')}" if outside else ""
        return f"- **주별** (작성일 기준 커밋): {shown}{extra}"

    def against_header(self, last_key: str) -> str:
        return f"| | 이번 주 | 지난주 ({last_key}) | 변화 |"

    def brought(self, n: int, refs: Sequence[str]) -> str:
        more = ", …" if n > len(refs) else ""
        return f"{self.count(n, 'commit')} 병합" + (f" ({', '.join(refs)}{more})" if refs else "")

    def more_merges(self, n: int) -> str:
        return f"… 외 병합 {n}개"

    def quiet_week_against(self, last_key: str, commits: int, authors: int) -> str:
        return f"지난주({last_key}): {self.count(authors, 'author')}, {self.count(commits, 'commit')}."

    people = "사람별"

    def missing_sentence(self, missing: Sequence[str]) -> str:
        return f"**수집되지 않음:** {', '.join(missing)}. 이 보고서에는 빠져 있습니다."

    def made_by(self, commits: int, people: str) -> str:
        return f"{self.count(commits, 'commit')}, 작성자: {people}."

    def person_line(self, per_repository: Sequence[tuple[str, int]]) -> str:
        return ", ".join(f"{repository}: {self.count(n, 'commit')}" for repository, n in per_repository) + "."

    def grounding_note(self, replaced: Sequence[str]) -> str:
        return (f"> **참고:** {', '.join(replaced)} 섹션은 모델의 글이 두 번 검사를 통과하지 못해 "
                "기본 작성기의 글로 바꾸었습니다.\n")

    brief_updated = "수정됨"
    brief_page = "Notion 페이지"
    brief_file = "파일"
    brief_pull_requests = "풀 리퀘스트"

    def brief_more(self, n: int) -> str:
        return f"…외 {n}건"


_CATALOGUE: dict[str, Texts] = {t.language: t for t in (Texts(), KoreanTexts())}
#: Primary language subtags with a complete catalogue.
LANGUAGES: tuple[str, ...] = tuple(_CATALOGUE)


def primary(tag: str) -> str:
    """The primary language subtag of a BCP 47 tag, lower case (``ko-KR`` → ``ko``)."""
    return tag.split("-", 1)[0].lower()


def texts(language: str) -> Texts:
    """The catalogue for ``language`` (a BCP 47 tag); CONFIG_INVALID if unsupported."""
    found = _CATALOGUE.get(primary(language))
    if found is None:
        raise errors.step_error("CONFIG_INVALID", f"report language {language!r} is not supported "
                                f"(supported: {', '.join(LANGUAGES)})")
    return found
