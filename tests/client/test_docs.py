"""Every ```python example of docs/client.md runs, as written, against a live broker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).parents[2] / "docs" / "client.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_guide_has_examples():
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_example_runs(broker, tmp_path, index):
    script = tmp_path / f"example_{index}.py"
    script.write_text(EXAMPLES[index])
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, timeout=120,
                          capture_output=True, text=True,
                          env=dict(os.environ, NAMESRV_ADDR=broker.namesrv, HOME=str(tmp_path)))
    assert proc.returncode == 0, f"example {index} failed:\n{EXAMPLES[index]}\n{proc.stderr}"
