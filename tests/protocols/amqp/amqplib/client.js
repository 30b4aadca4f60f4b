// amqplib against Rocketport: node client.js URL COUNT
// Declares a topic exchange and a queue, publishes COUNT messages with properties and headers
// on a confirm channel, consumes them with prefetch, nacks the first delivery once (requeue)
// and acks everything; prints one JSON line per delivery and a summary line.
const amqp = require("amqplib");

async function main() {
  const [url, countText] = process.argv.slice(2);
  const count = parseInt(countText, 10);
  const conn = await amqp.connect(url);
  const ch = await conn.createConfirmChannel();
  await ch.assertExchange("js-events", "topic", { durable: true });
  const { queue } = await ch.assertQueue("", { exclusive: true });
  await ch.bindQueue(queue, "js-events", "js.#");
  for (let i = 0; i < count; i++) {
    ch.publish("js-events", `js.item.${i}`, Buffer.from(`js-${i}`), {
      persistent: true, contentType: "text/plain", correlationId: `c-${i}`, headers: { n: `${i}` },
    });
  }
  await ch.waitForConfirms();
  await ch.prefetch(5);
  let acked = 0;
  let nacked = false;
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("timed out")), 30000);
    ch.consume(queue, (msg) => {
      console.log(JSON.stringify({
        body: msg.content.toString(), routingKey: msg.fields.routingKey, exchange: msg.fields.exchange,
        redelivered: msg.fields.redelivered, correlationId: msg.properties.correlationId,
        contentType: msg.properties.contentType, headers: msg.properties.headers,
      }));
      if (!nacked) {
        nacked = true;
        ch.nack(msg, false, true);
        return;
      }
      ch.ack(msg);
      acked += 1;
      if (acked === count) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  await ch.close();
  await conn.close();
  console.log(JSON.stringify({ done: acked }));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
