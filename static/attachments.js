// pplxweb: files for a question. Each file is uploaded as soon as it is chosen, dropped or
// pasted (POST /attachments/: pplxweb keeps it and hands it to Perplexity), shown as a chip
// with its progress and a remove button; the question then names the ready files by id.
// Without this script the form posts the files itself (templates/search/attachments_field.html).
"use strict";

(() => {
  const form = document.getElementById("search-form");
  const box = form && form.querySelector(".attachments");
  if (!box || box.dataset.ready) return;
  box.dataset.ready = "1";
  const chips = box.querySelector(".chips");
  const input = box.querySelector('input[type="file"]');
  const maxFiles = Number(box.dataset.max) || 10;
  const maxBytes = (Number(box.dataset.maxMb) || 25) * 1024 * 1024;
  input.removeAttribute("name"); // the socket's message carries ids, never the files
  let waitingToSend = false;

  const csrf = () => form.querySelector('input[name="csrfmiddlewaretoken"]')?.value || "";
  const sizeText = (n) => (n < 1024 ? `${n} bytes` : n < 1048576 ? `${Math.round(n / 1024)} KB` : `${(n / 1048576).toFixed(1)} MB`);
  const pending = () => chips.querySelectorAll(".chip.uploading").length;
  const counted = () => chips.querySelectorAll(".chip:not(.failed):not(.sent)").length;

  function chip(name, size) {
    const li = document.createElement("li");
    li.className = "chip uploading";
    const label = Object.assign(document.createElement("span"), { className: "name", textContent: name });
    const meta = Object.assign(document.createElement("span"), { className: "muted", textContent: sizeText(size) });
    const bar = Object.assign(document.createElement("progress"), { max: 100, value: 0 });
    bar.setAttribute("aria-label", `Uploading ${name}`);
    const note = Object.assign(document.createElement("span"), { className: "note small" });
    const remove = Object.assign(document.createElement("button"), { type: "button", className: "link remove", textContent: "×" });
    remove.setAttribute("aria-label", `Remove ${name}`);
    li.append(label, " ", meta, " ", bar, note, remove);
    chips.append(li);
    return li;
  }

  function fail(li, message) {
    li.classList.remove("uploading");
    li.classList.add("failed");
    li.querySelector("progress")?.remove();
    li.querySelector(".note").textContent = message;
    settle();
  }

  function upload(file) {
    const li = chip(file.name || "pasted image", file.size);
    if (counted() > maxFiles) return fail(li, `At most ${maxFiles} files per question.`);
    if (file.size > maxBytes) return fail(li, `Larger than ${maxBytes / 1048576} MB.`);
    if (file.size === 0) return fail(li, "This file is empty (0 bytes).");
    const data = new FormData();
    data.append("file", file, file.name || "pasted-image.png");
    const request = new XMLHttpRequest();
    li.request = request;
    request.open("POST", box.dataset.attachUrl);
    request.setRequestHeader("X-CSRFToken", csrf());
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) li.querySelector("progress").value = Math.round((event.loaded / event.total) * 90);
    });
    request.upload.addEventListener("load", () => {
      li.querySelector(".note").textContent = "Perplexity is reading it…";
    });
    request.addEventListener("load", () => {
      let reply = {};
      try { reply = JSON.parse(request.responseText); } catch { /* an error page */ }
      // a sentence as plain text: the server gave up a stalled upload (408, pplxweb/slow_requests.py)
      const said = (request.getResponseHeader("Content-Type") || "").startsWith("text/plain") ? request.responseText.trim() : "";
      if (request.status !== 200 || !reply.id) return fail(li, reply.error || said || `The upload failed (status ${request.status}).`);
      li.classList.replace("uploading", "ready");
      li.dataset.id = reply.id;
      li.querySelector("progress")?.remove();
      li.querySelector(".note").textContent = "";
      const hidden = Object.assign(document.createElement("input"), { type: "hidden", name: "attachment", value: reply.id });
      li.append(hidden);
      settle();
    });
    request.addEventListener("error", () => fail(li, "The upload failed: the connection to pplxweb dropped."));
    request.send(data);
  }

  function settle() {
    // "Search" waits for the files; once they are all in (or failed), it goes on by itself
    if (!waitingToSend || pending()) return;
    waitingToSend = false;
    const failed = chips.querySelectorAll(".chip.failed").length;
    if (failed) {
      showError(`${failed} file${failed > 1 ? "s" : ""} could not be attached; remove ${failed > 1 ? "them" : "it"} or try again.`);
      return;
    }
    form.requestSubmit();
  }

  function showError(message) {
    const error = document.getElementById("search-error");
    if (error) error.replaceChildren(Object.assign(document.createElement("p"), { className: "error", textContent: message }));
  }

  function add(files) {
    for (const file of files) upload(file);
  }

  input.addEventListener("change", () => { add(input.files); input.value = ""; });
  chips.addEventListener("click", (event) => {
    const button = event.target.closest("button.remove");
    if (!button) return;
    const li = button.closest(".chip");
    li.request?.abort();
    if (li.dataset.id) fetch(`/attachment/${li.dataset.id}/remove/`, { method: "POST", headers: { "X-CSRFToken": csrf() } });
    li.remove();
    settle();
  });
  form.addEventListener("dragover", (event) => { event.preventDefault(); form.classList.add("dropping"); });
  form.addEventListener("dragleave", () => form.classList.remove("dropping"));
  form.addEventListener("drop", (event) => {
    event.preventDefault();
    form.classList.remove("dropping");
    if (event.dataTransfer?.files?.length) add(event.dataTransfer.files);
  });
  form.addEventListener("paste", (event) => {
    const files = [...(event.clipboardData?.items || [])].filter((i) => i.kind === "file").map((i) => i.getAsFile()).filter(Boolean);
    if (files.length) { event.preventDefault(); add(files); }
  });

  document.addEventListener("htmx:wsConfigSend", (event) => {
    if (event.target !== form) return;
    if (pending()) { // not yet: the question goes when the files are in
      event.preventDefault();
      waitingToSend = true;
      showError("Waiting for the files to be ready…");
      return;
    }
    if (chips.querySelector(".chip.failed")) {
      event.preventDefault();
      showError("Some files could not be attached; remove them (×) or attach them again.");
    }
  });
  document.addEventListener("htmx:wsAfterSend", (event) => {
    if (event.target !== form) return;
    for (const li of chips.querySelectorAll(".chip.ready")) li.classList.add("sent");
  });
  document.addEventListener("htmx:wsAfterMessage", (event) => {
    const message = String(event.detail?.message || "");
    if (message.includes('hx-swap-oob="beforeend"')) { // the question became an entry: its files went with it
      chips.querySelectorAll(".chip.sent").forEach((li) => li.remove());
    } else if (message.includes('class="errors"')) { // refused: the files stay for the next try
      chips.querySelectorAll(".chip.sent").forEach((li) => li.classList.remove("sent"));
    }
  });
})();
