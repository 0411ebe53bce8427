package anthropic_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// call is one tool_use block the fake model sends.
type call struct {
	ID    string
	Name  string
	Input any
}

// toolResult is one tool_result block the runner sent back.
type toolResult struct {
	Text    string
	IsError bool
}

// fakeAPI is a Messages API on loopback that answers as the real one does
// for a scripted model: each request gets the next turn of the script (a
// turn of tool_use blocks, stop_reason tool_use), then a final text turn
// (end_turn). It checks what the real API checks (method, path, x-api-key,
// the key, anthropic-version, a continuing thread naming the last reply) and records
// every tool_result the runner sends back, by tool_use id.
type fakeAPI struct {
	t      testing.TB
	key    string
	script [][]call

	mu       sync.Mutex
	turn     int
	lastID   string
	results  map[string]toolResult
	tools    []json.RawMessage // the tools of the first request
	problems []string
}

func newFakeAPI(t testing.TB, script ...[]call) (*fakeAPI, *httptest.Server) {
	f := &fakeAPI{t: t, key: "sk-ant-test-key", script: script, results: map[string]toolResult{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeAPI) fail(w http.ResponseWriter, status int, typ, msg string) {
	f.problems = append(f.problems, msg)
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q}}`, typ, msg)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		f.fail(w, http.StatusNotFound, "not_found_error", "no route "+r.Method+" "+r.URL.Path)
		return
	}
	// The SDK sends its key as a bearer token (option.WithAPIKey); the API
	// also takes it in x-api-key.
	if r.Header.Get("x-api-key") != f.key && r.Header.Get("authorization") != "Bearer "+f.key {
		f.fail(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		f.fail(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version header is required")
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools  []json.RawMessage `json:"tools"`
		Thread *struct {
			Type              string `json:"type"`
			PreviousMessageID string `json:"previous_message_id"`
		} `json:"thread"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		f.fail(w, http.StatusBadRequest, "invalid_request_error", "body is not JSON: "+err.Error())
		return
	}
	if req.Thread != nil && req.Thread.Type == "continue" && req.Thread.PreviousMessageID != f.lastID {
		f.fail(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("thread continues %q, the last reply was %q", req.Thread.PreviousMessageID, f.lastID))
		return
	}
	if f.turn == 0 {
		f.tools = req.Tools
	}
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "user" {
		var blocks []struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			IsError   bool            `json:"is_error"`
			Content   json.RawMessage `json:"content"`
		}
		if json.Unmarshal(req.Messages[n-1].Content, &blocks) == nil {
			for _, b := range blocks {
				if b.Type != "tool_result" {
					continue
				}
				f.results[b.ToolUseID] = toolResult{Text: resultText(b.Content), IsError: b.IsError}
			}
		}
	}
	f.turn++
	f.lastID = fmt.Sprintf("msg_%03d", f.turn)
	content := []map[string]any{}
	stop := "end_turn"
	if f.turn <= len(f.script) {
		stop = "tool_use"
		for _, c := range f.script[f.turn-1] {
			content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": c.Input})
		}
	} else {
		content = append(content, map[string]any{"type": "text", "text": "done"})
	}
	w.Header().Set("content-type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": f.lastID, "type": "message", "role": "assistant", "model": "claude-fake",
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 10},
	})
}

// resultText joins the text blocks of a tool_result's content (a string or
// a list of blocks).
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	var b strings.Builder
	for _, x := range blocks {
		b.WriteString(x.Text)
	}
	return b.String()
}

// result returns the tool_result sent for id, failing the test when there
// was none.
func (f *fakeAPI) result(t testing.TB, id string) toolResult {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.results[id]
	if !ok {
		t.Fatalf("no tool_result was sent for %s (problems: %v)", id, f.problems)
	}
	return r
}
