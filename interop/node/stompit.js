'use strict';
// stompit (npm STOMP client) driver for python -m interop; the mapping of
// interop/clients/stomp_common.py: /queue/TOPIC with x-group, x-tags, x-keys, x-delay.
const stompit = require('stompit');
const { out, session, body, b64, hostPort } = require('./common');

const OWN = new Set(['destination', 'subscription', 'message-id', 'ack', 'content-length',
  'content-type', 'redelivered', 'x-reconsume-times', 'x-tags', 'x-keys', 'receipt']);

function connect(req) {
  const [host, port] = hostPort(req.stomp);
  const connectHeaders = { host: '/', 'heart-beat': '0,0', 'accept-version': '1.2' };
  if (req.creds) Object.assign(connectHeaders, { login: req.creds.user, passcode: req.creds.secret });
  return new Promise((resolve, reject) => {
    stompit.connect({ host, port, connectHeaders }, (err, client) => err ? reject(err) : resolve(client));
  });
}

function sendHeaders(topic, m) {
  const h = Object.assign({ destination: '/queue/' + topic }, m.props || {});
  if (m.tag) h['x-tags'] = m.tag;
  if (m.key) h['x-keys'] = m.key;
  if (m.delay_s) h['x-delay'] = String(m.delay_s * 1000);
  return h;
}

// every frame before a DISCONNECT's receipt is done: errors arrive before it
function disconnect(client, errors) {
  return new Promise((resolve, reject) => client.disconnect(e => {
    if (e || errors.length) reject(e || errors[0]); else resolve();
  }));
}

async function produce(req) {
  const client = await connect(req);
  const errors = [];
  client.on('error', e => errors.push(e));
  for (const m of req.msgs) {
    const frame = client.send(sendHeaders(req.topic, m));
    frame.write(body(m));
    frame.end();
  }
  await disconnect(client, errors);
}

async function transaction(req) {
  const client = await connect(req);
  const errors = [];
  client.on('error', e => errors.push(e));
  for (const [msgs, commit] of [[req.commit, true], [req.abort, false]]) {
    const tx = client.begin();
    for (const m of msgs) {
      const frame = tx.send(sendHeaders(req.topic, m));
      frame.write(body(m));
      frame.end();
    }
    if (commit) tx.commit(); else tx.abort();
  }
  await disconnect(client, errors);
}

async function consume(req, stop) {
  const client = await connect(req);
  const errors = [];
  client.on('error', e => { errors.push(e); out({ error: String(e.message || e) }); });
  const headers = { destination: '/queue/' + req.topic, ack: 'client-individual', 'x-group': req.group,
                    'x-retry': 'true' };  // a NACK takes RocketMQ's retry schedule (retry_dlq)
  if (req.tag_filter) headers['x-tag-filter'] = req.tag_filter;
  if (req.sql) headers.selector = req.sql;
  let count = 0;
  client.subscribe(headers, (err, message) => {
    if (err) { out({ error: String(err.message || err) }); return; }
    const chunks = [];
    message.on('data', c => chunks.push(c));
    message.on('end', () => {
      if (req.n !== null && count >= req.n) return; // unacknowledged: redelivered to the group
      count++;
      const h = message.headers;
      const props = {};
      for (const [k, v] of Object.entries(h)) if (!OWN.has(k)) props[k] = v;
      out({ msg: { body: b64(Buffer.concat(chunks)), key: h['x-keys'], tag: h['x-tags'], props,
        redelivered: h.redelivered === 'true' } });
      if (req.nack) client.nack(message); else client.ack(message);
    });
  });
  out({ ready: true });
  await stop;
  await disconnect(client, []).catch(() => {});
}

session({ produce, transaction, consume });
