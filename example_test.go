package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
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
