"""The Java Kafka client for the tests that run it: its jars (put in .cache/kafka-java by
scripts/install-test-deps; KAFKA_JAVA_LIB names another directory) and the test programs
under java/, compiled with the system javac."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

LIB = os.environ.get("KAFKA_JAVA_LIB") or str(Path(__file__).parents[3] / ".cache" / "kafka-java")
JAVA_DIR = Path(__file__).parent / "java"


def compile_java(out: Path, *programs: str) -> Path:
    """java/<program>.java of each program compiled into ``out`` (then run with the classpath
    ``f"{out}:{LIB}/*"``)."""
    assert Path(LIB, "kafka-clients.jar").exists(), f"no kafka-clients.jar in {LIB}: run scripts/install-test-deps"
    assert shutil.which("javac"), "a JDK with javac is needed"
    sources = [str(JAVA_DIR / f"{program}.java") for program in programs]
    subprocess.run(["javac", "-d", str(out), "-cp", f"{LIB}/*", *sources], check=True, timeout=120)
    return out
