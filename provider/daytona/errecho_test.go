package daytona_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona"
)

// echoExec answers every execute request with a 400 whose message quotes
// the command it was sent, as an error that echoes its input does.
type echoExec struct{ next http.RoundTripper }

func (e echoExec) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/process/execute") {
		body, _ := io.ReadAll(req.Body)
		var in struct {
			Command string `json:"command"`
		}
		_ = json.Unmarshal(body, &in)
		msg, _ := json.Marshal(map[string]any{"statusCode": 400, "message": "failed to execute command: " + in.Command})
		return &http.Response{StatusCode: 400, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(bytes.NewReader(msg)), Request: req}, nil
	}
	return e.next.RoundTrip(req)
}

// An error whose message echoes the command shows no secret of its
// environment: not in the pieces its shell quoting makes of a value with
// a quote, and not cut in two by the message's length bound, wherever the
// other variables put it.
func TestExecErrorEchoingTheCommandHidesSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, daytona.WithTransport(echoExec{http.DefaultTransport}))
	sb := e.create(t)
	for _, secret := range []string{"p4ss'w0rd-7c1e9b2a44f0d6", "sk-live-7c1e9b2a44f0d6ab9e33c0f1d2a4b6c8"} {
		for pad := 0; pad < 320; pad += 7 {
			_, err := sb.Exec(ctxT(t), sandbox.Command{Shell: "true",
				Env: map[string]string{"A": strings.Repeat("x", pad)}, SecretEnv: map[string]string{"K": secret}})
			if err == nil {
				t.Fatal("no error from an execute answered 400")
			}
			for _, part := range []string{secret[:10], secret[len(secret)-10:], "w0rd-7c1e"} {
				if strings.Contains(err.Error(), part) {
					t.Fatalf("secret %q, pad %d: %q of it is in the error: %v", secret, pad, part, err)
				}
			}
		}
	}
}
