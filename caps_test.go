package sandbox_test

import (
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// bareRuntime hides every optional interface of the memory runtime but
// claims pause and processes in its Capabilities.
type bareRuntime struct{ driver.Runtime }

func (b bareRuntime) Capabilities() driver.Capabilities {
	c := b.Runtime.Capabilities()
	c.Pause, c.Processes = true, true
	return c
}

// modestRuntime implements the optional interfaces but declares none.
type modestRuntime struct{ *memory.Runtime }

func (m modestRuntime) Capabilities() driver.Capabilities {
	c := m.Runtime.Capabilities()
	c.Pause, c.Processes = false, false
	return c
}

// Capabilities.Pause and Processes follow the interfaces, not what a
// driver declares, so they cannot drift from what Pause and Start do.
func TestCapabilitiesDerivedFromInterfaces(t *testing.T) {
	c := sandbox.NewClient(bareRuntime{memory.New()})
	if caps := c.Capabilities(); caps.Pause || caps.Processes {
		t.Errorf("a runtime without Pauser and ProcessRuntime: Pause %v Processes %v, want false", caps.Pause, caps.Processes)
	}
	c = sandbox.NewClient(modestRuntime{memory.New()})
	if caps := c.Capabilities(); !caps.Pause || !caps.Processes {
		t.Errorf("a runtime with Pauser and ProcessRuntime: Pause %v Processes %v, want true", caps.Pause, caps.Processes)
	}
}
