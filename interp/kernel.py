# sandboxkit interp kernel v1 for Python: runs cells in one persistent
# namespace and answers through files (see the package doc of interp).
# It needs only the standard library. Usage: python3 -u kernel.py DIR
import ast
import base64
import hashlib
import json
import linecache
import os
import signal
import sys
import threading
import traceback
import warnings

D = sys.argv[1]
os.environ.setdefault("MPLBACKEND", "Agg")
# plt.show() is how notebooks show a figure; with Agg it has nothing to do.
warnings.filterwarnings("ignore", message=".*non-interactive.*cannot be shown")
CHUNK = 32 << 10


class State:
    busy = False
    timed_out = False
    count = 0
    ev = None  # fd of the current cell's event file
    n = "0"  # the current request's number
    out = False  # stream events written since the last wake
    lock = threading.Lock()
    # The current cell's caps (from its request) and what it sent.
    max_results = 100
    max_result_bytes = 10 << 20
    slack = 64 << 10
    results = 0
    result_bytes = 0
    results_cut = False


def wake(n, what):
    """Tells a client waiting on the out FIFO, if any, that request n has
    news: "out" (new output), "done", or a "tick" of the clock."""
    try:
        fd = os.open(os.path.join(D, "out"), os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return  # nobody listens
    try:
        os.write(fd, ("%s %s\n" % (n, what)).encode("ascii"))
    except OSError:
        pass
    finally:
        os.close(fd)


def emit(obj):
    line = (json.dumps(obj, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")
    with State.lock:
        if State.ev is not None:
            os.write(State.ev, line)


class Stream:
    """A text stream whose writes become base64 events, flushed at least
    every 50 ms and at CHUNK bytes. A cell's output past its cap (limit,
    -1 for none) is dropped here, and cut records that."""

    def __init__(self, name):
        self.name = name
        self.buf = bytearray()
        self.mu = threading.Lock()
        self.encoding = "utf-8"
        self.errors = "replace"
        self.limit = -1
        self.sent = 0
        self.cut = False

    def reset(self, limit):
        with self.mu:
            self._flush()
            self.limit, self.sent, self.cut = limit, 0, False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        with self.mu:
            if self.limit >= 0:
                room = max(self.limit - self.sent - len(self.buf), 0)
                if room < len(s) * 4 and len(s.encode("utf-8", "surrogateescape")) > room:
                    self.cut = True
                    b = s[:room].encode("utf-8", "surrogateescape")[:room]
                else:
                    b = s.encode("utf-8", "surrogateescape")
            else:
                b = s.encode("utf-8", "surrogateescape")
            self.buf += b
            if len(self.buf) >= CHUNK:
                self._flush()
        return len(s)

    def _flush(self):
        while self.buf:
            part = bytes(self.buf[:CHUNK])
            del self.buf[:CHUNK]
            self.sent += len(part)
            emit({"type": self.name, "data": base64.b64encode(part).decode("ascii")})
            State.out = True

    def flush(self):
        with self.mu:
            self._flush()

    def writelines(self, lines):
        for s in lines:
            self.write(s)

    def isatty(self):
        return False

    def writable(self):
        return True

    def readable(self):
        return False

    def fileno(self):
        raise OSError("the interpreter's %s has no file descriptor" % self.name)


OUT, ERR = Stream("stdout"), Stream("stderr")


def flusher():
    """Flushes the streams every 50 ms, wakes the client when there is new
    output (at most every 200 ms), and ticks every second."""
    ev = threading.Event()
    i = 0
    while not ev.wait(0.05):
        i += 1
        OUT.flush()
        ERR.flush()
        if i % 4 == 0 and State.out and State.busy:
            State.out = False
            wake(State.n, "out")
        if i % 20 == 0:
            wake(State.n, "tick")


def on_sigint(signum, frame):
    if State.busy:
        raise KeyboardInterrupt
    # idle: an interrupt that came too late is dropped


def on_alarm(signum, frame):
    if State.busy:
        State.timed_out = True
        raise KeyboardInterrupt


def bundle(obj):
    """The MIME bundle of obj, as Jupyter would display it."""
    data = {}
    for meth, mime in (("_repr_html_", "text/html"), ("_repr_markdown_", "text/markdown"),
                       ("_repr_json_", "application/json"), ("_repr_svg_", "image/svg+xml"),
                       ("_repr_png_", "image/png"), ("_repr_jpeg_", "image/jpeg"),
                       ("_repr_latex_", "text/latex")):
        f = getattr(obj, meth, None)
        if f is None or isinstance(obj, type):
            continue
        try:
            v = f()
        except Exception:
            continue
        if isinstance(v, tuple):
            v = v[0]
        if v is None:
            continue
        if mime == "application/json":
            v = json.dumps(v)
        elif mime in ("image/png", "image/jpeg"):
            if isinstance(v, str):
                v = v.encode("ascii")
                v = base64.b64decode(v)
            v = base64.b64encode(v).decode("ascii")
        data[mime] = v
    data["text/plain"] = repr(obj)
    return data


def emit_result(main, data):
    """Emits a result, keeping the cell's caps on results: past the count
    it is dropped; text/plain is cut at the room left (and a margin the
    client needs to redact it), other forms larger than that are dropped."""
    if State.results >= State.max_results:
        State.results_cut = True
        return
    State.results += 1
    room = max(State.max_result_bytes - State.result_bytes, 0)
    lim = room + State.slack
    out = {}
    cut = dropped = False
    # text/plain first: it is the form the room goes to first.
    for mime, v in sorted(data.items(), key=lambda kv: kv[0] != "text/plain"):
        if mime in ("image/png", "image/jpeg"):
            size = len(v) // 4 * 3
        else:
            size = len(v) if len(v) * 4 <= lim else len(v.encode("utf-8", "surrogatepass"))
        if size > lim:
            if mime != "text/plain":
                State.results_cut = dropped = True
                continue
            t = v[:lim]
            b = t.encode("utf-8", "surrogatepass")
            if len(b) > lim:
                t = b[:lim].decode("utf-8", "ignore")
            v, size, cut = t, lim, True
        out[mime] = v
        room -= min(size, room)
    State.result_bytes = State.max_result_bytes - room
    ev = {"type": "result", "main": main, "data": out}
    if cut:
        ev["cut"] = True
    if dropped:
        ev["dropped"] = True
    emit(ev)


FIGS = {}  # figure number -> digest of its last PNG


def figures():
    """Emit every pyplot figure created or changed since it was last shown."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    import io
    live = set(plt.get_fignums())
    for n in list(FIGS):
        if n not in live:
            del FIGS[n]
    for n in sorted(live):
        fig = plt.figure(n)
        buf = io.BytesIO()
        try:
            fig.savefig(buf, format="png")
        except Exception as e:  # a broken figure is the cell's business
            ERR.write("figure %d: %s\n" % (n, e))
            continue
        png = buf.getvalue()
        h = hashlib.sha256(png).hexdigest()
        if FIGS.get(n) == h:
            continue
        FIGS[n] = h
        emit_result(False, {"text/plain": "<Figure %d>" % n,
                            "image/png": base64.b64encode(png).decode("ascii")})


NS = {"__name__": "__main__", "__builtins__": __builtins__}


def run(code, timeout):
    State.count += 1
    name = "<cell-%d>" % State.count
    lines = code.splitlines(True)
    linecache.cache[name] = (len(code), None, lines, name)
    err = None
    try:
        tree = ast.parse(code, name, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        body = compile(tree, name, "exec")
        expr = compile(last, name, "eval") if last is not None else None
    except BaseException as e:
        err = e
    if err is None:
        State.timed_out = False
        State.busy = True
        try:
            if timeout > 0:
                signal.setitimer(signal.ITIMER_REAL, timeout)
            exec(body, NS)
            if expr is not None:
                v = eval(expr, NS)
                if v is not None:
                    NS["_"] = v
                    emit_result(True, bundle(v))
        except BaseException as e:
            err = e
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            State.busy = False
    try:
        figures()
    except BaseException as e:
        ERR.write("figures: %r\n" % (e,))
    OUT.flush()
    ERR.flush()
    if err is not None:
        tb = traceback.format_exception(type(err), err, err.__traceback__)
        # Drop the kernel's own frames: keep the header and the cell's.
        keep = [tb[0]] + [f for f in tb[1:-1] if "<cell-" in f] + [tb[-1]] if len(tb) > 1 else tb
        if isinstance(err, SyntaxError):
            keep = traceback.format_exception_only(type(err), err)
        # An exception can carry any amount of text: the host keeps 64 KiB
        # of each, so no more is sent.
        value, cut = str(err), False
        if len(value) > 65536:
            value, cut = value[:65536], True
        short = []
        for line in keep:
            if len(line) > 65536:
                line, cut = line[:65536] + "\n", True
            short.append(line)
        emit({"type": "error", "name": type(err).__name__, "value": value, "traceback": short, "cut": cut})
    return err


def main():
    os.makedirs(os.path.join(D, "req"), exist_ok=True)
    os.makedirs(os.path.join(D, "ev"), exist_ok=True)
    signal.signal(signal.SIGINT, on_sigint)
    signal.signal(signal.SIGALRM, on_alarm)
    fd = os.open(os.path.join(D, "in"), os.O_RDWR)
    sys.stdout, sys.stderr = OUT, ERR
    sys.stdin = open(os.devnull)
    threading.Thread(target=flusher, daemon=True).start()
    with open(os.path.join(D, "ready.tmp"), "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(os.path.join(D, "ready.tmp"), os.path.join(D, "ready"))
    wake("0", "ready")
    pending = b""
    while True:
        try:
            b = os.read(fd, 4096)
        except KeyboardInterrupt:
            continue
        pending += b
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            n = line.decode("ascii", "replace").strip()
            if not n.isdigit():
                continue
            serve(n)


def serve(n):
    req = os.path.join(D, "req", n)
    evp = os.path.join(D, "ev", n)
    if os.path.exists(evp + ".done"):
        return  # a submission seen twice
    try:
        with open(req, "rb") as f:
            raw = f.read()
    except OSError:
        return
    head, _, code = raw.partition(b"\n")
    try:
        opts = json.loads(head)
    except ValueError:
        opts = {}
    # Runs of one kernel are served in order: the events of the request
    # before the previous one were read long ago.
    for f in (str(int(n) - 2), str(int(n) - 2) + ".done"):
        try:
            os.remove(os.path.join(D, "ev", f))
        except OSError:
            pass
    def num(name, default):
        try:
            return int(opts.get(name, default))
        except (TypeError, ValueError):
            return default
    OUT.reset(num("max_stdout", -1))
    ERR.reset(num("max_stderr", -1))
    State.max_results = num("max_results", 100)
    State.max_result_bytes = num("max_result_bytes", 10 << 20)
    State.slack = num("slack", 64 << 10)
    State.results, State.result_bytes, State.results_cut = 0, 0, False
    with State.lock:
        State.ev = os.open(evp, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        State.n, State.out = n, False
    with open(os.path.join(D, "running"), "w") as f:
        f.write(n + "\n")
    err = None
    try:
        err = run(code.decode("utf-8", "surrogateescape"), float(opts.get("timeout", 0)))
    except KeyboardInterrupt as e:  # between the cell and its report
        err = e
    emit({"type": "done", "count": State.count,
          "interrupted": isinstance(err, KeyboardInterrupt),
          "timed_out": State.timed_out and isinstance(err, KeyboardInterrupt),
          "stdout_cut": OUT.cut, "stderr_cut": ERR.cut, "results_cut": State.results_cut})
    with State.lock:
        size = os.fstat(State.ev).st_size
        os.close(State.ev)
        State.ev = None
    os.remove(os.path.join(D, "running"))
    fd = os.open(evp + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"%d\n" % size)
    os.close(fd)
    os.rename(evp + ".tmp", evp + ".done")
    wake(n, "done")
    try:
        os.remove(req)
    except OSError:
        pass


main()
