// pplxweb: the little JavaScript the pages use. Everything works without it.
"use strict";
document.addEventListener("keydown", (event) => {
  // "/" focuses the search box from anywhere, unless the person is typing somewhere.
  if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
  const target = event.target;
  if (target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target.isContentEditable) return;
  const box = document.getElementById("q");
  if (box) { event.preventDefault(); box.focus(); }
});
