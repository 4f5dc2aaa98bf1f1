"""Links into the project's forge, from the ``origin`` remote's shapes of each forge."""

from __future__ import annotations

import pytest

from steps import forge_links, untrusted

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(("remote", "commit", "reference"), [
    ("git@github.com:pallets/flask.git", "https://github.com/pallets/flask/commit/" + SHA,
     "https://github.com/pallets/flask/issues/7"),
    ("https://github.com/psf/requests", "https://github.com/psf/requests/commit/" + SHA,
     "https://github.com/psf/requests/issues/7"),
    ("ssh://git@gitlab.com/group/sub/proj.git", "https://gitlab.com/group/sub/proj/-/commit/" + SHA,
     "https://gitlab.com/group/sub/proj/-/issues/7"),
    ("https://gitlab.example.org/team/proj.git", "https://gitlab.example.org/team/proj/-/commit/" + SHA,
     "https://gitlab.example.org/team/proj/-/issues/7"),
    ("git@codeberg.org:forgejo/forgejo.git", "https://codeberg.org/forgejo/forgejo/commit/" + SHA,
     "https://codeberg.org/forgejo/forgejo/issues/7"),
    ("https://gitea.corp.example/ops/tool", "https://gitea.corp.example/ops/tool/commit/" + SHA,
     "https://gitea.corp.example/ops/tool/issues/7"),
    ("git@bitbucket.org:team/repo.git", "https://bitbucket.org/team/repo/commits/" + SHA, None),
    ("https://git.internal.example/team/repo.git", None, None),  # unknown forge: text
    ("/srv/git/repo.git", None, None),  # a local path: no forge at all
])
def test_each_forge_spells_its_pages_its_own_way(remote: str, commit: str | None, reference: str | None) -> None:
    links = forge_links.ForgeLinks(untrusted.forge_of(remote))
    assert links.commit(SHA) == commit
    assert links.reference(7) == reference


def test_only_a_hex_sha_becomes_a_commit_link() -> None:
    links = forge_links.ForgeLinks("https://github.com/o/r")
    assert links.commit(SHA[:8]) == "https://github.com/o/r/commit/" + SHA[:8]
    assert links.commit("../../evil") is None and links.commit("abc") is None


@pytest.mark.parametrize(("text", "numbers"), [
    ("Fix the parser (#7497)", ["7497"]),
    ("Merge pull request #12 from a/b, see #3.", ["12", "3"]),
    ("C# and a#1 and /path#2 and &#39; and ##5", []),
    ("#0 and #01 are not references", []),
])
def test_references_are_hash_numbers_standing_alone(text: str, numbers: list[str]) -> None:
    assert [m["number"] for m in forge_links.REFERENCE.finditer(text)] == numbers
