"""A link from outside stays live only if it opens one of the project's own pages (security round 3, item 1).

``redact.link_allowed`` checked the start of the URL: ``https://github.com/org/repo/../../login/oauth/authorize``
passed, and the browser opened the forge's OAuth consent page. Here every URL is also resolved the way a browser
resolves it (backslashes as slashes, scheme and host case, default port, userinfo, percent-escaped dots, dot
segments: the WHATWG URL rules, written out in this test), and an allowed URL must land on a commit, issue or
pull request page under the forge's own path.
"""

from __future__ import annotations

import re
import urllib.parse

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.core import redact
from steps import untrusted

FORGE = "https://github.com/org/repo"
PAGE = re.compile(r"(?:-/)?(?:commits?/[0-9a-f]+|(?:issues|pull|pulls|merge_requests|pull-requests)/[0-9]+)"
                  r"(?:/(?:files|commits|diffs|changes))?")


def resolved(url: str) -> tuple[str, str, str, int | None, str]:
    """(scheme, userinfo, host, port, path) as a browser follows ``url``."""
    url = url.replace("\\", "/")
    scheme, _, rest = url.partition(":")
    rest = rest.lstrip("/")
    authority, _, path = rest.partition("/")
    path = "/" + path.split("?", 1)[0].split("#", 1)[0]
    userinfo, _, hostport = authority.rpartition("@")
    host, _, port = hostport.partition(":")
    number = int(port) if port.isdigit() else None
    if scheme.lower() == "https" and number == 443:
        number = None
    segments: list[str] = []
    for segment in path.split("/")[1:]:
        segment = re.sub(r"%2e", ".", segment, flags=re.IGNORECASE)
        if segment == "..":
            if segments:
                segments.pop()
        elif segment != ".":
            segments.append(segment)
    trailing = "/" if path.endswith(("/", "/.", "/..")) else ""
    return scheme.lower(), userinfo, host.lower(), number, "/" + "/".join(segments) + (trailing if segments else "")


def opens_a_project_page(url: str) -> bool:
    scheme, userinfo, host, port, path = resolved(url)
    home = urllib.parse.urlsplit(FORGE)
    prefix = home.path + "/"
    return (scheme == "https" and not userinfo and host == home.hostname and port is None
            and path.startswith(prefix) and PAGE.fullmatch(path[len(prefix):]) is not None)


SEGMENT = st.sampled_from(["org", "repo", "..", ".", "%2e%2e", "%2E.", ".%2e", "commit", "abc1234", "issues", "7",
                           "pull", "login", "oauth", "authorize", "", "repo-evil", "ORG", "files", "-"])
URLS = st.builds(
    lambda scheme, user, host, port, segments, sep, query, fragment:
        f"{scheme}://{user}{host}{port}{sep}{sep.join(segments)}{query}{fragment}",
    st.sampled_from(["https", "HTTPS", "http", "javascript"]), st.sampled_from(["", "a@", "a:b@", "github.com@"]),
    st.sampled_from(["github.com", "GitHub.com", "evil.example", "github.com.evil.example"]),
    st.sampled_from(["", ":443", ":8443"]), st.lists(SEGMENT, max_size=7), st.sampled_from(["/", "\\"]),
    st.sampled_from(["", "?client_id=x&scope=repo", "?"]), st.sampled_from(["", "#L10", "#x/../y", "#a#b"]))


@settings(max_examples=2000, deadline=None)
@example(f"{FORGE}/../../login/oauth/authorize?client_id=x&scope=repo")
@example(f"{FORGE}/%2e%2e/%2e%2e/login/oauth/authorize")
@example(f"{FORGE}/commit/..%2f..%2flogin")
@example(f"{FORGE}\\..\\..\\login")
@example(f"{FORGE}/commit/abc1234/../../../../login")
@given(URLS)
def test_an_allowed_link_opens_a_project_page(url: str) -> None:
    if redact.link_allowed(url, FORGE):
        assert opens_a_project_page(url), url


@pytest.mark.parametrize("url", [
    f"{FORGE}/commit/0123abcd", f"{FORGE}/issues/12", f"{FORGE}/pull/7", f"{FORGE}/pull/7/files",
    f"{FORGE}/commit/0123abcd#diff-1", "https://gitlab.example.com/g/p/-/merge_requests/3",
])
def test_the_projects_own_pages_stay_live(url: str) -> None:
    forge = "https://gitlab.example.com/g/p" if "gitlab" in url else FORGE
    assert redact.link_allowed(url, forge) and opens_a_project_page(url) == (forge == FORGE)


@pytest.mark.parametrize("url", [
    f"{FORGE}/../../login/oauth/authorize?client_id=x&scope=repo", f"{FORGE}/%2e%2e/%2e%2e/login", FORGE,
    f"{FORGE}/", f"{FORGE}/settings", f"{FORGE}/commit/abc?x=1", "https://GITHUB.com/org/repo/commit/abc",
    "https://github.com:443/org/repo/commit/abc", "https://a@github.com/org/repo/commit/abc",
    f"{FORGE}//commit/abc", f"{FORGE}/./commit/abc", f"{FORGE}/commit/abc#x#y",
])
def test_anything_else_is_text(url: str) -> None:
    assert not redact.link_allowed(url, FORGE)


@pytest.mark.parametrize("remote", ["https://github.com/..", "https://github.com/org/..", "git@github.com:./repo",
                                    "https://github.com/org/repo/../x"])
def test_a_remote_with_dot_segments_names_no_forge(remote: str) -> None:
    assert untrusted.forge_of(remote) is None
