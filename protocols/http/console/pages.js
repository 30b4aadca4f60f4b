// One function per page: read the API, return the page's node. Every broker-supplied string
// goes through h()/link()/table(), which make text nodes: nothing is parsed as HTML.
import { get, post } from "./api.js";
import { LiveChart, badge, bytes, card, duration, h, link, num, table, time } from "./dom.js";

const PROTOCOLS = ["remoting", "kafka", "amqp", "stomp"];
const REFRESH_MS = 2000;
const CHARTED_GROUPS = 8;

function lagCell(lag) {
  return h("span", { class: lag > 0 ? "lag-high" : null }, num(lag));
}

// ------------------------------------------------------------------ overview
function overviewBody(o) {
  const store = o.store;
  return h("div", {},
    h("div", { class: "cards" },
      card("Cluster", o.cluster, "cluster"), card("Broker", `${o.brokerName} (id ${o.brokerId})`, "broker"),
      card("Role", o.brokerRole, "role"), card("Version", o.version, "version"),
      card("Uptime", duration(o.uptimeSeconds), "uptime"), card("Topics", num(o.topics), "topics"),
      card("Queues", num(o.queues), "queues"), card("Put TPS", Number(o.putTps).toFixed(1), "putTps"),
      card("Get TPS", Number(o.getTps).toFixed(1), "getTps")),
    h("h2", {}, "Protocols"),
    table([
      { title: "Protocol", key: "protocol", cell: (r) => badge(r[0]) },
      { title: "Messages in", key: "in", num: true, cell: (r) => num(r[1].messagesIn) },
      { title: "Messages out", key: "out", num: true, cell: (r) => num(r[1].messagesOut) },
      { title: "Bytes in", num: true, cell: (r) => bytes(r[1].bytesIn) },
      { title: "Bytes out", num: true, cell: (r) => bytes(r[1].bytesOut) },
      { title: "Connections", num: true, cell: (r) => num(r[1].connections) },
    ], Object.entries(o.protocols)),
    h("h2", {}, "Listeners"),
    table([
      { title: "Front-end", cell: (l) => l.frontEnd }, { title: "Role", cell: (l) => l.role },
      { title: "Address", cell: (l) => `${l.host}:${l.port}` },
    ], o.listeners),
    o.replication ? replication(o.replication) : null,
    h("h2", {}, "Store"),
    h("div", { class: "cards" },
      card("CommitLog", bytes(store.commitLogMaxOffset - store.commitLogMinOffset)),
      card("Segments", num(store.commitLogSegments)),
      card("Flush behind", bytes(store.flushBehindBytes)),
      card("Dispatch behind", bytes(store.dispatchBehindBytes)),
      card("Index behind", bytes(store.indexBehindBytes)),
      card("Disk used", `${(store.diskUsageRatio * 100).toFixed(1)} %`)));
}

function replication(r) {
  return h("div", {},
    h("h2", {}, "Replication"),
    r.role === "SLAVE"
      ? h("div", { class: "cards" }, card("Master", r.master || "–", "master"),
          card("Connected", r.connected ? "yes" : "no", "connected"), card("Replicated to", num(r.offset)),
          card("Behind master", r.behindBytes < 0 ? "not known yet" : bytes(r.behindBytes), "behind"))
      : table([
          { title: "Slave", key: "slave", cell: (s) => s.address },
          { title: "Acknowledged offset", num: true, cell: (s) => num(s.ackOffset) },
          { title: "Behind", num: true, key: "behind", cell: (s) => bytes(s.behindBytes) },
          { title: "In sync", key: "inSync", cell: (s) => (s.inSync ? "yes" : "no") },
        ], r.slaves, "no slave connected"));
}

async function overview(route, ctx) {
  let last = await get(["overview"]);
  let lastAt = performance.now();
  const body = h("div", {}, overviewBody(last));
  const chart = new LiveChart("Messages per second, by protocol");
  ctx.every(REFRESH_MS, async () => {
    const now = await get(["overview"]);
    const at = performance.now();
    const seconds = Math.max(0.001, (at - lastAt) / 1000);
    const rates = {};
    for (const [protocol, figures] of Object.entries(now.protocols)) {
      const before = last.protocols[protocol] || figures;
      rates[`${protocol} in`] = Math.max(0, (figures.messagesIn - before.messagesIn) / seconds);
      rates[`${protocol} out`] = Math.max(0, (figures.messagesOut - before.messagesOut) / seconds);
    }
    chart.push(rates);
    body.replaceChildren(overviewBody(now));
    last = now;
    lastAt = at;
  });
  return h("section", {}, h("h1", {}, "Overview"), chart.node, body);
}

// ------------------------------------------------------------------ actions
/** A form for one action: fields, a confirmation question, the POST, its outcome shown. */
function actionForm(name, fields, question, submit) {
  const outcome = h("p", { class: "outcome", "data-action": name });
  const form = h("form", { class: "lookup", "data-action": name }, fields, h("button", { type: "submit" }, name));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(form).entries());
    if (!window.confirm(question(data))) return;
    outcome.className = "outcome";
    outcome.textContent = "…";
    try {
      const shown = await submit(data);
      outcome.replaceChildren(...[shown].flat());
    } catch (error) {
      outcome.className = "outcome error";
      outcome.textContent = String(error.message || error);
    }
  });
  return h("div", {}, form, outcome);
}

const input = (name, label, attrs = {}) => h("label", {}, label, h("input", { name, ...attrs }));
const optionalInt = (text) => (text === "" || text === undefined ? undefined : Number(text));

function createTopicForm() {
  return actionForm("Create or update", [
    input("topic", "Topic", { required: true }),
    input("readQueueNums", "Read queues", { type: "number", min: 1, max: 1024, placeholder: "default" }),
    input("writeQueueNums", "Write queues", { type: "number", min: 1, max: 1024, placeholder: "default" }),
    h("label", {}, "Permission", h("select", { name: "perm" },
      h("option", { value: "6" }, "read and write"), h("option", { value: "4" }, "read only"),
      h("option", { value: "2" }, "write only"))),
  ], (d) => `Create or update topic ${d.topic}?`, async (d) => {
    const t = await post(["topics"], { topic: d.topic, readQueueNums: optionalInt(d.readQueueNums),
      writeQueueNums: optionalInt(d.writeQueueNums), perm: Number(d.perm) });
    return ["Topic ", link(["topics", t.topic], t.topic), ` has ${t.readQueueNums} read and ${t.writeQueueNums} write queues.`];
  });
}

function sendMessageForm(topic) {
  return actionForm("Send", [
    input("keys", "Keys"), input("tags", "Tags"), input("body", "Body (text)", { size: 40 }),
  ], () => `Send this test message to ${topic}?`, async (d) => {
    const r = await post(["messages"], { topic, keys: d.keys, tags: d.tags, body: d.body });
    return ["Stored at queue ", String(r.queueId), " offset ", num(r.queueOffset), ": ",
      link(["messages"], "look it up", { topic, queue: r.queueId, offset: r.queueOffset })];
  });
}

function localNow() {
  const now = new Date();
  return new Date(now.getTime() - now.getTimezoneOffset() * 60000).toISOString().slice(0, 19);
}

function resetForm(group, topics) {
  return actionForm("Reset offsets", [
    h("label", {}, "Topic", h("select", { name: "topic" }, topics.map((t) => h("option", { value: t }, t)))),
    input("time", "To the first message stored at or after (your time zone)", { type: "datetime-local", step: 1, value: localNow(), required: true }),
  ], (d) => `Reset group ${group}'s committed offsets on ${d.topic} to ${d.time}? Consumers connected now may commit over it.`,
  async (d) => {
    const r = await post(["groups", group, "reset"], { topic: d.topic, timestamp: new Date(d.time).getTime() });
    return `Committed offsets now: ${Object.entries(r.offsets).map(([q, o]) => `queue ${q} at ${num(o)}`).join(", ")}.`;
  });
}

// ------------------------------------------------------------------ topics
function filtered(rows, placeholder, key, render) {
  const holder = h("div", {}, render(rows));
  const input = h("input", {
    class: "filter", type: "search", placeholder,
    oninput: () => {
      const text = input.value.toLowerCase();
      holder.replaceChildren(render(rows.filter((r) => key(r).toLowerCase().includes(text))));
    },
  });
  return h("div", {}, input, holder);
}

async function topics(route) {
  if (route.args.length) return topic(route.args[0]);
  const data = await get(["topics"]);
  const render = (rows) => table([
    { title: "Topic", key: "topic", cell: (t) => link(["topics", t.topic], t.topic) },
    { title: "Queues", num: true, cell: (t) => num(t.queues) },
    { title: "Messages", key: "messages", num: true, cell: (t) => num(t.messages) },
    { title: "Written by", key: "writtenBy", cell: (t) => writers(t.writtenBy) },
  ], rows, "no topic");
  return h("section", {}, h("h1", {}, `Topics (${num(data.total)})`),
    h("h2", {}, "Create or update a topic"), createTopicForm(),
    h("h2", {}, "All topics"),
    filtered(data.topics, "filter topics", (t) => t.topic, render));
}

/** The protocols whose producers wrote to a topic since the broker started, as badges. */
function writers(protocols) {
  return protocols.length ? protocols.map((p, i) => [i ? " " : "", badge(p)]) : h("span", { class: "muted" }, "–");
}

async function topic(name) {
  const t = await get(["topics", name]);
  return h("section", {},
    h("h1", {}, "Topic ", h("span", { class: "name" }, t.topic)),
    h("div", { class: "cards" }, card("Read queues", t.readQueueNums), card("Write queues", t.writeQueueNums),
      card("Permission", t.perm), card("Written by", writers(t.writtenBy), "writtenBy")),
    h("h2", {}, "Queues"),
    table([
      { title: "Queue", cell: (q) => q.queueId }, { title: "Min offset", num: true, cell: (q) => num(q.minOffset) },
      { title: "Max offset", key: "maxOffset", num: true, cell: (q) => num(q.maxOffset) },
      { title: "Last stored", cell: (q) => time(q.lastStoreTimestamp) },
      { title: "", cell: (q) => q.maxOffset > q.minOffset
          ? link(["messages"], "last message", { topic: t.topic, queue: q.queueId, offset: q.maxOffset - 1 }) : "" },
    ], t.queues),
    h("h2", {}, "Consumer groups"),
    t.groups.length ? h("ul", {}, t.groups.map((g) => h("li", {}, link(["groups", g], g)))) : h("p", { class: "muted" }, "none"),
    h("h2", {}, "Send a test message"), sendMessageForm(t.topic));
}

// ------------------------------------------------------------------ groups
async function groups(route, ctx) {
  if (route.args.length) return group(route.args[0], ctx);
  const data = await get(["groups"]);
  const render = (rows) => table([
    { title: "Group", key: "group", cell: (g) => link(["groups", g.group], g.group) },
    { title: "Lag", key: "lag", num: true, cell: (g) => lagCell(g.lag) },
    ...PROTOCOLS.map((p) => ({ title: p, key: p, num: true, cell: (g) => (g.members[p] ? num(g.members[p]) : "") })),
    { title: "Topics", cell: (g) => g.topics.map((t, i) => [i ? ", " : "", link(["topics", t], t)]) },
  ], rows, "no consumer group");
  // the groups furthest behind, sampled from the API while the page is open
  const chart = new LiveChart(`Lag of the ${CHARTED_GROUPS} groups furthest behind (messages)`);
  const sample = (d) => chart.push(Object.fromEntries([...d.groups].sort((a, b) => b.lag - a.lag)
    .slice(0, CHARTED_GROUPS).map((g) => [g.group, g.lag])));
  sample(data);
  ctx.every(REFRESH_MS, async () => sample(await get(["groups"])));
  return h("section", {}, h("h1", {}, `Consumer groups (${num(data.total)})`),
    h("p", { class: "muted" }, "One group's lag whatever protocol it consumes over; the protocol columns count its members connected now."),
    chart.node,
    filtered(data.groups, "filter groups", (g) => g.group, render));
}

function groupBody(g) {
  const topicsOf = Object.entries(g.topics);
  return h("div", {},
    h("div", { class: "cards" }, card("Lag", lagCell(g.lag), "lag"), card("Members", num(g.members.length), "members"),
      g.delivery ? [card("Ready", num(g.delivery.ready), "ready"), card("Unacked", num(g.delivery.unacked), "unacked")] : null),
    h("h2", {}, "Members"),
    table([
      { title: "Protocol", key: "protocol", cell: (m) => badge(m.protocol) },
      { title: "Address", key: "address", cell: (m) => m.address },
    ], g.members, "no member connected"),
    topicsOf.map(([name, t]) => h("div", { class: "group-topic" },
      h("h2", {}, "Topic ", link(["topics", name], name), " — lag ", lagCell(t.lag)),
      table([
        { title: "Queue", cell: (q) => q.queueId },
        { title: "Broker offset", num: true, cell: (q) => num(q.brokerOffset) },
        { title: "Committed offset", num: true, cell: (q) => (q.consumerOffset < 0 ? "–" : num(q.consumerOffset)) },
        { title: "Lag", key: "lag", num: true, cell: (q) => lagCell(q.lag) },
      ], t.queues))));
}

async function group(name, ctx) {
  const g = await get(["groups", name]);
  const body = h("div", {}, groupBody(g));
  const chart = new LiveChart("Lag (messages)");
  chart.push({ lag: g.lag });
  ctx.every(REFRESH_MS, async () => {
    const now = await get(["groups", name]);
    chart.push({ lag: now.lag });
    body.replaceChildren(groupBody(now));
  });
  const topicsOf = Object.keys(g.topics);
  return h("section", {}, h("h1", {}, "Consumer group ", h("span", { class: "name" }, g.group)), body, chart.node,
    topicsOf.length ? [h("h2", {}, "Reset offsets by time"), resetForm(g.group, topicsOf)] : null);
}

// ------------------------------------------------------------------ connections
async function connections() {
  const data = await get(["connections"]);
  return h("section", {}, h("h1", {}, "Connections"),
    Object.entries(data.protocols).map(([protocol, p]) => h("div", { "data-protocol": protocol },
      h("h2", {}, badge(protocol), ` ${num(p.total)} open, ${num(p.producers)} producing, ${num(p.consumers)} consuming`),
      table([
        { title: "Address", key: "address", cell: (c) => c.address },
        { title: "Produces", cell: (c) => (c.produces ? "yes" : "") },
        { title: "Consumes", cell: (c) => (c.consumes ? "yes" : "") },
        { title: "Consumer groups", key: "groups", cell: (c) => c.consumerGroups.map((g, i) => [i ? ", " : "", link(["groups", g], g)]) },
      ], p.connections, "no connection"))));
}

// ------------------------------------------------------------------ messages
const LOOKUPS = { key: "Key", uniqueKey: "Unique key (message id)", offset: "Queue offset", offsetMsgId: "Offset message id" };
const LOOKUP_FIELDS = { key: ["topic", "key"], uniqueKey: ["topic", "uniqueKey"], offset: ["topic", "queue", "offset"],
  offsetMsgId: ["offsetMsgId"] };

function lookupForm(query) {
  const by = LOOKUPS[query.get("by")] ? query.get("by")
    : query.has("uniqueKey") ? "uniqueKey" : query.has("offset") ? "offset" : query.has("offsetMsgId") ? "offsetMsgId" : "key";
  const field = (name, label, attrs = {}) => input(name, label, { value: query.get(name) || "", ...attrs });
  const select = h("select", { name: "by" }, Object.entries(LOOKUPS).map(([value, label]) =>
    h("option", { value, selected: value === by }, label)));
  const form = h("form", { class: "lookup" },
    h("label", {}, "Look up by", select),
    field("topic", "Topic"), field("key", "Key"), field("uniqueKey", "Unique key"),
    field("queue", "Queue", { type: "number", min: 0 }), field("offset", "Offset", { type: "number", min: 0 }),
    field("offsetMsgId", "Offset message id"),
    h("button", { type: "submit" }, "Look up"));
  const showFields = () => {
    const wanted = LOOKUP_FIELDS[select.value];
    for (const element of form.querySelectorAll("input")) element.parentElement.hidden = !wanted.includes(element.name);
  };
  select.addEventListener("change", showFields);
  showFields();
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const q = new URLSearchParams({ by: data.get("by") });
    for (const name of LOOKUP_FIELDS[data.get("by")]) q.set(name, data.get(name));
    location.hash = "#/messages?" + q.toString();
  });
  return form;
}

function messageNode(m) {
  const properties = Object.entries(m.properties).sort(([a], [b]) => a.localeCompare(b));
  return h("div", { class: "message" },
    h("div", { class: "cards" }, card("Topic", m.topic), card("Queue / offset", `${m.queueId} / ${num(m.queueOffset)}`),
      card("Keys", m.keys ?? "–", "keys"), card("Tags", m.tags ?? "–"), card("Stored", time(m.storeTimestamp)),
      card("Born host", m.bornHost), card("Size", bytes(m.bodySize))),
    h("h2", {}, "Ids"),
    table([{ title: "Id", cell: (r) => r[0] }, { title: "Value", cell: (r) => r[1] ?? "–" }],
      [["Unique key", m.uniqueKey], ["Offset message id", m.offsetMsgId], ["CommitLog offset", num(m.commitLogOffset)]]),
    h("h2", {}, "Properties"),
    table([{ title: "Name", cell: (p) => p[0] }, { title: "Value", cell: (p) => p[1] }], properties),
    h("h2", {}, `Body (${m.bodyEncoding}${m.bodyTruncated ? ", first 4 KiB" : ""})`),
    h("pre", { class: "body", "data-encoding": m.bodyEncoding }, m.body));
}

async function messages(route) {
  const q = route.query;
  const form = lookupForm(q);
  let found = null;
  const by = q.get("by");
  if (by === "offsetMsgId" && q.get("offsetMsgId")) found = await get(["messages", q.get("offsetMsgId")]);
  else if (q.get("topic")) {
    const query = { topic: q.get("topic") };
    if (by === "uniqueKey" || (!by && q.has("uniqueKey"))) query.uniqueKey = q.get("uniqueKey");
    else if (by === "offset" || (!by && q.has("offset"))) Object.assign(query, { queue: q.get("queue"), offset: q.get("offset") });
    else query.key = q.get("key") || "";
    found = await get(["messages"], query).catch((error) => ({ error: error.message }));
  }
  return h("section", {}, h("h1", {}, "Message lookup"), form,
    found === null ? null
      : found.error ? h("p", { class: "error" }, found.error)
      : h("div", { id: "results" }, h("p", { class: "muted" }, `${found.messages.length} found`), found.messages.map(messageNode)));
}

// ------------------------------------------------------------------ AMQP
const flags = (entity, names) => names.filter((name) => entity[name]).join(", ");

async function amqp() {
  const view = await get(["amqp"]);
  return h("section", {}, h("h1", {}, `AMQP: virtual host ${view.vhost}`),
    h("h2", {}, `Exchanges (${num(view.exchanges.length)})`),
    table([
      { title: "Name", key: "name", cell: (e) => (e.name === "" ? "(default)" : e.name) },
      { title: "Type", cell: (e) => e.type },
      { title: "Features", cell: (e) => flags(e, ["durable", "autoDelete", "internal"]) },
      { title: "Bound to exchanges", cell: (e) => e.exchangeBindings.map((b) => h("div", {}, `${b.destination} (${b.routingKey})`)) },
    ], view.exchanges, "no exchange"),
    h("h2", {}, `Queues (${num(view.queues.length)})`),
    table([
      { title: "Name", key: "name", cell: (q) => q.name },
      { title: "Features", cell: (q) => flags(q, ["durable", "exclusive", "autoDelete"]) },
      { title: "Consumers", key: "consumers", num: true, cell: (q) => num(q.consumers) },
      { title: "Ready", key: "ready", num: true, cell: (q) => num(q.messagesReady) },
      { title: "Bindings", key: "bindings", cell: (q) => q.bindings.map((b) => h("div", {}, `${b.exchange || "(default)"} → ${b.routingKey}`)) },
    ], view.queues, "no queue"));
}

async function missing(route) {
  return h("section", {}, h("h1", {}, "Not found"), h("p", {}, `No page named ${route.name}.`), link(["overview"], "Overview"));
}

export const pages = { overview, topics, groups, connections, messages, amqp, missing };
