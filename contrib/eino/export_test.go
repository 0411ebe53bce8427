package eino

// Entries returns how many sessions' file backends b holds.
func Entries(b *Backend) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.entries)
}
