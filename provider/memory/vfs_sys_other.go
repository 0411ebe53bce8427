//go:build !linux && !darwin

package memory

// statSys is nil where the platform's Stat_t differs from those of Linux
// and Darwin (or there is none, as on Windows): tools that compare file
// identities through it then see none.
func (s *statInfo) statSys() any { return nil }
