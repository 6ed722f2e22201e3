"""The JVM implementation of the connector in tests: skip cleanly where its jar was not built."""
from __future__ import annotations

import pytest


def require_jvm() -> str:
    """The JVM implementation's format name; skips the test when its jar was not built (no JDK)."""
    from connectors.session import JVM_CLASS, jvm_jar

    if jvm_jar() is None:
        pytest.skip("the JVM connector jar was not built (make install needs a JDK)")
    return JVM_CLASS
