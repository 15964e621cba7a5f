"""End to end with a real model: Open WebUI 0.12.4's built-in memory against this product.

    python -m bench.h2h_openwebui --data ../shared/data/locomo/locomo10.json \
        --model-url http://127.0.0.1:8091/v1 --ours-model-url http://127.0.0.1:8092/v1

(`make h2h`; not part of `make test` or `make bench`: it takes the better part of an hour on
2 CPU cores.) Issue 25 item 2.

The same LoCoMo sessions (default: conversation 5, held out, sessions 1–2, user = Audrey)
are replayed through a real Open WebUI 0.12.4 twice, each on a fresh data directory:

- **builtin**: Open WebUI's own memory with its background review on
  (`ENABLE_MEMORY_BACKGROUND_REVIEW=true`, `MEMORIES_REVIEW_INTERVAL_TURNS` = `--interval`,
  default 2) and every request sending `features.memory = true`, as the chat page does when
  the user has memory switched on. `open_webui/utils/memory.py`: after a saved-chat turn
  whose number of user messages is a multiple of the interval, the review asks the chat model
  (the same model) for add/replace/move/remove operations over the last 16 messages and the
  existing memories; before each model call `add_memory_context` injects every `user`-type
  memory, path neighbours and the top 8 of a vector search into the system message.
- **ours**: this product's filter installed by its installer (`python -m service openwebui
  install`, as `tests/e2e` does), the memory service on its own embedded PostgreSQL, its
  extraction model the same model; built-in memory off (no `features.memory`, review off).

Each user turn is the speaker's LoCoMo line, stamped with the session's date; the model
answers it (at most `REPLY_TOKENS` tokens: its reply is not what is measured), and the stored
reply is then replaced by the other speaker's real LoCoMo line, so that later turns, the
review's transcript and the filter's next inlet see the real conversation.

Then the questions of that conversation whose evidence lies in the replayed turns are asked
by the same user in new temporary chats (`chat_id` "local:…": nothing is learned from them in
either arm) in three arms: **none** (the builtin instance with `features.memory` false: no
memory at all), **builtin** and **ours**; each instance asks as soon as its own learning has
drained. `--max-turns N` cuts both replays after N user turns (and keeps only the questions
and facts of the replayed turns). The model's request is read at the relay
(`bench.h2h_relay`): injected text = the request's system-message text (no system prompt is
configured, so it is all memory), tokens by `service.core.tokens.estimate_tokens`;
`ttft_s` = the client's send → the model's first content token (the relay asks the model for
a stream), `pre_model_s` = the client's send → Open WebUI's request reaching the relay (the
memory lookup's share). The judge is the same model called directly with
`bench.eval_scoring.judge_messages`.

Memories are labelled by `bench.h2h_scoring.label_memories` (correct / grounded / wrong /
duplicate, against the observation facts and turns of the replayed sessions).

Resumable: every finished step is a line of `<state>/journal.jsonl`; data directories, the
service's state and the ports are kept under `<state>`, so a rerun continues where it
stopped. `--fresh` starts over. Results: `<out>/results.json`, `<out>/results.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.eval_scoring import judge_messages, parse_verdict
from bench.h2h_relay import ModelRelay, RelayedRequest
from bench.h2h_scoring import (
    Journal,
    label_memories,
    memory_counts,
    name_the_user,
    render_markdown,
    summarize_answers,
    turn_sentences,
)
from bench.locomo import (
    DEFAULT_DATA_PATH,
    REPO_ROOT,
    QAItem,
    build_replay_plan,
    conversation_turns,
    load_conversation,
    load_qa,
)
from service.core.tokens import estimate_tokens
from testkit.openwebui import (
    OPEN_WEBUI_BIN,
    ManagedProcess,
    OpenWebUIClient,
    Thread,
    free_port,
    system_text,
)
from testkit.openwebui_stack import (
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    OPEN_WEBUI_START_TIMEOUT_S,
    SERVICE_START_TIMEOUT_S,
    USER_PASSWORD,
    Stack,
    add_user,
    open_webui_env,
    service_env,
    sign_in,
)

#: most tokens of a replayed turn's reply (it is replaced by the LoCoMo line afterwards)
REPLY_TOKENS = 24
#: most tokens of an answer to a question (LoCoMo answers are a few words)
ANSWER_TOKENS = 48
#: the client's patience with one Open WebUI call (a slow model on 2 busy cores)
CALL_TIMEOUT_S = 900.0
DRAIN_TIMEOUT_S = 3600.0
REVIEW_MARK = "private memory reviewer"  #: in the system message of Open WebUI's review
ANSWER_SUFFIX = " Answer in a few words."
DEFAULT_OUT = REPO_ROOT / "bench" / "results" / "h2h_openwebui"
DEFAULT_STATE = REPO_ROOT / ".state" / "h2h"


def _progress(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def pick_questions(
    items: Sequence[QAItem],
    sessions: Sequence[int],
    limit: int,
    replayed: Collection[str] | None = None,
) -> list[QAItem]:
    """Questions whose evidence all lies in `sessions` (and, when given, in the `replayed`
    dia_ids: a replay cut by `--max-turns`), in dataset order, at most `limit`.
    """
    prefixes = tuple(f"D{n}:" for n in sessions)
    return [
        q
        for q in items
        if all(e.startswith(prefixes) for e in q.evidence)
        and (replayed is None or all(e in replayed for e in q.evidence))
    ][:limit]


# -- one instance of Open WebUI ------------------------------------------------------------------


@dataclass
class Instance:
    """A running Open WebUI (and, for `ours`, the memory service) of one arm."""

    arm: str
    relay: ModelRelay
    processes: list[ManagedProcess]
    admin: OpenWebUIClient
    user: OpenWebUIClient
    service: httpx.Client | None

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.relay.stop()
        self.admin.close()
        self.user.close()
        if self.service is not None:
            self.service.close()


def _ports(journal: Journal, arm: str) -> dict[str, Any]:
    """Ports and key of an arm, fixed at its first start: Open WebUI keeps the model URL
    and the filter's service URL in its database, so a resumed run must reuse them.
    """
    key = f"{arm}/ports"
    if not journal.done(key):
        journal.add(
            key,
            relay=free_port(),
            owui=free_port(),
            service=free_port(),
            service_key=secrets.token_urlsafe(24),
        )
    record = journal.get(key)
    assert record is not None
    return record


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def start_instance(
    arm: str,
    *,
    journal: Journal,
    state: Path,
    upstream: str,
    model: str,
    interval: int,
    embed: Callable[[Sequence[str]], list[list[float]]],
    speaker: str,
    open_webui: Path = OPEN_WEBUI_BIN,
) -> Instance:
    """Start (or restart on kept state) the arm's relay, service and Open WebUI."""
    ports = _ports(journal, arm)
    relay = ModelRelay(upstream, embed=embed, log_path=state / arm / "model-requests.jsonl")
    relay.start(port=int(ports["relay"]))
    base_url = f"http://127.0.0.1:{ports['owui']}"
    arm_dir = state / arm
    data_dir, work_dir = arm_dir / "owui-data", arm_dir / "owui-work"
    arm_dir.mkdir(parents=True, exist_ok=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    work_dir.mkdir(parents=True, exist_ok=True)
    processes: list[ManagedProcess] = []
    service_url = f"http://127.0.0.1:{ports['service']}"
    try:
        # a run stopped without its cleanup (killed) leaves its servers up: adopt them
        adopted = _answers(f"{base_url}/health") and (
            arm != "ours" or _answers(f"{service_url}/readyz")
        )
        if adopted:
            _progress(f"{arm}: reusing the Open WebUI already serving {base_url}")
        if arm == "ours" and not adopted:
            env = service_env(
                arm_dir / "service-state", int(ports["service"]), ports["service_key"], upstream
            )
            # batching as shipped (5 messages, or 300 s of quiet): what an admin gets
            env.update(
                {
                    "LLM_MODEL": model,
                    "LLM_TIMEOUT_S": "905",
                    "LLM_JSON_MODE": "true",
                    "MEMORY_CONTEXT_DEADLINE_S": "10",
                }
            )
            processes.append(
                ManagedProcess.start(
                    "memory service",
                    [sys.executable, "-m", "service", "serve"],
                    env=env,
                    cwd=REPO_ROOT,
                    log_path=arm_dir / "service.log",
                )
            )
        env = open_webui_env(data_dir, relay.base_url)
        env.update(
            {
                "DEFAULT_MODELS": model,
                "RAG_EMBEDDING_MODEL": "sentence-transformers/all-MiniLM-L6-v2",
                "ENABLE_MEMORY_BACKGROUND_REVIEW": "true" if arm == "builtin" else "false",
                "MEMORIES_REVIEW_INTERVAL_TURNS": str(interval),
                "AIOHTTP_CLIENT_TIMEOUT": str(int(CALL_TIMEOUT_S)),
            }
        )
        if not adopted:
            processes.append(
                ManagedProcess.start(
                    "open-webui",
                    [str(open_webui), "serve", "--host", "127.0.0.1", "--port", str(ports["owui"])],
                    env=env,
                    cwd=work_dir,
                    log_path=arm_dir / "open-webui.log",
                )
            )
            if arm == "ours":
                processes[0].wait_http(f"{service_url}/readyz", timeout_s=SERVICE_START_TIMEOUT_S)
            processes[-1].wait_http(f"{base_url}/health", timeout_s=OPEN_WEBUI_START_TIMEOUT_S)
        admin_account = sign_in(base_url, ADMIN_EMAIL, ADMIN_PASSWORD)
        admin = OpenWebUIClient(base_url, admin_account)
        admin.http.timeout = httpx.Timeout(CALL_TIMEOUT_S)
        email = f"{speaker.lower()}@example.com"
        setup_key = f"{arm}/setup"
        if not journal.done(setup_key):
            account = add_user(admin, speaker, email)
            admin.call("GET", "/api/models", params={"refresh": "true"})
            admin.call(
                "POST",
                "/api/v1/models/create",
                json={
                    "id": model,
                    "base_model_id": None,
                    "name": model,
                    "meta": {},
                    "params": {},
                    "is_active": True,
                    "access_grants": [
                        {"principal_type": "user", "principal_id": "*", "permission": "read"}
                    ],
                },
            )
            installer = ""
            if arm == "ours":
                # the installer helpers of the e2e stack; no stub models here
                stack = Stack(
                    base_url,
                    admin_account,
                    {},
                    service_url,
                    ports["service_key"],
                    httpx.Client(),
                    None,  # type: ignore[arg-type]
                    None,  # type: ignore[arg-type]
                    installer_output="",
                )
                stack.clients["admin"] = admin
                done = stack.run_installer()
                if done.returncode != 0:
                    raise RuntimeError(f"the installer failed:\n{done.stdout}\n{done.stderr}")
                stack.be_patient_with_the_service()
                installer = done.stdout
            journal.add(setup_key, user_id=account.id, installer=installer[-2000:])
        user_account = sign_in(base_url, email, USER_PASSWORD)
        user = OpenWebUIClient(base_url, user_account)
        user.http.timeout = httpx.Timeout(CALL_TIMEOUT_S)
        service: httpx.Client | None = None
        if arm == "ours":
            service = httpx.Client(
                base_url=service_url,
                timeout=60,
                trust_env=False,
                headers={"Authorization": f"Bearer {ports['service_key']}"},
            )
        return Instance(arm, relay, processes, admin, user, service)
    except BaseException:
        for process in reversed(processes):
            process.stop()
        relay.stop()
        raise


# -- replay ---------------------------------------------------------------------------------------


def _chat_extra(memory: bool, max_tokens: int) -> dict[str, Any]:
    return {
        "features": {"memory": memory},
        "params": {"max_tokens": max_tokens, "temperature": 0},
    }


def _replace_reply(client: OpenWebUIClient, chat_id: str, message_id: str, text: str) -> None:
    """Store `text` as the assistant message `message_id` of the chat (the LoCoMo reply)."""
    chat = client.read_chat(chat_id)["chat"]
    chat["history"]["messages"][message_id]["content"] = text
    for message in chat.get("messages") or []:
        if message.get("id") == message_id:
            message["content"] = text
    client.call("POST", f"/api/v1/chats/{chat_id}", json={"chat": chat})


def _wait_review(relay: ModelRelay, mark: int, *, appear_s: float = 60.0) -> bool:
    """Wait for the built-in review this turn started to answer; False when none came.

    A turn is journaled only after its review, so a resumed run never loses one.
    """
    started = time.monotonic()
    while True:
        reviews = [r for r in relay.since(mark) if REVIEW_MARK in system_text(r.body)]
        if reviews and all(r.finished is not None for r in reviews):
            return True
        if not reviews and time.monotonic() - started > appear_s:
            return False
        time.sleep(0.5)


def replay(
    instance: Instance, plan: Any, sessions: Sequence[int], journal: Journal, interval: int
) -> None:
    """Send every user turn of `sessions` not yet in the journal (one saved chat a session)."""
    arm, client = instance.arm, instance.user
    for session in plan.sessions:
        if session.session not in sessions:
            continue
        session_key = f"{arm}/session/{session.session}"
        if not journal.done(session_key):
            journal.add(
                session_key, chat_id=client.new_thread(f"session {session.session}").chat_id
            )
        record = journal.get(session_key)
        assert record is not None
        thread = Thread(chat_id=record["chat_id"])
        for index, group in enumerate(session.groups):
            key = f"{arm}/turn/{group.key}"
            done = journal.get(key)
            if done is not None:  # rebuild the client's history from the journal
                thread.messages += [
                    {"role": "user", "content": group.user_text},
                    {"role": "assistant", "content": done["stored_reply"]},
                ]
                thread.parent_id = done["assistant_id"]
                continue
            started = time.monotonic()
            mark = instance.relay.mark()
            turn = client.send(
                thread,
                group.user_text,
                model=plan.model,
                extra=_chat_extra(arm == "builtin", REPLY_TOKENS),
                timestamp=int(session.date.timestamp()) + 60 * index,
            )
            assert thread.parent_id is not None
            stored_reply = group.reply_text or turn.reply
            if group.reply_text:
                _replace_reply(client, thread.chat_id, thread.parent_id, group.reply_text)
                thread.messages[-1]["content"] = group.reply_text
            reviewed = None
            if arm == "builtin" and (index + 1) % interval == 0:
                reviewed = _wait_review(instance.relay, mark)
            journal.add(
                key,
                seconds=round(time.monotonic() - started, 2),
                model_reply=turn.reply,
                stored_reply=stored_reply,
                assistant_id=thread.parent_id,
                reviewed=reviewed,
            )
            _progress(f"{arm}: turn {group.key} in {time.monotonic() - started:.1f} s")


def _relay_idle(relay: ModelRelay, quiet_s: float) -> bool:
    requests = relay.since(0)
    if any(r.finished is None for r in requests):
        return False
    last = max((r.finished or 0.0 for r in requests), default=0.0)
    return time.time() - last >= quiet_s


def drain(instance: Instance) -> None:
    """Wait until the arm's learning has finished: the built-in review's last call has
    answered (nothing in flight at the relay for 20 s), or the service's queue is empty.
    """
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while time.monotonic() < deadline:
        if instance.service is not None:
            status = instance.service.get("/v1/status").json()
            if int(status.get("turns_queued", 0)) == 0 and _relay_idle(instance.relay, 5):
                return
        elif _relay_idle(instance.relay, 20):
            return
        time.sleep(2)
    raise TimeoutError(f"{instance.arm}: learning did not finish in {DRAIN_TIMEOUT_S:.0f} s")


def stored_memories(instance: Instance, user_id: str) -> list[dict[str, Any]]:
    """The user's memories, oldest first: Open WebUI's table, or the service's API."""
    if instance.service is None:
        rows = instance.user.call("GET", "/api/v1/memories/") or []
        rows = sorted(rows, key=lambda m: (m.get("created_at") or 0, m.get("id", "")))
        return [
            {"content": m.get("content", ""), "type": m.get("type"), "path": m.get("path")}
            for m in rows
        ]
    items: list[dict[str, Any]] = []
    page = instance.service.get(f"/v1/users/{user_id}/memories", params={"limit": 200}).json()
    for m in page["items"]:
        items.append(
            {"content": m["content"], "bank": m.get("bank"), "created_at": m.get("created_at")}
        )
    return sorted(items, key=lambda m: str(m.get("created_at") or ""))


# -- questions ------------------------------------------------------------------------------------


def _question_request(relay: ModelRelay, mark: int) -> RelayedRequest | None:
    for request in relay.since(mark):
        if REVIEW_MARK not in system_text(request.body):
            return request
    return None


def ask(instance: Instance, arm: str, question: QAItem, model: str, journal: Journal) -> None:
    key = f"{arm}/answer/{question.index}"
    if journal.done(key):
        return
    text = question.question + ANSWER_SUFFIX
    mark = instance.relay.mark()
    body = {
        "model": model,
        "stream": False,
        "chat_id": f"local:{uuid.uuid4()}",
        "id": str(uuid.uuid4()),
        "messages": [{"role": "user", "content": text}],
        "user_message": {
            "id": str(uuid.uuid4()),
            "role": "user",
            "content": text,
            "parentId": None,
            "models": [model],
        },
        **_chat_extra(arm == "builtin", ANSWER_TOKENS),
    }
    sent = time.time()
    answer = instance.user.call("POST", "/api/chat/completions", json=body)
    ended = time.time()
    request = _question_request(instance.relay, mark)
    injected = system_text(request.body) if request else ""
    reply = ""
    if isinstance(answer, dict) and answer.get("choices"):
        reply = str(answer["choices"][0]["message"].get("content") or "")
    first = request.first_token if request else None
    journal.add(
        key,
        arm=arm,
        question=question.index,
        text=question.question,
        gold=question.answer,
        category=question.category,
        reply=reply,
        injected=injected,
        injected_chars=len(injected),
        injected_tokens=estimate_tokens(injected) if injected else 0,
        pre_model_s=round(request.received - sent, 3) if request else None,
        ttft_s=round(first - sent, 3) if first else None,
        total_s=round(ended - sent, 3),
    )
    _progress(f"{arm}: q{question.index} answered in {ended - sent:.1f} s: {reply[:60]!r}")


def judge(model_url: str, model: str, journal: Journal) -> None:
    """Grade every answer not graded yet with the same model, called directly."""
    with httpx.Client(timeout=CALL_TIMEOUT_S, trust_env=False) as http:
        for record in [r for k, r in journal.records.items() if "/answer/" in k]:
            key = record["key"].replace("/answer/", "/judge/")
            if journal.done(key):
                continue
            response = http.post(
                f"{model_url.rstrip('/')}/chat/completions",
                json={
                    "model": model,
                    "messages": judge_messages(record["text"], record["gold"], record["reply"]),
                    "max_tokens": 16,
                    "temperature": 0,
                },
            )
            response.raise_for_status()
            verdict_text = response.json()["choices"][0]["message"]["content"] or ""
            journal.add(key, verdict_text=verdict_text, correct=parse_verdict(verdict_text))
            _progress(f"judged {record['key']}: {verdict_text!r}")


# -- the whole run --------------------------------------------------------------------------------


def _encoder_embed() -> tuple[Callable[[Sequence[str]], list[list[float]]], Any]:
    from service.embeddings.encoder import Encoder

    encoder = Encoder()
    lock = threading.Lock()

    def embed(texts: Sequence[str]) -> list[list[float]]:
        with lock:
            return [[float(x) for x in row] for row in encoder.encode_sync(list(texts))]

    return embed, encoder


def build_results(
    args: argparse.Namespace,
    journal: Journal,
    plan: Any,
    questions: Sequence[QAItem],
    embed: Callable[[Sequence[str]], list[list[float]]],
    command: str,
    replayed: Collection[str],
) -> dict[str, Any]:
    """The run's figures from the journal; facts and turns are those of the `replayed`
    dia_ids (a fact counts when one of the turns it cites was replayed).
    """
    sample = load_conversation(args.data, args.conversation)
    both = list(plan.facts) + list(build_replay_plan(sample, plan.other).facts)
    all_facts = [f.text for f in both if any(d in replayed for d in f.dia_ids)]
    turns = turn_sentences(t.text for t in conversation_turns(sample) if t.dia_id in replayed)
    fact_vectors = np.array(embed(all_facts)) if all_facts else np.zeros((0, 384))
    turn_vectors = np.array(embed(turns)) if turns else np.zeros((0, 384))
    memories: dict[str, Any] = {}
    listing: dict[str, Any] = {}
    for arm in ("builtin", "ours"):
        record = journal.get(f"{arm}/memories")
        if record is None:
            continue
        texts = [name_the_user(m["content"], plan.speaker) for m in record["memories"]]
        vectors = np.array(embed(texts)) if texts else np.zeros((0, 384))
        labels = label_memories(vectors, fact_vectors, turn_vectors)
        memories[arm] = memory_counts(labels, len(all_facts))
        listing[arm] = [
            {
                **m,
                **label,
                "fact_text": all_facts[label["fact"]] if label["fact"] is not None else None,
            }
            for m, label in zip(record["memories"], labels, strict=True)
        ]
    answers = []
    for key, record in journal.records.items():
        if "/answer/" not in key:
            continue
        verdict = journal.get(key.replace("/answer/", "/judge/"))
        answers.append({**record, "correct": verdict["correct"] if verdict else None})
    turn_seconds = {
        arm: [r["seconds"] for r in journal.with_prefix(f"{arm}/turn/")]
        for arm in ("builtin", "ours")
    }
    user_turns = sum(len(s.groups) for s in args.replay_plan.sessions if s.session in args.sessions)
    return {
        "benchmark": "h2h_openwebui",
        "command": command,
        "model": args.model,
        "open_webui": "0.12.4",
        "conversation": plan.conversation_id,
        "sessions": ",".join(str(s) for s in args.sessions),
        "speaker": plan.speaker,
        "turns": user_turns,
        "turns_sent": {arm: len(v) for arm, v in turn_seconds.items()},
        "turn_seconds_mean": {
            arm: round(sum(v) / len(v), 1) if v else None for arm, v in turn_seconds.items()
        },
        "questions": len(questions),
        "review_interval": args.interval,
        "judge": f"{args.model}, bench.eval_scoring.judge_messages, called directly",
        "memories": memories,
        "memory_listing": listing,
        "answers": summarize_answers(answers),
        "answer_rows": [
            {
                k: a.get(k)
                for k in (
                    "arm",
                    "question",
                    "text",
                    "gold",
                    "reply",
                    "correct",
                    "injected_chars",
                    "injected_tokens",
                    "ttft_s",
                    "pre_model_s",
                )
            }
            for a in answers
        ],
        "notes": [
            "Memory labels: bench.h2h_scoring (correct = cosine >= 0.75 to an observation fact "
            "citing a replayed turn, either speaker, with 'User' read as the speaker's name; "
            "grounded = >= 0.75 to a sentence of a replayed turn but no fact; wrong = neither; "
            "duplicate = same fact as an earlier memory or cosine >= 0.90 to one).",
            "Questions are asked in new temporary chats; the built-in and no-memory arms as "
            "soon as the built-in replay had drained, ours once our service had (the two arms "
            "used two llama.cpp servers of the same model: --model-url, --ours-model-url).",
            "The judge is the same 1.5B model: weak; the raw rows are in results.json.",
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_PATH)
    parser.add_argument("--conversation", type=int, default=5)
    parser.add_argument("--sessions", default="1,2", help="comma-separated session numbers")
    parser.add_argument("--speaker", default="Audrey", help="the LoCoMo speaker who is the user")
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--interval", type=int, default=2, help="MEMORIES_REVIEW_INTERVAL_TURNS")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--model-url", default="http://127.0.0.1:8091/v1")
    parser.add_argument(
        "--ours-model-url", default=None, help="a second server for the ours arm's replay"
    )
    parser.add_argument("--max-turns", type=int, default=None, help="stop each replay after N")
    parser.add_argument("--state", type=Path, default=DEFAULT_STATE)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--open-webui",
        type=Path,
        default=Path(os.environ["OWUI_VENV"]) / "bin" / "open-webui"
        if os.environ.get("OWUI_VENV")
        else OPEN_WEBUI_BIN,
        help="the open-webui 0.12.4 executable (default: $OWUI_VENV/bin, else .e2e/owui/bin)",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite the results from the journal only"
    )
    parser.add_argument("--fresh", action="store_true", help="forget an earlier run's state")
    args = parser.parse_args(argv)
    args.sessions = [int(s) for s in str(args.sessions).split(",") if s.strip()]
    # the command of the run itself: a report rebuilt from its journal says how it was run
    ran = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--report-only"]
    command = "python -m bench.h2h_openwebui " + shlex.join(ran)
    if args.fresh and args.state.exists():
        shutil.rmtree(args.state)
    args.state.mkdir(parents=True, exist_ok=True)
    journal = Journal(args.state / "journal.jsonl")
    sample = load_conversation(args.data, args.conversation)
    plan = build_replay_plan(sample, args.speaker)
    replay_plan = _Plan(plan, args.model, args.max_turns)
    replayed = {
        dia_id
        for session in replay_plan.sessions
        if session.session in args.sessions
        for group in session.groups
        for dia_id in group.dia_ids
    }
    questions = pick_questions(
        load_qa(sample),
        args.sessions,
        args.questions,
        replayed if args.max_turns is not None else None,
    )
    _progress(f"{len(questions)} questions; loading the encoder")
    embed, encoder = _encoder_embed()
    instances: dict[str, Instance] = {}
    try:
        if not args.report_only:
            run(args, journal, replay_plan, questions, embed, instances)
        args.replay_plan = replay_plan
        results = build_results(args, journal, plan, questions, embed, command, replayed)
    finally:
        for instance in instances.values():
            instance.stop()
        encoder.close()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    (args.out / "results.md").write_text(render_markdown(results))
    _progress(f"results in {args.out}")
    return 0


def run(
    args: argparse.Namespace,
    journal: Journal,
    plan: Any,
    questions: Sequence[QAItem],
    embed: Callable[[Sequence[str]], list[list[float]]],
    instances: dict[str, Instance],
) -> None:
    """Start both arms, replay them side by side, then ask and judge (steps not yet done)."""
    urls = {"builtin": args.model_url, "ours": args.ours_model_url or args.model_url}
    for arm in ("builtin", "ours"):
        _progress(f"{arm}: starting Open WebUI")
        instances[arm] = start_instance(
            arm,
            journal=journal,
            state=args.state,
            upstream=urls[arm],
            model=args.model,
            interval=args.interval,
            embed=embed,
            speaker=args.speaker,
            open_webui=args.open_webui,
        )
    errors: list[BaseException] = []

    def run_arm(arm: str) -> None:
        try:
            replay(instances[arm], plan, args.sessions, journal, args.interval)
            sent = len(journal.with_prefix(f"{arm}/turn/"))
            memories = journal.get(f"{arm}/memories")
            if memories is None or memories.get("turns") != sent:
                drain(instances[arm])
                setup = journal.get(f"{arm}/setup")
                assert setup is not None
                journal.add(
                    f"{arm}/memories",
                    memories=stored_memories(instances[arm], setup["user_id"]),
                    turns=sent,
                )
                _progress(f"{arm}: replay done and drained")
            # each instance asks as soon as its own learning is done ("none" is the builtin
            # instance with memory off for the request)
            for asked in ("none", "builtin") if arm == "builtin" else ("ours",):
                for question in questions:
                    ask(instances[arm], asked, question, args.model, journal)
        except BaseException as exc:  # reported after both threads end
            errors.append(exc)

    threads = [threading.Thread(target=run_arm, args=(arm,)) for arm in instances]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    judge(args.model_url, args.model, journal)


class _Plan:
    """The replay plan with the model id and an optional cap on each arm's turns."""

    def __init__(self, plan: Any, model: str, max_turns: int | None) -> None:
        self.model = model
        self.sessions = plan.sessions
        if max_turns is not None:
            kept, left = [], max_turns
            for session in plan.sessions:
                groups = session.groups[: max(left, 0)]
                left -= len(groups)
                if groups:
                    kept.append(_Session(session, groups))
            self.sessions = tuple(kept)


class _Session:
    def __init__(self, session: Any, groups: Any) -> None:
        self.session, self.date, self.groups = session.session, session.date, groups


if __name__ == "__main__":
    raise SystemExit(main())
