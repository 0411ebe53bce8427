package run

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/bgproc"
	"github.com/sandboxkit/sandbox/internal/telemetry"
)

// DefaultBudget is the lifetime of a run whose Request.Budget is zero.
const DefaultBudget = 30 * time.Minute

// LostExitCode is the exit code reported for a run whose process is gone
// without having recorded an exit (the sandbox restarted, or something
// killed the wrapper).
const LostExitCode = 255

// RecordsDir is the directory, relative to the sandbox's home, that holds
// the runs' records.
const RecordsDir = ".sandboxkit/runs"

// ErrConflict reports a Start with a run id that is already taken by a
// different request (another command, directory or environment). It has
// Code AlreadyExists, so it also matches sandbox.ErrAlreadyExists.
var ErrConflict = sandbox.Errorf(sandbox.AlreadyExists, "run id already used by a different request")

// ErrBadRecord reports a run record in the sandbox that is malformed (an
// admission record that is not exactly "<pid> <64 hex digits>") or that
// names another request's fingerprint than the run's: the record was
// damaged or written by something else, so its pid is not trusted (no
// status is derived from it and no process is signalled on its word). It
// has Code Internal.
var ErrBadRecord = sandbox.Errorf(sandbox.Internal, "run record malformed or of another request")

// The timeouts of the control commands this package runs in the sandbox.
// They bound only those short commands, never the run itself.
const (
	controlTimeout = time.Minute
	killGrace      = 5 // seconds between SIGTERM and SIGKILL
	killTimeout    = 90 * time.Second
	controlOutput  = 1 << 20
)

// Request describes a run to start.
type Request struct {
	// ID names the run within its sandbox. It may hold any bytes (at most
	// MaxIDLen). Starting an id again with the same request returns the
	// same run.
	//
	// Empty means a fresh id:
	// "run-<sandbox id>-<Unix milliseconds>-<8 random hex digits>" (the
	// random part keeps two Starts in one millisecond apart). A Start
	// without an id is therefore never deduplicated: called twice, it
	// starts two runs. Idempotency is by id, so a caller that may retry a
	// Start passes an id of its own, or retries with Run.ID of the run
	// the first Start returned.
	ID string
	// Command is the program and its arguments, run without a shell. For a
	// shell line, pass []string{"sh", "-c", line}.
	Command []string
	// Dir is the working directory; empty means the sandbox's home, and a
	// relative path is resolved against the home. It must exist.
	Dir string
	// Env adds environment variables for the command. Names starting with
	// SANDBOXKIT_ are reserved.
	Env map[string]string
	// Budget bounds the run's lifetime, enforced inside the sandbox and
	// rounded up to whole seconds; zero means DefaultBudget. It is independent of the context passed to
	// Start, which bounds only the start itself. It is not part of the
	// request's fingerprint: a second Start with another budget returns
	// the run started with the first.
	Budget time.Duration
}

// State is where a run is in its life.
type State string

// The states of a run.
const (
	// Pending: admitted, but its process has not started yet (a start
	// was interrupted; calling Start again with the same request launches
	// it).
	Pending State = "pending"
	// Running: the process is running.
	Running State = "running"
	// Exited: the process ended and recorded its exit code.
	Exited State = "exited"
	// Lost: the process is gone without an exit record; ExitCode is
	// LostExitCode.
	Lost State = "lost"
)

// Status is a snapshot of a run.
type Status struct {
	State State
	// PID is the process id, within the sandbox, of the run's wrapper
	// process; 0 when not known yet.
	PID int
	// ExitCode is the command's exit code once the run is Exited (as a
	// shell reports it: 128+n for a command ended by signal n; 124 when
	// the budget ended it, or 137 when it then had to be killed), and
	// LostExitCode when it is Lost.
	ExitCode int
	// Killed reports that Kill ended the run.
	Killed bool
	// BudgetExceeded reports that the budget ended the run.
	BudgetExceeded bool
}

// Done reports whether the run has ended (Exited or Lost).
func (s Status) Done() bool { return s.State == Exited || s.State == Lost }

// Run is a handle on one run in one sandbox. It holds no resources and is
// safe for concurrent use; dropping it leaves the run going.
type Run struct {
	sb    *sandbox.Sandbox
	id    string
	dir   string // absolute path of the run directory in the sandbox
	token string // encoded id: the directory's name and the process marker
	fp    string

	mu  sync.Mutex
	pid int
}

// ID returns the run's id.
func (r *Run) ID() string { return r.id }

// Fingerprint returns the hex SHA-256 fingerprint of the run's request.
func (r *Run) Fingerprint() string { return r.fp }

// PID returns the wrapper's process id in the sandbox as last seen, or 0.
func (r *Run) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pid
}

// Sandbox returns the sandbox the run lives in.
func (r *Run) Sandbox() *sandbox.Sandbox { return r.sb }

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func invalid(op, id, format string, args ...any) error {
	return fmt.Errorf("run: %s %s: %w", op, quoteID(id), sandbox.Errorf(sandbox.InvalidArgument, format, args...))
}

func wrap(op, id string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("run: %s %s: %w", op, quoteID(id), err)
}

func checkID(op, id string) error {
	if id == "" {
		return invalid(op, id, "invalid run id: empty")
	}
	if len(id) > MaxIDLen {
		return invalid(op, id, "invalid run id: %d bytes, more than %d", len(id), MaxIDLen)
	}
	return nil
}

// newRun returns the handle for id in sb, without any round trip.
func newRun(sb *sandbox.Sandbox, id string) *Run {
	tok := encodeID(id)
	return &Run{sb: sb, id: id, token: tok, dir: path.Join(home(sb), RecordsDir, tok)}
}

func home(sb *sandbox.Sandbox) string {
	if h := sb.Home(); path.IsAbs(h) {
		return path.Clean(h)
	}
	return "/"
}

// Start admits the run described by req in sb and starts it detached, or
// returns the run already admitted under req.ID when its request is the
// same, whatever its state. When Start returns, the run's wrapper process
// is running (or the run is done), though its command may not have run
// yet. A run under req.ID with a different request is an error matching
// ErrConflict. ctx bounds only the start: the run lives on after ctx
// ends, for at most req.Budget.
//
// If the sandbox call that launches the run fails with an unknown outcome
// (sandbox.ErrOutcomeUnknown), Start does not submit the command again: it
// reconciles from the run's records and the sandbox's process list, adopts
// the admitted process, and kills duplicate wrappers it finds. It launches
// the run only when the records show that the first launch never reached
// the sandbox, and even then the wrapper's start guard keeps the command
// from running twice. If reconciliation fails too, the error matches
// sandbox.ErrOutcomeUnknown, and calling Start again with the same request
// is safe.
//
// Start extends the sandbox's lease to cover the budget (up to the
// provider's maximum lease) when sb owns the sandbox (sandbox.Sandbox.Owned);
// through a handle that only attached, the lease stays its owner's to set.
func Start(ctx context.Context, sb *sandbox.Sandbox, req Request) (_ *Run, err error) {
	ctx, span := telemetry.Start(ctx, tracer(sb), "run.start", telemetry.SandboxID.String(sb.ID()))
	defer func() { telemetry.End(span, err) }()
	const op = "start"
	if sb == nil {
		return nil, invalid(op, req.ID, "nil sandbox")
	}
	if req.ID == "" {
		req.ID = defaultID(sb.ID(), time.Now())
	}
	if err := checkID(op, req.ID); err != nil {
		return nil, err
	}
	switch {
	case len(req.Command) == 0:
		return nil, invalid(op, req.ID, "invalid command: empty")
	case req.Command[0] == "":
		return nil, invalid(op, req.ID, "invalid command: Command[0] is empty")
	case req.Budget < 0:
		return nil, invalid(op, req.ID, "invalid budget: %v is negative", req.Budget)
	}
	for i, a := range req.Command {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, invalid(op, req.ID, "invalid command: Command[%d] holds NUL", i)
		}
	}
	for k, v := range req.Env {
		switch {
		case !envNameRE.MatchString(k):
			return nil, invalid(op, req.ID, "invalid env name %q", k)
		case strings.HasPrefix(k, "SANDBOXKIT_"):
			return nil, invalid(op, req.ID, "invalid env name %q: the SANDBOXKIT_ prefix is reserved", k)
		case strings.IndexByte(v, 0) >= 0:
			return nil, invalid(op, req.ID, "invalid env value of %s: holds NUL", k)
		}
	}
	if strings.IndexByte(req.Dir, 0) >= 0 {
		return nil, invalid(op, req.ID, "invalid dir: holds NUL")
	}
	workdir := home(sb)
	if req.Dir != "" {
		workdir = path.Join(workdir, req.Dir)
		if path.IsAbs(req.Dir) {
			workdir = path.Clean(req.Dir)
		}
	}
	budget := req.Budget
	if budget == 0 {
		budget = DefaultBudget
	}
	secs := int64((budget + time.Second - 1) / time.Second)

	if err := extendLease(ctx, sb, budget); err != nil {
		return nil, wrap(op, req.ID, err)
	}

	r := newRun(sb, req.ID)
	r.fp = fingerprint(req.Command, workdir, req.Env)
	idHex := hex.EncodeToString([]byte(req.ID))
	args := func(mode string) []string {
		a := []string{r.dir, r.token, r.fp, idHex, strconv.FormatInt(secs, 10), workdir, mode, wrapperScript}
		return append(a, req.Command...)
	}
	st, err := r.control(ctx, admitScript, controlTimeout, req.Env, args("start")...)
	// An outcome-unknown launch is reconciled, never blindly resubmitted:
	// the admit script in reconcile mode looks for the first launch's
	// records and processes before it would launch, and the wrapper's start
	// guard makes a second launch a no-op.
	for try := 1; try <= 2 && errors.Is(err, sandbox.ErrOutcomeUnknown); try++ {
		if !sleep(ctx, time.Duration(try)*100*time.Millisecond) {
			break
		}
		st, err = r.control(ctx, admitScript, controlTimeout, req.Env, args("reconcile")...)
	}
	if err != nil {
		return nil, wrap(op, req.ID, err)
	}
	if st.noDir {
		return nil, invalid(op, req.ID, "invalid dir: %q is not a directory in the sandbox", workdir)
	}
	if st.errMsg != "" {
		return nil, wrap(op, req.ID, sandbox.Errorf(sandbox.FailedPrecondition, "%s", st.errMsg))
	}
	if st.request != r.fp+" "+idHex {
		return nil, wrap(op, req.ID, ErrConflict)
	}
	if _, err := r.observe(st); err != nil {
		return nil, wrap(op, req.ID, err)
	}
	return r, nil
}

// extendLease makes the sandbox's lease cover budget, as far as the
// provider allows, through a handle that owns the sandbox; a handle that
// only attached leaves the lease to the sandbox's owner (see
// sandbox.Sandbox.SetTimeout).
func extendLease(ctx context.Context, sb *sandbox.Sandbox, budget time.Duration) error {
	if !sb.Owned() {
		return nil
	}
	lease := budget + time.Minute
	if m := sb.Client().Capabilities().MaxLease; m > 0 && lease > m {
		lease = m
	}
	err := sb.SetTimeout(ctx, lease)
	if sandbox.CodeOf(err) == sandbox.Unimplemented {
		return nil
	}
	return err
}

// Open returns the run with the given id in sb, for example one started by
// another process before a restart. A run that does not exist is an error
// matching sandbox.ErrNotFound.
func Open(ctx context.Context, sb *sandbox.Sandbox, id string) (_ *Run, err error) {
	ctx, span := telemetry.Start(ctx, tracer(sb), "run.open", telemetry.SandboxID.String(sb.ID()), telemetry.RunID.String(id))
	defer func() { telemetry.End(span, err) }()
	const op = "open"
	if sb == nil {
		return nil, invalid(op, id, "nil sandbox")
	}
	if err := checkID(op, id); err != nil {
		return nil, err
	}
	r := newRun(sb, id)
	st, err := r.state(ctx)
	if err != nil {
		return nil, wrap(op, id, err)
	}
	fp, idHex, _ := strings.Cut(st.request, " ")
	if st.missing || idHex != hex.EncodeToString([]byte(id)) {
		return nil, wrap(op, id, sandbox.Errorf(sandbox.NotFound, "no such run"))
	}
	if !fingerprintRE.MatchString(fp) {
		return nil, wrap(op, id, fmt.Errorf("request record holds fingerprint %s, want 64 hex digits: %w", shortRecord(fp), ErrBadRecord))
	}
	r.fp = fp
	if _, err := r.observe(st); err != nil {
		return nil, wrap(op, id, err)
	}
	return r, nil
}

// Status returns the run's current status.
func (r *Run) Status(ctx context.Context) (Status, error) {
	st, err := r.state(ctx)
	if err != nil {
		return Status{}, wrap("status", r.id, err)
	}
	if st.missing {
		return Status{}, wrap("status", r.id, sandbox.Errorf(sandbox.NotFound, "no such run (its records were removed)"))
	}
	s, err := r.observe(st)
	if err != nil {
		return Status{}, wrap("status", r.id, err)
	}
	return s, nil
}

// Wait polls the run's status, with backoff, until the run is done or ctx
// ends; ending ctx does not end the run. A poll that fails with Code
// Unavailable (the provider could not be reached) is retried, up to
// waitTransient times in a row.
func (r *Run) Wait(ctx context.Context) (_ Status, err error) {
	ctx, span := telemetry.Start(ctx, tracer(r.sb), "run.wait", telemetry.SandboxID.String(r.sb.ID()), telemetry.RunID.String(r.id))
	defer func() { telemetry.End(span, err) }()
	delay := 50 * time.Millisecond
	const maxDelay = 2 * time.Second
	var last Status
	failures := 0
	for {
		s, err := r.Status(ctx)
		switch {
		case err == nil:
			last, failures = s, 0
			if s.Done() {
				return s, nil
			}
		case sandbox.CodeOf(err) == sandbox.Unavailable && ctx.Err() == nil && failures < waitTransient:
			failures++
		default:
			return last, err
		}
		if !sleep(ctx, delay) {
			return last, wrap("wait", r.id, ctx.Err())
		}
		delay = min(delay*3/2, maxDelay)
	}
}

// waitTransient is how many polls in a row may fail with Code Unavailable
// before Wait gives up.
const waitTransient = 5

// sleep waits for d, or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Kill ends the run: SIGTERM to its processes, SIGKILL a few seconds later
// to those still running. It returns once the run is done, with the exit
// recorded (Status.Killed set). A run that has not started yet never
// starts; killing a run that is done does nothing.
func (r *Run) Kill(ctx context.Context) (err error) {
	ctx, span := telemetry.Start(ctx, tracer(r.sb), "run.kill", telemetry.SandboxID.String(r.sb.ID()), telemetry.RunID.String(r.id))
	defer func() { telemetry.End(span, err) }()
	st, err := r.idempotent(ctx, killScript, killTimeout, strconv.Itoa(killGrace))
	if err != nil {
		return wrap("kill", r.id, err)
	}
	if st.missing {
		return wrap("kill", r.id, sandbox.Errorf(sandbox.NotFound, "no such run"))
	}
	_, err = r.observe(st)
	return wrap("kill", r.id, err)
}

// Remove deletes the records of a run that is done, so that its id can be
// used again. Removing a run that is still going is an error with Code
// FailedPrecondition: Kill it first. The run's directory is first renamed
// away in one step, so a Start of the same id racing with Remove finds
// either the finished run or no run, never half of one.
func (r *Run) Remove(ctx context.Context) (err error) {
	ctx, span := telemetry.Start(ctx, tracer(r.sb), "run.remove", telemetry.SandboxID.String(r.sb.ID()), telemetry.RunID.String(r.id))
	defer func() { telemetry.End(span, err) }()
	const op = "remove"
	s, err := r.Status(ctx)
	if err != nil {
		return err
	}
	if !s.Done() {
		return wrap(op, r.id, sandbox.Errorf(sandbox.FailedPrecondition, "run is %s", s.State))
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	trash := path.Join(path.Dir(r.dir), ".removed-"+hex.EncodeToString(nonce[:]))
	if err := r.sb.Rename(ctx, r.dir, trash); err != nil {
		return wrap(op, r.id, err)
	}
	return wrap(op, r.id, r.sb.Remove(ctx, trash))
}

// List returns the ids of the runs in sb, in no particular order.
func List(ctx context.Context, sb *sandbox.Sandbox) ([]string, error) {
	if sb == nil {
		return nil, fmt.Errorf("run: list: %w", sandbox.Errorf(sandbox.InvalidArgument, "nil sandbox"))
	}
	r := &Run{sb: sb}
	out, _, err := r.exec(ctx, listScript, controlTimeout, 64<<20, nil, path.Join(home(sb), RecordsDir))
	if err != nil {
		return nil, fmt.Errorf("run: list: %w", err)
	}
	// Each line: the run directory's name, then its request record. A
	// record whose id is not the one its directory is named for (the
	// sandbox's code can write any of them) is not a run.
	var ids []string
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) != 3 || !fingerprintRE.MatchString(f[1]) {
			continue
		}
		id, err := hex.DecodeString(f[2])
		if err != nil || checkID("list", string(id)) != nil || encodeID(string(id)) != f[0] {
			continue
		}
		ids = append(ids, string(id))
	}
	return ids, nil
}

// state runs the status script.
func (r *Run) state(ctx context.Context) (*state, error) {
	return r.idempotent(ctx, statusScript, controlTimeout)
}

// idempotent runs a control script that may safely run twice, once more
// after a transport failure of unknown outcome.
func (r *Run) idempotent(ctx context.Context, script string, timeout time.Duration, args ...string) (*state, error) {
	args = append([]string{r.dir, r.token}, args...)
	st, err := r.control(ctx, script, timeout, nil, args...)
	if errors.Is(err, sandbox.ErrOutcomeUnknown) && ctx.Err() == nil {
		st, err = r.control(ctx, script, timeout, nil, args...)
	}
	return st, err
}

// control runs a control script and parses the state it prints.
func (r *Run) control(ctx context.Context, script string, timeout time.Duration, env map[string]string, args ...string) (*state, error) {
	out, _, err := r.exec(ctx, script, timeout, controlOutput, env, args...)
	if err != nil {
		return nil, err
	}
	return parseState(out)
}

// exec runs script with sh in the sandbox, passing args as its positional
// parameters, and returns its stdout unredacted, with the function that
// redacts the sandbox's secrets: the records the scripts print (digests,
// pids, counts) must reach the parser intact, even when a secret value
// happens to occur in them, while any of the run's output handed to a
// caller must go through redact.
func (r *Run) exec(ctx context.Context, script string, timeout time.Duration, maxOut int, env map[string]string, args ...string) (out []byte, redact func([]byte) []byte, err error) {
	argv := append([]string{"sh", "-c", script, "sandboxkit-run"}, args...)
	res, redact, err := r.sb.ExecUnredacted(ctx, sandbox.Command{Args: argv, Env: env, Timeout: timeout, MaxOutput: maxOut})
	if err != nil {
		return nil, nil, err
	}
	switch {
	case res.TimedOut:
		return nil, nil, sandbox.Errorf(sandbox.DeadlineExceeded, "control command timed out after %v", res.Timeout)
	case res.ExitCode != 0:
		return nil, nil, sandbox.Errorf(sandbox.Internal, "control command exited with code %d: %s", res.ExitCode, firstLine(redact(res.Stderr)))
	case res.StdoutTruncated:
		return nil, nil, sandbox.Errorf(sandbox.Internal, "control command output exceeded %d bytes", maxOut)
	}
	return res.Stdout, redact, nil
}

func firstLine(b []byte) string {
	b = bytes.TrimSpace(b)
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return strconv.Quote(string(b))
}

// state is what the control scripts print about a run.
type state struct {
	missing   bool
	errMsg    string
	noDir     bool
	request   string // "<fingerprint> <hex id>"
	admission string // "<pid> <fingerprint>"
	started   bool
	alive     bool
	roots     []int
	exit      string // "<code> [reason]"
}

func parseState(out []byte) (*state, error) {
	st := &state{}
	for line := range strings.Lines(string(out)) {
		k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		if !ok {
			return nil, sandbox.Errorf(sandbox.Internal, "unexpected control output %q", line)
		}
		v = strings.TrimSpace(v)
		switch k {
		case "missing":
			st.missing = true
		case "error":
			st.errMsg = v
		case "nodir":
			st.noDir = true
		case "request":
			st.request = v
		case "admission":
			st.admission = v
		case "started":
			st.started = true
		case "alive":
			st.alive = true
		case "roots":
			for f := range strings.FieldsSeq(v) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
					st.roots = append(st.roots, pid)
				}
			}
		case "exit":
			st.exit = v
		}
	}
	return st, nil
}

// fingerprintRE is the form of a request fingerprint: lower-case hex
// SHA-256, as fingerprint writes it.
var fingerprintRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// pidRE is a process id as the wrapper writes it ($$): decimal, no sign,
// no leading zero.
var pidRE = regexp.MustCompile(`^[1-9][0-9]{0,9}$`)

// parseAdmission parses an admission record strictly: exactly a pid, one
// space and the 64 hex digits of a fingerprint, nothing before, between
// or after (the trailing newline is gone already). An empty record means
// not admitted yet: pid 0, no error. Any other form matches ErrBadRecord.
func parseAdmission(rec string) (pid int, fp string, err error) {
	if rec == "" {
		return 0, "", nil
	}
	p, f, ok := strings.Cut(rec, " ")
	if !ok || !pidRE.MatchString(p) || !fingerprintRE.MatchString(f) {
		return 0, "", fmt.Errorf("admission record %s, want \"<pid> <64 hex digits>\": %w", shortRecord(rec), ErrBadRecord)
	}
	pid, err = strconv.Atoi(p)
	if err != nil || pid > math.MaxInt32 {
		return 0, "", fmt.Errorf("admission record %s: pid out of range: %w", shortRecord(rec), ErrBadRecord)
	}
	return pid, f, nil
}

// shortRecord describes a malformed record for an error message without
// quoting it: the sandbox's code can write a run's records, and a record
// it forged could carry a secret the error would then show (the control
// scripts' output is read unredacted).
func shortRecord(rec string) string {
	return fmt.Sprintf("of %d bytes", len(rec))
}

// observe turns a state into a Status and remembers the pid. The
// admission record must parse strictly and carry the run's fingerprint:
// otherwise it is not trusted and the error matches ErrBadRecord.
func (r *Run) observe(st *state) (Status, error) {
	var s Status
	pid, fp, err := parseAdmission(st.admission)
	if err != nil {
		return Status{}, err
	}
	if pid > 0 && fp != r.fp {
		return Status{}, fmt.Errorf("admission record of pid %d names fingerprint %s, the run's request has %s: %w", pid, fp, r.fp, ErrBadRecord)
	}
	s.PID = pid
	switch {
	case strings.TrimSpace(st.exit) != "":
		if e, err := bgproc.ParseExit(st.exit); err == nil {
			s.State, s.ExitCode, s.Killed, s.BudgetExceeded = Exited, e.Code, e.Killed, e.TimedOut
		} else {
			s.State, s.ExitCode = Lost, LostExitCode
		}
	case s.PID > 0 && st.alive:
		s.State = Running
	case s.PID > 0:
		s.State, s.ExitCode = Lost, LostExitCode
	case st.started && len(st.roots) > 0:
		// The wrapper is between its start guard and its admission record.
		s.State, s.PID = Running, st.roots[0]
	case st.started:
		s.State, s.ExitCode = Lost, LostExitCode
	default:
		s.State = Pending
	}
	if s.PID > 0 {
		r.mu.Lock()
		r.pid = s.PID
		r.mu.Unlock()
	}
	return s, nil
}
