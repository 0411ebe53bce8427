package conntrack

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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

// TestAwaitReset: awaitReset waits while the client's end of a
// connection is in the kernel's tables, and returns once the server's
// reset has reached it: a request the client writes then fails at once.
func TestAwaitReset(t *testing.T) {
	if _, ok := tcpEnds(); !ok {
		t.Skip("no /proc/net/tcp here: awaitReset cannot tell and returns at once")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	end, ok := clientEnd(server)
	if !ok || end.local != client.LocalAddr().(*net.TCPAddr).Port {
		t.Fatalf("clientEnd = %+v, %v; want the client's port %s", end, ok, client.LocalAddr())
	}
	if awaitReset([]portPair{end}, 100*time.Millisecond) {
		t.Fatal("awaitReset returned true while the client's end was open")
	}
	_ = server.(*net.TCPConn).SetLinger(0)
	_ = server.Close()
	if !awaitReset([]portPair{end}, 5*time.Second) {
		t.Fatal("the client's end is still in /proc/net/tcp 5s after the reset")
	}
	if _, err := io.WriteString(client, "GET / HTTP/1.1\r\n\r\n"); err == nil {
		t.Fatal("a write after awaitReset returned was accepted: the reset had not reached the client")
	}
}

func TestHexPort(t *testing.T) {
	for in, want := range map[string]int{"0100007F:1F90": 8080, "00000000000000000000000001000000:0050": 80} {
		if got, ok := hexPort(in); !ok || got != want {
			t.Errorf("hexPort(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	if _, ok := hexPort("0100007F"); ok {
		t.Error("hexPort accepted an address without a port")
	}
}
