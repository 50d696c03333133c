// pplxweb: the search box and the live connection (loaded after pplxweb.js, whose helpers it uses).
//
// The box knows what is running: while an answer arrives its button is Stop and a new question
// waits (a sentence says so; the server refuses it too: ConversationBusy, search/live/asking.py);
// while Perplexity waits on a clarifying question, Enter answers it. Outages are said out loud, in the one notice
// (#live-notice, which the server's own notices use too): the page says at once that it can't
// reach pplxweb and retries; meanwhile nothing is sent, and nothing is sent later unseen
// (htmx-ext-ws keeps what is sent while its socket is closed and sends it when it reopens: that
// queue is emptied here, through its public events, and the person sends again). Back, the page
// catches up (static/pplxweb.js: recheck, catch_up). A server back on another build
// (pplxweb/build.py) closes the socket with 4409: the page offers a reload and keeps the text.
"use strict";

(() => {
  const LAYER_LOST = 4012; // Redis away (pplxweb/sockets.py): the server's notice says so
  const FINAL = [4401, 4403]; // signed out, unlinked: the server said why; nothing to retry
  const UPDATED = 4409; // another build (pplxweb/build.py)
  const RETRIED_BY_HTMX = [1006, 1011, 1012, 1013]; // htmx-ext-ws reopens after these itself
  const CANT_REACH = "Can't reach pplxweb. Retrying… Nothing is sent until it is back.";
  const UPDATED_TEXT = "pplxweb was updated while this page was open. Reload to go on; what you typed is kept.";
  const DRAFT = "pplxweb-draft:";
  // soon, then every 2.5-5 s (htmx's own default waits up to 64 s)
  const retryDelay = (tries) => Math.min(500 * 2 ** tries, 5000) * (0.5 + Math.random() / 2);
  htmx.config.wsReconnectDelay = retryDelay;

  let offline = false; // the browser says this device lost its network
  const socketOf = (elt) => elt.closest("[ws-connect]");
  const isOpen = (live) => Boolean(live) && live.dataset.link === "open" && !offline;

  // --- saying it ----------------------------------------------------------------------------------

  const paragraph = (text, action) => {
    const p = document.createElement("p");
    p.textContent = text;
    if (action) {
      const button = Object.assign(document.createElement("button"), { type: "button", className: "link", textContent: action.label });
      button.addEventListener("click", action.run);
      p.append(" ", button);
    }
    return p;
  };
  const notice = (text, action) => document.getElementById("live-notice")?.replaceChildren(paragraph(text, action));
  const noticeBack = () => {
    notice("Connected to pplxweb again.");
    document.querySelector("#live-notice p")?.classList.add("ok");
  };
  const clearNotice = () => document.getElementById("live-notice")?.replaceChildren();

  let note = null; // what the sentence beside the box is about: busy, held, late, ended, hint, stopping
  const boxSays = (kind, text) => {
    const place = document.getElementById("search-error");
    if (!place) return;
    note = kind;
    place.className = kind === "hint" ? "hint muted small" : "errors note";
    if (kind === "hint") place.removeAttribute("role");
    else place.setAttribute("role", "alert");
    place.replaceChildren(paragraph(text)); // written anew, so a screen reader hears it again
  };
  const boxQuiet = (...kinds) => {
    const place = document.getElementById("search-error");
    if (!kinds.includes(note) || !place) return;
    note = null;
    place.className = "";
    place.removeAttribute("role");
    place.replaceChildren();
  };

  // --- what runs -----------------------------------------------------------------------------------

  const boxMode = () => {
    const entry = latestRunning();
    if (!entry) return "ask";
    return entry.querySelector(".clarify-form") ? "answer" : "stop";
  };

  let answering = null; // the box's text sent as the answer to a clarifying question: {entry, text}
  const renderBox = () => {
    const form = document.getElementById("search-form");
    const q = box();
    if (!form || !q) return;
    const mode = boxMode();
    const was = form.dataset.mode || "ask";
    if (mode === was) return;
    form.dataset.mode = mode;
    const ask = form.querySelector("button.ask");
    const stop = form.querySelector("button.stop-answer");
    const label = document.querySelector(`label[for="${q.id}"]`);
    const focused = document.activeElement;
    if (ask) { ask.hidden = mode === "stop"; ask.textContent = mode === "answer" ? "Answer" : "Ask"; }
    if (stop) stop.hidden = mode !== "stop";
    if (focused && focused.hidden) (mode === "stop" ? stop : ask)?.focus();
    if (mode === "answer") {
      q.dataset.asking = q.placeholder;
      q.placeholder = "Answer Perplexity's question above…";
      if (label) { label.dataset.asking = label.textContent; label.textContent = "Answer Perplexity's question"; }
      if (!note) boxSays("hint", "Perplexity asks a question above: Enter sends what you type here as your answer.");
    } else if (was === "answer") {
      boxQuiet("hint");
      q.placeholder = q.dataset.asking || q.placeholder;
      if (label && label.dataset.asking) label.textContent = label.dataset.asking;
      const ended = document.querySelector("#entries .clarify .clarify-ended");
      if (ended && q.value.trim() && !answering) {
        boxSays("ended", "Perplexity went on without an answer (its countdown ended). What you typed stays in the box and was not sent.");
      }
    }
    if (mode === "ask") boxQuiet("busy", "ended", "stopping");
  };

  // Enter (or Ask) in the box, a related question, Stop, a clarifying answer: each goes over the
  // socket (ws-send). Checked here first: nothing goes while pplxweb can't be reached, and a
  // question waits while an answer runs.
  let inFlight = null; // a question sent, until the server accepts or refuses it
  document.addEventListener("htmx:wsConfigSend", (event) => {
    const form = event.target;
    const asking = Boolean(form.querySelector("[name=q]"));
    if (!isOpen(socketOf(form))) {
      event.preventDefault();
      held(form);
      return;
    }
    if (!asking) return;
    const mode = boxMode();
    if (mode === "answer" && form.id === "search-form") {
      event.preventDefault();
      answerFromBox();
    } else if (mode !== "ask") {
      event.preventDefault();
      boxSays("busy", "An answer is still arriving: wait for it to finish, or stop it, then press Enter.");
    } else if (inFlight) {
      event.preventDefault(); // Enter again before pplxweb replied: sent once
    }
  });
  document.addEventListener("htmx:wsAfterSend", (event) => {
    if (!event.target.querySelector("[name=q]")) return;
    clearTimeout(inFlight);
    inFlight = setTimeout(() => { // no word: the person may try again, knowing it
      inFlight = null;
      boxSays("late", "pplxweb has not confirmed your question yet. It stays in the box.");
    }, 8000);
  });
  const replied = () => { clearTimeout(inFlight); inFlight = null; boxQuiet("late"); };

  const answerFromBox = () => {
    const q = box();
    const form = latestRunning()?.querySelector(".clarify-form");
    const text = q.value.trim();
    if (!form || !text) return;
    // it answers the first question not answered in the form yet (else the first one)
    const asks = [...form.querySelectorAll(".clarify-ask")];
    const open = asks.find((ask) => !ask.querySelector("input:checked") && !ask.querySelector("input[type=text]").value.trim()) || asks[0];
    open.querySelectorAll("input:checked").forEach((input) => { input.checked = false; });
    open.querySelector("input[type=text]").value = text;
    answering = { entry: form.closest("article.entry").id, text: q.value };
    form.requestSubmit();
  };

  // The box's Stop stops the answer that runs (its own Stop, in its status line).
  document.addEventListener("click", (event) => {
    if (!event.target.closest("#search-form button.stop-answer")) return;
    event.preventDefault();
    latestRunning()?.querySelector(".entry-status button.stop")?.click();
  });

  // --- while pplxweb can't be reached ---------------------------------------------------------------

  const pendingStops = new Set(); // answers to stop once pplxweb is back (the person pressed Stop)
  let heldQuestion = false;
  const held = (form) => {
    const live = socketOf(form);
    const updated = live && live.dataset.link === "updated";
    const action = form.querySelector("[name=action]")?.value;
    if (action === "stop" && !updated) {
      pendingStops.add(form.querySelector("[name=entry]").value);
      form.querySelector("button").textContent = "Stopping once pplxweb is back…";
      boxSays("held", "pplxweb can't be reached: the answer will be stopped as soon as it is back.");
    } else if (updated) {
      boxSays("held", "Not sent: pplxweb was updated. Reload the page first; what you typed is kept.");
    } else if (action === "clarify") {
      boxSays("held", "Your answer to Perplexity's question was not sent: pplxweb can't be reached. Send it again once it is back.");
    } else if (live && !live.dataset.link) {
      boxSays("held", "Not sent yet: the page is still connecting to pplxweb. Press Enter again in a moment.");
    } else {
      heldQuestion = true;
      boxSays("held", form.id === "search-form"
        ? "Not sent: pplxweb can't be reached. Press Enter again once it is back."
        : "Not sent: pplxweb can't be reached. Ask again once it is back.");
    }
  };

  const lost = (live) => {
    live.dataset.link = "lost";
    if (inFlight) { // sent as it went away: whether it arrived is unknown, and said
      heldQuestion = "maybe";
      boxSays("held", "pplxweb went away before it confirmed your question, so it may not have arrived. It stays in the box.");
    }
    replied();
    renderBox();
  };

  // State first (capture), so the page's other handlers of these events see it.
  document.addEventListener("htmx:wsClose", (event) => {
    const live = event.target;
    const code = event.detail.event ? event.detail.event.code : 0;
    clearTimeout(live.settled);
    if (!live.isConnected) return;
    if (code === UPDATED) {
      live.dataset.link = "updated";
      notice(UPDATED_TEXT, { label: "Reload", run: reload });
      return;
    }
    if (FINAL.includes(code)) { live.dataset.link = "closed"; return; }
    lost(live);
    if (code !== LAYER_LOST) notice(CANT_REACH); // Redis away: the server's sentence is there
    if (!RETRIED_BY_HTMX.includes(code)) {
      const socket = event.detail.socketWrapper;
      live.retries = (live.retries || 0) + 1;
      setTimeout(() => { if (live.isConnected && live.dataset.link === "lost") socket.reconnect(); }, retryDelay(live.retries - 1));
    }
  }, true);

  document.addEventListener("htmx:wsOpen", (event) => {
    const live = event.target;
    const socket = event.detail.socketWrapper;
    const back = live.dataset.link === "lost";
    // What was sent while it was closed is never sent now, unseen: the person sends it again.
    for (const queued of socket.queue.splice(0)) if (queued.sendElt) held(queued.sendElt);
    live.dataset.link = "open";
    if (offline) return;
    if (back) caughtUp(live, socket);
    renderBox();
  }, true);

  const caughtUp = (live, socket) => {
    // a page that started its conversation here has the thread only in the form, not in the socket's URL
    const thread = document.querySelector('#thread-link input[name="thread"]');
    if (!(live.getAttribute("ws-connect") || "").includes("thread=") && thread && thread.value) {
      socket.send(JSON.stringify({ action: "watch", thread: thread.value }));
    }
    // a run lost by a restart is rejoined a moment later: the stop goes again with its first update
    for (const entry of pendingStops) socket.send(JSON.stringify({ action: "stop", entry }));
    noticeBack();
    if (note === "held") {
      boxQuiet("held");
      const stopping = pendingStops.size ? " Stopping the answer." : "";
      if (heldQuestion === "maybe" && box() && box().value.trim()) {
        boxSays("held", `pplxweb is back.${stopping} Your question may not have arrived: reload the page to see, or press Enter to ask it.`);
      } else if (heldQuestion && box() && box().value.trim()) {
        boxSays("held", `pplxweb is back.${stopping} Your question was not sent: ${boxMode() === "ask"
          ? "press Enter to send it." : "press Enter once the answer above has ended."}`);
      } else if (stopping) {
        boxSays("stopping", `pplxweb is back.${stopping}`);
      }
    }
    heldQuestion = false;
    live.settled = setTimeout(() => { // still open: found again
      live.retries = 0;
      clearNotice();
    }, 2000);
  };

  // no "asked before" lookups while the server is away (each would only fail)
  document.addEventListener("htmx:beforeRequest", (event) => {
    const live = document.getElementById("live");
    if (live && event.detail.elt.id === "id_q" && !isOpen(live)) event.preventDefault();
  });

  window.addEventListener("offline", () => {
    offline = true;
    notice(CANT_REACH + " (This device is offline.)");
    replied();
    renderBox();
  });
  window.addEventListener("online", () => {
    offline = false;
    const live = document.getElementById("live");
    if (live && live.dataset.link === "open") {
      noticeBack();
      live.settled = setTimeout(clearNotice, 2000);
    }
  });

  // --- another build ------------------------------------------------------------------------------

  const reload = () => {
    const q = box();
    try {
      if (q && q.value.trim()) sessionStorage.setItem(DRAFT + location.pathname, q.value);
    } catch { /* no storage (a private window): the reload goes on */ }
    location.reload();
  };
  document.addEventListener("DOMContentLoaded", () => {
    let draft = null;
    try {
      draft = sessionStorage.getItem(DRAFT + location.pathname);
      sessionStorage.removeItem(DRAFT + location.pathname);
    } catch { /* no storage */ }
    const q = box();
    if (draft && q && !q.value) { q.value = draft; q.dispatchEvent(new Event("input", { bubbles: true })); }
    renderBox();
  });

  // --- replies ------------------------------------------------------------------------------------

  const MARKED = /^<!--pplxweb:seq (\d+) \d+(?: (full|saved))?-->/;
  document.addEventListener("htmx:wsBeforeMessage", (event) => {
    const found = pendingStops.size && MARKED.exec(event.detail.message || "");
    if (!found || found[2] === "saved" || !pendingStops.has(found[1]) || !isOpen(event.target)) return;
    pendingStops.delete(found[1]); // its run is there: stopped now
    event.detail.socketWrapper.send(JSON.stringify({ action: "stop", entry: found[1] }));
  });

  document.addEventListener("htmx:wsAfterMessage", (event) => {
    const message = event.detail.message || "";
    const told = message.includes('id="search-error"'); // the server's sentence (or none) took the place
    if (told) note = null;
    if (inFlight && (told || message.includes('id="search-accepted"'))) replied();
    if (answering) {
      const entry = document.getElementById(answering.entry);
      const q = box();
      if (told) {
        answering = null; // refused (it ended meanwhile): the text stays
      } else if (!entry || !entry.querySelector(".clarify-form")) {
        if (q && q.value === answering.text) { q.value = ""; counter(); }
        answering = null;
      }
    }
    for (const id of pendingStops) {
      if (!document.querySelector(`#entry-${id} .entry-status button.stop`)) pendingStops.delete(id); // it ended
    }
    renderBox();
  });
  setInterval(renderBox, 1000); // a clarifying question's countdown ends in the page
})();
