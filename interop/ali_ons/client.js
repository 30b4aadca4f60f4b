'use strict';
// Drive ali-ons 3.12.0 (pure JavaScript RocketMQ 4.x client) for Rocketport's interop tests.
//   node client.js produce NAMESRV TOPIC N [TAG] [BODY_PREFIX]
//   node client.js consume NAMESRV TOPIC GROUP N [EXPR] [FAIL_TIMES] [TIMEOUT_S] [SQL92]
// One JSON object per stdout line (a send result or a delivery). consume exits 0 once N
// distinct bodies were consumed successfully (a delivery fails while its reconsumeTimes
// is below FAIL_TIMES), 1 at the timeout. ACCESS_KEY and SECRET_KEY in the environment turn
// on the client's request signing (RocketMQ ACL). Never used by the broker itself.
const { Producer, Consumer, Message } = require('ali-ons');

const [cmd, nameSrv, topic, ...rest] = process.argv.slice(2);
const out = obj => process.stdout.write(JSON.stringify(obj) + '\n');
const quiet = { info() {}, warn() {}, debug() {}, error() {} };
const credentials = process.env.ACCESS_KEY
  ? { accessKey: process.env.ACCESS_KEY, secretKey: process.env.SECRET_KEY || '' } : {};

async function produce() {
  const [n, tag = 'TagA', prefix = 'body-'] = rest;
  const producer = new Producer({ nameSrv, httpclient: {}, producerGroup: 'PG_' + topic, logger: quiet,
    ...credentials });
  await producer.ready();
  for (let i = 0; i < Number(n); i++) {
    const msg = new Message(topic, tag, prefix + i);
    msg.keys = [ 'key-' + i ];
    msg.properties.seq = String(i);
    const r = await producer.send(msg);
    out({ status: r.sendStatus, msgId: r.msgId, queueId: r.messageQueue.queueId, queueOffset: r.queueOffset });
  }
  await producer.close();
  return 0;
}

async function consume() {
  const [group, n, expr = '*', failTimes = '0', timeout = '60', sql = ''] = rest;
  const consumer = new Consumer({ nameSrv, httpclient: {}, consumerGroup: group, logger: quiet,
    maxReconsumeTimes: 2, consumeTimeout: 5000, persistent: true, persistentInterval: 500, ...credentials });
  const done = new Set();
  let finish;
  const finished = new Promise(resolve => { finish = resolve; });
  const subscription = sql ? { expressionType: 'SQL92', subString: expr } : expr;
  consumer.subscribe(topic, subscription, async msg => {
    const body = msg.body.toString();
    const fail = msg.reconsumeTimes < Number(failTimes);
    out({ topic: msg.topic, body, tags: msg.tags, keys: msg.keys, properties: msg.properties,
      reconsumeTimes: msg.reconsumeTimes, queueId: msg.queueId, queueOffset: msg.queueOffset,
      failed: fail });
    if (fail) throw new Error('failing on purpose');
    done.add(body);
    if (done.size >= Number(n)) finish(0);
  });
  consumer.on('error', () => {});
  await consumer.ready();
  const timer = setTimeout(() => finish(1), Number(timeout) * 1000);
  const code = await finished;
  clearTimeout(timer);
  await new Promise(r => setTimeout(r, 1500)); // let offsets be committed
  await consumer.close();
  return code;
}

(cmd === 'produce' ? produce() : consume())
  .then(code => process.exit(code))
  .catch(err => { process.stderr.write(String(err && err.stack || err) + '\n'); process.exit(2); });
