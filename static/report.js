// pplxweb: a Deep Research report as a reader. Without this script the report still reads whole:
// its chips link the entry's source list, its contents list links each section.
"use strict";

// --- light chips -------------------------------------------------------------------------------
// A report cites hundreds of times, so its chips come light (search/render.py `_ref_chip`): the
// site's name linking source n in the entry's list (`#s<entry>-<n>`), `data-cite` naming the
// sources cited together. Here each becomes a chip as an answer's: the source's link, a name for
// screen readers, and its card, made from that list the first time it is pointed at.

const sourceItem = (prefix, n) => {
  const item = document.getElementById(`${prefix}${n}`);
  const link = item && item.querySelector("a[href]");
  if (!link) return null;
  const host = item.querySelector(".host");
  const snippet = item.querySelector(".snippet");
  return { n, url: link.href, title: link.textContent, host: host ? host.textContent : "", snippet: snippet ? snippet.textContent : "" };
};

const chipSources = (chip) => {
  const [, prefix, first] = /^#(.+?)(\d+)$/.exec(chip.dataset.ref) || [];
  if (!prefix) return [];
  const numbers = chip.dataset.cite ? chip.dataset.cite.split(" ") : [first];
  return numbers.map((n) => sourceItem(prefix, n)).filter(Boolean);
};

const named = (s) => (s.host ? `${s.title}, ${s.host}` : s.title);

const upgradeChips = (root = document) => {
  for (const chip of root.querySelectorAll('a.cite[href^="#"]')) {
    chip.dataset.ref = chip.getAttribute("href");
    const sources = chipSources(chip);
    if (!sources.length) continue;
    chip.href = sources[0].url;
    chip.target = "_blank";
    chip.rel = "noopener noreferrer nofollow";
    const label = sources.length > 1
      ? `sources ${sources.map((s) => s.n).join(", ")}: ${sources.map(named).join("; ")}`
      : `source ${sources[0].n}: ${named(sources[0])}`;
    chip.setAttribute("aria-label", label.slice(0, 400));
    chip.dataset.card = "later";
    if (sources.length > 1) {
      const group = document.createElement("span");
      group.className = "cite-group";
      chip.replaceWith(group);
      group.append(chip);
    }
  }
};

const span = (className, text) => Object.assign(document.createElement("span"), { className, textContent: text });
const cardItem = (item, s, snippet) => {
  item.append(span("cite-title", s.title.slice(0, 160)));
  if (s.host) item.append(span("cite-host", s.host));
  if (s.snippet) item.append(span("cite-snippet", s.snippet.slice(0, snippet)));
  return item;
};

// Before pplxweb.js places a card (its listeners run after these, which capture), the card is made.
const makeCard = (event) => {
  const chip = event.target.closest && event.target.closest(".cite-group, a.cite");
  const link = chip && (chip.matches("a.cite") ? chip : chip.querySelector("a.cite"));
  if (!link || link.dataset.card !== "later") return;
  delete link.dataset.card;
  const sources = chipSources(link);
  const card = span("cite-card", "");
  if (sources.length > 1) {
    for (const s of sources) {
      const item = Object.assign(document.createElement("a"), { href: s.url, className: "cite-item", target: "_blank", rel: "noopener noreferrer nofollow" });
      card.append(cardItem(item, s, 120));
    }
    link.parentElement.append(card);
  } else if (sources.length) {
    card.append(cardItem(span("cite-item", ""), sources[0], 220));
    link.append(card);
  }
};
for (const type of ["mouseover", "focusin", "pointerdown"]) document.addEventListener(type, makeCard, true);

// --- the contents list -------------------------------------------------------------------------
// It marks the section being read (the last heading above the screen's upper third), keeps that
// entry in its own view, and stays above the pinned question box (--pinned: the box's height).

const watching = new Map(); // the contents list -> its observers

const markCurrent = (nav, headings) => {
  const line = window.innerHeight / 3;
  let current = null;
  for (const heading of headings) if (heading.getBoundingClientRect().top <= line) current = heading;
  const link = current && nav.querySelector(`a[href="#${CSS.escape(current.id)}"]`);
  // above the report nothing is marked, unless "Contents" led back here: then the section left is
  if (!link && nav.dataset.back) return;
  delete nav.dataset.back;
  for (const other of nav.querySelectorAll("a[aria-current]")) other.removeAttribute("aria-current");
  const list = [nav, nav.querySelector("ol")].find((el) => el && el.scrollHeight > el.clientHeight + 1);
  if (!link) { if (list) list.scrollTop = 0; return; }
  link.setAttribute("aria-current", "location");
  if (!list) return;
  const top = link.offsetTop - list.offsetTop;
  if (top < list.scrollTop || top + link.offsetHeight > list.scrollTop + list.clientHeight) {
    list.scrollTop = top - list.clientHeight / 3;
  }
};
document.addEventListener("click", (event) => {
  const back = event.target.closest && event.target.closest(".toc-back a");
  const nav = back && document.getElementById(back.getAttribute("href").slice(1));
  if (nav) nav.dataset.back = "1";
});

const watchContents = () => {
  for (const [nav, observers] of watching) {
    if (!nav.isConnected) { observers.forEach((o) => o.disconnect()); watching.delete(nav); }
  }
  for (const nav of document.querySelectorAll("nav.report-toc")) {
    if (watching.has(nav)) continue;
    const headings = [...nav.querySelectorAll('a[href^="#"]')]
      .map((a) => document.getElementById(a.getAttribute("href").slice(1))).filter(Boolean);
    const sections = new IntersectionObserver(() => markCurrent(nav, headings), { rootMargin: "0px 0px -66% 0px" });
    headings.forEach((h) => sections.observe(h));
    // on a phone, "Contents" (a link back to the list) shows once the list is out of sight
    const layout = nav.closest(".report-layout");
    const seen = new IntersectionObserver(([entry]) => {
      layout.classList.toggle("toc-seen", entry.isIntersecting);
      markCurrent(nav, headings); // a jump can pass every heading without one crossing the line
    });
    seen.observe(nav);
    watching.set(nav, [sections, seen]);
    markCurrent(nav, headings);
  }
};

const pinnedHeight = () => {
  const form = document.getElementById("search-form");
  const pinned = form && getComputedStyle(form).position === "sticky" ? form.offsetHeight : 0;
  document.documentElement.style.setProperty("--pinned", `${pinned}px`);
};

const readReports = () => { upgradeChips(); watchContents(); };
document.addEventListener("DOMContentLoaded", () => {
  readReports();
  pinnedHeight();
  const form = document.getElementById("search-form");
  if (form && window.ResizeObserver) new ResizeObserver(pinnedHeight).observe(form);
});
document.addEventListener("htmx:wsAfterMessage", readReports);
document.addEventListener("htmx:afterSettle", readReports);
