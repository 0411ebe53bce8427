package testpar

import (
	"flag"
	"runtime"
	"strconv"
	"testing"
)

// An explicit -parallel is kept; without one, Widen sets perCPU per CPU.
func TestWiden(t *testing.T) {
	f := flag.Lookup("test.parallel")
	if f == nil {
		t.Fatal("no test.parallel flag")
	}
	old := f.Value.String()
	t.Cleanup(func() { _ = flag.Set("test.parallel", old) })
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	Widen(3)
	if explicit {
		if got := f.Value.String(); got != old {
			t.Fatalf("-parallel %s given, Widen changed it to %s", old, got)
		}
		return
	}
	if got, want := f.Value.String(), strconv.Itoa(3*runtime.GOMAXPROCS(0)); got != want {
		t.Fatalf("test.parallel = %s, want %s", got, want)
	}
}
