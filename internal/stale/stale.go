// Package stale classifies failures caused by a transport that was already
// dead before a request was sent (a closed connection, a closed event loop,
// an expired tunnel). Such a request cannot have been admitted by the
// provider, so the caller may reset its transport and retry exactly once;
// this mirrors database/sql/driver.ErrBadConn.
package stale

import (
	"errors"
	"net"
	"strings"
	"syscall"
)

// ErrStale marks an error as a stale transport. Drivers wrap it with %w
// only when the provider cannot have acted on the request.
var ErrStale = errors.New("stale transport: the request was not sent")

// markers are lower-case fragments of error text that reliably mean a
// transport was closed before use. Each was seen in production SDK traces.
var markers = []string{
	"use of closed network connection",
	"transport closed",
	"handler is closed",
	"event loop is closed",
	"http: server closed idle connection",
	"client connection is closing",
}

// resultGroups are groups of fragments that must all appear in a backend's
// error text (never in the user's command output) for a failed result to
// count as produced by a stale transport.
var resultGroups = [][]string{
	{"tcptransport closed", "handler is closed"},
	{"unable to perform operation on", "handler is closed"},
	{"transport closed", "connection"},
}

// Is reports whether err, or any error in its chain, says the transport was
// dead before the request was sent: ErrStale itself, net.ErrClosed, a
// refused connection (nothing was listening, so nothing ran) or a known
// closed-transport message.
func Is(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrStale) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, m := range markers {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// Result reports whether a failed result's backend error text (a message
// produced by the provider or its SDK, not by the user's command) matches
// a stale-transport signature. A zero exit code is never stale.
func Result(exitCode int, backendText string) bool {
	if exitCode == 0 || backendText == "" {
		return false
	}
	t := strings.ToLower(backendText)
	for _, g := range resultGroups {
		all := true
		for _, m := range g {
			if !strings.Contains(t, m) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
