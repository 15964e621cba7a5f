"""When an extraction job is tried again, and when it gives up (DESIGN §5.1, issue 13).

An unreachable LLM is an outage, not a fault of the turn: the job keeps trying with a
doubling wait, capped, until the waits add up to a long age (a day by default), so a backlog
built during an outage drains by itself within one capped wait of the LLM's return. Other
errors are tried a fixed number of times. Counting by attempts (not by the clock) keeps the
decision the same however busy the machine or however long the service was stopped.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The schedule of one deployment (Settings → MEMORY_EXTRACTION_*)."""

    base_s: float = 4.0  #: wait after the first failure; doubles after each further one
    max_wait_s: float = 300.0  #: longest wait between two attempts
    give_up_after_s: float = 86_400.0  #: an outage older than this (sum of waits) gives up
    max_attempts: int = 5  #: attempts for errors other than an unreachable LLM

    def wait_s(self, attempts: int) -> float:
        """Seconds before the next try, after a failed run with `attempts` earlier ones:
        min(base · 2^attempts, max_wait).
        """
        if attempts >= 64:  # 2**64 · base is past any cap
            return self.max_wait_s
        return min(self.base_s * 2.0**attempts, self.max_wait_s)

    def waited_s(self, attempts: int) -> float:
        """Seconds of waits scheduled before a run that had `attempts` earlier ones."""
        total = 0.0
        for k in range(attempts):
            step = self.wait_s(k)
            if step >= self.max_wait_s:  # the rest are all capped: no need to loop a day
                return total + step * (attempts - k)
            total += step
        return total

    def tries_again(self, *, outage: bool, attempts: int) -> bool:
        """Whether a failed run (with `attempts` earlier ones) is tried again.

        Args:
            outage: the LLM was unreachable or answered with an error.
        """
        if outage:
            return self.waited_s(attempts) < self.give_up_after_s
        return attempts + 1 < self.max_attempts
