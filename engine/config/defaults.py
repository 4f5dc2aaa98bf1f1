"""Where reportflow looks by default, and how a relative SQLite URL resolves: one source, no pydantic.

``engine.config.config_file`` validates the file, ``engine.cli.fast_tick`` finds the store of a
nothing-due ``tick`` without it, and ``db upgrade``/``db backup`` open it with no config at all:
every one of them picks and resolves the store URL with ``store_url``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from engine.core import errors

DEFAULT_CONFIG = "reportflow.toml"
DEFAULT_DB_URL = "sqlite:///.reportflow/reportflow.db"
#: A config file larger than this is refused unread (10,000 schedules take about 1.5 MiB).
MAX_CONFIG_BYTES = 16 * 1024 * 1024
#: Paths in the config: longer or deeper ones are typos or probes (PATH_MAX is 4096 on Linux).
MAX_PATH_CHARS = 4096
MAX_PATH_DEPTH = 100
MAX_NAME_BYTES = 255


def read_config_bytes(path: Path) -> bytes:
    """The bytes of the config file at ``path``; raises ConfigInvalid naming it when it cannot be one.

    Opened without blocking and checked before anything is read: a FIFO, a device
    (``/dev/zero``) or a folder is refused, and so is a file over ``MAX_CONFIG_BYTES``.
    """
    problem = path_problem(str(path))
    if problem is not None:
        raise errors.ConfigInvalid(f"the config path {problem}", file=repr(str(path)[:200]))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise errors.ConfigInvalid(
            "config file not found (run `reportflow init`, or pass --config / set REPORTFLOW_CONFIG)",
            file=str(path)) from None
    except OSError as exc:
        raise errors.ConfigInvalid(f"cannot read: {exc.strerror or exc}", file=str(path)) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise errors.ConfigInvalid("not a regular file (a config is a TOML file, not a device, FIFO or folder)",
                                       file=str(path))
        if info.st_size > MAX_CONFIG_BYTES:
            raise errors.ConfigInvalid(f"{info.st_size} bytes: a config file is at most {MAX_CONFIG_BYTES} bytes",
                                       file=str(path))
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_CONFIG_BYTES:  # it grew while being read
                raise errors.ConfigInvalid(f"a config file is at most {MAX_CONFIG_BYTES} bytes", file=str(path))
        return b"".join(chunks)
    except OSError as exc:
        raise errors.ConfigInvalid(f"cannot read: {exc.strerror or exc}", file=str(path)) from exc
    finally:
        os.close(fd)


#: Folders of the operating system: no output of reportflow (reports, backups) is written under them.
SYSTEM_DIRS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/run", "/sbin", "/sys", "/usr")


def output_dir(given: Path, base_dir: Path, *, key: str, meant_for: str, file: str | None = None) -> Path:
    """A folder reportflow writes into, resolved against the config's folder; ConfigInvalid (``key``) when unsafe.

    Refused: the filesystem root; a relative path that leaves the config's folder (``..``, or a symlink
    pointing out of it); a path that resolves into a system folder (``/etc``, ``/usr``, ...) other than the
    one holding the config. This process may run as root: what it writes must land where the operator meant.
    """
    folder = base_dir.resolve()
    resolved = (folder / given).resolve()
    where = f"'{given}' resolves to {resolved}"
    if resolved == Path(resolved.anchor):
        raise errors.ConfigInvalid(f"{where}, the filesystem root: give a folder of its own", key=key, file=file)
    inside = resolved.is_relative_to(folder)
    if not given.is_absolute() and not inside:
        raise errors.ConfigInvalid(f"{where}, outside the config's folder {folder} (through '..' or a symlink): "
                                   f"give an absolute path to put {meant_for} elsewhere", key=key, file=file)
    if not inside and any(resolved.is_relative_to(system) for system in SYSTEM_DIRS):
        raise errors.ConfigInvalid(f"{where}, a system folder: choose a folder meant for {meant_for}", key=key,
                                   file=file)
    return resolved


def path_problem(text: str) -> str | None:
    """What makes ``text`` unusable as a path (a NUL, an absurd length or depth), or None.

    Caught at load, these otherwise fail deep inside the standard library at run time
    (``ValueError: embedded null byte``, a ``RecursionError`` creating 2,000 folders).
    """
    if "\x00" in text:
        return "contains a NUL character"
    if len(text) > MAX_PATH_CHARS:
        return f"is {len(text)} characters long (at most {MAX_PATH_CHARS})"
    parts = [part for part in text.split("/") if part]
    if len(parts) > MAX_PATH_DEPTH:
        return f"is {len(parts)} folders deep (at most {MAX_PATH_DEPTH})"
    if any(len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES for part in parts):
        return f"has a name longer than {MAX_NAME_BYTES} bytes"
    return None


def sqlite_file(url: str) -> str | None:
    """The file part of a ``sqlite:///path`` URL (without its ``?query``), or None for another URL."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or url == "sqlite:///:memory:":
        return None
    return url[len(prefix):].split("?", 1)[0]


def resolve_store_url(url: str, base_dir: Path) -> str:
    """Resolve a relative SQLite path against the config's folder."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith("sqlite:////") and url != "sqlite:///:memory:":
        path = url[len(prefix):]
        if not os.path.isabs(path):
            return prefix + str((base_dir / path).resolve())
    return url


def store_url(override: str | None, configured: str | None, base_dir: Path) -> str:
    """The store URL of every command: ``--db``/REPORTFLOW_DB, else ``[store] url``, else the default.

    A relative SQLite path resolves against ``base_dir`` (the config's folder), never the working directory.
    """
    url = override or os.environ.get("REPORTFLOW_DB") or configured or DEFAULT_DB_URL
    return resolve_store_url(url, base_dir)
