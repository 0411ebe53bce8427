//go:build linux

package local_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/local"
)

// ExampleWithEgressHosts lets a sandbox reach one name and nothing else:
// at L3 and L4 it runs behind an egress proxy on the host that enforces
// the allow-list. Here the name is served on this machine's loopback, so
// the policy names 127.0.0.1 too (the proxy refuses loopback otherwise).
func ExampleWithEgressHosts() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from the allowed API")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	root, err := os.MkdirTemp("", "sandboxes-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	rt, err := local.New(local.WithRoot(root), local.WithEgressHosts(map[string][]netip.Addr{
		"api.example.test": {netip.MustParseAddr("127.0.0.1")},
	}))
	if err != nil {
		log.Fatal(err)
	}
	client := sandbox.NewClient(rt)
	defer client.Close()
	if !client.Capabilities().NetworkPolicy.AllowDomains {
		fmt.Println("no domain allow-lists on this host:", client.Capabilities().NetworkPolicy.Note)
		return
	}
	ctx := context.Background()
	sb, err := client.Create(ctx, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{
		Allow: []string{"api.example.test", "127.0.0.1"},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)
	res, err := sb.Exec(ctx, sandbox.Command{
		Shell:   "curl -sS http://api.example.test:" + port + "/ && echo && curl -sS http://example.org/",
		Timeout: 30 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.TrimSpace(string(res.Stdout)))
	fmt.Println(sb.Info().Detail["egress"])
}
