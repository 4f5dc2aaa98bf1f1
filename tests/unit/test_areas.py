"""Areas a reader recognises: below source roots, packages of a monorepo, the top-level folder."""

from __future__ import annotations

import pytest

from steps import areas
from steps.areas import PathKind


@pytest.mark.parametrize(("path", "area"), [
    ("src/flask/json/provider.py", "src/flask/json"),
    ("src/requests/models.py", "src/requests"),
    ("src/main.rs", "src"),
    ("lib/active_support/core_ext/string.rb", "lib/active_support/core_ext"),
    ("cmd/reportflow/main.go", "cmd/reportflow"),
    ("packages/ui/src/button.tsx", "packages/ui"),
    ("packages/package.json", "packages"),
    ("tests/unit/test_x.py", "tests"),
    ("engine/store/claims.py", "engine"),
    ("README.md", areas.ROOT),
])
def test_area_of(path: str, area: str) -> None:
    assert areas.area_of(path) == area


@pytest.mark.parametrize(("path", "kind"), [
    ("src/requests/models.py", PathKind.SOURCE),
    ("tests/test_requests.py", PathKind.TESTS),
    ("src/pkg/models_test.go", PathKind.TESTS),
    ("web/button.spec.ts", PathKind.TESTS),
    ("test_utils.py", PathKind.TESTS),
    ("docs/index.rst", PathKind.DOCS),
    ("CHANGES.rst", PathKind.DOCS),
    ("README.md", PathKind.DOCS),
    ("src/readme.py", PathKind.SOURCE),
    ("pyproject.toml", PathKind.SOURCE),
])
def test_kind_of(path: str, kind: PathKind) -> None:
    assert areas.kind_of(path) is kind
