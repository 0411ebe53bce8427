package sandbox_test

import (
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/stretchr/testify/assert"
)

// bareRuntime hides every optional interface of the memory runtime but
// declares the facts that only belong with them.
type bareRuntime struct{ driver.Runtime }

func (b bareRuntime) Capabilities() driver.Capabilities {
	c := b.Runtime.Capabilities()
	c.PauseKeepsMemory, c.AttachAcrossClients = true, true
	c.WatchLatency = time.Second
	return c
}

// Capabilities.Pause, Processes and Ports follow the interfaces, and the
// facts about those features hold only with them, so a Client never shows
// a capability its provider's methods contradict.
func TestCapabilitiesDerivedFromInterfaces(t *testing.T) {
	t.Parallel()
	caps := sandbox.NewClient(bareRuntime{memory.New()}).Capabilities()
	assert.False(t, caps.Pause, "Pause without a driver.Pauser")
	assert.False(t, caps.Processes, "Processes without a driver.ProcessRuntime")
	assert.False(t, caps.Ports, "Ports without a driver.PortExposer")
	assert.False(t, caps.Terminals, "Terminals without a driver.TerminalRuntime")
	assert.False(t, caps.PauseKeepsMemory, "PauseKeepsMemory without a driver.Pauser")
	assert.False(t, caps.AttachAcrossClients, "AttachAcrossClients without a driver.ProcessRuntime")
	assert.False(t, caps.Watch, "Watch without a driver.Watcher")
	assert.Zero(t, caps.WatchLatency, "WatchLatency without a driver.Watcher")
	assert.False(t, caps.ProcessList, "ProcessList without a driver.ProcessLister")

	caps = sandbox.NewClient(memory.New()).Capabilities()
	assert.True(t, caps.Pause, "Pause of a driver.Pauser")
	assert.True(t, caps.Processes, "Processes of a driver.ProcessRuntime")
	assert.True(t, caps.Terminals, "Terminals of a driver.TerminalRuntime")
	assert.True(t, caps.PauseKeepsMemory, "memory declares PauseKeepsMemory and is a Pauser")
	assert.True(t, caps.Watch, "Watch of a driver.Watcher")
	assert.True(t, caps.ProcessList, "ProcessList of a driver.ProcessLister")
}
