"""``SimClock``: virtual milliseconds, moved only by the scheduler."""
from __future__ import annotations

__all__ = ["SimClock"]


class SimClock:
    def __init__(self) -> None:
        self.now_ms = 0

    def monotonic_ms(self) -> int:
        return self.now_ms

    def wall_ms(self) -> int:
        return 1_700_000_000_000 + self.now_ms

    def advance_to(self, ms: int) -> None:
        if ms < self.now_ms:
            raise ValueError(f"the simulated clock does not go backwards ({ms} < {self.now_ms})")
        self.now_ms = ms
