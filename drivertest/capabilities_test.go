package drivertest

import (
	"testing"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/stretchr/testify/assert"
)

// claims hides the memory runtime's optional interfaces but keeps its
// declared capabilities, which then contradict them.
type claims struct{ driver.Runtime }

func (c claims) Capabilities() driver.Capabilities {
	caps := c.Runtime.Capabilities()
	caps.PauseKeepsMemory, caps.AttachAcrossClients = true, true
	return caps
}

// TestCapabilityContradictions: the Capabilities subtest fails a driver
// that declares a fact about a feature it does not implement, and passes
// one whose declarations match its interfaces.
func TestCapabilityContradictions(t *testing.T) {
	assert.Empty(t, capabilityContradictions(memory.New()))
	got := capabilityContradictions(claims{memory.New()})
	assert.Len(t, got, 2, "%q", got)
	assert.Contains(t, got, "Capabilities declares PauseKeepsMemory but the Runtime is not a driver.Pauser")
	assert.Contains(t, got, "Capabilities declares AttachAcrossClients but the Runtime is not a driver.ProcessRuntime")
}
