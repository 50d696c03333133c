// pplxweb: the little JavaScript the pages use. Everything works without it.
"use strict";

const box = () => document.getElementById("id_q");
const isTyping = (el) =>
  el instanceof HTMLInputElement || el instanceof HTMLTextAreaElement || el instanceof HTMLSelectElement || el.isContentEditable;

// --- keyboard ----------------------------------------------------------------------------------

document.addEventListener("keydown", (event) => {
  // "/" focuses the search box from anywhere, unless the person is typing somewhere.
  if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey || isTyping(event.target)) return;
  if (box()) { event.preventDefault(); box().focus(); }
});

document.addEventListener("keydown", (event) => {
  // Enter asks, Shift+Enter makes a new line; arrows move through the suggestions.
  const q = event.target;
  if (!(q instanceof HTMLTextAreaElement) || q.id !== "id_q") return;
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    q.form.requestSubmit();
  } else if (event.key === "ArrowDown" && !q.value.slice(q.selectionEnd).includes("\n")) {
    const first = document.querySelector("#suggestions a");
    if (first) { event.preventDefault(); first.focus(); }
  }
});

// Edit question: Enter asks again (Shift+Enter makes a new line), Esc puts the question back.
document.addEventListener("keydown", (event) => {
  const edit = event.target.closest && event.target.closest("form.edit-question");
  if (!edit || event.isComposing) return;
  if (event.key === "Enter" && !event.shiftKey && event.target instanceof HTMLTextAreaElement) {
    event.preventDefault();
    edit.requestSubmit();
  } else if (event.key === "Escape") {
    event.preventDefault();
    edit.querySelector(".edit-buttons a")?.click();
  }
});

document.addEventListener("keydown", (event) => {
  const link = event.target.closest && event.target.closest("#suggestions a");
  if (!link || (event.key !== "ArrowDown" && event.key !== "ArrowUp")) return;
  event.preventDefault();
  const links = [...document.querySelectorAll("#suggestions a")];
  const next = links.indexOf(link) + (event.key === "ArrowDown" ? 1 : -1);
  (next < 0 ? box() : links[Math.min(next, links.length - 1)]).focus();
});

// Past questions are looked up only for text a lookup takes (a long paste would make an address
// longer than the server reads, and a request that fails), and not for the question just asked:
// "You asked this before" goes when it is asked, and a lookup that set out before that is dropped.
let asked = { text: null, at: 0 };
document.addEventListener("htmx:beforeRequest", (event) => {
  const q = event.detail.elt;
  if (q.id !== "id_q" || !q.dataset.suggestMax) return;
  event.detail.xhr.startedAt = Date.now();
  if (q.value.length <= Number(q.dataset.suggestMax) && q.value !== asked.text) return;
  event.preventDefault();
  document.getElementById("suggestions")?.replaceChildren();
});
document.addEventListener("submit", (event) => {
  if (event.target.id !== "search-form") return;
  asked = { text: event.target.elements.q.value, at: Date.now() };
  document.getElementById("suggestions")?.replaceChildren();
}, true);
document.addEventListener("htmx:beforeSwap", (event) => {
  if (event.detail.target?.id === "suggestions" && !(event.detail.xhr.startedAt > asked.at)) {
    event.detail.shouldSwap = false;
  }
});

// a chip and its card: one source's link, or the group of sources cited together
const citeOf = (element) => element && element.closest && (element.closest(".cite-group") || element.closest("a.cite"));

// Esc closes what is open, one thing at a time: a source card, the suggestions, a More menu,
// Options; only when nothing is open does it stop the running answer.
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || event.defaultPrevented) return;
  const cite = citeOf(document.activeElement);
  if (cite && !cite.classList.contains("closed")) {
    if (cite.classList.contains("cite-group")) cite.querySelector("a.cite").focus();  // out of the card it hides
    cite.classList.add("closed");
    cite.classList.remove("open");
    return;
  }
  const suggestions = document.getElementById("suggestions");
  if (suggestions && suggestions.querySelector("a")) {
    suggestions.replaceChildren();
    if (box()) box().focus();
    return;
  }
  const more = document.querySelector("details.more[open]");
  if (more) { more.open = false; more.querySelector("summary").focus(); return; }
  const options = document.querySelector("#search-form details.options[open]");
  if (options) { options.open = false; options.querySelector("summary").focus(); return; }
  const stop = [...document.querySelectorAll("article.entry button.stop")].pop();
  if (stop) stop.click();
});

// --- source cards --------------------------------------------------------------------------------

const placeCard = (event) => {
  const cite = citeOf(event.target);
  if (!cite) return;
  cite.classList.remove("closed");
  const card = cite.querySelector(".cite-card");
  if (!card) return;
  // under its chip, moved left as far as it must to stay on the screen (8 px from each edge)
  card.style.left = "";
  const rect = card.getBoundingClientRect();
  const room = document.documentElement.clientWidth - 8;
  if (rect.right > room) card.style.left = `${Math.max(room - rect.right, 8 - rect.left)}px`;
};
document.addEventListener("mouseover", placeCard);
document.addEventListener("focusin", placeCard);
// On a touch screen the first tap on sources cited together opens their card (a link for each);
// a second tap on the chip opens the first source, a tap elsewhere closes the card. A source opened
// by a click (in a new tab) closes its card, which stays closed until the chip is pointed at again.
document.addEventListener("click", (event) => {
  const group = event.target.closest && event.target.closest(".cite-group");
  document.querySelectorAll(".cite-group.open").forEach((open) => open !== group && open.classList.remove("open"));
  if (!group) return;
  if (event.target.closest("a.cite") && !group.classList.contains("open") && matchMedia("(hover: none)").matches) {
    event.preventDefault();
    group.classList.add("open");
    placeCard(event);
  } else if (event.detail > 0) {
    group.classList.remove("open");
    group.classList.add("closed");
  }
});

// --- the question box --------------------------------------------------------------------------

const counter = () => {
  // Over the limit the box says so (the server refuses it with the same sentence): never cut.
  const q = box();
  const out = document.getElementById("q-counter");
  if (!q || !out || !q.dataset.max) return;
  const max = Number(q.dataset.max);
  const near = q.value.length > max * 0.9;
  out.hidden = !near;
  out.classList.toggle("over", q.value.length > max);
  if (near) {
    out.textContent = q.value.length > max
      ? `${q.value.length.toLocaleString()} characters: a question can be at most ${max.toLocaleString()}.`
      : `${q.value.length.toLocaleString()} of ${max.toLocaleString()} characters`;
  }
};
document.addEventListener("input", (event) => { if (event.target.id === "id_q") counter(); });

// Elapsed time of running answers.
setInterval(() => {
  for (const el of document.querySelectorAll(".elapsed[data-started]")) {
    const seconds = (Date.now() - Number(el.dataset.started)) / 1000;
    el.textContent = `${Math.max(0, seconds).toFixed(1)} s`;
  }
}, 100);

document.addEventListener("htmx:wsOpen", () => {
  const live = document.getElementById("live");
  const form = document.getElementById("search-form");
  if (live && live.dataset.autoask && form && form.elements.q.value.trim()) {
    delete live.dataset.autoask;
    form.requestSubmit();
  }
});

// --- numbered updates --------------------------------------------------------------------------
// Each update of a running answer opens with <!--pplxweb:seq ENTRY N-->, a whole state with
// "full" after N, the entry as saved with "saved" (search/display.py `mark`). The page takes
// update N only right after N-1: one lost on its way, or an entry the page has from the
// database, makes it ask for the whole state instead (`catch_up`), at most every 2 s an entry.
const MARK = /^<!--pplxweb:seq (\d+) (\d+)(?: (full|saved))?-->/;
const shown = new Map(); // entry id -> the number of the update the page shows
const askedWhole = new Map(); // entry id -> when the page last asked for the whole state
const heard = new Map(); // entry id -> when the page last heard of it
document.addEventListener("htmx:wsBeforeMessage", (event) => {
  const found = MARK.exec(event.detail.message || "");
  if (!found) return;
  const [, entry, number, kind] = found;
  const seq = Number(number);
  heard.set(entry, Date.now());
  if (kind === "saved") { shown.delete(entry); return; }
  const last = shown.get(entry);
  if (kind === "full") {
    if (last !== undefined && seq < last) event.preventDefault(); // older than what the page shows
    else shown.set(entry, seq);
    return;
  }
  if (last !== undefined && seq === last + 1) { shown.set(entry, seq); return; }
  event.preventDefault(); // a repeat, or a gap: the update does not apply to what the page shows
  if (last !== undefined && seq <= last) return;
  if (Date.now() - (askedWhole.get(entry) || 0) < 2000) return;
  askedWhole.set(entry, Date.now());
  event.detail.socketWrapper.send(JSON.stringify({ action: "catch_up", entries: [Number(entry)] }));
});

// Answers the page shows running may have ended while no socket was open (an outage, a restart,
// a computer asleep): each time the search socket opens it names them, and the server sends
// those that ended whole.
const runningEntries = () => [...document.querySelectorAll(".entry-status .elapsed")]
  .map((elapsed) => /^entry-(\d+)-status$/.exec(elapsed.closest(".entry-status").id))
  .filter(Boolean).map((found) => Number(found[1]));
document.addEventListener("htmx:wsOpen", (event) => {
  if (event.target.id !== "live") return;
  const running = runningEntries();
  if (running.length) {
    event.detail.socketWrapper.send(JSON.stringify({ action: "recheck", entries: running }));
  }
});

// An answer shown running that the page has not heard of for a while (its last update lost on
// its way, say) is asked about: if it ended, the server sends it whole.
const QUIET_MS = 15000;
const pageOpened = Date.now();
let liveSocket = null; // the search socket while it is open (htmx's socket wrapper)
document.addEventListener("htmx:wsOpen", (event) => { if (event.target.id === "live") liveSocket = event.detail.socketWrapper; });
document.addEventListener("htmx:wsClose", (event) => { if (event.target.id === "live") liveSocket = null; });
setInterval(() => {
  const socket = liveSocket;
  if (!socket) return;
  const quiet = runningEntries().filter((id) => Date.now() - (heard.get(String(id)) || pageOpened) > QUIET_MS);
  if (!quiet.length) return;
  quiet.forEach((id) => heard.set(String(id), Date.now()));
  socket.send(JSON.stringify({ action: "recheck", entries: quiet }));
}, 5000);

// What was sent from the box: it is emptied only once the server has accepted it (a refusal
// leaves the text where it was, with the sentence beside it).
let sent = null;
document.addEventListener("htmx:wsAfterSend", (event) => {
  const form = document.getElementById("search-form");
  if (form && event.target === form) sent = form.elements.q.value;
});

// --- following the conversation ----------------------------------------------------------------

let following = null; // the entry the page follows while it streams, until the person scrolls up
let ownScroll = 0;
let lastY = window.scrollY;

const scrollTo = (top) => {
  ownScroll = Date.now();
  window.scrollTo({ top: Math.max(0, top), behavior: "instant" });
};
const formHeight = () => {
  const form = document.getElementById("search-form");
  return form && getComputedStyle(form).position === "sticky" ? form.offsetHeight : 0;
};
const showEntry = (entry) => scrollTo(entry.getBoundingClientRect().top + window.scrollY - 12);

window.addEventListener("scroll", () => {
  if (Date.now() - ownScroll > 150 && window.scrollY < lastY - 2) following = null; // e.g. the scrollbar
  lastY = window.scrollY;
}, { passive: true });
// A person scrolling up lets go at once. The page scrolls at every update while the answer is
// shorter than the screen, so a scroll event cannot tell theirs from its own: their input can.
let touchY = null;
window.addEventListener("wheel", (event) => { if (event.deltaY < 0) following = null; }, { passive: true });
window.addEventListener("touchstart", (event) => { touchY = event.touches[0].clientY; }, { passive: true });
window.addEventListener("touchmove", (event) => {
  if (touchY !== null && event.touches[0].clientY > touchY + 8) following = null; // the finger pulls the page down
}, { passive: true });
window.addEventListener("keydown", (event) => {
  if (["ArrowUp", "PageUp", "Home"].includes(event.key) && !event.target.closest("textarea, input, select")) following = null;
});

let trailing = false; // since "Answer still arriving ↓": the newest text stays in view, past the question too
const follow = () => {
  if (!following || !following.isConnected) return;
  if (!following.querySelector("button.stop")) following = null; // it ended
  const entry = following || null;
  if (!entry) return;
  const bottom = entry.getBoundingClientRect().bottom + formHeight() + 12 - window.innerHeight;
  const top = entry.getBoundingClientRect().top - 12;
  // keep the newest text in view, but never scroll the question off while there is room
  if (bottom > 0 && (top > 0 || trailing)) scrollTo(window.scrollY + (trailing ? bottom : Math.min(bottom, top)));
};

// While an answer runs below what is on the screen (scrolled up, or grown past it), "Answer still
// arriving ↓" above the box jumps to its newest text and follows it again.
const latestRunning = () => [...document.querySelectorAll("#entries article.entry")]
  .filter((entry) => entry.querySelector(".entry-status button.stop")).pop(); // (static/live.js too)
const showArriving = () => {
  const pill = document.getElementById("still-arriving");
  if (!pill) return;
  const entry = latestRunning();
  const below = entry && entry.getBoundingClientRect().bottom > window.innerHeight - formHeight() + 48; // more than its margin
  pill.hidden = !below || (following === entry && trailing);
};
let arrivingFrame = 0;
const showArrivingSoon = () => {
  if (!arrivingFrame) arrivingFrame = requestAnimationFrame(() => { arrivingFrame = 0; showArriving(); });
};
window.addEventListener("scroll", showArrivingSoon, { passive: true });
window.addEventListener("resize", showArrivingSoon, { passive: true });
document.addEventListener("click", (event) => {
  if (!event.target.closest("#still-arriving")) return;
  following = latestRunning() || null;
  trailing = Boolean(following);
  follow();
  showArriving();
});

document.addEventListener("htmx:wsAfterMessage", () => {
  // The first answer of a new conversation gets its own address.
  const link = document.getElementById("thread-link");
  if (link && link.dataset.url && window.location.pathname !== link.dataset.url) {
    window.history.replaceState(null, "", link.dataset.url);
  }
  const accepted = document.getElementById("search-accepted");
  if (accepted && accepted.dataset.entry) {
    const entry = document.getElementById(`entry-${accepted.dataset.entry}`);
    delete accepted.dataset.entry;
    const q = box();
    if (q && sent !== null && q.value === sent) q.value = "";
    sent = null;
    if (q) {
      q.placeholder = "Ask a follow-up…";
      const label = document.querySelector(`label[for="${q.id}"]`);
      if (label) label.textContent = "Ask a follow-up";
      counter();
    }
    if (entry) { following = entry; trailing = false; showEntry(entry); }
  }
  if (!following) trailing = false;
  follow();
  showArrivingSoon();
  decorate();
  announce();
});

// An answer that ends is announced to screen readers.
const running = new Set();
const announce = () => {
  const status = document.getElementById("live-status");
  for (const entry of document.querySelectorAll("article.entry")) {
    const badge = entry.querySelector(".entry-status .badge");
    if (!badge) continue;
    if (entry.querySelector("button.stop")) { running.add(entry.id); continue; }
    if (running.delete(entry.id) && status) {
      const state = badge.textContent.trim().toLowerCase();
      status.textContent = state === "completed" ? "Answer finished." : `Answer ${state}.`;
    }
  }
};

// --- copying -----------------------------------------------------------------------------------

// Text by execCommand: where the Clipboard API is missing (it exists only on https and
// localhost: a LAN address has none). The copy event puts the HTML beside the text, when given.
const copyByCommand = (text, html) => {
  const put = (event) => {
    event.clipboardData.setData("text/plain", text);
    if (html) event.clipboardData.setData("text/html", html);
    event.preventDefault();
  };
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "visually-hidden";
  document.body.append(area);
  area.select();
  document.addEventListener("copy", put);
  const ok = document.execCommand("copy");
  document.removeEventListener("copy", put);
  area.remove();
  if (!ok) throw new Error("copy refused");
};

const copyText = async (text) => {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  copyByCommand(text, "");
};

// Both kinds at once: a mail or a document takes the HTML (formatting, sources as a list), a
// plain text field the Markdown. The clipboard item is made in the click itself, with the
// fetches as promises, so the browser still counts the copy as the person's act.
const copyBoth = async (textUrl, htmlUrl) => {
  const fetched = (url) => fetch(url, { credentials: "same-origin" }).then((response) => {
    if (!response.ok) throw new Error(String(response.status));
    return response.text();
  });
  const text = fetched(textUrl);
  const html = fetched(htmlUrl);
  html.catch(() => {});  // the text's failure is the one reported
  if (navigator.clipboard && window.isSecureContext && window.ClipboardItem) {
    const blob = (promise, type) => promise.then((body) => new Blob([body], { type }));
    try {
      await navigator.clipboard.write([new ClipboardItem({
        "text/plain": blob(text, "text/plain"), "text/html": blob(html, "text/html"),
      })]);
      return;
    } catch (error) {
      await text;  // a failed fetch is the error to report; else the text alone, below
    }
    await navigator.clipboard.writeText(await text);
    return;
  }
  copyByCommand(await text, await html.catch(() => ""));
};

const said = (button, text) => {
  const label = button.querySelector(".label") || button;  // beside an icon, the word alone
  if (!button.dataset.label) button.dataset.label = label.textContent;
  label.textContent = text;
  clearTimeout(button.copiedTimer);
  button.copiedTimer = setTimeout(() => { label.textContent = button.dataset.label; }, 2000);
};

// An answer's "More" menu and the Options panel close on a click anywhere else (Esc closes them too, above).
document.addEventListener("click", (event) => {
  for (const menu of document.querySelectorAll("details.more[open], #search-form details.options[open]")) {
    if (!menu.contains(event.target)) menu.open = false;
  }
});

// "Copy" beside a text shown on the page (a new agent token in Settings).
document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy-from]");
  if (!button) return;
  const field = document.getElementById(button.dataset.copyFrom);
  try { await copyText(field.value); said(button, "Copied"); } catch { said(button, "Copy failed"); }
});

// "Copy": the answer from the server as Markdown (sources as footnotes) and, where the button
// names it, as HTML (sources as a list); or either without citations.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy][data-url]");
  if (!button) return;
  try {
    if (button.dataset.html) {
      await copyBoth(button.dataset.url, button.dataset.html);
    } else {
      const response = await fetch(button.dataset.url, { credentials: "same-origin" });
      if (!response.ok) throw new Error(String(response.status));
      await copyText(await response.text());
    }
    said(button, "Copied");
  } catch {
    said(button, "Copy failed");
  }
});

// Each code block gets its own copy button.
const decorate = () => {
  for (const pre of document.querySelectorAll(".answer pre:not([data-copyable])")) {
    pre.dataset.copyable = "1";
    const button = document.createElement("button");
    button.type = "button";
    button.className = "copy-code";
    button.textContent = "Copy code";
    button.addEventListener("click", async () => {
      const code = pre.querySelector("code") || pre;
      try { await copyText(code.innerText.replace(/\n$/, "")); said(button, "Copied"); }
      catch { said(button, "Copy failed"); }
    });
    pre.prepend(button);
  }
};

// --- opening a page ----------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  decorate();
  counter();
  const live = document.getElementById("live");
  if (live && live.dataset.thread) {
    // a conversation opens at its latest question (or the one its address names)
    const named = window.location.hash && document.getElementById(window.location.hash.slice(1));
    const entries = document.querySelectorAll("article.entry");
    const target = named || entries[entries.length - 1];
    if (target && entries.length > 1) showEntry(target);
    const latest = entries[entries.length - 1];
    if (latest && latest.querySelector("button.stop")) following = latest;
    for (const entry of entries) if (entry.querySelector("button.stop")) running.add(entry.id);
    if (box()) box().focus({ preventScroll: true });
  }
});

// A research run's clarifying question counts down to when Perplexity goes on by itself.
setInterval(() => {
  for (const el of document.querySelectorAll(".countdown[data-seconds]")) {
    const left = Math.max(0, Number(el.dataset.seconds) - 1);
    el.dataset.seconds = String(left);
    el.textContent = String(left);
    if (left === 0) {
      el.closest(".clarify")?.replaceChildren(Object.assign(document.createElement("p"), {
        className: "muted small clarify-ended", textContent: "No answer came in time: the research went on by itself.",
      }));
    }
  }
}, 1000);

// Forms that arrive over the socket ("Ask again" under an answer that just streamed in) are
// rendered without a request, so without this browser's CSRF token: a POST form gets the page's
// own token as it is sent.
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || form.method !== "post") return;
  const field = form.querySelector("input[name=csrfmiddlewaretoken]");
  if (field && field.value) return;
  const own = Array.from(document.querySelectorAll("input[name=csrfmiddlewaretoken]")).find((input) => input.value);
  if (!own) return;
  const token = field || form.appendChild(Object.assign(document.createElement("input"), { type: "hidden", name: "csrfmiddlewaretoken" }));
  token.value = own.value;
}, true);
