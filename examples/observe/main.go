// Command observe sends the spans of a sandbox's calls to stdout with the
// OpenTelemetry SDK and its stdout exporter: the README's "Observe"
// setup. The core module depends on the OpenTelemetry API only; the SDK
// and the exporter are this program's.
//
//	go run .                   # the local provider
//	go run . -url memory://    # the in-memory fake
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/sandboxkit/sandbox"
	_ "github.com/sandboxkit/sandbox/provider/local"
	_ "github.com/sandboxkit/sandbox/provider/memory"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func main() {
	url := flag.String("url", "", "provider URL (empty: $SANDBOX_URL, then local://)")
	flag.Parse()
	if err := run(*url, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run creates a sandbox, runs a command in it and destroys it, with every
// call's span written to w as JSON.
func run(url string, w io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The setup: an SDK tracer provider exporting to w, made global, so
	// the library's spans need no code of their own.
	exp, err := stdouttrace.New(stdouttrace.WithWriter(w), stdouttrace.WithPrettyPrint())
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	defer tp.Shutdown(context.Background()) // flushes the spans
	otel.SetTracerProvider(tp)

	client, err := sandbox.Open(ctx, url)
	if err != nil {
		return err
	}
	defer client.Close()
	ctx, span := tp.Tracer("observe").Start(ctx, "job") // the program's own span: the calls are its children
	defer span.End()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		return err
	}
	defer sb.Destroy(context.WithoutCancel(ctx))
	res, err := sb.Exec(ctx, sandbox.Command{Shell: "echo hello from the sandbox"})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "exit %d: %s", res.ExitCode, res.Stdout)
	return nil
}
