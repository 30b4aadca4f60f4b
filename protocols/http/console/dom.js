// DOM building for the console. Broker data (topic names, keys, bodies) is user data: it only
// ever becomes text nodes or attribute values set through the DOM, never HTML.

const SVG = "http://www.w3.org/2000/svg";

/** An element with attributes (on* adds a listener) and children (strings become text). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttributes(el, attrs);
  append(el, children);
  return el;
}

function setAttributes(el, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, String(value));
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** A link inside the console: the route's parts are encoded, so any name is safe in it. */
export function link(parts, text, query) {
  let href = "#/" + parts.map(encodeURIComponent).join("/");
  if (query) href += "?" + new URLSearchParams(query).toString();
  return h("a", { href }, text);
}

/** A table: columns are {title, num?, cell(row) -> node or text, cls?(row)}. */
export function table(columns, rows, empty = "none") {
  const head = h("tr", {}, columns.map((c) => h("th", { class: c.num ? "num" : null }, c.title)));
  const body = rows.length
    ? rows.map((row) => h("tr", {}, columns.map((c) => {
        const cls = [c.num ? "num" : "", c.cls ? c.cls(row) : ""].join(" ").trim();
        return h("td", { class: cls || null, "data-col": c.key || null }, c.cell(row));
      })))
    : [h("tr", {}, h("td", { colspan: columns.length, class: "muted" }, empty))];
  return h("table", {}, h("thead", {}, head), h("tbody", {}, body));
}

export function card(label, value, key) {
  return h("div", { class: "card", "data-card": key || null },
    h("div", { class: "label" }, label), h("div", { class: "value" }, value));
}

export function badge(protocol, count) {
  return h("span", { class: "badge " + protocol }, count === undefined ? protocol : `${protocol} ${count}`);
}

export const num = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));

export function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

export const time = (ms) => (ms > 0 ? new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC") : "–");

export function duration(s) {
  const d = Math.floor(s / 86400), hh = Math.floor((s % 86400) / 3600), mm = Math.floor((s % 3600) / 60);
  return d ? `${d}d ${hh}h` : hh ? `${hh}h ${mm}m` : `${mm}m ${Math.floor(s % 60)}s`;
}

const COLOURS = ["#d9480f", "#1c7ed6", "#2f9e44", "#7048e8", "#f59f00", "#0c8599", "#c2255c", "#495057"];

/** A line chart of the last `keep` points of each named series, drawn as SVG. */
export class LiveChart {
  constructor(title, keep = 60) {
    this.keep = keep;
    this.series = new Map();
    this.svg = document.createElementNS(SVG, "svg");
    this.svg.setAttribute("class", "chart");
    this.svg.setAttribute("viewBox", "0 0 600 180");
    this.svg.setAttribute("preserveAspectRatio", "none");
    this.legend = h("div", { class: "legend" });
    this.scale = h("span", { class: "muted" });
    this.node = h("div", {}, h("h2", {}, title, " ", this.scale), this.svg, this.legend);
  }

  push(values) {
    for (const [name, points] of this.series) { // a series gone from the values and flat at 0 leaves
      if (!Object.hasOwn(values, name) && points.every((v) => v === 0)) this.series.delete(name);
    }
    for (const [name, value] of Object.entries(values)) {
      if (!this.series.has(name)) this.series.set(name, []);
    }
    for (const [name, points] of this.series) {
      points.push(values[name] ?? 0);
      if (points.length > this.keep) points.shift();
    }
    this.draw();
  }

  draw() {
    this.svg.replaceChildren();
    let top = 1;
    for (const points of this.series.values()) top = Math.max(top, ...points);
    this.scale.textContent = `(top of the chart: ${num(Math.round(top))})`;
    const items = [];
    let i = 0;
    for (const [name, points] of this.series) {
      const colour = COLOURS[i++ % COLOURS.length];
      const line = document.createElementNS(SVG, "polyline");
      const step = 600 / Math.max(1, this.keep - 1);
      const offset = this.keep - points.length;
      line.setAttribute("points", points.map((v, j) =>
        `${((offset + j) * step).toFixed(1)},${(175 - (v / top) * 155).toFixed(1)}`).join(" "));
      line.setAttribute("fill", "none");
      line.setAttribute("stroke", colour);
      line.setAttribute("stroke-width", "2");
      line.setAttribute("vector-effect", "non-scaling-stroke");
      this.svg.append(line);
      const swatch = h("i");
      swatch.style.background = colour; // CSSOM, not a style attribute: the CSP allows no inline style
      items.push(h("span", {}, swatch, `${name} ${num(Math.round(points.at(-1)))}`));
    }
    this.legend.replaceChildren(...items);
  }
}
