'use strict';
// amqplib (npm AMQP 0-9-1 client) driver for python -m interop; the mapping of
// interop/clients/amqp_common.py: a topic exchange per scenario topic, the group a queue bound
// to it, routing key = tag, headers = properties, x-delay = delay in ms.
const amqp = require('amqplib');
const { out, session, body, b64, hostPort } = require('./common');

function url(req) {
  const [host, port] = hostPort(req.amqp);
  const auth = req.creds ? `${encodeURIComponent(req.creds.user)}:${encodeURIComponent(req.creds.secret)}` : 'guest:guest';
  return `amqp://${auth}@${host}:${port}`;
}

function bindingKeys(req) {
  return req.tag_filter ? req.tag_filter.split('||').map(t => t.trim()) : ['#'];
}

async function prepare(req) {
  const conn = await amqp.connect(url(req));
  try {
    const ch = await conn.createChannel();
    await ch.assertExchange(req.topic, 'topic', { durable: true });
    await ch.assertQueue(req.group, { durable: true });
    for (const key of bindingKeys(req)) await ch.bindQueue(req.group, req.topic, key);
  } finally {
    await conn.close();
  }
}

async function produce(req) {
  const conn = await amqp.connect(url(req));
  try {
    const ch = await conn.createConfirmChannel();
    const closed = new Promise((_, reject) => ch.on('close', () => reject(new Error('channel closed by the broker'))));
    closed.catch(() => {});
    await ch.assertExchange(req.topic, 'topic', { durable: true });
    for (const m of req.msgs) {
      const headers = Object.assign({}, m.props || {});
      if (m.delay_s) headers['x-delay'] = m.delay_s * 1000;
      if (!ch.publish(req.topic, m.tag || '', body(m), { headers, persistent: true })) {
        await new Promise(r => ch.once('drain', r));
      }
    }
    await Promise.race([ch.waitForConfirms(), closed]);
  } finally {
    await conn.close().catch(() => {});
  }
}

async function consume(req, stop) {
  const conn = await amqp.connect(url(req));
  const ch = await conn.createChannel();
  ch.on('error', e => out({ error: String(e.message || e) }));
  await ch.prefetch(100);
  let count = 0;
  await ch.consume(req.group, msg => {
    if (msg === null) return;
    if (req.n !== null && count >= req.n) return; // unacknowledged: back to the queue at close
    count++;
    const props = {};
    for (const [k, v] of Object.entries(msg.properties.headers || {})) props[k] = String(v);
    out({ msg: { body: b64(msg.content), tag: msg.fields.routingKey, props,
      redelivered: msg.fields.redelivered } });
    if (req.nack) ch.nack(msg, false, false); else ch.ack(msg);
  });
  out({ ready: true });
  await stop;
  await conn.close().catch(() => {});
}

session({ prepare, produce, consume });
