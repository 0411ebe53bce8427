//go:build !unix

package sigreset

// Unignore does nothing where signals are not inherited ignored.
func Unignore() {}
