r"""The LLM relevance judge at the inlet's real deadline, with a real model (retrieval.md e).

    python -m bench.judge_deadline --llm-url http://127.0.0.1:8090/v1 \
        --llm-model qwen2.5-coder-1.5b-instruct

One user with three memories, one of them in the judge's band (similarity 0.7–0.93) for the
message; the inlet's `recall` runs once with `MEMORY_LLM_RELEVANCE` off, then twice with it
on, each at `MEMORY_CONTEXT_DEADLINE_S` = 0.5 s (the default). Printed per turn: seconds, the
turn's status line, the injected memories and the judge cache's hits and misses. With an LLM
slower than the deadline, the turns with the judge on get the cached profile only (no
memory) and the cache never fills (misses grow, hits stay 0).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from datetime import timedelta

import numpy as np

from bench import retrieval_sets as rs
from bench.locomo_retrieval import Pool, insert_pool
from bench.rerank_llm import Recorder, recording_client

TEXTS = (
    "The user lives in the city of Porto",
    "User works as a nurse at the city hospital",
    "User has a greyhound named Pixel",
)
MESSAGE = "Where does the user live? In which city does the user live?"
#: The inlet's default deadline (service/config.py, MEMORY_CONTEXT_DEADLINE_S).
DEADLINE_S = 0.5


async def turns(url: str, model: str) -> list[str]:
    """One line per turn: judge on/off, seconds, status, memories, cache hits/misses."""
    from service.core.records import ChatContext, ChatKind
    from service.embeddings.encoder import Encoder
    from service.flows import context

    encoder = Encoder()
    pool = Pool(
        "judge-deadline",
        "facts",
        "judge-deadline-user",
        list(TEXTS),
        [frozenset({str(i)}) for i in range(len(TEXTS))],
        [rs.NOW - timedelta(days=1)] * len(TEXTS),
        rs.NOW,
    )
    pool.vectors = np.asarray(encoder.encode_sync(list(TEXTS)), dtype=np.float32)
    lines = []
    async with rs.service(encoder) as rt:
        await insert_pool(rt, pool)
        rt.llm = recording_client(url, model, Recorder())
        rt.settings.context_deadline_s = DEADLINE_S
        chat = ChatContext(user_id=pool.owner_id, kind=ChatKind.SAVED, chat_id="judge-deadline")
        for judge in (False, True, True):
            rt.settings.llm_relevance = judge
            started = time.perf_counter()
            result = await context.recall(
                rt, chat=chat, message=MESSAGE, budget_tokens=400, now=rs.NOW
            )
            cache = rt.relevance_cache
            lines.append(
                f"judge {'on ' if judge else 'off'} {time.perf_counter() - started:.2f} s "
                f"{result.status!r} memories={[m.memory.content for m in result.items]} "
                f"cache hits={cache.hits} misses={cache.misses}"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Print the three turns."""
    parser = argparse.ArgumentParser(prog="python -m bench.judge_deadline")
    parser.add_argument("--llm-url", required=True, help="OpenAI-compatible base URL (…/v1)")
    parser.add_argument("--llm-model", required=True)
    args = parser.parse_args(argv)
    for line in asyncio.run(turns(args.llm_url, args.llm_model)):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
