package sandboxtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// telemetryTests check the OpenTelemetry spans and metrics of the
// portable calls on the provider: what each span says, the metrics the
// calls move, a failed call's code, and that no span or metric ever holds
// a secret, an environment value, a file's content or (unless asked for)
// a command line.
var telemetryTests = []test{
	{name: "Spans", fn: testTelemetrySpans},
	{name: "FailedCallCode", fn: testTelemetryFailedCall},
	{name: "NoSecrets", fn: testTelemetryNoSecrets},
}

// tracedClient returns a Client over the suite's provider (the same
// Runtime) that records to rec. It is not closed: closing it would close
// the Runtime the suite's Client owns.
func (s *suite) tracedClient(rec *recorder, opts ...sandbox.Option) *sandbox.Client {
	opts = append([]sandbox.Option{sandbox.WithTracerProvider(rec), sandbox.WithMeterProvider(rec)}, opts...)
	return sandbox.NewClient(s.c.Runtime(), opts...)
}

// createOn creates a sandbox for this run through c and destroys it at
// cleanup (a no-op when the subtest destroyed it).
func (s *suite) createOn(ctx context.Context, t *testing.T, c *sandbox.Client, mod func(*sandbox.CreateOptions)) *sandbox.Sandbox {
	t.Helper()
	opts := s.h.Create
	opts.Labels = map[string]string{"sandboxtest": s.runID}
	for k, v := range s.h.Create.Labels {
		opts.Labels[k] = v
	}
	if mod != nil {
		mod(&opts)
	}
	sb := must[*sandbox.Sandbox](t, "Create")(c.Create(ctx, opts))
	t.Cleanup(func() { _ = c.Destroy(context.Background(), sb.ID()) })
	return sb
}

// spansNamed returns the ended spans of operation op.
func spansNamed(rec *recorder, op string) []*recSpan {
	var out []*recSpan
	for _, sp := range rec.ended() {
		if v, ok := sp.attr(sandbox.AttrOperation); ok && v.AsString() == op {
			out = append(out, sp)
		}
	}
	return out
}

// oneSpan returns the last ended span of op, failing t when there is none.
func oneSpan(t *testing.T, rec *recorder, op string) *recSpan {
	t.Helper()
	sps := spansNamed(rec, op)
	if len(sps) == 0 {
		t.Errorf("no span for operation %q", op)
		return nil
	}
	return sps[len(sps)-1]
}

func wantAttr(t *testing.T, sp *recSpan, key attribute.Key, want any) {
	t.Helper()
	if sp == nil {
		return
	}
	v, ok := sp.attr(key)
	if !ok {
		t.Errorf("%s: no attribute %s, want %v", sp.name, key, want)
		return
	}
	if got := v.AsInterface(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: %s = %v, want %v", sp.name, key, got, want)
	}
}

// metricSum adds the points of metric name whose attributes hold every
// pair of want.
func metricSum(points []recPoint, name string, want ...attribute.KeyValue) (sum float64, n int) {
	for _, p := range points {
		if p.name != name {
			continue
		}
		ok := true
		for _, kv := range want {
			if v, has := p.attrs.Value(kv.Key); !has || v != kv.Value {
				ok = false
				break
			}
		}
		if ok {
			sum += p.value
			n++
		}
	}
	return sum, n
}

// lastObserved returns the last observation of metric name.
func lastObserved(points []recPoint, name string) (float64, bool) {
	for i := len(points) - 1; i >= 0; i-- {
		if points[i].name == name {
			return points[i].value, true
		}
	}
	return 0, false
}

// testTelemetrySpans: each portable call is a client span, a child of the
// caller's span, naming the provider, the operation and the sandbox; the
// exec span says the timeout, exit code, bytes out and whether output was
// capped; the metrics count the calls, the sandboxes and the bytes moved.
func testTelemetrySpans(ctx context.Context, t *testing.T, s *suite) {
	rec := newRecorder()
	c := s.tracedClient(rec)
	prov := c.Provider()
	// The caller's own span: the portable calls are its children.
	ctx, parent := rec.Tracer("sandboxtest").Start(ctx, "caller")
	defer parent.End()

	sb := s.createOn(ctx, t, c, nil)
	if v, ok := lastObserved(rec.collect(ctx), sandbox.MetricSandboxesLive); !ok || v != 1 {
		t.Errorf("live sandboxes after a create: %v (observed %v), want 1", v, ok)
	}
	res := must[*sandbox.Result](t, "Exec")(sb.Exec(ctx, sandbox.Command{Shell: "printf hello; printf err >&2; exit 3"}))
	if res.ExitCode != 3 {
		t.Fatalf("exit code %d, want 3", res.ExitCode)
	}
	exec := oneSpan(t, rec, "exec")
	wantAttr(t, exec, sandbox.AttrExitCode, 3)
	wantAttr(t, exec, sandbox.AttrStdoutBytes, 5)
	wantAttr(t, exec, sandbox.AttrStderrBytes, 3)
	wantAttr(t, exec, sandbox.AttrOutputTruncated, false)
	wantAttr(t, exec, sandbox.AttrExecTimedOut, false)
	if v, ok := exec.attr(sandbox.AttrExecTimeout); !ok || v.AsFloat64() <= 0 {
		t.Errorf("exec span: timeout %v (set %v), want the command's timeout in seconds", v.AsFloat64(), ok)
	}
	if _, ok := exec.attr(sandbox.AttrCommandLine); ok {
		t.Errorf("exec span holds the command line without WithTraceCommandLines")
	}
	must[*sandbox.Result](t, "Exec capped")(sb.Exec(ctx, sandbox.Command{Shell: "printf 0123456789", MaxOutput: 4}))
	wantAttr(t, oneSpan(t, rec, "exec"), sandbox.AttrOutputTruncated, true)
	wantAttr(t, oneSpan(t, rec, "exec"), sandbox.AttrStdoutBytes, 10)

	data := []byte("telemetry-data")
	check(t, sb.MkdirAll(ctx, "tel"))
	check(t, sb.WriteFile(ctx, "tel/a.txt", data))
	wantAttr(t, oneSpan(t, rec, "upload"), sandbox.AttrTransferBytes, len(data))
	got := must[[]byte](t, "ReadFile")(sb.ReadFile(ctx, "tel/a.txt"))
	if string(got) != string(data) {
		t.Fatalf("ReadFile: %q", got)
	}
	wantAttr(t, oneSpan(t, rec, "download"), sandbox.AttrTransferBytes, len(data))
	must[sandbox.FileInfo](t, "Stat")(sb.Stat(ctx, "tel/a.txt"))
	must[[]sandbox.FileInfo](t, "ReadDir")(sb.ReadDir(ctx, "tel"))
	check(t, sb.Rename(ctx, "tel/a.txt", "tel/b.txt"))
	check(t, sb.Remove(ctx, "tel/b.txt"))
	must[sandbox.Info](t, "Refresh")(sb.Refresh(ctx))
	ops := []string{"create", "exec", "mkdir", "upload", "read-file", "download", "stat", "readdir", "rename", "remove", "get"}
	if s.caps.Processes {
		p := must[*sandbox.Process](t, "Start")(sb.Start(ctx, sandbox.Command{Shell: "printf bg; exit 4"}))
		r := must[*sandbox.Result](t, "Wait")(p.Wait(ctx))
		if r.ExitCode != 4 {
			t.Errorf("Wait: exit code %d, want 4", r.ExitCode)
		}
		wantAttr(t, oneSpan(t, rec, "wait"), sandbox.AttrExitCode, 4)
		wantAttr(t, oneSpan(t, rec, "wait"), sandbox.AttrStdoutBytes, 2)
		ops = append(ops, "start", "wait")
	}
	if s.caps.Pause {
		check(t, sb.Pause(ctx))
		check(t, sb.Resume(ctx))
		ops = append(ops, "pause", "resume")
	}
	check(t, sb.Destroy(ctx))
	ops = append(ops, "destroy")

	for _, op := range ops {
		sp := oneSpan(t, rec, op)
		if sp == nil {
			continue
		}
		if sp.name != "sandbox."+op {
			t.Errorf("span of %s is named %q, want %q", op, sp.name, "sandbox."+op)
		}
		if sp.kind != trace.SpanKindClient {
			t.Errorf("%s: kind %v, want client", sp.name, sp.kind)
		}
		if sp.sc.TraceID() != parent.SpanContext().TraceID() || !sp.parent.IsValid() {
			t.Errorf("%s: not in the caller's trace", sp.name)
		}
		wantAttr(t, sp, sandbox.AttrProvider, prov)
		wantAttr(t, sp, sandbox.AttrSandboxID, sb.ID())
		if sp.status == codes.Error {
			t.Errorf("%s: status error (%s) for a call that succeeded", sp.name, sp.statusDesc)
		}
		if _, ok := sp.attr(sandbox.AttrErrorCode); ok {
			t.Errorf("%s: an error code on a call that succeeded", sp.name)
		}
	}

	points := rec.collect(ctx)
	for _, op := range ops {
		if _, n := metricSum(points, sandbox.MetricOperationDuration, sandbox.AttrProvider.String(prov), sandbox.AttrOperation.String(op)); n == 0 {
			t.Errorf("no %s point for %s", sandbox.MetricOperationDuration, op)
		}
	}
	if n, _ := metricSum(points, sandbox.MetricSandboxesCreated, sandbox.AttrProvider.String(prov)); n != 1 {
		t.Errorf("%s = %v, want 1", sandbox.MetricSandboxesCreated, n)
	}
	if n, _ := metricSum(points, sandbox.MetricSandboxesDestroyed, sandbox.AttrProvider.String(prov)); n != 1 {
		t.Errorf("%s = %v, want 1", sandbox.MetricSandboxesDestroyed, n)
	}
	if v, ok := lastObserved(points, sandbox.MetricSandboxesLive); !ok || v != 0 {
		t.Errorf("live sandboxes after the destroy: %v (observed %v), want 0", v, ok)
	}
	for _, dir := range []string{"upload", "download"} {
		if n, _ := metricSum(points, sandbox.MetricTransferred, sandbox.AttrTransferDir.String(dir)); n != float64(len(data)) {
			t.Errorf("%s %s = %v, want %d", sandbox.MetricTransferred, dir, n, len(data))
		}
	}
	if n, _ := metricSum(points, sandbox.MetricOperationErrors); n != 0 {
		t.Errorf("%s = %v after calls that all succeeded", sandbox.MetricOperationErrors, n)
	}
}

// testTelemetryFailedCall: a failed call's span has status Error and the
// error's code (never its text), and the errors metric counts it by code.
func testTelemetryFailedCall(ctx context.Context, t *testing.T, s *suite) {
	rec := newRecorder()
	c := s.tracedClient(rec)
	sb := s.createOn(ctx, t, c, nil)
	if _, err := sb.Stat(ctx, "no-such-file-tel"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Stat of a missing file: %v, want NotFound", err)
	}
	if _, err := sb.Exec(ctx, sandbox.Command{}); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Fatalf("Exec of an empty command: %v, want InvalidArgument", err)
	}
	for op, code := range map[string]sandbox.Code{"stat": sandbox.NotFound, "exec": sandbox.InvalidArgument} {
		sp := oneSpan(t, rec, op)
		if sp == nil {
			continue
		}
		if sp.status != codes.Error || sp.statusDesc != code.String() {
			t.Errorf("%s: status %v %q, want Error %q", sp.name, sp.status, sp.statusDesc, code)
		}
		wantAttr(t, sp, sandbox.AttrErrorCode, code.String())
		wantAttr(t, sp, sandbox.AttrErrorType, code.String())
		for _, text := range sp.texts() {
			if strings.Contains(text, "no-such-file-tel") {
				t.Errorf("%s holds the path the caller gave: %q", sp.name, text)
			}
		}
		n, _ := metricSum(rec.collect(ctx), sandbox.MetricOperationErrors, sandbox.AttrOperation.String(op),
			sandbox.AttrErrorCode.String(code.String()), sandbox.AttrProvider.String(c.Provider()))
		if n != 1 {
			t.Errorf("%s{%s, %s} = %v, want 1", sandbox.MetricOperationErrors, op, code, n)
		}
	}
}

// testTelemetryNoSecrets runs the redacted error chain scenario and
// commands that print and take secrets, with tracing on and command lines
// opted in, then scans every span (name, status, attributes, events) and
// every metric attribute: no secret value, environment value or file
// content may be there, and the command lines recorded are redacted.
func testTelemetryNoSecrets(ctx context.Context, t *testing.T, s *suite) {
	const (
		sbSecret  = "sk-teltest-3b9f0c7d2e11"
		cmdSecret = "tok-teltest-8a1e5d6c4f20"
		envValue  = "envvalue-teltest-55c2d1"
		content   = "content-teltest-9d3e7a"
	)
	rec := newRecorder()
	c := s.tracedClient(rec, sandbox.WithTraceCommandLines(true))
	traced := *s
	traced.c = c
	testRedactedErrorChain(ctx, t, &traced)

	sb := s.createOn(ctx, t, c, func(o *sandbox.CreateOptions) {
		o.SecretEnv = map[string]string{"SBX_TEL_SECRET": sbSecret}
		o.Env = map[string]string{"SBX_TEL_ENV": envValue}
	})
	cmds := []sandbox.Command{
		{Shell: "echo $SBX_TEL_SECRET $SBX_TEL_ENV " + sbSecret},
		{Args: []string{"printf", "%s", cmdSecret}, SecretEnv: map[string]string{"SBX_TEL_CMD": cmdSecret}},
		{Shell: "printenv SBX_TEL_ENV; exit 2"},
		{Args: []string{"cat", "no-such-" + sbSecret}},
	}
	for _, cmd := range cmds {
		if _, err := sb.Exec(ctx, cmd); err != nil {
			t.Fatalf("Exec: %v", err)
		}
	}
	check(t, sb.WriteFile(ctx, "tel-secret.txt", []byte(content+sbSecret)))
	if b, err := sb.ReadFile(ctx, "tel-secret.txt"); err != nil || !strings.Contains(string(b), content) {
		t.Fatalf("ReadFile: %q %v", b, err)
	}
	if s.caps.Processes {
		p := must[*sandbox.Process](t, "Start")(sb.Start(ctx, sandbox.Command{Shell: "echo " + cmdSecret,
			SecretEnv: map[string]string{"SBX_TEL_CMD": cmdSecret}}))
		must[*sandbox.Result](t, "Wait")(p.Wait(ctx))
	}
	_, _ = sb.Stat(ctx, "missing-"+sbSecret)

	secrets := []string{sbSecret, cmdSecret, chainHandleSecret, chainCmdSecret, envValue, content}
	spans := rec.ended()
	if len(spans) == 0 {
		t.Fatal("no spans recorded")
	}
	for _, sp := range spans {
		for _, text := range sp.texts() {
			for _, sec := range secrets {
				if strings.Contains(text, sec) {
					t.Errorf("%s holds %q: %q", sp.name, sec, text)
				}
			}
		}
	}
	for _, p := range rec.collect(ctx) {
		for _, kv := range p.attrs.ToSlice() {
			for _, sec := range secrets {
				if strings.Contains(kv.Value.Emit(), sec) {
					t.Errorf("metric %s: attribute %s holds %q", p.name, kv.Key, sec)
				}
			}
		}
	}
	// The opt-in records the command lines, redacted.
	var lines []string
	for _, sp := range spansNamed(rec, "exec") {
		if v, ok := sp.attr(sandbox.AttrCommandLine); ok {
			lines = append(lines, v.AsString())
		}
	}
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "echo $SBX_TEL_SECRET $SBX_TEL_ENV [REDACTED]") }) {
		t.Errorf("command lines recorded with WithTraceCommandLines: %q, want the first one redacted", lines)
	}
}
