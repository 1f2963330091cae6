// Real nsqjs 0.13.0 traffic for a sample capture (needs nsqjs in NODE_PATH).
// Usage: node nsqjs_traffic.js TCP_ADDRESS TOPIC
// A Writer publishes with PUB and MPUB; a Reader (maxInFlight 5) FINs every message and
// REQs "req-me" once; then both close. Prints a one-line JSON report.
const nsq = require('nsqjs')

const [addr, topic] = process.argv.slice(2)
const [host, port] = addr.split(':')
const bodies = ['js-0', 'js-1', 'js-2', 'batch-0', 'batch-1', 'req-me']
const done = new Set()
const report = { received: 0, errors: [] }

const reader = new nsq.Reader(topic, 'archive', {
  nsqdTCPAddresses: [addr], maxInFlight: 5, heartbeatInterval: 1,
})
reader.on('error', (err) => report.errors.push(String(err)))
reader.on('message', (msg) => {
  report.received += 1
  const body = msg.body.toString()
  if (body === 'req-me' && msg.attempts === 1) {
    msg.requeue(0, false)
    return
  }
  msg.finish()
  done.add(body)
  if (done.size === bodies.length) {
    setTimeout(() => {
      report.done = done.size
      console.log(JSON.stringify(report))
      reader.close()
      writer.close()
      setTimeout(() => process.exit(0), 300)
    }, 300)
  }
})
reader.connect()

const writer = new nsq.Writer(host, Number(port), { heartbeatInterval: 1 })
writer.on('error', (err) => report.errors.push(String(err)))
writer.on('ready', () => {
  writer.publish(topic, 'js-0')
  writer.publish(topic, 'js-1')
  writer.publish(topic, 'js-2')
  writer.publish(topic, ['batch-0', 'batch-1'])
  writer.publish(topic, 'req-me')
})
writer.connect()
setTimeout(() => { console.log(JSON.stringify(report)); process.exit(1) }, 15000)
