package docker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"go.opentelemetry.io/otel/trace/noop"
)

// removeContainer against an engine that refuses the first removals the
// way Docker does: a root filesystem still mounted by the engine's own
// clean-up (500, the container left dead) and a removal already in
// progress (409) are tried again until the container is gone; any other
// refusal is returned at once.
func TestRemoveContainerRetries(t *testing.T) {
	t.Parallel()
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	type reply struct {
		code int
		msg  string
	}
	busy := reply{500, `container ` + id + `: driver "overlay2" failed to remove root filesystem: unlinkat /var/lib/docker/overlay2/x/merged: directory not empty`}
	inProgress := reply{409, `removal of container ` + id + ` is already in progress`}
	gone := reply{404, "No such container: " + id}
	other := reply{500, "something else went wrong"}
	for _, tc := range []struct {
		name    string
		replies []reply
		wantErr string
		calls   int32
	}{
		{"root filesystem busy twice", []reply{busy, busy, {204, ""}}, "", 3},
		{"in progress, then gone", []reply{inProgress, inProgress, gone}, "", 3},
		{"busy, then gone", []reply{busy, gone}, "", 2},
		{"other error", []reply{other, {204, ""}}, "something else", 1},
		{"busy every time", nil, "failed to remove root filesystem", removeAttempts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				if req.Method != http.MethodDelete || !strings.HasSuffix(req.URL.Path, "/containers/"+id) {
					http.Error(w, "unexpected "+req.Method+" "+req.URL.Path, http.StatusBadRequest)
					return
				}
				if req.URL.Query().Get("force") != "1" || req.URL.Query().Get("v") != "1" {
					http.Error(w, "want force=1 and v=1: "+req.URL.RawQuery, http.StatusBadRequest)
					return
				}
				n := int(calls.Add(1)) - 1
				rp := busy
				if n < len(tc.replies) {
					rp = tc.replies[n]
				}
				if rp.code == 204 {
					w.WriteHeader(204)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(rp.code)
				_, _ = w.Write([]byte(`{"message":` + strconv.Quote(rp.msg) + `}`))
			}))
			defer srv.Close()
			cli, err := client.New(client.WithHost("tcp://"+srv.Listener.Addr().String()), client.WithVersion("1.41"), client.WithTraceProvider(noop.NewTracerProvider()))
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			// The waits between tries a fiftieth of the real ones: the
			// tries and their count are what is checked.
			r := &Runtime{cli: cli, removeDelay: time.Millisecond}
			err = r.removeContainer(context.Background(), id)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("removeContainer = %v, want error containing %q", err, tc.wantErr)
			}
			if got := calls.Load(); got != tc.calls {
				t.Errorf("%d removals sent, want %d", got, tc.calls)
			}
		})
	}
}
