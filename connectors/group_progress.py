"""A streaming query's progress published as a consumer group (reader option ``groupId``).

Spark keeps a query's offsets in its checkpoint, and that stays the only source of truth:
a restarted query resumes from its checkpoint, never from the group.  The group is a
*copy* for the outside world: ``spark-log groups describe G`` (or any lag tool) shows how
far the query has read.  The query is not a member; it commits as a member-less group, so
the coordinator refuses its commits while consumers are members of ``G``
(``NonEmptyGroupError``: logged, the query goes on).

When: Spark calls the driver's ``latestOffset(start, ...)`` at every trigger, also when
the query is idle, and ``start`` is the end of the last *completed* micro-batch (or the
query's initial offsets before the first one).  So ``SparkLogStreamReader`` publishes
``start`` there, and ``end`` in ``commit(end)``: the last batch of a drained query is
published at the next trigger (with the default trigger, within Spark's 10 ms polling
delay), not only when a next batch is planned.  Offsets are committed only when they
changed; a failed commit (coordinator moving, broker down) is logged and tried again at
a later trigger (at most every ``retry_s``), never failing the query.

Pickles without its client (readers travel to executors).
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from spark_log.errors import SparkLogError

from . import client
from . import offsets as off

if TYPE_CHECKING:
    from spark_log import Admin, ClientSecurity

__all__ = ["GroupProgress", "METADATA"]

log = logging.getLogger(__name__)

METADATA = "spark-log streaming query"
"""The metadata string of every offset a query commits."""


class GroupProgress:
    """Commits a query's completed offsets to one group (module docstring)."""

    def __init__(self, group_id: str, bootstrap: str | None, *, security: ClientSecurity | None = None,
                 client_id: str = "", retry_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.group_id = group_id
        self._bootstrap = bootstrap
        self._security = security    # the reader's kafka.security.* / kafka.client.id options
        self._client_id = client_id
        self._retry_s = retry_s
        self._clock = clock
        self._admin: Admin | None = None
        self._published: off.Offsets = {}
        self._retry_at = 0.0
        self._last_error = ""

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_admin"] = None
        return state

    def _client(self) -> Admin:
        if self._admin is None:
            from spark_log import Admin  # a short request timeout: a commit never stalls a trigger for long

            self._admin = Admin(self._bootstrap, request_timeout_ms=5_000, security=self._security,
                                client_id=self._client_id)
        return self._admin

    def publish(self, offsets: off.Offsets) -> bool:
        """Commit ``offsets`` unless they are what was last committed; True when committed
        now.  Failures are logged (once per distinct message) and retried later."""
        if not offsets or offsets == self._published or self._clock() < self._retry_at:
            return False
        try:
            client.commit_group(self._client(), self.group_id, offsets, METADATA)
        except SparkLogError as exc:
            self._retry_at = self._clock() + self._retry_s
            if str(exc) != self._last_error:
                self._last_error = str(exc)
                log.warning("query progress not committed to group %r (the checkpoint is unaffected): %s",
                            self.group_id, exc)
            return False
        self._published = dict(offsets)
        self._last_error = ""
        return True

    def committed(self) -> off.Offsets:
        """The group's committed offsets (``startingOffsets=group``)."""
        return client.group_offsets(self._client(), self.group_id)

    def close(self) -> None:
        if self._admin is not None:
            admin, self._admin = self._admin, None
            admin.close()
