package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/provider/memory"
)

func TestMain(m *testing.M) {
	local.Init()
	goleak.VerifyTestMain(m)
}

const testKey = "sk-test-0123456789"

// fakeAPI is a Responses API on loopback that answers POST /v1/responses
// with scripted outputs, one per request, in order, and records every
// request body as the client sent it. Like the real API it requires the
// bearer key and answers 400 to a request it cannot read, and it refuses
// a tool output whose call the previous response did not make.
type fakeAPI struct {
	srv *httptest.Server

	mu      sync.Mutex
	outputs [][]map[string]any
	reqs    []map[string]any
	calls   map[string]bool // call ids of the last response
}

func newFakeAPI(t *testing.T, outputs ...[]map[string]any) *fakeAPI {
	f := &fakeAPI{outputs: outputs}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) client() oai.Client {
	return oai.NewClient(option.WithBaseURL(f.srv.URL+"/v1/"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
}

func apiError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		apiError(w, http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+testKey {
		apiError(w, http.StatusUnauthorized, "Incorrect API key provided")
		return
	}
	body, err := io.ReadAll(r.Body)
	var req map[string]any
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		apiError(w, http.StatusBadRequest, "We could not parse the JSON body of your request.")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	n := len(f.reqs)
	if items, ok := req["input"].([]any); ok && req["previous_response_id"] != nil {
		for _, it := range items {
			m, _ := it.(map[string]any)
			id, _ := m["call_id"].(string)
			if id == "" {
				id, _ = m["id"].(string)
			}
			if id != "" && strings.HasSuffix(fmt.Sprint(m["type"]), "_output") && !f.calls[id] {
				apiError(w, http.StatusBadRequest, "No tool call found for output with call_id "+id)
				return
			}
		}
	}
	if n > len(f.outputs) {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("unscripted request %d", n))
		return
	}
	out := f.outputs[n-1]
	f.calls = map[string]bool{}
	for _, it := range out {
		if id, _ := it["call_id"].(string); id != "" {
			f.calls[id] = true
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("resp_%d", n), "object": "response", "created_at": 1764806400,
		"status": "completed", "model": "gpt-5.1", "output": out,
		"parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
		"error": nil, "incomplete_details": nil, "instructions": req["instructions"],
		"metadata": map[string]any{}, "temperature": 1.0, "top_p": 1.0,
	})
}

// requests returns the request bodies received so far.
func (f *fakeAPI) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.reqs...)
}

func shellCall(callID string, timeoutMs, maxLen int, cmds ...string) map[string]any {
	a := map[string]any{"commands": cmds, "timeout_ms": nil, "max_output_length": nil}
	if timeoutMs > 0 {
		a["timeout_ms"] = timeoutMs
	}
	if maxLen > 0 {
		a["max_output_length"] = maxLen
	}
	return map[string]any{"type": "shell_call", "id": "sh_" + callID, "call_id": callID, "status": "completed",
		"environment": map[string]any{"type": "local"}, "action": a}
}

func patchCall(callID, op, path, diff string) map[string]any {
	o := map[string]any{"type": op, "path": path}
	if op != "delete_file" {
		o["diff"] = diff
	}
	return map[string]any{"type": "apply_patch_call", "id": "ap_" + callID, "call_id": callID, "status": "completed", "operation": o}
}

func message(text string) map[string]any {
	return map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
}

// env is a sandbox whose commands run for real, with a directory outside
// the workspace for escape checks.
type env struct {
	sb      *sandbox.Sandbox
	ws, out string
}

func (e *env) sh(t *testing.T, line string) string {
	t.Helper()
	res, err := e.sb.Exec(context.Background(), sandbox.Command{Shell: line})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s: %s", line, res.Stderr)
	return string(res.Stdout)
}

func (e *env) read(t *testing.T, p string) string {
	t.Helper()
	b, err := e.sb.ReadFile(context.Background(), p)
	require.NoError(t, err, p)
	return string(b)
}

func (e *env) exists(t *testing.T, p string) bool {
	t.Helper()
	_, err := e.sb.Stat(context.Background(), p)
	if err != nil {
		require.ErrorIs(t, err, sandbox.ErrNotFound, p)
		return false
	}
	return true
}

func newEnv(t *testing.T, sb *sandbox.Sandbox) *env {
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	e := &env{sb: sb}
	home := strings.TrimSpace(e.sh(t, `printf '%s' "$HOME"`))
	e.ws, e.out = home+"/workspace", home+"/outside"
	e.sh(t, "mkdir -p "+e.out)
	return e
}

// envs returns the providers the tests run on: memory (an interpreted
// shell over in-memory files) and local (real processes), where the
// host has what provider/local needs.
func envs(t *testing.T) map[string]*env {
	t.Helper()
	ctx := context.Background()
	m := map[string]*env{}
	sb, err := sandbox.NewClient(memory.New()).Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	m["memory"] = newEnv(t, sb)
	if runtime.GOOS == "linux" && os.Getenv("SANDBOX_TEST_NO_LOCAL") == "" {
		rt, err := local.New(local.WithRoot(t.TempDir()))
		require.NoError(t, err)
		t.Cleanup(func() { _ = rt.Close() })
		sb, err := sandbox.NewClient(rt).Create(ctx, sandbox.CreateOptions{})
		require.NoError(t, err)
		m["local"] = newEnv(t, sb)
	}
	return m
}

func toolsFor(t *testing.T, e *env, opts Options) *Tools {
	t.Helper()
	tools, err := New(e.sb, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tools.Close() })
	return tools
}

func oaiString(s string) param.Opt[string] { return param.NewOpt(s) }
