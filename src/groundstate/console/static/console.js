// Live run pages: follow the run's event stream and re-render the (server-escaped) fragment.
// The instructions box is never replaced while the operator is editing it. An event that arrives while a refresh is
// in flight asks for one more refresh afterwards: the one in flight may have read the run before that event.
(function () {
  const section = document.getElementById("run");
  if (!section || !window.EventSource) return;
  const run = section.dataset.run;
  let editing = false, pending = false, stale = false;
  section.addEventListener("input", (e) => { if (e.target.classList.contains("instructions")) editing = true; });
  async function refresh() {
    if (pending) { stale = true; return; }
    pending = true;
    try {
      do {
        stale = false;
        const response = await fetch(`/runs/${encodeURIComponent(run)}?fragment=1`, { credentials: "same-origin" });
        if (response.ok && !editing) section.innerHTML = await response.text();
      } while (stale);
    } finally {
      pending = false;
    }
  }
  const stream = new EventSource(`/api/runs/${encodeURIComponent(run)}/stream?after=${section.dataset.seq}`);
  stream.addEventListener("run", () => setTimeout(refresh, 150));
})();
