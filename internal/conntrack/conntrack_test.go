package conntrack

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestResetIdleByTag(t *testing.T) {
	var tr Tracker
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer tr.Handling(r)()
		io.WriteString(w, "ok")
	}))
	tr.Serve(srv.Config, "api")
	srv.Start()
	defer srv.Close()
	c := srv.Client()
	defer c.CloseIdleConnections()
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close() // the connection is now idle, kept alive

	if n := tr.ResetIdle(func(tag string) bool { return tag == "envd" }); n != 0 {
		t.Fatalf("reset %d connections of another tag", n)
	}
	if n := tr.ResetIdle(func(tag string) bool { return tag == "api" }); n != 1 {
		t.Fatalf("reset %d idle connections, want 1", n)
	}
}
