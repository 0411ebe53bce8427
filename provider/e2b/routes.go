package e2b

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/sandboxkit/sandbox/provider/e2b/internal/api"
)

// E2B's SDKs create and connect through POST /v2/sandboxes and POST
// /v2/sandboxes/{id}/connect from version 2.51 (2026-09); the routes
// before them, POST /sandboxes and POST /sandboxes/{id}/connect, are
// deprecated but still served. The adapter speaks the v2 routes and falls
// back to the older ones only on a server that lacks them (an E2B API
// from before, or a self-hosted engine that speaks the older protocol).
// What a server has is learned from its first answer and kept for the
// Runtime's life, one state per route, so a server without them costs one
// extra round trip per route, once.
const (
	routeUnknown int32 = iota // not asked yet
	routeV2                   // the server answered the v2 route
	routeLegacy               // the server lacks the v2 route
)

// routes is what the adapter learned of the server's routes.
type routes struct {
	create, connect atomic.Int32
}

// routeMissing reports whether status and body are a server's answer for
// a route it does not have, as opposed to the route's own refusal of the
// request. E2B's API answers a path it lacks with 404 and a method a path
// lacks with 400, both from its request validator ("validation error: no
// matching operation was found", "... method not allowed"); other
// servers answer 405, 501, or a 404 that is not E2B's error body (a
// router's "404 page not found", an empty body, {"detail":"Not Found"}).
// A 404 or 400 carrying E2B's error body with any other message (a
// template or sandbox not found, a timeout refused) is the route's own
// answer, never a reason to fall back.
func routeMissing(status int, body []byte) bool {
	switch status {
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return true
	case http.StatusNotFound, http.StatusBadRequest:
	default:
		return false
	}
	var e api.Error
	if err := json.Unmarshal(body, &e); err != nil || e.Message == "" {
		return status == http.StatusNotFound
	}
	m := strings.ToLower(e.Message)
	return strings.Contains(m, "no matching operation") || strings.Contains(m, "method not allowed")
}

// versioned runs a request on the v2 route (v2) unless the server is known
// to lack it, and on the older route (legacy) when the v2 answer says the
// route is missing, remembering which the server has in state. It returns
// what call returns for the route used.
func (r *Runtime) versioned(ctx context.Context, op string, idempotent bool, state *atomic.Int32, v2, legacy func(context.Context) (*http.Response, error)) (int, []byte, http.Header, error) {
	if state.Load() != routeLegacy {
		status, data, hdr, err := r.call(ctx, op, idempotent, v2)
		if err != nil {
			return status, data, hdr, err
		}
		known := state.Load() == routeV2
		if known || !routeMissing(status, data) {
			if status >= 200 && status < 300 {
				state.CompareAndSwap(routeUnknown, routeV2)
			}
			return status, data, hdr, nil
		}
		state.CompareAndSwap(routeUnknown, routeLegacy)
	}
	return r.call(ctx, op, idempotent, legacy)
}
