"""The page's hardening (SPEC v4 §14): token length, the Host check, the failed-login limit,
server-side sessions, the cookie, the report file check, error pages and inputs that used
to answer 500. The site is the one of test_web: a real engine run on a scratch repository.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
from datetime import timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from engine.config.engine_sections import UiConfig
from engine.core.models import RunStatus
from engine.read import run_queries
from engine.runtime import Runtime
from engine.web.app import create_app
from engine.web.pages import SESSION_COOKIE
from tests.integration.test_web import TOKEN, Site, build_site, client, csrf_of, logged_in, status_of
from tests.support import run_cli, write_config


@pytest.fixture
def site(sqlite_url: str, tmp_path: Path) -> Site:
    return build_site(sqlite_url, tmp_path)


def with_ui(rt: Runtime, **ui: object) -> Runtime:
    return dataclasses.replace(rt, config=dataclasses.replace(rt.config, ui=UiConfig(**ui)))  # type: ignore[arg-type]


def cookie_payload(set_cookie: str) -> dict[str, object]:
    value = set_cookie.split(";", 1)[0].split("=", 1)[1].strip('"')
    data = value.split(".", 1)[0]
    return dict(json.loads(base64.b64decode(data + "=" * (-len(data) % 4))))


def test_a_token_shorter_than_16_characters_is_refused_at_start(tmp_path: Path) -> None:
    config = write_config(tmp_path / "rf.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}")
    result = run_cli("ui", "--port", "0", config=config, env={"REPORTFLOW_UI_TOKEN": "a"})
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "16 characters" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_request_for_another_host_name_gets_400_dns_rebinding(site: Site) -> None:
    c = client(site.rt)
    rebound = c.get("/runs", headers={"Host": "attacker.example"})
    assert rebound.status_code == 400 and "content-security-policy" in rebound.headers
    assert "platform-report" not in rebound.text
    assert c.get("/runs", headers={"Host": "localhost:8321"}).status_code == 200
    assert c.get("/runs", headers={"Host": "[::1]:8321"}).status_code == 200
    named = TestClient(create_app(with_ui(site.rt, allowed_hosts=("reports.example",)), token=TOKEN),
                       base_url="http://reports.example")
    assert named.get("/runs").status_code == 200


def test_redirects_never_echo_the_request_host(site: Site) -> None:
    c = client(site.rt)
    assert c.get("/").headers["location"] == "/schedules"
    slash = c.get("/runs/")
    assert "127.0.0.1" not in slash.headers.get("location", "")


def test_failed_logins_are_logged_without_the_token_and_limited(site: Site,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    c = client(site.rt)
    csrf = csrf_of(c.get("/login").text)
    caplog.set_level(logging.WARNING, logger="engine.web.routes")
    for n in range(5):
        assert c.post("/login", data={"token": f"guess-number-{n}", "csrf_token": csrf}).status_code == 403
    lines = [r.getMessage() for r in caplog.records if "login_failed" in r.getMessage()]
    assert len(lines) == 5 and all("client=testclient" in line for line in lines)
    assert "guess-number" not in caplog.text
    blocked = c.post("/login", data={"token": TOKEN, "csrf_token": csrf})  # even the right token waits
    assert blocked.status_code == 429 and 1 <= int(blocked.headers["retry-after"]) <= 300
    assert "content-security-policy" in blocked.headers
    assert c.get("/login").status_code == 429
    site.rt.clock.advance(timedelta(minutes=5))
    assert c.post("/login", data={"token": TOKEN, "csrf_token": csrf}).status_code == 303


def test_logout_revokes_the_session_so_a_saved_cookie_no_longer_acts(site: Site) -> None:
    c, csrf = logged_in(site.rt)
    saved = c.cookies[SESSION_COOKIE]
    assert c.post("/logout", data={"csrf_token": csrf}).status_code == 303
    c.cookies.clear()
    c.cookies.set(SESSION_COOKIE, saved)  # the saved copy, replayed against the same process
    answer = c.post(f"/runs/{site.failed_id}/retry", data={"csrf_token": csrf})
    assert answer.status_code == 403 and "log in first" in answer.text
    assert status_of(site.rt, site.failed_id) is RunStatus.FAILED


def test_a_session_ends_after_session_ttl(site: Site) -> None:
    rt = with_ui(site.rt, session_ttl=timedelta(hours=1))
    c = TestClient(create_app(rt, token=TOKEN), base_url="http://127.0.0.1", follow_redirects=False)
    csrf = csrf_of(c.get("/login").text)
    assert c.post("/login", data={"token": TOKEN, "csrf_token": csrf}).status_code == 303
    csrf = csrf_of(c.get("/runs").text)
    site.rt.clock.advance(timedelta(hours=1, seconds=1))
    answer = c.post(f"/runs/{site.failed_id}/retry", data={"csrf_token": csrf})
    assert answer.status_code == 403 and "log in first" in answer.text


def test_the_cookie_holds_a_session_id_and_no_digest_of_the_token(site: Site) -> None:
    c = client(site.rt)
    csrf = csrf_of(c.get("/login").text)
    answer = c.post("/login", data={"token": TOKEN, "csrf_token": csrf})
    payload = cookie_payload(answer.headers["set-cookie"])
    assert set(payload) == {"sid", "csrf"}
    assert "secure" not in answer.headers["set-cookie"].lower()  # plain http on loopback


@pytest.mark.parametrize("how", ["https", "secure_cookies"])
def test_the_cookie_is_secure_over_https_or_on_request(site: Site, how: str) -> None:
    rt = with_ui(site.rt, secure_cookies=how == "secure_cookies")
    base = "https://127.0.0.1" if how == "https" else "http://127.0.0.1"
    c = TestClient(create_app(rt, token=TOKEN), base_url=base, follow_redirects=False)
    login = c.get("/login")
    assert "secure" in [part.strip() for part in login.headers["set-cookie"].lower().split(";")]


def _report_artifact(site: Site) -> Path:
    run = run_queries.get_run(site.rt, site.ok_id)
    location = next(a.location for a in run.artifacts if a.kind == "markdown")
    return Path(location.partition(":")[2])


def test_the_run_page_shows_the_report_file_only_while_it_is_what_the_run_wrote(site: Site,
                                                                                tmp_path: Path) -> None:
    c = client(site.rt)
    path = _report_artifact(site)
    assert str(path) in c.get(f"/runs/{site.ok_id}").text  # shown from the file
    secret = tmp_path / "outside.md"
    secret.write_text("TOP-SECRET-OUTSIDE\n")
    path.unlink()
    path.symlink_to(secret)
    page = c.get(f"/runs/{site.ok_id}").text
    assert "TOP-SECRET-OUTSIDE" not in page and "changed since the run" in page
    path.unlink()
    path.write_text("EDITED-AFTER-THE-RUN\n")
    page = c.get(f"/runs/{site.ok_id}").text
    assert "EDITED-AFTER-THE-RUN" not in page and "sha256 differs" in page
    path.unlink()
    assert "vanished" in c.get(f"/runs/{site.ok_id}").text


@pytest.mark.parametrize("path", ["/runs/²", "/runs/١", "/runs/" + "9" * 40, "/api/runs/١", "/api/runs/-1",
                                  "/runs?from=٢٠٢٦-٠٩-٢٩", "/runs?from=9999-12-31", "/api/runs?limit=١٠"])
def test_odd_ids_and_dates_are_4xx_with_the_security_headers(site: Site, path: str) -> None:
    answer = client(site.rt).get(path)
    assert answer.status_code in (400, 404), answer.text
    assert "content-security-policy" in answer.headers and answer.headers["x-content-type-options"] == "nosniff"


def test_a_non_ascii_csrf_value_is_refused_not_a_500(site: Site) -> None:
    c = client(site.rt)
    c.get("/login")
    answer = c.post("/login", data={"token": TOKEN, "csrf_token": "é☃"})
    assert answer.status_code == 403 and "content-security-policy" in answer.headers


def test_a_bug_answers_500_with_the_security_headers(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(rt: Runtime, run_id: int) -> None:
        raise RuntimeError("a bug")
    monkeypatch.setattr(run_queries, "get_run", broken)
    answer = client(site.rt).get(f"/runs/{site.ok_id}")
    assert answer.status_code == 500 and "content-security-policy" in answer.headers
    assert "a bug" not in answer.text


def test_a_password_stored_before_masking_is_masked_on_the_page_and_the_api(site: Site) -> None:
    from sqlalchemy import update

    from engine.store.tables import runs

    old = "cannot reach Ollama at http://rf:OLDROWCANARY@127.0.0.1:1 (connection refused)"
    with site.rt.store.write() as conn:
        conn.execute(update(runs).where(runs.c.id == site.failed_id).values(error_message=old))
    c = client(site.rt)
    for path in (f"/runs/{site.failed_id}", f"/api/runs/{site.failed_id}", "/api/runs", "/runs"):
        answer = c.get(path)
        assert answer.status_code == 200 and "OLDROWCANARY" not in answer.text, path
    assert "rf:***@127.0.0.1" in c.get(f"/api/runs/{site.failed_id}").text


# --- issue 36 ---------------------------------------------------------------------------------

@pytest.mark.parametrize("weak", [" " * 16, "a" * 16, "abababababababab"])
def test_a_token_of_one_repeated_character_is_refused_as_weak_at_start(tmp_path: Path, weak: str) -> None:
    config = write_config(tmp_path / "rf.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}")
    result = run_cli("ui", "--port", "0", config=config, env={"REPORTFLOW_UI_TOKEN": weak})
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().count("\n") == 0 and "weak" in result.stderr and "Traceback" not in result.stderr


def test_token_guesses_are_limited_across_addresses_too(site: Site) -> None:
    """Five guesses from each of 20 loopback addresses used to give 100 guesses and no 429."""
    app = create_app(site.rt, token=TOKEN)
    clients = [TestClient(app, base_url="http://127.0.0.1", follow_redirects=False, client=(f"127.0.0.{n}", 5000))
               for n in range(2, 23)]
    forms = [(c, csrf_of(c.get("/login").text)) for c in clients]
    answers = [c.post("/login", data={"token": f"guess-{n}-{guess}", "csrf_token": csrf}).status_code
               for n, (c, csrf) in enumerate(forms[:20]) for guess in range(5)]
    assert answers.count(403) == 20 and answers.count(429) == 80  # 20 tries in all, from any address
    fresh, csrf = forms[20]
    blocked = fresh.post("/login", data={"token": TOKEN, "csrf_token": csrf})
    assert blocked.status_code == 429 and 1 <= int(blocked.headers["retry-after"]) <= 300


def test_pages_and_the_api_are_never_cached_static_files_may_be(site: Site) -> None:
    c, _ = logged_in(site.rt)
    for path in ("/schedules", f"/runs/{site.ok_id}", "/runs", "/login", "/api/runs", "/runs/999999"):
        assert c.get(path).headers.get("cache-control") == "no-store", path
    assert c.get("/static/style.css").headers.get("cache-control") != "no-store"


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_metrics_check_the_host_and_the_token(tmp_path: Path) -> None:
    """``serve --metrics-port`` served any Host (DNS rebinding) and needed no token; now as the page."""
    import signal
    import urllib.error
    import urllib.request

    from tests.acceptance import procs

    port = _free_port()
    config = write_config(tmp_path / "rf.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}")
    serve = procs.spawn(tmp_path, config, "serve", "--metrics-port", str(port), env={"REPORTFLOW_UI_TOKEN": TOKEN})

    def get(host: str, token: str | None = None) -> tuple[int, str]:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Host": host})
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    try:
        procs.wait_for(lambda: get("127.0.0.1", TOKEN)[0] == 200, 60, "the metrics endpoint")
        status, body = get("127.0.0.1", TOKEN)
        assert "reportflow_" in body
        assert get("attacker.example", TOKEN)[0] == 400
        assert get(f"localhost:{port}")[0] == 401
        assert get("127.0.0.1", "not-the-token")[0] == 401
        for _ in range(3):
            get("127.0.0.1", "not-the-token")
        assert get("127.0.0.1", TOKEN)[0] == 429  # the page's failed-login limit counts these too
    finally:
        serve.send_signal(signal.SIGTERM)
        procs.finish(serve, timeout=120)
