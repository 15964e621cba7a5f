"""The procrastinate App, its tasks and the in-process worker runner.

Tasks are thin: they take the Runtime from the worker's context and call a flow.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import procrastinate

from service.config import Settings
from service.core.profile import ProfileView
from service.core.retries import RetryPolicy
from service.errors import LLMNotConfigured, LLMUnavailable
from service.flows import counters, extraction, profile
from service.flows.extraction import RunMode
from service.flows.profile import PROFILE_QUEUE, PROFILE_TASK
from service.flows.runtime import Runtime
from service.flows.turns import EXTRACT_TASK, EXTRACTION_QUEUE, QUIET_TASK
from service.jobs import consolidation as consolidation_jobs
from service.jobs import reembed as reembed_jobs
from service.jobs import supervision
from service.jobs.queue import app_of

log = logging.getLogger(__name__)

STALLED_CHECK_INTERVAL_S = 15.0
"""How often workers look for jobs left running by a dead worker."""
STALLED_AFTER_S = 30.0
"""A worker without a heartbeat for this long is dead (procrastinate's default is 30 s)."""


class _ExtractionRetry(procrastinate.BaseRetryStrategy):
    """procrastinate's side of `RetryPolicy`: an unreachable LLM is tried again with a
    doubling, capped wait until the outage is older than the policy's age; other errors a
    fixed number of times.
    """

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy

    def get_retry_decision(
        self, *, exception: BaseException, job: procrastinate.jobs.Job
    ) -> procrastinate.RetryDecision | None:
        outage = isinstance(exception, _OUTAGE)
        if not self.policy.tries_again(outage=outage, attempts=job.attempts):
            return None
        wait_ms = round(self.policy.wait_s(job.attempts) * 1000)
        return procrastinate.RetryDecision(retry_in={"milliseconds": wait_ms})


_OUTAGE = (LLMUnavailable, LLMNotConfigured)
"""Errors of an LLM that is away, not of the turn: retried for as long as the policy says."""


def retry_policy_of(settings: Settings) -> RetryPolicy:
    """The extraction jobs' retry schedule of the settings (service/core/retries.py)."""
    return RetryPolicy(
        base_s=settings.extraction_retry_base_s,
        max_wait_s=settings.extraction_retry_max_wait_s,
        give_up_after_s=settings.extraction_give_up_after_s,
        max_attempts=settings.extraction_max_attempts,
    )


def build_job_app(
    conninfo: str,
    *,
    retry_policy: RetryPolicy | None = None,
    pool_size: int = 4,
    pooled: bool = False,
) -> procrastinate.App:
    """A procrastinate App on `conninfo` (libpq URL) with the service's tasks registered.

    Args:
        retry_policy: when an extraction job is tried again and when its turn is marked
            failed (`retry_policy_of(settings)`; None: the defaults of `RetryPolicy`).
        pool_size: connections of the queue's pool (fixed size).
        pooled: `conninfo` goes through a pooler in transaction mode: no prepared statements
            (a later transaction may land on another server connection); workers then poll
            instead of LISTEN (`run_workers`).
    """
    connect_kwargs: dict[str, Any] = {"prepare_threshold": None} if pooled else {}
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(
            conninfo=conninfo, min_size=pool_size, max_size=pool_size, kwargs=connect_kwargs
        )
    )
    policy = retry_policy or RetryPolicy()
    retry = _ExtractionRetry(policy)

    async def extract(context: procrastinate.JobContext, turn_id: int, mode: RunMode) -> None:
        rt: Runtime = context.additional_context["runtime"]
        attempts = context.job.attempts if context.job else 0
        try:
            # a retry takes claimed turns too: the failed attempt may have left its claims
            outcome = await extraction.run_extraction(
                rt, turn_id=turn_id, mode=mode, ignore_claims=attempts > 0
            )
        except Exception as exc:
            if isinstance(exc, LLMUnavailable):  # shown by every replica's /v1/status
                counters.record_llm_failure(exc)
            if not policy.tries_again(outage=isinstance(exc, _OUTAGE), attempts=attempts):
                await extraction.mark_turn_failed(rt, turn_id=turn_id, error=str(exc))
            raise
        log.info(
            "turn %s (%s): %s, %s turns in %s batches, %s written",
            turn_id,
            mode.value,
            outcome.status,
            outcome.turns,
            outcome.batches,
            outcome.written,
        )
        if outcome.written:
            await profile.request_refresh(rt, user_id=outcome.user_id)

    @app.task(name=EXTRACT_TASK, queue=EXTRACTION_QUEUE, pass_context=True, retry=retry)
    async def extract_turn(
        context: procrastinate.JobContext, turn_id: int, due_only: bool = False
    ) -> None:
        # jobs queued before batching carry no due_only: they extract their turn now
        await extract(context, turn_id, RunMode.DUE if due_only else RunMode.FLUSH)

    @app.task(name=QUIET_TASK, queue=EXTRACTION_QUEUE, pass_context=True, retry=retry)
    async def extract_quiet_chat(context: procrastinate.JobContext, turn_id: int) -> None:
        await extract(context, turn_id, RunMode.QUIET)

    @app.task(
        name=PROFILE_TASK,
        queue=PROFILE_QUEUE,
        pass_context=True,
        retry=procrastinate.RetryStrategy(max_attempts=3, exponential_wait=4),
    )
    async def refresh_profile(context: procrastinate.JobContext, user_id: str, view: str) -> None:
        rt: Runtime = context.additional_context["runtime"]
        result = await profile.refresh_profile(rt, user_id=user_id, view=ProfileView(view))
        log.info("profile %s/%s: %s", user_id, view, result)

    del extract_turn, extract_quiet_chat, refresh_profile
    consolidation_jobs.register(app)
    reembed_jobs.register(app)
    return app


async def run_workers(rt: Runtime, *, concurrency: int) -> None:
    """Run the job workers until cancelled, with recovery of stalled jobs.

    Without a configured LLM, extraction jobs are left waiting in the queue.
    """
    if not rt.llm.configured:
        log.warning("no LLM configured (LLM_BASE_URL, LLM_MODEL): extraction jobs wait")
        return
    app = app_of(rt)
    recovery = asyncio.create_task(_recover_stalled_jobs(app), name="stalled-job-recovery")
    try:
        # restarted after a lost database connection (supervision.py)
        await supervision.keep_running(
            lambda: app.run_worker_async(
                queues=[
                    EXTRACTION_QUEUE,
                    PROFILE_QUEUE,
                    consolidation_jobs.QUEUE,
                    reembed_jobs.QUEUE,
                ],
                concurrency=concurrency,
                wait=True,
                install_signal_handlers=False,
                additional_context={"runtime": rt},
                fetch_job_polling_interval=1.0,
                # behind a pooler in transaction mode LISTEN is lost: poll only
                listen_notify=rt.settings.database_pooler != "transaction",
                shutdown_graceful_timeout=10.0,
                delete_jobs="successful",
            ),
            name="job worker",
        )
    finally:
        recovery.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await recovery


async def _recover_stalled_jobs(app: procrastinate.App) -> None:
    """Retry jobs whose worker died (kill -9, power loss) so no accepted turn is lost."""
    while True:
        try:
            stalled: Any = await app.job_manager.get_stalled_jobs(
                seconds_since_heartbeat=STALLED_AFTER_S
            )
            for job in stalled:
                log.warning("retrying stalled job %s (%s)", job.id, job.task_name)
                try:
                    await app.job_manager.retry_job(job)
                except procrastinate.exceptions.UniqueViolation:
                    # The turn was queued again at start-up: that job does the work.
                    await app.job_manager.finish_job_by_id_async(
                        job.id, status=procrastinate.jobs.Status.FAILED, delete_job=True
                    )
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("stalled-job recovery failed; trying again later")
        await asyncio.sleep(STALLED_CHECK_INTERVAL_S)
