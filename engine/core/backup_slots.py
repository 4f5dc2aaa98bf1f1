"""The status of a scheduled backup's slot, as its row in ``backups`` stores it (``[store] backup``)."""

from __future__ import annotations

from enum import StrEnum


class BackupStatus(StrEnum):
    """A backup slot's row: claimed and being copied, verified, failed (its copy removed), or removed later by ``keep``."""

    TAKING = "TAKING"
    VERIFIED = "VERIFIED"
    FAILED = "FAILED"
    REMOVED = "REMOVED"
