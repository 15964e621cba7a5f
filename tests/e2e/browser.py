"""Type messages into a real Open WebUI chat with headless Chromium and report the replies.

Runs with the Playwright venv (`.e2e/pw/bin/python tests/e2e/browser.py`), not the project's:
the tests start it as a subprocess. Reads one JSON object on stdin:

    {"base_url": "http://127.0.0.1:8080", "email": "...", "password": "...",
     "messages": [{"text": "/memory list", "expect_lines": ["..."]}, ...],
     "screenshot": "path.png" | null, "timeout_s": 60}

Messages must differ from each other. For each one it waits until the stored reply is done
(read over REST with the page's own token) and, if `expect_lines` is given, until the rendered
message shows every one of them. A message with `"click_action": "<function name>"` then has
that action's button under its reply clicked, and the reply is read again once it shows every
line of `action_expect_lines` (as `after_action`).
Prints one JSON object: {"chat_id", "replies": [{"id", "content", "rendered"}], "url"}.
The browser is Debian's Chromium; Playwright downloads nothing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

# run as a script by the Playwright environment's python: the repository is not on its path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from testkit.waiting import wait_until

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
TYPING_DELAY_MS = 20
POLL_INTERVAL_S = 0.2

# Resolves to the newest assistant message whose parent carries `text`, once it is done.
_REPLY_DONE_JS = """
async ([chatId, text]) => {
  const r = await fetch(`/api/v1/chats/${chatId}`,
                        {headers: {Authorization: `Bearer ${localStorage.token}`}});
  if (!r.ok) return null;
  const messages = (await r.json()).chat?.history?.messages ?? {};
  const replies = Object.values(messages).filter(m =>
      m.role === "assistant" && m.done && messages[m.parentId]?.content === text);
  replies.sort((x, y) => (x.timestamp ?? 0) - (y.timestamp ?? 0));
  const last = replies[replies.length - 1];
  return last ? {id: last.id, content: last.content} : null;
}
"""

_SHOWS_LINES_JS = """
([selector, lines]) => {
  const el = document.querySelector(selector);
  if (!el) return false;
  const shown = el.innerText.replace(/\\s+/g, " ");
  return lines.every(line => shown.includes(line));
}
"""


def _poll(read: Callable[[], Any], *, timeout_s: float) -> Any:
    """Call `read` until it returns something truthy; TimeoutError after `timeout_s`."""
    return wait_until(
        read, what="a finished reply", timeout_s=timeout_s, interval_s=POLL_INTERVAL_S
    )


def run(job: dict[str, Any]) -> dict[str, Any]:
    timeout_ms = int(job.get("timeout_s", 60) * 1000)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        try:
            # One fresh context: chat-input drafts persist within a context.
            page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
            page.set_default_timeout(timeout_ms)
            page.goto(f"{job['base_url']}/auth")
            page.fill("#email", job["email"])
            page.fill("#password", job["password"])
            page.click("button[type=submit]")
            page.wait_for_selector("#chat-input")
            replies = []
            chat_id = ""
            for message in job["messages"]:
                page.click("#chat-input")
                page.keyboard.type(message["text"], delay=TYPING_DELAY_MS)
                page.keyboard.press("Enter")
                page.wait_for_url("**/c/*")
                chat_id = page.url.rsplit("/c/", 1)[1].split("?")[0]
                reply = _poll(
                    partial(page.evaluate, _REPLY_DONE_JS, [chat_id, message["text"].strip()]),
                    timeout_s=job.get("timeout_s", 60),
                )
                selector = f"#message-{reply['id']}"
                page.wait_for_function(
                    _SHOWS_LINES_JS, polling=100, arg=[selector, message.get("expect_lines") or []]
                )
                reply["rendered"] = page.inner_text(selector)
                if message.get("click_action"):
                    # the action buttons under a reply are named by the function's name
                    button = f'{selector} button[aria-label="{message["click_action"]}"]'
                    page.hover(selector)
                    page.click(button)
                    page.wait_for_function(
                        _SHOWS_LINES_JS,
                        polling=100,
                        arg=[selector, message.get("action_expect_lines") or []],
                    )
                    reply["after_action"] = page.inner_text(selector)
                replies.append(reply)
            if job.get("screenshot"):
                page.screenshot(path=job["screenshot"])
            return {"chat_id": chat_id, "replies": replies, "url": page.url}
        finally:
            browser.close()


if __name__ == "__main__":
    print(json.dumps(run(json.load(sys.stdin))))
