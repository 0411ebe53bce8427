package interp_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/interp"
	_ "github.com/sandboxkit/sandbox/provider/local" // registers local://
)

// Cells share state; the last expression is the value; an exception is
// data, not a Go error. The sandbox is a local one (it needs python3);
// the same code runs on "e2b://" and "daytona://".
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := sandbox.Open(ctx, "local://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(context.WithoutCancel(ctx))

	k, err := interp.New(ctx, sb, interp.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer k.Close(context.WithoutCancel(ctx))

	for _, code := range []string{
		"import math\nr = 2",
		"print('area of a circle of radius', r)\nround(math.pi * r**2, 3)",
		"r / 0",
	} {
		ex, err := k.Run(ctx, code, interp.RunOptions{Timeout: time.Minute})
		if err != nil {
			log.Fatal(err) // the kernel could not run the cell
		}
		fmt.Print(ex.Stdout)
		if t := ex.Text(); t != "" {
			fmt.Printf("Out[%d]: %s\n", ex.Count, t)
		}
		if ex.Error != nil {
			fmt.Println(ex.Error)
		}
	}
	// Output:
	// area of a circle of radius 2
	// Out[2]: 12.566
	// ZeroDivisionError: division by zero
}
