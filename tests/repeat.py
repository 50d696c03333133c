"""Run the selected tests N times, to show a rare failure is gone:
    PPLXWEB_REPEAT=300 bash tests/run.sh -p tests.repeat "tests/path/test_x.py::test_name" -q
Each repeat is a test of its own (`test_name[repeat-7]`), so a failure names its repeat."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def _pplxweb_repeat(request):
    return request.param


def pytest_generate_tests(metafunc):
    count = int(os.environ.get("PPLXWEB_REPEAT", "1") or 1)
    if count > 1:
        metafunc.fixturenames.append("_pplxweb_repeat")
        metafunc.parametrize(
            "_pplxweb_repeat", range(1, count + 1), indirect=True, ids=lambda n: f"repeat-{n}"
        )
