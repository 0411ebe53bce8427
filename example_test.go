package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox"
	_ "github.com/sandboxkit/sandbox/provider/memory" // registers memory://
)

// The whole job: open a provider, create a sandbox, put code in it, run it and
// read what it wrote. The examples use memory://, the in-memory fake, so their
// output is checked by go test; "" (or "local://") runs the same code in a
// real sandbox on this machine, and "e2b://" or "daytona://" in the cloud.
func Example() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	sb, err := client.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"session": "42"}})
	if err != nil {
		log.Fatal(err)
	}
	// Defer the Destroy only after Create succeeded: on error sb is nil.
	defer sb.Destroy(ctx)

	if err := sb.WriteFile(ctx, "job.sh", []byte("echo working; echo done > result.txt\n")); err != nil {
		log.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"sh", "job.sh"}, Timeout: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	out, err := sb.ReadFile(ctx, "result.txt")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d, stdout %q, result.txt %q\n", res.ExitCode, res.Stdout, out)
	// Output: exit 0, stdout "working\n", result.txt "done\n"
}

// Open picks the provider from the URL's scheme. The provider's package must
// be imported (for its side effect of registering the scheme); an empty URL
// means $SANDBOX_URL, then local://.
func ExampleOpen() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	fmt.Println(client.Provider())

	_, err = sandbox.Open(ctx, "nosuch://")
	fmt.Println(sandbox.CodeOf(err))
	// Output:
	// memory
	// InvalidArgument
}

// Create returns a handle that owns its sandbox: its Destroy ends it. The
// labels find it again later, from this process or another one.
func ExampleClient_Create() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	sb, err := client.Create(ctx, sandbox.CreateOptions{
		Labels:  map[string]string{"user": "ada"},
		Env:     map[string]string{"GREETING": "hello"},
		Timeout: 30 * time.Minute, // the lease; SetTimeout extends it
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)

	for info, err := range client.List(ctx, sandbox.ListOptions{Labels: map[string]string{"user": "ada"}}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(info.ID == sb.ID(), info.State, info.Labels["user"], sb.Owned())
	}
	// Output: true running ada true
}

// List yields the sandboxes that match every label (and, with States, one of
// the states), fetching pages as the loop goes: a process can find the
// sandboxes an earlier one left, for example to clean them up.
func ExampleClient_List() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	for _, user := range []string{"ada", "ada", "bob"} {
		if _, err := client.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"user": user}}); err != nil {
			log.Fatal(err)
		}
	}

	n := 0
	for info, err := range client.List(ctx, sandbox.ListOptions{
		Labels: map[string]string{"user": "ada"},
		States: []sandbox.State{sandbox.StateRunning},
	}) {
		if err != nil {
			log.Fatal(err) // the sequence ends after an error
		}
		n++
		if err := client.Destroy(ctx, info.ID); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("destroyed", n, "of ada's sandboxes")
	for info, err := range client.List(ctx, sandbox.ListOptions{}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("left:", info.Labels["user"])
	}
	// Output:
	// destroyed 2 of ada's sandboxes
	// left: bob
}

// Exec runs an argv (no shell) or a shell line and returns its output, capped
// per stream. A non-zero exit is a Result, not an error; an error means the
// command's outcome is not known or it could not run.
func ExampleSandbox_Exec() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)

	res, err := sb.Exec(ctx, sandbox.Command{
		Shell:     `echo "token=$TOKEN"; echo oops >&2; exit 3`,
		SecretEnv: map[string]string{"TOKEN": "s3cr3t"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d success %v\nstdout %q\nstderr %q\n", res.ExitCode, res.Success(), res.Stdout, res.Stderr)
	// Output:
	// exit 3 success false
	// stdout "token=[REDACTED]\n"
	// stderr "oops\n"
}

// WriteFile and ReadFile move whole files; relative paths are under the
// sandbox's home. Writes are atomic: an interrupted write leaves the old file
// or nothing. Upload and Download stream large ones.
func ExampleSandbox_WriteFile() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)

	if err := sb.MkdirAll(ctx, "data"); err != nil {
		log.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "data/in.csv", []byte("a,b\n1,2\n")); err != nil {
		log.Fatal(err)
	}
	b, err := sb.ReadFile(ctx, "data/in.csv")
	if err != nil {
		log.Fatal(err)
	}
	info, err := sb.Stat(ctx, "data/in.csv")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q %d bytes\n", b, info.Size)
	// Output: "a,b\n1,2\n" 8 bytes
}

// ReadFile reads a whole file, up to the Client's read cap
// (WithMaxReadFile); ReadFileLimit sets a cap for one call, so an
// unexpectedly large file is an error matching ErrLimit rather than a
// large allocation. Download streams a file of any size.
func ExampleSandbox_ReadFile() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)

	if _, err := sb.Exec(ctx, sandbox.Command{Shell: "echo '{\"rows\": 3}' > out.json"}); err != nil {
		log.Fatal(err)
	}
	b, err := sb.ReadFile(ctx, "out.json")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", b)

	_, err = sb.ReadFileLimit(ctx, "out.json", 4)
	fmt.Println(errors.Is(err, sandbox.ErrLimit), sandbox.CodeOf(err))
	// Output:
	// {"rows": 3}
	// true ResourceExhausted
}

// Upload streams an io.Reader into a file (creating its parents) and
// Download streams a file out, so a large file never sits whole in memory.
// Both are binary-safe.
func ExampleSandbox_Upload() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)

	// Any io.Reader: an *os.File, an HTTP body, a pipe.
	if err := sb.Upload(ctx, "data/big.csv", strings.NewReader("id,v\n1,2\n2,3\n")); err != nil {
		log.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"wc", "-l", "data/big.csv"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", res.Stdout)
	// Output: 3 data/big.csv
}

// Download returns the file as a stream; close it when done. Copy it to an
// *os.File (or any io.Writer) to keep it.
func ExampleSandbox_Download() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)
	if _, err := sb.Exec(ctx, sandbox.Command{Shell: "mkdir -p out && printf 'report\n' > out/report.txt"}); err != nil {
		log.Fatal(err)
	}

	rc, err := sb.Download(ctx, "out/report.txt")
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	var dst strings.Builder // an *os.File in a real program
	n, err := io.Copy(&dst, rc)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d bytes: %q\n", n, dst.String())

	_, err = sb.Download(ctx, "out/missing.txt")
	fmt.Println(errors.Is(err, fs.ErrNotExist))
	// Output:
	// 7 bytes: "report\n"
	// true
}

// Start runs a command in the background; Wait returns its Result. Every wait
// is bounded by its ctx.
func ExampleSandbox_Start() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)

	p, err := sb.Start(ctx, sandbox.Command{Shell: "sleep 0.1; echo finished"})
	if err != nil {
		log.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := p.Wait(waitCtx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d: %s", res.ExitCode, res.Stdout)
	// Output: exit 0: finished
}

// Pause stops a sandbox from running (and, on most providers, from being
// billed for compute) while keeping its files; Resume brings it back.
// Whether memory and processes survive depends on the provider
// (Capabilities.PauseKeepsMemory). A command on a paused sandbox fails
// with an error matching ErrPaused.
func ExampleSandbox_Pause() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)
	if err := sb.WriteFile(ctx, "notes.txt", []byte("kept\n")); err != nil {
		log.Fatal(err)
	}

	if err := sb.Pause(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(sb.Info().State)
	_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	fmt.Println(errors.Is(err, sandbox.ErrPaused))

	if err := sb.Resume(ctx); err != nil {
		log.Fatal(err)
	}
	b, err := sb.ReadFile(ctx, "notes.txt")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s", sb.Info().State, b)
	// Output:
	// paused
	// true
	// running kept
}

// Expose makes a port a server in the sandbox listens on reachable from the
// host, and returns its URL and the headers each request must carry (the
// endpoint is private unless the provider made it public). It needs a
// provider with ports (Capabilities.Ports: local, e2b, daytona, docker);
// memory:// has none, so this example is compiled but not run by go test.
func ExampleSandbox_Expose() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := sandbox.Open(ctx, "local://") // with _ "github.com/sandboxkit/sandbox/provider/local" imported
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	if !client.Capabilities().Ports {
		log.Fatalf("%s cannot expose ports", client.Provider())
	}
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)
	if err := sb.WriteFile(ctx, "www/hello.txt", []byte("hello\n")); err != nil {
		log.Fatal(err)
	}
	srv, err := sb.Start(ctx, sandbox.Command{Shell: "exec python3 -m http.server 8000 --bind 0.0.0.0 --directory www"})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	if err := sb.WaitForPort(ctx, 8000); err != nil {
		log.Fatal(err)
	}

	ep, err := sb.Expose(ctx, 8000, sandbox.ExposeOptions{})
	if err != nil {
		log.Fatal(err)
	}
	req, err := ep.NewRequest(ctx, http.MethodGet, "/hello.txt", nil) // carries ep.Header
	if err != nil {
		log.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", body)
}

// GetOrCreate returns the sandbox with these labels, creating it the first
// time: callers that race for one key share one sandbox.
func ExampleClient_GetOrCreate() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	opts := sandbox.CreateOptions{Labels: map[string]string{"session": "chat-7"}}
	first, created, err := client.GetOrCreate(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first call created:", created)
	again, created, err := client.GetOrCreate(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("second call created:", created, "same sandbox:", again.ID() == first.ID())
	if err := client.Destroy(ctx, first.ID()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// first call created: true
	// second call created: false same sandbox: true
}

// Every error carries a Code; sentinels match with errors.Is, and a missing
// file also matches fs.ErrNotExist. *sandbox.Error says which provider call
// failed (ReadFile is a download), on which sandbox and path.
func ExampleCodeOf() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)

	_, err = sb.ReadFile(ctx, "missing.txt")
	fmt.Println(sandbox.CodeOf(err), errors.Is(err, sandbox.ErrNotFound), errors.Is(err, fs.ErrNotExist))
	var serr *sandbox.Error
	if errors.As(err, &serr) {
		fmt.Println(serr.Op, serr.Path)
	}

	_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"echo", "hi"}, Timeout: -time.Second})
	fmt.Println(sandbox.CodeOf(err))

	_, err = client.Attach(ctx, "no-such-sandbox")
	fmt.Println(sandbox.CodeOf(err))
	// Output:
	// NotFound true true
	// download /home/user/missing.txt
	// InvalidArgument
	// NotFound
}

// A sandbox that may reach PyPI and nothing else. On memory:// the policy
// is recorded and reported, not enforced (Capabilities.NetworkPolicy
// .NotEnforced); a provider that cannot enforce a policy refuses it at
// Create with FailedPrecondition.
func ExampleNetworkPolicy() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	sb, err := client.Create(ctx, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{
		Allow: []string{"PyPI.org", "*.pythonhosted.org", "files.example.com"},
		Deny:  []string{"files.example.com"}, // deny wins: it leaves the allow-list
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)
	n := sb.Info().Network
	fmt.Println(n.Mode, n.Allow, n.Deny)
	fmt.Println("enforced:", !client.Capabilities().NetworkPolicy.NotEnforced)

	// The owner may change it while the sandbox runs.
	if err := sb.SetNetwork(ctx, sandbox.NetworkPolicy{Mode: sandbox.NetworkDenyAll}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(sb.Info().Network.Mode)

	_, err = client.Create(ctx, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{"bad host"}}})
	fmt.Println(errors.Is(err, sandbox.ErrInvalidArgument))
	// Output:
	// allow-list [*.pythonhosted.org pypi.org] []
	// enforced: false
	// deny-all
	// true
}

// Run is the main job in one call: put the inputs next to the command, run
// it, and read back what it wrote. A command that fails is an
// *sandbox.ExitError whose message ends with the last line of its stderr.
// On a provider with Python the command would be
// Args: []string{"python3", "stats.py"}; memory:// runs a shell script.
func ExampleSandbox_Run() {
	a, b := []byte("id,v\n1,2\n2,3\n"), []byte("id,v\n3,4\n")
	script := []byte(`printf '{"rows": %d}\n' $(( $(cat a.csv b.csv | wc -l) - 2 )) > stats.json`)

	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "stats.sh"}}, sandbox.RunOptions{
		Files:   []sandbox.File{{Path: "a.csv", Data: a}, {Path: "b.csv", Data: b}, {Path: "stats.sh", Data: script}},
		Outputs: []string{"stats.json"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", res.Files["stats.json"])
	// Output: {"rows": 3}
}

// Output returns a command's stdout; a command that fails is an error
// carrying its exit status and the tail of its stderr.
func ExampleSandbox_Output() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)

	out, err := sb.Output(ctx, sandbox.Command{Shell: "echo 42"})
	fmt.Printf("%q %v\n", out, err)

	_, err = sb.Output(ctx, sandbox.Command{Shell: "echo 'no such table: users' >&2; exit 1"})
	var ee *sandbox.ExitError
	if errors.As(err, &ee) {
		fmt.Println(ee.ExitCode, err)
	}
	// Output:
	// "42\n" <nil>
	// 1 exit status 1: no such table: users
}

// A brokered secret: the sandbox sees a placeholder in its env, the
// enforcement point puts the real key on requests to the API's host, and
// Info says where it goes, never what it is. memory records it without
// enforcing anything.
func ExampleBrokeredSecret() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	sb, err := client.Create(ctx, sandbox.CreateOptions{
		Network: &sandbox.NetworkPolicy{Allow: []string{"pypi.org", "api.example.com"}},
		BrokeredSecrets: []sandbox.BrokeredSecret{{
			Value:  "sk-example-not-a-real-key",
			Hosts:  []string{"api.example.com"},
			Format: "Bearer %s",
			Env:    "EXAMPLE_API_KEY",
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)
	b := sb.Info().BrokeredSecrets[0]
	fmt.Println(b.Header, b.Hosts, b.Env)

	res, err := sb.Exec(ctx, sandbox.Command{Shell: "echo $EXAMPLE_API_KEY; echo sk-example-not-a-real-key"})
	if err != nil {
		log.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	fmt.Println(lines[0] == b.Placeholder, strings.HasPrefix(lines[0], "SBX_BROKERED_EXAMPLE_API_KEY_"))
	fmt.Println(lines[1])

	// A secret for a host the policy does not let through is a mistake.
	_, err = client.Create(ctx, sandbox.CreateOptions{
		Network:         &sandbox.NetworkPolicy{Allow: []string{"pypi.org"}},
		BrokeredSecrets: []sandbox.BrokeredSecret{{Value: "k", Hosts: []string{"api.example.com"}}},
	})
	fmt.Println(errors.Is(err, sandbox.ErrInvalidArgument))
	// Output:
	// Authorization [api.example.com] EXAMPLE_API_KEY
	// true true
	// [REDACTED]
	// true
}

// A program on a terminal: typed input, the size it sees, and its exit
// status. (The memory provider's terminal is an emulation; on local://
// the same code runs a real pseudo-terminal.)
func ExampleSandbox_StartTerminal() {
	ctx := context.Background()
	c, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)

	t, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Rows: 40, Cols: 120,
		Args: []string{"sh", "-c", `read name; echo "hello, $name"; stty size; exit 3`}})
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	if _, err := io.WriteString(t, "gopher\r"); err != nil {
		log.Fatal(err)
	}
	st, err := t.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	out, _ := io.ReadAll(t) // the echo of the input, then the output
	fmt.Printf("%q\nexit status %d\n", out, st.ExitCode)
	// Output:
	// "gopher\r\nhello, gopher\r\n40 120\r\n"
	// exit status 3
}
