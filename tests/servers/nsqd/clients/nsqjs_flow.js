// Runs nsqjs 0.13.0 (Reader + Writer), unchanged, against a broker; prints a JSON report.
// Usage: node nsqjs_flow.js TCP_ADDRESS TOPIC MODE [CA_FILE]   (MODE: plain|snappy|deflate|tls)
// Flow: PUB, MPUB (array), deferPublish (a one-element array: nsqjs 0.13.0 throws on a
// plain string); the Reader FINs, REQs "req-me" once, TOUCHes "touch-me" past its 1 s
// msg_timeout, lets "timeout-me" time out once; heartbeats every second.
const fs = require('fs')
const nsq = require('nsqjs')

const [addr, topic, mode, caFile] = process.argv.slice(2)
const [host, port] = addr.split(':')
const opts = {}
if (mode === 'snappy') opts.snappy = true
if (mode === 'deflate') opts.deflate = true
if (mode === 'tls') {
  opts.tls = true
  opts.tlsVerification = true
  opts.ca = fs.readFileSync(caFile)
}

const expected = ['pub-0', 'pub-1', 'mpub-0', 'mpub-1', 'mpub-2', 'deferred',
  'req-me', 'touch-me', 'timeout-me']
const done = {}
const attempts = {}
const report = { errors: [] }

const reader = new nsq.Reader(topic, 'c', Object.assign({
  nsqdTCPAddresses: [addr], maxInFlight: 20, heartbeatInterval: 1, messageTimeout: 1000,
}, opts))
reader.on('error', (err) => report.errors.push(String(err)))
reader.on('nsqd_closed', () => { report.closed = (report.closed || 0) + 1 })

function finishIfDone () {
  if (expected.every((b) => b in done) && !report.finishing) {
    report.finishing = true
    setTimeout(() => {  // stay 2.5 s for heartbeats; the connection must survive
      report.done = Object.keys(done).sort()
      report.attempts = attempts
      report.closed = report.closed || 0
      console.log(JSON.stringify(report))
      writer.close()
      reader.close()
      setTimeout(() => process.exit(0), 200)
    }, 2500)
  }
}

reader.on('message', (msg) => {
  const body = msg.body.toString()
  ;(attempts[body] = attempts[body] || []).push(msg.attempts)
  if (body === 'req-me' && msg.attempts === 1) return msg.requeue(0, false)
  if (body === 'timeout-me' && msg.attempts === 1) return
  if (body === 'touch-me' && msg.attempts === 1) {
    let n = 0
    const timer = setInterval(() => {
      n += 1
      if (n <= 3) return msg.touch()
      clearInterval(timer)
      msg.finish()
      done[body] = msg.attempts
      finishIfDone()
    }, 500)
    return
  }
  msg.finish()
  done[body] = msg.attempts
  finishIfDone()
})
reader.connect()

const writer = new nsq.Writer(host, Number(port), opts)
writer.on('error', (err) => report.errors.push(String(err)))
writer.on('ready', () => {
  const cb = (err) => { if (err) report.errors.push(String(err)) }
  writer.publish(topic, 'pub-0', cb)
  writer.publish(topic, 'pub-1', cb)
  writer.publish(topic, ['mpub-0', 'mpub-1', 'mpub-2'], cb)
  writer.deferPublish(topic, ['deferred'], 500, cb)
  for (const b of ['req-me', 'touch-me', 'timeout-me']) writer.publish(topic, b, cb)
})
writer.connect()
setTimeout(() => { console.log(JSON.stringify(Object.assign(report, { timeout: true, done: Object.keys(done).sort(), attempts }))); process.exit(1) }, 30000)
