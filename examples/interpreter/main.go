// Command interpreter runs three Python cells in a stateful interpreter in
// a sandbox (package interp): the state of the first is used by the
// others, the second prints and returns a value, the last draws a
// matplotlib chart, which it writes to a PNG file on the host.
//
//	go run ./examples/interpreter                # the local provider, writes chart.png
//	go run ./examples/interpreter -o /tmp/c.png  # another file
//
// The sandbox needs python3 and, for the chart, matplotlib (Debian:
// apt-get install python3-matplotlib).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"log"
	"os"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/interp"
	_ "github.com/sandboxkit/sandbox/provider/local"
)

func main() {
	url := flag.String("url", "", "provider URL (empty: $SANDBOX_URL, then local://)")
	out := flag.String("o", "chart.png", "where to write the chart")
	flag.Parse()
	if err := run(*url, *out); err != nil {
		log.Fatal(err)
	}
}

var cells = []string{
	"import math\nsquares = [n * n for n in range(1, 11)]",
	"print('sum of squares:', sum(squares))\nmath.sqrt(squares[-1])",
	`import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
ax.plot(range(1, 11), squares, marker="o")
ax.set_title("n squared")
ax.set_xlabel("n")
plt.show()`,
}

func run(url, out string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client, err := sandbox.Open(ctx, url)
	if err != nil {
		return err
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"example": "interpreter"}})
	if err != nil {
		return err
	}
	defer func() {
		if err := sb.Destroy(context.WithoutCancel(ctx)); err != nil {
			log.Print(err)
		}
	}()

	k, err := interp.New(ctx, sb, interp.Options{})
	if err != nil {
		return err
	}
	defer k.Close(context.WithoutCancel(ctx))

	var chart []byte
	for i, code := range cells {
		ex, err := k.Run(ctx, code, interp.RunOptions{
			OnStdout: func(s string) { fmt.Print(s) },
			Timeout:  time.Minute,
		})
		if err != nil {
			return err
		}
		if ex.Error != nil {
			return fmt.Errorf("cell %d: %s", i+1, ex.Error)
		}
		if t := ex.Text(); t != "" {
			fmt.Printf("Out[%d]: %s\n", ex.Count, t)
		}
		for _, r := range ex.Results {
			if len(r.PNG) > 0 {
				chart = r.PNG
			}
		}
	}
	if chart == nil {
		return errors.New("the last cell drew no chart")
	}
	img, err := png.Decode(bytes.NewReader(chart))
	if err != nil {
		return fmt.Errorf("the chart is no PNG: %w", err)
	}
	if err := os.WriteFile(out, chart, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s: %d bytes, %dx%d\n", out, len(chart), img.Bounds().Dx(), img.Bounds().Dy())
	return nil
}
