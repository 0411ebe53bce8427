package daytona_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona"
)

// A server that echoes the key where the 500-byte cut of its message falls
// must not leak the key's first half: the key is redacted before the
// message is shortened.
func TestKeyAcrossTheTruncationIsRedacted(t *testing.T) {
	t.Parallel()
	const key = "Zq9straddle-0123456789abcdefghij"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pad, _ := strconv.Atoi(path.Base(r.URL.Path)) // the id says where the key starts
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"statusCode":401,"message":"`+strings.Repeat("x", pad)+
			strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+` is not valid","error":"Unauthorized"}`)
	}))
	defer srv.Close()
	rt, err := daytona.New(daytona.WithAPIKey(key), daytona.WithAPIURL(srv.URL+"/api"))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	for _, cut := range []int{4, len(key) / 2, len(key) - 1} {
		_, err := rt.Get(ctxT(t), strconv.Itoa(500-cut)) // cut bytes of the key before byte 500
		if err == nil || sandbox.CodeOf(err) != sandbox.PermissionDenied {
			t.Fatalf("cut %d: %v, want PermissionDenied", cut, err)
		}
		if msg := err.Error(); strings.Contains(msg, key[:4]) {
			t.Errorf("cut %d: part of the key in %q", cut, msg[max(0, len(msg)-80):])
		}
	}
}

// execRewriter answers every POST …/process/execute, once armed, with a
// result that lacks the wrapper's trailer and holds a secret.
type execRewriter struct {
	armed atomic.Bool
	next  http.RoundTripper
}

const secretOutput = "PASSWORD=hunter2-do-not-show"

func (x *execRewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	if !x.armed.Load() || r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/process/execute") {
		return x.next.RoundTrip(r)
	}
	if r.Body != nil {
		_ = r.Body.Close()
	}
	body := `{"exitCode":0,"result":"` + secretOutput + `\n"}`
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: r,
	}, nil
}

// Output the toolbox returned that the adapter cannot parse is the
// command's own and may hold secrets: it never goes into the error.
func TestUnexpectedExecOutputNotInError(t *testing.T) {
	t.Parallel()
	x := &execRewriter{next: http.DefaultTransport.(*http.Transport).Clone()}
	defer x.next.(*http.Transport).CloseIdleConnections()
	e := newEnv(t, nil, daytona.WithTransport(x))
	sb := e.create(t)
	sh(t, sb, "true") // the scratch directory and the home are known
	x.armed.Store(true)
	_, err := sb.Exec(ctxT(t), sandbox.Command{Shell: "echo hi"})
	// Without the trailer nothing says whether the command ran.
	if err == nil || !errors.Is(err, sandbox.ErrOutcomeUnknown) {
		t.Fatalf("exec with a mangled answer: %v, want ErrOutcomeUnknown", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("command output in the error: %v", err)
	}
}
