'use strict';
// ali-ons (pure JavaScript RocketMQ 4.x client) driver for python -m interop.
const { Producer, Consumer, Message } = require('ali-ons');
const { out, session, body, b64 } = require('./common');

const quiet = { info() {}, warn() {}, debug() {}, error() {} };
const DELAY_LEVEL = { 3: 2 }; // seconds -> level of the interop broker (interop/broker.py)
const SYSTEM = new Set(['TAGS', 'KEYS', 'UNIQ_KEY', 'WAIT', 'DELAY', 'MIN_OFFSET', 'MAX_OFFSET',
  'CONSUME_START_TIME', 'RETRY_TOPIC', 'REAL_TOPIC', 'REAL_QID', 'ORIGIN_MESSAGE_ID', 'RECONSUME_TIME',
  'MAX_RECONSUME_TIMES', 'TRAN_MSG', 'PGROUP', 'CLUSTER']);
const creds = req => req.creds ? { accessKey: req.creds.user, secretKey: req.creds.secret } : {};

async function produce(req) {
  const producer = new Producer({ nameSrv: req.namesrv, httpclient: {}, logger: quiet,
    producerGroup: 'PG_' + req.topic, ...creds(req) });
  await producer.ready();
  try {
    const window = req.msgs.length > 100 ? 200 : 1; // the burst: 200 sends in flight
    for (let i = 0; i < req.msgs.length; i += window) {
      await Promise.all(req.msgs.slice(i, i + window).map(async m => {
        const msg = new Message(req.topic, m.tag || '', body(m));
        if (m.key) msg.keys = [ m.key ];
        Object.assign(msg.properties, m.props || {});
        if (m.delay_s) msg.delayTimeLevel = DELAY_LEVEL[m.delay_s];
        const r = await producer.send(msg);
        if (r.sendStatus !== 'SEND_OK') throw new Error('send status ' + r.sendStatus);
      }));
    }
  } finally {
    await producer.close();
  }
}

async function consume(req, stop) {
  const consumer = new Consumer({ nameSrv: req.namesrv, httpclient: {}, logger: quiet,
    consumerGroup: req.group, consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET', persistent: true,
    persistentInterval: 500, rebalanceInterval: 2000, ...creds(req) });
  consumer.on('error', () => {});
  let count = 0;
  const expr = req.sql ? { expressionType: 'SQL92', subString: req.sql } : (req.tag_filter || '*');
  consumer.subscribe(req.topic, expr, async msg => {
    if (req.n !== null && count >= req.n) throw new Error('beyond N: left for the next consumer');
    count++;
    const props = {};
    for (const [k, v] of Object.entries(msg.properties || {})) if (!SYSTEM.has(k)) props[k] = v;
    const keys = Array.isArray(msg.keys) ? msg.keys.join(' ') : msg.keys;
    out({ msg: { body: b64(msg.body), key: keys, tag: msg.tags, props,
      ts: Number(msg.bornTimestamp), redelivered: msg.reconsumeTimes > 0 } });
    if (req.nack) throw new Error('refused on purpose (retry path)');
  });
  await consumer.ready();
  out({ ready: true });
  await stop;
  await new Promise(r => setTimeout(r, 1000)); // the last offsets persisted
  await consumer.close();
}

session({ produce, consume });
