"""pplxweb's server stopped and started again under an open page (static/live.js).

The test runs a server process of its own on a fixed port, kills or stops it with an answer
streaming into the page and starts it again on the same port: the page says at once that it
can't reach pplxweb, sends nothing however often Enter is pressed, keeps the typed text, and
once the server is back catches up (the answer goes on, or shows as it ended) and sends the
question exactly once when Enter is pressed. A server back on another build makes the page offer
a reload, which keeps the typed text. Stop pressed during the outage stops the answer once the
server is back.
"""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from playwright.async_api import expect

from search.models import Entry
from tests.e2e import test_redis_outage as redis_outage
from tests.e2e.conftest import control, free_port, seen, server_env, start_pplxweb, stop, worker_pid
from tests.e2e.test_journeys import PHONE
from tests.e2e.test_search_journey import linked_owner

pytestmark = pytest.mark.django_db(transaction=True)
DESKTOP = {"width": 1280, "height": 800}
SIZES = pytest.mark.parametrize("page", [DESKTOP, PHONE], indirect=True, ids=["desktop", "phone"])
CANT_REACH = "Can't reach pplxweb"
DURING = "asked during the outage"


class Server:
    """pplxweb's server on one port, to kill, stop and start again."""

    def __init__(self, fake: str, folder) -> None:
        self.fake, self.folder, self.port, self.proc, self.starts = fake, folder, free_port(), None, 0
        self.base = f"http://127.0.0.1:{self.port}"

    def start(self, **env: str) -> None:
        self.starts += 1
        log = self.folder / f"server-{self.starts}.log"
        env = {"PPLXWEB_PERPLEXITY_ANSWER_TIMEOUT": "60", **env}  # long answers, on a busy machine too
        self.proc, _ = start_pplxweb(server_env(self.fake, **env), log, port=self.port)

    def kill(self) -> None:
        """No shutdown: nothing saved at the end (the next process rejoins the run). granian's
        main process does not take its worker along when it is killed, so the worker goes too,
        after it (killed first, the worker would be replaced by a new one)."""
        worker = worker_pid(self.proc)
        self.proc.kill()
        os.kill(worker, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        """A shutdown: the running answers are saved as interrupted."""
        stop(self.proc)

    def logs(self) -> str:
        return "".join(path.read_text() for path in sorted(self.folder.glob("server-*.log")))


@pytest.fixture
def server(fake_perplexity, tmp_path):
    server = Server(fake_perplexity, tmp_path)
    server.start()
    yield server
    if server.proc.poll() is None:
        server.stop()
    control(fake_perplexity, ask={})
    assert "Traceback" not in server.logs(), server.logs()[-4000:]


def asks_of(fake: str, question: str) -> int:
    return sum(1 for r in seen(fake) if r["path"] == "/rest/sse/perplexity_ask" and question in r["body"])


def unexpected(errors: list[str]) -> list[str]:
    """Console errors other than the browser's own words for a server that is away (a socket or
    a request that could not connect) and htmx's for the same (it logs the socket's error event
    as it is: "[object Event]")."""
    expected = ("WebSocket connection to", "ERR_CONNECTION_REFUSED")
    return [e for e in errors if e != "[object Event]" and not any(words in e for words in expected)]


async def streaming(page, server: Server, fake: str, question: str, parts: int):
    """The owner signed in and `question` asked; its answer ("part0 part1 ...") is arriving and
    its upstream ids are saved (what a process started after a kill rejoins the run by; a kill
    before that save leaves the answer interrupted, search/live/liveness.py)."""
    await linked_owner()
    entry = await redis_outage.streaming(page, server.base, fake, question, parts)
    async with asyncio.timeout(20):  # a bound for a busy machine, not a figure
        while not await Entry.objects.filter(question=question).exclude(backend_uuid="").aexists():
            await asyncio.sleep(0.05)
    return entry


@SIZES
async def test_an_outage_is_said_out_loud_and_nothing_is_sent_unseen(page, server, fake_perplexity):
    entry = await streaming(page, server, fake_perplexity, "through a restart", parts=80)
    server.kill()
    notice = page.locator("#live-notice")
    await expect(notice).to_contain_text(CANT_REACH)
    await expect(notice).to_contain_text("Retrying")
    # typed and sent five times: nothing goes, the text stays, the box says why
    await page.fill("#id_q", DURING)
    for _ in range(5):
        await page.keyboard.press("Enter")
    said = page.locator("#search-error")
    await expect(said).to_contain_text("Not sent: pplxweb can't be reached")
    await expect(page.locator("#id_q")).to_have_value(DURING)
    await page.wait_for_timeout(1500)  # the page keeps retrying meanwhile

    server.start()
    await expect(notice).to_contain_text("Connected to pplxweb again", timeout=20000)
    await expect(notice).to_be_empty(timeout=10000)
    await expect(said).to_contain_text("pplxweb is back. Your question was not sent")
    # the answer went on (the new process rejoined the run) and is shown whole
    await expect(entry.locator(".status-completed")).to_be_visible(timeout=30000)
    await expect(entry.locator(".answer")).to_contain_text("part79")
    await expect(page.locator("#id_q")).to_have_value(DURING)
    assert asks_of(fake_perplexity, DURING) == 0
    assert not await Entry.objects.filter(question=DURING).aexists()

    control(fake_perplexity, ask={"answer": ["Sent once."], "pace": 0.01})
    await page.keyboard.press("Enter")
    second = page.locator("article.entry").nth(1)
    await expect(second.locator(".status-completed")).to_be_visible(timeout=15000)
    await expect(page.locator("#id_q")).to_have_value("")
    await page.wait_for_timeout(1000)  # anything queued would have gone by now
    assert await Entry.objects.filter(question=DURING).acount() == 1
    assert asks_of(fake_perplexity, DURING) == 1
    assert await page.locator("article.entry").count() == 2
    assert unexpected(page.console_errors) == [], page.console_errors


@SIZES
async def test_stop_pressed_during_an_outage_stops_the_answer_once_back(page, server, fake_perplexity):
    # 48 s of answer: Perplexity's side cannot finish it while the server is away (a slow start)
    entry = await streaming(page, server, fake_perplexity, "stopped while away", parts=600)
    server.kill()
    await expect(page.locator("#live-notice")).to_contain_text(CANT_REACH)
    await page.locator("#search-form button.stop-answer").click()  # the box's Stop
    await expect(page.locator("#search-error")).to_contain_text("stopped as soon as it is back")
    await expect(entry.locator(".entry-status button.stop")).to_contain_text("Stopping once pplxweb is back")

    server.start()
    await expect(entry.locator(".status-stopped")).to_be_visible(timeout=30000)
    saved = await Entry.objects.aget(question="stopped while away")
    assert saved.status == "stopped" and "part599" not in saved.answer
    await expect(page.locator("#search-form button.ask")).to_be_visible()
    assert unexpected(page.console_errors) == [], page.console_errors


@SIZES
async def test_a_server_back_on_another_build_offers_a_reload_that_keeps_the_text(
    page, server, fake_perplexity
):
    entry = await streaming(page, server, fake_perplexity, "across an upgrade", parts=80)
    server.stop()  # a shutdown: the answer is saved as interrupted
    await expect(page.locator("#live-notice")).to_contain_text(CANT_REACH)
    await page.fill("#id_q", DURING)
    server.start(PPLXWEB_BUILD="next-release")
    notice = page.locator("#live-notice")
    await expect(notice).to_contain_text("pplxweb was updated", timeout=20000)
    await page.keyboard.press("Enter")
    await expect(page.locator("#search-error")).to_contain_text("Reload the page first")
    assert await entry.locator(".elapsed").count() == 1  # no fragment of the new build applied

    await notice.get_by_role("button", name="Reload").click()
    await page.wait_for_function("() => window.__wsOpen === true")
    await expect(page.locator("#id_q")).to_have_value(DURING)  # kept across the reload
    await expect(page.locator("#live-notice")).to_be_empty()
    reloaded = page.locator("article.entry").first
    await expect(reloaded.locator(".status-interrupted")).to_be_visible()  # as it ended, whole
    await expect(reloaded.locator(".answer")).to_contain_text("part3")
    control(fake_perplexity, ask={"answer": ["After the upgrade."], "pace": 0.01})
    await page.keyboard.press("Enter")
    await expect(page.locator("article.entry").nth(1).locator(".status-completed")).to_be_visible(
        timeout=15000
    )
    assert await Entry.objects.filter(question=DURING).acount() == 1
    assert unexpected(page.console_errors) == [], page.console_errors
