// The console: a hash router over pages that read the broker's JSON API (/api/).
import { pages } from "./pages.js";

const root = document.getElementById("page");
const status = document.getElementById("status");
let timers = [];
let generation = 0;

/** What a page may ask of the router: repeat a refresh while it is shown. */
function context(mine) {
  return {
    every(ms, fn) {
      timers.push(setInterval(() => { if (mine === generation) fn().catch(report); }, ms));
    },
    current: () => mine === generation,
  };
}

function report(error) {
  status.textContent = String(error.message || error);
  status.className = "status error";
}

function parse() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query] = hash.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { name: parts[0] || "overview", args: parts.slice(1), query: new URLSearchParams(query || "") };
}

async function show() {
  for (const timer of timers) clearInterval(timer);
  timers = [];
  const mine = ++generation;
  const route = parse();
  const page = pages[route.name] || pages.missing;
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.page === route.name);
  }
  try {
    const node = await page(route, context(mine));
    if (mine !== generation) return; // a later navigation won
    root.replaceChildren(node);
    root.dataset.page = route.name;
    status.textContent = "updated " + new Date().toLocaleTimeString();
    status.className = "status";
  } catch (error) {
    if (mine !== generation) return;
    root.replaceChildren(document.createTextNode(""));
    const p = document.createElement("p");
    p.className = "error";
    p.textContent = String(error.message || error);
    root.append(p);
    root.dataset.page = route.name;
    report(error);
  }
}

window.addEventListener("hashchange", show);
show();
