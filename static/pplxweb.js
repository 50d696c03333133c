// pplxweb: the little JavaScript the pages use. Everything works without it.
"use strict";

document.addEventListener("keydown", (event) => {
  // "/" focuses the search box from anywhere, unless the person is typing somewhere.
  if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
  const target = event.target;
  if (target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement || target.isContentEditable) return;
  const box = document.getElementById("id_q");
  if (box) { event.preventDefault(); box.focus(); }
});

document.addEventListener("keydown", (event) => {
  // Enter asks, Shift+Enter makes a new line.
  const box = event.target;
  if (!(box instanceof HTMLTextAreaElement) || box.id !== "id_q") return;
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    box.form.requestSubmit();
  }
});

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

document.addEventListener("htmx:wsAfterSend", (event) => {
  // A question was sent: empty the box for the next one and show that it is on its way.
  const form = document.getElementById("search-form");
  if (form && event.target === form) {
    form.elements.q.value = "";
    form.elements.q.placeholder = "Ask a follow-up…";
  }
});

document.addEventListener("htmx:wsAfterMessage", () => {
  // The first answer of a new conversation gets its own address.
  const link = document.getElementById("thread-link");
  if (link && link.dataset.url && window.location.pathname !== link.dataset.url) {
    window.history.replaceState(null, "", link.dataset.url);
  }
});

// "Copy answer": the answer's text as shown, with or without the citation numbers.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  const answer = document.getElementById(`${button.dataset.copy}-answer`);
  if (!answer) return;
  const clone = answer.cloneNode(true);
  if (button.dataset.citations === "0") clone.querySelectorAll("a.cite").forEach((a) => a.remove());
  else clone.querySelectorAll("a.cite").forEach((a) => { a.textContent = `[${a.textContent}]`; });
  try {
    await navigator.clipboard.writeText(clone.innerText.trim());
    button.textContent = "Copied";
  } catch {
    button.textContent = "Copy failed";
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
        className: "muted small", textContent: "No answer came in time: the research went on by itself.",
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
