'use strict';
// The JSON-lines driver protocol of interop/clients/driver.py: one request line on stdin,
// then "stop" (or the end of stdin) asks for a clean close; results are JSON lines on stdout.
const readline = require('readline');

const out = obj => process.stdout.write(JSON.stringify(obj) + '\n');

function session(handlers) {
  const rl = readline.createInterface({ input: process.stdin });
  let request = null;
  let stopped;
  const stop = new Promise(resolve => { stopped = resolve; });
  rl.on('line', line => {
    if (request === null) {
      request = JSON.parse(line);
      handlers[request.cmd](request, stop)
        .then(() => { out({ done: true }); rl.close(); process.exit(0); })
        .catch(err => { out({ error: String(err && err.message || err) }); process.exit(1); });
    } else if (line.trim() === 'stop') {
      stopped();
    }
  });
  rl.on('close', () => stopped());
}

const body = m => Buffer.from(m.body, 'base64');
const b64 = buf => Buffer.from(buf || '').toString('base64');
const hostPort = addr => { const i = addr.lastIndexOf(':'); return [addr.slice(0, i), Number(addr.slice(i + 1))]; };

module.exports = { out, session, body, b64, hostPort };
