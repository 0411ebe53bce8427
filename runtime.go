package sandbox

import "github.com/sandboxkit/sandbox/driver"

// The value types a user reads back from a Client or Sandbox are those of
// the driver contract (package driver), so the portable layer hands them
// on without copying.

// Info describes a sandbox: its id, provider, template, labels, state,
// lease end, home directory and achieved isolation.
type Info = driver.Info

// State is the lifecycle state of a sandbox.
type State = driver.State

// The states. Providers map their own states onto these.
const (
	StateStarting = driver.StateStarting
	StateRunning  = driver.StateRunning
	StatePaused   = driver.StatePaused // paused, stopped or archived: Resume brings it back
	StateError    = driver.StateError
)

// FileInfo describes a file in a sandbox. Its FS method adapts it to fs.FileInfo.
type FileInfo = driver.FileInfo

// Capabilities are facts about a provider that method presence cannot show.
type Capabilities = driver.Capabilities

// Resources requests compute for a sandbox. Zero fields take the provider's
// defaults; units follow the field names.
type Resources = driver.Resources
