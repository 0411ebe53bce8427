// sandboxkit interp kernel v1 for Node.js: runs cells in one persistent vm
// context and answers through files (see the package doc of interp).
// It needs only Node's own modules. Usage: node kernel.js DIR
'use strict';
const fs = require('fs');
const path = require('path');
const vm = require('vm');
const util = require('util');
const { spawn } = require('child_process');

const D = process.argv[2];
const CHUNK = 32 << 10;
let ev = null; // fd of the current cell's event file
let cur = '0';
let lastWake = 0;
// The current cell's caps (from its request) and what it sent.
const caps = { stdout: -1, stderr: -1, results: 100, resultBytes: 10 << 20, slack: 64 << 10 };
const sent = { stdout: 0, stderr: 0, results: 0, resultBytes: 0 };
const cut = { stdout: false, stderr: false, results: false };

function wake(n, what) {
  let fd;
  try {
    fd = fs.openSync(path.join(D, 'out'), fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
  } catch (e) {
    return; // nobody listens
  }
  try { fs.writeSync(fd, `${n} ${what}\n`); } catch (e) { /* full: the client looks anyway */ }
  fs.closeSync(fd);
}

function emit(obj) {
  if (ev !== null) fs.writeSync(ev, JSON.stringify(obj).replace(/[\u007f-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0')) + '\n');
}

function stream(name, data) {
  let b = Buffer.isBuffer(data) ? data : Buffer.from(String(data), 'utf8');
  if (caps[name] >= 0) {
    const room = Math.max(caps[name] - sent[name], 0);
    if (b.length > room) {
      cut[name] = true;
      b = b.subarray(0, room);
    }
    sent[name] += b.length;
  }
  for (let i = 0; i < b.length; i += CHUNK) {
    emit({ type: name, data: b.subarray(i, i + CHUNK).toString('base64') });
  }
  const now = Date.now();
  if (now - lastWake >= 200) {
    lastWake = now;
    wake(cur, 'out');
  }
}

// The cells' console and process.stdout/stderr write into the events.
const EventEmitter = require('events');
const out = Object.assign(new EventEmitter(), { write: (d) => { stream('stdout', d); return true; } });
const err = Object.assign(new EventEmitter(), { write: (d) => { stream('stderr', d); return true; } });
const cellConsole = new console.Console({ stdout: out, stderr: err });
const sandbox = { console: cellConsole, require, process, Buffer, setTimeout, clearTimeout, setInterval, clearInterval };
sandbox.globalThis = sandbox;
const context = vm.createContext(sandbox);
process.stdout.write = out.write;
process.stderr.write = err.write;

function bundle(v) {
  const data = { 'text/plain': util.inspect(v) };
  if (v !== null && typeof v === 'object') {
    for (const [m, mime] of [['_repr_html_', 'text/html'], ['_repr_markdown_', 'text/markdown']]) {
      if (typeof v[m] === 'function') {
        try { data[mime] = String(v[m]()); } catch (e) { /* not shown */ }
      }
    }
  }
  return data;
}

// emitResult emits a result within the cell's caps: past the count it is
// dropped; text/plain is cut at the room left (and a margin the client
// needs to redact it), other forms larger than that are dropped.
function emitResult(main, data) {
  if (sent.results >= caps.results) {
    cut.results = true;
    return;
  }
  sent.results++;
  let room = Math.max(caps.resultBytes - sent.resultBytes, 0);
  const lim = room + caps.slack;
  const out = {};
  let textCut = false;
  let dropped = false;
  for (const [mime, v0] of Object.entries(data)) {
    let v = v0;
    let size = Buffer.byteLength(v, 'utf8');
    if (size > lim) {
      if (mime !== 'text/plain') {
        cut.results = dropped = true;
        continue;
      }
      v = Buffer.from(v, 'utf8').subarray(0, lim).toString('utf8').replace(/\ufffd$/, '');
      size = lim;
      textCut = true;
    }
    out[mime] = v;
    room -= Math.min(size, room);
  }
  sent.resultBytes = caps.resultBytes - room;
  const e = { type: 'result', main, data: out };
  if (textCut) e.cut = true;
  if (dropped) e.dropped = true;
  emit(e);
}

let count = 0;
function run(n, code, timeout) {
  count++;
  const name = `<cell-${count}>`;
  let error = null;
  let interrupted = false;
  let timedOut = false;
  try {
    const script = new vm.Script(code, { filename: name });
    const opts = { breakOnSigint: true };
    if (timeout > 0) opts.timeout = Math.max(1, Math.round(timeout * 1000));
    const v = script.runInContext(context, opts);
    if (v !== undefined) {
      sandbox._ = v;
      emitResult(true, bundle(v));
    }
  } catch (e) {
    error = e;
    const msg = e && e.message || '';
    if (e && e.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') { interrupted = timedOut = true; }
    if (e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') { interrupted = true; }
  }
  if (error !== null) {
    const e = error;
    const nameOf = e && e.constructor && e.constructor.name || typeof e;
    const stack = (e && e.stack ? String(e.stack) : String(e)).split('\n');
    const keep = stack.filter((l, i) => i === 0 || l.includes('<cell-'));
    // An exception can carry any amount of text: the host keeps 64 KiB of
    // each, so no more is sent.
    let cut = false;
    const short = (s) => { if (s.length > 65536) { cut = true; return s.slice(0, 65536); } return s; };
    const value = short(e && e.message !== undefined ? String(e.message) : String(e));
    emit({ type: 'error', name: timedOut || interrupted ? 'KeyboardInterrupt' : (e && e.name) || nameOf, value, traceback: keep.map((l) => short(l) + '\n'), cut });
  }
  return { interrupted, timedOut };
}

function serve(n) {
  const req = path.join(D, 'req', n);
  const evp = path.join(D, 'ev', n);
  if (fs.existsSync(evp + '.done')) return;
  let raw;
  try { raw = fs.readFileSync(req); } catch (e) { return; }
  const nl = raw.indexOf(10);
  let opts = {};
  try { opts = JSON.parse(raw.subarray(0, nl).toString()); } catch (e) { /* defaults */ }
  const code = raw.subarray(nl + 1).toString('utf8');
  // Runs of one kernel are served in order: the events of the request
  // before the previous one were read long ago.
  const old = path.join(D, 'ev', String(Number(n) - 2));
  fs.rmSync(old, { force: true });
  fs.rmSync(old + '.done', { force: true });
  const num = (v, d) => (Number.isSafeInteger(v) ? v : d);
  caps.stdout = num(opts.max_stdout, -1);
  caps.stderr = num(opts.max_stderr, -1);
  caps.results = num(opts.max_results, 100);
  caps.resultBytes = num(opts.max_result_bytes, 10 << 20);
  caps.slack = num(opts.slack, 64 << 10);
  sent.stdout = sent.stderr = sent.results = sent.resultBytes = 0;
  cut.stdout = cut.stderr = cut.results = false;
  ev = fs.openSync(evp, 'a', 0o600);
  cur = n;
  lastWake = Date.now();
  fs.writeFileSync(path.join(D, 'running'), n + '\n');
  const r = run(n, code, Number(opts.timeout) || 0);
  emit({ type: 'done', count, interrupted: r.interrupted, timed_out: r.timedOut, stdout_cut: cut.stdout, stderr_cut: cut.stderr, results_cut: cut.results });
  const size = fs.fstatSync(ev).size;
  fs.closeSync(ev);
  ev = null;
  fs.rmSync(path.join(D, 'running'), { force: true });
  fs.writeFileSync(evp + '.tmp', size + '\n', { mode: 0o600 });
  fs.renameSync(evp + '.tmp', evp + '.done');
  fs.rmSync(req, { force: true });
  wake(n, 'done');
}

function main() {
  process.on('SIGINT', () => {}); // idle: an interrupt that came too late is dropped
  const fd = fs.openSync(path.join(D, 'in'), 'r+');
  // A tick every second lets a client that missed a wake-up look again
  // (this process blocks in its reads, so a helper keeps the clock).
  spawn('sh', ['-c', 'while kill -0 "$1" 2>/dev/null; do sleep 1; if IFS= read -r r < "$2/running"; then printf "%s tick\\n" "$r" 1<> "$2/out"; fi; done', 'sandboxkit-interp-ticker', String(process.pid), D],
    { stdio: 'ignore', detached: false }).unref();
  fs.writeFileSync(path.join(D, 'ready.tmp'), process.pid + '\n');
  fs.renameSync(path.join(D, 'ready.tmp'), path.join(D, 'ready'));
  wake('0', 'ready');
  const buf = Buffer.alloc(4096);
  let pending = '';
  for (;;) {
    let k;
    try { k = fs.readSync(fd, buf, 0, buf.length, null); } catch (e) {
      if (e.code === 'EAGAIN' || e.code === 'EINTR') continue;
      throw e;
    }
    pending += buf.subarray(0, k).toString('ascii');
    let i;
    while ((i = pending.indexOf('\n')) >= 0) {
      const n = pending.slice(0, i).trim();
      pending = pending.slice(i + 1);
      if (/^[0-9]+$/.test(n)) serve(n);
    }
  }
}

main();
