//go:build linux

package local_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/local"
)

// ExampleRuntime_Expose starts a web server in a sandbox that has no
// network and fetches a file from it on the host: Expose returns a URL on
// 127.0.0.1 that the sandbox's agent relays into the sandbox.
func ExampleRuntime_Expose() {
	root, err := os.MkdirTemp("", "sandboxes-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	rt, err := local.New(local.WithRoot(root))
	if err != nil {
		log.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// With namespaces (L3 and up) the sandbox can be cut off the network:
	// the endpoint still reaches it.
	level, _ := rt.Level()
	sb, err := c.Create(ctx, sandbox.CreateOptions{NoNetwork: level >= local.L3})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	if err := sb.WriteFile(ctx, "www/hello.txt", []byte("hello from the sandbox\n")); err != nil {
		log.Fatal(err)
	}
	srv, err := sb.Start(ctx, sandbox.Command{Shell: "exec python3 -m http.server 8765 --bind 127.0.0.1 --directory www"})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	if err := srv.WaitForPort(ctx, 8765); err != nil { // fails at once if the server dies
		log.Fatal(err)
	}
	ep, err := sb.Expose(ctx, 8765, sandbox.ExposeOptions{})
	if err != nil {
		log.Fatal(err)
	}
	req, err := ep.NewRequest(ctx, http.MethodGet, "/hello.txt", nil)
	if err != nil {
		log.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(string(body))
	// Output: hello from the sandbox
}
