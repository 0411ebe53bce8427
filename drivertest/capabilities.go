package drivertest

import (
	"context"
	"reflect"
	"testing"

	"github.com/sandboxkit/sandbox/driver"
)

// testCapabilities: Capabilities is constant and declares no fact about an
// optional feature the Runtime does not implement (whether it has the
// feature is the type assertion's to say; see driver.Capabilities).
func testCapabilities(_ context.Context, t *testing.T, e *env) {
	for _, msg := range capabilityContradictions(e.rt) {
		t.Error(msg)
	}
}

// capabilityContradictions lists what rt's Capabilities declares that its
// interfaces contradict, or that changes between calls.
func capabilityContradictions(rt driver.Runtime) []string {
	var out []string
	caps := rt.Capabilities()
	if !reflect.DeepEqual(caps, rt.Capabilities()) {
		out = append(out, "Capabilities changed between two calls; it must be constant")
	}
	if _, ok := rt.(driver.Pauser); caps.PauseKeepsMemory && !ok {
		out = append(out, "Capabilities declares PauseKeepsMemory but the Runtime is not a driver.Pauser")
	}
	if _, ok := rt.(driver.ProcessRuntime); caps.AttachAcrossClients && !ok {
		out = append(out, "Capabilities declares AttachAcrossClients but the Runtime is not a driver.ProcessRuntime")
	}
	return out
}
