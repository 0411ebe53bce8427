//go:build !unix

package main

// watchResize does nothing where there is no SIGWINCH (Windows): the
// sandbox's terminal keeps the size it started with.
func watchResize(func()) (stop func()) { return func() {} }
