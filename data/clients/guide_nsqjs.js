// nsqjs 0.13.0, unchanged, as a consumer that discovers nsqd through lookupd (the client
// guide scenario). Usage: node guide_nsqjs.js LOOKUPD_HTTP[,LOOKUPD_HTTP...] TOPIC N [STAY]
// Bodies starting with "fail" fail once (requeue with backoff); heartbeats and lookupd
// polls every second; then it stays STAY s (1.5), closes and prints a JSON report.
const nsq = require('nsqjs')

const [lookupds, topic, n] = [process.argv[2].split(','), process.argv[3], +process.argv[4]]
const stay = process.argv[5] ? +process.argv[5] : 1.5
const done = new Set()
let failedFirst = 0
const reader = new nsq.Reader(topic, 'c', {
  lookupdHTTPAddresses: lookupds, lookupdPollInterval: 1, maxInFlight: 4,
  heartbeatInterval: 1, maxBackoffDuration: 0.5,
})
reader.on('error', () => {})
reader.on('message', (msg) => {
  const body = msg.body.toString()
  if (body.startsWith('fail') && msg.attempts === 1) {
    failedFirst += 1
    msg.requeue(0, true)
    return
  }
  done.add(body)
  msg.finish()
  if (done.size === n) {
    setTimeout(() => {
      console.log(JSON.stringify({ done: done.size, failed_first: failedFirst }))
      reader.close()
      setTimeout(() => process.exit(0), 500)
    }, stay * 1000)
  }
})
setTimeout(() => { console.log(JSON.stringify({ done: done.size, timeout: true })); process.exit(1) }, 30000)
reader.connect()
