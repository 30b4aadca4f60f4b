// Drive stompit against a broker for Rocketport's STOMP tests; one JSON object per line.
//   node client.js produce HOST PORT DESTINATION N [--tx] [name=value ...]
//   node client.js consume HOST PORT DESTINATION N [--nack-first] [name=value ...]
// produce sends N messages (body "m-{i}"), in one transaction with --tx, and waits for a
// receipt on the last; consume subscribes with ack client-individual, prints N messages
// (headers, body) and acks each (NACKs the first delivery with --nack-first). Exit 0 only
// when all that happened within 60 s.
"use strict";
const stompit = require("stompit");

const [cmd, host, port, destination, count, ...rest] = process.argv.slice(2);
const n = parseInt(count, 10);
const flags = new Set(rest.filter((a) => a.startsWith("--")));
const extra = Object.fromEntries(rest.filter((a) => !a.startsWith("--")).map((a) => a.split("=", 2)));
const out = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
setTimeout(() => { console.error("timed out"); process.exit(3); }, 60000).unref();

stompit.connect({ host, port: parseInt(port, 10), connectHeaders: { host: "/", "heart-beat": "0,0" } }, (err, client) => {
  if (err) { console.error("connect: " + err.message); process.exit(2); }
  client.on("error", (e) => { console.error("error: " + e.message); process.exit(2); });
  if (cmd === "produce") {
    const tx = flags.has("--tx") ? client.begin() : null;
    for (let i = 0; i < n; i++) {
      const headers = Object.assign({ destination }, extra);
      const frame = tx ? tx.send(headers) : client.send(headers);
      frame.write("m-" + i);
      frame.end();
    }
    if (tx) tx.commit();
    client.disconnect((e) => { if (e) { console.error(e.message); process.exit(2); } out({ sent: n }); });
  } else if (cmd === "consume") {
    let seen = 0;
    let nacked = false;
    client.subscribe(Object.assign({ destination, ack: "client-individual" }, extra), (e, message) => {
      if (e) { console.error("subscribe: " + e.message); process.exit(2); }
      message.readString("utf-8", (e2, body) => {
        if (e2) { console.error(e2.message); process.exit(2); }
        if (flags.has("--nack-first") && !nacked) {
          nacked = true;
          out({ nacked: body, headers: message.headers });
          client.nack(message);
          return;
        }
        out({ body, headers: message.headers });
        client.ack(message);
        if (++seen === n) client.disconnect(() => process.exit(0));
      });
    });
  }
});
